"""Property tests: the planner's parser, validator and repairer over any text and any JSON.

The boundary: `extract_json_object` and `parse_plan` either return or raise `ReplyParseError` (`PlanParseError`
for a plan; nothing else, whatever the input); `validate_plan`, `repair_plan` and `finalize_plan` never raise
for any Plan. What `finalize_plan` returns is always executable: it validates clean, its layers are a topological
order of the DAG, and every kept subquery is one the planner wrote (repairs drop and cut, never invent).

Cases per run: 250 + 250 + 350 + 150 + 100 = 1,100 (max_examples below), plus the fixed edge cases.
"""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from dagrag.core.plan import (
    MAX_NOTES,
    ExecutedPlan,
    Plan,
    PlanIssue,
    PlanOrigin,
    PlanParseError,
    SubQuery,
    finalize_plan,
    layer_plan,
    parse_plan,
    repair_plan,
    validate_plan,
    with_question_searched,
)
from dagrag.core.replies import ReplyParseError, extract_json_object

QUESTION = "Were Scott Derrickson and Ed Wood of the same nationality?"


def fuzz(max_examples: int) -> settings:
    """Explicit case counts, no deadline (CI machines are slow), no example database written to the repo."""
    return settings(max_examples=max_examples, deadline=None, suppress_health_check=list(HealthCheck),
                    database=None)

# --- strategies -------------------------------------------------------------------------------------

# Any character, including control characters, non-ASCII and lone surrogates (JSON can carry "\ud800").
any_char = st.characters(exclude_categories=())
weird_text = st.text(any_char, max_size=40)
json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | weird_text
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(weird_text, inner, max_size=5),
    max_leaves=20)



def mostly(good: st.SearchStrategy, bad: st.SearchStrategy) -> st.SearchStrategy:
    """`good` about three times in four: enough garbage to break things, enough sense to get past the parser."""
    return st.one_of(good, good, good, bad)


ID_POOL = ["s1", "s2", "s3", "s4", "s5", "s0"]
ids = mostly(st.sampled_from(ID_POOL), st.integers(-2, 9) | weird_text | st.text("s0123456789", min_size=60,
                                                                                    max_size=80))
grounded = ["Scott Derrickson nationality", "Ed Wood nationality", "{s1} nationality", "Ed Wood birthplace {s2}",
            "Scott Derrickson", "same nationality Wood"]
subquery_texts = mostly(
    st.sampled_from(grounded)
    | st.builds(lambda word, junk: f"{word} {junk}", st.sampled_from(["Ed", "Wood", "Derrickson"]), weird_text),
    st.sampled_from(["", "   ", "\n\t", "stock prices", "{s1}", "the of and"])
    | st.builds(lambda n: "Ed Wood " * n, st.integers(120, 1300))  # up to ~10k characters
    | weird_text | json_values,
)
parents = mostly(st.lists(ids, max_size=6), st.none() | ids | json_values)
hints = st.none() | mostly(st.fixed_dictionaries({}, optional={
    "must_include": st.lists(weird_text, max_size=20) | json_values,
    "synonyms": st.lists(weird_text, max_size=3), "sections": weird_text,
    "top_k": st.integers(-5, 10**6) | json_values}), json_values)
subquery = st.fixed_dictionaries({"id": ids, "text": subquery_texts}, optional={"parents": parents, "hints": hints})
subquery_lists = mostly(
    st.lists(mostly(subquery, weird_text | json_values), max_size=8),
    st.builds(lambda item, n: [item] * n, subquery, st.integers(20, 2000))  # huge, all duplicates
    | json_values,
)
plan_dicts = st.fixed_dictionaries({"subqueries": subquery_lists}, optional={
    "query": st.sampled_from([QUESTION, "Scott Derrickson and Ed Wood", ""]) | weird_text | json_values
    | st.builds(lambda n: "Ed Wood " * n, st.integers(300, 1300)),
    "requires_retrieval": st.booleans() | json_values,
    "hyde_document": st.none() | weird_text | json_values,
})


def _wrap(data: object, how: str, cut: float) -> str:
    text = json.dumps(data)
    if how == "fenced":
        return f"Sure! Here is the plan:\n```json\n{text}\n```\nAnything else?"
    if how == "prose":
        return f"The plan {{is}}: {text} -- hope that helps }}"
    if how == "truncated":
        return text[: int(len(text) * cut)]
    return text


