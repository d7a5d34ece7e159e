"""Where one offline query's time goes: questions asked one at a time, every thread of the process sampled.

    .venv/bin/python experiments/profile_query.py                  # the 4.7k-passage HotpotQA pool, 40 questions
    .venv/bin/python experiments/profile_query.py --pool sample    # the 30-question sample (built in a temp folder)

The pool is eval.py's and bench.py's (HotpotQA dev, every question's paragraphs, `.dagrag/eval-qdrant`; built
the first time, with progress). Models are loaded and two questions asked before anything is measured; the
questions are bench.py's e2e sample (seeded shuffle). Each question's wall time is split by the workflow's own
stage timings (`QueryResult.timings`), and a sampler of every thread (evalkit/sampler.py) names the work behind
them: the cross-encoder, query embedding, the search itself, Qdrant calls, sentence splitting, and the rest (the
workflow, Python glue). Its figures are thread-seconds: work in a worker thread and on the event loop at once
counts twice. Run it on a quiet machine: the file records the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from evalkit.provenance import changed_settings, code_commit
from evalkit.sampler import ThreadSampler

from dagrag import QueryWorkflow, Settings
from dagrag.ingest import ingest_nodes, read_nodes
from dagrag.stack import build_embed_model

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "data" / "hotpotqa_sample.jsonl"
HOTPOTQA = ROOT.parent / "shared" / "data" / "hotpotqa_dev.jsonl"
RESULT = ROOT / "experiments" / "results" / "profile.json"
TOP_FUNCTIONS = 12
WARMUP = 2
# The kinds of work, each named by a function its stack passes through (the first match from the innermost frame).
COMPONENTS: list[tuple[str, tuple[str, ...]]] = [
    ("cross-encoder", ("CrossEncoder.score_pairs",)),
    ("query embedding", ("get_text_embedding_batch", "_get_text_embeddings")),
    ("search (in-process)", ("EmbeddedSearch.search",)),
    ("reading the collection's vectors", ("read_index",)),
    ("Qdrant calls", ("QdrantLocal.", "QdrantRemote.")),
    ("sentence splitting", ("split_sentences",)),
]
OTHER = "workflow and Python glue"


def sample_questions() -> list[str]:
    return [json.loads(line)["question"] for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]


async def profile(settings: Settings, asked: list[str], passages: int) -> dict[str, Any]:
    workflow = QueryWorkflow.from_settings(settings)
    warmup, measured = asked[:WARMUP], asked[WARMUP:]
    for question in warmup:
        await workflow.run(query=question)
    walls: list[float] = []
    stages: dict[str, list[float]] = {}
    sampler = ThreadSampler(COMPONENTS, other=OTHER)
    for question in measured:
        started = time.perf_counter()
        sampler.start()
        result = await workflow.run(query=question)
        sampler.stop()
        walls.append(time.perf_counter() - started)
        for stage, seconds in result.timings.items():
            if not stage.startswith("layer_"):
                stages.setdefault(stage.removesuffix("_s"), []).append(seconds)
        print(f"{len(walls)}/{len(measured)} {walls[-1]:.3f} s", file=sys.stderr)
    n = len(measured)
    busy = sum(sampler.by_component.values()) or 1
    return {
        "questions": n, "pool_passages": passages, "commit": code_commit(),
        "settings_changed": changed_settings(settings),
        "load_average": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
        "wall_s": {"p50": round(statistics.median(walls), 4), "mean": round(statistics.fmean(walls), 4),
                   "max": round(max(walls), 4)},
        "stages_s": {stage: round(statistics.fmean(values), 4) for stage, values in stages.items()},
        "components": [{"component": label, "share": round(count / busy, 4),
                        "thread_seconds_per_question": round(sampler.busy_seconds(count) / n, 4)}
                       for label, count in sampler.by_component.most_common()],
        "top_self_time": [{"function": name, "share": round(count / busy, 4),
                           "thread_seconds_per_question": round(sampler.busy_seconds(count) / n, 4)}
                          for name, count in sampler.self_time.most_common(TOP_FUNCTIONS)],
        "sampler": {"interval_s": sampler.interval, "rounds": sampler.ticks, "thread_samples": sampler.samples,
                    "seconds": round(sampler.seconds, 3)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", choices=("hotpotqa", "sample"), default="hotpotqa",
                        help="hotpotqa: HotpotQA dev's 4.7k-passage pool (default); sample: the 30-question sample")
    parser.add_argument("--limit", type=int, default=40, help="questions measured (after 2 warm-up ones)")
    parser.add_argument("--budget", type=int, default=4)
    parser.add_argument("--index-dir", default=".dagrag/eval-qdrant", help="the pool's embedded Qdrant folder")
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as store:
        if args.pool == "sample":
            settings = Settings(qdrant_path=Path(store), collection="profile", context_budget=args.budget)
            nodes = read_nodes(SAMPLE)
            ingest_nodes(settings, nodes, build_embed_model(settings.embed_model, settings.embed_batch_size))
            asked, passages = sample_questions(), len(nodes)
        else:
            from bench import e2e_order, open_pool

            base = Settings(context_budget=args.budget)
            pool = open_pool(HOTPOTQA, Path(args.index_dir), build_embed_model(base.embed_model, base.embed_batch_size),
                             base=base)
            asked = [example.question for example in e2e_order(pool.examples)]
            settings, passages = pool.settings, len(pool.nodes)
        report = asyncio.run(profile(settings, asked[: WARMUP + args.limit], passages))
    report["pool"] = args.pool
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: p50 {report['wall_s']['p50']} s over {report['questions']} questions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
