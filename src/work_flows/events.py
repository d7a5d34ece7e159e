"""The QueryWorkflow's events. Each says what just happened; `QueryRun` (run.py) is the state a run carries."""

from __future__ import annotations

from typing import Any

from workflows.events import Event, StartEvent

from ..core.plan import Plan
from ..core.result import Source, Verification, WrittenAnswer
from .run import QueryRun


class QueryStarted(StartEvent):
    """`run(query=..., history=None, plan=None)`; the plan step checks every field."""

    query: Any = None
    history: Any = None
    plan: Plan | None = None


class PlanReady(Event):
    run: QueryRun


class LayerQueued(Event):
    """A layer of the DAG to search for the first time."""

    run: QueryRun
    layer_index: int


class RetryQueued(Event):
    """The critic sent these subqueries of the layer back for a wider search."""

    run: QueryRun
    layer_index: int
    subquery_ids: list[str]


class BacktrackQueued(Event):
    """Verification found unsupported sentences: the subqueries behind them are searched again, once."""

    run: QueryRun
    subquery_ids: list[str]


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


class EvidenceJudged(Event):
    """The kept passages answer the question well enough to write from (answerability.py)."""

    run: QueryRun
    sources: list[Source]


class AnswerDrafted(Event):
    run: QueryRun
    sources: list[Source]
    answer: WrittenAnswer


class VerificationDone(Event):
    verification: Verification
