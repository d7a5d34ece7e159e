"""How a run hops, behind one interface: `HopStrategy`, and the offline default that follows the documents.

The workflow asks a hop strategy six things and applies the answers to the run's state itself: whether a planned
hop need not be searched (`skip_reason`), what a subquery searches on its n-th try (`searches`) and which of the
candidates meet the cross-encoder (`pool`), whether the chain grows by one more hop once its last layer is searched
(`next_hop`), which subqueries' passages may reach the writer (`handed_over`), and in what order they bid for the
context budget (`evidence_order`). The run's report asks two more:
whether a hop hands over its passages (`holds_back`), and what the strategy did, for the plan's notes (`notes`).

`DocumentHops` is the default: every hop searches what its parent's passages contain (`bridge.py`, `searches.py`),
runs only when the question needs it (`skip.py`), and a chain grows while the question still needs a page
(`deeper.py`). It reads questions in a `Language` (`core/language.py`, English by default): another language is
`DocumentHops(policy, language)`, not an edit here. Another strategy (one that never hops, say) is any object with
these methods, passed to `QueryWorkflow(hops=...)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from llama_index.core.schema import NodeWithScore

from ...core.language import ENGLISH, Language
from ...core.plan import ExecutedPlan, SubQuery
from ...core.search import SearchHits
from ..evidence import Offer
from ..policy import RetrievalPolicy, parents_kept, pool_size
from ..run import QueryRun
from .deeper import Deepening, next_hop
from .searches import PooledCandidate, Variant, pool_candidates, subquery_searches
from .skip import evidence_order, holds_back, hop_notes, passages_handed_over, skip_reason


class HopStrategy(Protocol):
    def skip_reason(self, run: QueryRun, subquery: SubQuery) -> str | None:
        """Why a planned hop need not be searched (the run then reports it `skipped`), or None to search it."""
        ...

    def searches(self, run: QueryRun, subquery: SubQuery, attempt: int) -> list[Variant]:
        """The searches `subquery` runs on its `attempt`-th try (1 first); at least one."""
        ...

    def pool(self, run: QueryRun, subquery: SubQuery, variants: Sequence[Variant],
             hits: Sequence[SearchHits | BaseException], attempt: int) -> list[PooledCandidate]:
        """The candidates of `subquery`'s searches (`hits[i]` answers `variants[i]`) the cross-encoder may score."""
        ...

    def next_hop(self, run: QueryRun) -> Deepening | None:
        """After the plan's last layer is searched: one more hop, a stop worth noting, or None (nothing to say)."""
        ...

    def handed_over(self, run: QueryRun) -> dict[str, list[NodeWithScore]]:
        """Each subquery's ranked passages that may reach the writer."""
        ...

    def evidence_order(self, run: QueryRun, offered: list[Offer]) -> list[Offer]:
        """The handed-over passages in the order they bid for the context budget, from their turn order
        (`evidence.offers`: round robin by rank in plan order)."""
        ...

    def holds_back(self, plan: ExecutedPlan, subquery: SubQuery, *, covered: bool) -> bool:
        """Whether a searched subquery hands the writer none of its passages."""
        ...

    def notes(self, run: QueryRun) -> list[str]:
        """What the strategy did to the plan, for its notes."""
        ...


class DocumentHops:
    """The default: hops that follow the documents, with the knobs of the run's `RetrievalPolicy`, reading questions
    and passages in `language` (its word lists: its stopwords, what opens a name or a clause, what a clause may end
    with)."""

    def __init__(self, policy: RetrievalPolicy, language: Language = ENGLISH) -> None:
        self.policy = policy
        self.language = language

    def skip_reason(self, run: QueryRun, subquery: SubQuery) -> str | None:
        return skip_reason(self.policy, run, subquery, language=self.language)

    def searches(self, run: QueryRun, subquery: SubQuery, attempt: int) -> list[Variant]:
        return subquery_searches(self.policy, run, subquery, attempt, language=self.language)

    def pool(self, run: QueryRun, subquery: SubQuery, variants: Sequence[Variant],
             hits: Sequence[SearchHits | BaseException], attempt: int) -> list[PooledCandidate]:
        return pool_candidates(variants, hits, exclude_node_ids=parents_kept(run, subquery),
                               keep=pool_size(self.policy, run, subquery, attempt),
                               title_boost=self.policy.bridge_title_boost, question=run.plan.query,
                               language=self.language)

    def next_hop(self, run: QueryRun) -> Deepening | None:
        return next_hop(self.policy, run, language=self.language)

    def handed_over(self, run: QueryRun) -> dict[str, list[NodeWithScore]]:
        return passages_handed_over(self.policy, run)

    def evidence_order(self, run: QueryRun, offered: list[Offer]) -> list[Offer]:
        return evidence_order(self.policy, run, offered)

    def holds_back(self, plan: ExecutedPlan, subquery: SubQuery, *, covered: bool) -> bool:
        return holds_back(self.policy, plan, subquery, covered=covered)

    def notes(self, run: QueryRun) -> list[str]:
        return hop_notes(self.policy, run)
