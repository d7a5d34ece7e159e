"""A fake OpenAI-compatible chat server on 127.0.0.1, for tests and benchmarks of code that calls an LLM over HTTP.

The real `openai` client (and so llama-index's OpenAI and OpenAILike LLMs) talks to it over HTTP, so request
building, response parsing, JSON mode, retries and usage accounting all run for real. Each request is put down
to an agent (`agent_of`): dagrag's agents by the first words of their system prompt (`AGENT_MARKERS`), an
LLM-judge reranker, LlamaIndex SubQuestionQueryEngine's question generator, else "unknown". Replies are
scripted per agent (`ScriptedOpenAIServer.script`): a string, a `ToolCall` (a function-calling model's reply that
calls a tool, for LlamaIndex agents), a function of the request body returning either, `(status, text)` for an
error reply, or a `Fault` (a reply that comes too late, a stream that stalls after its first chunk, 429 with
Retry-After, a 5xx, an empty or truncated body, a body that is not JSON, a connection closed half-way through
the body). The agent "*" answers for any agent without a script of its own; an agent without either gets HTTP
500. `simulated_replies` gives every agent a plausible default reply. A request with `"stream": true` gets the
same reply as server-sent chunks, as OpenAI streams: a word a chunk, a chunk with the finish reason and, when
the request asks for it (`stream_options.include_usage`), a last chunk with the usage (a truncated stream
stops half-way through its chunks, before the finish reason). Every request is recorded; `GET /stats` returns
the calls, prompt characters and most requests in flight at once per agent, `POST /reset` forgets the requests
(the scripts stay).

In a thread of the caller's process:

    with ScriptedOpenAIServer() as server:
        server.script("planner", '{"subqueries": []}', server_error(503))
        llm = dagrag_llm(server)
        ...
        server.requests_of("planner")

In its own process, with the simulated replies and a delay per call (as a remote model would take), so that
its own work never competes with the caller's event loop for the GIL:

    with OpenAIServerProcess(question="...", subqueries=["a", "b"], delay=0.1) as server:
        ...
        server.stats()["calls"]

    python -m dagrag.testing.openai_server --delay 0.1 --subqueries '["a", "b"]'   # prints the port, then serves

This module imports only the standard library (dagrag itself only inside `dagrag_llm`), so its process starts
in a fraction of a second.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

AGENT_MARKERS = {  # dagrag's agents: the first words of each one's system prompt
    "planner": "You turn a question into the searches",
    "writer": "You answer a question from numbered sources",
    "verifier": "You check an answer against its sources",
    "resolver": "You fill in search queries",
    "hyde": "You write hypothetical passages",
    "subanswer": "You answer search queries from numbered sources",
    "aggregator": "You combine the answers to sub-questions",
}
JUDGE_SYSTEM = "You rate how relevant each passage is to the query."  # an LLM-judge reranker's system prompt
SUBQ_QUESTIONS_MARKER = "Given a user question, and a list of tools"  # in SubQuestionQueryEngine's generator prompt
ANY_AGENT = "*"
EVENT_STREAM = "text/event-stream"


@dataclass(frozen=True)
class Fault:
    """A reply that goes wrong on the wire."""

    kind: Literal["slow", "stall", "status", "empty", "truncated", "not_json", "close_mid_body"]
    status: int = 500
    seconds: float = 0.0  # "slow", "stall": how long the server waits
    headers: dict[str, str] = field(default_factory=dict)
    then: str = "{}"  # "slow", "stall": what it finally answers
    message: str = ""  # "status": the error's message ("scripted <status>" when empty)


def slow(seconds: float, then: str = "{}") -> Fault:
    return Fault("slow", seconds=seconds, then=then)


def stalled(seconds: float, then: str = "{}") -> Fault:
    """A stream that sends its first chunk, then nothing for `seconds` (a model that stops producing); a request
    that does not stream gets `slow(seconds, then)`."""
    return Fault("stall", seconds=seconds, then=then)


def rate_limited(retry_after_s: float) -> Fault:
    return Fault("status", status=429, headers={"Retry-After": f"{retry_after_s:g}"})


def server_error(status: int = 500, message: str = "") -> Fault:
    return Fault("status", status=status, message=message)


EMPTY_BODY, TRUNCATED_JSON, NOT_JSON, CLOSED_MID_BODY = (
    Fault("empty"), Fault("truncated"), Fault("not_json"), Fault("close_mid_body"))

@dataclass(frozen=True)
class ToolCall:
    """A reply that calls a tool: the assistant message carries OpenAI `tool_calls` instead of text."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


