"""experiments/eval.py: metrics against hand-computed cases, loaders for each format, a tiny real run."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import signal
import sys

import pytest

from dagrag.core.result import QueryResult

from .conftest import ROOT, SAMPLE, sample_records

sys.path.insert(0, str(ROOT / "experiments"))

import eval as eval_script
from evalkit.data import DataFormatError, decomposition_plan, load_examples, load_out_of_collection
from evalkit.metrics import (
    answer_match,
    best_over_aliases,
    exact_match,
    f1_score,
    normalize_answer,
    paired_outcome,
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


def test_an_answer_that_abstains_is_scored_as_saying_nothing():
    said = "The collection does not seem to answer this question. The closest passages: [1] Nokia; [2] Ericsson."
    abstained = QueryResult.model_construct(answer=said, concise_answer=None, abstained=True)
    assert eval_script.scored_answer(abstained) == ("", None)
    answered = QueryResult.model_construct(answer="Nokia was founded in 1865 [1].", concise_answer="Nokia",
                                           abstained=False)
    assert eval_script.scored_answer(answered) == ("Nokia was founded in 1865 [1].", "Nokia")
    assert answer_match(said, "Nokia") == 1.0  # what scoring the abstention's text would have credited


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
    with pytest.raises(SystemExit, match=r"unknown system.*valid: single, dag, dag-no-bridge, oracle, subq, dag-rule"):
        eval_script.main(["--data", str(SAMPLE), "--systems", "dag,magic", "--out", str(tmp_path)])


def test_dag_without_bridge_hops_is_skipped_only_where_an_llm_plans():
    assert eval_script.skip_reason("dag-no-bridge", None, []) is None
    assert eval_script.skip_reason("dag-no-bridge", object(), [], "rule") is None
    assert "PLANNER_BRIDGE" in eval_script.skip_reason("dag-no-bridge", object(), [], "llm")


@pytest.mark.slow
def test_dag_without_bridge_hops_splits_comparisons_and_searches_every_other_question_once(tmp_path,
                                                                                        sample_store_path):
    out = tmp_path / "out"
    assert eval_script.main(["--data", str(SAMPLE), "--limit", "6", "--seed", "3", "--budget", "2",
                             "--systems", "single,dag,dag-no-bridge", "--index-dir", str(tmp_path / "index"),
                             "--out", str(out)]) == 0
    rows = {(r["system"], r["id"]): r for r in map(json.loads, (out / "per_question.jsonl").read_text().splitlines())}
    ids = {question for _, question in rows}

    def compared(question: str) -> bool:  # dag's plan splits it by side
        return any(sq["role"] == "side" for sq in rows[("dag", question)]["plan"]["subqueries"])

    assert {compared(i) for i in ids} == {True, False}  # the sample's six hold both kinds
    for question in ids:
        mine, dag, single = (rows[(s, question)] for s in ("dag-no-bridge", "dag", "single"))
        like = dag if compared(question) else single
        assert mine["plan"]["subqueries"] == like["plan"]["subqueries"]
        assert [s["title"] for s in mine["sources"]] == [s["title"] for s in like["sources"]]
        assert mine["answer"] == like["answer"]
    # and dag itself hopped on some of the others: the setting changed what ran
    assert any(len(rows[("dag", i)]["plan"]["subqueries"]) > 1 for i in ids if not compared(i))


@pytest.mark.slow
def test_tiny_run_writes_consistent_outputs(tmp_path, sample_store_path):
    out = tmp_path / "out"
    code = eval_script.main(["--data", str(SAMPLE), "--limit", "4", "--seed", "3", "--budget", "2",
                             "--systems", "single,dag,subq,dag-rule", "--index-dir", str(tmp_path / "index"),
                             "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["systems"]) == {"single", "dag"}
    # Without an LLM subq cannot run and dag-rule would be dag again: both are skipped, with the reason.
    assert set(summary["config"]["skipped"]) == {"subq", "dag-rule"}
    assert "dag" in summary["config"]["skipped"]["dag-rule"]
    for block in summary["systems"].values():
        assert {"em", "f1", "match", "recall", "joint_recall", "passages_per_question", "coverage_ratio",
                "support_rate", "llm_calls", "latency_p50_s", "latency_p95_s", "by_type"} <= set(block)
        assert block["n"] == 4 and block["joint_recall"] <= block["recall"] <= 1
        assert block["passages_per_question"] <= 2 and block["em"] <= block["f1"] + 1e-9
        assert block["latency_p50_s"] <= block["latency_p95_s"]
        assert sum(t["n"] for t in block["by_type"].values()) == 4
        # Offline, every plan is the rule planner's, and the extractive writer cites only sources that exist.
        assert block["failures"] == 0 and block["plan_origins"]["offline"] == 4
        assert sum(block["plan_origins"].values()) == 4 and block["valid_citation_rate"] == 1.0
    rows = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and all(len(r["sources"]) <= 2 and r["answer"] for r in rows)
    assert all(r["failed"] is False and r["plan_origin"] == "offline" for r in rows)
    assert (out / "summary.png").stat().st_size > 10_000 and "| dag | all |" in (out / "summary.md").read_text()
    # A second run reuses the index (nothing is embedded again) and the rows (nothing is asked again).
    eval_script.main(["--data", str(SAMPLE), "--limit", "4", "--seed", "3", "--budget", "2", "--systems", "dag",
                      "--index-dir", str(tmp_path / "index"), "--out", str(out)])
    config = json.loads((out / "summary.json").read_text())["config"]
    assert config["index_added"] == 0 and config["resumed_rows"] == 4 and config["run_rows"] == 0
    # what the result ran on: the commit, and every setting that is not dagrag's default (the budget here; the tests'
    # environment keeps a server's runs in memory), never a secret
    assert config["commit"] and config["settings_changed"] == {"context_budget": 2, "serve_runs_db": "memory"}
    # and the installed versions of the libraries whose numerics decide the scores
    assert config["libraries"]["onnxruntime"] == importlib.metadata.version("onnxruntime")
    assert set(config["libraries"]) >= {"tokenizers", "qdrant-client", "nltk"}


def test_a_paired_outcome_counts_questions_won_and_lost_and_how_likely_that_split_is_by_chance():
    assert paired_outcome([1, 1, 0, 0.5], [0, 1, 1, 0]) == {"won": 2, "lost": 1, "p": 1.0}
    ten_to_none = paired_outcome([1] * 10, [0] * 10)
    assert ten_to_none["won"] == 10 and ten_to_none["lost"] == 0 and ten_to_none["p"] == 0.002  # 2 / 2**10
    assert paired_outcome([1, 0], [1, 0]) == {"won": 0, "lost": 0, "p": 1.0}  # all ties: nothing to test
    with pytest.raises(ValueError, match="pair them by question"):
        paired_outcome([1], [1, 0])


def test_every_system_is_paired_with_single_by_question_not_by_row_order():
    def row(system, qid, joint, kind="bridge"):
        return {"system": system, "id": qid, "type": kind, "metrics": {"joint_recall": joint, "recall": joint,
                                                                        "match": 0, "latency_s": 1.0}}
    rows = [row("single", "a", 0), row("single", "b", 1), row("single", "c", 0),
            row("dag", "c", 1), row("dag", "b", 1), row("dag", "a", 1),
            row("single", "ooc", 0, "out-of-collection"), row("dag", "ooc", 1, "out-of-collection")]
    systems = eval_script.summarize(rows)
    assert "against_single" not in systems["single"]
    assert systems["dag"]["against_single"]["joint_recall"] == {"won": 2, "lost": 0, "p": 0.5}  # ooc left out
    assert systems["dag"]["against_single"]["match"] == {"won": 0, "lost": 0, "p": 1.0}
    assert "| dag | 2 / 0 (p 0.50) | 2 / 0 (p 0.50) | 0 / 0 (p 1.00) |" in eval_script.markdown_table(systems)


def test_a_comparison_counts_as_split_when_its_plan_searched_two_sides_in_one_layer():
    def plan(roles, layers):
        return {"subqueries": [{"id": f"s{i}", "role": role} for i, role in enumerate(roles)], "layers": layers}
    assert eval_script.sides_in_one_layer(plan(["side", "side", "question"], [["s0", "s1", "s2"]]))
    assert not eval_script.sides_in_one_layer(plan(["question", "bridge"], [["s0"], ["s1"]]))
    assert not eval_script.sides_in_one_layer(plan(["side", "side"], [["s0"], ["s1"]]))  # one side after the other
    assert not eval_script.sides_in_one_layer(None)  # a failed run keeps no plan

    def row(system, qid, kind, roles):
        return {"system": system, "id": qid, "type": kind, "plan": plan(roles, [[f"s{i}" for i in range(len(roles))]]),
                "metrics": {"joint_recall": 1, "recall": 1, "match": 0, "latency_s": 1.0}}
    rows = [row("dag", "a", "comparison", ["side", "side", "question"]), row("dag", "b", "comparison", ["question"]),
            row("dag", "c", "bridge", ["question"])]
    dag = eval_script.summarize(rows)["dag"]
    assert dag["by_type"]["comparison"]["sides_split"] == 0.5 and dag["by_type"]["bridge"]["sides_split"] == 0.0


def test_out_of_collection_questions_are_asked_too_and_counted_apart(tmp_path):
    questions = tmp_path / "ooc.jsonl"
    questions.write_text(json.dumps({"question": "How do I roll back a Kubernetes deployment?", "kind": "x"}) + "\n"
                         + json.dumps({"question": "What tire pressure suits a 28 mm road tyre?"}) + "\n")
    out = tmp_path / "out"
    assert eval_script.main(["--data", str(SAMPLE), "--limit", "2", "--budget", "2", "--systems", "dag",
                             "--out-of-collection", str(questions), "--index-dir", str(tmp_path / "index"),
                             "--out", str(out)]) == 0
    dag = json.loads((out / "summary.json").read_text())["systems"]["dag"]
    assert dag["n"] == 2 and dag["abstained"] == 0.0  # the answerable questions alone
    rows = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    found = [r for r in rows if r["type"] != "out-of-collection" and r["metrics"]["joint_recall"] == 1]
    # match over the questions whose evidence was all found, out-of-collection ones not among them
    assert found and dag["n_found"] == len(found)
    assert dag["match_where_found"] == round(sum(r["metrics"]["match"] for r in found) / len(found), 4)
    assert dag["by_type"]["out-of-collection"]["n"] == 2 and dag["by_type"]["out-of-collection"]["abstained"] == 1.0
    assert "| dag | out-of-collection |" in (out / "summary.md").read_text()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "no question"}\n')
    with pytest.raises(DataFormatError, match=re.escape("bad.jsonl:1: 'question' must be a non-empty string")):
        load_out_of_collection(bad)


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
    # the prompts' tokens, as the server counted them, are reported apart from the replies'
    assert 0 < row["metrics"]["llm_prompt_tokens"] < row["metrics"]["llm_tokens"]
    assert row["metrics"]["passages_per_question"] <= 4 and row["metrics"]["recall"] > 0


# --- long runs: failed questions, resuming, telemetry, dag-rule (a scripted LLM over loopback HTTP) ----------

def _asked(request: dict) -> str:
    """The question in a dagrag prompt ("Question: ...") or SubQuestionQueryEngine's generator prompt."""
    user = request["messages"][-1]["content"]
    if "<User Question>" in user:
        return user.rsplit("<User Question>", 1)[1].split("<Output>")[0].strip()
    found = re.search(r"^Question: (.*)$", user, flags=re.M)
    return found.group(1).strip() if found else ""


