"""The QueryWorkflow's events. Each says what just happened; `QueryRun` is the state one run carries."""

from __future__ import annotations

import time
from typing import Any

from llama_index.core.schema import NodeWithScore
from pydantic import BaseModel, ConfigDict, Field
from workflows.events import Event, StartEvent

from .plan import ExecutedPlan, Plan
from .result import RunLedger, Source, SubqueryReport, Verification


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
    deadline: float = float("inf")
    partial_reason: str | None = None

    def __repr__(self) -> str:
        # The workflow runtime summarises every step's input and output event with repr(); the default
        # pydantic repr of a run (plan, every candidate node) costs milliseconds per query.
        return f"QueryRun(question={self.question[:60]!r}, subqueries={len(self.plan.subqueries)}, " \
               f"ranked={len(self.ranked)})"

    def add_time(self, stage: str, seconds: float) -> None:
        self.timings[stage] = round(self.timings.get(stage, 0.0) + seconds, 4)

    def time_left(self) -> float:
        return self.deadline - time.perf_counter()

    def out_of_time(self, stage: str) -> bool:
        """True once the deadline has passed; the first stage to notice records why the result is partial."""
        if self.time_left() > 0:
            return False
        self.partial_reason = self.partial_reason or f"query deadline passed during {stage}"
        return True


class QueryStarted(StartEvent):
    query: Any = None
    history: list[str] | None = None
    plan: Plan | None = None


class PlanReady(Event):
    run: QueryRun


class LayerQueued(Event):
    """A layer to search; a retry names the subqueries the critic sent back."""

    run: QueryRun
    layer_index: int
    retry_ids: list[str] = Field(default_factory=list)
    backtrack: bool = False


class LayerStarted(Event):
    layer_index: int
    subquery_ids: list[str]


class SubqueryDone(Event):
    subquery_id: str
    status: str
    best_score: float | None = None
    best_title: str | None = None


class LayerSearched(Event):
    run: QueryRun
    layer_index: int


class LayerAccepted(Event):
    run: QueryRun
    layer_index: int


class EvidenceGathered(Event):
    run: QueryRun
    sources: list[Source]


class AnswerDrafted(Event):
    run: QueryRun
    sources: list[Source]
    answer: str


class VerificationDone(Event):
    verification: Verification
