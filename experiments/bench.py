"""Performance benchmark of dagrag: what a DAG layer costs, and what a query costs end to end.

    python experiments/bench.py --out runs/bench.json              # the full run (~10 min on 2 cores)
    python experiments/bench.py --quick --out runs/bench-quick.json  # smoke test, small sizes (~1.5 min)
    python experiments/bench.py --only network,orchestration       # some sections

Sections, all measured in one run (keys of the `--out` JSON):
- network        layer_speedup_network: a layer of 4 independent subqueries where the embedding model and
                 the LLM (an LLM judge reranker) each take 100 ms per call (simulated network, real HTTP to a
                 loopback OpenAI-compatible server), the same 4 subqueries planned as a chain ÷ as one layer.
- cpu            layer_cpu_efficiency: the real local models, a layer's wall time ÷ the sum of its batched
                 stages (one embed, one Qdrant batch query, one cross-encoder call) timed alone;
                 layer_cpu_speedup: the chain (one subquery at a time) ÷ the layer.
- orchestration  orchestration_overhead_ms: one whole query with zero-cost fake components.
- ingest         ingest_vs_encoder: ingest throughput ÷ raw sentence-transformers encode throughput on the
                 same passages; reingest_unchanged_s: the same ingest again.
- e2e            e2e_p50_s, e2e_p95_s, peak_rss_mb: offline defaults over the HotpotQA pool, one question at
                 a time, in a fresh process (so peak RSS is a query process's, not the benchmark's).
- scale          qdrant_p50_ms: embedded Qdrant's one query by collection size; scale_layer_ms: the fastest
                 backend keeping recall@10 >= 0.98 on a 4-subquery layer at the largest size (embedded Qdrant,
                 Qdrant Edge HNSW and exact; real + synthetic MiniLM vectors, real questions; a PNG beside --out).
                 experiments/scale_bench.py. The full run, which benchmarks_doc.py shows in place of this file's
                 scale table: --only scale --scale-sizes 10000,100000,1000000 --out experiments/results/bench-scale.json
- serve          serve_overhead_ms: `dagrag serve`'s HTTP layer per /query (median of paired HTTP − in-process
                 differences) with zero-cost fakes behind it; serve_throughput_ratio_c4: /query throughput ÷
                 in-process throughput at concurrency 4 on the real offline stack (also 1 and 16, p50/p95 each).
                 In-process and HTTP measurements alternate (ABBA), so both meet the same machine load.
- peer           peer_subq: LlamaIndex SubQuestionQueryEngine (use_async=True) beside dagrag on the same
                 4-part question, index and 100 ms simulated LLM: wall time, LLM calls, passages handed on.

The HotpotQA index is experiments/eval.py's (same pooled corpus, same collection name, same folder), so an
index built by eval.py is reused and vice versa. If another process holds that embedded Qdrant folder,
a copy of it is used.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval import SubQuestionBaseline, index_spec, pooled_corpus
from evalkit.data import Example, load_examples
from evalkit.metrics import percentile

from dagrag import Plan, QueryResult, QueryWorkflow, Settings
from dagrag.agents.planner import QueryPlannerAgent
from dagrag.agents.reranker import RerankerAgent
from dagrag.agents.searcher import embed_texts
from dagrag.core.errors import QdrantUnavailableError
from dagrag.core.result import Verification, WrittenAnswer
from dagrag.core.search import SearchHits, SearchRequest
from dagrag.core.sources import passage_text
from dagrag.ingest import ingest_nodes, make_node
from dagrag.stack import build_embed_model, build_reranker
from dagrag.store import close_local_client, open_qdrant, open_vector_store
from dagrag.testing.openai_server import JUDGE_SYSTEM, OpenAIServerProcess, dagrag_llm

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "hotpotqa_dev.jsonl"
SECTIONS = ("e2e", "network", "orchestration", "cpu", "peer", "ingest", "scale", "serve")
NETWORK_DELAY_S = 0.1

# The 4-part question: four independent lookups, every entity in the HotpotQA pool (and in --quick's).
QUESTION = "Which of Annie Morton, Terry Richardson, Shirley Temple and Adriana Trigiani was born first?"
SUBQUERIES = ("Annie Morton birth date", "Terry Richardson birth date", "Shirley Temple birth date",
              "Adriana Trigiani birth date")

TARGETS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "layer_speedup_network": ("≥ 3.5", lambda v: v >= 3.5),
    "layer_cpu_efficiency": ("≤ 1.1", lambda v: v <= 1.1),
    "layer_cpu_speedup": ("(report)", lambda v: True),
    "orchestration_overhead_ms": ("≤ 5", lambda v: v <= 5.0),
    "ingest_vs_encoder": ("≥ 0.9", lambda v: v >= 0.9),
    "reingest_unchanged_s": ("≪ first ingest", lambda v: True),
    "e2e_p50_s": ("≤ 1.5", lambda v: v <= 1.5),
    "e2e_p95_s": ("(report)", lambda v: True),
    "peak_rss_mb": ("(report)", lambda v: True),
    "serve_overhead_ms": ("≤ 5", lambda v: v <= 5.0),
    "serve_throughput_ratio_c4": ("≥ 0.95", lambda v: v >= 0.95),
}


@dataclass
class BenchConfig:
    data: Path
    index_dir: Path
    quick: bool
    queries: int
    reps: int
    scale_sizes: list[int]
    ingest_passages: int
    orchestration_runs: int
    sections: list[str]
    pool_questions: int | None = None  # None: every question in --data (eval.py's full pool)
    out: Path | None = None  # --out; the scale section's picture goes beside it
    scale_cache: Path = ROOT / "runs" / "bench-scale"  # the real passages' and questions' embeddings (.npy)
    scale_passages: int | None = None  # real passages embedded for the scale section (None: every one in --data)
    scale_questions: int | None = None  # questions used as its queries (None: every one)
    details: dict[str, Any] = field(default_factory=dict)


def plan_of(subqueries: Sequence[str], *, chain: bool) -> Plan:
    """The subqueries as one layer (independent) or as a chain (each waits for the one before)."""
    return Plan.model_validate({
        "query": QUESTION, "requires_retrieval": True,
        "subqueries": [{"id": f"s{i}", "text": text, "parents": [f"s{i - 1}"] if chain and i > 1 else []}
                       for i, text in enumerate(subqueries, start=1)]})


def layer_times(result: QueryResult) -> list[float]:
    return [v for k, v in sorted(result.timings.items()) if re.fullmatch(r"layer_\d+_s", k)]


def clear_caches(workflow: QueryWorkflow) -> None:
    """Cold caches: every measured run pays for its embeddings and rerank scores."""
    cache = getattr(workflow.searcher, "query_cache", None)
    if cache is not None:
        cache.clear()
    clear = getattr(workflow.reranker, "clear_cache", None)
    if clear is not None:
        clear()


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- simulated network backends -------------------------------------------------------------------

def simulated_llm(server: OpenAIServerProcess) -> Any:
    """The stack's own OpenAI-compatible client, pointed at the simulated server."""
    return dagrag_llm(server, llm="openai-like:simulated", llm_timeout_s=30)