replies = st.builds(_wrap, plan_dicts | json_values, st.sampled_from(["bare", "fenced", "prose", "truncated"]),
                    st.floats(0, 1))
questions = st.sampled_from([QUESTION, "Who is he?", "Ed Wood", "Which is older, Ed Wood or Scott Derrickson?"])


def tally(label: str) -> None:
    """Count outcomes in hypothesis' statistics (`pytest --hypothesis-show-statistics`)."""
    if currently_in_test_context():
        event(label)


# --- the contract -----------------------------------------------------------------------------------

def parse_or_none(reply: object, question: str = QUESTION) -> Plan | None:
    """parse_plan's boundary: a Plan, or PlanParseError with a message; anything else fails the test."""
    try:
        plan = parse_plan(reply, question)  # type: ignore[arg-type]
    except PlanParseError as error:
        assert str(error)
        tally("parse: refused")
        return None
    assert isinstance(plan, Plan)
    tally("parse: plan")
    return plan


def assert_executable(executed: ExecutedPlan, original: Plan, *, question: str, subquery_max: int) -> None:
    assert validate_plan(executed, question=question, subquery_max=subquery_max) == []
    sq_ids = [sq.id for sq in executed.subqueries]
    assert len(sq_ids) == len(set(sq_ids)) <= subquery_max
    assert not executed.requires_retrieval or sq_ids
    # Layers: every subquery once, parents strictly in earlier layers, the plan's order parents-first.
    layer_of = {sq_id: k for k, layer in enumerate(executed.layers) for sq_id in layer}
    assert sorted(layer_of) == sorted(sq_ids) and sum(map(len, executed.layers)) == len(sq_ids)
    seen: set[str] = set()
    for sq in executed.subqueries:
        assert all(layer_of[p] < layer_of[sq.id] and p in seen for p in sq.parents)
        seen.add(sq.id)
    # Repairs drop and cut, never invent: each kept subquery is one the planner wrote, with a subset of its links.
    for sq in executed.subqueries:
        assert any(sq.text == o.text and sq.hints == o.hints and set(sq.parents) <= set(o.parents)
                   for o in original.subqueries)
    assert len(executed.notes) <= MAX_NOTES
    executed.model_dump_json()  # the result serialises (CLI --json)


def check_pipeline(plan: Plan, question: str, subquery_max: int) -> ExecutedPlan | None:
    issues = validate_plan(plan, question=question, subquery_max=subquery_max)
    assert all(isinstance(i, PlanIssue) and i.message for i in issues)
    repaired, notes = repair_plan(plan, question=question, subquery_max=subquery_max)
    assert all(isinstance(n, str) and n for n in notes) and len(notes) <= MAX_NOTES
    left = {i.code for i in validate_plan(repaired, question=question, subquery_max=subquery_max)}
    assert left <= {"no_subqueries"}, left  # repair fixes everything but "nothing usable left"
    # Repair is idempotent: a repaired plan needs no more repairs.
    again, more = repair_plan(repaired, question=question, subquery_max=subquery_max)
    assert (again.subqueries, more) == (repaired.subqueries, [])

    executed = finalize_plan(plan, question=question, subquery_max=subquery_max, origin=PlanOrigin.LLM)
    if executed is None:
        assert left == {"no_subqueries"}
        tally("finalize: refused")
        return None
    tally(f"finalize: {executed.origin.value}")
    assert executed.origin is (PlanOrigin.REPAIRED if issues else PlanOrigin.LLM)
    assert bool(executed.notes) or not issues or executed.subqueries == plan.subqueries
    assert_executable(executed, plan, question=question, subquery_max=subquery_max)
    return executed


# --- properties -------------------------------------------------------------------------------------

@fuzz(250)
@given(text=st.text(any_char, max_size=300) | st.text("{}[]\":,0123456789.eE-+ \\ntrufalsn`json", max_size=300)
       | st.binary(max_size=50) | json_values)
def test_extract_json_object_returns_a_dict_or_raises_reply_parse_error(text):
    try:
        value = extract_json_object(text)
    except ReplyParseError:
        return
    assert isinstance(value, dict)


@fuzz(250)
@given(reply=replies | st.text(any_char, max_size=200), question=questions)
def test_parse_plan_returns_a_plan_or_raises_plan_parse_error(reply, question):
    plan = parse_or_none(reply, question)
    if plan is not None:
        assert plan.query.strip() and all(1 <= len(sq.id) <= 64 for sq in plan.subqueries)


