"""Rerank settings by measurement: joint recall against rerank time over HotpotQA questions.

    python experiments/rerank_sweep.py --questions 100 --out experiments/results/rerank-sweep.json

For every configuration (candidates per subquery × cross-encoder truncation × batch size) the real
QueryWorkflow answers the same seeded sample of questions from eval.py's pooled index, with the offline
planner, the real embeddings and cross-encoder, and zero-cost writer and verifier (they do not change
which passages are selected, and their cost is not the reranker's). Recorded per configuration: the
writer's context (recall, joint recall, as eval.py scores them) and the rerank stage's time. Rerank
caches are off, so every configuration pays for all its pairs. "dense" rows keep the dense order
(no cross-encoder) for reference.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import DEFAULT_DATA, ZeroScorer, ZeroVerifier, ZeroWriter, log, open_pool
from eval import supporting_ids
from evalkit.metrics import percentile, supporting_recall

from dagrag import QueryWorkflow, Settings
from dagrag.agents.planner import QueryPlannerAgent
from dagrag.agents.reranker import OnnxCrossEncoder, RerankerAgent, bundled_reranker_dir
from dagrag.agents.searcher import SearcherAgent
from dagrag.stack import build_embed_model
from dagrag.store import open_vector_store


def parse_ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


async def sweep(args: argparse.Namespace) -> dict[str, Any]:
    base = Settings()
    embed_model = build_embed_model(base.embed_model, base.embed_batch_size)
    pool = open_pool(Path(args.data), Path(args.index_dir), embed_model)
    import random

    questions = list(pool.examples)
    random.Random(args.seed).shuffle(questions)
    questions = questions[: args.questions]
    searcher = SearcherAgent(open_vector_store(pool.settings), embed_model, dense_overfetch=base.dense_overfetch,
                             must_include_boost=base.must_include_boost,
                             section_boost_weight=base.section_boost_weight)

    configs: list[tuple[int, int | None, int]] = []  # (top_k, max_tokens or None for dense, batch size)
    for top_k in parse_ints(args.topk):
        configs.append((top_k, None, 0))
        configs += [(top_k, max_tokens, args.batch_size) for max_tokens in parse_ints(args.max_tokens)]
    configs += [(base.subquery_topk_base, base.rerank_max_tokens, bs) for bs in parse_ints(args.batch_sizes)
                if bs != args.batch_size]

    rows: list[dict[str, Any]] = []
    scorers: dict[tuple[int, int], OnnxCrossEncoder] = {}
    for top_k, max_tokens, batch_size in configs:
        settings = pool.settings.model_copy(update={"subquery_topk_base": top_k})
        if max_tokens is None:
            reranker = RerankerAgent(ZeroScorer(), name="dense", cache_size=0)  # stable sort: dense order kept
        else:
            key = (max_tokens, batch_size)
            if key not in scorers:
                scorers[key] = OnnxCrossEncoder(bundled_reranker_dir(), max_tokens=max_tokens, batch_size=batch_size)
            reranker = RerankerAgent(scorers[key], cache_size=0)
        workflow = QueryWorkflow(
            planner=QueryPlannerAgent(None, subquery_max=settings.subquery_max), searcher=searcher, reranker=reranker,
            writer=ZeroWriter(), verifier=ZeroVerifier(), settings=settings)
        label = f"k={top_k} " + ("dense" if max_tokens is None else f"tokens={max_tokens} batch={batch_size}")
        recall, joint, rerank_s, pairs = [], [], [], []
        for example in tqdm(questions, desc=label, unit="q", leave=False):
            result = await workflow.run(query=example.question)
            r, j = supporting_recall({s.node_id for s in result.sources}, supporting_ids(example))
            recall.append(r)
            joint.append(j)
            rerank_s.append(result.timings.get("rerank_s", 0.0))
            pairs.append(sum(report.candidates for report in result.subqueries))
        row = {"top_k": top_k, "max_tokens": max_tokens, "batch_size": batch_size or None,
               "reranker": "dense order" if max_tokens is None else "cross-encoder",
               "joint_recall": round(statistics.fmean(joint), 4), "recall": round(statistics.fmean(recall), 4),
               "rerank_ms_mean": round(1000 * statistics.fmean(rerank_s), 1),
               "rerank_ms_p50": round(1000 * percentile(rerank_s, 50), 1),
               "rerank_ms_p95": round(1000 * percentile(rerank_s, 95), 1),
               "pairs_per_question": round(statistics.fmean(pairs), 2),
               "ms_per_pair": round(1000 * sum(rerank_s) / max(1, sum(pairs)), 1) if max_tokens else None}
        rows.append(row)
        log(f"{label}: joint recall {row['joint_recall']:.3f}, recall {row['recall']:.3f}, "
            f"rerank {row['rerank_ms_mean']:.0f} ms/question ({row['pairs_per_question']} pairs)")
    return {"rows": rows, "config": {
        "command": "python experiments/rerank_sweep.py " + " ".join(sys.argv[1:]),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "questions": len(questions), "seed": args.seed, "pool_passages": len(pool.nodes),
        "collection": pool.settings.collection, "context_budget": base.context_budget,
        "attribution_top_n": base.attribution_top_n, "dense_overfetch": base.dense_overfetch,
        "reranker": base.reranker}}


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| candidates/subquery | reranker | max tokens | batch | joint recall | recall | rerank ms/question "
             "(mean, p95) | pairs/question | ms/pair |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        per_pair = r["ms_per_pair"] if r["ms_per_pair"] is not None else "–"
        lines.append(f"| {r['top_k']} | {r['reranker']} | {r['max_tokens'] or '–'} | {r['batch_size'] or '–'} | "
                     f"{r['joint_recall']:.3f} | {r['recall']:.3f} | {r['rerank_ms_mean']:.0f}, "
                     f"{r['rerank_ms_p95']:.0f} | {r['pairs_per_question']} | {per_pair} |")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=100, help="seeded sample of HotpotQA questions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--topk", default="3,5,8", help="candidates reranked per subquery (SUBQUERY_TOPK_BASE)")
    parser.add_argument("--max-tokens", default="128,256", help="cross-encoder truncation (RERANK_MAX_TOKENS)")
    parser.add_argument("--batch-size", type=int, default=32, help="batch size of the main grid")
    parser.add_argument("--batch-sizes", default="1,8", help="extra batch sizes at the default k and max tokens")
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--index-dir", default=".dagrag/eval-qdrant", help="eval.py's embedded Qdrant folder")
    parser.add_argument("--out", default=None, help="write rows and config as JSON here (and a .md beside it)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    started = time.perf_counter()
    result = asyncio.run(sweep(args))
    result["config"]["seconds"] = round(time.perf_counter() - started, 1)
    table = markdown(result["rows"])
    print(table)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2), encoding="utf-8")
        out.with_suffix(".md").write_text(
            f"# Rerank sweep: {result['config']['questions']} HotpotQA questions\n\n"
            f"`{result['config']['command']}` ({result['config']['date']})\n\n{table}\n", encoding="utf-8")
        log(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
