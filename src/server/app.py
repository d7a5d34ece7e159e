"""The ASGI app of `dagrag serve`: dagrag's routes, LlamaIndex's WorkflowServer beside them, one middleware.

    GET  /health              liveness (no key)
    GET  /health/ready        Qdrant answers and the collection exists, else 503 with the reason
    GET  /metrics             Prometheus
    POST /search              Open WebUI external retrieval: the DAG's evidence per query
    POST /query               the QueryResult
    POST /query/stream        progress events, then the QueryResult, as server-sent events
    *    /workflows/dagrag/…, /events/…, /handlers/…   WorkflowServer's routes, the QueryWorkflow named `dagrag`

No CORS headers unless SERVE_CORS_ORIGINS names origins (WorkflowServer's own default, any origin with
credentials, is replaced).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

from llama_agents.server import WorkflowServer
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send
from workflows.errors import WorkflowTimeoutError

from ..core.errors import (
    CollectionNotFoundError,
    DagragError,
    IngestError,
    InvalidQuestionError,
    QdrantUnavailableError,
)
from ..core.inputs import check_history, check_question
from ..core.result import QueryResult, Source, SubqueryReport
from ..work_flows.events import LayerStarted, SubqueryDone, VerificationDone
from ..work_flows.progress import AnswerWritten, HopAdded, LayerDone, LLMProgress, PlanChosen
from .metrics import CONTENT_TYPE
from .middleware import WORKFLOW_NAME, ServerMiddleware, request_info
from .openapi import openapi_document
from .runs_db import run_owners, runs_store
from .schemas import BadRequest, QueryBody, SearchBody, parse_body
from .service import DagragService, RunSlotsBusy, missing_collection

logger = logging.getLogger("dagrag.server")

PROGRESS_EVENTS = (PlanChosen, LayerStarted, SubqueryDone, LayerDone, HopAdded, AnswerWritten, VerificationDone,
                   LLMProgress)
Handler = Callable[[Request], Awaitable[Response]]


class PassThrough:
    """A middleware that does nothing: WorkflowServer adds permissive CORS unless given a non-empty list."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def create_app(service: DagragService) -> ASGIApp:
    """The whole server as one ASGI app over a built stack (`DagragService.from_settings(settings)`)."""
    # WorkflowServer's default middleware lets any web page call it with credentials; CORS is ours (below).
    workflow_server = WorkflowServer(middleware=[Middleware(PassThrough)], workflow_store=runs_store(service.settings))
    workflow_server.add_workflow(WORKFLOW_NAME, service.served_workflow)
    owners = run_owners(service.settings)  # who started each run, beside the runs (SERVE_RUNS_DB)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # A mounted app's own lifespan does not run: start the WorkflowServer's runtime here.
        await owners.start()
        await asyncio.to_thread(service.prepare)  # the embedded store's vectors, read before the first query
        try:
            async with workflow_server.contextmanager():
                yield
        finally:
            await owners.close()

    schema = openapi_document(workflow_server)  # built once: the routes and models do not change while serving

    async def openapi(request: Request) -> Response:
        return JSONResponse(schema)

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/health/ready", guarded(ready, service), methods=["GET"]),
        Route("/metrics", guarded(metrics, service), methods=["GET"]),
        Route("/search", guarded(search, service), methods=["POST"]),
        Route("/query", guarded(query, service), methods=["POST"]),
        Route("/query/stream", guarded(query_stream, service), methods=["POST"]),
        Mount("/", app=workflow_server.app),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.service = service
    app.state.workflow_server = workflow_server
    served: ASGIApp = ServerMiddleware(app, service, owners)
    origins = service.settings.serve_cors_origins
    if origins:
        # Outside the key check: a browser's preflight (OPTIONS) never carries the Authorization header.
        # Bearer keys, not cookies, so no credentials mode.
        served = CORSMiddleware(served, allow_origins=origins, allow_methods=["GET", "POST"],
                                allow_headers=["Authorization", "Content-Type", "X-Request-ID", "Last-Event-ID"],
                                expose_headers=["X-Request-ID", "Retry-After"], max_age=600)
    return served


def guarded(route: Callable[[Request, DagragService], Awaitable[Response]], service: DagragService) -> Handler:
    """The route with its errors turned into responses that say what went wrong (a trace goes to the log only)."""

    async def handle(request: Request) -> Response:
        try:
            return await route(request, service)
        except BadRequest as error:
            return JSONResponse(error.body(), status_code=error.status)
        except RunSlotsBusy as busy:
            return busy_response(busy)
        except Exception as error:
            return error_response(error, request)

    return handle


