"""QueryPlannerAgent: question (+ chat history) -> an executable Plan, never an exception.

With an LLM: ask for the Plan JSON (JSON mode), extract it from whatever came back, validate, repair
what is safe, retry once with the error, then fall back to the rule planner. Without one: the rule
planner. Either way the plan says how it was obtained.
"""

from __future__ import annotations

from llama_index.core import PromptTemplate

from ..core.plan import (
    ExecutedPlan,
    Plan,
    PlanOrigin,
    PlanParseError,
    finalize_plan,
    parse_plan,
    single_query_plan,
    validate_plan,
)
from ..core.result import RunLedger
from ..llm import LLMClient, describe_error
from .rule_planner import plan_offline, rewrite_with_history

PLANNER_SYSTEM = PromptTemplate(
    """You plan searches for a multi-hop question answering system.
Split the user's question into at most {subquery_max} atomic subqueries that a search engine can answer
one passage at a time. A subquery that needs another's answer lists it in "parents" and may refer to it
as {{s1}}. Independent subqueries have no parents. Reuse the question's own words (names, titles).
If chat history is given, first rewrite the question into a standalone "query".
Reply with one JSON object and nothing else:
{{"query": str, "requires_retrieval": bool, "hyde_document": str | null,
 "subqueries": [{{"id": "s1", "text": str, "parents": [str],
                 "hints": {{"must_include": [str], "synonyms": [str], "sections": [str], "top_k": int | null}}}}]}}"""
)
PLANNER_USER = PromptTemplate(
    """{history_block}Question: {question}"""
)
PLANNER_RETRY = PromptTemplate(
    """{previous}

Your previous reply could not be used: {error}
Reply again with one valid JSON object only."""
)
MAX_ATTEMPTS = 2
MAX_ISSUES_SHOWN = 8  # rule violations quoted back to the LLM (and into plan.notes)


def _history_block(history: list[str]) -> str:
    if not history:
        return ""
    turns = "\n".join(f"- {turn}" for turn in history[-10:])
    return f"Chat history (oldest first):\n{turns}\n\n"


class QueryPlannerAgent:
    def __init__(
        self,
        client: LLMClient | None = None,
        *,
        subquery_max: int = 4,
        enable_dag: bool = True,
        bridge: bool = True,
    ) -> None:
        self.client = client
        self.subquery_max = subquery_max
        self.enable_dag = enable_dag
        self.bridge = bridge

    async def aplan(
        self, question: str, history: list[str], ledger: RunLedger, given: Plan | None = None
    ) -> ExecutedPlan:
        if given is not None:
            executed = finalize_plan(given, question=question, subquery_max=self.subquery_max,
                                     origin=PlanOrigin.GIVEN)
            if executed is not None:
                return executed
            ledger.degrade("planner", "the given plan is invalid and cannot be repaired", "rule-based planner")
            return self._offline(question, history, PlanOrigin.FALLBACK, ["the given plan was invalid"])
        if self.client is None or not self.enable_dag:
            return self._offline(question, history, PlanOrigin.OFFLINE, [])
        notes: list[str] = []
        user = PLANNER_USER.format(history_block=_history_block(history), question=question)
        for _attempt in range(MAX_ATTEMPTS):
            try:
                reply = await self.client.chat(
                    system=PLANNER_SYSTEM.format(subquery_max=self.subquery_max), user=user,
                    agent="planner", ledger=ledger, json_reply=True)
            except Exception as error:
                notes.append(f"LLM call failed: {describe_error(error)}")
                break  # chat() already retried transient failures; a second prompt will not help
            try:
                plan = parse_plan(reply, question)
            except PlanParseError as error:
                notes.append(f"unusable reply: {error}")
                user = PLANNER_RETRY.format(previous=user, error=str(error))
                continue
            executed = finalize_plan(plan, question=question, subquery_max=self.subquery_max,
                                     origin=PlanOrigin.LLM, notes=notes)  # notes: why an earlier reply failed
            if executed is not None:
                return executed
            issues = validate_plan(plan, question=question, subquery_max=self.subquery_max)
            problems = "; ".join(i.message for i in issues[:MAX_ISSUES_SHOWN])
            if len(issues) > MAX_ISSUES_SHOWN:
                problems += f"; and {len(issues) - MAX_ISSUES_SHOWN} more"
            notes.append(f"invalid plan: {problems}")
            user = PLANNER_RETRY.format(previous=user, error=problems)
        ledger.degrade("planner", "; ".join(notes) or "no usable plan", "rule-based planner")
        return self._offline(question, history, PlanOrigin.FALLBACK, notes)

    def fallback_plan(self, question: str, history: list[str], reason: str) -> ExecutedPlan:
        """The rule planner's plan, for when the planner could not finish (e.g. the query deadline)."""
        return self._offline(question, history, PlanOrigin.FALLBACK, [reason])

    def _offline(self, question: str, history: list[str], origin: PlanOrigin, notes: list[str]) -> ExecutedPlan:
        notes = list(notes)
        standalone = question
        if history:
            rewritten = rewrite_with_history(question, history)
            if rewritten:
                standalone = rewritten
                notes.append(f"rewrote the question with the chat history: {rewritten!r}")
        plan = plan_offline(standalone, enable_dag=self.enable_dag, subquery_max=self.subquery_max,
                            bridge=self.bridge)
        executed = finalize_plan(plan, question=standalone, subquery_max=self.subquery_max, origin=origin,
                                 notes=notes)
        if executed is None:  # cannot happen for rule plans; the single-query plan is always valid
            executed = finalize_plan(single_query_plan(standalone), question=standalone,
                                     subquery_max=self.subquery_max, origin=origin, notes=notes)
        assert executed is not None
        return executed