class NetworkEmbedding(BaseEmbedding):
    """A remote embedding API: `delay` seconds per call (one call per batch), deterministic 384-d vectors."""

    delay: float = NETWORK_DELAY_S
    calls: int = 0

    @staticmethod
    def _vector(text: str) -> list[float]:
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
        vector = np.random.default_rng(seed).standard_normal(384)
        return (vector / np.linalg.norm(vector)).tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embeddings([query])[0]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        time.sleep(self.delay)
        return [self._vector(t) for t in texts]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return (await self._aget_text_embeddings([query]))[0]

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return (await self._aget_text_embeddings([text]))[0]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        await asyncio.sleep(self.delay)
        return [self._vector(t) for t in texts]


class LLMJudgeScorer:
    """A remote reranker: an LLM rates one query's passages per call (dagrag's AsyncPairScorer)."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    async def ascore_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        from llama_index.core.base.llms.types import ChatMessage, MessageRole

        passages = "\n".join(f"[{i}] {' '.join(p.split())[:400]}" for i, (_, p) in enumerate(pairs, start=1))
        response = await self.llm.achat([
            ChatMessage(role=MessageRole.SYSTEM, content=JUDGE_SYSTEM + ' Reply {"scores": [number, ...]}.'),
            ChatMessage(role=MessageRole.USER, content=f"Query: {pairs[0][0]}\n{passages}")])
        scores = json.loads(response.message.content or "{}").get("scores", [])
        return np.asarray(scores, dtype=np.float64) - 1.0


# --- zero-cost fakes (orchestration overhead) -----------------------------------------------------

class ZeroSearcher:
    """Canned candidates, no embedding and no Qdrant."""

    def __init__(self, nodes: list[TextNode]) -> None:
        self.nodes = nodes

    async def asearch_layer(self, requests: Sequence[SearchRequest]) -> list[SearchHits]:
        return [SearchHits(candidates=[NodeWithScore(node=n, score=1.0 - i / 100)
                                       for i, n in enumerate(self.nodes[: r.top_k])]) for r in requests]


class ZeroScorer:
    async def ascore_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        return np.zeros(len(pairs))


class ZeroWriter:
    async def awrite(self, question: str, plan: Any, sources: list[Any], ledger: Any) -> WrittenAnswer:
        return WrittenAnswer(text="An answer [1].")

    def lead_sentences(self, sources: list[Any]) -> str:
        return "An answer [1]."


class ZeroVerifier:
    async def averify(self, answer: str, sources: list[Any], ledger: Any) -> Verification:
        return Verification()


# --- the HotpotQA pool and its index (experiments/eval.py's) --------------------------------------

@dataclass
class Pool:
    examples: list[Example]
    nodes: list[TextNode]
    settings: Settings  # pointing at the index


def open_pool(data: Path, index_dir: Path, embed_model: BaseEmbedding, *, pool_questions: int | None = None,
              base: Settings | None = None) -> Pool:
    """eval.py's pooled corpus and collection; built if missing (progress shown), reused otherwise."""
    examples = load_examples(data, limit=pool_questions)
    base = base or Settings()
    corpus = pooled_corpus(examples, index_spec(base))
    settings = base.model_copy(update={"qdrant_path": index_dir, "collection": f"eval_{corpus.key}"})
    try:
        open_qdrant(settings)
    except QdrantUnavailableError:
        copy = Path(tempfile.mkdtemp(prefix="dagrag-bench-index-"))
        log(f"{index_dir} is held by another process; using a copy in {copy}")
        shutil.copytree(index_dir, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".lock"))
        settings = settings.model_copy(update={"qdrant_path": copy})
    with tqdm(total=len(corpus.nodes), desc="index (reused if built)", unit="doc", leave=False) as bar:
        report = ingest_nodes(settings, corpus.nodes, embed_model, progress=bar.update)
    if report.added:
        log(f"indexed {report.added} passages in {report.seconds:.0f} s")
    return Pool(examples=examples, nodes=corpus.nodes, settings=settings)


