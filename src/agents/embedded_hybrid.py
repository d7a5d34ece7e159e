"""Hybrid search on the embedded store: BM25 over the collection's own sparse vectors as one sparse-matrix product,
fused with Qdrant's dense hits by Qdrant's own reciprocal-rank fusion.

Embedded Qdrant (qdrant_client's local mode) scores a sparse query by walking every stored point in Python; on the
4.7k-passage collection that was four fifths of a query's search time. A Qdrant server keeps an inverted index
and fuses by itself, so the searcher sends it the hybrid request unchanged; on the embedded store it asks Qdrant
for the dense half only and scores the sparse half here, reading the same stored vectors and weighting them with
the same IDF formula, so both paths rank alike.

The sparse matrix is read from the collection once and read again when the collection's point count changes
(dagrag's ingest only adds points, each under an id made from its content).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from qdrant_client import QdrantClient
from qdrant_client.http import models as rest
from qdrant_client.hybrid.fusion import reciprocal_rank_fusion

SCROLL_PAGE = 4096
SparseQuery = tuple[list[int], list[float]]


@dataclass(frozen=True)
class SparseMatrix:
    """A collection's sparse vectors: one row per point, one column per term id seen, and each term's IDF."""

    points: int  # the collection's point count when it was read
    ids: list[rest.ExtendedPointId]
    columns: dict[int, int]
    matrix: sp.csc_matrix
    idf: np.ndarray


def qdrant_idf(document_frequency: np.ndarray, documents: int) -> np.ndarray:
    """Qdrant's IDF modifier (the BM25 form): ln((N - df + 0.5) / (df + 0.5) + 1)."""
    return np.log((documents - document_frequency + 0.5) / (document_frequency + 0.5) + 1.0)


def read_sparse_matrix(client: QdrantClient, collection: str, vector_name: str) -> SparseMatrix:
    """Every point's `vector_name` vector, scrolled page by page into a CSC matrix; points without one get an
    empty row and are left out of the IDF's document count, as Qdrant leaves them out."""
    points = client.count(collection, exact=True).count
    ids: list[rest.ExtendedPointId] = []
    columns: dict[int, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    values: list[float] = []
    documents = 0
    offset: rest.ExtendedPointId | None = None
    while True:
        page, offset = client.scroll(collection, limit=SCROLL_PAGE, offset=offset, with_payload=False,
                                     with_vectors=[vector_name])
        for point in page:
            vector = point.vector.get(vector_name) if isinstance(point.vector, dict) else None
            row = len(ids)
            ids.append(point.id)
            if not isinstance(vector, rest.SparseVector):
                continue
            documents += 1
            rows.extend([row] * len(vector.indices))
            cols.extend(columns.setdefault(term, len(columns)) for term in vector.indices)
            values.extend(vector.values)
        if offset is None:
            break
    matrix = sp.csc_matrix((np.asarray(values, dtype=np.float64), (rows, cols)), shape=(len(ids), len(columns)))
    frequency = np.diff(matrix.indptr)  # the points holding each term (one entry per point and term)
    return SparseMatrix(points=points, ids=ids, columns=columns, matrix=matrix, idf=qdrant_idf(frequency, documents))


def top_sparse(index: SparseMatrix, query: SparseQuery, limit: int) -> list[tuple[rest.ExtendedPointId, float]]:
    """The `limit` best points for a sparse query by IDF-weighted dot product, best first; only points sharing a
    term with the query, as Qdrant returns them (ties in row order)."""
    weights: dict[int, float] = {}
    for term, value in zip(*query):
        if term in index.columns:
            column = index.columns[term]
            weights[column] = weights.get(column, 0.0) + value * float(index.idf[column])
    if not weights or limit <= 0:
        return []
    columns = list(weights)
    sub = index.matrix[:, columns]
    scores = sub @ np.fromiter(weights.values(), dtype=np.float64, count=len(weights))
    rows = np.unique(sub.indices)
    best = rows[np.argsort(-scores[rows], kind="stable")[:limit]]
    return [(index.ids[row], float(scores[row])) for row in best]


class EmbeddedHybrid:
    """Dense + BM25 search with RRF fusion for one embedded collection; `search` is one batch, called under the
    searcher's lock (embedded Qdrant's client is not safe for concurrent use)."""

    def __init__(self, client: QdrantClient, collection: str, dense_vector_name: str, sparse_vector_name: str) -> None:
        self.client = client
        self.collection = collection
        self.dense_vector_name = dense_vector_name
        self.sparse_vector_name = sparse_vector_name
        self._index: SparseMatrix | None = None

    def sparse_index(self) -> SparseMatrix:
        """The collection's sparse matrix, read again when its point count has changed since the last read."""
        if self._index is None or self._index.points != self.client.count(self.collection, exact=True).count:
            self._index = read_sparse_matrix(self.client, self.collection, self.sparse_vector_name)
        return self._index

    def search(self, dense: Sequence[list[float]], sparse: Sequence[SparseQuery], limits: Sequence[int]
               ) -> list[list[rest.ScoredPoint]]:
        """Per query: its `limit` dense hits and `limit` BM25 hits fused by reciprocal rank (Qdrant's formula and
        constant), `limit` kept, each with its payload. One dense batch query and at most one payload read."""
        requests = [rest.QueryRequest(query=vector, using=self.dense_vector_name, limit=limit, with_payload=True)
                    for vector, limit in zip(dense, limits)]
        responses = self.client.query_batch_points(collection_name=self.collection, requests=requests)
        dense_hits = [response.points for response in responses]
        index = self.sparse_index()
        sparse_hits = [top_sparse(index, query, limit) for query, limit in zip(sparse, limits)]
        have = {point.id for points in dense_hits for point in points}
        wanted = list(dict.fromkeys(pid for hits in sparse_hits for pid, _ in hits if pid not in have))
        payloads = {record.id: record.payload for record in
                    (self.client.retrieve(self.collection, ids=wanted, with_payload=True) if wanted else [])}
        payloads.update((point.id, point.payload) for points in dense_hits for point in points)
        fused = []
        for points, hits, limit in zip(dense_hits, sparse_hits, limits):
            ranked = [rest.ScoredPoint(id=pid, version=0, score=score, payload=payloads.get(pid))
                      for pid, score in hits]
            fused.append(reciprocal_rank_fusion([points, ranked], limit=limit))
        return fused


__all__ = ["EmbeddedHybrid", "SparseMatrix", "qdrant_idf", "read_sparse_matrix", "top_sparse"]
