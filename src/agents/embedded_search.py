"""Search on the embedded store, in-process: exact dense search as one matrix product per layer, BM25 over the
collection's own sparse vectors as one sparse-matrix product, fused by Qdrant's own reciprocal-rank fusion.

Embedded Qdrant (qdrant_client's local mode) is a prototyping engine: for every query it normalises every stored
vector again and sorts every score, and it scores a sparse query by walking every stored point in Python. On a
4.7k-passage collection that was nearly nine tenths of a query's search time, and it grows with the collection. A
Qdrant server keeps an HNSW graph and an inverted index and fuses by itself, so the searcher sends it the request
unchanged; on the embedded store the searcher reads the collection's vectors once (Qdrant stays the store: it
holds the points and payloads, and writes go to it) and searches them here, with Qdrant's formulas — cosine on
unit vectors, the IDF modifier's BM25 weighting, RRF with its constant — so both paths rank alike.

The vectors are read from the collection once and again when its point count changes (ingest adds points, each
under an id made from its content; `ingest --replace` that deletes as many as it adds leaves the count as it was, so
a searcher that read the collection before, in the same process, keeps the old vectors until it is built again: the
CLI ingests in a process of its own). They cost a second copy of the dense vectors in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from qdrant_client import QdrantClient
from qdrant_client.http import models as rest
from qdrant_client.hybrid.fusion import reciprocal_rank_fusion

from ..core.names import Place, headed_by

SCROLL_PAGE = 4096
SparseQuery = tuple[list[int], list[float]]
Hits = list[tuple[int, float]]  # (row, score), best first


@dataclass(frozen=True)
class SparseMatrix:
    """A collection's sparse vectors: one row per point, one column per term id seen, and each term's IDF."""

    columns: dict[int, int]
    matrix: sp.csc_matrix
    idf: np.ndarray


@dataclass(frozen=True)
class EmbeddedIndex:
    """A collection's vectors in memory: row i is point `ids[i]`; `dense` rows have unit length."""

    points: int  # the collection's point count when it was read
    ids: list[rest.ExtendedPointId]
    dense: np.ndarray
    sparse: SparseMatrix | None
    places: list[Place] = field(default_factory=list)  # each row's place: title, section, file


def is_embedded(client: QdrantClient) -> bool:
    """Whether the client is qdrant_client's local mode (a folder or `:memory:`), not a server's client."""
    options = getattr(client, "init_options", None) or {}
    return options.get("path") is not None or options.get("location") == ":memory:"


