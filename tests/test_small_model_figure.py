"""experiments/small_model_figure.py: the small-model comparison is summarised on the questions every run answered,
and the judges are compared on the answers both judged."""

from __future__ import annotations

import json
import sys

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "experiments"))

import small_model_figure
from eval import METRICS


def row(system: str, qid: str, *, f1: float, match: float, support: float, calls: int, tokens: int,
        answer: str = "an answer") -> dict:
    metrics = dict.fromkeys(METRICS, 0.0)
    metrics.update(f1=f1, match=match, support_rate=support, llm_calls=calls, llm_prompt_tokens=tokens,
                   latency_s=float(tokens) / 100)
    return {"system": system, "id": qid, "type": "bridge", "failed": False, "answer": answer, "metrics": metrics,
            "sources": [{"title": f"page of {qid}"}]}


def write_run(folder, rows, llm="openai-like:tiny-1.5b") -> None:
    folder.mkdir(parents=True)
    (folder / "per_question.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "summary.json").write_text(json.dumps({"config": {"commit": "abc123", "settings_changed": {},
                                                                "llm": llm, "budget": 4}}))


def test_configs_are_compared_on_common_questions_and_judges_on_the_same_answers(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    systems = small_model_figure.SYSTEMS
    # "before" answered q1..q3, the others q1..q4: only q1..q3 are compared.
    write_run(runs / "llm-hotpot40-before", [row(s, f"q{i}", f1=0.5, match=1, support=1, calls=2, tokens=1800)
                                             for s in systems for i in (1, 2, 3)])
    write_run(runs / "llm-hotpot40-whole", [row(s, f"q{i}", f1=0.5, match=1, support=1, calls=1, tokens=900)
                                            for s in systems for i in (1, 2, 3, 4)])
    write_run(runs / "llm-hotpot40-new", [row(s, f"q{i}", f1=0.5, match=i % 2, support=i % 2, calls=1, tokens=700)
                                          for s in systems for i in (1, 2, 3, 4)])
    # The LLM judge supported every answer; q3's answer differs, so it is left out of the judges' comparison.
    write_run(runs / "llm-hotpot-verifier-llm",
              [row("dag-rule", f"q{i}", f1=0.5, match=i % 2, support=1, calls=2, tokens=900,
                   answer="another answer" if i == 3 else "an answer") for i in (1, 2, 3, 4)])
    out = tmp_path / "small.json"
    monkeypatch.setattr(sys, "argv", ["small_model_figure.py", "--runs", str(runs), "--out", str(out)])
    small_model_figure.main()

    summary = json.loads(out.read_text())
    assert summary["questions"] == 3
    before, whole, excerpts = (summary["configs"][c]["systems"]["dag-rule"] for c in ("before", "whole", "excerpts"))
    assert [c["llm_prompt_tokens"] for c in (before, whole, excerpts)] == [1800, 900, 700]
    assert before["n"] == whole["n"] == excerpts["n"] == 3
    assert summary["defaults"]["HotpotQA 40"]["single"]["n"] == 4 and "MuSiQue 20" not in summary["defaults"]
    judges = summary["judges"]
    assert judges["answers"] == 3  # q1, q2, q4
    assert judges["llm"]["support_when_right"] == judges["llm"]["support_when_wrong"] == 1.0
    assert (judges["offline"]["support_when_right"], judges["offline"]["support_when_wrong"]) == (1.0, 0.0)
    assert (judges["offline"]["right"], judges["offline"]["wrong"]) == (1, 2)
    assert summary["repeatability"]["dag-rule"] == {"same_sources": 3, "answer_changed": 0}
    assert summary["recorded"]["commit"] == "abc123" and out.with_suffix(".png").stat().st_size > 10_000