def _plan(request: dict) -> str:
    question = _asked(request)
    if "Laleli Mosque" in question:
        return "I would search for the mosque first."  # no JSON: the planner falls back to the rule planner
    return json.dumps({"query": question, "requires_retrieval": True, "hyde_document": None,
                       "subqueries": [{"id": "s1", "text": question, "parents": []}]})


def _sub_questions(request: dict) -> str:
    question = _asked(request)
    if "Scott Derrickson" in question:  # a weak model's reply, cut short: SubQuestionQueryEngine cannot parse it
        return '```json\n{"items": [{"sub_question": "What is Scott Derrickson'
    return "```json\n" + json.dumps({"items": [{"sub_question": question, "tool_name": "wikipedia"}]}) + "\n```"


def _verdicts(request: dict) -> str:
    cited = re.findall(r"^(\d+)\. .*?\[(\d+)\]", request["messages"][-1]["content"], flags=re.M)
    return json.dumps({"sentences": [{"index": int(i), "supported": True, "source": int(n), "reason": "stated"}
                                     for i, n in cited]})


# The writer cites one source that exists and one that does not: half of its citations are valid.
REPLIES = {"planner": _plan, "writer": "The sources answer the question [1][99].", "verifier": _verdicts,
           "subq_questions": _sub_questions, "*": "Both are American."}


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    """One embedded Qdrant folder for these tests, which all take the first 4 questions: indexed once."""
    return tmp_path_factory.mktemp("eval-index")


