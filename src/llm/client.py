"""LLMClient: the one way dagrag's agents call an LLM — a deadline per attempt, bounded retries, JSON mode, accounting.

Every attempt is bounded by its own timeout and recorded in the run's ledger (ok or not, and why).
Transient failures (timeouts, dropped connections, 429, 5xx, empty or malformed bodies) are retried
with a short exponential backoff that honours the server's Retry-After; a client error such as 400 or
401 is not. When every attempt has failed, `chat` raises `LLMCallError` and the calling agent hands the
job to its offline twin.

While the run's ledger has a progress listener (a workflow run attaches one), each attempt streams the reply
and tells the listener how far it has got: at its start, at most every PROGRESS_EVERY_S as chunks arrive, and
when it is done. The timeout bounds the whole stream; an OpenAI(-like) server is asked for the usage in the
stream (`stream_options.include_usage`), else the chunks count as completion tokens. A stream that stops
before its finish reason was cut short and counts as a failed attempt. Without a listener a call does not
stream; an LLM class that cannot stream (NotImplementedError) or a server whose 400/422 refusal names streaming
(before the first chunk) is asked once more without streaming.

`stack.build_llm_client` builds one client from Settings and hands it to every LLM agent. Retries happen
here, once: the LLM that `stack.build_llm` makes has its own client's retries turned off, so no attempt
goes unrecorded. A caller's LLM object is wrapped, never changed.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import openai
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms import LLM
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from ..core.replies import extract_json_object, valid_text
from ..core.result import LLMCallProgress, LLMCallRecord, RunLedger

MAX_RETRY_WAIT_S = 10.0  # longest pause between attempts; a longer Retry-After means: give up now
PROGRESS_EVERY_S = 0.5  # a streamed call tells the ledger's listener how far it has got at most this often


class LLMReplyError(RuntimeError):
    """The LLM answered, but with nothing usable."""


class LLMCallError(RuntimeError):
    """Every attempt at one LLM call failed; `attempts` were made, `last` is the last attempt's error."""

    def __init__(self, agent: str, attempts: int, last: BaseException, *, timeout_s: float | None = None) -> None:
        self.agent = agent
        self.attempts = attempts
        self.last = last
        tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
        super().__init__(f"{tries} failed, the last: {describe_error(last, timeout_s=timeout_s)}")


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 0  # attempts = 1 + max_retries
    backoff_s: float = 0.5  # first pause; doubles each retry (with jitter), at most MAX_RETRY_WAIT_S


ResponseFormat = Literal["json_schema", "json_object", "none"]


@dataclass(frozen=True)
class ReplySchema:
    """The JSON shape an agent expects, named, for servers that enforce it (OpenAI structured outputs,
    vLLM, llama.cpp's grammar). Written strict-mode compatible: every object lists all its properties
    as required and allows no others."""

    name: str
    schema: dict[str, Any]