@fuzz(350)
@given(data=plan_dicts, how=st.sampled_from(["bare", "fenced", "prose"]), question=questions,
       subquery_max=st.integers(1, 16))
def test_any_plan_shaped_json_is_used_repaired_or_refused_never_crashes(data, how, question, subquery_max):
    plan = parse_or_none(_wrap(data, how, 1.0), question)
    if plan is not None:
        check_pipeline(plan, question, subquery_max)


# Plans built directly (past the parser): dense, tangled DAGs over a small id pool.
dag_plans = st.builds(
    lambda items, retrieval: Plan(query=QUESTION, requires_retrieval=retrieval, subqueries=[
        SubQuery(id=i, text=t, parents=ps) for i, t, ps in items]),
    st.lists(st.tuples(st.sampled_from(ID_POOL), st.sampled_from([*grounded, "", "stock prices"]),
                       st.lists(st.sampled_from([*ID_POOL, "s9"]), max_size=5)), max_size=12),
    st.booleans())


@fuzz(150)
@given(plan=dag_plans, subquery_max=st.integers(1, 16))
def test_cycles_self_parents_unknown_parents_and_duplicates_are_repaired(plan, subquery_max):
    check_pipeline(plan, QUESTION, subquery_max)


@st.composite
def valid_plans(draw: st.DrawFn) -> Plan:
    """Unique ids, grounded texts, parents only among earlier subqueries; a subquery with several parents
    refers to one of them (one that names none only combines them, which is repaired away); no search twice
    (the same text is repaired away)."""
    count = draw(st.integers(1, 8))
    sq_ids = draw(st.lists(st.sampled_from([*ID_POOL, "a", "b", "hop-2", "x1"]), min_size=count, max_size=count,
                           unique=True))
    subqueries = []
    for i, sq_id in enumerate(sq_ids):
        parents = draw(st.lists(st.sampled_from(sq_ids[:i]), unique=True)) if i else []
        text = draw(st.sampled_from(grounded))
        text = f"{text} of {{{parents[0]}}}" if len(parents) > 1 else text
        if any(" ".join(text.lower().split()) == " ".join(sq.text.lower().split()) for sq in subqueries):
            text = f"{text} ({sq_id})"
        subqueries.append(SubQuery(id=sq_id, text=text, parents=parents))
    return Plan(query=QUESTION, subqueries=subqueries)


@fuzz(100)
@given(plan=valid_plans())
def test_a_valid_plan_is_used_as_is(plan):
    assert validate_plan(plan, question=QUESTION, subquery_max=8) == []
    executed = finalize_plan(plan, question=QUESTION, subquery_max=8, origin=PlanOrigin.LLM)
    assert executed is not None and executed.origin is PlanOrigin.LLM and executed.notes == []
    # Used as is, each subquery only gains its role (assign_roles): the text, parents and hints stay.
    assert [sq.model_copy(update={"role": "step"}) for sq in executed.subqueries] == [
        sq.model_copy(update={"role": "step"}) for sq in plan.subqueries]
    assert executed.layers == layer_plan(plan)


@fuzz(100)
@given(plan=valid_plans())
def test_every_plan_searches_the_question_as_asked(plan):
    """DESIGN.md's invariant: whatever a planner wrote, the question itself is searched in the first layer, ahead of
    the planner's searches (after a comparison's sides); theirs keep their ids, texts, parents, roles and order."""
    executed = finalize_plan(plan, question=QUESTION, subquery_max=8, origin=PlanOrigin.LLM)
    searched = with_question_searched(executed)
    questions = [sq for sq in searched.subqueries if sq.role == "question"]
    assert questions and not questions[0].parents and questions[0].id in searched.layers[0]
    if any(sq.role == "question" for sq in executed.subqueries):
        assert searched == executed  # already searched: nothing added
    else:
        assert questions[0].text == QUESTION
        assert [sq for sq in searched.subqueries if sq is not questions[0]] == executed.subqueries
        if any(sq.role == "side" for sq in executed.subqueries):
            assert searched.subqueries[-1] == questions[0]  # the sides keep their turns
        else:
            assert searched.layers[0][0] == questions[0].id == searched.subqueries[0].id
        assert len({sq.id for sq in searched.subqueries}) == len(searched.subqueries)
        assert searched.layers == layer_plan(searched) and searched.notes[-1].startswith(f"added {questions[0].id}")
    assert with_question_searched(searched) == searched


# --- fixed edge cases -------------------------------------------------------------------------------

