"""Property test of the whole QueryWorkflow under a planner LLM that only ever returns garbage.

Every planner reply is broken on purpose (no JSON, truncated JSON, wrong types, or a plan with at least
one injected defect: a cycle, a self-parent, an unknown parent, duplicate ids, an empty, off-topic or
10,000-character subquery). Whatever comes back, the run ends with a valid QueryResult whose plan was
`repaired` or is the rule planner's `fallback`, and the result says which and why. 40 cases per run
through an in-process scripted LLM (real embeddings, Qdrant and cross-encoder), and a handful of fixed
cases through the loopback HTTP server.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagrag import QueryResult, Settings
from dagrag.core.plan import validate_plan
from dagrag.llm import LLMClient
from dagrag.stack import build_llm
from dagrag.testing.openai_server import ScriptedOpenAIServer

from .scripted_llm import ScriptedLLM
from .test_fuzz_plan import QUESTION, _wrap, any_char, plan_dicts, tally
from .test_llm_path import VERIFIER_REPLY

WRITER_REPLY = "Scott Derrickson and Ed Wood were both American [1][2]."
SUBQUERY_MAX = 4

DEFECTS = {
    "self-parent": [{"id": "p", "text": "Scott Derrickson nationality", "parents": ["p"]}],
    "unknown parent": [{"id": "q", "text": "Ed Wood nationality", "parents": ["s99"]}],
    "cycle": [{"id": "a", "text": "Ed Wood nationality", "parents": ["b"]},
              {"id": "b", "text": "Scott Derrickson nationality", "parents": ["a"]}],
    "duplicate ids": [{"id": "d", "text": "Ed Wood"}, {"id": "d", "text": "Scott Derrickson"}],
    "empty text": [{"id": "e", "text": "  "}],
    "off topic": [{"id": "o", "text": "stock prices today"}],
    "10k characters": [{"id": "l", "text": "Ed Wood nationality " * 500}],
    "control characters": [{"id": "c", "text": "Ed Wood\x00\x1b[31m nationality\u202e", "parents": ["c"]}],
}


def _broken(data: dict, defect: str, how: str) -> str:
    if isinstance(data.get("subqueries"), list):
        data = {**data, "subqueries": [*data["subqueries"], *DEFECTS[defect]]}
    return _wrap(data, how, 0.6)


broken_replies = st.one_of(
    st.builds(_broken, plan_dicts, st.sampled_from(list(DEFECTS)), st.sampled_from(["bare", "fenced", "prose"])),
    st.builds(_broken, plan_dicts, st.sampled_from(list(DEFECTS)), st.just("truncated")),
    st.text(st.characters(exclude_categories=(), exclude_characters="{"), max_size=200),  # no JSON object at all
    st.builds(json.dumps, st.lists(st.integers()) | st.text(any_char, max_size=30)),  # JSON, but not an object
)


def assert_valid_result(result: QueryResult) -> None:
    assert isinstance(result, QueryResult) and result.question == QUESTION and result.answer.strip()
    plan = result.plan
    assert plan.origin.value in ("repaired", "fallback")
    tally(f"origin: {plan.origin.value}")
    assert validate_plan(plan, question=QUESTION, subquery_max=SUBQUERY_MAX) == []
    if plan.origin.value == "fallback":
        planner = [d for d in result.degradations if d.agent == "planner"]
        assert len(planner) == 1 and planner[0].reason and planner[0].fallback == "rule-based planner"
    else:
        assert plan.notes and not any(d.agent == "planner" for d in result.degradations)
    ids = [sq.id for sq in plan.subqueries]
    tally(f"{len(ids)} subqueries" + ("" if plan.requires_retrieval else ", no retrieval"))
    # Every subquery is reported; a plan may say the question needs no documents, and then none is searched.
    assert [r.id for r in result.subqueries] == ids
    assert all((r.status == "skipped") != plan.requires_retrieval for r in result.subqueries)
    assert result.retrieval_confidence_features["subquery_count"] == len(ids)
    assert all(s.subquery_id in ids for s in result.sources)
    assert QueryResult.model_validate_json(result.model_dump_json()) == result  # serialises (CLI --json)


@pytest.fixture(scope="module")
def fuzz_workflow(make_workflow):
    """One workflow; each case swaps in a client over a fresh scripted LLM (the agents only hold a reference to it)."""
    workflow = make_workflow(subquery_max=SUBQUERY_MAX)

    def with_llm(llm: ScriptedLLM):
        workflow.planner.client = workflow.writer.client = workflow.verifier.client = LLMClient(llm)
        return workflow
    return with_llm


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(first=broken_replies, second=broken_replies, verifier=st.sampled_from([VERIFIER_REPLY, "not json", ""]))
async def test_garbage_plans_always_end_in_a_valid_repaired_or_fallback_result(fuzz_workflow, first, second,
                                                                                 verifier):
    llm = ScriptedLLM(replies={"planner": [first, second], "writer": WRITER_REPLY, "verifier": verifier})
    result = await asyncio.wait_for(fuzz_workflow(llm).run(query=QUESTION), timeout=120)
    assert_valid_result(result)
    assert 1 <= len(llm.requests_of("planner")) <= 2
    if len(llm.requests_of("planner")) == 2:  # the retry quotes what was wrong
        assert "Your previous reply could not be used: " in llm.requests_of("planner")[1][1]


@pytest.fixture(scope="module")
def server():
    with ScriptedOpenAIServer() as running:
        yield running


@pytest.mark.parametrize("reply", [
    _broken({"subqueries": [{"id": "s1", "text": "Scott Derrickson nationality"}]}, "cycle", "fenced"),
    _broken({"subqueries": ["Ed Wood nationality"]}, "10k characters", "prose"),
    _broken({"query": None, "subqueries": [{"text": "Ed Wood", "hints": "x"}]}, "control characters", "bare"),
    _broken({"subqueries": [{"id": "s1", "text": "Ed Wood"}]}, "duplicate ids", "truncated"),
    "\x00\x01 {{{ ]]] \u202e plan: none \ud83d\ude00",
], ids=["cycle", "10k-text", "control-chars", "truncated", "binary-noise"])
async def test_garbage_plans_over_http_end_in_a_valid_result(server, make_workflow, reply):
    server.requests.clear()
    server.script("planner", reply)
    server.script("writer", WRITER_REPLY)
    server.script("verifier", VERIFIER_REPLY)
    llm = build_llm(Settings(llm="openai-like:scripted", llm_base_url=server.base_url, llm_timeout_s=10))
    result = await asyncio.wait_for(make_workflow(llm=llm, subquery_max=SUBQUERY_MAX).run(query=QUESTION), 120)
    assert_valid_result(result)
    assert result.answer == WRITER_REPLY and result.verification.method == "llm"
    assert len(server.requests_of("planner")) in (1, 2)
