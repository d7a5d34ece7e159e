"""The searches a subquery runs (its variants) and how their candidates are pooled for the reranker.

A plain subquery runs one search. A dependent one (`{s1}` in its text) runs one search per candidate
bridge entity, or a retry runs a wider search; their candidates meet in one pool per subquery.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llama_index.core.schema import NodeWithScore

from ..agents.searcher import SearchHits, SearchRequest
from .bridge import titled_by


@dataclass(frozen=True)
class Variant:
    subquery_id: str
    request: SearchRequest
    entity: str | None = None  # the bridge entity this search is about, if any


@dataclass
class PooledCandidate:
    variant: Variant
    hit: NodeWithScore
    priority: float


def pool_candidates(
    variants: Sequence[Variant],
    hits: Sequence[SearchHits | BaseException],
    *,
    exclude_node_ids: frozenset[str] = frozenset(),
    keep: int,
    title_boost: float = 0.0,
) -> list[PooledCandidate]:
    """One subquery's candidates from all its variants: each node once (at its best priority), best first.

    Priority is the dense score, lifted by `title_boost` when the page is titled by the variant's entity.
    """
    best: dict[str, PooledCandidate] = {}
    for variant, result in zip(variants, hits):
        if not isinstance(result, SearchHits):
            continue
        for hit in result.candidates:
            node_id = hit.node.node_id
            if node_id in exclude_node_ids:
                continue
            priority = float(hit.score or 0.0)
            if variant.entity and titled_by(str(hit.node.metadata.get("title", "")), variant.entity):
                priority += title_boost
            if node_id not in best or best[node_id].priority < priority:
                best[node_id] = PooledCandidate(variant=variant, hit=hit, priority=priority)
    return sorted(best.values(), key=lambda c: c.priority, reverse=True)[:keep]
