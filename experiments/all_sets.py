"""Every benchmark set at budgets 4 and 2, dag against single: run them, keep their summaries, write the tables.

    .venv/bin/python experiments/all_sets.py run              # eval.py on every set and budget, one at a time
    .venv/bin/python experiments/all_sets.py run --sets hatch,black --budgets 4
    .venv/bin/python experiments/all_sets.py table            # docs/benchmarks.md and the pictures, from the files

`run` calls eval.py once per set and budget (`--systems single,dag --concurrency 1`, its own --out under
runs/all-sets/), then copies each summary with the commit it ran on to experiments/results/all-sets/. Both
actions then draw the pictures beside the results (all-sets.png, all-answers.png) and rewrite docs/benchmarks.md
(experiments/benchmarks_doc.py, which renders this module's `table()` and `answers_table()`). The tables are never
typed by hand: tests/test_all_sets.py and tests/test_benchmarks_doc.py fail when docs/benchmarks.md and the result
files disagree.

The held-out set (`HELD_OUT`) is a documentation corpus whose questions were written before any rule was tuned and
never looked at while tuning; it is run like the others and marked in the table. A result file's `held_out` says
whether its set was the held-out one when it ran (scikit-build-core's was, until Flask's set was written to replace
it, Flask's until Click's, Click's until structlog's, structlog's until attrs's, attrs's until marshmallow's,
marshmallow's until cattrs's, cattrs's until coverage.py's, coverage.py's until Werkzeug's, Werkzeug's until
Jinja's, and Jinja's until AnyIO's: a set whose results have informed a decision is no longer held out).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.docs import folder_sha256
from evalkit.metrics import sign_test, won_lost
from evalkit.provenance import changed_settings, code_commit, code_version

from dagrag import Settings

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
DATA = ROOT / "experiments" / "data"
RESULTS = ROOT / "experiments" / "results" / "all-sets"
BUDGETS = (4, 2)
HELD_OUT = "anyio"
# Questions no set's collection answers, asked against every set at budget 4 (abstaining barely depends on the
# budget): the check set, never used to choose ABSTAIN_BELOW (out_of_collection_tune.jsonl was).
OUT_OF_COLLECTION = DATA / "out_of_collection_check.jsonl"
OOC_BUDGET = 4
# Answerable questions that name the asker's own code (`my sync_repos command`), which no page contains, asked at
# OOC_BUDGET against the docs set each names: an abstention on one is a false one. The tune file chose how code a
# question names is read; the check file was written apart from it and never used to choose.
OWN_CODE = (DATA / "own_code_questions.jsonl", DATA / "own_code_check.jsonl")


@dataclass(frozen=True)
class BenchmarkSet:
    name: str
    data: Path
    corpus: Path | None = None  # docs sets: the folder the evidence quotes
    limit: int | None = None  # the first N questions only

    @property
    def description(self) -> str:
        name = f"{self.name} docs" if self.corpus else self.name
        return f"{name} (first {self.limit})" if self.limit else name

    def eval_args(self) -> list[str]:
        args = ["--data", str(self.data)] + (["--limit", str(self.limit)] if self.limit else [])
        return args + (["--corpus", str(self.corpus)] if self.corpus else [])


def _docs(name: str, questions: str) -> BenchmarkSet:
    return BenchmarkSet(name, DATA / questions, DATA / "docs_corpus" / name / "docs")


SETS = (
    # The first 120 of HotpotQA's 485 (the guard every change runs; all 485 at both budgets take ~40 minutes:
    # eval.py --data ../shared/data/hotpotqa_dev.jsonl).
    BenchmarkSet("hotpotqa", SHARED / "hotpotqa_dev.jsonl", limit=120),
    BenchmarkSet("musique", SHARED / "musique_train_sample.jsonl"),
    BenchmarkSet("2wiki", SHARED / "2wiki_dev_sample.jsonl"),
    _docs("hatch", "docs_questions.jsonl"),
    _docs("black", "docs_black_questions.jsonl"),
    _docs("markdown", "docs_markdown_questions.jsonl"),
    _docs("scikit-build-core", "docs_scikit-build-core_questions.jsonl"),  # held out before Flask's set was written
    _docs("flask", "docs_flask_questions.jsonl"),  # held out before Click's set was written
    _docs("click", "docs_click_questions.jsonl"),  # held out before structlog's set was written
    _docs("structlog", "docs_structlog_questions.jsonl"),  # held out before attrs's set was written
    _docs("attrs", "docs_attrs_questions.jsonl"),  # held out before marshmallow's set was written
    _docs("marshmallow", "docs_marshmallow_questions.jsonl"),  # held out before cattrs's set was written
    _docs("cattrs", "docs_cattrs_questions.jsonl"),  # held out before coverage's set was written
    _docs("coverage", "docs_coverage_questions.jsonl"),  # held out before Werkzeug's set was written
    _docs("werkzeug", "docs_werkzeug_questions.jsonl"),  # held out before Jinja's set was written
    _docs("jinja2", "docs_jinja2_questions.jsonl"),  # held out before AnyIO's set was written
    _docs(HELD_OUT, f"docs_{HELD_OUT}_questions.jsonl"),
)
BY_NAME = {s.name: s for s in SETS}


def result_path(name: str, budget: int) -> Path:
    return RESULTS / f"{name}-k{budget}.json"


def made_otherwise(out: Path, code: str, settings: dict[str, Any], corpus: Path | None = None) -> bool:
    """Whether the eval run in `out` (its run.json) was made by code other than `code` (`code_version`), with
    other settings than `settings` (`changed_settings`; a run.json that records none was made before they were
    recorded) or from a docs corpus other than the folder `corpus` now holds: then it is started over, not resumed.
    An unfinished run of the same code, settings and corpus is resumed."""
    try:
        made = json.loads((out / "run.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return False  # no run there yet (or no readable config, which eval.py itself reports)
    return (made.get("code") != code or made.get("settings") != settings
            or made.get("corpus_sha256") != (folder_sha256(corpus) if corpus else None))


def run_one(benchmark: BenchmarkSet, budget: int, out_root: Path) -> Path:
    """eval.py for one set and budget; returns its output folder (an unfinished run there of the same code is
    resumed; one of other code starts over)."""
    out = out_root / f"{benchmark.name}-k{budget}"
    systems = "single,dag,dag-no-bridge" if benchmark.corpus else "single,dag"  # docs: the setting users weigh
    command = [sys.executable, str(ROOT / "experiments" / "eval.py"), *benchmark.eval_args(),
               "--systems", systems, "--budget", str(budget), "--concurrency", "1", "--out", str(out),
               "--index-dir", str(ROOT / ".dagrag" / f"eval-{benchmark.name}")]
    if budget == OOC_BUDGET and OUT_OF_COLLECTION.exists():
        command += ["--out-of-collection", str(OUT_OF_COLLECTION)]
    if budget == OOC_BUDGET and benchmark.corpus:
        own = [path for path in OWN_CODE if path.exists()]
        command += [arg for path in own for arg in ("--own-code", str(path))]
        command += ["--own-code-set", benchmark.name] if own else []
    if made_otherwise(out, code_version(), changed_settings(Settings()), benchmark.corpus):
        command.append("--fresh")  # resumed, its rows would be counted as this code's and these settings'
    print(f"== {benchmark.name} at budget {budget}: {' '.join(command[1:])}", flush=True)
    subprocess.run(command, cwd=ROOT, check=True)
    return out


def _relative(value: object) -> object:
    """A path under the project (or beside it, ../shared) as a relative path: result files name no machine's folders."""
    if isinstance(value, str) and value.startswith("/"):
        for base, shown in ((ROOT, "."), (ROOT.parent, "..")):
            if Path(value).is_relative_to(base):
                return str(Path(shown) / Path(value).relative_to(base))
    return value


