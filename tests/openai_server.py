"""A real OpenAI-compatible HTTP server on 127.0.0.1 that replies with scripted completions.

The real `openai` client (through llama-index's OpenAILike) talks to it over HTTP, so request
building, response parsing, JSON mode and usage accounting all run for real.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

AGENT_MARKERS = {
    "planner": "You plan searches",
    "writer": "You answer questions from numbered sources",
    "verifier": "You check an answer against its sources",
}

Reply = str | Callable[[dict[str, Any]], str] | tuple[int, str]


def agent_of(request: dict[str, Any]) -> str:
    system = next((m["content"] for m in request.get("messages", []) if m.get("role") == "system"), "")
    return next((agent for agent, marker in AGENT_MARKERS.items() if system.startswith(marker)), "unknown")


class ScriptedOpenAIServer:
    """`script("planner", reply, ...)` queues replies per agent; the last one repeats when the queue runs dry."""

    def __init__(self) -> None:
        self.replies: dict[str, deque[Reply]] = defaultdict(deque)
        self.requests: list[dict[str, Any]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

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
                if isinstance(reply, tuple):
                    status, text = reply
                    self._send(status, {"error": {"message": text, "type": "server_error"}})
                    return
                content = reply(body) if callable(reply) else reply
                prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
                self._send(200, {
                    "id": f"chatcmpl-{len(server.requests)}", "object": "chat.completion",
                    "created": int(time.time()), "model": body.get("model", "scripted"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(content.split()),
                              "total_tokens": prompt_tokens + len(content.split())},
                })

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
