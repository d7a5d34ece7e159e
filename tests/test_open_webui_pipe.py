"""The Open WebUI pipe (integrations/open_webui/dagrag_pipe.py), loaded from its file as Open WebUI loads it, run
against a real `dagrag serve` on loopback with an event emitter that records what Open WebUI would be shown."""

from __future__ import annotations

import ast
import importlib.util
import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from dagrag import QueryResult, Settings
from dagrag.server import DagragService
from dagrag.testing.live_server import LiveServer
from dagrag.testing.openai_server import ScriptedOpenAIServer
from dagrag.work_flows.progress import LLMProgress

from .test_llm_path import GOOD_PLAN, VERIFIER_REPLY, WRITER_REPLY

PIPE_FILE = Path(__file__).resolve().parent.parent / "integrations" / "open_webui" / "dagrag_pipe.py"
KEY = "pipe-test-key-0123456789"
DERRICKSON = "Were Scott Derrickson and Ed Wood of the same nationality?"
KISS_AND_TELL = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
OPEN_WEBUI_SHIPS = {"httpx", "pydantic"}  # beyond the standard library


def load_pipe_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dagrag_open_webui_pipe", PIPE_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pipe_module = load_pipe_module()


class RecordingEmitter:
    """Open WebUI's `__event_emitter__`, keeping every event."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def __call__(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def statuses(self) -> list[tuple[str, bool]]:
        return [(e["data"]["description"], e["data"]["done"]) for e in self.events if e["type"] == "status"]

    def sources(self) -> list[dict[str, Any]]:
        return [e["data"] for e in self.events if e["type"] == "source"]


@pytest.fixture(scope="module")
def live(sample_store_path: Path, embed_model, reranker) -> Iterator[LiveServer]:
    settings = Settings(qdrant_path=sample_store_path, collection="sample", api_key=KEY)
    with LiveServer(DagragService.from_settings(settings, embed_model=embed_model, reranker=reranker)) as server:
        yield server


def make_pipe(url: str, key: str = KEY, show_plan: bool = True) -> Any:
    pipe = pipe_module.Pipe()
    pipe.valves = pipe.Valves(DAGRAG_URL=url, DAGRAG_API_KEY=key, SHOW_PLAN=show_plan, TIMEOUT_S=120)
    return pipe


def chat(question: str) -> dict[str, Any]:
    return {"model": "dagrag", "stream": True, "messages": [
        {"role": "system", "content": "You are helpful."}, {"role": "user", "content": question}]}


def test_the_pipe_imports_only_what_open_webui_ships():
    imported = set()
    for node in ast.walk(ast.parse(PIPE_FILE.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported.add(node.module.split(".")[0])
    assert imported - set(sys.stdlib_module_names) - {"__future__"} == OPEN_WEBUI_SHIPS


async def test_a_comparison_streams_status_then_sources_then_the_answer_with_its_dag(live: LiveServer):
    emitter = RecordingEmitter()
    answer = await make_pipe(live.url).pipe(chat(DERRICKSON), __user__={"id": "u1"}, __event_emitter__=emitter)

    statuses = emitter.statuses()
    # one search per side, then the question itself (every plan searches it)
    assert statuses[:-1] == [("planning the searches…", False), ("plan: 3 subqueries in 1 layer", False),
                             ("searching s1, s2, s0 …", False), ("verifying the answer against its sources…", False)]
    assert statuses[-1] == ("4 sources · 3/3 subqueries covered · confidence high", True)
    # Every status comes before the first source, and the sources come in citation order.
    assert [e["type"] for e in emitter.events] == ["status"] * 4 + ["source"] * 4 + ["status"]
    sources = emitter.sources()
    assert [s["source"]["name"] for s in sources][:2] == ["[1] Scott Derrickson", "[2] Ed Wood"]
    assert sources[0]["document"][0].startswith("Scott Derrickson (born July 16, 1966)")
    assert sources[0]["metadata"][0]["subquery_id"] == "s1" and 0.9 < sources[0]["distances"][0] <= 1.0
    assert len({s["source"]["id"] for s in sources}) == 4

    text, picture = answer.split("\n\n```mermaid\n")
    assert "American director" in text and "[1]" in text and "[2]" in text
    assert "\nflowchart TB\n" in picture and picture.endswith("\n```")
    assert 'sq_s1["<b>s1</b>: Scott Derrickson nationality<br/>covered → Scott Derrickson (' in picture


async def test_a_question_the_collection_does_not_answer_ends_with_a_status_that_says_so(live: LiveServer):
    emitter = RecordingEmitter()
    answer = await make_pipe(live.url, show_plan=False).pipe(
        chat("How do I roll back a Kubernetes deployment?"), __event_emitter__=emitter)
    assert answer.startswith("The collection does not seem to answer this question.")
    assert emitter.statuses()[-1][0].startswith("the collection does not answer this · ")


@pytest.mark.parametrize("question", [DERRICKSON, KISS_AND_TELL])
async def test_the_pipes_picture_is_dagrags_own(live: LiveServer, question: str):
    # The pipe cannot import dagrag, so it carries a copy of the drawing rules: they must agree.
    emitter = RecordingEmitter()
    result = await make_pipe(live.url).ask(question, [], emitter)
    assert pipe_module.result_mermaid(result) == QueryResult.model_validate(result).mermaid()


async def test_a_bridge_question_searches_its_layers_in_turn_and_the_plan_can_be_left_out(live: LiveServer):
    emitter = RecordingEmitter()
    answer = await make_pipe(live.url, show_plan=False).pipe(chat(KISS_AND_TELL), __event_emitter__=emitter)
    lines = [description for description, _ in emitter.statuses()]
    assert lines[1:4] == ["plan: 2 subqueries in 2 layers", "searching s1 …", "searching s2 …"]
    assert "Chief of Protocol" in answer and "```mermaid" not in answer
    assert [s["source"]["name"] for s in emitter.sources()][:2] == ["[1] Kiss and Tell (1945 film)",
                                                                    "[2] Shirley Temple"]


async def test_history_goes_to_the_server_with_the_question(live: LiveServer):
    body = {"messages": [{"role": "user", "content": "Who starred as Corliss Archer in Kiss and Tell?"},
                         {"role": "assistant", "content": "Shirley Temple starred as Corliss Archer."},
                         {"role": "user", "content": [{"type": "text",
                                                       "text": "What government position did she hold?"}]}]}
    result = await make_pipe(live.url).ask(*pipe_module.question_and_history(body["messages"]), RecordingEmitter())
    assert "Shirley Temple" in result["plan"]["query"]


async def test_a_wrong_key_is_a_clear_message_not_a_trace(live: LiveServer):
    emitter = RecordingEmitter()
    answer = await make_pipe(live.url, key="wrong-key").pipe(chat(DERRICKSON), __event_emitter__=emitter)
    assert answer.startswith("**dagrag could not answer.**") and "refused the API key (401)" in answer
    assert "DAGRAG_API_KEY valve" in answer and "Traceback" not in answer
    assert emitter.statuses()[-1][1] is True and emitter.sources() == []


async def test_a_server_that_is_down_is_a_clear_message():
    with socket.socket() as probe:  # a port nothing listens on: bound, then closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    emitter = RecordingEmitter()
    answer = await make_pipe(f"http://127.0.0.1:{port}").pipe(chat(DERRICKSON), __event_emitter__=emitter)
    assert f"cannot reach the dagrag server at http://127.0.0.1:{port}" in answer
    assert "Is `dagrag serve` running there?" in answer
    assert emitter.statuses()[-1] == (f"dagrag: {answer.removeprefix('**dagrag could not answer.** ')}", True)


async def test_an_empty_question_is_answered_without_a_request():
    emitter = RecordingEmitter()
    answer = await make_pipe("http://127.0.0.1:9").pipe({"messages": [{"role": "user", "content": "  "}]},
                                                        __event_emitter__=emitter)
    assert answer.startswith("Ask a question") and emitter.events == []


def test_an_llm_calls_progress_is_a_status_line_until_it_is_done():
    def line(**fields: Any) -> str | None:  # the event as the server sends it
        return pipe_module.progress_line("LLMProgress", LLMProgress(**fields).model_dump(mode="json"))

    assert line(agent="writer", tokens=120, seconds=14.2) == "writing the answer… 120 tokens, 14 s"
    assert line(agent="planner", tokens=0, seconds=0.0) == "planning…"  # the call's start
    assert line(agent="verifier", tokens=1, seconds=2.6, attempt=2) == "verifying… 1 token, 3 s (attempt 2)"
    assert line(agent="resolver", tokens=30, seconds=1.0) == "resolver… 30 tokens, 1 s"
    assert line(agent="writer", tokens=120, seconds=14.2, done=True) is None
    assert line(agent="writer", tokens=3, seconds=1.0, done=True, ok=False) is None


async def test_with_an_llm_each_calls_progress_reaches_open_webui_through_the_server(
        sample_store_path: Path, embed_model, reranker):
    with ScriptedOpenAIServer({"planner": json.dumps(GOOD_PLAN), "writer": WRITER_REPLY,
                               "verifier": VERIFIER_REPLY}) as llm_server:
        settings = Settings(qdrant_path=sample_store_path, collection="sample", api_key=KEY,
                            llm="openai-like:scripted-model", llm_base_url=llm_server.base_url, llm_max_retries=0,
                            llm_timeout_s=10)
        service = DagragService.from_settings(settings, embed_model=embed_model, reranker=reranker)
        with LiveServer(service) as live:
            emitter = RecordingEmitter()
            answer = await make_pipe(live.url, show_plan=False).pipe(chat(DERRICKSON), __event_emitter__=emitter)
    assert answer == WRITER_REPLY
    assert [line for line, _ in emitter.statuses()[:-1]] == [
        "planning the searches…", "planning…", "plan: 3 subqueries in 1 layer", "searching s0, s1, s2 …",
        "writing the answer…", "verifying the answer against its sources…", "verifying…"]