def test_ten_thousand_distinct_subqueries_are_cut_to_subquery_max_quickly():
    plan = Plan(query=QUESTION, subqueries=[
        SubQuery(id=f"s{i}", text=f"Ed Wood film {i} of {{s{i + 1}}}", parents=[f"s{i + 1}", "s0", f"x{i}"])
        for i in range(10_000)])
    started = time.process_time()
    executed = check_pipeline(plan, QUESTION, 4)
    assert executed is not None and len(executed.subqueries) == 4 and len(executed.notes) <= MAX_NOTES
    # Not a timing assertion of the test's wall clock: a guard against quadratic work (was O(n^2) in validate).
    assert time.process_time() - started < 20


def test_a_reply_over_the_size_limit_is_refused_unread():
    with pytest.raises(PlanParseError, match="characters long"):
        parse_plan(json.dumps({"subqueries": [{"id": "s1", "text": "Ed Wood " * 30_000}]}), QUESTION)


@pytest.mark.parametrize("reply", [
    "{" * 100_000, '{"a":' * 5000, "```" * 3000, '{"query": "' + "x" * 300_000 + '"}',
    '{"subqueries": [' + '{"id": "s1", "text": "Ed Wood"},' * 3000 + "]}",
    "\x00\x01\x02{\x7f}\u202e\ud800", '{"query": 1e999999, "subqueries": [NaN, Infinity]}',
])
def test_pathological_replies_stay_within_the_boundary(reply):
    plan = parse_or_none(reply)
    if plan is not None:
        check_pipeline(plan, QUESTION, 4)


def test_renaming_a_duplicate_never_retargets_another_subquerys_parent_link():
    plan = Plan(query=QUESTION, subqueries=[
        SubQuery(id="s1", text="Scott Derrickson nationality"), SubQuery(id="s1", text="Ed Wood nationality"),
        SubQuery(id="s2", text="Ed Wood birthplace"), SubQuery(id="s3", text="same nationality Wood", parents=["s2"])])
    executed = finalize_plan(plan, question=QUESTION, subquery_max=4, origin=PlanOrigin.LLM)
    assert executed is not None
    by_text = {sq.text: sq for sq in executed.subqueries}
    # s3 still depends on "Ed Wood birthplace", not on the renamed duplicate.
    assert by_text["same nationality Wood"].parents == [by_text["Ed Wood birthplace"].id]
    assert by_text["Ed Wood nationality"].id not in {"s1", "s2", "s3"}


def test_an_overlong_query_is_replaced_by_the_question():
    plan = Plan(query="Ed Wood " * 2000, subqueries=[SubQuery(id="s1", text="Scott Derrickson nationality")])
    assert [i.code for i in validate_plan(plan, question=QUESTION, subquery_max=4)] == ["query_too_long"]
    executed = finalize_plan(plan, question=QUESTION, subquery_max=4, origin=PlanOrigin.LLM)
    assert executed is not None and executed.query == QUESTION and executed.origin is PlanOrigin.REPAIRED


def test_a_query_unrelated_to_the_question_is_replaced_by_the_question():
    plan = Plan(query="00", subqueries=[SubQuery(id="s1", text="Scott Derrickson nationality")])
    assert [i.code for i in validate_plan(plan, question=QUESTION, subquery_max=4)] == ["query_off_topic"]
    executed = finalize_plan(plan, question=QUESTION, subquery_max=4, origin=PlanOrigin.LLM)
    assert executed is not None and executed.query == QUESTION and "replaced the query '00'" in executed.notes[0]


def test_a_json_object_that_is_not_a_plan_is_refused_by_name():
    with pytest.raises(PlanParseError, match=r"^the JSON object is not a plan: it has none of the fields query"):
        parse_plan('Here: {"id": "s1", "text": "Ed Wood"}', QUESTION)


@pytest.mark.parametrize("reply", [
    '{"subqueries": [{"id": "s1", "text": "Ed Wood"}, {"id": "s2", "te',
    '```json\n{"query": "q", "subqueries": [{"id": "s1", "text": "Ed Wood"}, {"id": "s2", "text": "Ed Wood"}, ',
])
def test_a_reply_cut_off_inside_its_plan_is_refused_as_cut_off(reply):
    # A small model that repeats one subquery runs into the reply's token cap; what can be decoded is a subquery.
    with pytest.raises(PlanParseError, match=r"^the reply was cut off before its JSON object closed, and what it holds "
                                             r"is not a plan: it has none of the fields query"):
        parse_plan(reply, QUESTION)