Content = str | ToolCall
Reply = str | ToolCall | Callable[[dict[str, Any]], Content] | tuple[int, str] | Fault


def _content(request: dict[str, Any], role: str, *, last: bool = False) -> str:
    messages = request.get("messages", [])
    return next((str(m.get("content", "")) for m in (reversed(messages) if last else messages)
                 if m.get("role") == role), "")


def agent_of(request: dict[str, Any]) -> str:
    """The agent a chat request comes from: a key of AGENT_MARKERS, "judge", "subq_questions" or "unknown"."""
    system = _content(request, "system")
    markers = {**AGENT_MARKERS, "judge": JUDGE_SYSTEM}
    agent = next((agent for agent, marker in markers.items() if system.startswith(marker)), None)
    if agent is None and SUBQ_QUESTIONS_MARKER in _content(request, "user", last=True):
        return "subq_questions"
    return agent or "unknown"


def simulated_replies(question: str = "", subqueries: Sequence[str] = ()) -> dict[str, Reply]:
    """A plausible reply for every agent: dagrag's planner plans `subqueries` (with no dependencies), the writer
    cites every source once, the verifier finds every cited sentence supported, the judge scores each passage by
    the words it shares with the query, SubQuestionQueryEngine asks `subqueries`, and any other agent gets a
    generic answer."""
    plan = json.dumps({"query": question, "requires_retrieval": True, "hyde_document": None,
                       "subqueries": [{"id": f"s{i}", "text": text, "parents": []}
                                      for i, text in enumerate(subqueries, start=1)]})
    questions = json.dumps({"items": [{"sub_question": text, "tool_name": "wikipedia"} for text in subqueries]})

    def writer(request: dict[str, Any]) -> str:
        count = max(1, len(re.findall(r'<source id="\d+"', _content(request, "user", last=True))))
        return " ".join(f"Source {n} gives one of the facts asked for [{n}]." for n in range(1, count + 1))

    def verifier(request: dict[str, Any]) -> str:
        cited = re.findall(r"^(\d+)\. .*?\[(\d+)\]", _content(request, "user", last=True), flags=re.M)
        return json.dumps({"sentences": [
            {"index": int(i), "supported": True, "source": int(n), "reason": "stated"} for i, n in cited]})

    def judge(request: dict[str, Any]) -> str:
        user = _content(request, "user", last=True)
        found = re.search(r"^Query: (.*)$", user, flags=re.M)
        words = set((found.group(1) if found else "").lower().split())
        passages = re.split(r"^\[\d+\] ", user, flags=re.M)[1:]
        return json.dumps({"scores": [len(words & set(p.lower().split())) for p in passages]})

    return {"planner": plan, "writer": writer, "verifier": verifier, "judge": judge,
            "subq_questions": "```json\n" + questions + "\n```",
            ANY_AGENT: "According to the context, the answer is given above."}


