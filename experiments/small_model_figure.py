"""What the small-model path changes, with a real local LLM (scripts/local_llm.sh): VERIFIER=auto (the offline
judge for a small model) and the LLM writer reading whole passages or excerpts (LLM_EVIDENCE_SENTENCES), against
whole passages with the LLM judging, on the same questions; then the excerpts on HotpotQA 40 and MuSiQue 20.
The runs are made by experiments/small_model_bench.sh; this reads them and writes a JSON summary and a picture
for docs/benchmarks.md.

    python experiments/small_model_figure.py --runs runs --out experiments/results/real-llm-small-model.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from statistics import mean
from typing import Any

from eval import read_rows, summarize

SYSTEMS = ("single", "dag-rule")
CONFIGS = {  # name -> (run folder, what it is)
    "before": ("llm-hotpot40-before", "whole passages, LLM verifier"),
    "whole": ("llm-hotpot40-whole", "whole passages, offline verifier"),
    "excerpts": ("llm-hotpot40-new", "excerpts, offline verifier"),
}
FULL = {"HotpotQA 40": "llm-hotpot40-new", "MuSiQue 20": "llm-musique20-new"}  # with excerpts
VERIFIER_RUN = "llm-hotpot-verifier-llm"  # dag-rule with excerpts and VERIFIER=llm
KEPT = ("n", "f1", "em", "match", "joint_recall", "support_rate", "llm_calls", "llm_prompt_tokens", "llm_tokens",
        "latency_p50_s", "failures")


def rows_by_id(folder: Path, system: str) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in read_rows(folder / "per_question.jsonl") if row["system"] == system}


def kept(block: dict[str, Any]) -> dict[str, Any]:
    return {key: block[key] for key in KEPT if key in block}


def same_questions(runs: Path) -> dict[str, Any]:
    """Each config's summary per system, on the questions every config and system answered."""
    by = {(config, system): rows_by_id(runs / folder, system) for config, (folder, _) in CONFIGS.items()
          for system in SYSTEMS}
    common = sorted(set.intersection(*(set(rows) for rows in by.values())))
    return {"questions": len(common), "configs": {
        config: {"what": what, "systems": {system: kept(summarize([by[config, system][i] for i in common])[system])
                                            for system in SYSTEMS}}
        for config, (_, what) in CONFIGS.items()}}


def judges(runs: Path) -> dict[str, Any]:
    """The LLM judge against the offline judge on the same answers: how far each one's support rate separates
    answers that hold the gold answer (`match`) from those that do not, and what each costs."""
    llm = rows_by_id(runs / VERIFIER_RUN, "dag-rule")
    offline = rows_by_id(runs / CONFIGS["excerpts"][0], "dag-rule")
    same = sorted(i for i in set(llm) & set(offline) if llm[i].get("answer") == offline[i].get("answer"))
    out: dict[str, Any] = {"answers": len(same)}
    for name, rows in (("llm", llm), ("offline", offline)):
        picked = [rows[i] for i in same]
        right = [r["metrics"]["support_rate"] for r in picked if r["metrics"]["match"]]
        wrong = [r["metrics"]["support_rate"] for r in picked if not r["metrics"]["match"]]
        out[name] = {"support_when_right": round(mean(right), 3) if right else None,
                     "support_when_wrong": round(mean(wrong), 3) if wrong else None,
                     "right": len(right), "wrong": len(wrong),
                     "llm_calls": round(mean(r["metrics"]["llm_calls"] for r in picked), 2) if picked else None,
                     "latency_p50_s": kept(summarize(picked)["dag-rule"]).get("latency_p50_s") if picked else None}
    return out


def repeatability(runs: Path) -> dict[str, Any]:
    """How often the same model, asked the same question with the same sources (whole passages; the verifier is
    not the writer's input) in another session, answered differently: the noise floor of these comparisons."""
    out = {}
    for system in SYSTEMS:
        before = rows_by_id(runs / CONFIGS["before"][0], system)
        whole = rows_by_id(runs / CONFIGS["whole"][0], system)
        same = [i for i in set(before) & set(whole) if before[i]["metrics"]["llm_calls"] <= 2
                and [s["title"] for s in before[i]["sources"]] == [s["title"] for s in whole[i]["sources"]]]
        out[system] = {"same_sources": len(same),
                       "answer_changed": sum(before[i]["answer"] != whole[i]["answer"] for i in same)}
    return out


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (("answer F1", "f1"), ("gold answer in the answer", "match"), ("LLM prompt tokens / question",
              "llm_prompt_tokens"), ("p50 seconds / question", "latency_p50_s"))
    configs = summary["configs"]
    fig, axes = plt.subplots(1, len(panels), figsize=(16, 3.8))
    width = 0.8 / len(configs)
    colours = ("#9e9e9e", "#ff7f0e", "#1f77b4")
    for ax, (title, key) in zip(axes, panels):
        for c, (config, block) in enumerate(configs.items()):
            values = [block["systems"][s][key] for s in SYSTEMS]
            offset = (c - (len(configs) - 1) / 2) * width
            bars = ax.bar([x + offset for x in range(len(SYSTEMS))], values, width,
                          label=f"{config}: {block['what']}", color=colours[c % len(colours)])
            ax.bar_label(bars, labels=[f"{v:.0f}" if v >= 100 else f"{v:.3g}" for v in values], fontsize=8)
        ax.set_xticks(range(len(SYSTEMS)), SYSTEMS)
        ax.set_title(title, fontsize=10)
        ax.margins(y=0.15)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(configs), fontsize=9, frameon=False)
    fig.suptitle(f"Qwen2.5-Coder-1.5B on this machine, HotpotQA dev, budget 4: the {summary['questions']} questions "
                 "every configuration answered")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    parser.add_argument("--out", type=Path, default=Path("experiments/results/real-llm-small-model.json"))
    args = parser.parse_args()
    summary = same_questions(args.runs)
    summary["defaults"] = {name: {system: kept(block) for system, block in
                                  summarize(read_rows(args.runs / folder / "per_question.jsonl")).items()}
                           for name, folder in FULL.items() if (args.runs / folder).exists()}
    summary["judges"] = judges(args.runs) if (args.runs / VERIFIER_RUN).exists() else None
    summary["repeatability"] = repeatability(args.runs)
    run = json.loads((args.runs / CONFIGS["excerpts"][0] / "summary.json").read_text())
    summary["recorded"] = {key: run["config"].get(key) for key in ("commit", "settings_changed", "llm", "budget")}
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    plot(summary, args.out.with_suffix(".png"))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
