"""What the routes run: the stack built once, the workflows over it, the run slots and the readiness probe.

One process serves every client, so everything here is shared between concurrent requests: the models,
the Qdrant client, the agents and the workflow instances (a QueryWorkflow keeps per-run state in its
events, so one instance serves concurrent runs). Per-request state lives in the request only.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..core.errors import CollectionNotFoundError
from ..core.plan import ExecutedPlan
from ..core.result import QueryResult, RunLedger, Source, Verification, WrittenAnswer
from ..stack import Agents, build_agents, build_embed_model, build_searcher
from ..work_flows.query_workflow import QueryWorkflow
from .metrics import ServerMetrics

if TYPE_CHECKING:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.llms import LLM
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from workflows import Context
    from workflows.events import StartEvent
    from workflows.handler import WorkflowHandler

    from ..agents.reranker import PairScorer, RerankerAgent

# Workflows over (collection, k) for /search are built on first use and kept; a bound keeps a client that
# asks for every k from 1 to 100 from growing the cache without end.
SEARCH_WORKFLOW_CACHE = 64

logger = logging.getLogger("dagrag.server")


class RunSlotsBusy(Exception):
    """Every run slot stayed busy for SERVE_QUEUE_WAIT_S; the client should come back after `retry_after_s`."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"all run slots are busy; retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


class RunSlots:
    """At most `limit` runs at once; up to `max_queue` more requests wait for a slot, each up to `wait_s`. A request
    that finds the queue full, or waits out `wait_s`, is refused (429) with a Retry-After computed from the queue
    ahead of it and how long runs have lately taken.

    Releasing never awaits: a response torn down by a client's disconnect runs its cleanup inside a cancelled
    task (anyio cancels every later await there), and a release that awaited would leak the slot.
    """

    def __init__(self, limit: int, wait_s: float, metrics: ServerMetrics, max_queue: int = 64) -> None:
        self.limit = limit
        self.wait_s = wait_s
        self.max_queue = max_queue
        self.metrics = metrics
        self.in_flight = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._watchers: set[asyncio.Task[None]] = set()
        self._recent_run_s = 1.0  # moving average of run durations: what Retry-After promises

    def retry_after_s(self) -> int:
        """Seconds until a slot is likely free for one more request: the queue ahead of it, `limit` at a time."""
        rounds = (len(self._waiters) + 1) / self.limit
        return max(1, math.ceil(rounds * self._recent_run_s))

    def has_room(self) -> bool:
        return self.in_flight < self.limit

    async def acquire(self) -> None:
        """Take a slot, waiting up to `wait_s`; RunSlotsBusy if none came free."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_s
        if not self.has_room() and len(self._waiters) >= self.max_queue:
            self.metrics.rejected.inc()
            raise RunSlotsBusy(self.retry_after_s())  # the queue is full: waiting would only lengthen it
        while not self.has_room():
            left = deadline - loop.time()
            if left <= 0:
                self.metrics.rejected.inc()
                raise RunSlotsBusy(self.retry_after_s())
            woken: asyncio.Future[None] = loop.create_future()
            self._waiters.append(woken)
            try:
                await asyncio.wait_for(woken, timeout=left)
            except (TimeoutError, asyncio.TimeoutError):
                pass  # the loop checks for room once more before refusing
            finally:
                if woken in self._waiters:
                    self._waiters.remove(woken)
        self.in_flight += 1
        self.metrics.runs_in_flight.inc()

    def release(self, run_seconds: float) -> None:
        self._recent_run_s = 0.8 * self._recent_run_s + 0.2 * run_seconds
        self.in_flight -= 1
        self.metrics.runs_in_flight.dec()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                break

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        await self.acquire()
        started = time.perf_counter()
        try:
            yield
        finally:
            self.release(time.perf_counter() - started)

    def release_when_done(self, handler: WorkflowHandler[Any]) -> None:
        """Free a slot taken for `handler`'s run when that run ends, however it ends (result, error, cancel)."""
        started = time.perf_counter()

        async def watch() -> None:
            try:
                await handler
            except BaseException:  # the run's outcome is its handler's business: only its end matters here
                pass
            finally:
                self.release(time.perf_counter() - started)

        task = asyncio.get_running_loop().create_task(watch())
        self._watchers.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._watchers.discard)


class SlotGrant:
    """A run slot a request to the WorkflowServer took before its run exists; the run takes it over.

    A WorkflowServer run outlives its request (`run-nowait` returns at once; `run` goes on if the client leaves),
    so the slot follows the run: `ServedQueryWorkflow.run` claims the grant of the request that started it, and
    the slot comes free when the run ends. A request that started no run (refused by the WorkflowServer) gives
    its slot back when it ends.
    """

    def __init__(self, slots: RunSlots) -> None:
        self.slots = slots
        self.started = time.perf_counter()
        self.claimed = False

    def hand_to(self, handler: WorkflowHandler[Any]) -> None:
        if not self.claimed:
            self.claimed = True
            self.slots.release_when_done(handler)

    def release_unclaimed(self) -> None:
        if not self.claimed:
            self.claimed = True
            self.slots.release(time.perf_counter() - self.started)


# The grant of the request now calling into the WorkflowServer: set by the middleware around the call, read by
# ServedQueryWorkflow.run, which the WorkflowServer calls in that same task.
PENDING_SLOT: ContextVar[SlotGrant | None] = ContextVar("dagrag_pending_slot", default=None)


