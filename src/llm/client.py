"""LLMClient: the one way dagrag's agents call an LLM — a deadline per attempt, bounded retries, JSON mode, accounting.

Every attempt is bounded by its own timeout and recorded in the run's ledger (ok or not, and why).
Transient failures (timeouts, dropped connections, 429, 5xx, empty or malformed bodies) are retried
with a short exponential backoff that honours the server's Retry-After; a client error such as 400 or
401 is not. When every attempt has failed, `chat` raises `LLMCallError` and the calling agent hands the
job to its offline twin.

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

from ..core.replies import extract_json_object
from ..core.result import LLMCallRecord, RunLedger

MAX_RETRY_WAIT_S = 10.0  # longest pause between attempts; a longer Retry-After means: give up now


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
            try:
                response = await asyncio.wait_for(self.llm.achat(messages, **kwargs), timeout=self.timeout_s)
                text = (response.message.content or "").strip()
                if not text:
                    raise LLMReplyError("the LLM returned an empty reply")
            except Exception as error:
                ledger.llm_calls.append(LLMCallRecord(
                    agent=agent, ok=False, seconds=time.perf_counter() - started, attempt=attempts,
                    error=describe_error(error, timeout_s=self.timeout_s)[:500]))
                raise
            prompt_tokens, completion_tokens = _usage(response.raw)
            ledger.llm_calls.append(LLMCallRecord(
                agent=agent, ok=True, seconds=time.perf_counter() - started, attempt=attempts,
                prompt_tokens=prompt_tokens, completion_tokens=completion_tokens))
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
    detail = f" ({type(cause).__name__}: {str(cause)[:200]})" if cause is not None and str(cause) else ""
    return f"{name}: {str(error)[:300]}{detail}"
