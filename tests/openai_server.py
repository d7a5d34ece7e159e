"""A real OpenAI-compatible HTTP server on 127.0.0.1 that replies with scripted completions.

The real `openai` client (through llama-index's OpenAILike) talks to it over HTTP, so request
building, response parsing, JSON mode and usage accounting all run for real. A scripted reply can
also be a `Fault`: a reply that comes too late, 429 with Retry-After, a 5xx, an empty or truncated
body, a body that is not JSON, or a connection closed half-way through the body.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

AGENT_MARKERS = {
    "planner": "You plan searches",
    "writer": "You answer questions from numbered sources",
    "verifier": "You check an answer against its sources",
    "resolver": "You resolve references between search queries",
    "hyde": "You write hypothetical passages",
    "subanswer": "You answer search queries from numbered sources",
    "aggregator": "You combine the answers to sub-questions",
}



@dataclass(frozen=True)
class Fault:
    """A reply that goes wrong on the wire."""

    kind: Literal["slow", "status", "empty", "truncated", "not_json", "close_mid_body"]
    status: int = 500
    seconds: float = 0.0  # "slow": how long the server waits before answering
    headers: dict[str, str] = field(default_factory=dict)
    then: str = "{}"  # "slow": what it finally answers


def slow(seconds: float, then: str = "{}") -> Fault:
    return Fault("slow", seconds=seconds, then=then)


def rate_limited(retry_after_s: float) -> Fault:
    return Fault("status", status=429, headers={"Retry-After": f"{retry_after_s:g}"})


def server_error(status: int = 500) -> Fault:
    return Fault("status", status=status)


EMPTY_BODY, TRUNCATED_JSON, NOT_JSON, CLOSED_MID_BODY = (
    Fault("empty"), Fault("truncated"), Fault("not_json"), Fault("close_mid_body"))

Reply = str | Callable[[dict[str, Any]], str] | tuple[int, str] | Fault


def agent_of(request: dict[str, Any]) -> str:
    system = next((m["content"] for m in request.get("messages", []) if m.get("role") == "system"), "")
    return next((agent for agent, marker in AGENT_MARKERS.items() if system.startswith(marker)), "unknown")


class ScriptedOpenAIServer:
    """`script("planner", reply, ...)` queues replies per agent; the last one repeats when the queue runs dry."""

    def __init__(self) -> None:
        self.replies: dict[str, deque[Reply]] = defaultdict(deque)
        self.requests: list[dict[str, Any]] = []
        self._stopping = threading.Event()  # wakes "slow" replies at shutdown
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def script(self, agent: str, *replies: Reply) -> None:
        self.replies[agent].clear()
        self.replies[agent].extend(replies)

    def requests_of(self, agent: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if agent_of(r) == agent]

    def __enter__(self) -> ScriptedOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def _next_reply(self, request: dict[str, Any]) -> Reply:
        queue = self.replies[agent_of(request)]
        if not queue:
            return (500, "no scripted reply")
        return queue.popleft() if len(queue) > 1 else queue[0]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                server.requests.append(body)
                reply = server._next_reply(body)
                try:
                    if isinstance(reply, Fault):
                        self._fault(reply, body)
                    elif isinstance(reply, tuple):
                        status, text = reply
                        self._send(status, {"error": {"message": text, "type": "server_error"}})
                    else:
                        self._send(200, self._completion(body, reply(body) if callable(reply) else reply))
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first (its timeout): that is the point of a slow reply

            def _completion(self, body: dict[str, Any], content: str) -> dict[str, Any]:
                prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
                return {
                    "id": f"chatcmpl-{len(server.requests)}", "object": "chat.completion",
                    "created": int(time.time()), "model": body.get("model", "scripted"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(content.split()),
                              "total_tokens": prompt_tokens + len(content.split())},
                }

            def _fault(self, fault: Fault, body: dict[str, Any]) -> None:
                if fault.kind == "slow":
                    if not server._stopping.wait(fault.seconds):
                        self._send(200, self._completion(body, fault.then))
                elif fault.kind == "status":
                    self._send(fault.status, {"error": {"message": f"scripted {fault.status}", "type": "error"}},
                               fault.headers)
                elif fault.kind == "empty":
                    self._send_raw(200, b"")
                elif fault.kind == "not_json":
                    self._send_raw(200, b"<html>Bad gateway, try later</html>", content_type="text/plain")
                else:
                    data = json.dumps(self._completion(body, '{"query": "cut short"}')).encode()
                    if fault.kind == "truncated":  # a complete HTTP reply whose JSON stops half-way
                        self._send_raw(200, data[: len(data) // 2])
                    else:  # the connection drops half-way through the announced body
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data[: len(data) // 2])
                        self.wfile.flush()
                        self.close_connection = True

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                self._send_raw(status, json.dumps(payload).encode(), headers=headers)

            def _send_raw(self, status: int, data: bytes, *, content_type: str = "application/json",
                          headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        return Handler


def scripted_llm(server: ScriptedOpenAIServer) -> Any:
    """The real OpenAI-compatible client of the stack, pointed at the server: no retries, a short timeout."""
    from dagrag import Settings
    from dagrag.stack import build_llm

    return build_llm(Settings(llm="openai-like:scripted-model", llm_base_url=server.base_url, llm_max_retries=0,
                              llm_timeout_s=5))
