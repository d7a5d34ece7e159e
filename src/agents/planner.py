"""QueryPlannerAgent: question (+ chat history) -> an executable Plan, never an exception.

With an LLM: ask for the Plan JSON (worked examples in the prompt; the plan's JSON schema enforced by the
server where it can, JSON mode otherwise), extract it from whatever came back, validate, repair
what is safe, retry once with the error, then fall back to the rule planner. Without one: the rule
planner. Either way the plan says how it was obtained.
"""

from __future__ import annotations

import json

from llama_index.core import PromptTemplate

from ..core.language import ENGLISH, Language
from ..core.names import NO_NAMES, KnownNames
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
from ..core.roles import NameSource
from ..llm import LLMClient, ReplySchema, describe_error, object_schema
from .rule_planner import plan_offline, rewrite_with_history

PLANNER_SYSTEM = PromptTemplate(
    """You turn a question into the searches that answer it. Each search finds one fact in one passage.
- The question compares or lists several things: one search per thing, none with parents.
- The question needs a fact that another answer leads to: search for that answer first; the later search
  writes it as {s1} (the answer of search s1) and lists "s1" in its "parents". Chains can be longer.
- One search answers the question: a single search, the question itself.
Write each search as a question, never as a statement or a guess at the answer. Copy names and titles
from the question word for word. Never add a last search that compares or combines the others: the
answer is written from all the searches' results. At most {subquery_max} searches.{history_rule}
Reply with JSON only, shaped like the examples.

Examples:
{examples}"""
)
PLANNER_HISTORY_RULE = """
The question may continue a chat: "query" is the question rewritten to stand alone (names instead of
"he", "it", "that film"), and the searches use those names."""
# Worked examples: a small model copies their shape (questions, {s1} links) and no longer asserts answers.
# None comes from a benchmark's questions.
PLANNER_EXAMPLES = [
    ("Which was founded first, Nokia or Ericsson?", [
        ("When was Nokia founded?", []),
        ("When was Ericsson founded?", [])]),
    ("What river flows through the city where Ada Lovelace was born?", [
        ("In which city was Ada Lovelace born?", []),
        ("What river flows through {s1}?", ["s1"])]),
    ("Who directed the film that won Best Picture in the year the Berlin Wall fell?", [
        ("In which year did the Berlin Wall fall?", []),
        ("Which film won Best Picture in {s1}?", ["s1"]),
        ("Who directed {s2}?", ["s2"])]),
    ("Who was born first, the director of Jaws or the director of Alien?", [
        ("Who is the director of Jaws?", []),
        ("Who is the director of Alien?", []),
        ("When was {s1} born?", ["s1"]),
        ("When was {s2} born?", ["s2"])]),
    ("What is the default port of the Qdrant HTTP API?", [
        ("What is the default port of the Qdrant HTTP API?", [])]),
]
PLANNER_USER = PromptTemplate(
    """{history_block}Question: {question}"""
)
PLANNER_RETRY = PromptTemplate(
    """{previous}

Your previous reply could not be used: {error}
Reply again with one valid JSON object only."""
)
PLAN_SCHEMA = ReplySchema("plan", object_schema({
    "query": {"type": "string", "description": "The question, rewritten to stand alone if it continues a chat."},
    "subqueries": {"type": "array", "items": object_schema({
        "id": {"type": "string", "description": "s1, s2, ... in order"},
        "text": {"type": "string", "description": "A search written as a question; {s1} stands for s1's answer."},
        "parents": {"type": "array", "items": {"type": "string"},
                    "description": "Ids of the earlier searches whose answers this one needs."},
    })},
}))
PLAN_MAX_TOKENS = 400  # four searches take ~150; a model that does not stop is cut off here


