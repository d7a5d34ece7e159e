"""The README's real-LLM figures: the four systems of real_llm_bench.sh's sixth step (HotpotQA 40, MuSiQue 20)
with Qwen2.5-Coder-1.5B, on the questions every system answered, beside the offline dag on the same questions.

    python experiments/real_llm_figure.py --set hotpot --out experiments/results/real-llm-hotpot.png
    python experiments/real_llm_figure.py --set musique --out experiments/results/real-llm-musique.png
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from eval import plot, read_rows, summarize

FOLDERS = {  # set -> (title, the LLM run's folder, the offline run's folder)
    "hotpot": ("HotpotQA dev", "runs/llm-hotpot40-defaults", "runs/offline-hotpot40"),
    "musique": ("MuSiQue train sample", "runs/llm-musique20", "runs/offline-musique20"),
}
SYSTEMS = (  # (system in the LLM run, name in the figure)
    ("single", "single"),
    ("dag-rule", "dag, PLANNER=rule"),
    ("dag", "dag, LLM planner"),
    ("subq", "SubQuestionQueryEngine"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=sorted(FOLDERS), default="hotpot")
    parser.add_argument("--out", type=Path, default=None, help="default experiments/results/real-llm-<set>.png")
    args = parser.parse_args()
    title, llm_folder, offline_folder = FOLDERS[args.set]
    runs = [(llm_folder, system, name) for system, name in SYSTEMS] + [(offline_folder, "dag", "offline dag")]
    rows: dict[str, dict[str, dict]] = defaultdict(dict)  # name -> question id -> row
    for folder, system, name in runs:
        for row in read_rows(Path(folder) / "per_question.jsonl"):
            if row["system"] == system:  # a failed row stays: it scores 0, as in eval.py
                rows[name][row["id"]] = {**row, "system": name}
    common = set.intersection(*(set(by_id) for by_id in rows.values()))
    summary = summarize([by_id[i] for by_id in rows.values() for i in sorted(common)])
    out = args.out or Path(f"experiments/results/real-llm-{args.set}.png")
    plot(summary, out, f"{title}, Qwen2.5-Coder-1.5B, budget 4: the {len(common)} questions all answered",
         metrics=("recall", "joint_recall", "match", "f1"))
    print(f"{out}: {len(common)} questions")


if __name__ == "__main__":
    main()