def busy_response(busy: RunSlotsBusy) -> JSONResponse:
    return JSONResponse({"detail": f"busy: every run slot is taken; retry after {busy.retry_after_s} s"},
                        status_code=429, headers={"Retry-After": str(busy.retry_after_s)})


def error_status(error: BaseException) -> int:
    if isinstance(error, InvalidQuestionError):
        return 422
    if isinstance(error, CollectionNotFoundError):
        return 404
    if isinstance(error, IngestError):
        return 409  # the collection exists but was built with another embedding model
    if isinstance(error, QdrantUnavailableError):
        return 503
    if isinstance(error, WorkflowTimeoutError | asyncio.TimeoutError | TimeoutError):
        return 504
    return 500


def error_response(error: Exception, request: Request) -> JSONResponse:
    status = error_status(error)
    request_id = request_info(request.scope).request_id
    if status == 500:
        logger.error("request %s failed", request_id, exc_info=error)
        return JSONResponse({"detail": f"internal error ({type(error).__name__}); request id {request_id}"},
                            status_code=500)
    message = public_message(error)
    return JSONResponse({"detail": message}, status_code=status)


def public_message(error: Exception) -> str:
    """What a client may read: never the store's folder or URL (the log has them)."""
    if isinstance(error, CollectionNotFoundError):
        name = f"collection {error.collection!r}" if error.collection else "the collection"
        return f"{name} does not exist on this server; ingest documents into it first"
    if isinstance(error, QdrantUnavailableError):
        logger.warning("vector store unavailable: %s", error)
        return "the vector store is unavailable (the search failed); see /health/ready and the server log"
    return str(error) if isinstance(error, DagragError) else f"the query timed out ({error})"


# --- routes ------------------------------------------------------------------------------------------

async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def ready(request: Request, service: DagragService) -> Response:
    problem = await service.check_ready()
    if problem:
        return JSONResponse({"status": "unavailable", "reason": problem}, status_code=503)
    return JSONResponse({"status": "ready", "collection": service.settings.collection})


async def metrics(request: Request, service: DagragService) -> Response:
    return Response(service.metrics.render(), media_type=CONTENT_TYPE)


def checked_question(body: QueryBody, limit: int) -> tuple[str, list[str]]:
    try:
        question = check_question(body.question, limit)
    except InvalidQuestionError as error:
        raise BadRequest(422, "question", str(error)) from None
    try:
        history = check_history(body.history_turns(), limit)
    except InvalidQuestionError as error:
        raise BadRequest(422, "history", str(error)) from None
    return question, history


def record(request: Request, service: DagragService, result: QueryResult) -> None:
    info = request_info(request.scope)
    info.degradations.extend(service.record(result))
    info.partial = info.partial or result.partial


async def query(request: Request, service: DagragService) -> Response:
    body: QueryBody = parse_body(QueryBody, await request.body())
    question, history = checked_question(body, service.settings.max_question_chars)
    async with service.slots.hold():
        result: QueryResult = await service.query_workflow.run(query=question, history=history)
    record(request, service, result)
    return JSONResponse(result.model_dump(mode="json"))


def sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