def qdrant_idf(document_frequency: np.ndarray, documents: int) -> np.ndarray:
    """Qdrant's IDF modifier (the BM25 form): ln((N - df + 0.5) / (df + 0.5) + 1)."""
    return np.log((documents - document_frequency + 0.5) / (document_frequency + 0.5) + 1.0)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero), as Qdrant stores vectors for cosine."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def read_index(client: QdrantClient, collection: str, dense_name: str, sparse_name: str | None) -> EmbeddedIndex:
    """Every point's dense vector (and sparse one) and its place (`Place`), scrolled page by page. A point
    without a sparse vector gets an empty row and is left out of the IDF's document count, as Qdrant leaves it out."""
    points = client.count(collection, exact=True).count
    names = [dense_name] + ([sparse_name] if sparse_name else [])
    ids: list[rest.ExtendedPointId] = []
    places: list[Place] = []
    dense: list[np.ndarray] = []  # a page at a time: no list of Python floats for the whole collection
    columns: dict[int, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    values: list[float] = []
    documents = 0
    offset: rest.ExtendedPointId | None = None
    while True:
        page, offset = client.scroll(collection, limit=SCROLL_PAGE, offset=offset, with_payload=list(Place._fields),
                                     with_vectors=names)
        paged = [point.vector if isinstance(point.vector, dict) else {} for point in page]
        if page:
            dense.append(unit_rows(np.asarray([vectors[dense_name] for vectors in paged], dtype=np.float32)))
        for point, vectors in zip(page, paged):
            row = len(ids)
            ids.append(point.id)
            places.append(Place.of(point.payload))
            sparse = vectors.get(sparse_name) if sparse_name else None
            if isinstance(sparse, rest.SparseVector):
                documents += 1
                rows.extend([row] * len(sparse.indices))
                cols.extend(columns.setdefault(term, len(columns)) for term in sparse.indices)
                values.extend(sparse.values)
        if offset is None:
            break
    matrix = np.concatenate(dense) if dense else np.zeros((0, 0), dtype=np.float32)
    bm25 = None
    if sparse_name:
        csc = sp.csc_matrix((np.asarray(values, dtype=np.float64), (rows, cols)), shape=(len(ids), len(columns)))
        bm25 = SparseMatrix(columns=columns, matrix=csc, idf=qdrant_idf(np.diff(csc.indptr), documents))
    return EmbeddedIndex(points=points, ids=ids, dense=matrix, sparse=bm25, places=places)


def _best(scores: np.ndarray, rows: np.ndarray, limit: int) -> Hits:
    """The `limit` best of `rows` by score, best first, ties in row order."""
    if len(rows) > limit:
        rows = np.sort(rows[np.argpartition(-scores[rows], limit - 1)[:limit]])
    ordered = rows[np.argsort(-scores[rows], kind="stable")]
    return [(int(row), float(scores[row])) for row in ordered]


def top_dense(index: EmbeddedIndex, queries: np.ndarray, limits: Sequence[int]) -> list[Hits]:
    """Per query, the `limit` rows of highest cosine similarity: one matrix product for the whole batch."""
    if not len(index.ids) or not len(queries):
        return [[] for _ in limits]
    scores = unit_rows(np.asarray(queries, dtype=np.float32)) @ index.dense.T
    every = np.arange(len(index.ids))
    return [_best(row_scores, every, limit) if limit > 0 else [] for row_scores, limit in zip(scores, limits)]


def top_headed(index: EmbeddedIndex, query: np.ndarray, code: Sequence[str], limit: int) -> Hits:
    """The `limit` rows, by cosine similarity, whose title, a heading or file name names each piece of `code` as
    written (`headed_by`); none for no code."""
    rows = np.asarray([row for row, place in enumerate(index.places)
                       if code and all(any(name in field for field in place) for name in code)
                       and headed_by(place, code)], dtype=np.int64)
    if not len(rows) or limit <= 0:
        return []
    scores = np.zeros(len(index.ids), dtype=np.float32)
    scores[rows] = index.dense[rows] @ unit_rows(np.asarray(query, dtype=np.float32))
    return _best(scores, rows, limit)


def top_sparse(index: EmbeddedIndex, query: SparseQuery, limit: int) -> Hits:
    """The `limit` best rows for a sparse query by IDF-weighted dot product; only rows sharing a term with the
    query, as Qdrant returns them."""
    bm25 = index.sparse
    if bm25 is None or limit <= 0:
        return []
    weights: dict[int, float] = {}
    for term, value in zip(*query):
        if term in bm25.columns:
            column = bm25.columns[term]
            weights[column] = weights.get(column, 0.0) + value * float(bm25.idf[column])
    if not weights:
        return []
    sub = bm25.matrix[:, list(weights)]
    scores = sub @ np.fromiter(weights.values(), dtype=np.float64, count=len(weights))
    return _best(scores, np.unique(sub.indices), limit)


class EmbeddedSearch:
    """Dense (+ BM25, RRF-fused) search of one embedded collection; `search` is one batch, called under the
    searcher's lock (embedded Qdrant's client is not safe for concurrent use)."""

    def __init__(self, client: QdrantClient, collection: str, dense_vector_name: str,
                 sparse_vector_name: str | None) -> None:
        self.client = client
        self.collection = collection
        self.dense_vector_name = dense_vector_name
        self.sparse_vector_name = sparse_vector_name
        self._index: EmbeddedIndex | None = None

    def index(self) -> EmbeddedIndex:
        """The collection's vectors, read again when its point count has changed since the last read."""
        if self._index is None or self._index.points != self.client.count(self.collection, exact=True).count:
            self._index = read_index(self.client, self.collection, self.dense_vector_name, self.sparse_vector_name)
        return self._index

    def search(self, dense: Sequence[list[float]], sparse: Sequence[SparseQuery] | None, limits: Sequence[int]
               ) -> list[list[rest.ScoredPoint]]:
        """Per query: its `limit` dense hits, fused by reciprocal rank (Qdrant's formula and constant) with its
        `limit` BM25 hits when `sparse` is given; `limit` kept, each with its payload (one read for the batch)."""
        index = self.index()
        dense_hits = top_dense(index, np.asarray(dense, dtype=np.float32), limits)
        sparse_hits = [top_sparse(index, query, limit) for query, limit in zip(sparse, limits)] if sparse else None
        payloads = self._payloads(index, dense_hits + (sparse_hits or []))
        dense_points = [_as_points(index, hits, payloads) for hits in dense_hits]
        if sparse_hits is None:
            return dense_points
        return [reciprocal_rank_fusion([d, _as_points(index, s, payloads)], limit=limit)
                for d, s, limit in zip(dense_points, sparse_hits, limits)]

    def search_headed(self, dense: Sequence[list[float]], headings: Sequence[Sequence[str]], limits: Sequence[int]
                      ) -> list[list[rest.ScoredPoint]]:
        """Per query: the `limit` passages its `headings` head (`top_headed`: a title, heading or file name names the
        code as written), best by cosine first, each with its payload; none for a query without headings."""
        index = self.index()
        batch = [top_headed(index, np.asarray(query), code, limit) if code else []
                 for query, code, limit in zip(dense, headings, limits)]
        payloads = self._payloads(index, batch)
        return [_as_points(index, hits, payloads) for hits in batch]

    def _payloads(self, index: EmbeddedIndex, batch: list[Hits]) -> dict[rest.ExtendedPointId, dict | None]:
        """The payloads of every row the hits name: one read for the batch."""
        wanted = [index.ids[row] for row in sorted({row for hits in batch for row, _ in hits})]
        return {record.id: record.payload for record in
                (self.client.retrieve(self.collection, ids=wanted, with_payload=True) if wanted else [])}


def _as_points(index: EmbeddedIndex, hits: Hits, payloads: dict[rest.ExtendedPointId, dict | None]
               ) -> list[rest.ScoredPoint]:
    return [rest.ScoredPoint(id=index.ids[row], version=0, score=score, payload=payloads.get(index.ids[row]))
            for row, score in hits]

__all__ = ["EmbeddedIndex", "EmbeddedSearch", "SparseMatrix", "is_embedded", "qdrant_idf", "read_index", "top_dense",
           "top_headed", "top_sparse"]
