"""SearcherAgent: dense (or dense + BM25 hybrid) search in Qdrant, through llama-index-vector-stores-qdrant.

A whole DAG layer is one call: its subqueries (and HyDE texts) are embedded in one batch and sent
to Qdrant as one batch query. `hints.must_include` terms and `hints.sections` lift the candidates
that contain them before the best `top_k` go on to the reranker. With an async Qdrant client (a server)
the query is awaited. The embedded store is searched in-process instead (embedded_search.py: the collection's
vectors read once, a layer's dense search one matrix product, BM25 one sparse product, ranked as a server would),
in a worker thread so the event loop stays free. Hybrid search fuses dense and BM25 hits by reciprocal rank.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import MetadataMode, NodeWithScore
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import AsyncQdrantClient
from qdrant_client.http import models as rest

from ..core.names import KnownNames, Place, file_name, headed_by, is_code, names_all, names_in_metadata, opening
from ..core.search import SearchHits, SearchRequest
from ..core.sparse import query_vector
from ..core.text import tokens
from .cache import LRUCache
from .embedded_search import EmbeddedSearch, is_embedded

Points = list[rest.ScoredPoint]


# The passages a heading's lookup reads: enough to hold the opening passage of the page or section a name heads, of
# which `_rank` keeps the request's top_k.
HEADED_PASSAGES_READ = 50


def _heading_filter(code: Sequence[str]) -> rest.Filter:
    """Points whose title, section or file holds the words of each piece of `code` (a server's text match; `_rank`
    then keeps those whose place names it as written)."""
    return rest.Filter(must=[rest.Filter(should=[rest.FieldCondition(key=key, match=rest.MatchText(text=name))
                                                 for key in Place._fields]) for name in code])


def _scaled_to_best(points: list[rest.ScoredPoint]) -> list[rest.ScoredPoint]:
    """RRF scores are tiny rank sums; scaled so the best is 1, the must_include/section boosts keep their weight."""
    best = max((p.score for p in points), default=0.0)
    return [p.model_copy(update={"score": p.score / best}) for p in points] if best > 0 else points


def _contains_phrase(haystack: list[str], phrase: list[str]) -> bool:
    n = len(phrase)
    return n > 0 and any(haystack[i:i + n] == phrase for i in range(len(haystack) - n + 1))


def term_match_ratio(terms: Sequence[str], text: str) -> float:
    """Share of the terms the text names: a term that is code as written (`names_all`: `--exclude` is not in
    `--extend-exclude`, `-C` is not `-c`), any other as a whole-word phrase (accent- and case-folded)."""
    terms = [term for term in terms if tokens(term)]
    if not terms:
        return 0.0
    haystack = tokens(text)
    return sum(names_all(text, [term.strip()]) if is_code(term) else _contains_phrase(haystack, tokens(term))
               for term in terms) / len(terms)


def heading_code(request: SearchRequest) -> list[str]:
    """The section hints of a request that are code: the passages they head are looked up as well."""
    return [term.strip() for term in request.sections if is_code(term)]


async def embed_texts(embed_model: BaseEmbedding, texts: list[str]) -> list[list[float]]:
    """One batched embedding call; local models run in a worker thread so the event loop stays free."""
    if not texts:
        return []
    if type(embed_model)._aget_text_embeddings is BaseEmbedding._aget_text_embeddings:
        return await asyncio.to_thread(embed_model.get_text_embedding_batch, texts)
    return await embed_model.aget_text_embedding_batch(texts)


class SearcherAgent:
    def __init__(
        self,
        vector_store: QdrantVectorStore,
        embed_model: BaseEmbedding,
        *,
        dense_overfetch: int = 4,
        must_include_boost: float = 0.1,
        section_boost_weight: float = 0.2,
        query_cache_size: int = 1024,
        hybrid: bool = False,
        aclient: AsyncQdrantClient | None = None,
        names_ttl_s: float = 60.0,
    ) -> None:
        self.vector_store = vector_store
        self.aclient = aclient
        self.embed_model = embed_model
        self.dense_overfetch = dense_overfetch
        self.must_include_boost = must_include_boost
        self.section_boost_weight = section_boost_weight
        self.hybrid = hybrid
        # Embedded Qdrant's client is not safe for concurrent use: one in-process search (or vector read) at a time.
        self._sync_lock = threading.Lock()
        self.query_cache: LRUCache[str, list[float]] = LRUCache(query_cache_size)
        self.names_ttl_s = names_ttl_s
        self._names: tuple[float, KnownNames] | None = None
        self._embedded: EmbeddedSearch | None = None

    async def known_names(self) -> KnownNames:
        """The names and words the collection records (titles, headings, its passages' words: `ingest` writes them),
        read again after `names_ttl_s` so a server sees what a later ingest added; none when the collection records
        none or cannot be read."""
        now = time.monotonic()
        if self._names is not None and now - self._names[0] < self.names_ttl_s:
            return self._names[1]
        name = self.vector_store.collection_name
        try:
            if self.aclient is not None:
                info = await self.aclient.get_collection(name)
            else:
                info = await asyncio.to_thread(self.vector_store.client.get_collection, name)
        except Exception:  # no names is a weaker hop, not a failed query; the search itself reports the store
            return KnownNames()
        names = names_in_metadata(getattr(info.config, "metadata", None))
        self._names = (now, names)
        return names

    def prepare(self) -> int:
        """Read an embedded collection's vectors now rather than in the first query (a server loads them at
        startup); the points read, 0 for a Qdrant server (nothing to read)."""
        if self.aclient is not None or not is_embedded(self.vector_store.client):
            return 0
        with self._sync_lock:
            return len(self._embedded_search().index().ids)

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        """Query embeddings, from the cache where the text was embedded before; the rest in one batch."""
        cached = [self.query_cache.get(text) for text in texts]
        missing = list(dict.fromkeys(t for t, v in zip(texts, cached) if v is None))
        fresh = dict(zip(missing, await embed_texts(self.embed_model, missing)))
        for text, vector in fresh.items():
            self.query_cache.put(text, vector)
        return [fresh[t] if v is None else v for t, v in zip(texts, cached)]

    async def asearch_layer(self, requests: Sequence[SearchRequest]) -> list[SearchHits]:
        """All requests of a layer: one embedding batch, one Qdrant batch query (with, for a request whose section
        hints are code, the passages they head)."""
        if not requests:
            return []
        texts = [r.text for r in requests] + [r.hyde for r in requests if r.hyde]
        vectors = np.asarray(await self._embed(texts), dtype=np.float32)
        queries: list[list[float]] = []
        hyde_row = len(requests)
        for i, request in enumerate(requests):
            vector = vectors[i]
            if request.hyde:
                # HyDE: the hypothetical passage and the question each pull towards the answer.
                vector = (vector + vectors[hyde_row]) / 2
                hyde_row += 1
            queries.append(vector.tolist())
        limits = [r.top_k * self.dense_overfetch for r in requests]
        headings = [heading_code(r) for r in requests]
        responses, headed = await self._query_batch(queries, limits, [r.text for r in requests], headings)
        return [self._rank(request, points, own) for request, points, own in zip(requests, responses, headed)]

    async def _query_batch(self, queries: list[list[float]], limits: list[int], texts: list[str],
                           headings: list[list[str]]) -> tuple[list[Points], list[Points]]:
        """Each query's hits, and the hits of the passages its `headings` head (none where it has none)."""
        store = self.vector_store
        if self.aclient is None and is_embedded(store.client):
            # Embedded Qdrant rescans and renormalises every vector per query in Python: searched in-process instead.
            embedded = self._embedded_search()
            sparse = [query_vector(text) for text in texts] if self.hybrid else None

            def run_embedded() -> tuple[list[Points], list[Points]]:
                with self._sync_lock:
                    found = embedded.search(queries, sparse, limits)
                    return found, (embedded.search_headed(queries, headings, [HEADED_PASSAGES_READ] * len(queries))
                                   if any(headings) else [[] for _ in queries])

            points, headed = await asyncio.to_thread(run_embedded)
            return ([_scaled_to_best(p) for p in points] if self.hybrid else points), headed
        if self.hybrid:
            batch = [self._hybrid_request(query, limit, text) for query, limit, text in zip(queries, limits, texts)]
        else:
            batch = [rest.QueryRequest(query=query, using=store.dense_vector_name, limit=limit, with_payload=True)
                     for query, limit in zip(queries, limits)]
        # A heading's passages, in the same batch: a text filter narrows them (Qdrant matches words, not code as
        # written), `_rank` keeps those whose place names the code.
        looked_up = [i for i, code in enumerate(headings) if code]
        batch += [rest.QueryRequest(query=queries[i], using=store.dense_vector_name, limit=HEADED_PASSAGES_READ,
                                    with_payload=True, filter=_heading_filter(headings[i])) for i in looked_up]
        if self.aclient is not None:
            responses = await self.aclient.query_batch_points(collection_name=store.collection_name, requests=batch)
        else:  # a server reached through a sync client only (a vector store passed in)
            def run() -> list[rest.QueryResponse]:
                return store.client.query_batch_points(collection_name=store.collection_name, requests=batch)

            responses = await asyncio.to_thread(run)
        points = [response.points for response in responses[:len(queries)]]
        headed: list[Points] = [[] for _ in queries]
        for i, response in zip(looked_up, responses[len(queries):]):
            headed[i] = response.points
        return ([_scaled_to_best(p) for p in points] if self.hybrid else points), headed

    def _embedded_search(self) -> EmbeddedSearch:
        store = self.vector_store
        if self._embedded is None:
            self._embedded = EmbeddedSearch(store.client, store.collection_name, store.dense_vector_name,
                                            store.sparse_vector_name if self.hybrid else None)
        return self._embedded

    def _hybrid_request(self, dense: list[float], limit: int, text: str) -> rest.QueryRequest:
        """Dense and BM25 candidates fused by reciprocal rank (RRF) inside Qdrant, one request per subquery."""
        indices, values = query_vector(text)
        store = self.vector_store
        return rest.QueryRequest(
            prefetch=[rest.Prefetch(query=dense, using=store.dense_vector_name, limit=limit),
                      rest.Prefetch(query=rest.SparseVector(indices=indices, values=values),
                                    using=store.sparse_vector_name, limit=limit)],
            query=rest.FusionQuery(fusion=rest.Fusion.RRF), limit=limit, with_payload=True)

    def _rank(self, request: SearchRequest, points: list[rest.ScoredPoint], headed: list[rest.ScoredPoint]
              ) -> SearchHits:
        """The request's `top_k` best by score, with the boosts of its must_include and section hints. The passages
        whose place — a title, heading or file name — names a section hint that is code (`headed_by`) count as the
        search's best match, and the one that opens that place leads: the collection's own structure says what they are
        about, however their words score ("-C" finds `-c`, the section `--exclude` heads is outscored by the ones that
        mention `--exclude`, and the Summary of `sane_lists.md` does not name `sane_lists`)."""
        code = heading_code(request)
        best = max((point.score for point in points), default=1.0)
        own = [point for point in headed if headed_by(Place.of(point.payload), code)]
        if own:
            lead = opening([point.payload for point in own])
            own.insert(0, own.pop(lead))
        own = [point.model_copy(update={"score": best}) for point in own[: request.top_k]]
        own_ids = {point.id for point in own}
        points = own + [point for point in points if point.id not in own_ids]
        result = self.vector_store.parse_to_query_result(points)
        scored: list[NodeWithScore] = []
        for node, similarity in zip(result.nodes, result.similarities or []):
            score = float(similarity)
            if request.must_include:
                score += self.must_include_boost * term_match_ratio(
                    request.must_include, node.get_content(metadata_mode=MetadataMode.EMBED))
            if request.sections:
                place = Place.of(node.metadata)
                score += self.section_boost_weight * term_match_ratio(
                    request.sections, " ".join([place.section, place.title, file_name(place.source)]))
            scored.append(NodeWithScore(node=node, score=score))
        leader = scored[0] if own else None
        scored.sort(key=lambda hit: hit.score or 0.0, reverse=True)
        if leader is not None and scored[0] is not leader:  # the boosts do not push the place's opening out
            scored.remove(leader)
            scored.insert(0, leader.model_copy(update={"score": scored[0].score}))
        return SearchHits(candidates=scored[: request.top_k])
