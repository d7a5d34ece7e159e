"""experiments/eval.py: metrics against hand-computed cases, loaders for each format, a tiny real run."""

from __future__ import annotations

import json
import sys

import pytest

from .conftest import ROOT, SAMPLE, sample_records

sys.path.insert(0, str(ROOT / "experiments"))

import eval as eval_script
from eval_data import DataFormatError, decomposition_plan, load_examples
from eval_metrics import (
    answer_match,
    best_over_aliases,
    exact_match,
    f1_score,
    normalize_answer,
    supporting_recall,
)

MUSIQUE = ROOT.parent / "shared" / "data" / "musique_dev_sample.jsonl"


@pytest.mark.parametrize(("raw", "normalised"), [
    ("The Cat!", "cat"), ("  an  Apple, a day ", "apple day"), ("Chief of Protocol.", "chief of protocol"),
    ("YES", "yes"), ("3,677 seated", "3677 seated"),
])
def test_official_normalisation(raw, normalised):
    assert normalize_answer(raw) == normalised


def test_exact_match_and_f1_hand_computed():
    assert exact_match("the Chief of Protocol", "Chief of Protocol") == 1.0
    # pred: chief of protocol of united states (6), gold: chief of protocol (3), overlap 3 -> P=.5, R=1
    assert f1_score("Chief of Protocol of the United States", "Chief of Protocol") == pytest.approx(2 / 3)
    assert f1_score("yes", "no") == 0.0 and f1_score("no", "no") == 1.0
    assert f1_score("yes it is", "yes") == 0.0  # yes/no answers must match exactly, as in the official script
    assert f1_score("Paris", "London") == 0.0


def test_answer_match_needs_whole_words_and_takes_the_best_alias():
    assert answer_match("She served as Chief of Protocol [1].", "Chief of Protocol") == 1.0
    assert answer_match("It has 13677 seats", "3,677") == 0.0
    assert best_over_aliases(exact_match, "NYC", ["New York City", "NYC"]) == 1.0


def test_supporting_recall():
    assert supporting_recall({"a", "b", "x"}, ["a", "b"]) == (1.0, 1.0)
    assert supporting_recall({"a"}, ["a", "b"]) == (0.5, 0.0)
    assert supporting_recall(set(), []) == (0.0, 0.0)


def _shared_record() -> dict:
    return sample_records()[1]


def test_loads_the_shared_format():
    examples = load_examples(SAMPLE)
    assert len(examples) == 30
    first = examples[0]
    assert first.question.startswith("What government position") and first.answers[0] == "Chief of Protocol"
    assert {p.title for p in first.supporting} == {"Shirley Temple", "Kiss and Tell (1945 film)"}
    sampled = [e.id for e in load_examples(SAMPLE, limit=5, seed=1)]
    assert len(sampled) == 5 and sampled == [e.id for e in load_examples(SAMPLE, limit=5, seed=1)]
    assert sampled != [e.id for e in examples[:5]]


@pytest.mark.parametrize("flavour", ["hotpotqa", "2wiki"])
def test_loads_official_hotpotqa_and_2wiki_json(tmp_path, flavour):
    record = _shared_record()
    official = {"_id": record["id"], "question": record["question"], "answer": record["answer"],
                "type": record["type"], "level": "hard",
                "supporting_facts": [[t, 0] for t in record["supporting_titles"]],
                "context": [[p["title"], [s + " " for s in p["text"].split(". ")]] for p in record["paragraphs"]]}
    if flavour == "2wiki":
        official["evidences"] = []
    path = tmp_path / "dev.json"
    path.write_text(json.dumps([official]), encoding="utf-8")
    [example] = load_examples(path)
    assert example.id == record["id"] and example.type == record["type"]
    assert {p.title for p in example.supporting} == set(record["supporting_titles"])
    assert len(example.paragraphs) == len(record["paragraphs"])


@pytest.mark.skipif(not MUSIQUE.exists(), reason="needs ../shared/data")
def test_loads_official_musique_jsonl_and_turns_its_decomposition_into_a_plan(tmp_path):
    record = json.loads(MUSIQUE.read_text(encoding="utf-8").splitlines()[0])
    official = {"id": record["id"], "question": record["question"], "answer": record["answer"],
                "answer_aliases": record["answer_aliases"], "answerable": True,
                "question_decomposition": record["question_decomposition"],
                "paragraphs": [{"idx": i, "title": p["title"], "paragraph_text": p["text"],
                                "is_supporting": p["is_supporting"]} for i, p in enumerate(record["paragraphs"])]}
    path = tmp_path / "musique.jsonl"
    path.write_text(json.dumps(official) + "\n", encoding="utf-8")
    [example] = load_examples(path)
    hops = len(record["question_decomposition"])
    assert example.type == f"{hops}hop" and len(example.decomposition) == hops
    plan = decomposition_plan(example)
    assert plan["subqueries"][0]["parents"] == []
    assert any("{s1}" in sq["text"] and sq["parents"] == ["s1"] for sq in plan["subqueries"][1:])