def keep(benchmark: BenchmarkSet, budget: int, out: Path, ran_on: str) -> None:
    """Copy a run's summary, with the commit and settings it ran with, to experiments/results/all-sets/."""
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    systems = {name: {key: value for key, value in stats.items() if key != "by_type"} | {
        "by_type": {kind: {k: block.get(k, 0.0) for k in ("n", "recall", "joint_recall", "match", "abstained")}
                    # a summary made before eval.py reported the sides' split has none: the table leaves it out
                    | ({"sides_split": block["sides_split"]} if "sides_split" in block else {})
                    for kind, block in stats.get("by_type", {}).items()}} for name, stats in summary["systems"].items()}
    config = {key: _relative(value) for key, value in summary.get("config", {}).items()}
    record = {"set": benchmark.name, "budget": budget, "commit": ran_on, "held_out": benchmark.name == HELD_OUT,
              "config": config, "systems": systems}
    RESULTS.mkdir(parents=True, exist_ok=True)
    result_path(benchmark.name, budget).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def records() -> list[dict]:
    """Every kept result, in the table's order (sets as listed, budget 4 before 2)."""
    return [json.loads(result_path(s.name, b).read_text(encoding="utf-8")) for s in SETS for b in BUDGETS
            if result_path(s.name, b).exists()]


