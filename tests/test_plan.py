"""DAG logic: parsing, validation, repair and layering, over hand-made plans."""

from __future__ import annotations

import itertools
import json

import pytest

from dagrag.core.plan import (
    Plan,
    PlanOrigin,
    PlanParseError,
    SubQuery,
    finalize_plan,
    layer_plan,
    parse_plan,
    repair_plan,
    resolve_references,
    validate_plan,
)
from dagrag.core.replies import ReplyParseError, extract_json_object

QUESTION = "Were Scott Derrickson and Ed Wood of the same nationality?"


def plan_of(*subqueries: tuple[str, str, list[str]]) -> Plan:
    return Plan(query=QUESTION, subqueries=[SubQuery(id=i, text=t, parents=p) for i, t, p in subqueries])


def codes(plan: Plan, subquery_max: int = 4) -> list[str]:
    return [issue.code for issue in validate_plan(plan, question=QUESTION, subquery_max=subquery_max)]


def test_valid_two_layer_plan_has_no_issues_and_layers_in_order():
    plan = plan_of(("s1", "Scott Derrickson nationality", []), ("s2", "Ed Wood nationality", []),
                   ("s3", "compare nationality of {s1} and {s2}", ["s1", "s2"]))
    assert codes(plan) == []
    assert layer_plan(plan) == [["s1", "s2"], ["s3"]]


@pytest.mark.parametrize(
    ("subqueries", "expected"),
    [
        ([("s1", "Scott Derrickson", ["s1"])], ["self_parent"]),
        ([("s1", "Scott Derrickson", ["s9"])], ["unknown_parent"]),
        ([("s1", "Scott Derrickson", ["s2"]), ("s2", "Ed Wood", [])], ["forward_parent"]),
        ([("s1", "Scott Derrickson", ["s2"]), ("s2", "Ed Wood", ["s1"])], ["forward_parent", "cycle"]),
        ([("s1", "Scott Derrickson", []), ("s1", "Ed Wood", [])], ["duplicate_id"]),
        ([("s1", "   ", [])], ["empty_text"]),
        ([("s1", "weather in Paris today", [])], ["off_topic"]),
        ([("s1", "Scott " * 300, [])], ["text_too_long"]),
        ([], ["no_subqueries"]),
    ],
)
def test_each_broken_rule_is_reported(subqueries, expected):
    assert codes(plan_of(*subqueries)) == expected


def test_too_many_subqueries_is_reported():
    plan = plan_of(*[(f"s{i}", f"Ed Wood fact {i}", []) for i in range(1, 6)])
    assert codes(plan, subquery_max=4) == ["too_many"]
    assert codes(plan, subquery_max=5) == []


def test_a_long_question_is_always_a_valid_subquery_of_its_own_plan():
    # A question may be MAX_QUESTION_CHARS (2,000) long; its single-query plan and its bridge hop must stay valid.
    question = "Which of these words " + "word " * 300 + "came first?"
    plan = Plan(query=question, subqueries=[SubQuery(id="s1", text=question),
                                            SubQuery(id="s2", text="{s1} " + question, parents=["s1"])])
    assert validate_plan(plan, question=question, subquery_max=4) == []
    assert codes(plan_of(("s1", "Scott " * 300, []))) == ["text_too_long"]  # a short question's limit is 1,000


def test_a_parent_reference_alone_does_not_make_a_subquery_on_topic():
    assert codes(plan_of(("s1", "Ed Wood", []), ("s2", "{s1} birthplace", ["s1"]))) == ["off_topic"]


def repaired(plan: Plan, subquery_max: int = 4) -> tuple[Plan, list[str]]:
    fixed, notes = repair_plan(plan, question=QUESTION, subquery_max=subquery_max)
    assert validate_plan(fixed, question=QUESTION, subquery_max=subquery_max) == [] or not fixed.subqueries
    return fixed, notes


def test_repair_cuts_self_and_unknown_parents():
    fixed, notes = repaired(plan_of(("s1", "Scott Derrickson", ["s1", "s7"]), ("s2", "Ed Wood", ["s1"])))
    assert [sq.parents for sq in fixed.subqueries] == [[], ["s1"]]
    assert any("self-parent" in n for n in notes) and any("unknown parent 's7'" in n for n in notes)


def test_repair_reorders_forward_references_without_cycle():
    fixed, notes = repaired(plan_of(("s2", "Ed Wood nationality {s1}", ["s1"]), ("s1", "Scott Derrickson", [])))
    assert [sq.id for sq in fixed.subqueries] == ["s1", "s2"]
    assert "reordered subqueries so parents come first" in notes


