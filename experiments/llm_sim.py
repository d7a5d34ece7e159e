"""A simulated remote LLM for benchmarks: an OpenAI-compatible HTTP server in its own process.

Every chat call sleeps `--delay` seconds (the network and the model), then answers by agent: dagrag's
planner (a fixed plan), writer, verifier and LLM-judge reranker, and SubQuestionQueryEngine's question
generator and synthesizer. It runs in a separate process, as a real service would, so its own work
never competes with the client's event loop for the GIL. `GET /stats` returns the calls and prompt
characters per agent, `POST /reset` zeroes them.

    python experiments/llm_sim.py --delay 0.1 --subqueries '["a", "b"]'   # prints the port, then serves
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
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

JUDGE_SYSTEM = "You rate how relevant each passage is to the query."


def plan_json(question: str, subqueries: list[str]) -> str:
    return json.dumps({"query": question, "requires_retrieval": True, "hyde_document": None,
                       "subqueries": [{"id": f"s{i}", "text": text, "parents": []}
                                      for i, text in enumerate(subqueries, start=1)]})


def reply(body: dict[str, Any], *, question: str, subqueries: list[str]) -> tuple[str, str]:
    """(agent, reply text) for one chat request."""
    messages = body.get("messages", [])
    system = next((str(m.get("content", "")) for m in messages if m.get("role") == "system"), "")
    user = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
    if system.startswith("You plan searches"):
        return "planner", plan_json(question, subqueries)
    if system.startswith("You answer questions from numbered sources"):
        found = re.search(r"there are (\d+) sources", system)
        count = int(found.group(1)) if found else 1
        return "writer", " ".join(f"Source {n} gives one of the facts asked for [{n}]." for n in range(1, count + 1))
    if system.startswith("You check an answer"):
        cited = re.findall(r"^(\d+)\. .*?\[(\d+)\]", user, flags=re.M)
        return "verifier", json.dumps({"sentences": [
            {"index": int(i), "supported": True, "source": int(n), "reason": "stated"} for i, n in cited]})
    if system.startswith(JUDGE_SYSTEM):
        found = re.search(r"^Query: (.*)$", user, flags=re.M)
        words = set((found.group(1) if found else "").lower().split())
        passages = re.split(r"^\[\d+\] ", user, flags=re.M)[1:]
        return "judge", json.dumps({"scores": [len(words & set(p.lower().split())) for p in passages]})
    if "Given a user question, and a list of tools" in user:
        items = [{"sub_question": text, "tool_name": "wikipedia"} for text in subqueries]
        return "subq_questions", "```json\n" + json.dumps({"items": items}) + "\n```"
    return "answer", "According to the context, the answer is given above."


def make_server(delay: float, *, question: str, subqueries: list[str], port: int = 0) -> ThreadingHTTPServer:
    calls: Counter[str] = Counter()
    prompt_chars: Counter[str] = Counter()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else small replies on kept-alive connections wait ~40 ms for an ACK

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            with lock:
                self._send({"calls": dict(calls), "prompt_chars": dict(prompt_chars)})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path.rstrip("/").endswith("/reset"):
                with lock:
                    calls.clear()
                    prompt_chars.clear()
                self._send({"ok": True})
                return
            kind, content = reply(body, question=question, subqueries=subqueries)
            prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
            with lock:
                calls[kind] += 1
                prompt_chars[kind] += prompt
            time.sleep(delay)
            self._send({
                "id": "chatcmpl-sim", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", "simulated"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": prompt // 4, "completion_tokens": len(content) // 4,
                          "total_tokens": (prompt + len(content)) // 4},
            })

        def _send(self, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server


class SimulatedLLMServer:
    """The simulated LLM in a child process: `with SimulatedLLMServer(...) as server:` then `server.base_url`."""

    def __init__(self, *, question: str, subqueries: list[str], delay: float = 0.1) -> None:
        self.delay = delay
        self.question = question
        self.subqueries = list(subqueries)
        self._process: subprocess.Popen[str] | None = None
        self.port = 0

    def __enter__(self) -> SimulatedLLMServer:
        self._process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--delay", str(self.delay), "--question", self.question,
             "--subqueries", json.dumps(self.subqueries)], stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None
        self.port = int(self._process.stdout.readline())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _request(self, method: str, path: str) -> dict[str, Any]:
        import urllib.request

        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                         data=b"{}" if method == "POST" else None)
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def stats(self) -> dict[str, Counter[str]]:
        data = self._request("GET", "/stats")
        return {"calls": Counter(data["calls"]), "prompt_chars": Counter(data["prompt_chars"])}

    def reset(self) -> None:
        self._request("POST", "/reset")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delay", type=float, default=0.1)
    parser.add_argument("--question", default="")
    parser.add_argument("--subqueries", default="[]", help="JSON list: the planner's and question generator's parts")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = make_server(args.delay, question=args.question, subqueries=json.loads(args.subqueries), port=args.port)
    print(server.server_address[1], flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
