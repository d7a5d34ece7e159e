"""LLM faults on the wire, through a real OpenAI-compatible server on 127.0.0.1 and the real openai client.

Every fault is retried a bounded number of times (LLM_MAX_RETRIES) with a short backoff, every attempt
is bounded by LLM_TIMEOUT_S and recorded, and then the agent's offline twin takes over; the result says
which agent degraded and why. A hang guard (`asyncio.wait_for`) turns any hang into a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import httpx
import openai
import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from dagrag import Settings
from dagrag.core.result import RunLedger
from dagrag.llm.client import (
    MAX_RETRY_WAIT_S,
    LLMCallError,
    LLMClient,
    RetryPolicy,
    backoff_s,
    describe_error,
    is_retryable,
)
from dagrag.stack import build_agents, build_llm, build_llm_client
from dagrag.testing.openai_server import (
    AGENT_MARKERS,
    CLOSED_MID_BODY,
    EMPTY_BODY,
    NOT_JSON,
    TRUNCATED_JSON,
    ScriptedOpenAIServer,
    dagrag_llm,
    rate_limited,
    server_error,
    slow,
)

from .test_llm_path import GOOD_PLAN, QUESTION, VERIFIER_REPLY, WRITER_REPLY

AGENTS = ("planner", "writer", "verifier")
PLANNER_SYSTEM = AGENT_MARKERS["planner"]
HANG_GUARD_S = 120  # far above any test's expected time: only a hang can reach it


@pytest.fixture
def server():
    with ScriptedOpenAIServer() as running:
        running.script("planner", json.dumps(GOOD_PLAN))
        running.script("writer", WRITER_REPLY)
        running.script("verifier", VERIFIER_REPLY)
        yield running


@pytest.fixture
def run_query(server, make_workflow):
    async def run(*, max_retries: int = 2, timeout_s: float = 5.0, **overrides):
        settings = Settings(llm="openai-like:scripted-model", llm_base_url=server.base_url,
                            llm_max_retries=max_retries, llm_timeout_s=timeout_s, llm_retry_backoff_s=0.01)
        llm = build_llm(settings)
        # Warm the client up (its first call builds the HTTP client), so every timed attempt reaches the server.
        with contextlib.suppress(openai.APIError):
            await llm.achat([ChatMessage(role=MessageRole.USER, content="warm-up")])
        server.requests.clear()
        workflow = make_workflow(llm=llm, llm_timeout_s=timeout_s, llm_max_retries=max_retries,
                                 llm_retry_backoff_s=0.01, **overrides)
        return await asyncio.wait_for(workflow.run(query=QUESTION), timeout=HANG_GUARD_S)
    return run


# Each fault: the reason on record when the call streams (a workflow run's calls do: it listens to their progress),
# and when it does not (a call outside a workflow).
FAULTS = {
    "timeout": (slow(30), "timed out after 1 s", "timed out after 1 s"),
    "429": (rate_limited(0.05), "HTTP 429 (RateLimitError, Retry-After 0.05 s)",
            "HTTP 429 (RateLimitError, Retry-After 0.05 s)"),
    "500": (server_error(500), "HTTP 500 (InternalServerError)", "HTTP 500 (InternalServerError)"),
    "503": (server_error(503), "HTTP 503", "HTTP 503"),
    "empty body": (EMPTY_BODY, "the reply stream ended before any chunk", "malformed reply body (JSONDecodeError"),
    "truncated body": (TRUNCATED_JSON, "the reply stream stopped before its finish reason: cut short",
                       "malformed reply body (JSONDecodeError: Unterminated string"),
    "not json": (NOT_JSON, "the reply stream ended before any chunk", "malformed reply body (AttributeError"),
    "closed mid-body": (CLOSED_MID_BODY, "RemoteProtocolError: peer closed connection without sending complete",
                        "APIConnectionError: Connection error. (RemoteProtocolError"),
}


@pytest.mark.parametrize("fault", list(FAULTS), ids=list(FAULTS))
async def test_each_fault_is_retried_then_every_agent_falls_back_and_says_why(server, run_query, fault):
    reply, reason, _ = FAULTS[fault]
    for agent in AGENTS:
        server.script(agent, reply)
    result = await run_query(max_retries=2, timeout_s=1)  # room for a loaded machine to send each attempt

    # Bounded: 1 + LLM_MAX_RETRIES attempts per agent reached the server, and each one is on record.
    assert {agent: len(server.requests_of(agent)) for agent in AGENTS} == {a: 3 for a in AGENTS}
    assert all(request["stream"] for request in server.requests)  # a workflow's calls stream their progress
    assert [(c.agent, c.attempt, c.ok) for c in result.llm_calls.calls] == [
        (agent, attempt, False) for agent in AGENTS for attempt in (1, 2, 3)]
    assert all(reason in c.error for c in result.llm_calls.calls)
    # Each agent's offline twin took over, and the result says which and why.
    assert [(d.agent, d.fallback) for d in result.degradations] == [
        ("planner", "rule-based planner"), ("writer", "extractive writer"),
        ("verifier", "lexical/cross-encoder verifier")]
    for degradation in result.degradations:
        assert "3 attempts failed, the last: " in degradation.reason and reason in degradation.reason
    assert result.plan.origin.value == "fallback" and len(result.plan.subqueries) == 3
    assert result.answer and result.sources and result.verification.method == "lexical+cross-encoder"
    assert {s.metadata["title"] for s in result.sources} >= {"Scott Derrickson", "Ed Wood"}


@pytest.mark.parametrize("fault", list(FAULTS), ids=list(FAULTS))
async def test_each_fault_of_a_call_that_does_not_stream_is_retried_and_recorded(server, fault):
    reply, _, reason = FAULTS[fault]
    server.script("planner", reply)
    client = LLMClient(dagrag_llm(server), timeout_s=1, retry=RetryPolicy(max_retries=1, backoff_s=0.01))
    ledger = RunLedger()  # no progress listener: the call does not stream
    with pytest.raises(LLMCallError, match="2 attempts failed, the last: "):
        await asyncio.wait_for(client.chat(system=PLANNER_SYSTEM, user=QUESTION, agent="planner", ledger=ledger),
                               timeout=HANG_GUARD_S)
    assert [request["stream"] for request in server.requests_of("planner")] == [False, False]
    assert [(c.attempt, c.ok) for c in ledger.llm_calls] == [(1, False), (2, False)]
    assert all(reason in c.error for c in ledger.llm_calls)


async def test_a_reply_escaping_half_a_surrogate_pair_reads_as_valid_text(server):
    # JSON may escape a lone surrogate ("\\ud800"); an answer holding one could not be written out (UTF-8, JSON).
    server.script("planner", "Ed Wood \ud800 was American \U0001f600.")
    client = LLMClient(dagrag_llm(server), timeout_s=1, retry=RetryPolicy(max_retries=0, backoff_s=0.01))
    text = await asyncio.wait_for(client.chat(system=PLANNER_SYSTEM, user=QUESTION, agent="planner",
                                              ledger=RunLedger()), timeout=HANG_GUARD_S)
    assert text == "Ed Wood \ufffd was American \U0001f600."


async def test_a_call_that_succeeds_on_a_retry_is_used_and_every_attempt_is_recorded(server, run_query):
    server.script("planner", server_error(502), rate_limited(0), json.dumps(GOOD_PLAN))
    server.script("writer", CLOSED_MID_BODY, WRITER_REPLY)
    result = await run_query(max_retries=2)
    assert len(server.requests_of("planner")) == 3 and len(server.requests_of("writer")) == 2
    assert [(c.agent, c.attempt, c.ok) for c in result.llm_calls.calls] == [
        ("planner", 1, False), ("planner", 2, False), ("planner", 3, True),
        ("writer", 1, False), ("writer", 2, True), ("verifier", 1, True)]
    assert result.plan.origin.value == "llm" and result.answer == WRITER_REPLY and result.degradations == []
    assert result.llm_calls.count == 6


async def test_retries_are_governed_by_llm_max_retries(server, run_query):
    server.script("planner", server_error(500))
    result = await run_query(max_retries=0)
    assert len(server.requests_of("planner")) == 1
    assert [d.reason for d in result.degradations] == [
        "LLM call failed: 1 attempt failed, the last: HTTP 500 (InternalServerError): scripted 500"]


@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_a_client_error_is_not_retried(server, run_query, status):
    server.script("planner", server_error(status))
    result = await run_query(max_retries=3)
    assert len(server.requests_of("planner")) == 1
    assert result.plan.origin.value == "fallback" and f"HTTP {status}" in result.degradations[0].reason


async def test_a_retry_after_longer_than_we_wait_hands_over_at_once(server, run_query):
    server.script("planner", rate_limited(MAX_RETRY_WAIT_S * 6))
    result = await run_query(max_retries=3)
    assert len(server.requests_of("planner")) == 1
    assert "Retry-After 60 s" in result.degradations[0].reason and result.plan.origin.value == "fallback"


async def test_an_llm_that_never_answers_is_cut_off_by_the_per_attempt_timeout():
    class Silent:
        calls = 0

        async def achat(self, messages, **kwargs):
            Silent.calls += 1
            await asyncio.Event().wait()  # never set

    ledger = RunLedger()
    with pytest.raises(LLMCallError, match=r"2 attempts failed, the last: timed out after 0\.2 s"):
        client = LLMClient(Silent(), timeout_s=0.2, retry=RetryPolicy(max_retries=1, backoff_s=0))  # type: ignore[arg-type]
        await asyncio.wait_for(client.chat(system="s", user="u", agent="planner", ledger=ledger), timeout=HANG_GUARD_S)
    assert Silent.calls == 2 and [(c.attempt, c.ok) for c in ledger.llm_calls] == [(1, False), (2, False)]


def test_build_llm_turns_the_clients_retries_off_and_the_client_carries_the_settings_policy():
    settings = Settings(llm="openai-like:m", llm_base_url="http://127.0.0.1:9/v1", llm_max_retries=4,
                        llm_retry_backoff_s=0.25, llm_timeout_s=7, llm_response_format="json_object")
    client = build_llm_client(settings)
    assert client is not None and client.llm.max_retries == 0  # no hidden retries in the openai client or llama-index
    assert client.retry == RetryPolicy(max_retries=4, backoff_s=0.25)
    assert client.timeout_s == 7 and client.response_format == "json_object"
    assert build_llm_client(Settings()) is None


def _status_error(status: int, headers: dict[str, str] | None = None) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://x/v1/chat/completions")
    response = httpx.Response(status, headers=headers or {}, request=request)
    return openai.APIStatusError("scripted", response=response, body=None)


def test_backoff_is_exponential_capped_and_honours_retry_after():
    policy = RetryPolicy(max_retries=5, backoff_s=0.5)
    assert [backoff_s(policy, n, None) for n in (1, 2, 3, 4, 5, 6)] == [0.5, 1.0, 2.0, 4.0, 8.0, MAX_RETRY_WAIT_S]
    assert backoff_s(policy, 1, _status_error(429, {"Retry-After": "3"})) == 3.0
    assert backoff_s(policy, 1, _status_error(429, {"retry-after-ms": "1500"})) == 1.5
    assert backoff_s(policy, 4, _status_error(429, {"Retry-After": "1"})) == 4.0  # never less than the backoff
    assert backoff_s(policy, 1, _status_error(503, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.5


@pytest.mark.parametrize(("error", "retryable"), [
    (_status_error(429), True), (_status_error(500), True), (_status_error(408), True), (_status_error(400), False),
    (_status_error(401), False), (TimeoutError(), True), (json.JSONDecodeError("x", "", 0), True)])
def test_what_counts_as_transient(error, retryable):
    assert is_retryable(error) is retryable
    assert describe_error(error)


def test_a_callers_llm_gets_the_settings_policy_through_one_client_shared_by_every_llm_agent(
        sample_store_path, embed_model, reranker):
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(model="m", api_base="http://127.0.0.1:9/v1", api_key="x", max_retries=5)
    before = llm.model_dump()
    settings = Settings(qdrant_path=sample_store_path, collection="sample", llm_max_retries=3,
                        llm_retry_backoff_s=0.25, subquery_hyde=True, resolve_with_llm=True,
                        writer_mode="aggregate")
    agents = build_agents(settings, llm=llm, embed_model=embed_model, reranker=reranker)
    client = agents.planner.client
    assert client.llm is llm and client.retry == RetryPolicy(max_retries=3, backoff_s=0.25)
    shared = [agents.writer.client, agents.writer.fallback.client, agents.verifier.client, agents.resolver.client,
              agents.hyde.client]
    assert all(other is client for other in shared)
    assert llm.model_dump() == before  # the caller's LLM object is not changed
