"""One way to call an LLM: with a deadline, JSON mode where the client has one, and accounting."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms import LLM

from ..work_flows.result import LLMCallRecord, RunLedger


class LLMReplyError(RuntimeError):
    """The LLM answered, but with nothing usable."""


def _json_mode_kwargs(llm: LLM) -> dict[str, Any]:
    from llama_index.llms.openai import OpenAI

    # OpenAI and every OpenAI-compatible server (vLLM, Ollama, llama.cpp, LiteLLM) accept this.
    return {"response_format": {"type": "json_object"}} if isinstance(llm, OpenAI) else {}


def _usage(raw: Any) -> tuple[int | None, int | None]:
    usage = getattr(raw, "usage", None) or (raw.get("usage") if isinstance(raw, dict) else None)
    if usage is None:
        return None, None
    get = usage.get if isinstance(usage, dict) else lambda key: getattr(usage, key, None)
    return get("prompt_tokens"), get("completion_tokens")


async def chat(
    llm: LLM,
    *,
    system: str,
    user: str,
    agent: str,
    ledger: RunLedger,
    timeout_s: float,
    json_mode: bool = False,
) -> str:
    """Send one system+user exchange; returns the reply text. Raises on failure, after recording it."""
    messages = [ChatMessage(role=MessageRole.SYSTEM, content=system),
                ChatMessage(role=MessageRole.USER, content=user)]
    kwargs = _json_mode_kwargs(llm) if json_mode else {}
    started = time.perf_counter()
    try:
        response = await asyncio.wait_for(llm.achat(messages, **kwargs), timeout=timeout_s)
        text = (response.message.content or "").strip()
        if not text:
            raise LLMReplyError("the LLM returned an empty reply")
    except Exception as error:
        reason = "timed out" if isinstance(error, TimeoutError) else f"{type(error).__name__}: {error}"
        ledger.llm_calls.append(LLMCallRecord(agent=agent, ok=False, seconds=time.perf_counter() - started,
                                              error=reason[:500]))
        raise
    prompt_tokens, completion_tokens = _usage(response.raw)
    ledger.llm_calls.append(LLMCallRecord(
        agent=agent, ok=True, seconds=time.perf_counter() - started,
        prompt_tokens=prompt_tokens, completion_tokens=completion_tokens))
    return text


def describe_error(error: BaseException) -> str:
    if isinstance(error, TimeoutError):
        return "LLM call timed out"
    return f"{type(error).__name__}: {str(error)[:300]}"
