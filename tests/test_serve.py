"""`dagrag serve` end to end: a real uvicorn server on 127.0.0.1 (random port), real HTTP, the sample collection.

The server runs in a thread of this process: the embedded Qdrant folder admits one process, and the test
fixtures already hold it. Quick tests cover every route, auth, bad bodies and limits; the load and fault
runs are `slow`.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from llama_agents.client import WorkflowClient
from pydantic import ValidationError

from dagrag import Settings
from dagrag.agents.reranker import PairScorer, RerankerAgent
from dagrag.server import DagragService, ServerConfigError, check_bind
from dagrag.server.app import public_source
from dagrag.server.middleware import access_log
from dagrag.testing.live_server import LiveServer

from .conftest import ROOT, sample_records

KEY = "test-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
DERRICKSON = "Were Scott Derrickson and Ed Wood of the same nationality?"
KISS_AND_TELL = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
# a comparison: one search per side, then the question itself (every plan searches it), in one layer
PROGRESS_ORDER = ["PlanChosen", "LayerStarted", "SubqueryDone", "SubqueryDone", "SubqueryDone", "LayerDone",
                  "AnswerWritten", "VerificationDone"]
HANG_GUARD_S = 120.0


class GatedScorer:
    """The real cross-encoder behind a gate the test opens: a run stays under way, holding its slot, until then.

    Runs call it in a worker thread (RerankerAgent runs a synchronous scorer off the event loop), so waiting here
    blocks only that run.
    """

    def __init__(self, scorer: PairScorer) -> None:
        self.scorer = scorer
        self.gate = threading.Event()
        self.reached = threading.Event()  # a run is waiting at the gate

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.reached.set()
        if not self.gate.wait(timeout=HANG_GUARD_S):
            raise TimeoutError("the test never opened the gate")
        return self.scorer.score_pairs(pairs)


@pytest.fixture(scope="module")
def make_server(sample_store_path: Path, embed_model, reranker) -> Callable[..., Any]:
    """A context manager: a live server over the sample collection; keyword arguments are Settings overrides
    (`gate=GatedScorer(...)` puts the reranker behind a gate)."""

    @contextmanager
    def start(gate: GatedScorer | None = None, **overrides: Any) -> Iterator[LiveServer]:
        values = {"qdrant_path": sample_store_path, "collection": "sample", "api_key": KEY, **overrides}
        scorer = reranker if gate is None else RerankerAgent(gate, name="gated")
        service = DagragService.from_settings(Settings(**values), embed_model=embed_model, reranker=scorer)
        with LiveServer(service) as server:
            try:
                yield server
            finally:
                if gate is not None:
                    gate.gate.set()  # no run is left waiting when the server stops

    return start


@pytest.fixture(scope="module")
def live(make_server) -> Iterator[LiveServer]:
    with make_server(serve_max_runs=16) as server:
        yield server


@pytest.fixture
def client(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, headers=AUTH, timeout=HANG_GUARD_S) as http:
        yield http


def sse_events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) of a text/event-stream response, in order."""
    events, name, data = [], None, []
    for line in response.iter_lines():
        if line.startswith("event:"):
            name = line.split(":", 1)[1].strip()
        elif line.startswith("data:"):
            data.append(line.split(":", 1)[1].strip())
        elif not line and data:
            events.append((name or "message", json.loads("\n".join(data))))
            name, data = None, []
    return events


# --- auth and health -----------------------------------------------------------------------------------

def test_health_needs_no_key_and_everything_else_does(live: LiveServer):
    with httpx.Client(base_url=live.url, timeout=30) as anonymous:
        assert anonymous.get("/health").json() == {"status": "ok"}
        for method, path in [("GET", "/health/ready"), ("GET", "/metrics"), ("POST", "/search"), ("POST", "/query"),
                             ("POST", "/query/stream"), ("POST", "/workflows/dagrag/run"), ("GET", "/handlers")]:
            missing = anonymous.request(method, path, json={"question": DERRICKSON})
            assert missing.status_code == 401, path
            assert missing.headers["www-authenticate"].startswith("Bearer")
            wrong = anonymous.request(method, path, json={}, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401 and "invalid_token" in wrong.headers["www-authenticate"], path
            assert KEY not in wrong.text
        assert anonymous.get("/health/ready", headers={"Authorization": f"Basic {KEY}"}).status_code == 401
        assert anonymous.get("/health/ready", headers=AUTH).status_code == 200


def test_ready_names_the_collection(client: httpx.Client):
    response = client.get("/health/ready")
    assert response.status_code == 200 and response.json() == {"status": "ready", "collection": "sample"}


def test_refuses_to_listen_beyond_loopback_without_a_key():
    with pytest.raises(ServerConfigError, match="DAGRAG_API_KEY"):
        check_bind("0.0.0.0", Settings())
    check_bind("0.0.0.0", Settings(api_key="k"))
    for host in ("127.0.0.1", "localhost", "::1"):
        check_bind(host, Settings())


# --- the routes ------------------------------------------------------------------------------------------

def test_query_returns_the_query_result(client: httpx.Client):
    response = client.post("/query", json={"question": DERRICKSON}, headers={"X-Request-ID": "my-request-1"})
    assert response.status_code == 200, response.text
    assert response.headers["x-request-id"] == "my-request-1"
    result = response.json()
    assert result["question"] == DERRICKSON and result["answer"]
    assert {s["metadata"]["title"] for s in result["sources"]} >= {"Scott Derrickson", "Ed Wood"}
    assert [sq["id"] for sq in result["plan"]["subqueries"]] == ["s1", "s2", "s0"]


def test_query_takes_history(client: httpx.Client):
    history = [{"role": "user", "content": "Who starred as Corliss Archer in Kiss and Tell?"},
               {"role": "assistant", "content": "Shirley Temple starred as Corliss Archer."}]
    result = client.post("/query", json={"question": "What government position did she hold?",
                                         "history": history}).json()
    assert "Shirley Temple" in result["plan"]["query"]


def test_query_stream_sends_progress_in_order_then_the_result(client: httpx.Client):
    with client.stream("POST", "/query/stream", json={"question": DERRICKSON}) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response)
    names = [name for name, _ in events]
    assert names == [*PROGRESS_ORDER, "result"]
    plan = events[0][1]
    assert plan["question"] == DERRICKSON and [sq["id"] for sq in plan["subqueries"]] == ["s1", "s2", "s0"]
    assert all(len(json.dumps(data)) < 20_000 for _, data in events[:-1])  # summaries, not the run's state
    assert events[-1][1]["answer"] and events[-1][1]["question"] == DERRICKSON


