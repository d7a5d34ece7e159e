"""An in-process LlamaIndex LLM with scripted replies: for the many-case tests where HTTP would only cost time.

Each agent's reply is a string, a list of strings (served in turn, the last one repeating), or a function of
the request's user message. Requests are kept, so tests can check what each agent was sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.llms import CustomLLM
from pydantic import Field, PrivateAttr

from dagrag.testing.openai_server import AGENT_MARKERS

ScriptedReply = str | list[str] | Callable[[str], str]


class ScriptedLLM(CustomLLM):
    replies: dict[str, Any] = Field(default_factory=dict)
    _requests: list[tuple[str, str, str]] = PrivateAttr(default_factory=list)
    _served: dict[str, int] = PrivateAttr(default_factory=dict)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted", is_chat_model=True)

    def requests_of(self, agent: str) -> list[tuple[str, str]]:
        """(system, user) of every request the agent sent."""
        return [(system, user) for a, system, user in self._requests if a == agent]

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        system = next((m.content or "" for m in messages if m.role == MessageRole.SYSTEM), "")
        user = next((m.content or "" for m in messages if m.role == MessageRole.USER), "")
        agent = next((a for a, marker in AGENT_MARKERS.items() if system.startswith(marker)), "unknown")
        self._requests.append((agent, system, user))
        await asyncio.sleep(0)  # a real await point, as a network call has
        text = self._reply(agent, user)
        usage = {"prompt_tokens": len((system + user).split()), "completion_tokens": len(text.split())}
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text), raw={"usage": usage})

    def _reply(self, agent: str, user: str) -> str:
        reply = self.replies.get(agent, "")
        if callable(reply):
            return reply(user)
        if isinstance(reply, list):
            served = self._served.get(agent, 0)
            self._served[agent] = served + 1
            return reply[min(served, len(reply) - 1)] if reply else ""
        return reply

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise NotImplementedError("dagrag's agents chat; they never call complete()")

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError("dagrag's agents chat; they never stream")