def test_repair_breaks_cycles_by_cutting_forward_links():
    fixed, notes = repaired(plan_of(("s1", "Scott Derrickson", ["s3"]), ("s2", "Ed Wood", ["s1"]),
                                    ("s3", "nationality of both", ["s2"])))
    assert layer_plan(fixed) == [["s1"], ["s2"], ["s3"]]
    assert any("break a cycle" in n for n in notes)


def test_repair_renames_duplicate_ids_and_keeps_links_to_the_first():
    fixed, _ = repaired(plan_of(("s1", "Scott Derrickson", []), ("s1", "Ed Wood", []),
                                ("s3", "nationality", ["s1"])))
    assert [sq.id for sq in fixed.subqueries] == ["s1", "s2", "s3"]
    assert fixed.subqueries[2].parents == ["s1"]


def test_repair_drops_off_topic_and_empty_subqueries_and_caps_the_count():
    fixed, notes = repaired(plan_of(("s1", "stock prices", []), ("s2", "", []),
                                    *[(f"t{i}", f"Ed Wood film {i}", []) for i in range(6)]), subquery_max=3)
    assert [sq.id for sq in fixed.subqueries] == ["t0", "t1", "t2"]
    assert len(notes) == 3


def test_repair_that_leaves_nothing_makes_finalize_return_none():
    plan = plan_of(("s1", "stock prices", []))
    assert finalize_plan(plan, question=QUESTION, subquery_max=4, origin=PlanOrigin.LLM) is None


def test_finalize_marks_llm_plans_that_needed_repair():
    good = plan_of(("s1", "Scott Derrickson", []), ("s2", "Ed Wood", []))
    assert finalize_plan(good, question=QUESTION, subquery_max=4, origin=PlanOrigin.LLM).origin is PlanOrigin.LLM
    bad = plan_of(("s1", "Scott Derrickson", ["s1"]), ("s2", "Ed Wood", []))
    executed = finalize_plan(bad, question=QUESTION, subquery_max=4, origin=PlanOrigin.LLM)
    assert executed.origin is PlanOrigin.REPAIRED and executed.notes and executed.layers == [["s1", "s2"]]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_layering_every_dag_over_n_nodes_respects_every_edge(n):
    ids = [f"s{i}" for i in range(n)]
    edges = [(a, b) for a, b in itertools.combinations(range(n), 2)]
    # Every subset of forward edges is a DAG: check all of them for small n.
    for mask in range(min(2 ** len(edges), 512)):
        chosen = [edges[i] for i in range(len(edges)) if mask >> i & 1]
        plan = Plan(query=QUESTION, subqueries=[
            SubQuery(id=ids[j], text=f"Ed Wood {j}", parents=[ids[a] for a, b in chosen if b == j]) for j in range(n)])
        layers = layer_plan(plan)
        level = {sq: depth for depth, layer in enumerate(layers) for sq in layer}
        assert sorted(level) == sorted(ids)
        assert all(level[ids[a]] < level[ids[b]] for a, b in chosen)
        # Topological generations are tight: every node sits one layer below its deepest parent.
        for j in range(n):
            parents = [level[ids[a]] for a, b in chosen if b == j]
            assert level[ids[j]] == (max(parents) + 1 if parents else 0)


def test_layering_rejects_a_cycle():
    with pytest.raises(ValueError, match="cycle"):
        layer_plan(plan_of(("s1", "Ed Wood", ["s2"]), ("s2", "Ed Wood", ["s1"])))


@pytest.mark.parametrize(
    "reply",
    [
        '{"query": "q", "subqueries": [{"id": "s1", "text": "Ed Wood"}]}',
        'Sure! Here is the plan:\n```json\n{"query": "q", "subqueries": [{"id": "s1", "text": "Ed Wood"}]}\n```',
        'The plan is {"query": "q", "subqueries": [{"id": "s1", "text": "Ed Wood"}]} — hope it helps {not json}',
        '```\n{"subqueries": ["Ed Wood"]}\n```',
    ],
)
def test_parse_extracts_the_plan_from_bare_fenced_and_prose_replies(reply):
    plan = parse_plan(reply, QUESTION)
    assert [sq.text for sq in plan.subqueries] == ["Ed Wood"] and plan.subqueries[0].id == "s1"


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("", "empty"),
        ("no json here", "no JSON object"),
        ("[1, 2, 3]", "no JSON object"),
        ('{"subqueries": [42]}', "subqueries.0"),
        ('{"subqueries": [{"id": "s1"}]}', "subqueries.0.text"),
        ('{"subqueries": [{"id": "s1", "text": "x", "parents": {"a": 1}}]}', "parents"),
        ('{"subqueries": "s1"}', "subqueries"),
    ],
)
def test_parse_names_what_is_wrong(reply, message):
    with pytest.raises(PlanParseError, match=message):
        parse_plan(reply, QUESTION)


