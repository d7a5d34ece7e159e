"""Replay the hop rule (src/work_flows/hop_rule.py) over finished eval runs, to choose or check its threshold.

With the rule off, a run's `dag` rows are what every hop gives and its `single` rows what one search gives; a
question whose hop the rule skips gets exactly the single path's passages, and one whose hop runs gets the dag
row (or, when the hop came back uncovered, the single path's again). So one recorded run answers what the rule
(or a variant of it, edited into `skipped` below) would score, without running the questions again:

    DAGRAG_BRIDGE_WHEN_NEEDED=false python experiments/hop_rule_replay.py record -- \\
        --data ../shared/data/hotpotqa_dev.jsonl --systems single,dag --budget 4 --out runs/hotpot-k4-rule-off
    python experiments/hop_rule_replay.py replay runs/hotpot-k4-rule-off

`record` is eval.py with every argument passed on; its rows also keep each source's text, title and section,
and each subquery's report. `replay` prints the mean evidence recall and joint recall by question type.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import eval as harness  # the benchmark harness, unchanged

from dagrag.core.result import QueryResult
from dagrag.work_flows.hop_rule import unexplained_words

Row = dict[str, Any]


def record(eval_args: list[str]) -> int:
    """eval.py, whose dagrag rows also keep what the replay needs."""
    plain_row = harness.dagrag_row

    def row_with_passages(example: Any, result: QueryResult, seconds: float, tokens: Any) -> Row:
        row = plain_row(example, result, seconds, tokens)
        for kept, source in zip(row["sources"], result.sources):
            kept.update(node_id=source.node_id, text=source.text, section=source.metadata.get("section", ""))
        row["subquery_reports"] = [report.model_dump(mode="json") for report in result.subqueries]
        return row

    harness.dagrag_row = row_with_passages
    return harness.main(eval_args)


def is_generic_bridge(row: Row) -> bool:
    """The rule planner's bridge: s2 = `{s1} <the question>` (what hop_rule.bridge_parent recognises)."""
    subqueries = row["plan"]["subqueries"]
    return len(subqueries) == 2 and subqueries[1]["text"] == "{s1} " + row["plan"]["query"]


def skipped(single: Row) -> bool:
    """Rule 1 on the single path's passages (s1's best CONTEXT_BUDGET, which is what the single row holds):
    s1 covered, and its best passage with the others of the same document explain every word of the question."""
    if not single["sources"] or single.get("subquery_reports", [{}])[0].get("status") != "covered":
        return False
    document = single["sources"][0]["title"]
    shown = [f"{s['title']} {s.get('section', '')} {s['text']}" for s in single["sources"] if s["title"] == document]
    return not unexplained_words(single["question"], shown)


def hop_uncovered(dag: Row) -> bool:
    """Rule 2: the hop's best passage stayed under COVERAGE_MIN_SCORE."""
    return any(r["id"] == "s2" and r["status"] == "uncovered" for r in dag.get("subquery_reports", []))


def replay(run: Path) -> None:
    rows: dict[str, dict[str, Row]] = defaultdict(dict)
    for line in (run / harness.ROWS_FILE).read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        rows[row["id"]][row["system"]] = row
    pairs = [(r["single"], r["dag"]) for r in rows.values() if {"single", "dag"} <= r.keys()]
    if not pairs or "text" not in pairs[0][0]["sources"][0]:
        raise SystemExit(f"{run}: no single and dag rows with source texts (make them with `record`)")
    variants: dict[str, Any] = {
        "single": lambda s, d: s, "dag (rule off)": lambda s, d: d,
        "dag, rule 1 (skip)": lambda s, d: s if is_generic_bridge(d) and skipped(s) else d,
        "dag, rules 1 and 2": lambda s, d: s if is_generic_bridge(d) and (skipped(s) or hop_uncovered(d)) else d}
    print(f"{run}: {len(pairs)} questions, {sum(is_generic_bridge(d) for _, d in pairs)} generic bridges")
    for name, choose in variants.items():
        by_type: dict[str, list[Row]] = defaultdict(list)
        skips = 0
        for single, dag in pairs:
            chosen = choose(single, dag)
            skips += chosen is single and name.startswith("dag, rule")
            by_type["all"].append(chosen)
            by_type[single["type"]].append(chosen)
        cells = [f"{t} {sum(r['metrics']['recall'] for r in v) / len(v):.3f}"
                 f"/{sum(r['metrics']['joint_recall'] for r in v) / len(v):.3f}" for t, v in sorted(by_type.items())]
        print(f"  {name:24} recall/joint: {'  '.join(cells)}" + (f"  (single path taken: {skips})" if skips else ""))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["record"]:
        return record([a for a in argv[1:] if a != "--"])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["replay"])
    parser.add_argument("run", type=Path, help="an eval output folder made by `record`")
    args = parser.parse_args(argv)
    replay(args.run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
