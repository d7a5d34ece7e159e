"""Latency A/B: today's dag against an earlier commit's, on the same machine in one run.

    .venv/bin/python experiments/latency_ab.py --base 819cda0 --out experiments/results/latency-ab.json
    .venv/bin/python experiments/latency_ab.py --base HEAD~5 --sets hatch --rounds 1 --out runs/latency-ab.json

The base commit's `src/` and `experiments/` are exported (`git archive`) to a scratch folder and run by their own
eval.py, with this checkout's Python environment, as the `dagrag` package (PYTHONPATH); today's code is this checkout.
Each set runs dag alone (`--systems dag --concurrency 1`: no single run before it fills the cross-encoder's cache)
in ABBA order per round, base, today, today, base, so a drift in the machine's load meets both; each side has its own
index. Per run: p50, p95 and mean seconds per question, and the load average before and after it (the two cores are
shared: a timing without its load says little). Answers are the run's own business; this compares time only.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
from all_sets import BY_NAME
from evalkit.provenance import code_commit

ROOT = Path(__file__).resolve().parent.parent


def export(commit: str, into: Path) -> Path:
    """The commit's src/ and experiments/ under `into`, and a folder to put on PYTHONPATH that imports them as
    `dagrag`; returns that folder."""
    archive = subprocess.run(["git", "archive", "--format=tar", commit, "src", "experiments"], cwd=ROOT,
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    package_root = into / "pkg"
    package_root.mkdir()
    (package_root / "dagrag").symlink_to(into / "src", target_is_directory=True)
    return package_root


class SetFailed(RuntimeError):
    """One side's eval.py could not run a set (an older commit may refuse a question type added since)."""


def latencies(out: Path) -> list[float]:
    rows = (json.loads(line) for line in (out / "per_question.jsonl").read_text(encoding="utf-8").splitlines())
    return [row["metrics"]["latency_s"] for row in rows if row["system"] == "dag" and not row.get("failed")]


def run(side: str, tree: Path, python_path: Path | None, set_name: str, budget: int, scratch: Path,
        label: str) -> dict:
    """eval.py of `tree` on one set, dag only; its latencies and the load around it."""
    out = scratch / "runs" / label
    env = dict(os.environ)
    if python_path is not None:
        env["PYTHONPATH"] = str(python_path)
    command = [sys.executable, str(tree / "experiments" / "eval.py"), *BY_NAME[set_name].eval_args(),
               "--systems", "dag", "--budget", str(budget), "--concurrency", "1",
               "--index-dir", str(scratch / f"index-{side}-{set_name}"), "--out", str(out)]
    load_before = os.getloadavg()[0]
    log = scratch / f"{label}.log"
    with open(log, "w", encoding="utf-8") as output:
        done = subprocess.run(command, cwd=tree, env=env, stdout=output, stderr=subprocess.STDOUT)
    if done.returncode != 0:  # the scratch folder goes with the run: say what eval.py said first
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
        tail = tail.replace(f"{tree}/", "").replace(f"{ROOT}/", "")  # the report names files, not this machine's paths
        raise SetFailed(f"{side}'s eval.py exited {done.returncode} on {set_name}:\n{tail}")
    load_after = os.getloadavg()[0]
    seconds = latencies(out)
    return {"side": side, "set": set_name, "questions": len(seconds),
            "p50_s": round(float(np.percentile(seconds, 50)), 3), "p95_s": round(float(np.percentile(seconds, 95)), 3),
            "mean_s": round(float(np.mean(seconds)), 3),
            "load_before": round(load_before, 2), "load_after": round(load_after, 2)}


def timed_set(set_name: str, sides: dict[str, tuple[Path, Path | None]], rounds: int, budget: int, scratch: Path,
              first: int) -> list[dict]:
    """`rounds` ABBA rounds of one set (base, today, today, base); raises SetFailed if any run fails, so a set is
    either timed on both sides or not at all."""
    runs: list[dict] = []
    for _ in range(rounds):
        for side in ("base", "today", "today", "base"):
            label = f"{set_name}-{first + len(runs)}-{side}"
            print(f"== {label}", flush=True)
            runs.append(run(side, *sides[side], set_name, budget, scratch, label))
            print(f"   {runs[-1]}", flush=True)
    return runs


def summarise(base: str, args: argparse.Namespace, runs: list[dict], skipped: dict[str, str]) -> dict:
    """The report: every run, each timed set's median p50 per side, and the sets that could not be timed, and why."""
    timed = list(dict.fromkeys(r["set"] for r in runs))
    return {"base": base, "today": code_commit(), "budget": args.budget, "sets": ",".join(timed),
            "rounds": args.rounds, "runs": runs, "skipped": skipped,
            "p50_s": {set_name: {side: round(float(np.median([r["p50_s"] for r in runs
                                                            if r["set"] == set_name and r["side"] == side])), 3)
                                 for side in ("base", "today")} for set_name in timed}}


def write_summary(out: Path, summary: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the earlier commit (any git revision)")
    parser.add_argument("--sets", default="hotpotqa,hatch", help=f"comma list of {', '.join(BY_NAME)}")
    parser.add_argument("--budget", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds per set (each runs both sides twice)")
    parser.add_argument("--out", required=True, help="the JSON to write")
    args = parser.parse_args(argv)
    unknown = [name for name in args.sets.split(",") if name not in BY_NAME]
    if unknown:
        parser.error(f"--sets: unknown {', '.join(unknown)} (known: {', '.join(BY_NAME)})")
    found = subprocess.run(["git", "rev-parse", "--short", "--verify", "--quiet", f"{args.base}^{{commit}}"], cwd=ROOT,
                           capture_output=True, text=True)
    if found.returncode != 0:
        parser.error(f"--base: {args.base!r} names no commit of this repository")
    base = found.stdout.strip()
    runs: list[dict] = []
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="latency-ab-") as folder:
        scratch = Path(folder)
        base_tree = scratch / "base"
        base_path = export(base, base_tree)
        sides = {"base": (base_tree, base_path), "today": (ROOT, None)}
        for set_name in args.sets.split(","):
            try:
                runs += timed_set(set_name, sides, args.rounds, args.budget, scratch, first=len(runs) + 1)
            except SetFailed as failure:  # the other sets still count: an A/B of one set is an A/B
                skipped[set_name] = str(failure)
                print(f"   skipped {set_name}: {failure}", flush=True)
            summary = summarise(base, args, runs, skipped)
            write_summary(Path(args.out), summary)  # after every set: nothing measured is lost
    for set_name, sides_p50 in summary["p50_s"].items():
        print(f"{set_name}: dag p50 {sides_p50['today']} s today ({summary['today']}) against {sides_p50['base']} s "
              f"at {base}")
    if not summary["p50_s"]:
        print("no set could be timed on both sides", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