# --- sections ---------------------------------------------------------------------------------------

async def bench_network(cfg: BenchConfig, server: OpenAIServerProcess) -> dict[str, Any]:
    """A layer of 4 independent subqueries against 100 ms embedding and LLM-judge backends."""
    from dagrag.ingest import read_nodes

    embed = NetworkEmbedding(delay=0.0)
    settings = Settings(qdrant_path=":memory:", collection="bench_network",
                        abstain_below=0.0)  # what is timed is the search layers: no abstain check
    ingest_nodes(settings, read_nodes(ROOT / "examples" / "data" / "hotpotqa_sample.jsonl"), embed)
    embed.delay = NETWORK_DELAY_S
    llm = simulated_llm(server)
    workflow = QueryWorkflow.from_settings(settings, llm=llm, embed_model=embed,
                                           reranker=RerankerAgent(LLMJudgeScorer(llm), name="llm-judge"),
                                           vector_store=open_vector_store(settings))
    layer, chain, layer_total, chain_total = [], [], [], []
    calls: dict[str, Any] = {}
    await workflow.run(query=QUESTION, plan=plan_of(SUBQUERIES, chain=False))  # warm up (client, connections)
    for _ in tqdm(range(cfg.reps), desc="network layer", leave=False):
        for name, plan in (("layer", plan_of(SUBQUERIES, chain=False)), ("chain", plan_of(SUBQUERIES, chain=True))):
            clear_caches(workflow)
            server.reset()
            embed.calls = 0
            result = await workflow.run(query=QUESTION, plan=plan)
            (layer if name == "layer" else chain).append(sum(layer_times(result)))
            (layer_total if name == "layer" else chain_total).append(result.timings["total_s"])
            stats = server.stats()
            calls[name] = {"embedding_calls": embed.calls, "judge_calls": stats["calls"]["judge"],
                           "judge_calls_at_once": stats["peak_in_flight"]["judge"], "layers": len(layer_times(result))}
    return {
        "layer_speedup_network": round(median([c / max(lay, 1e-9) for c, lay in zip(chain, layer)]), 2),
        "details": {"layer_s": round(median(layer), 4), "sequential_s": round(median(chain), 4),
                    "query_layer_s": round(median(layer_total), 4), "query_chain_s": round(median(chain_total), 4),
                    "calls": calls, "delay_s": NETWORK_DELAY_S, "reps": cfg.reps,
                    "how": "same 4 subqueries as one layer vs as a 4-layer chain (the question, searched by "
                           "every plan, in the first layer of both); embedding API and LLM-judge "
                           "reranker each sleep 100 ms per call; Qdrant in memory; median of per-run ratios"},
    }


async def bench_orchestration(cfg: BenchConfig) -> dict[str, Any]:
    """Whole queries where every component returns at once: what the workflow itself costs."""
    nodes = [make_node(f"Passage {i} about {name}.", name) for i, name in enumerate(SUBQUERIES * 3)]
    settings = Settings()
    workflow = QueryWorkflow(planner=QueryPlannerAgent(None), searcher=ZeroSearcher(nodes),
                             reranker=RerankerAgent(ZeroScorer(), name="zero"), writer=ZeroWriter(),
                             verifier=ZeroVerifier(), settings=settings)
    plan = plan_of(SUBQUERIES, chain=False)
    out: dict[str, Any] = {}
    for name, kwargs in (("given_plan", {"plan": plan}), ("rule_planner", {})):
        for _ in range(10):
            await workflow.run(query=QUESTION, **kwargs)
        walls = []
        cpu_started = time.process_time()
        for _ in tqdm(range(cfg.orchestration_runs), desc=f"orchestration ({name})", leave=False):
            started = time.perf_counter()
            await workflow.run(query=QUESTION, **kwargs)
            walls.append((time.perf_counter() - started) * 1000)
        cpu_ms = (time.process_time() - cpu_started) * 1000 / cfg.orchestration_runs
        out[name] = {"cpu_ms": round(cpu_ms, 3), "wall_p50_ms": round(median(walls), 3),
                     "wall_mean_ms": round(statistics.fmean(walls), 3), "wall_p95_ms": round(percentile(walls, 95), 3)}
    return {"orchestration_overhead_ms": out["given_plan"]["cpu_ms"],
            "details": {**out, "runs": cfg.orchestration_runs,
                        "how": "4-subquery plan, zero-cost embedding/search/rerank/writer/verifier; the key is the "
                               "process CPU time per query (= wall time on an idle machine, and unlike wall time not "
                               "inflated by other processes); rule_planner: the offline planner included"}}


