"""What a search is asked and what it returns: the types the searcher, the bridge hops and the workflow share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from llama_index.core.schema import NodeWithScore


@dataclass(frozen=True)
class SearchRequest:
    """One subquery's search."""

    text: str
    top_k: int
    hyde: str | None = None
    must_include: Sequence[str] = ()
    sections: Sequence[str] = ()


@dataclass
class SearchHits:
    """The candidates of one request, best first; `score` is the boosted search similarity."""

    candidates: list[NodeWithScore] = field(default_factory=list)
