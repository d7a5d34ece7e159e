"""From reranked candidates to the writer's sources, coverage and confidence. Pure functions."""

from __future__ import annotations

from dataclasses import dataclass

from llama_index.core.schema import NodeWithScore

from ..core.plan import ExecutedPlan
from ..core.result import Confidence, Source, SubqueryReport
from ..core.sources import content_key


@dataclass(frozen=True)
class Offer:
    """One subquery's passage at its turn for the context budget."""

    subquery_id: str
    rank: int  # 0: the subquery's best passage
    hit: NodeWithScore
    key: str  # `content_key` of its text: the same passage found by two subqueries is one source

    @property
    def score(self) -> float:
        return float(self.hit.score or 0.0)


def offers(plan: ExecutedPlan, ranked: dict[str, list[NodeWithScore]], *, per_subquery: int) -> list[Offer]:
    """Every subquery's ranked passages in the order they bid for the budget, a passage found twice included.

    Round-robin by rank in plan order: every subquery's rank-1 document comes before any rank-2 one, so each hop
    keeps its evidence (attribution) before any slot goes to depth. Ranks past `per_subquery` come after every
    subquery's first `per_subquery`."""
    depth = max((len(v) for v in ranked.values()), default=0)
    order = [sq.id for sq in plan.subqueries if sq.id in ranked]
    return [Offer(sq_id, rank, ranked[sq_id][rank], content_key(ranked[sq_id][rank].node.get_content()))
            for phase_ranks in (range(per_subquery), range(per_subquery, depth))
            for rank in phase_ranks for sq_id in order if rank < len(ranked[sq_id])]


def sources_within(offered: list[Offer], *, budget: int) -> list[Source]:
    """The offers taken in order until the budget is full, deduplicated by content. A passage offered again adds its
    subquery to the source's `subquery_ids` and still uses up that subquery's turn: letting the subquery skip to its
    next new passage lost questions whose evidence was a hop's runner-up (the benchmark sets: ARCHITECTURE.md,
    "Context budget with attribution first")."""
    sources: list[Source] = []
    by_key: dict[str, Source] = {}
    for offer in offered:
        if offer.key in by_key:
            if offer.subquery_id not in by_key[offer.key].subquery_ids:
                by_key[offer.key].subquery_ids.append(offer.subquery_id)
            continue
        if len(sources) >= budget:
            break
        hit = offer.hit
        source = Source(
            node_id=hit.node.node_id, text=hit.node.get_content(), metadata=dict(hit.node.metadata),
            score=round(offer.score, 6), subquery_id=offer.subquery_id, rank_in_subquery=offer.rank + 1,
            subquery_ids=[offer.subquery_id],
        )
        by_key[offer.key] = source
        sources.append(source)
    return sources


def select_sources(
    plan: ExecutedPlan, ranked: dict[str, list[NodeWithScore]], *, per_subquery: int, budget: int
) -> list[Source]:
    """The union of each subquery's best documents, deduplicated by content, at most `budget`, in turn order
    (`offers`, `sources_within`). Ranks past `per_subquery` fill the budget only if slots remain."""
    return sources_within(offers(plan, ranked, per_subquery=per_subquery), budget=budget)


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
