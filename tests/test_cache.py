"""Caches of query embeddings and rerank scores; length-sorted ONNX batches; remote (async) rerankers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import Field

from dagrag.agents.cache import LRUCache, text_key
from dagrag.agents.reranker import OnnxCrossEncoder, RerankerAgent, bundled_reranker_dir
from dagrag.agents.searcher import SearcherAgent


def test_lru_evicts_the_least_recently_used():
    cache: LRUCache[str, int] = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recent
    cache.put("c", 3)
    assert "b" not in cache and cache.get("a") == 1 and cache.get("c") == 3
    assert cache.get("b") is None and (cache.hits, cache.misses) == (3, 1)
    cache.clear()
    assert len(cache) == 0 and cache.hits == 0


def test_lru_of_size_zero_keeps_nothing():
    cache: LRUCache[str, int] = LRUCache(0)
    cache.put("a", 1)
    assert cache.get("a") is None and len(cache) == 0
    with pytest.raises(ValueError):
        LRUCache(-1)


def test_text_key_separates_parts():
    assert text_key("ab", "c") != text_key("a", "bc")
    assert text_key("q", "p") == text_key("q", "p") and len(text_key("q", "p")) == 16


class CountingScorer:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.seen.extend(pairs)
        return np.array([float(len(p)) - 3.0 for _, p in pairs])


async def test_rerank_scores_are_cached_and_deduplicated():
    scorer = CountingScorer()
    agent = RerankerAgent(scorer)
    first = await agent.ascore([("q", "aaa"), ("q", "aaaa"), ("q", "aaa")])
    assert scorer.seen == [("q", "aaa"), ("q", "aaaa")]  # the repeated pair is scored once
    assert first[0] == first[2] == pytest.approx(0.5) and first[1] == pytest.approx(1 / (1 + np.exp(-1)))
    again = await agent.ascore([("q", "aaaa"), ("other", "aaa")])
    assert scorer.seen[2:] == [("other", "aaa")]  # only the new pair reaches the model
    assert again[0] == first[1]
    agent.clear_cache()
    await agent.ascore([("q", "aaa")])
    assert scorer.seen[-1] == ("q", "aaa")


async def test_rerank_cache_can_be_off():
    scorer = CountingScorer()
    agent = RerankerAgent(scorer, cache_size=0)
    await agent.ascore([("q", "aaa")])
    await agent.ascore([("q", "aaa")])
    assert len(scorer.seen) == 2


class SlowRemoteScorer:
    """A rerank API: one call per query, 50 ms each."""

    def __init__(self) -> None:
        self.calls: list[list[tuple[str, str]]] = []

    async def ascore_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.calls.append(list(pairs))
        await asyncio.sleep(0.05)
        return np.array([1.0 if q[-1] == p[-1] else -1.0 for q, p in pairs])


async def test_remote_reranker_calls_overlap_one_per_query():
    scorer = SlowRemoteScorer()
    agent = RerankerAgent(scorer)
    pairs = [(f"q{i}", f"p{j}") for i in range(4) for j in range(3)]
    started = time.perf_counter()
    scores = await agent.ascore(pairs)
    elapsed = time.perf_counter() - started
    assert len(scorer.calls) == 4 and all(len(c) == 3 for c in scorer.calls)
    assert elapsed < 0.15  # four 50 ms calls in flight together, not 200 ms in a row
    assert [round(s) for s in scores] == [1 if q[-1] == p[-1] else 0 for q, p in pairs]


def test_onnx_length_sorted_batches_keep_the_pair_order():
    scorer = OnnxCrossEncoder(bundled_reranker_dir(), batch_size=1)  # batch of one: no padding, exact scores
    pairs = [("who founded the company", "x " * n + "The company was founded by Ada.") for n in (40, 1, 200, 5, 90)]
    batched = scorer.score_pairs(pairs)
    alone = np.concatenate([scorer.score_pairs([pair]) for pair in pairs])
    assert np.array_equal(batched, alone)
    assert scorer.score_pairs([]).shape == (0,)


class CountingEmbedding(BaseEmbedding):
    batches: list[list[str]] = Field(default_factory=list)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return [float(len(text)), 1.0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        return [self._get_text_embedding(t) for t in texts]


async def test_query_embeddings_are_cached():
    embed = CountingEmbedding()
    searcher: Any = SearcherAgent(None, embed)  # type: ignore[arg-type]
    assert await searcher._embed(["a", "bb", "a"]) == [[1.0, 1.0], [2.0, 1.0], [1.0, 1.0]]
    assert await searcher._embed(["bb", "ccc"]) == [[2.0, 1.0], [3.0, 1.0]]
    assert embed.batches == [["a", "bb"], ["ccc"]]
    assert await searcher._embed(["a"]) == [[1.0, 1.0]]
    assert len(embed.batches) == 2
