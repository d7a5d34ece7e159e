"""What a run reports: each subquery's record after a search, and the QueryResult at the end. Pure functions."""

from __future__ import annotations

from ..core.plan import SubQuery
from ..core.result import LLMUsage, QueryResult, Source, SubqueryReport, Verification, WrittenAnswer
from ..core.search import SearchHits
from .evidence import confidence
from .hopping import HopStrategy
from .policy import RetrievalPolicy, kept_per_subquery
from .run import QueryRun


def subquery_report(policy: RetrievalPolicy, hops: HopStrategy, run: QueryRun, sq: SubQuery,
                    outcome: SearchHits | BaseException | None) -> SubqueryReport:
    """The subquery's record: skipped (no search ran), failed (the search raised), else covered or not."""
    layer, attempts = run.layer_of(sq.id), run.attempts.get(sq.id, 1)
    if outcome is None:
        return SubqueryReport(id=sq.id, text=sq.text, layer=layer, status="skipped", attempts=attempts,
                              error=run.partial_reason or "not searched")
    if not isinstance(outcome, SearchHits):
        return SubqueryReport(id=sq.id, text=sq.text, layer=layer, status="failed", attempts=attempts,
                              error=f"{type(outcome).__name__}: {outcome}"[:500])
    ranked = run.ranked.get(sq.id, [])
    best = float(ranked[0].score or 0.0) if ranked else None
    covered = best is not None and best >= policy.coverage_min_score
    kept = 0 if hops.holds_back(run.plan, sq, covered=covered) else kept_per_subquery(policy, run.path)
    return SubqueryReport(
        id=sq.id, text=sq.text, layer=layer, status="covered" if covered else "uncovered",
        searched_as=run.searched_as.get(sq.id), attempts=attempts,
        best_score=round(best, 6) if best is not None else None, candidates=len(ranked),
        kept_node_ids=[h.node.node_id for h in ranked[:kept]])


def record_skipped_hop(policy: RetrievalPolicy, run: QueryRun, sq: SubQuery, reason: str) -> SubqueryReport:
    """Record a bridge hop the hop rule skips (`HopStrategy.skip_reason`): reported as `skipped`, with the reason.

    When no other subquery is left to search, what runs is the single-query path: one search, the whole
    budget; the run's path says so, and the searched subquery's report keeps what that path keeps.
    """
    run.skipped_hops[sq.id] = reason
    report = run.reports[sq.id] = SubqueryReport(id=sq.id, text=sq.text, layer=run.layer_of(sq.id), status="skipped",
                                                 attempts=0, error=reason)
    searched = [other for other in run.plan.subqueries if other.id not in run.skipped_hops]
    if len(searched) == 1:
        run.path = "single"
        left = run.reports.get(searched[0].id)
        if left is not None:
            left.kept_node_ids = [h.node.node_id for h in
                                  run.ranked.get(left.id, [])[:kept_per_subquery(policy, run.path)]]
    return report


def record_search(policy: RetrievalPolicy, hops: HopStrategy, run: QueryRun, sq: SubQuery,
                  results: list[SearchHits | BaseException] | None, *, retry: bool) -> SubqueryReport | None:
    """Count the search and update the subquery's report; None when a failed retry keeps the earlier report.

    `results` are the subquery's search results (one per variant), None when no search ran.
    """
    run.attempts[sq.id] = run.attempts.get(sq.id, 0) + 1
    searched_ok = results is not None and any(isinstance(h, SearchHits) for h in results)
    if retry and not searched_ok and sq.id in run.reports:
        run.reports[sq.id].attempts = run.attempts[sq.id]
        return None
    outcome = None if results is None else (SearchHits() if searched_ok else results[0])
    report = run.reports[sq.id] = subquery_report(policy, hops, run, sq, outcome)
    return report


def build_result(policy: RetrievalPolicy, hops: HopStrategy, run: QueryRun, answer: WrittenAnswer,
                 sources: list[Source], verification: Verification) -> QueryResult:
    reports = [run.reports.get(sq.id) or SubqueryReport(
        id=sq.id, text=sq.text, layer=run.layer_of(sq.id), status="skipped",
        error=run.partial_reason or "the plan needs no retrieval") for sq in run.plan.subqueries]
    # A hop skipped because it was not needed is no missing evidence: coverage counts the searches that ran.
    label, features = confidence([r for r in reports if r.id not in run.skipped_hops],
                                 min_ratio=policy.coverage_min_ratio, high_score=policy.high_confidence_score)
    notes = hops.notes(run)
    plan = run.plan.model_copy(update={"notes": [*run.plan.notes, *notes]}) if notes else run.plan
    calls = run.ledger.llm_calls
    prompt = [c.prompt_tokens for c in calls if c.prompt_tokens is not None]
    completion = [c.completion_tokens for c in calls if c.completion_tokens is not None]
    return QueryResult(
        question=run.question, answer=answer.text, concise_answer=answer.concise, sources=sources, plan=plan,
        subqueries=reports,
        retrieval_confidence=label, retrieval_confidence_features=features, verification=verification,
        timings=run.timings, degradations=run.ledger.degradations, path=run.path,  # type: ignore[arg-type]
        backtracked_subqueries=run.backtracked,
        abstained=answer.abstain_reason is not None, abstain_reason=answer.abstain_reason,
        partial=run.partial_reason is not None, partial_reason=run.partial_reason,
        llm_calls=LLMUsage(count=len(calls), prompt_tokens=sum(prompt) if prompt else None,
                           completion_tokens=sum(completion) if completion else None, calls=calls),
    )