def object_schema(properties: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def texts_by_id_schema(ids: list[str], description: str) -> ReplySchema:
    """`{"s1": str, "s2": str}`: one text per id, every id present."""
    return ReplySchema("texts_by_id", object_schema({i: {"type": "string", "description": description} for i in ids}))


def _request_kwargs(llm: LLM, response_format: ResponseFormat, schema: ReplySchema | None, json_reply: bool,
                    max_tokens: int | None) -> dict[str, Any]:
    from llama_index.llms.openai import OpenAI

    # Only the OpenAI client (and OpenAILike, its subclass, for vLLM, Ollama, llama.cpp, LiteLLM) is known to
    # take these per call; another LLM class gets its own defaults.
    if not isinstance(llm, OpenAI):
        return {}
    kwargs: dict[str, Any] = {}
    if max_tokens is not None:
        kwargs["max_tokens"] = max_tokens
    if json_reply and response_format == "json_schema" and schema is not None:
        kwargs["response_format"] = {"type": "json_schema", "json_schema": {
            "name": schema.name, "schema": schema.schema, "strict": True}}
    elif json_reply and response_format != "none":
        kwargs["response_format"] = {"type": "json_object"}
    return kwargs


def _stream_kwargs(llm: LLM) -> dict[str, Any]:
    """What a streamed call asks for besides: the usage, from the OpenAI client (llama-index does not ask)."""
    from llama_index.llms.openai import OpenAI

    return {"stream_options": {"include_usage": True}} if isinstance(llm, OpenAI) else {}


@dataclass
class _Streamed:
    """What one streamed attempt has received so far."""

    deltas: str = ""
    content: str = ""  # the last chunk's message: the whole text so far (MockLLM's lags a chunk behind)
    received: int = 0  # chunks
    chunks: int = 0  # chunks that carried text or reasoning (a thinking model's first tokens are reasoning)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    choice_chunks: bool = False  # an OpenAI stream: its last choice chunk carries a finish reason
    finished: bool = False

    @property
    def text(self) -> str:
        return self.deltas if len(self.deltas) >= len(self.content) else self.content

    def add(self, chunk: Any) -> None:
        self.received += 1
        if chunk.delta or (chunk.additional_kwargs or {}).get("thinking_delta"):
            self.chunks += 1
        self.deltas += chunk.delta or ""
        self.content = chunk.message.content or self.content
        prompt_tokens, completion_tokens = _usage(chunk.raw)
        if prompt_tokens is not None or completion_tokens is not None:  # the usage chunk: the last one
            self.prompt_tokens, self.completion_tokens = prompt_tokens, completion_tokens
        choices = getattr(chunk.raw, "choices", None)
        if isinstance(choices, list) and choices:
            self.choice_chunks = True
            self.finished = self.finished or getattr(choices[0], "finish_reason", None) is not None


def _usage(raw: Any) -> tuple[int | None, int | None]:
    usage = getattr(raw, "usage", None) or (raw.get("usage") if isinstance(raw, dict) else None)
    if usage is None:
        return None, None
    get = usage.get if isinstance(usage, dict) else lambda key: getattr(usage, key, None)
    return get("prompt_tokens"), get("completion_tokens")


def _status(error: BaseException) -> int | None:
    status = getattr(error, "status_code", None)
    return status if isinstance(status, int) else None


def is_retryable(error: BaseException) -> bool:
    """Transient: worth another attempt. A client error (4xx but 408/409/429) will fail the same way again."""
    status = _status(error)
    return status is None or status in (408, 409, 429) or status >= 500


def retry_after_s(error: BaseException | None) -> float | None:
    """The server's Retry-After (or retry-after-ms) on an HTTP error, in seconds."""
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                seconds = float(value) * scale
            except ValueError:
                continue  # an HTTP date: treat as no hint
            return seconds if seconds >= 0 else None
    return None


def backoff_s(policy: RetryPolicy, attempt: int, error: BaseException | None, *, jitter: float = 1.0) -> float:
    """Pause after the `attempt`-th failure: exponential with jitter, at least the server's Retry-After."""
    pause = min(policy.backoff_s * 2 ** (attempt - 1), MAX_RETRY_WAIT_S) * jitter
    hinted = retry_after_s(error)
    return min(max(pause, hinted), MAX_RETRY_WAIT_S) if hinted is not None else pause


def _should_stop(policy: RetryPolicy) -> Callable[[RetryCallState], bool]:
    def stop(state: RetryCallState) -> bool:
        if state.attempt_number > policy.max_retries:
            return True
        hinted = retry_after_s(state.outcome.exception() if state.outcome else None)
        return hinted is not None and hinted > MAX_RETRY_WAIT_S  # the server asks for longer than we wait
    return stop


MAX_TEXT_CHARS = 2000  # one text of a by-id reply


@dataclass(frozen=True)
class LLMClient:
    """An LLM with the policy every call to it follows. Immutable: one client serves every run at once."""

    llm: LLM
    timeout_s: float = 60.0
    retry: RetryPolicy = RetryPolicy()
    # How a JSON reply is asked for: the agent's schema, enforced by the server; any JSON object; or only
    # by the prompt. A small model needs the first (with worked examples in the prompt) to stay on track.
    response_format: ResponseFormat = "json_schema"

    async def chat(self, *, system: str, user: str, agent: str, ledger: RunLedger, json_reply: bool = False,
                   schema: ReplySchema | None = None, max_tokens: int | None = None) -> str:
        """Send one system+user exchange; returns the reply text.

        `json_reply` asks for JSON (shaped by `schema` where the server enforces one); `max_tokens` caps the
        reply, so a model that does not stop cannot eat the query's deadline. Each attempt is bounded by
        `timeout_s` and recorded in `ledger`; transient failures are retried by `retry`. Raises LLMCallError
        when no attempt succeeded.
        """
        messages = [ChatMessage(role=MessageRole.SYSTEM, content=system),
                    ChatMessage(role=MessageRole.USER, content=user)]
        kwargs = _request_kwargs(self.llm, self.response_format, schema, json_reply, max_tokens)
        attempts = 0

        async def attempt() -> str:
            nonlocal attempts
            attempts += 1
            started = time.perf_counter()
            streamed = _Streamed() if ledger.has_listener else None

            def progress(*, done: bool = False, ok: bool = True) -> LLMCallProgress:
                assert streamed is not None
                tokens = streamed.completion_tokens if done and streamed.completion_tokens is not None \
                    else streamed.chunks
                return LLMCallProgress(agent=agent, tokens=tokens, seconds=time.perf_counter() - started,
                                       done=done, ok=ok, attempt=attempts)

            try:
                if streamed is None:
                    response = await asyncio.wait_for(self.llm.achat(messages, **kwargs), timeout=self.timeout_s)
                    text = (response.message.content or "").strip()
                    prompt_tokens, completion_tokens = _usage(response.raw)
                else:
                    ledger.report(progress())
                    await asyncio.wait_for(self._stream(messages, kwargs, streamed, ledger, progress),
                                           timeout=self.timeout_s)
                    text = streamed.text.strip()
                    prompt_tokens, completion_tokens = streamed.prompt_tokens, streamed.completion_tokens
                    if completion_tokens is None and streamed.chunks:
                        completion_tokens = streamed.chunks  # no usage came: a chunk is about a token
                text = valid_text(text)  # a server may escape half a surrogate pair in its JSON
                if not text:
                    raise LLMReplyError("the LLM returned an empty reply")
            except Exception as error:
                ledger.llm_calls.append(LLMCallRecord(
                    agent=agent, ok=False, seconds=time.perf_counter() - started, attempt=attempts,
                    error=describe_error(error, timeout_s=self.timeout_s)[:500]))
                if streamed is not None:
                    ledger.report(progress(done=True, ok=False))
                raise
            ledger.llm_calls.append(LLMCallRecord(
                agent=agent, ok=True, seconds=time.perf_counter() - started, attempt=attempts,
                prompt_tokens=prompt_tokens, completion_tokens=completion_tokens))
            if streamed is not None:
                ledger.report(progress(done=True))
            return text

        policy = self.retry
        retrying = AsyncRetrying(
            stop=_should_stop(policy),
            wait=lambda state: backoff_s(policy, state.attempt_number,
                                         state.outcome.exception() if state.outcome else None,
                                         jitter=0.5 + random.random() / 2),
            retry=retry_if_exception(lambda error: isinstance(error, Exception) and is_retryable(error)),
            reraise=True,
        )
        try:
            return await retrying(attempt)
        except Exception as error:
            raise LLMCallError(agent, attempts, error, timeout_s=self.timeout_s) from error

    async def _stream(self, messages: list[ChatMessage], kwargs: dict[str, Any], streamed: _Streamed,
                      ledger: RunLedger, progress: Callable[[], LLMCallProgress]) -> None:
        """One attempt as a stream, into `streamed`; the listener hears of it at most every PROGRESS_EVERY_S."""
        try:
            stream = await self.llm.astream_chat(messages, **kwargs, **_stream_kwargs(self.llm))
            told = time.perf_counter()
            try:
                async for chunk in stream:
                    streamed.add(chunk)
                    if time.perf_counter() - told >= PROGRESS_EVERY_S:
                        ledger.report(progress())
                        told = time.perf_counter()
            finally:
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()  # a timeout or a bad chunk: let go of the connection now
        except Exception as error:
            # An LLM class that cannot stream, or a server whose 400/422 names streaming (an older server and
            # `stream_options`), before any chunk came: the same request once more, not streamed. Any other
            # client error stands: it is not retried.
            refused = getattr(error, "status_code", None) in (400, 422) and "stream" in str(error).lower()
            if streamed.received or not (isinstance(error, NotImplementedError) or refused):
                raise
            response = await self.llm.achat(messages, **kwargs)
            streamed.content = response.message.content or ""
            streamed.prompt_tokens, streamed.completion_tokens = _usage(response.raw)
            return
        if not streamed.received:
            raise LLMReplyError("the reply stream ended before any chunk (empty, or not an event stream)")
        if streamed.choice_chunks and not streamed.finished:
            raise LLMReplyError("the reply stream stopped before its finish reason: cut short")

    async def ask_json(self, *, system: str, user: str, agent: str, ledger: RunLedger,
                       schema: ReplySchema | None = None, max_tokens: int | None = None) -> dict[str, Any]:
        """The JSON object of the reply; raises LLMCallError, or ReplyParseError when the reply holds none."""
        return extract_json_object(await self.chat(system=system, user=user, agent=agent, ledger=ledger,
                                                   json_reply=True, schema=schema, max_tokens=max_tokens))

    async def ask_texts_by_id(self, *, system: str, user: str, agent: str, ledger: RunLedger,
                              ids: list[str], description: str, max_tokens: int | None = None) -> dict[str, str]:
        """`{id: text}` for the ids the reply answers with a non-empty string; raises when it answers none.

        `description` says what each text is (it goes into the schema the server enforces)."""
        data = await self.ask_json(system=system, user=user, agent=agent, ledger=ledger,
                                   schema=texts_by_id_schema(ids, description), max_tokens=max_tokens)
        texts = {i: " ".join(str(data[i]).split())[:MAX_TEXT_CHARS] for i in ids
                 if isinstance(data.get(i), str) and data[i].strip()}
        if not texts:
            raise LLMReplyError(f"the reply names none of {', '.join(ids)}")
        return texts


def describe_error(error: BaseException, *, timeout_s: float | None = None) -> str:
    """What went wrong with an LLM call, in one line a user can act on."""
    if isinstance(error, LLMCallError):
        return str(error)
    if isinstance(error, (TimeoutError, openai.APITimeoutError)):
        return f"timed out after {timeout_s:g} s" if timeout_s else "timed out"
    name = type(error).__name__
    status = _status(error)
    if status is not None:
        body = getattr(error, "body", None)
        message = body.get("message") if isinstance(body, dict) else None
        hinted = retry_after_s(error)
        after = f", Retry-After {hinted:g} s" if hinted is not None else ""
        return f"HTTP {status} ({name}{after}): {str(message or error)[:200]}"
    if isinstance(error, (json.JSONDecodeError, AttributeError, TypeError, KeyError)):
        return f"malformed reply body ({name}: {str(error)[:200]})"
    cause = error.__cause__ or error.__context__
    detail = (f" ({type(cause).__name__}: {str(cause)[:200]})"
              if cause is not None and str(cause) and str(cause) != str(error) else "")
    return f"{name}: {str(error)[:300]}{detail}"
