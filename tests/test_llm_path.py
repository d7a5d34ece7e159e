"""The LLM path through a real OpenAI-compatible HTTP server on 127.0.0.1 with scripted replies."""

from __future__ import annotations

import json

import pytest

from dagrag.agents.rule_planner import plan_offline
from dagrag.testing.openai_server import ScriptedOpenAIServer, dagrag_llm

QUESTION = "Were Scott Derrickson and Ed Wood of the same nationality?"
GOOD_PLAN = {
    "query": QUESTION, "requires_retrieval": True, "hyde_document": None,
    "subqueries": [
        {"id": "s1", "text": "Scott Derrickson nationality", "parents": [],
         "hints": {"must_include": ["Scott Derrickson"]}},
        {"id": "s2", "text": "Ed Wood nationality", "parents": [], "hints": {"must_include": ["Ed Wood"]}},
    ],
}
# Sources: s0 (the question itself, which every plan searches) finds Ed Wood first, then s1 Scott Derrickson.
ADDED_QUESTION_NOTE = "added s0: the question as asked (every plan searches it)"
WRITER_REPLY = "Yes, both are American [1][2]. Scott Derrickson is an American director [2]."
VERIFIER_REPLY = json.dumps({"sentences": [{"index": 1, "supported": True, "source": 1},
                                           {"index": 2, "supported": True, "source": 2}]})


@pytest.fixture
def server():
    with ScriptedOpenAIServer() as running:
        running.script("writer", WRITER_REPLY)
        running.script("verifier", VERIFIER_REPLY)
        yield running


@pytest.fixture
def llm_workflow(server, make_workflow):
    def build(**overrides):
        return make_workflow(llm=dagrag_llm(server), **overrides)
    return build


