"""The README's real-LLM figure: the systems of real_llm_bench.sh's HotpotQA runs, on the questions every
system answered, side by side with the offline rows of the same questions.

    python experiments/real_llm_figure.py --out experiments/results/real-llm-hotpot.png
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from eval import plot, read_rows, summarize

RUNS = (  # (folder, system in it, name in the figure)
    ("runs/llm-hotpot20", "single", "single"),
    ("runs/llm-hotpot20", "dag", "dag (resolver on)"),
    ("runs/llm-hotpot20-defaults", "dag", "dag (defaults)"),
    ("runs/llm-hotpot20", "dag-rule", "dag-rule (resolver on)"),
    ("runs/llm-hotpot20-rule", "dag-rule", "dag, PLANNER=rule"),
    ("runs/llm-hotpot20", "subq", "subq"),
    ("runs/offline-hotpot20", "dag", "offline dag"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("experiments/results/real-llm-hotpot.png"))
    args = parser.parse_args()
    rows: dict[str, dict[str, dict]] = defaultdict(dict)  # name -> question id -> row
    for folder, system, name in RUNS:
        for row in read_rows(Path(folder) / "per_question.jsonl"):
            if row["system"] == system:
                rows[name][row["id"]] = {**row, "system": name}
    common = set.intersection(*(set(by_id) for by_id in rows.values()))
    summary = summarize([by_id[i] for by_id in rows.values() for i in sorted(common)])
    plot(summary, args.out, f"HotpotQA dev, Qwen2.5-Coder-1.5B, budget 4: the {len(common)} questions all answered",
         metrics=("recall", "joint_recall", "match", "f1"))
    print(f"{args.out}: {len(common)} questions")


if __name__ == "__main__":
    main()