def _tokens(text: str) -> int:
    return -(-len(text) // 4)  # about 4 characters a token, as OpenAI's tokenizers on English


def _usage(request: dict[str, Any], completion_tokens: int) -> dict[str, int]:
    prompt_tokens = sum(_tokens(str(m.get("content", ""))) for m in request.get("messages", []))
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


class ScriptedOpenAIServer:
    """The server in a thread of this process (`with ScriptedOpenAIServer(...) as server:`), or in the current
    thread (`serve_forever`). `replies` are the first scripts (a list: replies in turn); `delay` seconds pass
    before every reply."""

    def __init__(self, replies: Mapping[str, Reply | list[Reply]] | None = None, *, delay: float = 0.0,
                 port: int = 0) -> None:
        self.replies: dict[str, deque[Reply]] = defaultdict(deque)
        self.requests: list[dict[str, Any]] = []
        self.delay = delay
        self._lock = threading.Lock()
        self._in_flight: Counter[str] = Counter()
        self._peak_in_flight: Counter[str] = Counter()
        self._stopping = threading.Event()  # wakes delayed and "slow" replies at shutdown
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        for agent, reply in (replies or {}).items():
            self.script(agent, *(reply if isinstance(reply, list) else [reply]))

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, agent: str, *replies: Reply) -> None:
        """Replies to the agent's next requests, in turn; the last one repeats when the queue runs dry."""
        with self._lock:
            self.replies[agent].clear()
            self.replies[agent].extend(replies)

    def requests_of(self, agent: str) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if agent_of(r) == agent]

    def stats(self) -> dict[str, Counter[str]]:
        """Calls, prompt characters and the most requests answered at once (`peak_in_flight`) per agent, since the
        start or the last reset."""
        calls: Counter[str] = Counter()
        prompt_chars: Counter[str] = Counter()
        with self._lock:
            for request in self.requests:
                agent = agent_of(request)
                calls[agent] += 1
                prompt_chars[agent] += sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
            peak = Counter(self._peak_in_flight)
        return {"calls": calls, "prompt_chars": prompt_chars, "peak_in_flight": peak}

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._peak_in_flight.clear()

    @contextlib.contextmanager
    def _answering(self, agent: str) -> Iterator[None]:
        """Counts a request in flight for its agent while it is answered (delay included)."""
        with self._lock:
            self._in_flight[agent] += 1
            self._peak_in_flight[agent] = max(self._peak_in_flight[agent], self._in_flight[agent])
        try:
            yield
        finally:
            with self._lock:
                self._in_flight[agent] -= 1

    def serve_forever(self) -> None:
        self._server.serve_forever(poll_interval=0.05)

    def __enter__(self) -> ScriptedOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def _record(self, request: dict[str, Any]) -> Reply:
        """Keeps the request and picks its reply."""
        with self._lock:
            self.requests.append(request)
            queue = self.replies.get(agent_of(request)) or self.replies.get(ANY_AGENT)
            if not queue:
                return (500, "no scripted reply")
            return queue.popleft() if len(queue) > 1 else queue[0]

    def _completion(self, request: dict[str, Any], content: Content) -> dict[str, Any]:
        message, finish_reason, completion_tokens = self._message(content)
        return {
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion",
            "created": int(time.time()), "model": request.get("model", "scripted"),
            "choices": [{"index": 0, "finish_reason": finish_reason, "message": message}],
            "usage": _usage(request, completion_tokens),
        }

    def _message(self, content: Content) -> tuple[dict[str, Any], str, int]:
        """The assistant message, its finish reason and its completion tokens."""
        if isinstance(content, ToolCall):
            arguments = json.dumps(content.arguments)
            call = {"id": f"call_{len(self.requests)}", "type": "function",
                    "function": {"name": content.name, "arguments": arguments}}
            return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls", _tokens(arguments)
        return {"role": "assistant", "content": content}, "stop", _tokens(content)

    def _stream_events(self, request: dict[str, Any], content: Content) -> list[bytes]:
        """The reply as OpenAI streams it, one server-sent event an item: the text a word a chunk (tool calls in one
        chunk), a chunk with the finish reason, a usage chunk when the request asks for one, then [DONE]."""
        message, finish_reason, completion_tokens = self._message(content)
        if "tool_calls" in message:
            deltas: list[dict[str, Any]] = [{"role": "assistant", "content": None, "tool_calls": [
                {"index": i, **call} for i, call in enumerate(message["tool_calls"])]}]
        else:
            words = re.findall(r"\S+\s*|\s+", message["content"]) or [""]
            deltas = [{"role": "assistant", "content": words[0]}, *({"content": word} for word in words[1:])]
        base = {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": request.get("model", "scripted")}
        chunks = [*({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]} for delta in deltas),
                  {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason}]}]
        if (request.get("stream_options") or {}).get("include_usage"):
            chunks.append({**base, "choices": [], "usage": _usage(request, completion_tokens)})
        return [*(f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks), b"data: [DONE]\n\n"]