async def query_stream(request: Request, service: DagragService) -> Response:
    """Progress events as they happen, then `event: result` (or `event: error`): text/event-stream."""
    body: QueryBody = parse_body(QueryBody, await request.body())
    question, history = checked_question(body, service.settings.max_question_chars)
    slots = service.slots
    await slots.acquire()  # taken before the 200 goes out, so a full server still answers 429
    started = time.perf_counter()
    released = False

    def release() -> None:  # synchronous: it also runs inside a task cancelled by the client's disconnect
        nonlocal released
        if not released:
            released = True
            slots.release(time.perf_counter() - started)

    async def events() -> AsyncIterator[str]:
        handler = service.query_workflow.run(query=question, history=history)
        try:
            async for event in handler.stream_events():
                if isinstance(event, PROGRESS_EVENTS):
                    yield sse(type(event).__name__, event.model_dump(mode="json"))
            result: QueryResult = await handler
            record(request, service, result)
            yield sse("result", result.model_dump(mode="json"))
        except Exception as error:
            status = error_status(error)
            if status == 500:
                logger.error("stream %s failed", request_info(request.scope).request_id, exc_info=error)
            detail = str(error) if isinstance(error, DagragError) else f"{type(error).__name__}"
            yield sse("error", {"status": status, "detail": detail})
        finally:
            try:
                if not handler.is_done():  # the client went away mid-run: stop it (no await: we may be cancelled)
                    handler.cancel()
            except Exception:
                logger.warning("could not cancel an abandoned run", exc_info=True)
            finally:
                release()

    return SlotStreamingResponse(events(), release, media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


class SlotStreamingResponse(StreamingResponse):
    """Frees its run slot when the response ends, even if the client left before the stream ever started."""

    def __init__(self, content: AsyncIterator[str], release: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()


JSONL_LINE = re.compile(r"^(?P<file>.+\.jsonl)(?P<line>:\d+)$", re.IGNORECASE)


def public_source(source: str) -> str:
    """A passage's `source` as a client may see it: where it is in the documents, not where they sit on the server.

    Ingest names a document by its path inside the ingested folder (the user's own naming: kept) and a JSONL
    record by that and its line (`corpus.jsonl:12`). Collections ingested before that named a JSONL record by
    the path the ingest command was given (`/srv/data/corpus.jsonl:12`): that becomes `corpus.jsonl:12`. Any
    other absolute path (a record's own `source` metadata, say) keeps only its file name.
    """
    jsonl = JSONL_LINE.match(source)
    if jsonl:
        return PureWindowsPath(PurePosixPath(jsonl["file"]).name).name + jsonl["line"]
    if PurePosixPath(source).is_absolute() or PureWindowsPath(source).is_absolute():
        return PureWindowsPath(PurePosixPath(source).name).name
    return source


def evidence_metadata(source: Source, reports: dict[str, SubqueryReport], collection: str) -> dict[str, Any]:
    """The passage's own scalar metadata (title, section, page…; `source` made public) plus where the DAG found it."""
    metadata = {key: value for key, value in source.metadata.items() if isinstance(value, str | int | float | bool)}
    title = str(source.metadata.get("title") or "")
    place = public_source(metadata["source"]) if isinstance(metadata.get("source"), str) else title
    metadata.update({"title": title, "name": metadata.get("name", title), "source": place,
                     "node_id": source.node_id, "subquery_id": source.subquery_id,
                     "rank_in_subquery": source.rank_in_subquery, "score": round(float(source.score), 6),
                     "collection_name": collection})
    report = reports.get(source.subquery_id)
    if report is not None:  # the plan's subquery, and what was searched for it (a hop's `{s1}` filled in)
        metadata.update({"subquery": report.text, "searched_as": report.searched_as or report.text})
    return metadata


async def search(request: Request, service: DagragService) -> Response:
    """Open WebUI external retrieval: one inner list per query, each the DAG's evidence in attribution order."""
    body: SearchBody = parse_body(SearchBody, await request.body())
    questions = []
    for index, (text, history) in enumerate(body.questions()):
        field = f"queries.{index}" if body.queries else "messages"
        try:
            questions.append((check_question(text, service.settings.max_question_chars),
                              check_history(history, service.settings.max_question_chars)))
        except InvalidQuestionError as error:
            raise BadRequest(422, field, str(error)) from None
    workflows = []
    for name in dict.fromkeys(body.collection_names):
        try:
            workflows.append((name, await service.search_workflow(name, body.k)))
        except CollectionNotFoundError:
            raise missing_collection(name, service.settings) from None
    documents: list[list[str]] = []
    metadatas: list[list[dict[str, Any]]] = []
    distances: list[list[float]] = []
    async with service.slots.hold():
        for question, history in questions:
            found: list[tuple[Source, dict[str, Any]]] = []
            failures: list[str] = []
            for name, workflow in workflows:
                result: QueryResult = await workflow.run(query=question, history=history)
                record(request, service, result)
                reports = {report.id: report for report in result.subqueries}
                found += [(s, evidence_metadata(s, reports, name)) for s in result.sources]
                failures += [r.error or "search failed" for r in result.subqueries if r.status == "failed"]
            if not found and failures:
                # Nothing found because the store failed: say so rather than answer "no evidence".
                raise QdrantUnavailableError(f"the search failed ({failures[0]}); see /health/ready")
            if len(workflows) > 1:
                found = sorted(found, key=lambda pair: -pair[0].score)[: body.k]
            documents.append([s.text for s, _ in found])
            metadatas.append([m for _, m in found])
            distances.append([min(1.0, max(0.0, float(s.score))) for s, _ in found])
    return JSONResponse({"documents": documents, "metadatas": metadatas, "distances": distances})
