"""Which planner suits your model: the LLM planner's plans against the rule planner's, by what they retrieve.

    DAGRAG_LLM=... python experiments/planner_probe.py --data ../shared/data/hotpotqa_dev.jsonl --seed 1 \
        --per-type 20 --budget 4 --index-dir .dagrag/eval-llm-qdrant --out runs/planner-hotpot40

A plan costs one LLM call; answering a question costs three or four (plan, answer, verification), and on a
small local model each takes most of a minute. So this asks the LLM for plans only (OUT/plans.jsonl, one line
per question as it comes: a re-run resumes), then runs every plan without the LLM on the same index, beside
the rule planner's plan, the question alone (`single`) and, for MuSiQue, the gold decomposition (`oracle`),
and scores what each hands the writer (OUT/per_question.jsonl, OUT/summary.md). A plan's searches do not
depend on the LLM once the plan is made (with RESOLVE_WITH_LLM and SUBQUERY_HYDE off, the defaults); only the
verifier's backtrack, a wider search for the subqueries behind sentences the LLM judge calls unsupported, can
change the passages that fill the last slots. On the real-LLM benchmark's 20 HotpotQA questions the replay had
the LLM run's joint recall (0.85), on 19 of the 20 questions; but asked again, a small model can give another plan
(Qwen2.5-Coder-1.5B did for 7 of HotpotQA's 40 an hour apart), so a recorded plan is one sample of what the model
plans. Without DAGRAG_LLM only plans already in OUT/plans.jsonl (or the file --plans names) are replayed:
experiments/results/planner-probe/ keeps Qwen2.5-Coder-1.5B's plans for each set, so a change to how plans run is
measured on them without the model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from eval import (
    Corpus,
    TokenCounter,
    dagrag_row,
    dagrag_workflow,
    run_corpus,
    run_dagrag,
    summarize,
    write_atomically,
)
from evalkit.data import Example, decomposition_plan, load_examples
from evalkit.docs import docs_corpus_folder
from evalkit.provenance import code_commit
from tqdm import tqdm

from dagrag import Plan, Settings
from dagrag.agents.planner import QueryPlannerAgent
from dagrag.core.plan import SubQuery
from dagrag.core.result import RunLedger
from dagrag.ingest import ingest_nodes
from dagrag.stack import build_embed_model, build_llm_client, build_reranker

PLANS_FILE = "plans.jsonl"


def read_plans(path: Path) -> dict[str, dict[str, Any]]:
    """Recorded plans by question id (the later of two lines wins)."""
    if not path.exists():
        return {}
    return {record["id"]: record for record in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


async def collect_plans(examples: list[Example], settings: Settings, path: Path) -> None:
    """Ask the LLM planner for each question's plan not yet in `path`, appending each as it comes."""
    client = build_llm_client(settings)
    todo = [e for e in examples if e.id not in read_plans(path)]
    if client is None:
        if todo:
            print(f"no LLM configured (DAGRAG_LLM): {len(todo)} questions have no recorded plan and are left out",
                  file=sys.stderr)
        return
    # The LLM's own plan for every question, comparisons too: the `llm-split` row composes the split from it.
    planner = QueryPlannerAgent(client, subquery_max=settings.subquery_max, enable_dag=True,
                                bridge=settings.planner_bridge, split_comparisons=False)
    with path.open("a", encoding="utf-8") as out:
        for example in tqdm(todo, desc="plans", unit="question"):
            ledger = RunLedger()
            started = time.perf_counter()
            plan = await planner.aplan(example.question, [], ledger)
            out.write(json.dumps({
                "id": example.id, "question": example.question, "origin": plan.origin.value,
                "plan": plan.model_dump(mode="json"), "seconds": round(time.perf_counter() - started, 1),
                "llm_tokens": sum((c.prompt_tokens or 0) + (c.completion_tokens or 0) for c in ledger.llm_calls),
                "degradations": [d.model_dump(mode="json") for d in ledger.degradations]},
                ensure_ascii=False) + "\n")
            out.flush()


def as_given(recorded: dict[str, Any]) -> Plan:
    """The plan the LLM run executed, to be executed again (validated and repaired as any given plan)."""
    return Plan(query=recorded["query"], requires_retrieval=recorded["requires_retrieval"],
                subqueries=[SubQuery.model_validate(sq) for sq in recorded["subqueries"]])


