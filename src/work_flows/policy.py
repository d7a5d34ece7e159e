"""The retrieval policy: pure decisions over a run's state, with the knobs they need read once from Settings.

Which subqueries are hops, how many candidates a subquery's pool keeps, what a hop may not reuse, when the
critic sends a subquery back, and which subqueries verification sends back. The workflow asks; these answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..config import Settings
from ..core.plan import ExecutedPlan, SubQuery, parent_references
from ..core.result import Source, Verification
from .run import QueryRun

Path = Literal["dag", "single"]


@dataclass(frozen=True)
class RetrievalPolicy:
    """The Settings the policy reads, under the policy's names; defaults live in Settings alone."""

    enable_dag: bool
    topk_base: int
    topk_step: int
    max_retries: int
    critic_min_score: float
    coverage_min_score: float
    coverage_min_ratio: float
    high_confidence_score: float
    attribution_top_n: int
    context_budget: int
    bridge_max_entities: int
    bridge_rerank_top: int
    bridge_title_boost: float
    bridge_when_needed: bool
    bridge_deeper_hops: bool
    subquery_max: int
    verify_backtrack: bool
    abstain_below: float
    abstain_unknown_name_below: float
    abstain_joined_below: float

    @classmethod
    def from_settings(cls, settings: Settings) -> RetrievalPolicy:
        return cls(
            enable_dag=settings.planner_enable_dag, topk_base=settings.subquery_topk_base,
            topk_step=settings.subquery_topk_step, max_retries=settings.subquery_max_iters,
            critic_min_score=settings.critic_min_score, coverage_min_score=settings.coverage_min_score,
            coverage_min_ratio=settings.coverage_min_ratio, high_confidence_score=settings.high_confidence_score,
            attribution_top_n=settings.attribution_top_n, context_budget=settings.context_budget,
            bridge_max_entities=settings.bridge_max_entities, bridge_rerank_top=settings.bridge_rerank_top,
            bridge_title_boost=settings.bridge_title_boost, bridge_when_needed=settings.bridge_when_needed,
            bridge_deeper_hops=settings.bridge_deeper_hops, subquery_max=settings.subquery_max,
            verify_backtrack=settings.verify_backtrack, abstain_below=settings.abstain_below,
            abstain_unknown_name_below=settings.abstain_unknown_name_below,
            abstain_joined_below=settings.abstain_joined_below)


def path_of(policy: RetrievalPolicy, plan: ExecutedPlan) -> Path:
    """A plan of one subquery (or with the DAG off) is the single-query baseline path."""
    return "dag" if policy.enable_dag and len(plan.subqueries) > 1 else "single"


def kept_per_subquery(policy: RetrievalPolicy, path: str) -> int:
    """Attribution keeps the top N per subquery; the single-query path keeps the whole budget."""
    return policy.attribution_top_n if path == "dag" else policy.context_budget


def is_hop(run: QueryRun, sq: SubQuery) -> bool:
    """A hop still names a parent (`{sN}`) when it is searched: no LLM rewrote it into a standalone query."""
    return sq.id not in run.rewritten and bool(parent_references(sq.text))


def widening(policy: RetrievalPolicy, attempt: int) -> int:
    """Extra candidates of a retry: SUBQUERY_TOPK_STEP per search already run."""
    return policy.topk_step * (attempt - 1)


def pool_size(policy: RetrievalPolicy, run: QueryRun, sq: SubQuery, attempt: int) -> int:
    """Candidates a subquery's searches each return, and its pool keeps for the reranker, on its `attempt`-th try.

    A hop's pool is the few best bridge candidates (BRIDGE_RERANK_TOP); any other subquery keeps its
    hint's top_k, else SUBQUERY_TOPK_BASE, and never fewer than the passages it may hand the writer (on the
    single path, the whole budget: a one-subquery plan whose hint asks for fewer still fills the budget, as
    the single-query baseline does). A retry widens either by SUBQUERY_TOPK_STEP.
    """
    if is_hop(run, sq):
        base = policy.bridge_rerank_top
    else:
        base = max(sq.hints.top_k or policy.topk_base, kept_per_subquery(policy, run.path))
    return base + widening(policy, attempt)


def ancestors(plan: ExecutedPlan, sq: SubQuery) -> list[str]:
    """Every subquery `sq` builds on, directly or through its parents (nearest first)."""
    by_id = {other.id: other for other in plan.subqueries}
    found: list[str] = []
    todo = list(sq.parents)
    while todo:
        parent = todo.pop(0)
        if parent in by_id and parent not in found:
            found.append(parent)
            todo.extend(by_id[parent].parents)
    return found


def parents_kept(run: QueryRun, sq: SubQuery) -> frozenset[str]:
    """A hop's evidence must be new: the documents its ancestors keep are not its candidates (a third hop that
    found the first hop's page again would add nothing the writer does not already have)."""
    return frozenset(node_id for parent in ancestors(run.plan, sq) if parent in run.reports
                     for node_id in run.reports[parent].kept_node_ids)


def needs_retry(policy: RetrievalPolicy, run: QueryRun, sq_id: str) -> bool:
    """Failed, uncovered or weak (best score under CRITIC_MIN_SCORE), with retries left; never one not searched."""
    report = run.reports.get(sq_id)
    if report is None or report.status == "skipped" or run.attempts.get(sq_id, 0) > policy.max_retries:
        return False
    return report.status in ("failed", "uncovered") or (report.best_score or 0.0) < policy.critic_min_score


def backtrack_targets(policy: RetrievalPolicy, run: QueryRun, sources: list[Source],
                      verification: Verification) -> list[str]:
    """The subqueries whose sources the unsupported sentences cite (once per run, if time allows)."""
    if not policy.verify_backtrack or run.backtracked or run.out_of_time():
        return []
    cited = {sq_id for check in verification.sentences if not check.supported
             for n in check.citations if 1 <= n <= len(sources) for sq_id in sources[n - 1].subquery_ids}
    return [sq.id for sq in run.plan.subqueries if sq.id in cited]