def test_parse_coerces_common_shapes():
    plan = parse_plan(json.dumps({"subqueries": [{"id": 1, "text": " Ed   Wood ", "parents": "s0",
                                                  "hints": {"must_include": "Ed Wood", "top_k": 7}}]}), QUESTION)
    sq = plan.subqueries[0]
    assert (sq.id, sq.text, sq.parents) == ("1", "Ed Wood", ["s0"])
    assert (sq.hints.must_include, sq.hints.top_k) == (["Ed Wood"], 7)
    assert plan.query == QUESTION


@pytest.mark.parametrize("query", [None, 5, "", "   ", ["a"]])
def test_a_missing_or_non_text_query_is_the_question(query):
    plan = parse_plan(json.dumps({"query": query, "subqueries": [{"text": "Ed Wood", "hints": "x"}]}), QUESTION)
    assert plan.query == QUESTION
    assert plan.subqueries[0].id == "s1" and plan.subqueries[0].hints.must_include == []


@pytest.mark.parametrize(("value", "requires_retrieval"), [
    (True, True), (False, False), ("no", False), (0, False), ("maybe", True), (None, True), ([], True), (2, True)])
def test_only_a_clear_no_skips_retrieval(value, requires_retrieval):
    reply = json.dumps({"requires_retrieval": value, "hyde_document": ["x"], "subqueries": ["Ed Wood"]})
    plan = parse_plan(reply, QUESTION)
    assert plan.requires_retrieval is requires_retrieval and plan.hyde_document is None


@pytest.mark.parametrize(("top_k", "expected"), [(0, 1), (10_000, 200), ("7", 7), (3.9, 3), ("lots", None),
                                                 (True, None), ([5], None), (1e400, None)])
def test_top_k_hint_is_clamped_or_ignored(top_k, expected):
    reply = json.dumps({"subqueries": [{"id": "s1", "text": "Ed Wood", "hints": {"top_k": top_k}}]})
    assert parse_plan(reply, QUESTION).subqueries[0].hints.top_k == expected


def test_an_integer_over_pythons_digit_limit_is_not_json():
    with pytest.raises(ReplyParseError, match="no JSON object"):
        extract_json_object('{"top_k": ' + "9" * 5000 + "}")


def test_a_reply_escaping_half_a_surrogate_pair_gives_a_plan_that_serialises():
    # Found by the plan fuzzer: JSON may escape a lone surrogate, which no UTF-8 output (the CLI's --json) can hold.
    reply = '{"subqueries": [{"id": "s1", "text": "Who is \\ud800 Ed Wood \\ud83d\\ude00"}]}'
    plan = parse_plan(reply, "Who is Ed Wood?")
    assert plan.subqueries[0].text == "Who is \ufffd Ed Wood \U0001f600"
    assert "Ed Wood" in plan.model_dump_json()


def test_extract_json_prefers_fenced_block_and_survives_nesting():
    assert extract_json_object('x {"a": {"b": [1, {"c": 2}]}} y') == {"a": {"b": [1, {"c": 2}]}}


def test_resolve_references_fills_known_parents_only():
    assert resolve_references("born where {s1} lived, {s9}", {"s1": "Shirley Temple"}) == \
        "born where Shirley Temple lived, {s9}"


def test_a_step_that_only_combines_earlier_answers_is_dropped():
    # What a 1.5B model adds after one search per case: nothing to search for, the writer compares.
    question = "Which case was decided first, Selle v. Gibb or Reynolds v. Sims?"
    plan = Plan.model_validate({"query": question, "subqueries": [
        {"id": "s1", "text": "When was Selle v. Gibb decided?"},
        {"id": "s2", "text": "When was Reynolds v. Sims decided?"},
        {"id": "s3", "text": "Which case was decided first?", "parents": ["s1", "s2"]}]})
    assert [i.code for i in validate_plan(plan, question=question, subquery_max=4)] == ["combine_step"]
    executed = finalize_plan(plan, question=question, subquery_max=4, origin=PlanOrigin.LLM)
    assert executed is not None and executed.origin is PlanOrigin.REPAIRED
    assert [sq.id for sq in executed.subqueries] == ["s1", "s2"] and executed.layers == [["s1", "s2"]]
    assert any("s3: it only combines s1, s2" in note for note in executed.notes)
    # A step that names its parents searches for something: it stays.
    chained = plan.model_copy(update={"subqueries": [*plan.subqueries[:2], plan.subqueries[2].model_copy(
        update={"text": "Which of {s1} and {s2} was decided first?"})]})
    assert validate_plan(chained, question=question, subquery_max=4) == []