async def test_a_good_plan_is_used_as_is_and_every_call_is_accounted(server, llm_workflow):
    server.script("planner", json.dumps(GOOD_PLAN))
    result = await llm_workflow().run(query=QUESTION)
    assert result.plan.origin.value == "llm" and result.plan.notes == [ADDED_QUESTION_NOTE]
    assert [sq.text for sq in result.plan.subqueries] == [QUESTION, "Scott Derrickson nationality",
                                                          "Ed Wood nationality"]
    assert result.answer == WRITER_REPLY
    assert result.verification.method == "llm" and result.verification.support_rate == 1.0
    assert [c.agent for c in result.llm_calls.calls] == ["planner", "writer", "verifier"]
    assert result.llm_calls.count == 3
    assert result.llm_calls.prompt_tokens > 0 and result.llm_calls.completion_tokens > 0
    planner_request = server.requests_of("planner")[0]
    # The plan's schema travels with the request (the server enforces it), and the reply is capped.
    assert planner_request["response_format"]["type"] == "json_schema"
    schema = planner_request["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["query", "subqueries"] and schema["additionalProperties"] is False
    assert planner_request["max_tokens"] > 0
    assert planner_request["model"] == "scripted-model"
    assert result.concise_answer is None  # this writer reply has no "Answer:" line
    # Sources reach the writer fenced as data.
    writer_prompt = server.requests_of("writer")[0]["messages"][-1]["content"]
    assert '<source id="2" title="Scott Derrickson">' in writer_prompt


async def test_planner_rule_plans_without_the_llm_which_still_writes_and_verifies(server, llm_workflow):
    server.script("planner", json.dumps(GOOD_PLAN))
    result = await llm_workflow(planner="rule").run(query=QUESTION)
    assert not server.requests_of("planner") and result.plan.origin.value == "offline"
    assert [sq.text for sq in result.plan.subqueries] == [
        *(sq.text for sq in plan_offline(QUESTION).subqueries), QUESTION]  # the sides, then the question itself
    assert [c.agent for c in result.llm_calls.calls] == ["writer", "verifier"]
    assert result.answer == WRITER_REPLY and result.verification.method == "llm"


async def test_with_comparisons_split_a_comparison_is_the_rule_planners_and_any_other_question_the_llms(
        server, llm_workflow):
    # PLANNER_SPLIT_COMPARISONS: a question read as a comparison by its form gets one search per side from the rule
    # planner and costs no plan call; a question that is no comparison is still planned by the LLM.
    server.script("planner", json.dumps(GOOD_PLAN))
    workflow = llm_workflow(planner_split_comparisons=True)
    compared = await workflow.run(query=QUESTION)
    assert not server.requests_of("planner") and compared.plan.origin.value == "offline"
    assert [sq.role for sq in compared.plan.subqueries].count("side") == 2
    assert any("comparison by its form" in note for note in compared.plan.notes)
    assert [c.agent for c in compared.llm_calls.calls] == ["writer", "verifier"]
    bridge = "What government position was held by the woman who portrayed Corliss Archer?"
    server.script("planner", json.dumps({"query": bridge, "subqueries": [
        {"id": "s1", "text": "woman who portrayed Corliss Archer", "parents": []},
        {"id": "s2", "text": "government position held by {s1}", "parents": ["s1"]}]}))
    planned = await workflow.run(query=bridge)
    assert server.requests_of("planner") and planned.plan.origin.value in ("llm", "repaired")


@pytest.mark.parametrize("wrap", [
    lambda plan: f"```json\n{plan}\n```",
    lambda plan: f"Here is the plan you asked for:\n{plan}\nLet me know if you need more.",
])
async def test_fenced_or_prose_wrapped_plans_are_extracted(server, llm_workflow, wrap):
    server.script("planner", wrap(json.dumps(GOOD_PLAN)))
    result = await llm_workflow().run(query=QUESTION)
    assert result.plan.origin.value == "llm" and len(result.plan.subqueries) == 3
    assert len(server.requests_of("planner")) == 1


async def test_a_repairable_plan_is_repaired_and_says_so(server, llm_workflow):
    plan = json.loads(json.dumps(GOOD_PLAN))
    plan["subqueries"][0]["parents"] = ["s1", "s7"]
    server.script("planner", json.dumps(plan))
    result = await llm_workflow().run(query=QUESTION)
    assert result.plan.origin.value == "repaired"
    assert any("self-parent" in n for n in result.plan.notes) and any("'s7'" in n for n in result.plan.notes)
    assert result.plan.layers == [["s0", "s1", "s2"]]


async def test_garbage_is_retried_once_with_the_error_then_falls_back(server, llm_workflow):
    server.script("planner", "I cannot help with that.", '{"subqueries": [{"id": "s1", "text": "stock prices"}]}')
    result = await llm_workflow().run(query=QUESTION)
    requests = server.requests_of("planner")
    assert len(requests) == 2
    assert "could not be used: the reply holds no JSON object" in requests[1]["messages"][-1]["content"]
    assert result.plan.origin.value == "fallback"
    assert [d.agent for d in result.degradations] == ["planner"]
    # The fallback is the rule planner's plan: one subquery per person (then the question itself).
    assert [sq.hints.must_include for sq in result.plan.subqueries] == [["Scott Derrickson"], ["Ed Wood"], []]


async def test_server_errors_fall_back_to_the_offline_twins(server, llm_workflow):
    for agent in ("planner", "writer", "verifier"):
        server.script(agent, (500, "boom"))
    result = await llm_workflow().run(query=QUESTION)
    assert result.plan.origin.value == "fallback"
    assert {d.agent for d in result.degradations} == {"planner", "writer", "verifier"}
    assert result.verification.method == "lexical+cross-encoder" and result.verification.support_rate == 1.0
    assert all(not call.ok for call in result.llm_calls.calls)


async def test_citations_of_sources_that_do_not_exist_are_flagged(server, llm_workflow):
    server.script("planner", json.dumps(GOOD_PLAN))
    server.script("writer", "Both are American [9]. Scott Derrickson is an American director [2].")
    server.script("verifier", "not json")
    result = await llm_workflow().run(query=QUESTION)
    first, second = result.verification.sentences
    assert first.unknown_citations == [9] and not first.supported and "do not exist" in first.reason
    assert second.supported and second.supporting_source == 2
    assert [d.agent for d in result.degradations] == ["verifier"]


async def test_a_judge_reply_cut_short_keeps_its_verdicts_and_the_rest_are_judged_offline(server, llm_workflow):
    server.script("planner", json.dumps(GOOD_PLAN))
    # max_tokens reached inside the second verdict: the first is used, the second sentence is judged offline.
    server.script("verifier", '{"sentences": [{"index": 1, "supported": true, "source": 1, "reason": "said"},'
                              ' {"index": 2, "supported": tr')
    result = await llm_workflow().run(query=QUESTION)
    first, second = result.verification.sentences
    assert first.method == "llm" and first.supported and first.reason == "said"
    assert second.method == "lexical+cross-encoder" and second.supported and second.supporting_source == 2
    assert result.verification.method == "llm"
    assert [(d.agent, d.fallback) for d in result.degradations] == [
        ("verifier", "lexical/cross-encoder verifier for those")]
    assert "sentence(s) [2]" in result.degradations[0].reason


async def test_a_small_models_answer_is_verified_offline_unless_verifier_llm(server, make_workflow):
    server.script("planner", json.dumps(GOOD_PLAN))
    small = dagrag_llm(server, llm="openai-like:tiny-1.5b-instruct")
    result = await make_workflow(llm=small).run(query=QUESTION)
    # (the offline judge may send an unsupported sentence back: then the writer is called again)
    assert {c.agent for c in result.llm_calls.calls} == {"planner", "writer"} and not server.requests_of("verifier")
    assert result.verification.method.startswith("lexical") and result.verification.sentences

    server.script("planner", json.dumps(GOOD_PLAN))
    result = await make_workflow(llm=small, verifier="llm").run(query=QUESTION)
    assert result.verification.method == "llm" and len(server.requests_of("verifier")) == 1


async def test_a_writer_that_says_the_sources_do_not_answer_makes_the_run_abstain(server, llm_workflow):
    server.script("planner", json.dumps(GOOD_PLAN))
    server.script("writer", "Answer: unknown\nThe sources say nothing about nationality [1].")
    result = await llm_workflow().run(query=QUESTION)
    assert result.abstained and result.concise_answer is None
    assert "said they do not answer the question: The sources say nothing about nationality [1]." in (
        result.abstain_reason)
    assert result.answer.startswith("The collection does not seem to answer this question. The closest passages: [1] ")
    assert result.answer.endswith(". The sources say nothing about nationality [1].")  # the model's words are kept
    assert result.sources  # the closest sources are still listed
    # nothing was claimed, so nothing is verified: no verifier call, no backtrack
    assert result.verification.method.startswith("none") and not server.requests_of("verifier")
    assert [c.agent for c in result.llm_calls.calls] == ["planner", "writer"]

    server.script("planner", json.dumps(GOOD_PLAN))  # abstaining off (ABSTAIN_BELOW 0): the model's words stand
    server.script("writer", "Answer: unknown\nThe sources say nothing about nationality [1].")
    result = await llm_workflow(abstain_below=0).run(query=QUESTION)
    assert not result.abstained and result.answer == "The sources say nothing about nationality [1]."