def test_search_returns_each_querys_evidence_open_webui_style(client: httpx.Client):
    body = {"queries": [DERRICKSON, KISS_AND_TELL], "collection_names": ["sample"], "k": 3}
    response = client.post("/search", json=body)
    assert response.status_code == 200, response.text
    found = response.json()
    assert set(found) == {"documents", "metadatas", "distances"}
    assert [len(docs) for docs in found["documents"]] == [3, 3]
    assert all(0 <= d <= 1 for row in found["distances"] for d in row)
    first = found["metadatas"][0]
    assert {m["title"] for m in first} >= {"Scott Derrickson", "Ed Wood"}
    assert [(m["subquery_id"], m["rank_in_subquery"]) for m in first[:2]] == [("s1", 1), ("s2", 1)]
    assert "Scott Derrickson" in first[0]["subquery"]
    assert found["documents"][0][0].startswith("Scott Derrickson")
    assert {m["title"] for m in found["metadatas"][1]} >= {"Kiss and Tell (1945 film)", "Shirley Temple"}
    for metadata, distance in zip(first, found["distances"][0]):
        assert metadata["score"] == pytest.approx(distance, abs=1e-6)
        # the sample was ingested from an absolute path: a client sees the file and line, not the server's folders
        assert metadata["source"].startswith("hotpotqa_sample.jsonl:")
        assert not any(isinstance(v, str) and (str(ROOT) in v or v.startswith("/")) for v in metadata.values())


@pytest.mark.parametrize(("stored", "shown"), [
    ("/srv/corpora/private/hotpot.jsonl:12", "hotpot.jsonl:12"),
    ("data/hotpot.jsonl:3", "hotpot.jsonl:3"),
    ("handbook/setup/install.md", "handbook/setup/install.md"),  # a document's path in the folder ingested
    ("install.md", "install.md"),
    ("/home/me/notes.md", "notes.md"),
    ("C:\\Users\\me\\notes.md", "notes.md"),
    ("https://example.org/page.html", "https://example.org/page.html"),
])
def test_search_shows_where_a_passage_is_in_the_documents_not_on_the_server(stored: str, shown: str):
    assert public_source(stored) == shown


def test_search_rewrites_messages_into_a_standalone_question(client: httpx.Client):
    messages = [{"role": "user", "content": "Who starred as Corliss Archer in Kiss and Tell?"},
                {"role": "assistant", "content": "Shirley Temple starred as Corliss Archer."},
                {"role": "user", "content": "What government position did she hold?"}]
    found = client.post("/search", json={"messages": messages, "collection_names": ["sample"]}).json()
    assert len(found["documents"]) == 1
    assert "Shirley Temple" in {m["title"] for m in found["metadatas"][0]}


def test_search_of_an_unknown_collection_is_404_naming_it_and_not_where_the_store_is(client: httpx.Client):
    response = client.post("/search", json={"queries": ["x y z"], "collection_names": ["sample", "nowhere_9"]})
    assert response.status_code == 404
    assert response.json()["detail"] == ("collection 'nowhere_9' does not exist on this server; "
                                         "ingest documents into it first")


def test_workflow_server_runs_the_workflow_and_streams_its_events(client: httpx.Client):
    started = client.post("/workflows/dagrag/run-nowait", json={"start_event": {"query": DERRICKSON}})
    assert started.status_code == 200, started.text
    handler_id = started.json()["handler_id"]
    with client.stream("GET", f"/events/{handler_id}", params={"sse": "true", "after_sequence": -1}) as stream:
        envelopes = [data for _, data in sse_events(stream)]
    names = [e["type"] for e in envelopes]
    assert [n for n in names if n in PROGRESS_ORDER] == PROGRESS_ORDER
    assert names[-1] == "StopEvent" and names.index("VerificationDone") < names.index("StopEvent")
    assert envelopes[-1]["value"]["result"]["question"] == DERRICKSON
    handler = client.get(f"/handlers/{handler_id}").json()
    assert handler["status"] == "completed" and handler["result"]["value"]["result"]["answer"]

    waited = client.post("/workflows/dagrag/run", json={"start_event": {"query": KISS_AND_TELL}})
    assert waited.status_code == 200, waited.text
    result = waited.json()["result"]["value"]["result"]
    assert {s["metadata"]["title"] for s in result["sources"]} >= {"Shirley Temple"}