def test_a_malformed_record_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(SAMPLE.read_text(encoding="utf-8").splitlines()[0] + '\n{"question": "q"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"bad\.jsonl:2: field 'paragraphs'"):
        load_examples(path)


def test_an_unknown_system_lists_the_valid_ones(tmp_path):
    with pytest.raises(SystemExit, match=r"unknown system.*valid: single, dag, oracle, subq"):
        eval_script.main(["--data", str(SAMPLE), "--systems", "dag,magic", "--out", str(tmp_path)])


@pytest.mark.slow
def test_tiny_run_writes_consistent_outputs(tmp_path, sample_store_path):
    out = tmp_path / "out"
    code = eval_script.main(["--data", str(SAMPLE), "--limit", "4", "--seed", "3", "--budget", "2",
                             "--systems", "single,dag,subq", "--index-dir", str(tmp_path / "index"),
                             "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["systems"]) == {"single", "dag"}
    assert "subq" in summary["config"]["skipped"]
    for block in summary["systems"].values():
        assert {"em", "f1", "match", "recall", "joint_recall", "passages_per_question", "coverage_ratio",
                "support_rate", "llm_calls", "latency_p50_s", "latency_p95_s", "by_type"} <= set(block)
        assert block["n"] == 4 and block["joint_recall"] <= block["recall"] <= 1
        assert block["passages_per_question"] <= 2 and block["em"] <= block["f1"] + 1e-9
        assert block["latency_p50_s"] <= block["latency_p95_s"]
        assert sum(t["n"] for t in block["by_type"].values()) == 4
    rows = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and all(len(r["sources"]) <= 2 and r["answer"] for r in rows)
    assert (out / "summary.png").stat().st_size > 10_000 and "| dag | all |" in (out / "summary.md").read_text()
    # A second run reuses the index: nothing is embedded again.
    eval_script.main(["--data", str(SAMPLE), "--limit", "4", "--seed", "3", "--systems", "dag",
                      "--index-dir", str(tmp_path / "index"), "--out", str(out)])
    assert json.loads((out / "summary.json").read_text())["config"]["index_added"] == 0


def _subq_reply(request: dict) -> str:
    prompt = request["messages"][-1]["content"]
    if "<User Question>" in prompt:  # SubQuestionQueryEngine's question generator
        items = [{"sub_question": "What is Scott Derrickson's nationality?", "tool_name": "wikipedia"},
                 {"sub_question": "What is Ed Wood's nationality?", "tool_name": "wikipedia"}]
        return "```json\n" + json.dumps({"items": items}) + "\n```"
    return "Both are American."


def test_subq_runs_llamaindex_subquestion_engine_through_a_real_http_llm(tmp_path, monkeypatch):
    from dagrag.testing.openai_server import ANY_AGENT, ScriptedOpenAIServer

    data = tmp_path / "one.jsonl"
    data.write_text(next(line for line in SAMPLE.read_text(encoding="utf-8").splitlines()
                         if "Scott Derrickson" in line) + "\n", encoding="utf-8")
    with ScriptedOpenAIServer() as server:
        server.script(ANY_AGENT, _subq_reply)
        monkeypatch.setenv("DAGRAG_LLM", "openai-like:scripted")
        monkeypatch.setenv("DAGRAG_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("DAGRAG_LLM_MAX_RETRIES", "0")
        out = tmp_path / "out"
        assert eval_script.main(["--data", str(data), "--systems", "subq", "--budget", "2",
                                 "--index-dir", str(tmp_path / "index"), "--out", str(out)]) == 0
    row = json.loads((out / "per_question.jsonl").read_text().splitlines()[0])
    assert row["system"] == "subq" and row["answer"] == "Both are American."
    # 1 question-generation call + 2 sub-answers + 1 final synthesis, each over HTTP.
    assert row["metrics"]["llm_calls"] == 4 and len(server.requests) == 4
    assert row["metrics"]["passages_per_question"] <= 4 and row["metrics"]["recall"] > 0
