"""LLM help for multi-hop questions, through the loopback OpenAI-compatible server: reference rewrites,
HyDE, subanswer aggregation and verification-driven backtracking — and the offline twin when each fails."""

from __future__ import annotations

import json

import pytest

from dagrag.testing.openai_server import ScriptedOpenAIServer, dagrag_llm, server_error

CORLISS = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
BRIDGE_PLAN = {
    "query": CORLISS, "requires_retrieval": True, "hyde_document": None,
    "subqueries": [
        {"id": "s1", "text": "woman who portrayed Corliss Archer in the film Kiss and Tell", "parents": []},
        {"id": "s2", "text": "government position held by {s1}", "parents": ["s1"]},
    ],
}
SUPPORTED = json.dumps({"sentences": [{"index": 1, "supported": True, "source": 2}]})


@pytest.fixture
def server():
    with ScriptedOpenAIServer() as running:
        running.script("planner", json.dumps(BRIDGE_PLAN))
        running.script("writer", "Shirley Temple served as Chief of Protocol of the United States [2].")
        running.script("verifier", SUPPORTED)
        yield running


def hop(result):
    """The plan's hop, s2 (s0 is the question itself, which every plan searches)."""
    return next(r for r in result.subqueries if r.id == "s2")


@pytest.fixture
def llm_workflow(server, make_workflow):
    def build(**overrides):  # the resolver is off by default; this module is about what it does when on
        return make_workflow(llm=dagrag_llm(server), context_budget=2, **{"resolve_with_llm": True, **overrides})
    return build


async def test_by_default_the_bridge_search_fills_a_reference_not_the_llm(server, llm_workflow):
    result = await llm_workflow(resolve_with_llm=False).run(query=CORLISS)
    assert not server.requests_of("resolver")
    assert "Shirley Temple" in hop(result).searched_as  # the entity s1's page names, found offline
    assert [c.agent for c in result.llm_calls.calls] == ["planner", "writer", "verifier"]


async def test_the_resolver_rewrites_the_dependent_subquery_from_the_parents_passage(server, llm_workflow):
    server.script("resolver", json.dumps({"s2": "government position held by Shirley Temple"}))
    result = await llm_workflow().run(query=CORLISS)
    hop2 = hop(result)
    assert hop2.searched_as == "government position held by Shirley Temple"
    assert [s.metadata["title"] for s in result.sources] == ["Kiss and Tell (1945 film)", "Shirley Temple"]
    # The resolver saw s1's best passage, fenced as data, and the child with its reference.
    prompt = server.requests_of("resolver")[0]["messages"][-1]["content"]
    assert '<finding query_id="s1"' in prompt and "Shirley Temple" in prompt and "{s1}" in prompt
    assert [c.agent for c in result.llm_calls.calls] == ["planner", "resolver", "writer", "verifier"]


@pytest.mark.parametrize("reply", [server_error(500), "not json", json.dumps({"s2": "still {s1}"})],
                         ids=["http-500", "not-json", "unresolved"])
async def test_without_a_usable_rewrite_the_bridge_entity_searches_take_over(server, llm_workflow, reply):
    server.script("resolver", reply)
    result = await llm_workflow().run(query=CORLISS)
    assert "Shirley Temple" in [s.metadata["title"] for s in result.sources]
    assert "Shirley Temple" in hop(result).searched_as
    if reply != json.dumps({"s2": "still {s1}"}):
        assert [d.agent for d in result.degradations] == ["resolver"]


async def test_hyde_passages_are_asked_once_per_layer_and_failures_fall_back(server, llm_workflow):
    server.script("resolver", json.dumps({"s2": "government position held by Shirley Temple"}))
    server.script("hyde", json.dumps({"s1": "Shirley Temple played Corliss Archer in Kiss and Tell (1945)."}),
                  json.dumps({"s2": "Shirley Temple Black was United States Chief of Protocol."}))
    result = await llm_workflow(subquery_hyde=True).run(query=CORLISS)
    hyde_requests = server.requests_of("hyde")
    assert len(hyde_requests) == 2  # one per layer
    assert "s2: government position held by Shirley Temple" in hyde_requests[1]["messages"][-1]["content"]
    assert "Shirley Temple" in [s.metadata["title"] for s in result.sources]

    server.script("hyde", server_error(503))
    degraded = await llm_workflow(subquery_hyde=True).run(query=CORLISS)
    assert {d.agent for d in degraded.degradations} == {"hyde"}
    assert "Shirley Temple" in [s.metadata["title"] for s in degraded.sources]


async def test_the_aggregator_answers_each_subquery_then_combines_with_citations(server, llm_workflow):
    server.script("resolver", json.dumps({"s2": "government position held by Shirley Temple"}))
    server.script("subanswer", json.dumps({"s1": "Shirley Temple [1]", "s2": "Chief of Protocol [2]"}))
    server.script("aggregator", "Shirley Temple held the post of Chief of Protocol [1][2].")
    result = await llm_workflow(writer_mode="aggregate").run(query=CORLISS)
    assert result.answer == "Shirley Temple held the post of Chief of Protocol [1][2]."
    aggregate_prompt = server.requests_of("aggregator")[0]["messages"][-1]["content"]
    assert "Chief of Protocol [2]" in aggregate_prompt
    assert not server.requests_of("writer")


async def test_an_uncited_aggregate_falls_back_to_the_single_pass_writer(server, llm_workflow):
    server.script("resolver", json.dumps({"s2": "government position held by Shirley Temple"}))
    server.script("subanswer", json.dumps({"s1": "Shirley Temple [1]", "s2": "Chief of Protocol [2]"}))
    server.script("aggregator", "Shirley Temple was Chief of Protocol.")
    result = await llm_workflow(writer_mode="aggregate").run(query=CORLISS)
    assert result.answer.startswith("Shirley Temple served as Chief of Protocol")
    assert [d.agent for d in result.degradations] == ["aggregator"]
    assert "without a valid citation" in result.degradations[0].reason


async def test_an_unsupported_sentence_sends_its_subquery_back_and_the_writer_revises_once(server, llm_workflow):
    server.script("resolver", json.dumps({"s2": "government position held by Shirley Temple"}))
    server.script("writer", "Shirley Temple was a senator [2].",
                  "Shirley Temple served as Chief of Protocol of the United States [2].")
    server.script("verifier", json.dumps({"sentences": [{"index": 1, "supported": False, "source": None}]}),
                  SUPPORTED)
    result = await llm_workflow().run(query=CORLISS)
    assert result.backtracked_subqueries == ["s2"]
    assert [r.attempts for r in result.subqueries] == [1, 1, 2]  # only the subquery behind the sentence
    assert len(server.requests_of("writer")) == 2 and len(server.requests_of("verifier")) == 2
    assert result.answer.startswith("Shirley Temple served as Chief of Protocol")
    assert result.verification.support_rate == 1.0


async def test_backtracking_happens_at_most_once_and_can_be_turned_off(server, llm_workflow):
    server.script("resolver", json.dumps({"s2": "government position held by Shirley Temple"}))
    server.script("verifier", json.dumps({"sentences": [{"index": 1, "supported": False, "source": None}]}))
    result = await llm_workflow().run(query=CORLISS)
    assert result.backtracked_subqueries == ["s2"] and len(server.requests_of("writer")) == 2
    assert result.verification.support_rate == 0.0  # reported honestly after the one retry

    before = len(server.requests_of("writer"))
    off = await llm_workflow(verify_backtrack=False).run(query=CORLISS)
    assert off.backtracked_subqueries == [] and len(server.requests_of("writer")) == before + 1
