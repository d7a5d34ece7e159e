"""BM25-style sparse vectors, computed locally (no model download), for hybrid retrieval in Qdrant.

Documents carry BM25's saturated term frequency; Qdrant's IDF modifier supplies the inverse document
frequency from the collection itself, so the weights stay right as documents are added. Queries carry
each distinct term once. Terms are hashed to 31-bit ids, stable across processes and machines.
"""

from __future__ import annotations

import zlib
from collections import Counter

from .text import content_words

BM25_K1 = 1.2
BM25_B = 0.75
# Length normalisation against a fixed typical passage length: a streaming ingest never sees the corpus
# average, and passages here are chunked to a few hundred tokens anyway.
TYPICAL_PASSAGE_TERMS = 60.0


SCHEME = "bm25-1"
"""Which document vectors these functions write. Change it with them (a word list, the weighting, the terms): an index
made under another scheme holds other vectors, and a benchmark keys its indexes by it (experiments/eval.py), so a
changed scheme rebuilds them instead of searching stale ones. tests/test_hybrid.py holds a fingerprint to it."""


def term_id(term: str) -> int:
    return zlib.crc32(term.encode()) & 0x7FFFFFFF


def _encode(counts: Counter[str], weight: dict[str, float]) -> tuple[list[int], list[float]]:
    merged: dict[int, float] = {}
    for term in counts:  # two terms can share a hash; their weights add up
        merged[term_id(term)] = merged.get(term_id(term), 0.0) + weight[term]
    indices = sorted(merged)
    return indices, [merged[i] for i in indices]


def document_vector(text: str) -> tuple[list[int], list[float]]:
    counts = Counter(content_words(text))
    length = sum(counts.values())
    norm = BM25_K1 * (1 - BM25_B + BM25_B * length / TYPICAL_PASSAGE_TERMS)
    return _encode(counts, {t: tf * (BM25_K1 + 1) / (tf + norm) for t, tf in counts.items()})


def query_vector(text: str) -> tuple[list[int], list[float]]:
    counts = Counter(dict.fromkeys(content_words(text), 1))
    return _encode(counts, dict.fromkeys(counts, 1.0))


def encode_documents(texts: list[str]) -> tuple[list[list[int]], list[list[float]]]:
    """The batch form LlamaIndex's QdrantVectorStore calls (`sparse_doc_fn`)."""
    pairs = [document_vector(t) for t in texts]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def encode_queries(texts: list[str]) -> tuple[list[list[int]], list[list[float]]]:
    pairs = [query_vector(t) for t in texts]
    return [p[0] for p in pairs], [p[1] for p in pairs]