@pytest.fixture
def llm_server(monkeypatch):
    from dagrag.testing.openai_server import ScriptedOpenAIServer

    with ScriptedOpenAIServer(REPLIES) as server:
        monkeypatch.setenv("DAGRAG_LLM", "openai-like:scripted")
        monkeypatch.setenv("DAGRAG_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("DAGRAG_LLM_MAX_RETRIES", "0")
        yield server


def _run(out, index_dir, *args: str) -> int:
    return eval_script.main(["--data", str(SAMPLE), "--budget", "2", "--index-dir", str(index_dir),
                             "--out", str(out), *args])


def _rows(out) -> dict[tuple[str, str], dict]:
    rows = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    by_key = {(r["system"], r["id"]): r for r in rows}
    assert len(by_key) == len(rows)  # no question twice
    return by_key


def _summary(out) -> dict:
    return json.loads((out / "summary.json").read_text())


def test_a_question_a_system_raises_on_is_a_failed_row_and_the_run_goes_on(tmp_path, llm_server, index_dir):
    out = tmp_path / "out"
    assert _run(out, index_dir, "--limit", "4", "--systems", "subq,dag") == 0
    rows = _rows(out)
    assert len(rows) == 8
    derrickson = next(r for r in rows.values() if r["system"] == "subq" and "Scott Derrickson" in r["question"])
    assert derrickson["failed"] is True
    assert re.match(r"\w+(Exception|Error): ", derrickson["error"]) and len(derrickson["error"]) <= 500
    assert derrickson["answer"] == "" and not any(derrickson["metrics"][m] for m in eval_script.METRICS)
    others = [r for r in rows.values() if r is not derrickson]
    assert all(r["failed"] is False and r["error"] is None and r["answer"] for r in others)
    subq = _summary(out)["systems"]["subq"]
    assert subq["n"] == 4 and subq["failures"] == 1 and _summary(out)["systems"]["dag"]["failures"] == 0
    # The failure is scored as a wrong answer, not dropped: the mean is over all 4 questions.
    assert subq["match"] == round(sum(r["metrics"]["match"] for r in rows.values() if r["system"] == "subq") / 4, 4)
    assert "| subq | 1 | - | - |" in (out / "summary.md").read_text()

    # --retry-failed runs only the failed question again; its new row replaces the failed one.
    llm_server.script("subq_questions", "```json\n" + json.dumps(
        {"items": [{"sub_question": "Scott Derrickson nationality", "tool_name": "wikipedia"}]}) + "\n```")
    llm_server.reset()
    assert _run(out, index_dir, "--limit", "4", "--systems", "subq,dag", "--retry-failed") == 0
    assert len(llm_server.requests_of("subq_questions")) == 1 and not llm_server.requests_of("planner")
    rows = _rows(out)
    assert len(rows) == 8 and not any(r["failed"] for r in rows.values())
    assert _summary(out)["systems"]["subq"]["failures"] == 0


def test_plan_origins_and_valid_citation_rate_per_question_and_per_system(tmp_path, llm_server, index_dir):
    out = tmp_path / "out"
    assert _run(out, index_dir, "--limit", "4", "--systems", "dag") == 0
    rows = list(_rows(out).values())
    origin = {r["question"]: r["plan_origin"] for r in rows}
    assert [o for q, o in origin.items() if "Laleli Mosque" in q] == ["fallback"]
    assert sorted(origin.values()) == ["fallback", "llm", "llm", "llm"]
    assert all(r["citations"] == {"cited": 2, "valid": 1} and r["valid_citation_rate"] == 0.5 for r in rows)
    dag = _summary(out)["systems"]["dag"]
    assert dag["plan_origins"] == {"llm": 3, "repaired": 0, "offline": 0, "fallback": 1, "given": 0}
    assert dag["valid_citation_rate"] == 0.5 and dag["failures"] == 0
    # The failed plan was asked for twice (one retry with the error), the others once.
    assert len(llm_server.requests_of("planner")) == 5


def test_dag_rule_plans_with_rules_and_writes_and_verifies_with_the_llm(tmp_path, llm_server, index_dir):
    out = tmp_path / "out"
    assert _run(out, index_dir, "--limit", "4", "--systems", "dag-rule") == 0
    rows = list(_rows(out).values())
    assert [r["plan_origin"] for r in rows] == ["offline"] * 4
    assert not llm_server.requests_of("planner")
    assert len(llm_server.requests_of("writer")) == 4 and len(llm_server.requests_of("verifier")) == 4
    assert all(r["answer"] == "The sources answer the question [1][99]." and r["metrics"]["llm_calls"] >= 2
               for r in rows)
    summary = _summary(out)
    assert summary["systems"]["dag-rule"]["plan_origins"]["offline"] == 4 and not summary["config"]["skipped"]


def test_a_rerun_runs_only_the_missing_rows_and_refuses_another_config(tmp_path, llm_server, index_dir, capsys):
    out = tmp_path / "out"
    assert _run(out, index_dir, "--limit", "4", "--systems", "dag,dag-rule") == 0
    first = _rows(out)
    assert len(first) == 8 and json.loads((out / "run.json").read_text())["budget"] == 2

    # One row deleted and the last line cut short (killed mid-write): only those two run again.
    lines = (out / "per_question.jsonl").read_text().splitlines()
    lost = [json.loads(lines[1]), json.loads(lines[-1])]
    assert [row["system"] for row in lost] == ["dag", "dag-rule"]  # the file is sorted by (system, id)
    (out / "per_question.jsonl").write_text("\n".join([lines[0], *lines[2:-1], lines[-1][:40]]))
    llm_server.reset()
    capsys.readouterr()
    assert _run(out, index_dir, "--limit", "4", "--systems", "dag,dag-rule") == 0
    assert "ignoring an unfinished last line" in capsys.readouterr().err
    assert len(llm_server.requests_of("writer")) == 2 and len(llm_server.requests_of("planner")) == 1
    rows = _rows(out)
    assert set(rows) == set(first)
    for key, row in rows.items():  # the two lost rows are new, every other one is the first run's
        assert (row["finished_at"] > first[key]["finished_at"]) == any((r["system"], r["id"]) == key for r in lost)
    summary = _summary(out)
    assert {name: block["n"] for name, block in summary["systems"].items()} == {"dag": 4, "dag-rule": 4}
    assert summary["config"]["resumed_rows"] == 6 and summary["config"]["run_rows"] == 2

    # Another budget or seed would mix two runs in one summary: refused, naming what differs, nothing run.
    llm_server.reset()
    before = (out / "per_question.jsonl").read_text()
    assert _run(out, index_dir, "--budget", "3", "--seed", "1", "--limit", "4", "--systems", "dag") == 2
    error = capsys.readouterr().err
    assert "budget: 2 there, 3 here" in error and "seed: None there, 1 here" in error and "--fresh" in error
    assert "limit" not in error.split("config (")[1].split(")")[0]
    assert (out / "per_question.jsonl").read_text() == before and not llm_server.requests
    # Rows made by other code (src/ changed since) would be counted as this code's: refused too.
    config = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(json.dumps({**config, "code": "0000000"}))
    assert _run(out, index_dir, "--limit", "4", "--systems", "dag,dag-rule") == 2
    assert f"code: '0000000' there, '{config['code']}' here" in capsys.readouterr().err
    assert (out / "per_question.jsonl").read_text() == before and not llm_server.requests
    # So would rows made with other settings (DAGRAG_SUBQUERY_TOPK_BASE=8 then, the defaults now).
    (out / "run.json").write_text(json.dumps({**config, "settings": {**config["settings"], "subquery_topk_base": 8}}))
    assert _run(out, index_dir, "--limit", "4", "--systems", "dag,dag-rule") == 2
    assert "settings: {" in capsys.readouterr().err
    assert (out / "per_question.jsonl").read_text() == before and not llm_server.requests
    # --fresh starts over with the new config.
    assert _run(out, index_dir, "--limit", "1", "--systems", "dag", "--fresh") == 0
    assert len(_rows(out)) == 1 and json.loads((out / "run.json").read_text())["limit"] == 1


def test_ctrl_c_stops_the_run_and_keeps_every_finished_row(tmp_path, llm_server, index_dir):
    out = tmp_path / "out"
    writes = []

    def interrupt_on_the_third_answer(request: dict) -> str:
        writes.append(request)
        if len(writes) == 3:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, while the third question is being answered
        return "The sources answer the question [1]."

    llm_server.script("writer", interrupt_on_the_third_answer)
    # Ctrl-C as a shell delivers it: Python's own handler, which asyncio.run replaces for the run. A handler an
    # earlier test's library left behind would take the signal instead.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            _run(out, index_dir, "--limit", "4", "--systems", "dag,dag-rule", "--concurrency", "1")
    finally:
        signal.signal(signal.SIGINT, previous)
    finished = _rows(out)  # every question finished before Ctrl-C is on disk, in full; none after it ran
    assert 2 <= len(finished) <= 3 and len(writes) == 3
    # Question by question, each system in turn: the first question is done by both systems.
    assert {key[0] for key in finished} == {"dag", "dag-rule"} and len({key[1] for key in finished}) <= 2

    assert _run(out, index_dir, "--limit", "4", "--systems", "dag,dag-rule") == 0
    rows = _rows(out)
    assert len(rows) == 8 and len(writes) == 3 + 8 - len(finished)
    assert all(rows[key]["finished_at"] == row["finished_at"] for key, row in finished.items())  # not run again
    assert _summary(out)["config"]["resumed_rows"] == len(finished)


def test_out_of_minutes_starts_nothing_and_compares_systems_only_on_questions_all_answered(
        tmp_path, llm_server, index_dir):
    out = tmp_path / "out"
    assert _run(out, index_dir, "--limit", "2", "--systems", "dag,dag-rule") == 0
    lines = (out / "per_question.jsonl").read_text().splitlines()
    lost = json.loads(lines[-1])  # sorted by (system, id): a dag-rule row
    (out / "per_question.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    llm_server.reset()

    assert _run(out, index_dir, "--limit", "2", "--systems", "dag,dag-rule", "--minutes", "0") == 0
    assert not llm_server.requests and len(_rows(out)) == 3  # nothing started, nothing lost
    summary = _summary(out)
    assert {name: block["n"] for name, block in summary["systems"].items()} == {"dag": 1, "dag-rule": 1}
    assert summary["config"]["questions_summarized"] == 1 and summary["config"]["minutes"] == 0
    assert "1 of 2 questions (run unfinished)" in (out / "summary.md").read_text()

    assert _run(out, index_dir, "--limit", "2", "--systems", "dag,dag-rule") == 0  # no deadline: finishes it
    rows = _rows(out)
    assert len(rows) == 4 and ("dag-rule", lost["id"]) in rows
    assert {name: block["n"] for name, block in _summary(out)["systems"].items()} == {"dag": 2, "dag-rule": 2}


def test_the_planner_probe_replays_the_llms_plans_offline_and_finds_what_the_llm_run_found(
        tmp_path, llm_server, index_dir, monkeypatch):
    import asyncio

    import planner_probe

    def two_searches(request: dict) -> str:
        question = _asked(request)
        return json.dumps({"query": question, "requires_retrieval": True, "hyde_document": None, "subqueries": [
            {"id": "s1", "text": question, "parents": []},
            {"id": "s2", "text": " ".join(question.rstrip("?").split()[-3:]), "parents": []}]})

    llm_server.script("planner", two_searches)
    assert _run(tmp_path / "eval", index_dir, "--limit", "4", "--systems", "dag") == 0
    llm_server.reset()
    out = tmp_path / "probe"
    args = planner_probe.build_parser().parse_args(
        ["--data", str(SAMPLE), "--limit", "4", "--budget", "2", "--index-dir", str(index_dir), "--out", str(out)])
    asyncio.run(planner_probe.main(args))
    # One LLM call per question, the planner's; nothing is written or verified with the LLM.
    assert len(llm_server.requests_of("planner")) == 4 and len(llm_server.requests) == 4
    plans = [json.loads(line) for line in (out / "plans.jsonl").read_text().splitlines()]
    assert [p["origin"] for p in plans] == ["llm"] * 4 and all(len(p["plan"]["subqueries"]) == 2 for p in plans)
    rows = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    assert sorted((r["system"], r["id"]) for r in rows) == sorted(
        (system, p["id"]) for p in plans for system in ("single", "rule-plan", "llm-plan", "llm-split"))
    # With comparisons split (PLANNER_SPLIT_COMPARISONS), a question the rule planner splits by sides runs its plan.
    by = {(r["system"], r["id"]): r for r in rows}
    for p in plans:
        rule = by[("rule-plan", p["id"])]
        sides = any(sq["role"] == "side" for sq in rule["plan"]["subqueries"])
        assert by[("llm-split", p["id"])]["plan"] == by[("rule-plan" if sides else "llm-plan", p["id"])]["plan"]
    # The replayed plan hands the writer what the LLM run handed it, question for question.
    llm_run = {r["id"]: [s["title"] for s in r["sources"]] for r in _rows(tmp_path / "eval").values()}
    replayed = {r["id"]: [s["title"] for s in r["sources"]] for r in rows if r["system"] == "llm-plan"}
    assert replayed == llm_run
    single = {r["id"]: [s["title"] for s in r["sources"]] for r in rows if r["system"] == "single"}
    assert replayed != single  # the second search found something: the plan is not the question alone
    assert all(r["plan_origin"] == "llm" for r in rows if r["system"] == "llm-plan")
    summary = (out / "summary.md").read_text()
    assert "| llm-plan | all | 4 |" in summary
    joint = {(r["system"], r["id"]): r["metrics"]["joint_recall"] for r in rows}
    less = sum(joint[("llm-plan", p["id"])] < joint[("rule-plan", p["id"])] for p in plans)
    assert f"and less on {less}." in summary
    numbers = json.loads((out / "summary.json").read_text())  # what docs/benchmarks.md is made from
    assert numbers["plan_origins"]["llm"] == 4 and numbers["budget"] == 2
    assert numbers["systems"]["llm-plan"]["joint_recall"] == round(
        sum(joint[("llm-plan", p["id"])] for p in plans) / len(plans), 4)

    # Again without an LLM: the recorded plans are replayed, none is asked for.
    monkeypatch.setenv("DAGRAG_LLM", "none")
    llm_server.reset()
    asyncio.run(planner_probe.main(args))
    assert not llm_server.requests
    assert [json.loads(line) for line in (out / "plans.jsonl").read_text().splitlines()] == plans
    # Plans kept elsewhere (--plans, as experiments/results/planner-probe/ keeps the model's) replay the same.
    kept = tmp_path / "kept" / "plans.jsonl"
    kept.parent.mkdir()
    kept.write_text((out / "plans.jsonl").read_text())
    elsewhere = tmp_path / "elsewhere"
    asyncio.run(planner_probe.main(planner_probe.build_parser().parse_args(
        ["--data", str(SAMPLE), "--limit", "4", "--budget", "2", "--index-dir", str(index_dir),
         "--out", str(elsewhere), "--plans", str(kept)])))
    assert not llm_server.requests and not (elsewhere / "plans.jsonl").exists()
    again = {r["id"]: [s["title"] for s in r["sources"]]
             for r in map(json.loads, (elsewhere / "per_question.jsonl").read_text().splitlines())
             if r["system"] == "llm-plan"}
    assert again == replayed


def test_shards_split_a_run_into_the_rows_the_whole_run_makes(tmp_path, index_dir):
    whole, first, second, merged = (tmp_path / name for name in ("whole", "first", "second", "merged"))
    assert _run(whole, index_dir, "--limit", "4", "--systems", "dag") == 0
    assert _run(first, index_dir, "--limit", "4", "--systems", "dag", "--shard", "1/2") == 0
    assert _run(second, index_dir, "--limit", "4", "--systems", "dag", "--shard", "2/2") == 0
    ids = [example.id for example in load_examples(SAMPLE, limit=4)]  # the questions in the run's order
    assert {key[1] for key in _rows(first)} == set(ids[0::2]) and {key[1] for key in _rows(second)} == set(ids[1::2])
    assert _summary(first)["config"]["shard"] == "1/2" and _summary(first)["config"]["questions"] == 2
    # The corpus is the whole set's, so a shard's row finds what the whole run's row found.
    for key, row in {**_rows(first), **_rows(second)}.items():
        assert row["sources"] == _rows(whole)[key]["sources"]
    merged.mkdir()
    (merged / "run.json").write_text((first / "run.json").read_text())
    (merged / "per_question.jsonl").write_text(
        (first / "per_question.jsonl").read_text() + (second / "per_question.jsonl").read_text())
    assert _run(merged, index_dir, "--limit", "4", "--systems", "dag", "--minutes", "0") == 0
    assert _summary(merged)["config"]["questions_summarized"] == 4
    assert _summary(merged)["systems"]["dag"]["joint_recall"] == _summary(whole)["systems"]["dag"]["joint_recall"]


@pytest.mark.parametrize("bad", ["3/2", "0/2", "1", "a/b"])
def test_a_shard_that_is_not_i_of_n_is_refused_naming_the_option(tmp_path, index_dir, capsys, bad):
    with pytest.raises(SystemExit) as stopped:
        _run(tmp_path / "out", index_dir, "--shard", bad)
    assert stopped.value.code == 2 and "--shard" in capsys.readouterr().err


def test_the_writer_replay_writes_each_answer_again_from_the_kept_sources(tmp_path, index_dir, monkeypatch, capsys):
    import writer_replay

    monkeypatch.setenv("DAGRAG_LLM", "none")  # the offline writer, which the replay runs
    out = tmp_path / "out"
    assert _run(out, index_dir, "--limit", "4", "--systems", "dag,single") == 0
    capsys.readouterr()
    rows = (out / "per_question.jsonl").read_text().splitlines()
    # The row edited below is the one whose F1 is highest, so that its F1 moves the mean.
    at = max(range(len(rows)), key=lambda i: json.loads(rows[i])["metrics"]["f1"])
    kept = json.loads(rows[at])
    assert {"text", "metadata", "node_id", "subquery_ids", "title"} <= set(kept["sources"][0])

    # At the run's own code, every answer comes back as the run wrote it.
    assert writer_replay.main([str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("out: 4 answers, 4 identical; match ")
    # One search's answers come from the same writer: replayed too when named, each system on its own line.
    assert writer_replay.main([str(out), "--systems", "single,dag"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(";")[0] for line in lines] == ["out single: 4 answers, 4 identical",
                                                      "out dag: 4 answers, 4 identical"]

    # An answer written otherwise (as by other writer code) is told apart, with its match then and now.
    edited = {**kept, "answer": "Nothing to do with it [1].", "metrics": {**kept["metrics"], "match": 0.0, "f1": 0.0}}
    (out / "per_question.jsonl").write_text("\n".join([*rows[:at], json.dumps(edited), *rows[at + 1:]]) + "\n")
    assert writer_replay.main([str(out), "--changed", "answers"]) == 0
    said = capsys.readouterr().out
    assert "4 answers, 3 identical" in said and said.count("    then: ") == 1
    then, now = (int(n) for n in re.search(r"characters (\d+) -> (\d+)", said).groups())
    assert abs(now - then - (len(kept["answer"]) - len(edited["answer"])) / 4) <= 1  # means, rounded
    assert kept["metrics"]["f1"] > 0  # else the F1 check says nothing
    f1_then, f1_now = (float(n) for n in re.search(r"F1 ([\d.]+) -> ([\d.]+)", said).groups())
    assert abs(f1_now - f1_then - kept["metrics"]["f1"] / 4) <= 0.001
    assert f"  {kept['id']}: match 0 -> {kept['metrics']['match']:.0f}" in said
    assert "    then: Nothing to do with it [1]." in said
    assert f"    now:  {' '.join(kept['answer'].split())[:40]}" in said

    # Rows from before eval.py kept the sources' text: named, not replayed as if they held nothing.
    bare = [{**json.loads(row), "sources": [{k: v for k, v in source.items() if k != "text"}
                                            for source in json.loads(row)["sources"]]} for row in rows]
    (out / "per_question.jsonl").write_text("".join(json.dumps(row) + "\n" for row in bare))
    assert writer_replay.main([str(out)]) == 0
    assert "out: not replayed, its rows do not keep the sources' text" in capsys.readouterr().out
    assert writer_replay.main([str(tmp_path / "nowhere")]) == 2