async def test_llamaindex_workflow_client_works_against_it(live: LiveServer):
    async with httpx.AsyncClient(base_url=live.url, headers=AUTH, timeout=HANG_GUARD_S) as http:
        workflows = WorkflowClient(httpx_client=http)
        handler = await workflows.run_workflow_nowait("dagrag", start_event={"query": DERRICKSON})
        names = [event.type async for event in workflows.get_workflow_events(handler.handler_id)]
        assert [n for n in names if n in PROGRESS_ORDER] == PROGRESS_ORDER
        done = await workflows.get_handler(handler.handler_id)
        assert done.status == "completed"


def test_the_workflow_debuggers_representation_is_valid_json(client: httpx.Client):
    response = client.get("/workflows/dagrag/representation")
    assert response.status_code == 200, response.text
    graph = response.json()["graph"]
    assert graph["name"] == "ServedQueryWorkflow"  # the QueryWorkflow that holds a run slot per run
    assert {"plan", "search_layer", "write", "verify"} <= {n["id"] for n in graph["nodes"]}


# --- CORS: none unless origins are configured ---------------------------------------------------------------

WEB_APP = "https://chat.example.org"


def preflight(http: httpx.Client, path: str, origin: str) -> httpx.Response:
    return http.options(path, headers={"Origin": origin, "Access-Control-Request-Method": "POST",
                                       "Access-Control-Request-Headers": "authorization,content-type"})


def test_no_cors_headers_by_default(client: httpx.Client):
    for path in ("/query", "/workflows/dagrag/run"):  # WorkflowServer's own default would allow any origin
        assert "access-control-allow-origin" not in preflight(client, path, WEB_APP).headers, path
    for path in ("/health/ready", "/workflows/dagrag/schema", "/handlers"):
        response = client.get(path, headers={"Origin": WEB_APP})
        assert response.status_code == 200 and "access-control-allow-origin" not in response.headers, path


def test_configured_origins_may_call_from_a_browser(make_server):
    with make_server(serve_cors_origins=[WEB_APP]) as server, \
            httpx.Client(base_url=server.url, timeout=HANG_GUARD_S) as http:
        allowed = preflight(http, "/search", WEB_APP)  # no key: a browser never sends one on a preflight
        assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == WEB_APP
        assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
        assert "access-control-allow-origin" not in preflight(http, "/search", "https://evil.example").headers
        response = http.get("/health/ready", headers={**AUTH, "Origin": WEB_APP})
        assert response.status_code == 200 and response.headers["access-control-allow-origin"] == WEB_APP
        assert "x-request-id" in response.headers["access-control-expose-headers"].lower()
        assert http.get("/health/ready", headers={"Origin": WEB_APP}).status_code == 401  # still needs the key


def test_cors_settings_are_checked():
    with pytest.raises(ValidationError, match="not an origin"):
        Settings(serve_cors_origins=["https://chat.example.org/"])
    assert Settings(serve_cors_origins="https://a.example, http://localhost:3000").serve_cors_origins == [
        "https://a.example", "http://localhost:3000"]
    with pytest.raises(ServerConfigError, match="CORS"):
        check_bind("127.0.0.1", Settings(serve_cors_origins=["*"]))
    check_bind("127.0.0.1", Settings(serve_cors_origins=["*"], api_key="k"))


# --- bad input: always a 4xx that names the problem ---------------------------------------------------------

