"""Where one offline query's time goes: the HotpotQA sample's questions asked one at a time, each profiled.

    .venv/bin/python experiments/profile_query.py                 # writes experiments/results/profile.json
    .venv/bin/python experiments/profile_query.py --html runs/profile.html   # and pyinstrument's page of the last one

Models are loaded and one question is asked before anything is measured. Each question's wall time is split by the
workflow's own stage timings (`QueryResult.timings`), and pyinstrument (async mode: time spent awaiting a worker
thread counts for the step that awaits it) samples every question; the functions with the most time of their own,
summed over the questions, say what to make faster. Run it on a quiet machine: the file records the load average.
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
from collections import Counter
from pathlib import Path
from typing import Any

from evalkit.provenance import changed_settings, code_commit
from pyinstrument import Profiler

from dagrag import QueryWorkflow, Settings
from dagrag.ingest import ingest_nodes, read_nodes
from dagrag.stack import build_embed_model

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "data" / "hotpotqa_sample.jsonl"
RESULT = ROOT / "experiments" / "results" / "profile.json"
TOP_FUNCTIONS = 15


def questions(limit: int | None) -> list[str]:
    asked = [json.loads(line)["question"] for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    return asked[:limit] if limit else asked


def self_times(profiler: Profiler) -> Counter[str]:
    """Seconds of each function's own time (not its callees'), keyed `module:function`."""
    totals: Counter[str] = Counter()
    session = profiler.last_session
    root = session.root_frame() if session else None
    stack = [root] if root is not None else []
    while stack:
        frame = stack.pop()
        stack.extend(frame.children)
        if frame.is_synthetic:
            continue
        where = Path(frame.file_path or "?").name.removesuffix(".py")
        totals[f"{where}:{frame.function}"] += frame.total_self_time
    return totals


async def profile(settings: Settings, asked: list[str], html: Path | None) -> dict[str, Any]:
    workflow = QueryWorkflow.from_settings(settings)
    await workflow.run(query=asked[0])  # models loaded, caches warm for nothing else: the first question again later
    walls: list[float] = []
    stages: dict[str, list[float]] = {}
    own: Counter[str] = Counter()
    profiler = Profiler(async_mode="enabled", interval=0.001)
    for question in asked:
        profiler.reset()
        started = time.perf_counter()
        profiler.start()
        result = await workflow.run(query=question)
        profiler.stop()
        walls.append(time.perf_counter() - started)
        for stage, seconds in result.timings.items():
            if not stage.startswith("layer_"):
                stages.setdefault(stage.removesuffix("_s"), []).append(seconds)
        own.update(self_times(profiler))
        print(f"{len(walls)}/{len(asked)} {walls[-1]:.3f} s", file=sys.stderr)
    if html is not None:
        html.parent.mkdir(parents=True, exist_ok=True)
        html.write_text(profiler.output_html(), encoding="utf-8")
    sampled = sum(own.values()) or 1.0
    return {
        "questions": len(asked), "commit": code_commit(), "settings_changed": changed_settings(settings),
        "load_average": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
        "wall_s": {"p50": round(statistics.median(walls), 4), "mean": round(statistics.fmean(walls), 4),
                   "max": round(max(walls), 4)},
        "stages_s": {stage: round(statistics.fmean(values), 4) for stage, values in stages.items()},
        "top_self_time": [{"function": name, "share": round(seconds / sampled, 4),
                           "seconds_per_question": round(seconds / len(asked), 4)}
                          for name, seconds in own.most_common(TOP_FUNCTIONS)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, help="the first N sample questions (default: all 30)")
    parser.add_argument("--budget", type=int, default=4)
    parser.add_argument("--html", type=Path, help="also write pyinstrument's page of the last question here")
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as store:
        settings = Settings(qdrant_path=Path(store), collection="profile", context_budget=args.budget)
        ingest_nodes(settings, read_nodes(SAMPLE), build_embed_model(settings.embed_model, settings.embed_batch_size))
        report = asyncio.run(profile(settings, questions(args.limit), args.html))
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: p50 {report['wall_s']['p50']} s over {report['questions']} questions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
