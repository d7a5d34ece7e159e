"""Hybrid retrieval: local BM25 sparse vectors stored in Qdrant (IDF by Qdrant), fused with dense by RRF."""

from __future__ import annotations

import pytest

from dagrag import QueryWorkflow, Settings
from dagrag.agents.searcher import SearchRequest
from dagrag.core.sparse import SCHEME, document_vector, query_vector, term_id
from dagrag.ingest import ingest_nodes, make_node
from dagrag.store import SPARSE_VECTOR_NAME, has_sparse_vectors, open_qdrant

from .conftest import sample_records


def test_document_weights_saturate_with_term_frequency_and_ignore_stopwords():
    indices, values = document_vector("Archer Archer Archer Archer and the film")
    weight = dict(zip(indices, values))
    assert set(weight) == {term_id("archer"), term_id("film")}
    assert weight[term_id("archer")] > weight[term_id("film")]
    assert weight[term_id("archer")] < 4 * weight[term_id("film")]  # BM25 saturation, not raw counts
    assert indices == sorted(indices)


def test_query_terms_match_document_terms_once_each_and_ids_are_stable():
    indices, values = query_vector("Corliss Archer archer film?")
    assert indices == sorted({term_id("corliss"), term_id("archer"), term_id("film")}) and values == [1.0] * 3
    # Stored collections depend on these ids: a change of hash would silently break every one of them.
    assert term_id("archer") == 950961012


def test_the_vectors_are_the_ones_their_scheme_names():
    """Benchmark indexes are keyed by `SCHEME` (eval.index_spec): vectors that change under the same name would be
    searched stale. A change here asks for a new SCHEME, then this fingerprint, in the same commit."""
    text = "Doesn't black's `--line-length` apply to the 2 files in pyproject.toml? It'll re-format them, e.g. x_y."
    terms = ["black", "line", "length", "apply", "files", "pyproject", "toml", "ll", "re", "format", "x_y"]
    indices, values = document_vector(text)
    assert SCHEME == "bm25-1" and indices == sorted(term_id(t) for t in terms)
    assert values == pytest.approx([1.5017064846] * len(terms))  # tf 1 of 11 terms against TYPICAL_PASSAGE_TERMS 60
    assert query_vector(text) == (indices, [1.0] * len(terms))


@pytest.fixture(scope="module")
def hybrid_settings(tmp_path_factory, embed_model) -> Settings:
    records = sample_records()[:6]
    nodes = [make_node(p["text"], p["title"]) for r in records for p in r["paragraphs"]]
    settings = Settings(qdrant_path=tmp_path_factory.mktemp("hybrid"), collection="hybrid", hybrid=True)
    ingest_nodes(settings, nodes, embed_model)
    return settings


def test_a_hybrid_collection_stores_a_sparse_vector_per_point(hybrid_settings):
    client, _ = open_qdrant(hybrid_settings)
    assert has_sparse_vectors(client, "hybrid")
    points, _ = client.scroll("hybrid", limit=5, with_vectors=True)
    assert points and all(SPARSE_VECTOR_NAME in p.vector and p.vector[SPARSE_VECTOR_NAME].indices for p in points)


async def test_hybrid_search_fuses_and_finds_exact_names(hybrid_settings, embed_model, reranker):
    workflow = QueryWorkflow.from_settings(hybrid_settings, embed_model=embed_model, reranker=reranker)
    [hits] = await workflow.searcher.asearch_layer([SearchRequest(text="Corliss Archer", top_k=3)])
    assert all("Corliss Archer" in h.node.get_content() for h in hits.candidates)
    assert hits.candidates[0].score == pytest.approx(1.0)  # RRF scaled to the best
    for record in sample_records()[:6]:
        result = await workflow.run(query=record["question"])
        assert set(record["supporting_titles"]) <= {s.metadata["title"] for s in result.sources}


async def test_a_dense_only_collection_is_searched_dense_with_a_warning(tmp_path, embed_model, reranker, caplog):
    dense_only = Settings(qdrant_path=tmp_path, collection="dense", hybrid=False)
    ingest_nodes(dense_only, [make_node(p["text"], p["title"]) for p in sample_records()[0]["paragraphs"]],
                 embed_model)
    client, _ = open_qdrant(dense_only)
    assert not has_sparse_vectors(client, "dense")
    workflow = QueryWorkflow.from_settings(dense_only.model_copy(update={"hybrid": True}), embed_model=embed_model,
                                           reranker=reranker)
    assert "has no sparse vectors: dense search only" in caplog.text
    assert workflow.searcher.hybrid is False
    [hits] = await workflow.searcher.asearch_layer([SearchRequest(text="Corliss Archer", top_k=3)])
    assert hits.candidates and hits.candidates[0].score < 1.0  # cosine similarity, not a scaled RRF score
