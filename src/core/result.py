"""QueryResult and the records it is made of: what dagrag did for one question, all of it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr

from .diagram import DagNode, plan_mermaid
from .plan import ExecutedPlan

Confidence = Literal["high", "mid", "low"]
SubqueryStatus = Literal["covered", "uncovered", "failed", "skipped"]


class LLMCallRecord(BaseModel):
    """One attempt at one LLM call (a retried call has a record per attempt)."""

    agent: str
    ok: bool
    seconds: float
    attempt: int = Field(1, description="1 for the first try of a call, 2 for its first retry, ...")
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None


class Degradation(BaseModel):
    """An agent that could not do its job the configured way, and what took over."""

    agent: str
    reason: str
    fallback: str


@dataclass(frozen=True)
class LLMCallProgress:
    """How far one attempt at an LLM call has got: at its start, every ~0.5 s while it streams, and when done."""

    agent: str
    tokens: int  # received so far: streamed chunks, or the server's completion tokens once done
    seconds: float  # since the attempt started
    done: bool = False
    ok: bool = True  # False: this attempt failed (done is then True as well)
    attempt: int = 1


ProgressListener = Callable[[LLMCallProgress], None]
logger = logging.getLogger("dagrag.ledger")


class RunLedger(BaseModel):
    """Per-run accounting that agents append to (one ledger per run: runs never share one).

    A progress listener (`listen`, `listening`) is told how each LLM call advances; while one is attached the
    LLM client streams its calls. The listener is not part of the record: it is not serialised."""

    llm_calls: list[LLMCallRecord] = Field(default_factory=list)
    degradations: list[Degradation] = Field(default_factory=list)
    _listener: ProgressListener | None = PrivateAttr(default=None)

    def degrade(self, agent: str, reason: str, fallback: str) -> None:
        self.degradations.append(Degradation(agent=agent, reason=reason, fallback=fallback))

    def listen(self, listener: ProgressListener | None) -> None:
        """Attach the progress listener (None detaches it)."""
        self._listener = listener

    @contextmanager
    def listening(self, listener: ProgressListener) -> Iterator[None]:
        """`listener` hears the LLM calls made inside the block; the one before it is back afterwards."""
        previous, self._listener = self._listener, listener
        try:
            yield
        finally:
            self._listener = previous

    @property
    def has_listener(self) -> bool:
        return self._listener is not None

    def report(self, progress: LLMCallProgress) -> None:
        """Tell the listener, if any; a failing listener is logged, never fails the call it hears about."""
        if self._listener is None:
            return
        try:
            self._listener(progress)
        except Exception:
            logger.exception("the LLM progress listener failed")


class Source(BaseModel):
    """A passage handed to the writer; `[n]` in the answer cites `sources[n-1]`."""

    node_id: str
    text: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    score: float = Field(description="Reranker probability of relevance to its subquery.")
    subquery_id: str
    rank_in_subquery: int = Field(description="1 = the subquery's best document.")
    subquery_ids: list[str] = Field(default_factory=list, description="Every subquery that kept it.")


class SubqueryReport(BaseModel):
    id: str
    text: str
    layer: int
    status: SubqueryStatus
    searched_as: str | None = Field(None, description="The query behind the best document (`{sN}` filled in).")
    attempts: int = Field(1, description="Searches run: more than 1 when the critic retried it.")
    best_score: float | None = None
    candidates: int = 0
    kept_node_ids: list[str] = Field(default_factory=list)
    error: str | None = None


class SentenceCheck(BaseModel):
    sentence: str
    citations: list[int] = Field(default_factory=list)
    supported: bool
    supporting_source: int | None = Field(None, description="1-based source number that supports it.")
    score: float | None = None
    unknown_citations: list[int] = Field(default_factory=list, description="Cited numbers with no source.")
    method: str
    reason: str | None = None


class Verification(BaseModel):
    sentences: list[SentenceCheck] = Field(default_factory=list)
    supported_count: int = 0
    support_rate: float | None = None
    method: str = "none"


class LLMUsage(BaseModel):
    count: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    calls: list[LLMCallRecord] = Field(default_factory=list)


class WrittenAnswer(BaseModel):
    """What a writer returns: the cited answer, and the answer in a few words when it gave one."""

    text: str
    concise: str | None = None
    abstain_reason: str | None = Field(
        None, description="Set when the answer says the collection does not answer the question, and why.")
    declined: bool = Field(
        False, description="The writer read the sources and said they do not answer the question (an LLM's "
        "\"Answer: unknown\"); the workflow decides whether the run abstains.")


class QueryResult(BaseModel):
    question: str
    answer: str
    concise_answer: str | None = Field(
        None, description="The answer in a few words (a name, date, number, yes or no) when the writer gave one; "
        "the offline writer does not.")
    sources: list[Source] = Field(default_factory=list)
    plan: ExecutedPlan
    subqueries: list[SubqueryReport] = Field(default_factory=list)
    retrieval_confidence: Confidence
    retrieval_confidence_features: dict[str, float] = Field(default_factory=dict)
    verification: Verification = Field(default_factory=Verification)
    timings: dict[str, float] = Field(default_factory=dict)
    llm_calls: LLMUsage = Field(default_factory=LLMUsage)
    degradations: list[Degradation] = Field(default_factory=list)
    path: Literal["dag", "single"] = "dag"
    backtracked_subqueries: list[str] = Field(
        default_factory=list, description="Subqueries searched again because the answer's sentences on them failed.")
    abstained: bool = Field(
        False, description="No kept passage answers the question: the answer says so and names the closest sources.")
    abstain_reason: str | None = None
    partial: bool = Field(False, description="The query deadline passed: this is what was found by then.")
    partial_reason: str | None = None

    def best_source_of(self, subquery_id: str) -> Source | None:
        """The subquery's best kept document among the sources (its rank 1, else its best-ranked one)."""
        own = [s for s in self.sources if s.subquery_id == subquery_id or subquery_id in s.subquery_ids]
        return min(own, key=lambda s: (s.subquery_id != subquery_id, s.rank_in_subquery), default=None)

    def mermaid(self) -> str:
        """The executed plan as a Mermaid flowchart: each subquery with its status, best title and score, parent
        edges, one band per layer (`dagrag query --mermaid`; Open WebUI and GitHub render it)."""
        reports = {report.id: report for report in self.subqueries}
        nodes = []
        for sq in self.plan.subqueries:
            report = reports.get(sq.id)
            best = self.best_source_of(sq.id)
            nodes.append(DagNode(
                id=sq.id, text=sq.text, parents=list(sq.parents), status=report.status if report else "not_run",
                best_title=str(best.metadata.get("title") or "") or None if best else None,
                best_score=report.best_score if report else None,
                searched_as=report.searched_as if report else None))
        return plan_mermaid(nodes, self.plan.layers)
