"""experiments/llm_repeat.py: the planner asked twice over real HTTP, the plans that differ counted."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

from dagrag.testing.openai_server import ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))

import llm_repeat  # noqa: E402

QUESTIONS = ["Who directed the film that won the 1990 Palme d'Or?",
             "Which is older, the Eiffel Tower or the Statue of Liberty?",
             "What river flows through the capital of Hungary?"]


def planner_reply(drifting: str | None):
    """A plan of the question's own words; the question `drifting` gets another plan each time it is asked."""
    asked: Counter[str] = Counter()

    def reply(request: dict) -> str:
        user = request["messages"][-1]["content"]
        question = re.search(r"Question: (.*)", user).group(1).strip()
        asked[question] += 1
        text = question if question != drifting else f"{question} (take {asked[question]})"
        return json.dumps({"query": question, "requires_retrieval": True, "hyde_document": None,
                           "subqueries": [{"id": "s1", "text": text, "parents": []}]})
    return reply


def run(tmp_path: Path, monkeypatch, drifting: str | None) -> dict:
    data = tmp_path / "questions.jsonl"
    data.write_text("".join(json.dumps({"question": q}) + "\n" for q in QUESTIONS), encoding="utf-8")
    out = tmp_path / "repeat.json"
    with ScriptedOpenAIServer({"planner": planner_reply(drifting)}) as server:
        monkeypatch.setenv("DAGRAG_LLM", "openai-like:scripted-model")
        monkeypatch.setenv("DAGRAG_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("DAGRAG_LLM_MAX_RETRIES", "0")
        assert llm_repeat.main(["--data", str(data), "--questions", "3", "--out", str(out)]) == 0
        asked = [re.search(r"Question: (.*)", r["messages"][-1]["content"]).group(1).strip()
                 for r in server.requests_of("planner")]
    assert asked == QUESTIONS + QUESTIONS[::-1]  # in order, then in reverse
    return json.loads(out.read_text(encoding="utf-8"))


def test_a_server_that_repeats_itself_gives_no_differing_plan(tmp_path, monkeypatch):
    result = run(tmp_path, monkeypatch, drifting=None)
    assert (result["questions"], result["differ"], result["differing"]) == (3, 0, [])
    assert result["llm"] == "openai-like:scripted-model"


def test_a_plan_that_changes_when_asked_again_is_counted_and_shown(tmp_path, monkeypatch):
    result = run(tmp_path, monkeypatch, drifting=QUESTIONS[1])
    assert result["differ"] == 1
    [differing] = result["differing"]
    assert differing["question"] == QUESTIONS[1]
    assert differing["first"]["steps"][0][1].endswith("(take 1)")
    assert differing["second"]["steps"][0][1].endswith("(take 2)")
