"""From reranked candidates to the writer's sources, coverage and confidence. Pure functions."""

from __future__ import annotations

from llama_index.core.schema import NodeWithScore

from ..core.plan import ExecutedPlan
from ..core.result import Confidence, Source, SubqueryReport
from ..core.sources import content_key


def select_sources(
    plan: ExecutedPlan, ranked: dict[str, list[NodeWithScore]], *, per_subquery: int, budget: int
) -> list[Source]:
    """The union of each subquery's best documents, deduplicated by content, at most `budget`.

    Round-robin by rank: every subquery's rank-1 document comes before any rank-2 one, so each hop
    keeps its evidence (attribution) before any slot goes to depth. Ranks past `per_subquery` fill
    the budget only if slots remain.
    """
    sources: list[Source] = []
    by_key: dict[str, Source] = {}
    depth = max((len(v) for v in ranked.values()), default=0)
    order = [sq.id for sq in plan.subqueries if sq.id in ranked]
    for phase_ranks in (range(per_subquery), range(per_subquery, depth)):
        for rank in phase_ranks:
            for sq_id in order:
                hits = ranked[sq_id]
                if rank >= len(hits):
                    continue
                hit = hits[rank]
                key = content_key(hit.node.get_content())
                if key in by_key:
                    if sq_id not in by_key[key].subquery_ids:
                        by_key[key].subquery_ids.append(sq_id)
                    continue
                if len(sources) >= budget:
                    return sources
                source = Source(
                    node_id=hit.node.node_id, text=hit.node.get_content(), metadata=dict(hit.node.metadata),
                    score=round(float(hit.score or 0.0), 6), subquery_id=sq_id, rank_in_subquery=rank + 1,
                    subquery_ids=[sq_id],
                )
                by_key[key] = source
                sources.append(source)
    return sources


def confidence(
    reports: list[SubqueryReport], *, min_ratio: float, high_score: float
) -> tuple[Confidence, dict[str, float]]:
    """A label and the features behind it: how many subqueries found evidence, and how strong."""
    count = len(reports)
    covered = [r for r in reports if r.status == "covered"]
    best = [r.best_score for r in reports if r.best_score is not None]
    features = {
        "subquery_count": float(count),
        "covered_count": float(len(covered)),
        "failed_count": float(sum(r.status == "failed" for r in reports)),
        "coverage_ratio": len(covered) / count if count else 0.0,
        "min_best_score": min(best) if best else 0.0,
        "mean_best_score": sum(best) / len(best) if best else 0.0,
    }
    if not count or features["coverage_ratio"] < min_ratio:
        label: Confidence = "low"
    elif features["coverage_ratio"] == 1.0 and features["min_best_score"] >= high_score:
        label = "high"
    else:
        label = "mid"
    return label, {k: round(v, 4) for k, v in features.items()}