async def bench_cpu(cfg: BenchConfig, pool: Pool, embed_model: BaseEmbedding) -> dict[str, Any]:
    """The real local models: is a layer the sum of its batched stages, and what does batching buy?"""
    workflow = QueryWorkflow.from_settings(pool.settings, embed_model=embed_model,
                                           reranker=build_reranker(pool.settings))
    searcher, reranker = workflow.searcher, workflow.reranker
    top_k = pool.settings.subquery_topk_base
    layer, stages, chain = [], [], []
    parts: list[dict[str, float]] = []
    await workflow.run(query=QUESTION, plan=plan_of(SUBQUERIES, chain=False))  # warm up
    for _ in tqdm(range(cfg.reps), desc="cpu layer", leave=False):
        clear_caches(workflow)
        result = await workflow.run(query=QUESTION, plan=plan_of(SUBQUERIES, chain=False))
        layer.append(layer_times(result)[0])

        clear_caches(workflow)
        t0 = time.perf_counter()
        vectors = await embed_texts(embed_model, list(SUBQUERIES))
        t1 = time.perf_counter()
        for text, vector in zip(SUBQUERIES, vectors):  # embedded already: the search below only searches
            searcher.query_cache.put(text, vector)
        hits = await searcher.asearch_layer([SearchRequest(text=t, top_k=top_k) for t in SUBQUERIES])
        pairs = [(text, passage_text(hit)) for text, h in zip(SUBQUERIES, hits) for hit in h.candidates]
        t2 = time.perf_counter()
        await reranker.ascore(pairs)
        t3 = time.perf_counter()
        parts.append({"embed_s": t1 - t0, "search_s": t2 - t1, "rerank_s": t3 - t2})
        stages.append(t3 - t0)

        clear_caches(workflow)
        result = await workflow.run(query=QUESTION, plan=plan_of(SUBQUERIES, chain=True))
        chain.append(sum(layer_times(result)))
    return {
        "layer_cpu_efficiency": round(median([lay / st for lay, st in zip(layer, stages)]), 3),
        "layer_cpu_speedup": round(median([c / lay for c, lay in zip(chain, layer)]), 3),
        "details": {"layer_s": round(median(layer), 4), "stages_alone_s": round(median(stages), 4),
                    "stages": {k: round(median([p[k] for p in parts]), 4) for k in parts[0]},
                    "sequential_s": round(median(chain), 4), "pairs": len(pairs), "reps": cfg.reps,
                    "how": "4 subqueries, top_k × 4 dense hits each, top_k reranked; caches cleared per run; "
                           "median of per-run ratios (layer, stages and chain measured back to back)"},
    }


async def bench_peer(cfg: BenchConfig, pool: Pool, embed_model: BaseEmbedding,
                     server: OpenAIServerProcess) -> dict[str, Any]:
    """SubQuestionQueryEngine (use_async=True) beside dagrag: same question, index, embeddings and LLM."""
    llm = simulated_llm(server)
    settings = pool.settings.model_copy(update={"llm": "openai-like:simulated", "llm_base_url": server.base_url})
    store = open_vector_store(settings)
    workflow = QueryWorkflow.from_settings(settings, llm=llm, embed_model=embed_model,
                                           reranker=build_reranker(settings), vector_store=store)
    subq_top_k = 2  # LlamaIndex's default similarity_top_k
    baseline = SubQuestionBaseline(settings, llm, embed_model, subq_top_k)
    runs: dict[str, list[dict[str, Any]]] = {"dagrag": [], "subq": []}
    await workflow.run(query=QUESTION)  # warm up both
    await baseline.engine.aquery(QUESTION)
    for _ in tqdm(range(cfg.reps), desc="peer SubQuestionQueryEngine", leave=False):
        clear_caches(workflow)
        server.reset()
        started = time.perf_counter()
        result = await workflow.run(query=QUESTION)
        wall = time.perf_counter() - started
        stats = server.stats()
        runs["dagrag"].append({"wall_s": wall, "llm_calls": sum(stats["calls"].values()),
                               "passages": len(result.sources), "retrieved": len(result.sources),
                               "prompt_chars": sum(stats["prompt_chars"].values()),
                               "subqueries": len(result.plan.subqueries),
                               "stages_s": {k: v for k, v in result.timings.items() if not k.startswith("layer_")}})
        server.reset()
        started = time.perf_counter()
        response = await baseline.engine.aquery(QUESTION)
        wall = time.perf_counter() - started
        retrieved = [n for n in response.source_nodes if n.node.metadata.get("title") is not None]
        stats = server.stats()
        runs["subq"].append({"wall_s": wall, "llm_calls": sum(stats["calls"].values()),
                             "passages": len(response.source_nodes), "retrieved": len(retrieved),
                             "prompt_chars": sum(stats["prompt_chars"].values()),
                             "subqueries": stats["calls"]["unknown"] - 1})

    def summary(items: list[dict[str, Any]]) -> dict[str, Any]:
        return {"wall_s": round(median([i["wall_s"] for i in items]), 4),
                **{k: items[-1][k] for k in ("llm_calls", "passages", "retrieved", "prompt_chars", "subqueries")}}

    dag, subq = summary(runs["dagrag"]), summary(runs["subq"])
    dag["stages_s"] = {k: round(median([r["stages_s"].get(k, 0.0) for r in runs["dagrag"]]), 4)
                       for k in runs["dagrag"][-1]["stages_s"]}
    ratios = {"llm_calls": round(dag["llm_calls"] / subq["llm_calls"], 3),
              "passages": round(dag["passages"] / subq["passages"], 3),
              "wall": round(dag["wall_s"] / subq["wall_s"], 3),
              "prompt_chars": round(dag["prompt_chars"] / subq["prompt_chars"], 3)}
    met = {"llm_calls ≤ 1/2": ratios["llm_calls"] <= 0.5, "passages ≤ 1/3": ratios["passages"] <= 1 / 3 + 1e-9,
           "wall ≤ 1": ratios["wall"] <= 1.0}
    return {"peer_subq": {"dagrag": dag, "subq": subq, "dagrag_over_subq": ratios, "met": met,
                          "question": QUESTION, "subq_similarity_top_k": subq_top_k,
                          "dagrag_context_budget": settings.context_budget, "llm_delay_s": NETWORK_DELAY_S,
                          "reps": cfg.reps,
                          "how": "passages = nodes handed to the final answer (SubQ: its source_nodes, "
                                 "retrieved passages plus sub-answers; dagrag: sources); llm_calls and "
                                 "prompt_chars counted at the simulated server"}}


