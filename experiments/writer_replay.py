"""The offline writer again, on the evidence a run kept: what a change to the writer does to `match`, in minutes.

    .venv/bin/python experiments/writer_replay.py runs/all-sets                 # every run folder under it
    .venv/bin/python experiments/writer_replay.py runs/all-sets/click-k4 --changed
    .venv/bin/python experiments/writer_replay.py runs/all-sets --systems dag,single   # one search's answers too

eval.py keeps each row's sources whole (text, metadata, the subqueries that kept them) and its executed plan. This
reads a run's dag rows back (or those of the `--systems` named), writes each answer again with today's offline
WriterAgent (the cross-encoder scores the sentences; nothing is searched) and scores it as eval.py does
(`eval.score`). A writer change is so measured on every set in minutes, where a rerun of every set takes an hour; an
eval.py run at this code gives the same answers wherever retrieval is the same. Before changing the writer, replay
at the run's own code: every answer should come back identical (the line says how many did).

Only the answerable questions the run's data file holds are replayed, and only where the run wrote an answer: a
row that abstained or failed had nothing written, and out-of-collection rows have no gold answer. Runs from before
eval.py kept the sources' text cannot be replayed and are named.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval import ROWS_FILE, RUN_FILE, TokenCounter, load_examples, read_rows, score
from evalkit.data import Example

from dagrag import Settings
from dagrag.core.plan import ExecutedPlan
from dagrag.core.result import RunLedger, Source
from dagrag.stack import build_reranker, build_writer

SYSTEMS = ("dag",)  # the default; one search's answers are written by the same writer and can be replayed too


@dataclass(frozen=True)
class Replayed:
    """One row written again: the run's answer and match, and today's."""

    id: str
    found: bool  # every piece of gold evidence was among the sources (joint recall 1)
    answer_then: str
    match_then: float
    answer_now: str
    match_now: float
    f1_then: float
    f1_now: float  # falls as sentences that do not answer are added: the cost `match` does not show


def kept_whole(row: dict[str, Any]) -> bool:
    """Whether the row keeps its sources whole (eval.py has since session 65), so its answer can be written again."""
    return bool(row.get("sources")) and all("text" in source for source in row["sources"])


def sources_of(row: dict[str, Any]) -> list[Source]:
    return [Source.model_validate({k: v for k, v in source.items() if k != "title"}) for source in row["sources"]]


async def replay_row(writer: Any, example: Example, row: dict[str, Any]) -> Replayed:
    plan = ExecutedPlan.model_validate(row["plan"])
    sources = sources_of(row)
    written = await writer.awrite(plan.query, plan, sources, RunLedger())
    metrics = score(example, written.text, [s.node_id for s in sources], [s.text for s in sources], TokenCounter(),
                    {})
    return Replayed(row["id"], row["metrics"].get("joint_recall") == 1, row["answer"], row["metrics"]["match"],
                    written.text, metrics["match"], row["metrics"]["f1"], metrics["f1"])


def examples_of(run: Path) -> dict[str, Example]:
    """The answerable questions the run at `run` asked, by id (its run.json names their data file)."""
    config = json.loads((run / RUN_FILE).read_text(encoding="utf-8"))
    return {example.id: example for example in load_examples(Path(config["data"]))}


async def replay_run(writer: Any, run: Path, system: str = SYSTEMS[0]) -> list[Replayed] | str:
    """Every replayable row of `system` in the run at `run`, written again; or why none can be."""
    rows = [row for row in read_rows(run / ROWS_FILE) if row.get("system") == system]
    if not rows:
        return f"no {system} rows"
    examples = examples_of(run)
    answered = [row for row in rows if row["id"] in examples and not row.get("failed")
                and not row.get("abstain_reason")]
    if answered and not any(kept_whole(row) for row in answered):
        return "its rows do not keep the sources' text (run before eval.py kept it): run it again"
    return [await replay_row(writer, examples[row["id"]], row) for row in answered if kept_whole(row)]


def summary_line(name: str, replayed: list[Replayed]) -> str:
    def mean(items: list[Replayed], value: Callable[[Replayed], float], digits: int = 3) -> str:
        return f"{sum(map(value, items)) / len(items):.{digits}f}" if items else "-"

    def then_now(items: list[Replayed], then: Callable[[Replayed], float], now: Callable[[Replayed], float],
                 digits: int = 3) -> str:
        return f"{mean(items, then, digits)} -> {mean(items, now, digits)}"

    found = [r for r in replayed if r.found]
    won = sum(r.match_now > r.match_then for r in replayed)
    lost = sum(r.match_now < r.match_then for r in replayed)
    same = sum(r.answer_now == r.answer_then for r in replayed)
    match_then, match_now = (lambda r: r.match_then), (lambda r: r.match_now)
    # `match` only grows as sentences are added; F1 and the answer's length say what an addition costs.
    return (f"{name}: {len(replayed)} answers, {same} identical; "
            f"match {then_now(replayed, match_then, match_now)} (won {won}, lost {lost}); "
            f"where found ({len(found)}) {then_now(found, match_then, match_now)}; "
            f"F1 {then_now(replayed, lambda r: r.f1_then, lambda r: r.f1_now)}; "
            f"characters {then_now(replayed, lambda r: len(r.answer_then), lambda r: len(r.answer_now), 0)}")


def run_folders(path: Path) -> list[Path]:
    """`path` if it is a run folder, else the run folders right under it, by name."""
    if (path / ROWS_FILE).exists():
        return [path]
    if not path.is_dir():
        return []
    return sorted(folder for folder in path.iterdir() if (folder / ROWS_FILE).exists())


async def main_async(args: argparse.Namespace) -> int:
    folders = run_folders(Path(args.path))
    if not folders:
        print(f"error: no run folder ({ROWS_FILE}) at or under {args.path}", file=sys.stderr)
        return 2
    settings = Settings()
    writer = build_writer(settings, build_reranker(settings))
    systems = [name.strip() for name in args.systems.split(",") if name.strip()]
    for folder, system in ((folder, system) for folder in folders for system in systems):
        name = folder.name if systems == ["dag"] else f"{folder.name} {system}"
        replayed = await replay_run(writer, folder, system)
        if isinstance(replayed, str):
            print(f"{name}: not replayed, {replayed}")
            continue
        print(summary_line(name, replayed), flush=True)
        for r in replayed if args.changed else []:
            if r.match_now != r.match_then or (args.changed == "answers" and r.answer_now != r.answer_then):
                print(f"  {r.id}: match {r.match_then:.0f} -> {r.match_now:.0f}{' (found)' if r.found else ''}\n"
                      f"    then: {' '.join(r.answer_then.split())[:400]}\n"
                      f"    now:  {' '.join(r.answer_now.split())[:400]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", help="a run folder of eval.py (--out), or a folder of them (runs/all-sets)")
    parser.add_argument("--changed", nargs="?", const="match", choices=("match", "answers"),
                        help="also list the questions whose match changed (or, with 'answers', whose answer did)")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help="comma list of the systems whose rows are written again (dag, single, ...; default dag)")
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
