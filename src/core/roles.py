"""The roles a QueryWorkflow is built from, as Protocols: any object with these methods can take a role.

The agents in `dagrag.agents` are the defaults; a test fake or a user's own component needs no base class.
Each role's contract is what the workflow relies on: LLM roles never raise for an LLM failure (they fall
back to their offline twin and record it in the ledger); a searcher or reranker may raise, and the workflow
reports that subquery as failed or keeps the search order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .names import KnownNames
from .plan import ExecutedPlan, Plan, SubQuery
from .result import RunLedger, Source, Verification, WrittenAnswer
from .search import SearchHits, SearchRequest


class Planner(Protocol):
    async def aplan(self, question: str, history: list[str], ledger: RunLedger,
                    given: Plan | None = None) -> ExecutedPlan:
        """An executable plan for the question; never raises."""
        ...

    def fallback_plan(self, question: str, history: list[str], reason: str) -> ExecutedPlan:
        """A plan made without a model, at once (when time has run out)."""
        ...


class Searcher(Protocol):
    async def asearch_layer(self, requests: Sequence[SearchRequest]) -> list[SearchHits]:
        """Every request of one layer, in order; raises if the search fails."""
        ...


@runtime_checkable
class NameSource(Protocol):
    """A searcher that can say which names its collection knows (titles, headings); optional for a searcher."""

    async def known_names(self) -> KnownNames:
        """The names; empty when there are none to read. Never raises."""
        ...


class Reranker(Protocol):
    async def ascore(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Relevance probabilities in [0, 1] of (query, passage) pairs, in order; raises if scoring fails."""
        ...


class ReferenceResolver(Protocol):
    async def arewrite(self, children: dict[str, str], findings: dict[str, tuple[str, str]],
                       ledger: RunLedger) -> dict[str, str]:
        """Standalone rewrites of `{sN}` subqueries from their parents' (query, best passage); {} when it cannot."""
        ...


class PassageWriter(Protocol):
    async def apassages(self, subqueries: list[SubQuery], ledger: RunLedger) -> dict[str, str]:
        """A hypothetical passage per subquery id (HyDE); {} when it cannot."""
        ...


class Writer(Protocol):
    async def awrite(self, question: str, plan: ExecutedPlan, sources: list[Source],
                     ledger: RunLedger) -> WrittenAnswer:
        """An answer citing `[n]` = sources[n-1], and in a few words where it can; never raises."""
        ...

    def lead_sentences(self, sources: list[Source]) -> str:
        """An answer made without a model, at once (when time has run out)."""
        ...


class Verifier(Protocol):
    async def averify(self, answer: str, sources: list[Source], ledger: RunLedger) -> Verification:
        """Which sentences of the answer their cited sources support; never raises."""
        ...