async def bench_ingest(cfg: BenchConfig, pool: Pool, embed_model: Any) -> dict[str, Any]:
    """Ingest throughput against the raw encoder on the same passages (the strings ingest embeds)."""
    nodes = [make_node(n.get_content(), n.metadata["title"], source="bench") for n in pool.nodes[: cfg.ingest_passages]]
    texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
    model = embed_model._model  # the SentenceTransformer inside HuggingFaceEmbedding
    batch = Settings().embed_batch_size
    model.encode(texts[:batch], batch_size=batch, normalize_embeddings=True, show_progress_bar=False)

    def raw() -> float:
        started = time.perf_counter()
        model.encode(texts, batch_size=batch, normalize_embeddings=True, show_progress_bar=False)
        return time.perf_counter() - started

    folder = Path(tempfile.mkdtemp(prefix="dagrag-bench-ingest-"))
    try:
        settings = Settings(qdrant_path=folder, collection="bench_ingest")
        raw_before = raw()
        with tqdm(total=len(nodes), desc="ingest", unit="doc", leave=False) as bar:
            first = ingest_nodes(settings, nodes, embed_model, progress=bar.update)
        raw_after = raw()
        again = ingest_nodes(settings, nodes, embed_model)
    finally:
        close_local_client(folder)
        shutil.rmtree(folder, ignore_errors=True)
    raw_s = (raw_before + raw_after) / 2
    return {
        "ingest_vs_encoder": round(raw_s / first.seconds, 3),
        "reingest_unchanged_s": round(again.seconds, 3),
        "details": {"passages": len(nodes), "ingest_s": round(first.seconds, 3), "encode_s": round(raw_s, 3),
                    "encode_runs_s": [round(raw_before, 3), round(raw_after, 3)],
                    "ingest_passages_per_s": round(len(nodes) / first.seconds, 1),
                    "encode_passages_per_s": round(len(nodes) / raw_s, 1),
                    "reingest_added": again.added, "batch_size": batch,
                    "how": "embedded Qdrant on disk (a fresh folder); encode = SentenceTransformer.encode of the "
                           "same strings, batch size and normalisation, averaged before and after the ingest"},
    }


async def bench_scale(cfg: BenchConfig) -> dict[str, Any]:
    """Dense search cost by collection size and backend: experiments/scale_bench.py (its docstring says how)."""
    import scale_bench

    plot_path = cfg.scale_cache / "scale.png" if cfg.out is None else cfg.out.with_suffix(".png") \
        if "scale" in cfg.out.stem else cfg.out.with_name(f"{cfg.out.stem}-scale.png")  # bench-scale.png
    quick = {"singles": 30, "layers": 10, "budget_s": 5.0} if cfg.quick else {}
    details = scale_bench.run_scale(
        cfg.data, cfg.scale_sizes, cache=cfg.scale_cache, plot_path=plot_path,
        limit=Settings().subquery_topk_base * Settings().dense_overfetch, max_passages=cfg.scale_passages,
        max_questions=cfg.scale_questions, **quick)
    rows = details["rows"]
    out: dict[str, Any] = {"qdrant_p50_ms": {str(r["size"]): r["query_p50_ms"] for r in rows
                                             if r["backend"] == "qdrant-local" and "skipped" not in r}}
    best = scale_bench.best_at_largest(rows)
    if best:
        out["scale_layer_ms"] = best
    return {**out, "details": details}


async def timed_queries(ask: Callable[[str], Any], questions: list[str], concurrency: int
                        ) -> tuple[float, list[float]]:
    """Wall time of all questions at `concurrency` in flight, and each one's latency (s)."""
    limit = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def one(question: str) -> None:
        async with limit:
            started = time.perf_counter()
            await ask(question)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(one(q) for q in questions))
    return time.perf_counter() - started, latencies