def example_plans(subquery_max: int) -> str:
    """The worked examples as question → JSON reply, without those that need more searches than allowed."""
    shown = []
    for question, searches in PLANNER_EXAMPLES:
        if len(searches) > subquery_max:
            continue
        subqueries = [{"id": f"s{i}", "text": text, "parents": parents}
                      for i, (text, parents) in enumerate(searches, start=1)]
        shown.append(f"Question: {question}\n" + json.dumps({"query": question, "subqueries": subqueries}))
    return "\n\n".join(shown)


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
        language: Language = ENGLISH,
        names: NameSource | None = None,
        split_comparisons: bool = False,
    ) -> None:
        self.client = client
        self.subquery_max = subquery_max
        self.enable_dag = enable_dag
        self.bridge = bridge
        # With an LLM: a comparison read by its form is the rule planner's to plan (one search per side).
        self.split_comparisons = split_comparisons
        self.language = language  # the words and forms the rule planner reads (core/language.py)
        self.names = names  # the collection's names (the searcher): a comparison of lower-case names is still one
        self._known: KnownNames = NO_NAMES  # as last read: a fallback plan at the deadline cannot wait for a read

    async def aplan(
        self, question: str, history: list[str], ledger: RunLedger, given: Plan | None = None
    ) -> ExecutedPlan:
        if self.names is not None:
            self._known = await self.names.known_names()
        if given is not None:
            executed = finalize_plan(given, question=question, subquery_max=self.subquery_max,
                                     origin=PlanOrigin.GIVEN)
            if executed is not None:
                return executed
            ledger.degrade("planner", "the given plan is invalid and cannot be repaired", "rule-based planner")
            return self._offline(question, history, PlanOrigin.FALLBACK, ["the given plan was invalid"])
        if self.client is None or not self.enable_dag:
            return self._offline(question, history, PlanOrigin.OFFLINE, [])
        if self.split_comparisons:
            # A comparison read by its form is split by the rule planner, one search per side (role `side`: a side
            # named by code ranks the passages that name it first), without a plan call. A small model writes each
            # side as a question ("What is the purpose of the --check option in the black code formatter?") that
            # found neither option's section (black's docs: recorded Qwen2.5-Coder-1.5B plans, joint recall 0.673;
            # with comparisons split by the rule planner 0.818).
            by_rule = self._offline(question, history, PlanOrigin.OFFLINE,
                                    ["a comparison by its form: one search per side, planned without the LLM"])
            if any(sq.role == "side" for sq in by_rule.subqueries):
                return by_rule
        notes: list[str] = []
        user = PLANNER_USER.format(history_block=_history_block(history), question=question)
        for _attempt in range(MAX_ATTEMPTS):
            try:
                reply = await self.client.chat(
                    system=self._system_prompt(bool(history)), user=user, agent="planner", ledger=ledger,
                    json_reply=True, schema=PLAN_SCHEMA, max_tokens=PLAN_MAX_TOKENS)
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

    def _system_prompt(self, has_history: bool) -> str:
        return PLANNER_SYSTEM.format(subquery_max=self.subquery_max,
                                     history_rule=PLANNER_HISTORY_RULE if has_history else "",
                                     examples=example_plans(self.subquery_max))

    def fallback_plan(self, question: str, history: list[str], reason: str) -> ExecutedPlan:
        """The rule planner's plan, for when the planner could not finish (e.g. the query deadline)."""
        return self._offline(question, history, PlanOrigin.FALLBACK, [reason])

    def _offline(self, question: str, history: list[str], origin: PlanOrigin, notes: list[str]) -> ExecutedPlan:
        notes = list(notes)
        standalone = question
        if history:
            rewritten = rewrite_with_history(question, history, language=self.language)
            if rewritten:
                standalone = rewritten
                notes.append(f"rewrote the question with the chat history: {rewritten!r}")
        plan = plan_offline(standalone, enable_dag=self.enable_dag, subquery_max=self.subquery_max,
                            bridge=self.bridge, language=self.language, known=self._known)
        executed = finalize_plan(plan, question=standalone, subquery_max=self.subquery_max, origin=origin,
                                 notes=notes)
        if executed is None:  # cannot happen for rule plans; the single-query plan is always valid
            executed = finalize_plan(single_query_plan(standalone), question=standalone,
                                     subquery_max=self.subquery_max, origin=origin, notes=notes)
        assert executed is not None
        return executed
