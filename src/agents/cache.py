"""A small bounded LRU cache for model outputs: query embeddings and cross-encoder scores.

Both are pure functions of their text inputs for a given model, so an agent instance can keep the
most recent ones: a follow-up question, a subquery repeated across plans, or the writer and verifier
re-reading the same sentence pairs then cost nothing. Thread-safe (local model calls run in worker
threads); `maxsize=0` disables it.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def text_key(*parts: str) -> bytes:
    """A compact, collision-safe key for one or more texts (16 bytes instead of the texts themselves)."""
    digest = hashlib.blake2b(digest_size=16)
    for part in parts:
        encoded = part.encode("utf-8", "surrogatepass")
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return digest.digest()


class LRUCache(Generic[K, V]):
    """At most `maxsize` entries; the least recently used one goes first."""

    def __init__(self, maxsize: int = 4096) -> None:
        if maxsize < 0:
            raise ValueError("maxsize must be >= 0")
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                self.hits += 1
                return self._data[key]
            self.misses += 1
            return None

    def put(self, key: K, value: V) -> None:
        if self.maxsize == 0:
            return
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data