BAD_BODIES: list[tuple[str, Any, int, str]] = [
    ("/query", b"{not json", 400, "malformed JSON"),
    ("/query", b"", 400, "empty"),
    ("/query", b"\xff\xfe", 400, "body"),
    ("/query", [1, 2], 422, "expected a JSON object"),
    ("/query", {}, 422, "question"),
    ("/query", {"question": 42}, 422, "question"),
    ("/query", {"question": ""}, 422, "question: the question is empty"),
    ("/query", {"question": "   "}, 422, "empty"),
    ("/query", {"question": "x" * 2001}, 422, "limit is 2000"),
    ("/query", {"question": "who\u0000 is"}, 422, "control characters"),
    ("/query", {"question": "ok?", "history": "not a list"}, 422, "history"),
    ("/query", {"question": "ok?", "history": [{"role": "user"}]}, 422, "history.0"),
    ("/query", {"question": "ok?", "surprise": 1}, 422, "surprise"),
    ("/query/stream", {"question": None}, 422, "question"),
    ("/search", {"queries": ["q"]}, 422, "collection_names"),
    ("/search", {"collection_names": ["sample"]}, 422, "queries"),
    ("/search", {"queries": [], "collection_names": ["sample"]}, 422, "queries"),
    ("/search", {"queries": ["q"] * 11, "collection_names": ["sample"]}, 422, "queries"),
    ("/search", {"queries": ["x" * 2001], "collection_names": ["sample"]}, 422, "queries"),
    ("/search", {"queries": [7], "collection_names": ["sample"]}, 422, "queries.0"),
    ("/search", {"queries": ["q"], "collection_names": []}, 422, "collection_names"),
    ("/search", {"queries": ["q"], "collection_names": ["../etc"]}, 422, "collection_names"),
    ("/search", {"queries": ["q"], "collection_names": ["a"] * 21}, 422, "collection_names"),
    ("/search", {"queries": ["q"], "collection_names": ["sample"], "k": 0}, 422, "k"),
    ("/search", {"queries": ["q"], "collection_names": ["sample"], "k": 101}, 422, "k"),
    ("/search", {"queries": ["q"], "collection_names": ["sample"], "k": "5"}, 422, "k"),
    ("/search", {"queries": ["q\u0001"], "collection_names": ["sample"]}, 422, "queries.0"),
    ("/search", {"messages": [{"role": "assistant", "content": "hi"}], "collection_names": ["sample"]}, 422,
     "messages"),
    ("/search", {"messages": "hi", "collection_names": ["sample"]}, 422, "messages"),
    ("/workflows/dagrag/run", {"start_event": {"query": ""}}, 422, "start_event.query"),
    ("/workflows/dagrag/run", {"start_event": {}}, 422, "no question"),
    ("/workflows/dagrag/run-nowait", {"start_event": {"query": "x" * 2001}}, 422, "limit is 2000"),
    ("/workflows/dagrag/run", {"start_event": {"query": "ok?", "history": 3}}, 422, "start_event.history"),
    ("/workflows/dagrag/run", {"kwargs": {"query": 5}}, 422, "kwargs.query"),
    ("/workflows/dagrag/run", {"start_event": "[1"}, 400, "start_event"),
    ("/workflows/dagrag/run", b"{", 400, "malformed JSON"),
    ("/workflows/dagrag/run", [], 422, "expected a JSON object"),
    ("/workflows/dagrag/run", {"start_event": {"query": "ok?", "qestion": "typo"}}, 422, "start_event.qestion"),
    ("/workflows/dagrag/run", {"start_event": {"query": "ok?", "plan": 5}}, 422, "start_event.plan"),
    ("/workflows/dagrag/run", {"start_event": {"query": "ok?", "plan": {}}}, 422, "start_event.plan.query"),
    ("/workflows/dagrag/run-nowait", {"start_event": {"query": "ok?"}, "handler_id": 5}, 422, "handler_id"),
    ("/query", b"[" * 100_000 + b"]" * 100_000, 400, "body: JSON nested too deeply"),
    ("/workflows/dagrag/run", b'{"kwargs": ' * 5_000 + b"1" + b"}" * 5_000, 400, "body: JSON nested too deeply"),
    ("/search", {"queries": [None], "collection_names": ["sample"]}, 422, "queries.0"),
    ("/search", {"queries": ["q"], "collection_names": [None]}, 422, "collection_names.0"),
    ("/search", {"queries": ["q"], "collection_names": ["sample"], "k": None}, 422, "k"),
    ("/search", {"queries": ["q"], "collection_names": ["sample"], "k": 2.5}, 422, "k"),
    ("/search", {"messages": [{"role": "system", "content": "be brief"}], "collection_names": ["sample"]}, 422,
     "messages: no user message"),
    ("/search", {"messages": [{"role": "user", "content": "  "}], "collection_names": ["sample"]}, 422,
     "messages: no user message"),
    ("/search", {"queries": None, "messages": None, "collection_names": ["sample"]}, 422, "queries: give"),
    ("/search", {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                 "collection_names": ["sample"]}, 422, "messages.0.content"),
]


@pytest.mark.parametrize(("path", "body", "status", "message"), BAD_BODIES,
                         ids=[f"{p}:{i}" for i, (p, *_rest) in enumerate(BAD_BODIES)])