async def bench_serve(cfg: BenchConfig, pool: Pool, embed_model: BaseEmbedding) -> dict[str, Any]:
    """`dagrag serve` against the in-process workflow: the HTTP layer's cost, and throughput under concurrency.

    In-process and served measurements alternate (one request each, or one pass each, the order swapped every
    time), so both meet the same load from whatever else runs on the machine; absolute times are not comparable
    between runs on a busy machine, the paired differences and ratios are.
    """
    import httpx

    from dagrag.agents.resolver import ReferenceResolverAgent
    from dagrag.server import DagragService
    from dagrag.stack import Agents
    from dagrag.testing.live_server import LiveServer

    def asker(http: httpx.AsyncClient) -> Callable[[str], Any]:
        async def ask(question: str) -> None:
            response = await http.post("/query", json={"question": question})
            response.raise_for_status()

        return ask

    # 1. The HTTP layer alone: every component returns at once, so what is left is routing, auth, JSON, logs.
    #    Pairs of one in-process query and one /query (alternating which goes first); the overhead is the median
    #    of the pairs' differences.
    nodes = [make_node(f"Passage {i} about {name}.", name) for i, name in enumerate(SUBQUERIES * 3)]
    fakes = Agents(planner=QueryPlannerAgent(None), searcher=ZeroSearcher(nodes),
                   reranker=RerankerAgent(ZeroScorer(), name="zero"), writer=ZeroWriter(), verifier=ZeroVerifier(),
                   resolver=ReferenceResolverAgent())
    runs = cfg.orchestration_runs
    zero = DagragService(Settings(serve_max_runs=64), fakes, embed_model)  # this loop's
    served = DagragService(Settings(serve_max_runs=64), fakes, embed_model)  # the server thread's loop's
    inproc: list[float] = []
    http_times: list[float] = []
    with LiveServer(served) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=600) as http:
            over_http = asker(http)
            for _ in range(10):  # warm: connections, the WorkflowServer's runtime, first-call imports
                await zero.query_workflow.run(query=QUESTION)
                await over_http(QUESTION)
            for i in range(runs):
                for mode in (("in", "http") if i % 2 == 0 else ("http", "in")):
                    started = time.perf_counter()
                    if mode == "in":
                        await zero.query_workflow.run(query=QUESTION)
                        inproc.append(time.perf_counter() - started)
                    else:
                        await over_http(QUESTION)
                        http_times.append(time.perf_counter() - started)
    overhead_ms = median([h - p for h, p in zip(http_times, inproc)]) * 1000

    # 2. The real offline stack over the HotpotQA pool at concurrency 1, 4 and 16: passes over the same questions,
    #    in-process and over HTTP in turn (ABBA), caches cleared before each pass.
    questions = [e.question for e in pool.examples[: (8 if cfg.quick else 32)]]
    rounds = 2 if cfg.quick else 3
    settings = pool.settings.model_copy(update={"serve_max_runs": 64})
    table: dict[str, Any] = {}
    for concurrency in (1, 4, 16):
        # One service per event loop: the in-process one on this loop, the served one on the server's.
        local = DagragService.from_settings(settings, embed_model=embed_model)
        remote = DagragService.from_settings(settings, embed_model=embed_model)
        walls: dict[str, list[float]] = {"in_process": [], "http": []}
        latencies: dict[str, list[float]] = {"in_process": [], "http": []}
        with LiveServer(remote) as server:
            async with httpx.AsyncClient(base_url=server.url, timeout=600,
                                         limits=httpx.Limits(max_connections=concurrency)) as http:
                over_http = asker(http)
                await over_http(questions[0])  # connections, the WorkflowServer's runtime
                await local.query_workflow.run(query=questions[0])
                for r in range(rounds * 2):
                    name = ("in_process", "http")[(r + r // 2) % 2]  # in, http, http, in, in, http, …
                    service = local if name == "in_process" else remote
                    clear_caches(service.query_workflow)
                    workflow = local.query_workflow
                    ask = over_http if name == "http" else (lambda q, wf=workflow: wf.run(query=q))
                    wall, times = await timed_queries(ask, questions, concurrency)
                    walls[name].append(wall)
                    latencies[name] += times
        row: dict[str, Any] = {}
        for name in ("in_process", "http"):
            row[name] = {"queries_per_s": round(len(questions) * len(walls[name]) / sum(walls[name]), 3),
                         "p50_s": round(median(latencies[name]), 3),
                         "p95_s": round(percentile(latencies[name], 95), 3)}
        row["throughput_ratio"] = round(row["http"]["queries_per_s"] / row["in_process"]["queries_per_s"], 3)
        row["pass_ratios"] = [round(i / h, 3) for i, h in zip(walls["in_process"], walls["http"])]
        table[f"c{concurrency}"] = row
    return {"serve_overhead_ms": round(overhead_ms, 3),
            "serve_throughput_ratio_c4": table["c4"]["throughput_ratio"],
            "details": {"overhead": {"in_process_p50_ms": round(median(inproc) * 1000, 3),
                                     "http_p50_ms": round(median(http_times) * 1000, 3),
                                     "paired_difference_p95_ms": round(percentile(
                                         [h - p for h, p in zip(http_times, inproc)], 95) * 1000, 3),
                                     "pairs": runs},
                        "throughput": table, "questions": len(questions), "passes_per_mode": rounds,
                        "how": "server in a thread of this process (uvicorn, 127.0.0.1), httpx client in the main "
                               "loop: the client's own CPU is counted against HTTP; in-process and HTTP "
                               "measurements interleaved (ABBA), caches cleared before each pass"}}


def e2e_order(examples: Sequence[Example]) -> list[Example]:
    """The order the e2e section (and profile_query.py) asks the pool's questions in: shuffled with seed 0."""
    shuffled = list(examples)
    random.Random(0).shuffle(shuffled)
    return shuffled


def bench_e2e_child(cfg: BenchConfig, out: Path) -> None:
    """In a fresh process: the default stack over the pool index, one question at a time."""
    settings = Settings()
    embed_model = build_embed_model(settings.embed_model, settings.embed_batch_size)
    pool = open_pool(cfg.data, cfg.index_dir, embed_model, pool_questions=cfg.pool_questions)
    workflow = QueryWorkflow.from_settings(pool.settings)  # the default stack, as `dagrag query` builds it
    sample = e2e_order(pool.examples)
    warmup, measured = sample[:2], sample[2: 2 + cfg.queries]
    walls: list[float] = []
    stage: dict[str, list[float]] = {}

    async def run_all() -> None:
        for example in warmup:
            await workflow.run(query=example.question)
        for example in tqdm(measured, desc="e2e queries", unit="q", leave=False):
            started = time.perf_counter()
            result = await workflow.run(query=example.question)
            walls.append(time.perf_counter() - started)
            for key in ("plan_s", "search_s", "rerank_s", "write_s", "verify_s"):
                stage.setdefault(key, []).append(result.timings.get(key, 0.0))

    asyncio.run(run_all())
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out.write_text(json.dumps({
        "e2e_p50_s": round(percentile(walls, 50), 3), "e2e_p95_s": round(percentile(walls, 95), 3),
        "peak_rss_mb": round(peak_kb / 1024, 1),
        "details": {"queries": len(walls), "mean_s": round(statistics.fmean(walls), 3),
                    "stage_mean_s": {k: round(statistics.fmean(v), 4) for k, v in stage.items()},
                    "pool_passages": len(pool.nodes), "collection": pool.settings.collection,
                    "how": "default Settings (offline), one question at a time after 2 warm-up questions, "
                           "seeded sample; peak RSS of that process (models + index + queries)"}}))


def run_e2e(cfg: BenchConfig, argv: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "e2e.json"
        subprocess.run([sys.executable, str(Path(__file__).resolve()), *argv, "--child-e2e", str(out)], check=True)
        return json.loads(out.read_text())


# --- the run ----------------------------------------------------------------------------------------

def config_from(args: argparse.Namespace) -> BenchConfig:
    quick = args.quick
    sections = [s.strip() for s in (args.only or ",".join(SECTIONS)).split(",") if s.strip()]
    sections = [s for s in sections if s not in set((args.skip or "").split(","))]
    if args.skip_scale and "scale" in sections:
        sections.remove("scale")
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        raise SystemExit(f"unknown section(s) {', '.join(unknown)}; valid: {', '.join(SECTIONS)}")
    return BenchConfig(
        data=Path(args.data), index_dir=Path(args.index_dir), quick=quick,
        queries=args.queries or (10 if quick else 100), reps=args.reps or (2 if quick else 5),
        scale_sizes=[int(s) for s in args.scale_sizes.split(",")] if args.scale_sizes
        else ([2_000, 5_000] if quick else [5_000, 50_000, 200_000]),
        ingest_passages=256 if quick else 512, orchestration_runs=30 if quick else 300,
        sections=sections, pool_questions=30 if quick else None, out=Path(args.out) if args.out else None)


def targets_of(results: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, (target, check) in TARGETS.items():
        if key in results:
            out[key] = {"value": results[key], "target": target, "met": bool(check(results[key]))}
    if "qdrant_p50_ms" in results:
        out["qdrant_p50_ms"] = {"value": results["qdrant_p50_ms"], "target": "(find the limit)", "met": True}
    if "scale_layer_ms" in results:
        best = results["scale_layer_ms"]
        out["scale_layer_ms"] = {"value": best, "target": "≤ 50 ms, recall@10 ≥ 0.98, largest size",
                                 "met": best["layer_p50_ms"] <= 50 and best["recall_at_10"] >= 0.98}
    if "peer_subq" in results:
        peer = results["peer_subq"]
        out["peer_subq"] = {"value": peer["dagrag_over_subq"], "target": "calls ≤ ½, passages ≤ ⅓, wall ≤ 1",
                            "met": all(peer["met"].values())}
    return out


def print_table(results: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="dagrag performance")
    for column in ("key", "value", "target", "met", "detail"):
        table.add_column(column)
    details = results.get("details", {})
    for key, row in results["targets"].items():
        value = row["value"]
        if key == "peer_subq":
            dag, subq = results["peer_subq"]["dagrag"], results["peer_subq"]["subq"]
            value = (f"dagrag {dag['wall_s']:.2f} s, {dag['llm_calls']} calls, {dag['passages']} passages | "
                     f"SubQ {subq['wall_s']:.2f} s, {subq['llm_calls']} calls, {subq['passages']} passages")
        elif isinstance(value, dict):
            value = ", ".join(f"{k}: {v}" for k, v in value.items())
        detail = ""
        if key == "layer_speedup_network" and "network" in details:
            d = details["network"]
            detail = f"layer {d['layer_s']:.3f} s vs sequential {d['sequential_s']:.3f} s"
        elif key == "layer_cpu_efficiency" and "cpu" in details:
            d = details["cpu"]
            detail = f"layer {d['layer_s']:.3f} s vs stages {d['stages_alone_s']:.3f} s " + ", ".join(
                f"{k[:-2]} {v:.3f}" for k, v in d["stages"].items())
        elif key == "layer_cpu_speedup" and "cpu" in details:
            detail = f"sequential {details['cpu']['sequential_s']:.3f} s"
        elif key == "ingest_vs_encoder" and "ingest" in details:
            d = details["ingest"]
            detail = f"{d['ingest_passages_per_s']} vs {d['encode_passages_per_s']} passages/s ({d['passages']})"
        elif key == "e2e_p50_s" and "e2e" in details:
            detail = f"{details['e2e']['queries']} questions; mean s: " + ", ".join(
                f"{k[:-2]} {v:.3f}" for k, v in details["e2e"]["stage_mean_s"].items())
        elif key == "qdrant_p50_ms" and "scale" in details:
            detail = "layer of 4, p50 ms (recall@10): " + ", ".join(
                f"{r['backend']}@{r['size']}: {r['layer_p50_ms']} ({r['recall_at_10']})"
                for r in details["scale"].get("rows", []) if "skipped" not in r)
        elif key == "scale_layer_ms" and "scale" in details:
            detail = details["scale"].get("verdict", "")
        elif key == "orchestration_overhead_ms" and "orchestration" in details:
            d = details["orchestration"]
            detail = (f"CPU per query; wall p50 {d['given_plan']['wall_p50_ms']} ms; with the rule planner "
                      f"{d['rule_planner']['cpu_ms']} ms CPU")
        elif key == "serve_overhead_ms" and "serve" in details:
            d = details["serve"]["overhead"]
            detail = (f"median of {d['pairs']} paired differences; p50 in-process {d['in_process_p50_ms']} ms, "
                      f"HTTP {d['http_p50_ms']} ms")
        elif key == "serve_throughput_ratio_c4" and "serve" in details:
            detail = " | ".join(
                f"{c}: {r['in_process']['queries_per_s']} vs {r['http']['queries_per_s']} q/s, p50 "
                f"{r['in_process']['p50_s']}/{r['http']['p50_s']} s, p95 {r['in_process']['p95_s']}/"
                f"{r['http']['p95_s']} s" for c, r in details["serve"]["throughput"].items())
        elif key == "peer_subq":
            detail = "dagrag s: " + ", ".join(f"{k[:-2]} {v:.3f}" for k, v in
                                              results["peer_subq"]["dagrag"].get("stages_s", {}).items())
        table.add_row(key, str(value), row["target"], "✓" if row["met"] else "✗", detail)
    Console(width=160).print(table)


async def run_sections(cfg: BenchConfig, argv: list[str]) -> dict[str, Any]:
    results: dict[str, Any] = {"details": {}}

    def merge(name: str, part: dict[str, Any]) -> None:
        results["details"][name] = part.pop("details", {})
        results.update(part)

    started_all = time.perf_counter()
    load_at_start = os.getloadavg()[0]  # other processes on the machine skew every wall time below
    timings: dict[str, float] = {}
    if "e2e" in cfg.sections:  # first, in its own process, before this one opens the index folder
        log("== e2e: offline defaults over the HotpotQA pool (child process)")
        started = time.perf_counter()
        merge("e2e", run_e2e(cfg, argv))
        timings["e2e"] = time.perf_counter() - started
    needs_models = {"cpu", "peer", "ingest", "serve"} & set(cfg.sections)
    embed_model = build_embed_model(Settings().embed_model, Settings().embed_batch_size) if needs_models else None
    pool = open_pool(cfg.data, cfg.index_dir, embed_model, pool_questions=cfg.pool_questions) \
        if needs_models else None  # type: ignore[arg-type]
    with OpenAIServerProcess(question=QUESTION, subqueries=list(SUBQUERIES), delay=NETWORK_DELAY_S) as server:
        for name in cfg.sections:
            if name == "e2e":
                continue
            log(f"== {name}")
            started = time.perf_counter()
            if name == "network":
                merge(name, await bench_network(cfg, server))
            elif name == "orchestration":
                merge(name, await bench_orchestration(cfg))
            elif name == "cpu":
                merge(name, await bench_cpu(cfg, pool, embed_model))  # type: ignore[arg-type]
            elif name == "peer":
                merge(name, await bench_peer(cfg, pool, embed_model, server))  # type: ignore[arg-type]
            elif name == "ingest":
                merge(name, await bench_ingest(cfg, pool, embed_model))  # type: ignore[arg-type]
            elif name == "scale":
                merge(name, await bench_scale(cfg))
            elif name == "serve":
                merge(name, await bench_serve(cfg, pool, embed_model))  # type: ignore[arg-type]
            timings[name] = time.perf_counter() - started
    results["targets"] = targets_of(results)
    results["config"] = {
        "command": "python experiments/bench.py " + " ".join(argv),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "quick": cfg.quick, "sections": cfg.sections, "queries": cfg.queries, "reps": cfg.reps,
        "scale_sizes": cfg.scale_sizes, "ingest_passages": cfg.ingest_passages, "data": str(cfg.data),
        "cpu_count": os.cpu_count(), "python": platform.python_version(), "machine": platform.machine(),
        "load_average_start_end": [round(load_at_start, 2), round(os.getloadavg()[0], 2)],
        "section_seconds": {k: round(v, 1) for k, v in timings.items()},
        "total_seconds": round(time.perf_counter() - started_all, 1),
        "settings": Settings().model_dump(include={"subquery_topk_base", "rerank_max_tokens", "rerank_batch_size",
                                                   "context_budget", "dense_overfetch", "embed_batch_size"}),
    }
    return results


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None, help="write the results as JSON to this file")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test of every section")
    parser.add_argument("--only", default=None, help=f"comma list of sections ({', '.join(SECTIONS)})")
    parser.add_argument("--skip", default=None, help="comma list of sections to leave out")
    parser.add_argument("--skip-scale", action="store_true", help="leave out the search backends' scale section")
    parser.add_argument("--queries", type=int, default=None, help="e2e questions (default 100, quick 10)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions of the layer and peer runs (5, quick 2)")
    parser.add_argument("--scale-sizes", default=None, help="comma list of collection sizes (5000,50000,200000; "
                        "quick 2000,5000; the full run 10000,100000,1000000)")
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="HotpotQA data in the shared JSONL format")
    parser.add_argument("--index-dir", default=".dagrag/eval-qdrant", help="eval.py's embedded Qdrant folder")
    parser.add_argument("--child-e2e", default=None, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    cfg = config_from(args)
    if args.child_e2e:
        bench_e2e_child(cfg, Path(args.child_e2e))
        return 0
    results = asyncio.run(run_sections(cfg, argv))
    print_table(results)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2, ensure_ascii=False), encoding="utf-8")
        log(f"wrote {out}")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