def row_name(record: dict) -> str:
    """A result's set as its table rows name it: its description, marked when it is the held-out set."""
    return BY_NAME[record["set"]].description + (" (held out)" if record["set"] == HELD_OUT else "")


def table() -> str:
    """The Markdown table of every kept result: recall and joint recall, single against dag, per set and budget."""
    rows = ["| set | questions | budget | single recall | dag recall | single joint | dag joint | dag − single "
            "(joint) | questions dag won / lost, joint (sign test p) | commit |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for record in records():
        single, dag = record["systems"]["single"], record["systems"]["dag"]
        delta = dag["joint_recall"] - single["joint_recall"]
        name = row_name(record)
        paired = dag.get("against_single", {}).get("joint_recall")
        rows.append(f"| {name} | {dag['n']} | {record['budget']} | {single['recall']:.3f} | {dag['recall']:.3f} | "
                    f"{single['joint_recall']:.3f} | {dag['joint_recall']:.3f} | {delta:+.3f} | "
                    f"{won_lost(paired) if paired else '-'} | {record['commit']} |")
    return "\n".join(rows)


def pooled_outcome(outcomes: list[dict]) -> dict:
    """Paired outcomes of several sets as one (the questions are independent, so won and lost add up), with the
    sign test's p of the sum."""
    return sign_test(sum(o["won"] for o in outcomes), sum(o["lost"] for o in outcomes))


def pooled_table() -> str:
    """Question by question, dag against single, pooled over the Wikipedia sets, the documentation sets tuned on, and
    the held-out set, per budget: a set's difference of a question or two is chance; a pooled one may not be. Only
    results whose file pairs the systems (eval.py's `against_single`) count; "" when none does."""
    groups = {"Wikipedia sets": lambda r: BY_NAME[r["set"]].corpus is None,
              "documentation sets": lambda r: BY_NAME[r["set"]].corpus is not None and r["set"] != HELD_OUT,
              "held-out documentation set": lambda r: r["set"] == HELD_OUT}
    rows = ["| sets | budget | questions | joint recall: dag won / lost (sign test p) | recall: dag won / lost (p) |",
            "|---|---|---|---|---|"]
    kept = records()
    for group, member in groups.items():
        for budget in BUDGETS:
            paired = [r for r in kept if r["budget"] == budget and member(r)
                      and "against_single" in r["systems"]["dag"]]
            if paired:
                against = [r["systems"]["dag"]["against_single"] for r in paired]
                rows.append(f"| {group} ({len(paired)}) | {budget} | {sum(r['systems']['dag']['n'] for r in paired)} "
                            f"| {won_lost(pooled_outcome([a['joint_recall'] for a in against]))} "
                            f"| {won_lost(pooled_outcome([a['recall'] for a in against]))} |")
    return "\n".join(rows) if len(rows) > 2 else ""


def answers_table() -> str:
    """The Markdown table of what the answers say: gold answer in the answer (`match`; docs: or every evidence quote),
    the same over the questions whose evidence was all found, how often an answerable question abstained, how often
    one naming the asker's own code did, and how often an out-of-collection one did, per set and budget."""
    rows = ["| set | budget | single match | dag match | dag match where the evidence was found | dag abstained "
            "(answerable) | dag abstained (answerable, naming the asker's own code) | dag abstained (out of "
            "collection) | commit |", "|---|---|---|---|---|---|---|---|---|"]
    for record in records():
        single, dag = record["systems"]["single"], record["systems"]["dag"]
        if "match" not in dag:
            continue
        own, ooc = (dag["by_type"].get(kind) for kind in ("own-code", "out-of-collection"))
        name = row_name(record)
        found = (f"{dag['match_where_found']:.3f} ({dag['n_found']} questions)" if "match_where_found" in dag
                 else "-")
        rows.append(f"| {name} | {record['budget']} | {single['match']:.3f} | {dag['match']:.3f} | {found} | "
                    f"{dag.get('abstained', 0.0):.3f} | {_abstained(own)} | {_abstained(ooc)} | {record['commit']} |")
    return "\n".join(rows)


def _abstained(block: dict | None) -> str:
    return f"{block['abstained']:.3f} ({block['n']} questions)" if block else "-"


def comparisons_only_table() -> str:
    """Docs sets: joint recall of one search, of dag, and of dag that splits comparisons only (eval.py's system
    dag-no-bridge, DAGRAG_PLANNER_BRIDGE=false), where the result file has it."""
    rows = ["| set | budget | single joint | dag joint | comparisons split, no bridge hops: joint | its − single | "
            "commit |", "|---|---|---|---|---|---|---|"]
    for record in records():
        mine = record["systems"].get("dag-no-bridge")
        if BY_NAME[record["set"]].corpus is None or mine is None:
            continue
        single, dag = record["systems"]["single"], record["systems"]["dag"]
        delta = round(mine["joint_recall"] - single["joint_recall"], 4) + 0.0  # an equal share reads +0.000
        name = row_name(record)
        rows.append(f"| {name} | {record['budget']} | {single['joint_recall']:.3f} | {dag['joint_recall']:.3f} | "
                    f"{mine['joint_recall']:.3f} | {delta:+.3f} | {record['commit']} |")
    return "\n".join(rows)


def comparisons_table() -> str:
    """Per set and budget, the questions of type comparison: how many, the share dag searched side by side (two or
    more sides in one layer, eval.py's `sides_split`), and the share whose evidence was all found (joint recall) by
    one search and by dag; then the documentation sets pooled at budget 4. Sets whose file has no `sides_split`
    (made before eval.py reported it) are left out."""
    rows = ["| set | budget | comparisons | dag: one search per side | all evidence found: single | all evidence "
            "found: dag | commit |", "|---|---|---|---|---|---|---|"]
    pooled = {"n": 0, "split": 0.0, "single": 0.0, "dag": 0.0}
    for record in records():
        single = record["systems"]["single"].get("by_type", {}).get("comparison")
        dag = record["systems"]["dag"].get("by_type", {}).get("comparison")
        if not single or not dag or "sides_split" not in dag:
            continue
        rows.append(f"| {row_name(record)} | {record['budget']} | {dag['n']} | {dag['sides_split']:.3f} | "
                    f"{single['joint_recall']:.3f} | {dag['joint_recall']:.3f} | {record['commit']} |")
        if BY_NAME[record["set"]].corpus is not None and record["budget"] == max(BUDGETS):
            pooled["n"] += dag["n"]
            pooled["split"] += dag["sides_split"] * dag["n"]
            pooled["single"] += single["joint_recall"] * single["n"]
            pooled["dag"] += dag["joint_recall"] * dag["n"]
    if len(rows) == 2:
        return ""
    n = pooled["n"]
    summary = (f"\n\nThe documentation sets together, budget {max(BUDGETS)}: {n} comparisons, "
               f"{pooled['split'] / n:.3f} searched side by side, all evidence found for {pooled['dag'] / n:.3f} "
               f"(one search: {pooled['single'] / n:.3f}).") if n else ""
    return "\n".join(rows) + summary


def tick_label(record: dict, width: int = 12) -> str:
    """A set's name under its bars: one part a line, and a long hyphenated name cut after a hyphen, so that
    neighbouring labels do not run into each other ("scikit-build-core docs" -> "scikit-", "build-core", "docs")."""
    name = BY_NAME[record["set"]].description.replace(" (first", "\n(first").replace(" docs", "\ndocs")
    lines = []
    for line in name.split("\n"):
        while len(line) > width and "-" in line[1:width]:
            cut = line.rindex("-", 1, width) + 1
            lines.append(line[:cut])
            line = line[cut:]
        lines.append(line)
    return "\n".join(lines + (["(held out)"] if record["set"] == HELD_OUT else []))


def figure_width() -> float:
    """Inches for two panels of every set's bars: wide enough that a label of 11 letters ("marshmallow") does not
    run into its neighbour's."""
    return max(13.0, 1.3 * len(SETS))


def plot(path: Path) -> None:
    """Joint recall of single and dag per set, one panel per budget, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kept = records()
    figure, axes = plt.subplots(1, len(BUDGETS), figsize=(figure_width(), 4.4), sharey=True)
    for axis, budget in zip(axes, BUDGETS):
        rows = [r for r in kept if r["budget"] == budget]
        names = [tick_label(r) for r in rows]
        where = range(len(rows))
        for offset, system, colour in ((-0.2, "single", "#9aa5b1"), (0.2, "dag", "#2f6fb0")):
            values = [r["systems"][system]["joint_recall"] for r in rows]
            axis.bar([x + offset for x in where], values, width=0.4, label=system, color=colour)
        axis.set_xticks(list(where), names, fontsize=7)  # labels wrap (tick_label), so they stand upright
        axis.set_title(f"budget {budget}")
        axis.set_ylim(0, 1.15)  # room above the bars for the legend
        axis.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
        axis.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("joint recall (all gold evidence in the sources)")
    axes[0].legend(loc="upper right", fontsize=8, ncol=2)
    figure.suptitle("dag against one search, every benchmark set (experiments/results/all-sets)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def answers_plot(path: Path) -> None:
    """What the answers say at budget 4, per set: single's and dag's match, and how often dag abstained on the
    answerable questions and on the out-of-collection ones, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in records() if r["budget"] == OOC_BUDGET and "match" in r["systems"]["dag"]]
    names = [tick_label(r) for r in rows]
    figure, (matches, abstaining) = plt.subplots(1, 2, figsize=(figure_width(), 4.4))
    where = range(len(rows))
    for offset, system, colour in ((-0.2, "single", "#9aa5b1"), (0.2, "dag", "#2f6fb0")):
        matches.bar([x + offset for x in where], [r["systems"][system]["match"] for r in rows], width=0.4,
                    label=system, color=colour)
    matches.set_title(f"answer holds the gold answer (budget {OOC_BUDGET})")
    answerable = [r["systems"]["dag"].get("abstained", 0.0) for r in rows]
    outside = [r["systems"]["dag"]["by_type"].get("out-of-collection", {}).get("abstained", 0.0) for r in rows]
    abstaining.bar([x - 0.2 for x in where], answerable, width=0.4, label="answerable questions", color="#c9a227")
    abstaining.bar([x + 0.2 for x in where], outside, width=0.4, label="out-of-collection questions",
                   color="#7a3b8f")
    abstaining.set_title("dag abstained")
    for axis in (matches, abstaining):
        axis.set_xticks(list(where), names, fontsize=7)
        axis.set_ylim(0, 1.25)  # room above the bars for the legend
        axis.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
        axis.grid(axis="y", alpha=0.3)
        axis.legend(loc="upper left", fontsize=8, ncol=2)
    figure.suptitle("what the answers say, every benchmark set (experiments/results/all-sets)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_docs() -> None:
    """Draw both pictures and rewrite docs/benchmarks.md from the result files."""
    import benchmarks_doc  # beside this file; it imports this module for the tables

    plot(RESULTS / "all-sets.png")
    answers_plot(RESULTS / "all-answers.png")
    benchmarks_doc.write()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("run", "table"),
                        help="run: eval.py on the sets, then table; table: the pictures and docs/benchmarks.md")
    parser.add_argument("--sets", default=",".join(s.name for s in SETS),
                        help=f"comma list of {', '.join(BY_NAME)}")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)), help="comma list of budgets")
    parser.add_argument("--out", default=str(ROOT / "runs" / "all-sets"), help="where eval.py writes its runs")
    args = parser.parse_args(argv)
    if args.action == "run":
        unknown = [name for name in args.sets.split(",") if name not in BY_NAME]
        if unknown:
            parser.error(f"--sets: unknown {', '.join(unknown)} (known: {', '.join(BY_NAME)})")
        ran_on = code_commit()
        for name in args.sets.split(","):
            for budget in (int(b) for b in args.budgets.split(",")):
                out = run_one(BY_NAME[name], budget, Path(args.out))
                keep(BY_NAME[name], budget, out, ran_on)
    write_docs()
    print(table())
    print()
    print(answers_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