def test_bad_bodies_get_a_4xx_naming_the_problem(client: httpx.Client, path: str, body: Any, status: int,
                                                  message: str):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = client.post(path, content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == status, response.text
    assert message in response.json()["detail"]


def test_oversized_bodies_are_refused_before_they_are_read(client: httpx.Client, live: LiveServer):
    limit = live.service.settings.serve_max_body_bytes
    big = json.dumps({"question": "x" * (limit + 10)}).encode()
    response = client.post("/query", content=big, headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and "body" in response.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while it arrives
        yield b'{"question": "'
        for _ in range(limit // 65536 + 2):
            yield b"x" * 65536

    response = client.post("/query", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413


def test_a_long_question_within_the_limit_is_not_a_500(client: httpx.Client):
    question = "Which of these words " + "word " * 250 + "came first?"  # 1,282 characters, under 2,000
    assert client.post("/query", json={"question": question}).status_code == 200


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                                          None])
def test_a_body_that_is_not_declared_json_is_415(client: httpx.Client, content_type: str | None):
    # What a web page can send cross-site without a CORS preflight: refused, so it cannot start runs here.
    headers = {"Content-Type": content_type} if content_type else {}
    for path in ("/query", "/search", "/workflows/dagrag/run-nowait"):
        response = client.post(path, content=json.dumps({"question": DERRICKSON}).encode(), headers=headers)
        assert response.status_code == 415, path
        assert response.json()["field"] == "content-type"
    assert client.post("/query", json={"question": "ok?"},
                       headers={"Content-Type": "application/json; charset=utf-8"}).status_code == 200


def test_unknown_routes_and_methods_are_4xx(client: httpx.Client):
    assert client.get("/query").status_code in (404, 405)  # the WorkflowServer's UI mount answers unknown GETs
    assert client.post("/workflows/nothing/run", json={"start_event": {"query": "q"}}).status_code == 404
    assert client.get("/handlers/no-such-handler").status_code == 404


# --- limits -----------------------------------------------------------------------------------------------

EVERY_WAY_TO_START_A_RUN = [
    ("/query", {"question": DERRICKSON}), ("/query/stream", {"question": DERRICKSON}),
    ("/search", {"queries": [DERRICKSON], "collection_names": ["sample"]}),
    ("/workflows/dagrag/run", {"start_event": {"query": DERRICKSON}}),
    ("/workflows/dagrag/run-nowait", {"start_event": {"query": DERRICKSON}})]


def assert_all_refused(http: httpx.Client) -> None:
    for path, body in EVERY_WAY_TO_START_A_RUN:
        refused = http.post(path, json=body)
        assert refused.status_code == 429, path
        assert int(refused.headers["retry-after"]) >= 1 and "busy" in refused.json()["detail"]


def runs_in_flight(http: httpx.Client) -> float:
    line = next(x for x in http.get("/metrics").text.splitlines() if x.startswith("dagrag_runs_in_flight "))
    return float(line.split()[1])


def wait_for_idle(http: httpx.Client) -> None:
    """Until no run holds a slot (a finished run frees its slot just after its last event is out)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while runs_in_flight(http) != 0:
        assert time.monotonic() < deadline, "a slot was never freed"
        time.sleep(0.05)


def test_over_the_run_limit_is_429_with_retry_after(make_server, reranker):
    gate = GatedScorer(reranker.scorer)
    with make_server(gate=gate, serve_max_runs=1, serve_queue_wait_s=0) as server, \
            httpx.Client(base_url=server.url, headers=AUTH, timeout=HANG_GUARD_S) as http:
        with http.stream("POST", "/query/stream", json={"question": KISS_AND_TELL}) as first:
            assert first.status_code == 200
            assert gate.reached.wait(HANG_GUARD_S)  # its run is under way and holds the only slot
            assert_all_refused(http)
            gate.gate.set()
            assert sse_events(first)[-1][0] == "result"
        wait_for_idle(http)
        assert http.post("/query", json={"question": DERRICKSON}).status_code == 200  # the slot is free again
        assert "dagrag_runs_rejected_total 5.0" in http.get("/metrics").text


def test_requests_past_the_run_limit_queue_and_past_the_queue_get_429_with_a_retry_after_from_the_queue(
        make_server, reranker):
    from concurrent.futures import ThreadPoolExecutor

    gate = GatedScorer(reranker.scorer)
    with make_server(gate=gate, serve_max_runs=1, serve_max_queue=3) as server, \
            httpx.Client(base_url=server.url, headers=AUTH, timeout=HANG_GUARD_S) as http, \
            ThreadPoolExecutor(max_workers=6) as pool:
        first = pool.submit(http.post, "/query", json={"question": KISS_AND_TELL})
        assert gate.reached.wait(HANG_GUARD_S)  # the only slot is taken
        queued = [pool.submit(http.post, "/query", json={"question": DERRICKSON}) for _ in range(3)]
        deadline = time.monotonic() + HANG_GUARD_S
        while server.service.slots.max_queue > len(server.service.slots._waiters):  # all three are waiting
            assert time.monotonic() < deadline
            time.sleep(0.01)
        refused = http.post("/query", json={"question": DERRICKSON})  # the queue is full: refused at once
        assert refused.status_code == 429 and "busy" in refused.json()["detail"]
        assert int(refused.headers["retry-after"]) >= 4  # four runs ahead of it, one at a time, ~1 s each at least
        gate.gate.set()
        assert first.result().status_code == 200
        assert [f.result().status_code for f in queued] == [200, 200, 200]  # they queued; none was refused


def test_the_default_run_limit_follows_the_cores():
    from dagrag.config import default_max_runs

    assert [default_max_runs(cores) for cores in (None, 1, 2, 4, 16)] == [2, 2, 4, 8, 16]


def test_a_workflow_server_run_holds_its_slot_until_it_ends(make_server, reranker):
    """run-nowait answers at once, but its run counts against SERVE_MAX_RUNS until it has finished."""
    gate = GatedScorer(reranker.scorer)
    with make_server(gate=gate, serve_max_runs=1, serve_queue_wait_s=0) as server, \
            httpx.Client(base_url=server.url, headers=AUTH, timeout=HANG_GUARD_S) as http:
        started = http.post("/workflows/dagrag/run-nowait", json={"start_event": {"query": KISS_AND_TELL}})
        assert started.status_code == 200, started.text
        handler_id = started.json()["handler_id"]
        assert gate.reached.wait(HANG_GUARD_S)
        assert runs_in_flight(http) == 1
        assert_all_refused(http)  # run-nowait too: it cannot stack up runs behind the limit
        gate.gate.set()
        with http.stream("GET", f"/events/{handler_id}", params={"sse": "true"}) as stream:
            assert [e["type"] for _, e in sse_events(stream)][-1] == "StopEvent"
        wait_for_idle(http)
        assert http.get(f"/handlers/{handler_id}").json()["status"] == "completed"

        # A request the WorkflowServer refuses starts no run, and gives its slot back.
        refused = http.post("/workflows/dagrag/run", json={"start_event": {"query": DERRICKSON}, "context": {"a": 1}})
        assert refused.status_code == 400
        assert runs_in_flight(http) == 0
        waited = http.post("/workflows/dagrag/run", json={"start_event": {"query": DERRICKSON}})
        assert waited.status_code == 200 and waited.json()["status"] == "completed"


def test_a_client_leaving_a_stream_frees_its_slot(make_server):
    with make_server(serve_max_runs=1, serve_queue_wait_s=20) as server, \
            httpx.Client(base_url=server.url, headers=AUTH, timeout=HANG_GUARD_S) as http:
        with http.stream("POST", "/query/stream", json={"question": KISS_AND_TELL}) as first:
            assert next(first.iter_lines()).startswith("event: PlanChosen")
        # the connection closed mid-run: the run is cancelled and the only slot comes back
        assert http.post("/query", json={"question": DERRICKSON}).status_code == 200
        assert "dagrag_runs_in_flight 0.0" in http.get("/metrics").text


def test_the_query_deadline_gives_a_partial_result_not_a_hung_request(make_server):
    with make_server(query_timeout_s=0.001) as server, \
            httpx.Client(base_url=server.url, headers=AUTH, timeout=HANG_GUARD_S) as http:
        response = http.post("/query", json={"question": KISS_AND_TELL})
        assert response.status_code == 200
        assert response.json()["partial"] is True and "deadline" in response.json()["partial_reason"]


# --- logs and metrics -------------------------------------------------------------------------------------

def test_one_json_log_line_per_request_without_keys_or_text(client: httpx.Client, caplog: pytest.LogCaptureFixture):
    def access_lines() -> list[dict]:
        return [json.loads(r.getMessage()) for r in caplog.records if r.name == access_log.name]

    with caplog.at_level("INFO", logger=access_log.name):
        client.post("/query", json={"question": DERRICKSON}, headers={"X-Request-ID": "trace-42"})
        client.post("/query", json={"question": ""})
        generated = client.get("/health").headers["x-request-id"]
        # The server thread writes a request's line once the response is sent: the client can read the
        # response first (seen on a loaded machine), so wait for the third line, for at most a few seconds.
        waited = time.monotonic()
        while len(access_lines()) < 3 and time.monotonic() - waited < 5:
            time.sleep(0.01)
    lines = access_lines()
    assert [(line["route"], line["status"]) for line in lines] == [("/query", 200), ("/query", 422),
                                                                  ("/health", 200)]
    assert lines[0]["request_id"] == "trace-42" and lines[2]["request_id"] == generated
    assert all({"duration_ms", "degradations", "method"} <= set(line) for line in lines)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert KEY not in text and "Derrickson" not in text and "American" not in text


def test_metrics_count_requests_stages_and_runs(client: httpx.Client):
    client.post("/query", json={"question": DERRICKSON})
    metrics = client.get("/metrics")
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    assert 'dagrag_requests_total{method="POST",route="/query",status="200"}' in text
    assert 'dagrag_request_seconds_bucket{le="0.5",route="/query"}' in text
    assert 'dagrag_query_stage_seconds_count{stage="plan"}' in text
    assert "dagrag_runs_in_flight 0.0" in text


def test_a_client_that_leaves_mid_body_is_counted_as_gone_not_as_a_server_error(
        live: LiveServer, client: httpx.Client, caplog: pytest.LogCaptureFixture):
    import socket
    from urllib.parse import urlsplit

    url = urlsplit(live.url)
    with caplog.at_level("INFO", logger=access_log.name):
        with socket.create_connection((url.hostname, url.port), timeout=HANG_GUARD_S) as raw:
            raw.sendall(f"POST /search HTTP/1.1\r\nHost: {url.netloc}\r\nAuthorization: Bearer {KEY}\r\n"
                        "Content-Type: application/json\r\nContent-Length: 4000\r\n\r\n{\"question\": ".encode())
        waited = time.monotonic()
        while not any("client_left" in r.getMessage() for r in caplog.records) and time.monotonic() - waited < 5:
            time.sleep(0.01)
    [line] = [json.loads(r.getMessage()) for r in caplog.records
              if r.name == access_log.name and "client_left" in r.getMessage()]
    assert line["route"] == "/search" and line["status"] == 499
    text = client.get("/metrics").text
    assert 'dagrag_requests_total{method="POST",route="/search",status="499"}' in text
    assert 'route="/search",status="500"' not in text


# --- the published schema --------------------------------------------------------------------------------------

def test_the_openapi_document_covers_every_route_resolves_every_ref_and_matches_what_query_returns(
        live: LiveServer, client: httpx.Client):
    assert httpx.get(f"{live.url}/openapi.json").status_code == 401  # behind the key, like every route but /health
    document = client.get("/openapi.json").json()
    assert document["openapi"].startswith("3.1") and document["info"]["title"] == "dagrag"
    paths = document["paths"]
    for path in ("/health", "/health/ready", "/metrics", "/search", "/query", "/query/stream", "/openapi.json",
                 "/workflows/{name}/run", "/workflows/{name}/run-nowait", "/handlers", "/handlers/{handler_id}",
                 "/events/{handler_id}", "/results/{handler_id}"):
        assert path in paths, path
    schemas = document["components"]["schemas"]
    refs = re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', json.dumps(document))
    assert refs and not [name for name in refs if name not in schemas]  # no dangling reference
    result = client.post("/query", json={"question": DERRICKSON}).json()
    described = schemas["QueryResult"]
    assert set(described["required"]) <= set(result) <= set(described["properties"])
    assert set(schemas["QueryBody"]["properties"]) == {"question", "history"}


def test_schemathesis_finds_no_server_error_and_no_answer_off_the_published_schema(live: LiveServer, tmp_path):
    """Every route, from /openapi.json, with a fixed seed and a bounded number of examples each."""
    import subprocess

    # a finished run first, whatever ran before: its handler and result are answers the schema must describe too
    finished = httpx.post(f"{live.url}/workflows/dagrag/run", headers=AUTH, timeout=HANG_GUARD_S,
                          json={"start_event": {"query": DERRICKSON}})
    assert finished.status_code == 200
    schema = tmp_path / "openapi.json"
    schema.write_text(httpx.get(f"{live.url}/openapi.json", headers=AUTH, timeout=HANG_GUARD_S).text,
                      encoding="utf-8")
    st = Path(sys.executable).parent / "st"
    done = subprocess.run(
        [str(st), "run", str(schema), "--url", live.url, "-H", f"Authorization: Bearer {KEY}", "--seed", "1",
         "--max-examples", "5", "--checks", "not_a_server_error,response_schema_conformance",
         "--request-timeout", "60", "--no-color"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-4000:]
    assert "19/19" in done.stdout and " passed" in done.stdout


# --- named keys: whose runs a client may see -----------------------------------------------------------------

ALICE, BOB, OPS = "alice-key-0123456789", "bob-key-0123456789ab", "ops-key-0123456789abc"


def test_named_keys_attribute_requests_and_keep_each_clients_runs_to_itself(
        make_server, caplog: pytest.LogCaptureFixture):
    keys = f"alice={ALICE},bob={BOB},ops={OPS}"
    with make_server(api_keys=keys, api_admins="ops") as server, caplog.at_level("INFO", logger=access_log.name):
        def as_(key: str) -> httpx.Client:
            return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"},
                                timeout=HANG_GUARD_S)

        with as_(ALICE) as alice, as_(BOB) as bob, as_(OPS) as ops, as_(KEY) as shared:
            started = alice.post("/workflows/dagrag/run", json={"start_event": {"query": DERRICKSON}})
            assert started.status_code == 200, started.text
            mine = started.json()["handler_id"]
            assert bob.post("/workflows/dagrag/run-nowait",
                            json={"start_event": {"query": KISS_AND_TELL}}).status_code == 200
            assert [h["handler_id"] for h in alice.get("/handlers").json()["handlers"]] == [mine]
            assert mine not in {h["handler_id"] for h in bob.get("/handlers").json()["handlers"]}
            for path in (f"/handlers/{mine}", f"/results/{mine}", f"/events/{mine}"):
                assert alice.get(path).status_code in (200, 204), path  # 204: the finished run's events
                refused = bob.get(path)  # another client's run is "not found", as a run that does not exist
                assert refused.status_code == 404 and refused.json() == {"detail": "Handler not found"}, path
            assert bob.post(f"/handlers/{mine}/cancel").status_code == 404
            stolen = bob.post("/workflows/dagrag/run-nowait",
                              json={"start_event": {"query": DERRICKSON}, "handler_id": mine})
            assert stolen.status_code == 409 and stolen.json()["field"] == "handler_id"
            assert len(ops.get("/handlers").json()["handlers"]) == 2  # an admin sees every client's runs
            assert ops.get(f"/handlers/{mine}").status_code == 200
            # DAGRAG_API_KEY, beside the named keys, is the admin `admin`: as before named keys, it sees every run
            assert len(shared.get("/handlers").json()["handlers"]) == 2
            metrics = ops.get("/metrics").text
        assert 'dagrag_client_requests_total{client="alice"}' in metrics
        assert 'dagrag_client_requests_total{client="bob"}' in metrics
        assert 'dagrag_client_requests_total{client="admin"}' in metrics
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == access_log.name]
    assert {line["client"] for line in lines} >= {"alice", "bob", "ops"}
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert not any(key in text for key in (ALICE, BOB, OPS))


def test_a_finished_runs_events_are_an_empty_204_not_a_traceback(client: httpx.Client,
                                                                 caplog: pytest.LogCaptureFixture):
    finished = client.post("/workflows/dagrag/run", json={"start_event": {"query": DERRICKSON}}).json()["handler_id"]
    with caplog.at_level("INFO"):
        response = client.get(f"/events/{finished}")
        waited = time.monotonic()  # the server writes its access line (after any error) once the response is out
        while '"route": "/events/{handler_id}"' not in caplog.text and time.monotonic() - waited < 5:
            time.sleep(0.01)
    assert response.status_code == 204 and response.content == b""
    assert not any(word in caplog.text for word in ("Too much data", "unhandled error", "Unhandled exception"))


def test_runs_and_their_owners_survive_a_restart(make_server, tmp_path):
    runs_db = tmp_path / "runs" / "runs.sqlite3"
    keys = {"api_keys": f"alice={ALICE},bob={BOB}", "serve_runs_db": str(runs_db)}
    with make_server(**keys) as server, httpx.Client(base_url=server.url, timeout=HANG_GUARD_S,
                                                     headers={"Authorization": f"Bearer {ALICE}"}) as alice:
        started = alice.post("/workflows/dagrag/run", json={"start_event": {"query": DERRICKSON}})
        handler_id = started.json()["handler_id"]
    assert runs_db.is_file()
    with make_server(**keys) as server:  # a new process's worth of state: only the file is shared
        with httpx.Client(base_url=server.url, timeout=HANG_GUARD_S,
                          headers={"Authorization": f"Bearer {ALICE}"}) as alice:
            handler = alice.get(f"/handlers/{handler_id}")
            assert handler.status_code == 200 and handler.json()["status"] == "completed"
            assert handler.json()["result"]["value"]["result"]["question"] == DERRICKSON
            assert [h["handler_id"] for h in alice.get("/handlers").json()["handlers"]] == [handler_id]
        with httpx.Client(base_url=server.url, timeout=HANG_GUARD_S,
                          headers={"Authorization": f"Bearer {BOB}"}) as bob:
            assert bob.get(f"/handlers/{handler_id}").status_code == 404  # still alice's after the restart


@pytest.mark.parametrize(("keys", "admins", "problem"), [
    ("alice", "", "DAGRAG_API_KEYS entry 1: expected name=KEY"),
    ("alice=short", "", "DAGRAG_API_KEYS entry 1 (alice): the key is shorter than 16 characters"),
    (f"alice={ALICE},alice={BOB}", "", "DAGRAG_API_KEYS entry 2: the name 'alice' is given twice"),
    (f"alice={ALICE},bob={ALICE}", "", "DAGRAG_API_KEYS entry 2 (bob): the same key as another name"),
    (f"alice={ALICE}", "carol", "DAGRAG_API_ADMINS: carol not among the names of DAGRAG_API_KEYS"),
])
def test_bad_named_keys_are_refused_naming_the_entry_never_the_key(keys: str, admins: str, problem: str):
    with pytest.raises(ValidationError) as raised:
        Settings(api_keys=keys, api_admins=admins)
    assert problem in str(raised.value)
    assert ALICE not in str(raised.value) and BOB not in str(raised.value)


# --- load and faults (slow) ------------------------------------------------------------------------------------

LOAD_QUESTIONS = [" ".join(r["question"].split()) for r in sample_records()[:10]]


async def search_all(url: str, questions: list[str], concurrency: int) -> list[httpx.Response]:
    limit = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=HANG_GUARD_S,
                                 limits=httpx.Limits(max_connections=concurrency)) as http:
        async def one(question: str) -> httpx.Response:
            async with limit:
                return await http.post("/search", json={"queries": [question], "collection_names": ["sample"]})

        return await asyncio.wait_for(asyncio.gather(*(one(q) for q in questions)), timeout=HANG_GUARD_S)


def evidence(response: httpx.Response) -> list[str]:
    return [m["node_id"] for m in response.json()["metadatas"][0]]


@pytest.mark.slow
async def test_200_searches_at_concurrency_16_all_succeed_without_cross_talk(live: LiveServer):
    alone = {q: evidence(r) for q, r in zip(LOAD_QUESTIONS, await search_all(live.url, LOAD_QUESTIONS, 1))}
    questions = LOAD_QUESTIONS * 20
    started = time.perf_counter()
    responses = await search_all(live.url, questions, 16)
    seconds = time.perf_counter() - started
    assert Counter(r.status_code for r in responses) == {200: 200}
    for question, response in zip(questions, responses):
        assert evidence(response) == alone[question], question  # its own evidence, not a neighbour's
    assert seconds < HANG_GUARD_S


@pytest.mark.slow
async def test_qdrant_failing_mid_load_degrades_then_recovers(live: LiveServer):
    client = live.service.agents.searcher.vector_store.client
    questions = LOAD_QUESTIONS[:8]

    def outage(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("connection refused (simulated Qdrant outage)")

    async def query_all(http: httpx.AsyncClient) -> list[httpx.Response]:
        return list(await asyncio.gather(*(http.post("/query", json={"question": q}) for q in questions)))

    async with httpx.AsyncClient(base_url=live.url, headers=AUTH, timeout=HANG_GUARD_S) as http:
        before = asyncio.ensure_future(search_all(live.url, questions * 2, 8))
        await asyncio.sleep(0.3)  # the load is under way when Qdrant goes
        # Every call a search or a readiness check makes to the store (the embedded store is searched in-process,
        # but it still counts, reads and fetches payloads from Qdrant).
        calls = ("query_batch_points", "collection_exists", "count", "retrieve", "scroll")
        for name in calls:
            setattr(client, name, outage)
        try:
            during_load = await before
            ready = await http.get("/health/ready")
            assert ready.status_code == 503 and "does not answer" in ready.json()["reason"]
            searched = await search_all(live.url, questions, 4)
            queried = await query_all(http)
        finally:
            for name in calls:
                delattr(client, name)
        # No 5xx but the clear 503 of a failed search; the server never fell over.
        assert {r.status_code for r in during_load} <= {200, 503}
        assert {r.status_code for r in searched} == {503}
        assert all("search failed" in r.json()["detail"] for r in searched)
        assert {r.status_code for r in queried} == {200}  # an answer that says what failed
        for response in queried:
            result = response.json()
            assert {sq["status"] for sq in result["subqueries"]} == {"failed"}
            assert result["retrieval_confidence"] == "low"
        assert (await http.get("/health")).status_code == 200

        assert (await http.get("/health/ready")).status_code == 200  # Qdrant is back: so is the server
        recovered = await search_all(live.url, questions, 4)
        assert {r.status_code for r in recovered} == {200} and all(evidence(r) for r in recovered)
        metrics = (await http.get("/metrics")).text
        assert 'dagrag_degradations_total{agent="searcher"}' in metrics


@pytest.mark.parametrize("body", ["[1]", '"x"', "null", "3"])
def test_an_event_body_that_is_not_a_json_object_is_a_422_naming_the_body_not_a_500(client: httpx.Client, body: str):
    answer = client.post("/events/some-handler", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 422 and answer.json()["field"] == "body"
    assert "expected a JSON object" in answer.json()["detail"]


async def test_a_key_counts_only_as_a_bearer_token_and_the_oldest_run_owner_is_forgotten_first():
    from dagrag.server.keys import ApiKeys, Caller
    from dagrag.server.runs_db import SqliteRunOwners

    keys = ApiKeys({"alice": ALICE, "bob": BOB}, admins=frozenset({"bob"}))
    assert keys.caller(f"Bearer {ALICE}") == Caller("alice", admin=False)
    assert keys.caller(f"bearer  {BOB} ") == Caller("bob", admin=True)
    assert keys.caller(f"Basic {ALICE}") is None and keys.caller(f"Bearer {ALICE}x") is None
    owners, alice = SqliteRunOwners(limit=2), Caller("alice", admin=False)
    for handler_id in ("h1", "h2", "h3"):
        assert await owners.claim(handler_id, alice)
    assert not await owners.may_see("h1", alice) and await owners.may_see("h3", alice)  # h1 forgotten: admin-only
    assert not await owners.claim("h3", Caller("carol", admin=False))
    assert await owners.claim("h3", Caller("ops", admin=True))