class ServedQueryWorkflow(QueryWorkflow):
    """The QueryWorkflow the WorkflowServer drives: each run holds the run slot its request took until it ends."""

    def run(self, ctx: Context | None = None, start_event: StartEvent | None = None,
            **kwargs: Any) -> WorkflowHandler[Any]:
        handler = super().run(ctx=ctx, start_event=start_event, **kwargs)
        grant = PENDING_SLOT.get()
        if grant is not None:
            grant.hand_to(handler)
        return handler


class EvidenceOnlyWriter:
    """/search returns evidence, not an answer: the writer role does nothing (no LLM call, no sentences)."""

    async def awrite(self, question: str, plan: ExecutedPlan, sources: list[Source], ledger: RunLedger
                     ) -> WrittenAnswer:
        return WrittenAnswer(text="")

    def lead_sentences(self, sources: list[Source]) -> str:
        return ""


class SkippedVerifier:
    """Nothing to verify without an answer (and so no verification backtracking either)."""

    async def averify(self, answer: str, sources: list[Source], ledger: RunLedger) -> Verification:
        return Verification(method="skipped: retrieval only")


class DagragService:
    """The stack behind every route: built once at startup from Settings (any part can be passed in)."""

    def __init__(self, settings: Settings, agents: Agents, embed_model: BaseEmbedding) -> None:
        self.settings = settings
        self.agents = agents
        self.embed_model = embed_model
        self.metrics = ServerMetrics()
        self.slots = RunSlots(settings.serve_max_runs, settings.serve_queue_wait_s, self.metrics,
                              max_queue=settings.serve_max_queue)
        self.query_workflow = QueryWorkflow(**vars(agents), settings=settings)
        # WorkflowServer drives its own instance: it wraps runs in its runtime (persisted ticks, handlers).
        self.served_workflow = ServedQueryWorkflow(**vars(agents), settings=settings)
        self._searchers: dict[str, Any] = {settings.collection: agents.searcher}
        self._search_workflows: OrderedDict[tuple[str, int], QueryWorkflow] = OrderedDict()
        self._building = asyncio.Lock()

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        llm: LLM | None = None,
        embed_model: BaseEmbedding | None = None,
        reranker: RerankerAgent | PairScorer | None = None,
        vector_store: QdrantVectorStore | None = None,
    ) -> DagragService:
        """Loads the models and opens Qdrant (seconds); raises CollectionNotFoundError / QdrantUnavailableError."""
        embed_model = embed_model or build_embed_model(settings.embed_model, settings.embed_batch_size)
        agents = build_agents(settings, llm=llm, embed_model=embed_model, reranker=reranker,
                              vector_store=vector_store)
        return cls(settings, agents, embed_model)

    async def search_workflow(self, collection: str, k: int) -> QueryWorkflow:
        """The retrieval-only workflow over `collection` keeping `k` passages; CollectionNotFoundError if absent."""
        key = (collection, k)
        async with self._building:
            workflow = self._search_workflows.get(key)
            if workflow is not None:
                self._search_workflows.move_to_end(key)
                return workflow
            base = self.settings
            settings = base.model_copy(update={
                "collection": collection, "context_budget": k,
                # every subquery keeps enough candidates for k passages to exist
                "subquery_topk_base": max(base.subquery_topk_base, min(k, 50))})
            searcher = self._searchers.get(collection)
            if searcher is None:
                searcher = await asyncio.to_thread(build_searcher, settings, embed_model=self.embed_model)
                self._searchers[collection] = searcher
            agents = self.agents
            workflow = QueryWorkflow(planner=agents.planner, searcher=searcher, reranker=agents.reranker,
                                     writer=EvidenceOnlyWriter(), verifier=SkippedVerifier(),
                                     resolver=agents.resolver, hyde=agents.hyde, settings=settings)
            self._search_workflows[key] = workflow
            if len(self._search_workflows) > SEARCH_WORKFLOW_CACHE:
                self._search_workflows.popitem(last=False)
            return workflow

    def prepare(self) -> None:
        """Read the embedded store's vectors before the first query (seconds per 100k passages); a failure is
        logged, and the first search reports it."""
        prepare = getattr(self.agents.searcher, "prepare", None)
        if prepare is None:
            return
        try:
            points = prepare()
        except Exception as error:
            logger.warning("could not read the collection's vectors at startup: %s", error)
            return
        if points:
            logger.info("read %d passages' vectors of collection %r", points, self.settings.collection)

    async def check_ready(self) -> str | None:
        """None when Qdrant answers and the collection exists; else the reason, for a 503."""
        client = getattr(getattr(self.agents.searcher, "vector_store", None), "client", None)
        if client is None:
            return None  # a searcher that is not Qdrant's: nothing this server can probe
        try:
            exists = await asyncio.wait_for(asyncio.to_thread(client.collection_exists, self.settings.collection),
                                            timeout=self.settings.qdrant_timeout_s)
        except Exception as error:
            # Names neither the folder nor the URL: a probe's answer is public; the log has the place.
            logger.warning("Qdrant at %s does not answer: %s", self.settings.qdrant_location(), error)
            return f"the vector store does not answer ({type(error).__name__})"
        if not exists:
            return f"collection {self.settings.collection!r} does not exist; run dagrag ingest PATH"
        return None

    def record(self, result: QueryResult) -> list[str]:
        """Count the run in the metrics; the agents that degraded (a failed search counts as the searcher's)."""
        self.metrics.observe_result(result)
        failed = [r.id for r in result.subqueries if r.status == "failed"]
        for _ in failed:
            self.metrics.degradations.labels("searcher").inc()
        return [d.agent for d in result.degradations] + (["searcher"] if failed else [])


def missing_collection(name: str, settings: Settings) -> CollectionNotFoundError:
    return CollectionNotFoundError(f"collection {name!r} does not exist at {settings.qdrant_location()}",
                                   collection=name)