def test_a_search_written_twice_is_dropped_unless_another_subquery_builds_on_it():
    # What Qwen2.5-1.5B planned for a MuSiQue three-hop question: the same search three times.
    question = "Where is the country the sandwich named for the predecessor of National Rail is from located?"
    repeated = "Where is the country the sandwich is from located?"
    plan = Plan.model_validate({"query": question, "subqueries": [
        {"id": "s1", "text": "What was the predecessor of National Rail?"},
        {"id": "s2", "text": repeated},
        {"id": "s3", "text": repeated.upper()},
        {"id": "s4", "text": f" {repeated} "}]})
    assert [i.code for i in validate_plan(plan, question=question, subquery_max=4)] == ["repeated_search"] * 2
    executed = finalize_plan(plan, question=question, subquery_max=4, origin=PlanOrigin.LLM)
    assert executed is not None and executed.origin is PlanOrigin.REPAIRED
    assert [sq.id for sq in executed.subqueries] == ["s1", "s2"]
    assert [n for n in executed.notes if "repeats" in n] == [
        "dropped s3: it repeats an earlier subquery's search", "dropped s4: it repeats an earlier subquery's search"]
    # Without a `{sN}` in it, the same text is the same search whatever its parents ("Who played ...?" three
    # times in a chain: the last is dropped, then the one before it, which nothing builds on any more).
    chain = Plan.model_validate({"query": question, "subqueries": [
        {"id": "s1", "text": repeated}, {"id": "s2", "text": repeated, "parents": ["s1"]},
        {"id": "s3", "text": repeated, "parents": ["s2"]}]})
    assert [i.subquery_id for i in validate_plan(chain, question=question, subquery_max=4)] == ["s3"]
    executed = finalize_plan(chain, question=question, subquery_max=4, origin=PlanOrigin.LLM)
    assert executed is not None and [sq.id for sq in executed.subqueries] == ["s1"]
    # A repeat a later hop builds on stays.
    chained = Plan.model_validate({"query": question, "subqueries": [
        {"id": "s1", "text": repeated}, {"id": "s2", "text": repeated},
        {"id": "s3", "text": "Where is {s2} located?", "parents": ["s2"]}]})
    assert validate_plan(chained, question=question, subquery_max=4) == []


# --- roles ---------------------------------------------------------------------------------------------------

def test_every_subquery_gets_its_role_from_the_plans_shape():
    plan = plan_of(("s1", QUESTION.upper(), []), ("s2", "{s1} nationality", ["s1"]), ("s3", "Ed Wood", []))
    executed = finalize_plan(plan, question=QUESTION, subquery_max=4, origin=PlanOrigin.GIVEN)
    assert [(sq.id, sq.role) for sq in executed.subqueries] == [("s1", "question"), ("s2", "hop"), ("s3", "step")]


def test_the_generic_bridge_hop_is_the_question_again_about_what_the_questions_own_search_found():
    bridge = plan_of(("s1", QUESTION, []), ("s2", "{s1} " + QUESTION, ["s1"]), ("s3", "{s2} " + QUESTION, ["s2"]))
    executed = finalize_plan(bridge, question=QUESTION, subquery_max=4, origin=PlanOrigin.OFFLINE)
    # s3 asks the question again too, but about a hop's page: its parent's ranking is not the single path's
    assert [sq.role for sq in executed.subqueries] == ["question", "bridge", "hop"]
    narrower = plan_of(("s1", QUESTION, []), ("s2", "{s1} nationality", ["s1"]))
    executed = finalize_plan(narrower, question=QUESTION, subquery_max=4, origin=PlanOrigin.LLM)
    assert [sq.role for sq in executed.subqueries] == ["question", "hop"]


def test_a_role_in_untrusted_input_is_decided_by_the_plan_shape_not_taken_as_given():
    plan = Plan.model_validate({"query": QUESTION, "subqueries": [
        {"id": "s1", "text": "Scott Derrickson", "role": "question"},
        {"id": "s2", "text": "{s1} nationality", "parents": ["s1"], "role": "side"},
        {"id": "s3", "text": "Ed Wood", "role": ["nonsense"]}]})
    assert plan.subqueries[2].role == "step"
    executed = finalize_plan(plan, question=QUESTION, subquery_max=4, origin=PlanOrigin.LLM)
    assert [(sq.id, sq.role) for sq in executed.subqueries] == [("s1", "step"), ("s2", "hop"), ("s3", "step")]


def test_a_comparison_side_keeps_its_role_even_when_it_shares_every_content_word_with_the_question():
    # "For Against" is all stopwords: the side "Local H united states" has the question's content words.
    question = "Are Local H and For Against both from the United States?"
    plan = Plan(query=question, subqueries=[SubQuery(id="s1", text="Local H united states", role="side"),
                                            SubQuery(id="s2", text="For Against united states", role="side")])
    executed = finalize_plan(plan, question=question, subquery_max=4, origin=PlanOrigin.OFFLINE)
    assert [sq.role for sq in executed.subqueries] == ["side", "side"]
