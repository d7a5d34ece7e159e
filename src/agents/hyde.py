"""HydeAgent (LLM only): a short hypothetical passage per subquery, embedded with it (HyDE)."""

from __future__ import annotations

from llama_index.core import PromptTemplate

from ..core.plan import SubQuery
from ..core.result import RunLedger
from ..llm import LLMClient, describe_error

HYDE_SYSTEM = PromptTemplate(
    """You write hypothetical passages for search. For each query, write two sentences in the style of
an encyclopedia passage that would answer it. Invent plausible details if you must: the passage is only
used to find real documents. Reply with JSON only, one passage per query id.

Example:
Queries:
s1: In which city was Ada Lovelace born?
{"s1": "Augusta Ada King, Countess of Lovelace, was an English mathematician. She was born in London in 1815."}"""
)
HYDE_USER = PromptTemplate("""Queries:
{queries}""")


HYDE_MAX_TOKENS_PER_QUERY = 100


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
                agent="hyde", ledger=ledger, ids=[sq.id for sq in subqueries],
                description="Two encyclopedia-style sentences that would answer the query.",
                max_tokens=HYDE_MAX_TOKENS_PER_QUERY * len(subqueries))
        except Exception as error:
            ledger.degrade("hyde", describe_error(error), "subquery text only")
            return {}
