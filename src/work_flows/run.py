"""QueryRun, the state one run carries from event to event, and the run deadline."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable
from typing import TypeVar

from llama_index.core.schema import NodeWithScore
from pydantic import BaseModel, ConfigDict, Field

from ..core.names import KnownNames
from ..core.plan import ExecutedPlan, SubQuery
from ..core.result import RunLedger, SubqueryReport

T = TypeVar("T")


class QueryRun(BaseModel):
    """Everything one run has learned so far. Owned by that run alone, passed from event to event."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    question: str
    plan: ExecutedPlan
    path: str = "dag"
    started_at: float = Field(default_factory=time.perf_counter)
    ledger: RunLedger = Field(default_factory=RunLedger)
    timings: dict[str, float] = Field(default_factory=dict)
    reports: dict[str, SubqueryReport] = Field(default_factory=dict)
    ranked: dict[str, list[NodeWithScore]] = Field(default_factory=dict, description="Reranked, best first.")
    searched_as: dict[str, str] = Field(default_factory=dict, description="Query text behind each best document.")
    attempts: dict[str, int] = Field(default_factory=dict, description="Searches run per subquery.")
    rewritten: dict[str, str] = Field(default_factory=dict, description="LLM rewrites of `{sN}` subqueries.")
    hyde: dict[str, str] = Field(default_factory=dict, description="Hypothetical passages per subquery.")
    backtracked: list[str] = Field(default_factory=list, description="Subqueries re-searched after verification.")
    skipped_hops: dict[str, str] = Field(
        default_factory=dict, description="Bridge hops the hop rule did not search, and why (hopping/skip.py).")
    idle_hops: dict[str, str] = Field(
        default_factory=dict, description="Deeper bridge hops that added nothing, and why (hopping/deeper.py).")
    deadline: float | None = Field(
        None, description="When the run must end, on the process's perf_counter clock; None: no deadline.")
    partial_reason: str | None = None
    known_names: KnownNames = Field(
        default_factory=KnownNames,
        description="The names the collection knows (titles, headings), what hops follow; and the words its passages "
                    "hold, what a hop can find.")

    def __repr__(self) -> str:
        # The workflow runtime summarises every step's input and output event with repr(); the default
        # pydantic repr of a run (plan, every candidate node) costs milliseconds per query.
        return f"QueryRun(question={self.question[:60]!r}, subqueries={len(self.plan.subqueries)}, " \
               f"ranked={len(self.ranked)})"

    def subqueries(self, ids: list[str]) -> list[SubQuery]:
        by_id = {sq.id: sq for sq in self.plan.subqueries}
        return [by_id[i] for i in ids]

    def layer_of(self, subquery_id: str) -> int:
        return next(i for i, layer in enumerate(self.plan.layers) if subquery_id in layer)

    def reranked(self) -> bool:
        """Whether the run's scores are the cross-encoder's probabilities: it did not fail (or run out of time) and
        leave the search's order standing."""
        return not any(d.agent == "reranker" for d in self.ledger.degradations)

    def add_time(self, stage: str, seconds: float) -> None:
        self.timings[stage] = round(self.timings.get(stage, 0.0) + seconds, 4)

    def time_left(self) -> float:
        return math.inf if self.deadline is None else self.deadline - time.perf_counter()

    def out_of_time(self) -> bool:
        return self.time_left() <= 0

    def record_partial(self, stage: str) -> None:
        """The result is partial: the deadline passed during `stage` (the first stage to notice says so)."""
        self.partial_reason = self.partial_reason or f"query deadline passed during {stage}"


async def before_deadline(deadline: float | None, work: Awaitable[T]) -> T | None:
    """`work`'s result, or None if the deadline passes first (its own timeouts still raise). No deadline: `work`."""
    if deadline is None:
        return await work
    left = deadline - time.perf_counter()
    if left <= 0:
        if asyncio.iscoroutine(work):
            work.close()
        return None
    try:
        return await asyncio.wait_for(work, timeout=left)
    except TimeoutError:
        if deadline - time.perf_counter() > 0:
            raise
        return None
