"""LLM calls stream their progress while a listener hears them (a workflow run attaches one), through a real
OpenAI-compatible server on 127.0.0.1 and the real openai client; without a listener a call does not stream."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, LLMMetadata, MessageRole
from llama_index.core.llms import CustomLLM, MockLLM

from dagrag.core.result import LLMCallProgress, RunLedger
from dagrag.llm.client import PROGRESS_EVERY_S, LLMCallError, LLMClient, RetryPolicy
from dagrag.testing.openai_server import AGENT_MARKERS, dagrag_llm, server_error, stalled
from dagrag.work_flows.events import VerificationDone
from dagrag.work_flows.progress import AnswerWritten, LLMProgress, PlanChosen

from . import test_llm_faults
from .scripted_llm import ScriptedLLM
from .test_llm_path import QUESTION, WRITER_REPLY

HANG_GUARD_S = 120
WRITER_SYSTEM = AGENT_MARKERS["writer"]
server = test_llm_faults.server  # the fixture: a scripted server with a good plan and replies for every agent


async def ask(client: LLMClient, ledger: RunLedger, system: str = WRITER_SYSTEM, user: str = QUESTION) -> str:
    return await asyncio.wait_for(client.chat(system=system, user=user, agent="writer", ledger=ledger),
                                  timeout=HANG_GUARD_S)


def ticks_of(progress: list[LLMCallProgress]) -> list[tuple[int, bool, bool]]:
    return [(p.attempt, p.done, p.ok) for p in progress]


async def test_a_workflow_run_streams_each_llm_calls_progress_and_keeps_its_token_counts(server, make_workflow):
    handler = make_workflow(llm=dagrag_llm(server)).run(query=QUESTION)
    events = [event async for event in handler.stream_events()]
    result = await handler

    calls = result.llm_calls.calls
    assert [c.agent for c in calls] == ["planner", "writer", "verifier"] and all(c.ok for c in calls)
    # Every call streamed, asking for the usage in the stream.
    assert [(r["stream"], r["stream_options"]) for r in server.requests] == [(True, {"include_usage": True})] * 3
    # Each call's progress: its start (nothing received yet) first, done last and only last.
    progress = [e for e in events if isinstance(e, LLMProgress)]
    for call in calls:
        own = [e for e in progress if e.agent == call.agent]
        assert own[0].done is False and own[0].tokens == 0
        assert [e.done for e in own] == [False] * (len(own) - 1) + [True] and own[-1].ok
        assert own[-1].tokens == call.completion_tokens  # once done: the server's count
    # Each call's progress comes before what the call produced.
    summary = [e.agent if isinstance(e, LLMProgress) else type(e).__name__ for e in events
               if isinstance(e, (LLMProgress, PlanChosen, AnswerWritten, VerificationDone))]
    assert [name for i, name in enumerate(summary) if i == 0 or summary[i - 1] != name] == [
        "planner", "PlanChosen", "writer", "AnswerWritten", "verifier", "VerificationDone"]

    # The token counts are those of the same requests sent without streaming.
    plain = LLMClient(dagrag_llm(server))
    for call, request in zip(calls, list(server.requests)):
        system, user = (m["content"] for m in request["messages"])
        ledger = RunLedger()
        await plain.chat(system=system, user=user, agent=call.agent, ledger=ledger)
        [unstreamed] = ledger.llm_calls
        assert (call.prompt_tokens, call.completion_tokens) == (unstreamed.prompt_tokens, unstreamed.completion_tokens)
        assert call.prompt_tokens and call.completion_tokens
    assert result.llm_calls.prompt_tokens == sum(c.prompt_tokens for c in calls)
    assert [r.get("stream") for r in server.requests[3:]] == [False] * 3


async def test_a_streamed_call_that_times_out_or_fails_is_retried_and_recorded_as_one_that_does_not(server):
    client = LLMClient(dagrag_llm(server), timeout_s=2, retry=RetryPolicy(max_retries=2, backoff_s=0.01))
    records = {}
    heard: list[LLMCallProgress] = []
    for streams in (True, False):
        # The stall sends its first chunk, then nothing: the timeout bounds the whole stream, not only its start.
        server.script("writer", stalled(30, WRITER_REPLY), server_error(503), WRITER_REPLY)
        ledger = RunLedger()
        if streams:
            with ledger.listening(heard.append):
                assert await ask(client, ledger) == WRITER_REPLY
        else:
            assert await ask(client, ledger) == WRITER_REPLY
        records[streams] = [(c.attempt, c.ok, c.error, c.prompt_tokens, c.completion_tokens) for c in ledger.llm_calls]
        assert [bool(r["stream"]) for r in server.requests_of("writer")] == [streams] * 3
        server.reset()

    assert records[True] == records[False]
    assert [record[:3] for record in records[True]] == [
        (1, False, "timed out after 2 s"), (2, False, "HTTP 503 (InternalServerError): scripted 503"), (3, True, None)]
    done = [p for p in heard if p.done]
    assert ticks_of(done) == [(1, True, False), (2, True, False), (3, True, True)]
    assert done[0].tokens == 1 and done[0].seconds >= 2  # the stalled attempt had its first chunk
    assert done[2].tokens == records[True][2][4]
    assert [p.attempt for p in heard if not p.done and p.tokens == 0] == [1, 2, 3]  # each attempt's start


async def test_a_call_without_a_listener_does_not_stream(server):
    client = LLMClient(dagrag_llm(server))
    ledger = RunLedger()
    assert await ask(client, ledger) == WRITER_REPLY
    [request] = server.requests_of("writer")
    assert request["stream"] is False and "stream_options" not in request
    with ledger.listening(lambda progress: None):
        assert await ask(client, ledger) == WRITER_REPLY
    assert server.requests_of("writer")[1]["stream"] is True
    assert not ledger.has_listener  # the block's listener is gone with the block
    first, second = ledger.llm_calls
    assert (first.prompt_tokens, first.completion_tokens) == (second.prompt_tokens, second.completion_tokens)


async def test_a_server_that_refuses_a_streamed_request_is_asked_once_more_without_streaming(server):
    # Some OpenAI-compatible servers answer 400 to `stream` or `stream_options`: the call still succeeds, once.
    client = LLMClient(dagrag_llm(server), retry=RetryPolicy(max_retries=0))
    server.script("writer", server_error(400, "Unrecognized request argument supplied: stream_options"), WRITER_REPLY)
    ledger = RunLedger()
    with ledger.listening(lambda progress: None):
        assert await ask(client, ledger) == WRITER_REPLY
    assert [r["stream"] for r in server.requests_of("writer")] == [True, False]
    [record] = ledger.llm_calls
    assert record.ok and record.completion_tokens
    # Any other client error stands: one request, no retry, as without streaming.
    server.reset()
    server.script("writer", server_error(400, "This model's maximum context length is 4096 tokens"))
    with ledger.listening(lambda progress: None), pytest.raises(LLMCallError, match="maximum context length"):
        await ask(client, ledger)
    assert len(server.requests_of("writer")) == 1


class TrickleLLM(CustomLLM):
    """Streams `chunks` words, one every `pause_s`, and reports no usage."""

    chunks: int = 30
    pause_s: float = 0.05

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="trickle", is_chat_model=True)

    async def astream_chat(self, messages: Any, **kwargs: Any) -> Any:
        async def gen() -> Any:
            text = ""
            for _ in range(self.chunks):
                await asyncio.sleep(self.pause_s)
                text += "word "
                yield ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta="word ")
        return gen()

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise AssertionError("a call with a listener streams")

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise AssertionError("astream_chat is its own")


async def test_progress_is_told_at_most_every_half_second_counting_chunks_without_usage():
    heard: list[LLMCallProgress] = []
    ledger = RunLedger()
    with ledger.listening(heard.append):
        text = await ask(LLMClient(TrickleLLM()), ledger)
    assert text == ("word " * 30).strip()
    start, *ticks, done = heard
    assert (start.tokens, start.done) == (0, False) and done.done and done.tokens == 30
    assert 1 <= len(ticks) < 30 and not any(t.done for t in ticks)  # not one a chunk
    told_at = [start.seconds, *(t.seconds for t in ticks)]
    assert all(later - earlier >= PROGRESS_EVERY_S for earlier, later in itertools.pairwise(told_at))
    assert [t.tokens for t in ticks] == sorted(t.tokens for t in ticks) and 0 < ticks[0].tokens < 30
    [record] = ledger.llm_calls
    assert (record.prompt_tokens, record.completion_tokens) == (None, 30)  # no usage: the chunks count


async def test_any_llama_index_llm_streams_and_one_that_cannot_is_asked_without():
    # MockLLM streams through the base class (astream_chat -> stream_complete); its last chunk's message lags a
    # word behind the deltas, so the deltas make the reply.
    heard: list[LLMCallProgress] = []
    ledger = RunLedger()
    with ledger.listening(heard.append):
        assert await ask(LLMClient(MockLLM(max_tokens=6)), ledger) == " ".join(["text"] * 6)
        # ScriptedLLM only implements achat: its stream raises NotImplementedError, so it is asked without.
        scripted = ScriptedLLM(replies={"writer": WRITER_REPLY})
        assert await ask(LLMClient(scripted), ledger) == WRITER_REPLY
    mock, fallback = ledger.llm_calls
    assert (mock.ok, mock.prompt_tokens, mock.completion_tokens) == (True, None, 6)
    assert fallback.ok and fallback.attempt == 1 and fallback.completion_tokens == len(WRITER_REPLY.split())
    assert ticks_of(heard) == [(1, False, True), (1, True, True)] * 2
    assert len(scripted.requests_of("writer")) == 1


async def test_a_failing_listener_never_fails_the_call_and_is_not_part_of_the_record(server):
    def broken(progress: LLMCallProgress) -> None:
        raise RuntimeError("the listener broke")

    ledger = RunLedger()
    with ledger.listening(broken):
        assert await ask(LLMClient(dagrag_llm(server)), ledger) == WRITER_REPLY
        assert set(ledger.model_dump()) == {"llm_calls", "degradations"}
        copy = RunLedger.model_validate_json(ledger.model_dump_json())
        assert copy.model_dump() == ledger.model_dump() and not copy.has_listener
    assert [c.ok for c in ledger.llm_calls] == [True]
