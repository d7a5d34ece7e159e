"""The layer every request passes: request id, auth, body limit and type, start-event checks, the run slot of a
WorkflowServer run, one JSON log line, metrics.

A plain ASGI middleware (no per-route decorators), so the WorkflowServer's routes get the same treatment as
dagrag's own. The body is read here once, up to SERVE_MAX_BODY_BYTES, and replayed to the route.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import Settings
from ..core.errors import InvalidQuestionError
from ..core.inputs import check_history, check_question
from ..core.plan import Plan
from ..work_flows.events import QueryStarted
from .keys import ApiKeys, Caller
from .runs_db import RunOwners, run_owners
from .schemas import BadRequest, is_json_media_type, parse_json
from .service import PENDING_SLOT, DagragService, RunSlotsBusy, SlotGrant

access_log = logging.getLogger("dagrag.server.access")

WORKFLOW_NAME = "dagrag"  # the QueryWorkflow's name on the WorkflowServer
# Counted and logged for a client that disconnected before any answer (nginx's "client closed request"): no
# response was sent, and it is not a server error.
CLIENT_LEFT = 499
NO_CONTENT = 204
OPEN_PATHS = frozenset({"/health"})  # liveness needs no key: load balancers and orchestrators probe it
REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
WORKFLOW_RUN = re.compile(r"^/workflows/(?P<name>[^/]+)/(?P<kind>run|run-nowait)$")
EVENTS_ROUTE = re.compile(r"^/events/[^/]+$")  # WorkflowServer: send an event to a running handler
# WorkflowServer's routes about one run: only its owner (or an admin) may read or control it.
RUN_ROUTE = re.compile(r"^/(?:results|events|handlers)/(?P<handler_id>[^/]+)(?:/cancel)?$")
LOCAL = Caller(name="local", admin=True)  # no key configured: the server binds loopback only, one user
START_EVENT_FIELDS = frozenset(QueryStarted.model_fields)  # query, history, plan
MAX_HANDLER_ID_CHARS = 128
# Route templates for metrics and logs: a label per template, never per handler id.
TEMPLATES = [
    (re.compile(r"^/workflows/[^/]+/(run|run-nowait|schema|representation|events)$"),
     lambda m: f"/workflows/{{name}}/{m.group(1)}"),
    (re.compile(r"^/(events|handlers|results)/[^/]+$"), lambda m: f"/{m.group(1)}/{{handler_id}}"),
    (re.compile(r"^/handlers/[^/]+/cancel$"), lambda m: "/handlers/{handler_id}/cancel"),
]
KNOWN_PATHS = frozenset({"/health", "/health/ready", "/metrics", "/search", "/query", "/query/stream", "/workflows",
                         "/handlers", "/openapi.json", "/"})


def route_template(path: str) -> str:
    if path in KNOWN_PATHS:
        return path
    for pattern, name in TEMPLATES:
        match = pattern.match(path)
        if match:
            return name(match)
    return "other"


@dataclass
class RequestInfo:
    """What a request carries through the server (`scope["dagrag"]`); routes add their degradations."""

    request_id: str
    route: str
    degradations: list[str] = field(default_factory=list)
    partial: bool = False
    client_left: bool = False  # the client disconnected before the server answered
    caller: Caller | None = None  # whose key the request carried (None: refused before that was known)


def request_info(scope: Scope) -> RequestInfo:
    return scope["dagrag"]


async def send_json(send: Send, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    payload = json.dumps(body).encode()
    raw_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw_headers += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": payload})


class ServerMiddleware:
    def __init__(self, app: ASGIApp, service: DagragService, owners: RunOwners | None = None) -> None:
        self.app = app
        self.service = service
        settings: Settings = service.settings
        self.keys = ApiKeys.from_settings(settings)
        self.owners = owners or run_owners(settings)
        self.max_body = settings.serve_max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        given_id = headers.get("x-request-id", "")
        info = RequestInfo(request_id=given_id if REQUEST_ID.match(given_id) else uuid.uuid4().hex,
                           route=route_template(scope["path"]))
        scope["dagrag"] = info
        status = {"code": 500, "started": False}

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"], status["started"] = message["status"], True
                headers = message.get("headers", [])
                if message["status"] == NO_CONTENT:  # WorkflowServer answers a finished run's events with a 204
                    headers = [(k, v) for k, v in headers if k.lower() not in (b"content-length", b"content-type")]
                message = {**message, "headers": [*headers, (b"x-request-id", info.request_id.encode())]}
            elif message["type"] == "http.response.body" and status["code"] == NO_CONTENT:
                message = {**message, "body": b""}  # ... and a body, which HTTP forbids: the server raised on it
            await send(message)

        try:
            await self._handle(scope, receive, send_with_id, headers)
        except Exception:
            access_log.exception("unhandled error (request id %s)", info.request_id)
            if not status["started"]:
                await send_json(send_with_id, 500, {"detail": f"internal error; request id {info.request_id}"})
        finally:
            left = info.client_left and not status["started"]
            self._account(scope, info, CLIENT_LEFT if left else status["code"], time.perf_counter() - started)

    async def _handle(self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        path: str = scope["path"]
        caller = self.keys.caller(headers.get("authorization", "")) if self.keys.required else LOCAL
        if caller is None and path not in OPEN_PATHS:
            wrong = "authorization" in headers
            detail = "wrong API key" if wrong else "missing 'Authorization: Bearer <key>'"
            await send_json(send, 401, {"detail": detail},
                            {"www-authenticate": 'Bearer error="invalid_token"' if wrong else "Bearer"})
            return
        request_info(scope).caller = caller
        owned = RUN_ROUTE.match(path)
        if caller is not None and owned and not await self.owners.may_see(owned.group("handler_id"), caller):
            await send_json(send, 404, {"detail": "Handler not found"})  # as for a run that does not exist
            return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            await self._too_large(send)
            return
        body = b""
        if scope["method"] in ("POST", "PUT", "PATCH"):
            chunks: list[bytes] = []
            size = 0
            more = True
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    request_info(scope).client_left = True
                    return
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_body:
                    await self._too_large(send)
                    return
                chunks.append(chunk)
                more = message.get("more_body", False)
            body = b"".join(chunks)
            content_type = headers.get("content-type", "")
            # JSON only: it also keeps a web page from starting runs here with a form or a text/plain POST,
            # which a browser sends cross-site without asking (a JSON body needs a CORS preflight first).
            if body and not is_json_media_type(content_type):
                got = f"got {content_type!r}" if content_type else "none given"
                await send_json(send, 415, {"detail": f"content-type: expected application/json, {got}",
                                            "field": "content-type"})
                return
        replay = _replaying(body, receive)

        if scope["method"] == "POST" and EVENTS_ROUTE.match(path):
            try:  # WorkflowServer reads the body with .get(): a list, string or null there was a 500
                sent = parse_json(body)
                if not isinstance(sent, dict):
                    raise BadRequest(422, "body", f"expected a JSON object, got {type(sent).__name__}")
            except BadRequest as error:
                await send_json(send, error.status, error.body())
                return
        run = WORKFLOW_RUN.match(path) if scope["method"] == "POST" else None
        if run is None or run.group("name") != WORKFLOW_NAME:  # another name: the WorkflowServer's 404
            listing = caller is not None and not caller.admin and path == "/handlers"
            await self.app(scope, replay, self._own_runs_only(send, caller) if caller and listing else send)
            return
        try:
            data = self._check_start_event(body)
        except BadRequest as error:
            await send_json(send, error.status, error.body())
            return
        if caller is not None:  # the run is the caller's: named now, so later requests about it can be checked
            handler_id = data.get("handler_id") or uuid.uuid4().hex
            if not await self.owners.claim(handler_id, caller):
                await send_json(send, 409, {"detail": "handler_id: a run of another client has this id",
                                            "field": "handler_id"})
                return
            if not data.get("handler_id"):
                body = json.dumps({**data, "handler_id": handler_id}).encode()
                scope["headers"] = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
                scope["headers"].append((b"content-length", str(len(body)).encode()))
                replay = _replaying(body, receive)
        # Every run counts against SERVE_MAX_RUNS, however it was started: the slot is taken here, before the
        # WorkflowServer answers, and the run it starts keeps it until the run ends (SlotGrant).
        slots = self.service.slots
        try:
            await slots.acquire()
        except RunSlotsBusy as busy:
            await self._busy(send, busy.retry_after_s)
            return
        grant = SlotGrant(slots)
        token = PENDING_SLOT.set(grant)
        try:
            await self.app(scope, replay, send)
        finally:
            PENDING_SLOT.reset(token)
            grant.release_unclaimed()

    def _own_runs_only(self, send: Send, caller: Caller) -> Send:
        """A send that keeps, in WorkflowServer's `/handlers` list, only the runs `caller` may see."""
        start: Message | None = None
        chunks: list[bytes] = []

        async def filtered(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False) or start is None:
                return
            body = b"".join(chunks)
            if start["status"] == 200:
                listed = json.loads(body)
                listed["handlers"] = [h for h in listed.get("handlers", [])
                                      if await self.owners.may_see(str(h.get("handler_id", "")), caller)]
                body = json.dumps(listed).encode()
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        return filtered

    def _check_start_event(self, body: bytes) -> dict[str, Any]:
        """A WorkflowServer run's question is checked here, so a bad one is a 4xx naming it, not a failed run.
        Returns the body as parsed."""
        if not body.strip():
            raise BadRequest(422, "start_event.query", "no question given; send {\"start_event\": {\"query\": ...}}")
        data = parse_json(body)
        if not isinstance(data, dict):
            raise BadRequest(422, "body", f"expected a JSON object, got {type(data).__name__}")
        where = "start_event" if "start_event" in data else "kwargs"
        fields = data.get(where, {})
        if isinstance(fields, str):
            try:
                fields = json.loads(fields)
            except json.JSONDecodeError:
                raise BadRequest(400, where, "a string that is not JSON") from None
        if isinstance(fields, dict) and isinstance(fields.get("value"), dict) and (
                "type" in fields or "qualified_name" in fields):
            fields = fields["value"]  # an event envelope: {"type": ..., "value": {...}}
        if not isinstance(fields, dict):
            raise BadRequest(422, where, f"expected a JSON object, got {type(fields).__name__}")
        unknown = sorted(set(fields) - START_EVENT_FIELDS)
        if unknown:  # as /query does: a misspelt field would otherwise be dropped without a word
            raise BadRequest(422, f"{where}.{unknown[0][:64]}",
                             f"unknown field; the start event takes {', '.join(sorted(START_EVENT_FIELDS))}")
        handler_id = data.get("handler_id")
        if handler_id is not None and not (isinstance(handler_id, str) and len(handler_id) <= MAX_HANDLER_ID_CHARS):
            raise BadRequest(422, "handler_id", f"expected a string of at most {MAX_HANDLER_ID_CHARS} characters")
        limit = self.service.settings.max_question_chars
        try:
            check_question(fields.get("query"), limit)
        except InvalidQuestionError as error:
            raise BadRequest(422, f"{where}.query", str(error)) from None
        try:
            check_history(fields.get("history"), limit)
        except InvalidQuestionError as error:
            raise BadRequest(422, f"{where}.history", str(error)) from None
        if fields.get("plan") is not None:
            try:
                Plan.model_validate(fields["plan"])
            except ValidationError as error:
                first = error.errors(include_url=False, include_input=False)[0]
                place = ".".join(str(part) for part in ("plan", *first["loc"]))
                raise BadRequest(422, f"{where}.{place}", first["msg"]) from None
        return data

    async def _too_large(self, send: Send) -> None:
        await send_json(send, 413, {"detail": f"body: larger than {self.max_body} bytes (SERVE_MAX_BODY_BYTES)",
                                    "field": "body"})

    @staticmethod
    async def _busy(send: Send, retry_after_s: int) -> None:
        await send_json(send, 429, {"detail": f"busy: every run slot is taken; retry after {retry_after_s} s"},
                        {"retry-after": str(retry_after_s)})

    def _account(self, scope: Scope, info: RequestInfo, status: int, seconds: float) -> None:
        metrics = self.service.metrics
        metrics.requests.labels(info.route, scope["method"], str(status)).inc()
        if info.caller is not None:
            metrics.client_requests.labels(info.caller.name).inc()
        metrics.latency.labels(info.route).observe(seconds)
        # One line per request: no keys, no question or document text (the route template, not the path).
        access_log.info(json.dumps({
            "ts": round(time.time(), 3), "request_id": info.request_id, "method": scope["method"],
            "route": info.route, "status": status, "duration_ms": round(seconds * 1000, 1),
            "client": info.caller.name if info.caller else None,
            "degradations": info.degradations, "partial": info.partial,
            **({"client_left": True} if status == CLIENT_LEFT else {})}))


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the buffered body to the route once, then waits for the client to go."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
