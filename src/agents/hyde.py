"""HydeAgent (LLM only): a short hypothetical passage per subquery, embedded with it (HyDE)."""

from __future__ import annotations

from llama_index.core import PromptTemplate
from llama_index.core.llms import LLM

from ..work_flows.plan import SubQuery
from ..work_flows.result import RunLedger
from .llm_calls import describe_error
from .llm_json import ask_texts_by_id

HYDE_SYSTEM = PromptTemplate(
    """You write hypothetical passages for search. For each query, write two sentences in the style of
an encyclopedia passage that would answer it. Invent plausible details if you must: the passage is only
used to find real documents. Reply with one JSON object only, mapping each query id to its passage:
{"s1": "...", "s2": "..."}"""
)
HYDE_USER = PromptTemplate("""Queries:
{queries}""")


class HydeAgent:
    def __init__(self, llm: LLM, *, llm_timeout_s: float = 60.0, json_mode: bool = True) -> None:
        self.llm = llm
        self.llm_timeout_s = llm_timeout_s
        self.json_mode = json_mode

    async def apassages(self, subqueries: list[SubQuery], ledger: RunLedger) -> dict[str, str]:
        """One call for the whole layer; on failure the subqueries search by their text alone."""
        if not subqueries:
            return {}
        try:
            return await ask_texts_by_id(
                self.llm, system=HYDE_SYSTEM.format(),
                user=HYDE_USER.format(queries="\n".join(f"{sq.id}: {sq.text}" for sq in subqueries)),
                agent="hyde", ledger=ledger, timeout_s=self.llm_timeout_s, json_mode=self.json_mode,
                ids=[sq.id for sq in subqueries])
        except Exception as error:
            ledger.degrade("hyde", describe_error(error), "subquery text only")
            return {}