async def replay(examples: list[Example], settings: Settings, plans: dict[str, dict[str, Any]],
                 corpus: Corpus) -> list[dict[str, Any]]:
    """Every planner's plan for every question with a recorded LLM plan, run offline; one scored row each."""
    offline = settings.model_copy(update={"llm": "none"})
    embed_model = build_embed_model(offline.embed_model, offline.embed_batch_size)
    with tqdm(total=len(corpus.nodes), desc="index", unit="doc") as bar:
        ingest_nodes(offline, corpus.nodes, embed_model, progress=bar.update)
    reranker = build_reranker(offline)
    workflows = {name: dagrag_workflow(name, offline, None, embed_model, reranker) for name in ("single", "dag")}
    tokens = TokenCounter()
    rows: list[dict[str, Any]] = []
    chosen = [e for e in examples if e.id in plans]
    for example in tqdm(chosen, desc="replay", unit="question"):
        runs: list[tuple[str, str, Plan | None]] = [
            ("single", "single", None), ("rule-plan", "dag", None),
            ("llm-plan", "dag", as_given(plans[example.id]["plan"]))]
        if example.decomposition:
            runs.append(("oracle", "dag", Plan.model_validate(decomposition_plan(example))))
        ran: dict[str, dict[str, Any]] = {}
        for name, workflow, plan in runs:
            result, seconds = await run_dagrag(workflows[workflow], example, plan)
            row = dagrag_row(example, result, seconds, tokens)
            if name == "llm-plan":
                row["plan_origin"] = plans[example.id]["origin"]  # how the LLM run got it, not "given"
            ran[name] = {"system": name, "id": example.id, "question": example.question, "type": example.type,
                         "gold": example.answers, "supporting": example.supporting_titles, **row}
        # PLANNER_SPLIT_COMPARISONS: the rule planner's plan where it splits the question by sides, else the LLM's.
        # Both plans ran above, and a plan runs the same offline every time, so its row is that plan's row.
        splits = any(sq.get("role") == "side" for sq in ran["rule-plan"]["plan"]["subqueries"])
        ran["llm-split"] = {**ran["rule-plan" if splits else "llm-plan"], "system": "llm-split"}
        rows.extend(ran.values())
    return rows


def planner_table(systems: dict[str, Any]) -> str:
    """Retrieval and plan size by planner and question type."""
    lines = ["| planner | type | n | recall | joint recall | subqueries |", "|---|---|---|---|---|---|"]
    for name, summary in systems.items():
        for type_name, block in [("all", summary), *summary["by_type"].items()]:
            lines.append(f"| {name} | {type_name} | {block['n']} | {block['recall']:.3f} | "
                         f"{block['joint_recall']:.3f} | {block['subqueries']:.2f} |")
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> None:
    examples = load_examples(Path(args.data), limit=args.limit, seed=args.seed, per_type=args.per_type)
    corpus, settings = run_corpus(examples, docs_corpus_folder(examples, args.corpus),
                                  Settings(context_budget=args.budget, qdrant_path=Path(args.index_dir)))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plans_file = args.plans or out / PLANS_FILE
    plans_file.parent.mkdir(parents=True, exist_ok=True)
    await collect_plans(examples, settings, plans_file)
    plans = read_plans(plans_file)
    rows = await replay(examples, settings, plans, corpus)
    write_atomically(out / "per_question.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    systems = summarize(rows)
    for name, summary in systems.items():  # the plan's size, beside what it found
        for type_name, block in [(None, summary), *summary["by_type"].items()]:
            chosen = [r for r in rows if r["system"] == name and type_name in (None, r["type"])]
            block["subqueries"] = sum(len(r["plan"]["subqueries"]) for r in chosen) / len(chosen)
    joint = {(r["system"], r["id"]): r["metrics"]["joint_recall"] for r in rows}
    asked = {r["id"] for r in rows}  # the questions with a recorded plan
    more = sum(joint[("llm-plan", i)] > joint[("rule-plan", i)] for i in asked)
    less = sum(joint[("llm-plan", i)] < joint[("rule-plan", i)] for i in asked)
    origins = {o: sum(plans[i]["origin"] == o for i in asked) for o in ("llm", "repaired", "fallback")}
    seconds = [r["seconds"] for r in plans.values() if r.get("seconds")]
    per_plan = round(sum(seconds) / len(seconds), 1) if seconds else None
    text = "\n".join([
        f"# {Path(args.data).name}: {len(asked)} questions with an LLM plan, budget {args.budget}",
        "", planner_table(systems), "",
        f"Against the rule planner's, the LLM's plans found more (joint recall) on {more} questions and less on "
        f"{less}.", "",
        f"LLM plans: {', '.join(f'{o} {c}' for o, c in origins.items())}"
        + (f"; {per_plan:.1f} s per plan" if per_plan is not None else "")])
    write_atomically(out / "summary.md", text + "\n")
    write_atomically(out / "summary.json", json.dumps({
        "data": Path(args.data).name, "budget": args.budget, "questions": len(asked), "commit": code_commit(),
        "plan_origins": origins, "seconds_per_plan": per_plan,
        "systems": {name: {key: round(summary[key], 4) for key in ("n", "recall", "joint_recall", "subqueries")}
                    for name, summary in systems.items()}}, indent=1) + "\n")
    print(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="shared JSONL, HotpotQA/2Wiki JSON, MuSiQue JSONL, docs JSONL")
    parser.add_argument("--corpus", help="docs questions only: the folder of documents")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--per-type", type=int)
    parser.add_argument("--budget", type=int, default=4)
    parser.add_argument("--index-dir", default=".dagrag/eval-qdrant")
    parser.add_argument("--out", required=True,
                        help="folder: plans.jsonl (resumable), per_question.jsonl, summary.md, summary.json")
    parser.add_argument("--plans", type=Path,
                        help=f"the recorded plans to replay and add to (default OUT/{PLANS_FILE}); "
                             "experiments/results/planner-probe/ keeps the small model's")
    return parser


if __name__ == "__main__":
    asyncio.run(main(build_parser().parse_args()))
