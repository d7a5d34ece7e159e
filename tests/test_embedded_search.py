"""Search on the embedded store, in-process: dense hits and BM25 hits from the collection's own vectors rank as
Qdrant's own queries rank them (same hits, same scores, same fused order), a later ingest is searched, and a server's
client is never read into memory."""

from __future__ import annotations

import pytest
from qdrant_client import QdrantClient
from qdrant_client.http import models as rest

from dagrag import Settings
from dagrag.agents.embedded_search import EmbeddedSearch, is_embedded, read_index, top_dense, top_sparse
from dagrag.core.sparse import query_vector
from dagrag.ingest import ingest_nodes, make_node
from dagrag.store import SPARSE_VECTOR_NAME, open_qdrant

from .conftest import sample_records

DENSE = "text-dense"
LIMIT = 12


@pytest.fixture(scope="module")
def collection(tmp_path_factory, embed_model) -> Settings:
    settings = Settings(qdrant_path=tmp_path_factory.mktemp("embedded-hybrid"), collection="eh")
    nodes = [make_node(p["text"], p["title"]) for r in sample_records()[:12] for p in r["paragraphs"]]
    ingest_nodes(settings, nodes, embed_model)
    return settings


def qdrant_hybrid(client, collection: str, dense: list[float], text: str, limit: int) -> list[rest.ScoredPoint]:
    """The request a Qdrant server gets: dense and sparse prefetches fused by RRF inside Qdrant."""
    indices, values = query_vector(text)
    request = rest.QueryRequest(
        prefetch=[rest.Prefetch(query=dense, using=DENSE, limit=limit),
                  rest.Prefetch(query=rest.SparseVector(indices=indices, values=values), using=SPARSE_VECTOR_NAME,
                                limit=limit)],
        query=rest.FusionQuery(fusion=rest.Fusion.RRF), limit=limit, with_payload=True)
    return client.query_batch_points(collection, requests=[request])[0].points


def questions() -> list[str]:
    asked = [r["question"] for r in sample_records()[:12]]
    return [*asked, "Corliss Archer", "Scott Derrickson nationality", "zzz unknown words only"]


def test_bm25_and_fusion_rank_as_qdrants_own_hybrid_query(collection, embed_model):
    client, _ = open_qdrant(collection)
    hybrid = EmbeddedSearch(client, collection.collection, DENSE, SPARSE_VECTOR_NAME)
    texts = questions()
    dense = embed_model.get_text_embedding_batch(texts)
    ours = hybrid.search(dense, [query_vector(t) for t in texts], [LIMIT] * len(texts))
    for text, vector, mine in zip(texts, dense, ours):
        theirs = qdrant_hybrid(client, collection.collection, vector, text, LIMIT)
        assert [p.id for p in mine] == [p.id for p in theirs], text
        assert [p.score for p in mine] == pytest.approx([p.score for p in theirs]), text
        assert [p.payload for p in mine] == [p.payload for p in theirs], text


def test_dense_hits_are_qdrants_cosine_hits(collection, embed_model):
    client, _ = open_qdrant(collection)
    index = read_index(client, collection.collection, DENSE, None)
    texts = questions()
    vectors = embed_model.get_text_embedding_batch(texts)
    for text, vector, mine in zip(texts, vectors, top_dense(index, vectors, [LIMIT] * len(texts))):
        theirs = client.query_points(collection.collection, query=vector, using=DENSE, limit=LIMIT).points
        assert [index.ids[row] for row, _ in mine] == [p.id for p in theirs], text
        assert [score for _, score in mine] == pytest.approx([p.score for p in theirs], abs=1e-5), text
    dense_only = EmbeddedSearch(client, collection.collection, DENSE, None)
    [hits] = dense_only.search(vectors[:1], None, [3])
    assert [p.id for p in hits] == [p.id for p in client.query_points(
        collection.collection, query=vectors[0], using=DENSE, limit=3, with_payload=True).points]
    assert all(p.payload and p.payload.get("_node_content") for p in hits)


def test_sparse_scores_are_qdrants_idf_weighted_scores(collection):
    client, _ = open_qdrant(collection)
    index = read_index(client, collection.collection, DENSE, SPARSE_VECTOR_NAME)
    assert len(index.ids) == index.points == client.count(collection.collection).count
    for text in questions():
        indices, values = query_vector(text)
        mine = [(index.ids[row], score) for row, score in top_sparse(index, (indices, values), LIMIT)]
        theirs = client.query_points(collection.collection, query=rest.SparseVector(indices=indices, values=values),
                                     using=SPARSE_VECTOR_NAME, limit=LIMIT).points
        assert [score for _, score in mine] == pytest.approx([p.score for p in theirs], rel=1e-5), text
        # The same points, but for ties at the cut: which of two equal scores makes the list is Qdrant's whim.
        cut = theirs[-1].score * (1 + 1e-5) if len(theirs) == LIMIT else float("-inf")
        assert {pid for pid, score in mine if score > cut} == {p.id for p in theirs if p.score > cut}, text
    assert top_sparse(index, ([], []), LIMIT) == []
    assert top_sparse(index, query_vector("zzz qqqq"), LIMIT) == []  # no shared term: no sparse hit, as in Qdrant


def test_a_later_ingest_is_searched_and_words_nobody_has_leave_the_dense_hits(tmp_path, embed_model):
    settings = Settings(qdrant_path=tmp_path, collection="grows")
    ingest_nodes(settings, [make_node(p["text"], p["title"]) for p in sample_records()[0]["paragraphs"]], embed_model)
    client, _ = open_qdrant(settings)
    hybrid = EmbeddedSearch(client, "grows", DENSE, SPARSE_VECTOR_NAME)
    text = "Quorvald harbour ferry timetable"
    [vector] = embed_model.get_text_embedding_batch([text])
    [before] = hybrid.search([vector], [query_vector(text)], [3])
    assert len(before) == 3 and all("Quorvald" not in str(p.payload) for p in before)  # dense hits only
    ingest_nodes(settings, [make_node("The Quorvald harbour ferry timetable changes every spring.", "Quorvald")],
                 embed_model)
    [after] = hybrid.search([vector], [query_vector(text)], [3])
    assert hybrid.index().points == len(sample_records()[0]["paragraphs"]) + 1
    assert after[0].payload is not None and "Quorvald" in str(after[0].payload)


def test_only_qdrants_local_mode_is_searched_in_process(collection):
    client, _ = open_qdrant(collection)
    assert is_embedded(client)
    assert is_embedded(QdrantClient(":memory:"))
    # A server's client (never contacted here) keeps its searches on the server.
    assert not is_embedded(QdrantClient(url="http://qdrant.test:6333", check_compatibility=False))


async def test_the_searcher_reads_the_vectors_once_before_the_first_query_when_asked(collection, embed_model):
    from dagrag.agents.searcher import SearchRequest
    from dagrag.stack import build_searcher

    client, _ = open_qdrant(collection)
    searcher = build_searcher(collection, embed_model=embed_model)
    scrolls: list[int] = []
    real_scroll = client.scroll

    def counted(*args, **kwargs):
        scrolls.append(1)
        return real_scroll(*args, **kwargs)

    client.scroll = counted
    try:
        assert searcher.prepare() == client.count(collection.collection).count
        read = len(scrolls)
        [hits] = await searcher.asearch_layer([SearchRequest(text="Corliss Archer", top_k=3)])
        assert hits.candidates and len(scrolls) == read  # the first query reads nothing more
    finally:
        del client.scroll
