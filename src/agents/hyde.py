"""HydeAgent (LLM only): a short hypothetical passage per subquery, embedded with it (HyDE)."""

from __future__ import annotations

from llama_index.core import PromptTemplate

from ..core.plan import SubQuery
from ..core.result import RunLedger
from ..llm import LLMClient, describe_error

HYDE_SYSTEM = PromptTemplate(
    """You write hypothetical passages for search. For each query, write two sentences in the style of
an encyclopedia passage that would answer it. Invent plausible details if you must: the passage is only
used to find real documents. Reply with one JSON object only, mapping each query id to its passage:
{"s1": "...", "s2": "..."}"""
)
HYDE_USER = PromptTemplate("""Queries:
{queries}""")


class HydeAgent:
    def __init__(self, client: LLMClient) -> None:
        self.client = client

    async def apassages(self, subqueries: list[SubQuery], ledger: RunLedger) -> dict[str, str]:
        """One call for the whole layer; on failure the subqueries search by their text alone."""
        if not subqueries:
            return {}
        try:
            return await self.client.ask_texts_by_id(
                system=HYDE_SYSTEM.format(),
                user=HYDE_USER.format(queries="\n".join(f"{sq.id}: {sq.text}" for sq in subqueries)),
                agent="hyde", ledger=ledger, ids=[sq.id for sq in subqueries])
        except Exception as error:
            ledger.degrade("hyde", describe_error(error), "subquery text only")
            return {}
