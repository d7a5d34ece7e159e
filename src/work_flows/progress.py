"""The progress events a QueryWorkflow writes to its stream: small, JSON-serialisable summaries.

The events that drive the workflow (events.py) carry the whole `QueryRun` (deadlines on the process's
perf_counter clock, every candidate node); a client watching a run (`handler.stream_events()`, the
WorkflowServer's `/events/{handler_id}`, `dagrag serve`'s SSE) gets these summaries instead. Streamed
in order: LLMProgress… of the planner's call, PlanChosen, then per layer LayerStarted (LLMProgress… of the
resolver's and HyDE's calls), SubqueryDone…, LayerDone (again for critic retries), HopAdded before a layer an
offline bridge chain grew (hopping/deeper.py), then LLMProgress… of the writer's calls, AnswerWritten,
LLMProgress… of the verifier's call and VerificationDone (again after a backtrack). Each LLM call's attempt
streams LLMProgress at its start, about every 0.5 s while its reply arrives, and once done. The full record is
the QueryResult.
"""

from __future__ import annotations

from pydantic import BaseModel, Field
from workflows.events import Event

from ..core.result import LLMCallProgress, Source
from ..core.sources import source_title
from .run import QueryRun


class PlannedSubquery(BaseModel):
    id: str
    text: str
    parents: list[str] = Field(default_factory=list)


class PlanChosen(Event):
    """The plan the run executes, and how it was obtained."""

    question: str
    query: str = Field(description="The standalone question the plan answers (history folded in).")
    origin: str = Field(description="llm, repaired, offline, fallback or given.")
    path: str = Field(description="dag, or single (one subquery).")
    subqueries: list[PlannedSubquery] = Field(default_factory=list)
    layers: list[list[str]] = Field(default_factory=list)

    @classmethod
    def of(cls, run: QueryRun) -> PlanChosen:
        plan = run.plan
        return cls(question=run.question, query=plan.query, origin=plan.origin.value, path=run.path,
                   subqueries=[PlannedSubquery(id=sq.id, text=sq.text, parents=list(sq.parents))
                               for sq in plan.subqueries],
                   layers=[list(layer) for layer in plan.layers])


class LLMProgress(Event):
    """How far one attempt at an LLM call has got: at its start, about every 0.5 s while the reply streams in,
    and once done (then `tokens` is the server's count of completion tokens, when it gave one)."""

    agent: str = Field(description="planner, writer, verifier, resolver, hyde, subanswer or aggregator.")
    tokens: int = Field(description="Tokens received so far (streamed chunks).")
    seconds: float = Field(description="Since the attempt started.")
    done: bool = False
    ok: bool = Field(True, description="False: this attempt failed (it may be retried).")
    attempt: int = Field(1, description="1 for the first try of a call, 2 for its first retry, ...")

    @classmethod
    def of(cls, progress: LLMCallProgress) -> LLMProgress:
        return cls(agent=progress.agent, tokens=progress.tokens, seconds=round(progress.seconds, 2),
                   done=progress.done, ok=progress.ok, attempt=progress.attempt)


class HopAdded(Event):
    """The plan grew after its last layer: one more hop of an offline bridge chain, and why."""

    subquery: PlannedSubquery
    reason: str = Field(description="Why the question still needed a hop (the plan's note).")
    layers: list[list[str]] = Field(default_factory=list, description="The plan's layers with the new hop.")

    @classmethod
    def of(cls, run: QueryRun, hop_id: str) -> HopAdded:
        [hop] = [sq for sq in run.plan.subqueries if sq.id == hop_id]
        reason = next((note for note in reversed(run.plan.notes) if note.startswith(f"{hop_id} added")), "")
        return cls(subquery=PlannedSubquery(id=hop.id, text=hop.text, parents=list(hop.parents)), reason=reason,
                   layers=[list(layer) for layer in run.plan.layers])


class SubqueryOutcome(BaseModel):
    id: str
    status: str
    best_score: float | None = None
    best_title: str | None = None
    searched_as: str | None = None
    attempts: int = 0


class LayerDone(Event):
    """A layer (or a critic retry of some of its subqueries) was searched and reranked."""

    layer_index: int
    subqueries: list[SubqueryOutcome] = Field(default_factory=list)

    @classmethod
    def of(cls, run: QueryRun, layer_index: int) -> LayerDone:
        outcomes = []
        for sq_id in run.plan.layers[layer_index]:
            report = run.reports.get(sq_id)
            if report is None:
                continue
            best = run.ranked.get(sq_id) or []
            outcomes.append(SubqueryOutcome(
                id=sq_id, status=report.status, best_score=report.best_score, searched_as=report.searched_as,
                best_title=str(best[0].node.metadata.get("title", "")) if best else None, attempts=report.attempts))
        return cls(layer_index=layer_index, subqueries=outcomes)


class CitedSource(BaseModel):
    number: int = Field(description="`[number]` in the answer.")
    title: str
    subquery_id: str
    score: float


class AnswerWritten(Event):
    """The writer's answer (before verification) and the sources its `[n]` cite, by title."""

    answer: str
    sources: list[CitedSource] = Field(default_factory=list)

    @classmethod
    def of(cls, answer: str, sources: list[Source]) -> AnswerWritten:
        return cls(answer=answer, sources=[
            CitedSource(number=n, title=source_title(source), subquery_id=source.subquery_id, score=source.score)
            for n, source in enumerate(sources, start=1)])