def _handler(server: ScriptedOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # kept-alive connections, as a real API's
        disable_nagle_algorithm = True  # else small replies on kept-alive connections wait ~40 ms for an ACK

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/stats"):
                self._send(200, server.stats())
            else:
                self._send(404, {"error": {"message": f"no {self.path}", "type": "not_found"}})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path.rstrip("/").endswith("/reset"):
                server.reset()
                self._send(200, {"ok": True})
                return
            reply = server._record(body)
            with server._answering(agent_of(body)):
                self._reply(body, reply)

        def _reply(self, body: dict[str, Any], reply: Reply) -> None:
            try:
                if server.delay and server._stopping.wait(server.delay):
                    self.close_connection = True  # shutting down: no reply
                elif isinstance(reply, Fault):
                    self._fault(reply, body)
                elif isinstance(reply, tuple):
                    status, text = reply
                    self._send(status, {"error": {"message": text, "type": "server_error"}})
                else:
                    self._answer(body, reply(body) if callable(reply) else reply)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up first (its timeout): that is the point of "slow"

        def _answer(self, body: dict[str, Any], content: Content) -> None:
            if body.get("stream"):
                self._send_raw(200, b"".join(server._stream_events(body, content)), content_type=EVENT_STREAM)
            else:
                self._send(200, server._completion(body, content))

        def _fault(self, fault: Fault, body: dict[str, Any]) -> None:
            if fault.kind == "stall" and body.get("stream"):
                events = server._stream_events(body, fault.then)
                self._send_in_parts(b"".join(events[:1]), b"".join(events[1:]), pause_s=fault.seconds)
            elif fault.kind in ("slow", "stall"):
                if server._stopping.wait(fault.seconds):
                    self.close_connection = True  # shutting down: no reply
                else:
                    self._answer(body, fault.then)
            elif fault.kind == "status":
                self._send(fault.status, {"error": {"message": fault.message or f"scripted {fault.status}",
                                                      "type": "error"}},
                           fault.headers)
            elif fault.kind == "empty":
                self._send_raw(200, b"")
            elif fault.kind == "not_json":
                self._send_raw(200, b"<html>Bad gateway, try later</html>", content_type="text/plain")
            elif body.get("stream"):
                events = server._stream_events(body, '{"query": "cut short"}')
                if fault.kind == "truncated":  # a complete HTTP reply whose stream stops before its finish reason
                    self._send_raw(200, b"".join(events[: len(events) // 2]), content_type=EVENT_STREAM)
                else:
                    self._close_mid_body(b"".join(events), EVENT_STREAM)
            else:
                data = json.dumps(server._completion(body, '{"query": "cut short"}')).encode()
                if fault.kind == "truncated":  # a complete HTTP reply whose JSON stops half-way
                    self._send_raw(200, data[: len(data) // 2])
                else:
                    self._close_mid_body(data, "application/json")

        def _close_mid_body(self, data: bytes, content_type: str) -> None:
            """The connection drops half-way through the announced body."""
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True

        def _send_in_parts(self, first: bytes, rest: bytes, *, pause_s: float) -> None:
            """`first` at once, `rest` after `pause_s` (nothing more when the server stops meanwhile)."""
            self.send_response(200)
            self.send_header("Content-Type", EVENT_STREAM)
            self.send_header("Content-Length", str(len(first) + len(rest)))
            self.end_headers()
            self.wfile.write(first)
            self.wfile.flush()
            if server._stopping.wait(pause_s):
                self.close_connection = True
                return
            self.wfile.write(rest)

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


class OpenAIServerProcess:
    """The server in a child process, with `simulated_replies(question, subqueries)` and `delay` seconds a call:
    `with OpenAIServerProcess(...) as server:` then `server.base_url`, `server.stats()`, `server.reset()`."""

    def __init__(self, *, question: str = "", subqueries: Sequence[str] = (), delay: float = 0.1) -> None:
        self.question = question
        self.subqueries = list(subqueries)
        self.delay = delay
        self.port = 0
        self._process: subprocess.Popen[str] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> OpenAIServerProcess:
        # Run as a file, not with -m: `-m dagrag.testing...` would first import dagrag (seconds, for nothing).
        self._process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--delay", str(self.delay), "--question", self.question,
             "--subqueries", json.dumps(self.subqueries)], stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line.strip():
            self.__exit__()
            raise RuntimeError("the fake OpenAI server process exited before printing its port")
        self.port = int(line)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
            if self._process.stdout is not None:
                self._process.stdout.close()

    def stats(self) -> dict[str, Counter[str]]:
        data = self._request("GET", "/stats")
        return {key: Counter(data[key]) for key in ("calls", "prompt_chars", "peak_in_flight")}

    def reset(self) -> None:
        self._request("POST", "/reset")

    def _request(self, method: str, path: str) -> dict[str, Any]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                         data=b"{}" if method == "POST" else None)
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())


def dagrag_llm(server: ScriptedOpenAIServer | OpenAIServerProcess, **settings: Any) -> Any:
    """dagrag's own OpenAI-compatible LLM (`dagrag.stack.build_llm`) pointed at the server; no retries and a 5 s
    timeout unless `settings` (fields of `dagrag.Settings`) say otherwise."""
    from dagrag import Settings
    from dagrag.stack import build_llm

    defaults = {"llm": "openai-like:scripted-model", "llm_base_url": server.base_url, "llm_max_retries": 0,
                "llm_timeout_s": 5}
    return build_llm(Settings(**{**defaults, **settings}))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delay", type=float, default=0.1, help="seconds before every reply")
    parser.add_argument("--question", default="", help="the question of the simulated plan")
    parser.add_argument("--subqueries", default="[]", help="JSON list: the planner's and question generator's parts")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    args = parser.parse_args(argv)
    server = ScriptedOpenAIServer(simulated_replies(args.question, json.loads(args.subqueries)), delay=args.delay,
                                  port=args.port)
    print(server.port, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
