"""Input validation: bad questions, history and settings fail at once, with an error that names the problem."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dagrag import InvalidQuestionError, Settings
from dagrag.core.inputs import MAX_HISTORY_TURNS, check_history, check_question
from dagrag.work_flows.events import PlanReady, QueryStarted

# --- the question ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("query", "message"), [
    (None, "no question given"),
    (b"Who is Ed Wood?", "must be a string, got bytes"),
    (["Who is Ed Wood?"], "must be a string, got list"),
    ({"query": "x"}, "must be a string, got dict"),
    (42, "must be a string, got int"),
    ("", "the question is empty"),
    (" \n\t\u00a0\u2003 ", "the question is empty"),
    ("Who\x00 is Ed Wood?", "control characters"),
    ("Who is \x1b[31mEd Wood?", "control characters"),
    ("Who is Ed Wood?\x7f", "control characters"),
    ("Who is Ed Wood?\x9b", "control characters"),  # C1 control
    ("Who is Ed \ud800Wood?", "lone surrogate"),
    ("x" * 101, "101 characters long; the limit is 100 \\(MAX_QUESTION_CHARS\\)"),
])
def test_bad_questions_are_refused_naming_the_problem(query, message):
    with pytest.raises(InvalidQuestionError, match=message):
        check_question(query, max_chars=100)


@pytest.mark.parametrize(("query", "expected"), [
    ("  Who is\tEd\nWood? ", "Who is Ed Wood?"),  # tabs and newlines are whitespace, not control characters
    ("x" * 100, "x" * 100),  # exactly the limit
    ("Qui était Édouard Wood ? 誰ですか 🙂", "Qui était Édouard Wood ? 誰ですか 🙂"),
])
def test_good_questions_are_normalised_not_refused(query, expected):
    assert check_question(query, max_chars=100) == expected


def test_the_limit_counts_the_normalised_question():
    assert check_question("a   " * 40, max_chars=100) == " ".join(["a"] * 40)


async def test_the_workflow_refuses_in_its_first_step_before_any_work(make_workflow):
    workflow = make_workflow(max_question_chars=50)
    with pytest.raises(InvalidQuestionError, match="limit is 50"):
        await workflow.run(query="Were Scott Derrickson and Ed Wood of the same nationality, and why?")
    with pytest.raises(InvalidQuestionError, match="lone surrogate"):
        await workflow.run(query="Ed \udc00Wood")
    with pytest.raises(InvalidQuestionError, match="history must be a list"):
        await workflow.run(query="Who is Ed Wood?", history="Ed Wood")


async def test_a_run_started_from_a_start_event_is_checked_too(make_workflow):
    """The way LlamaIndex's WorkflowServer starts a workflow: `run(start_event=...)`, no keyword arguments."""
    workflow = make_workflow()
    handler = workflow.run(start_event=QueryStarted(query="Who is Ed\x00 Wood?"))
    events = []
    with pytest.raises(InvalidQuestionError, match="control characters"):
        async for event in handler.stream_events():
            events.append(event)
        await handler
    assert not any(isinstance(e, PlanReady) for e in events)  # refused before planning
    ok = await workflow.run(start_event=QueryStarted(query=" Who  is Ed Wood? ", history=[{"role": "user",
                                                                                          "content": "hi"}]))
    assert ok.question == "Who is Ed Wood?"


# --- chat history ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("history", "message"), [
    ("a string", "history must be a list"),
    ({"role": "user"}, "history must be a list"),
    ([42], "each history turn must be a string"),
    ([{"role": "user", "content": None}], "each history turn must be a string"),
])
def test_bad_history_is_refused(history, message):
    with pytest.raises(InvalidQuestionError, match=message):
        check_history(history, max_chars=100)


def test_history_is_context_cleaned_and_bounded_not_refused():
    turns = ["old"] * 100 + [{"role": "user", "content": "Who \x00played\x1b Corliss\ud800 Archer?"}, "  ", "x" * 1000]
    cleaned = check_history(turns, max_chars=100)
    assert cleaned[-2:] == ["Who played Corliss Archer?", "x" * 400]  # control characters gone, turn capped
    assert len(cleaned) == MAX_HISTORY_TURNS - 1  # the last 50 turns, the blank one dropped


# --- settings ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("field", "value", "message"), [
    ("subquery_max", 0, "greater than or equal to 1"),
    ("subquery_max", 17, "less than or equal to 16"),
    ("coverage_min_ratio", -0.1, "greater than or equal to 0"),
    ("coverage_min_ratio", 1.5, "less than or equal to 1"),
    ("coverage_min_score", 2, "less than or equal to 1"),
    ("attribution_top_n", 0, "greater than or equal to 1"),
    ("context_budget", 0, "greater than or equal to 1"),
    ("subquery_topk_base", 0, "greater than or equal to 1"),
    ("subquery_max_iters", -1, "greater than or equal to 0"),
    ("section_boost_weight", -1, "greater than or equal to 0"),
    ("llm_timeout_s", 0, "greater than 0"),
    ("llm_max_retries", -1, "greater than or equal to 0"),
    ("llm_max_retries", 11, "less than or equal to 10"),
    ("llm_retry_backoff_s", -0.5, "greater than or equal to 0"),
    ("query_timeout_s", 0, "greater than 0"),
    ("max_question_chars", 5, "greater than or equal to 16"),
    ("embed_batch_size", 0, "greater than or equal to 1"),
    ("collection", "bad/name", "should match pattern"),
    ("collection", "", "at least 1 character"),
    ("subquery_max", "four", "valid integer"),
])
def test_out_of_range_settings_fail_naming_the_setting(field, value, message):
    with pytest.raises(ValidationError, match=rf"(?s){field}\n.*{message}"):
        Settings(**{field: value})


@pytest.mark.parametrize(("env", "value", "field"), [
    ("DAGRAG_SUBQUERY_MAX", "0", "subquery_max"),
    ("DAGRAG_COVERAGE_MIN_RATIO", "-1", "coverage_min_ratio"),
    ("DAGRAG_LLM_TIMEOUT_S", "soon", "llm_timeout_s"),
    ("DAGRAG_QUERY_TIMEOUT_S", "-5", "query_timeout_s"),
])
def test_out_of_range_environment_settings_fail_naming_the_setting(monkeypatch, env, value, field):
    monkeypatch.setenv(env, value)
    with pytest.raises(ValidationError, match=rf"(?s){field}\n.*input_value='{value}'"):
        Settings()
