"""The Plan and its DAG logic: parse, validate, repair, layer. Pure functions over data, no I/O.

A plan comes from an LLM (untrusted text) or from the offline planner. `parse_plan` turns text into a
`Plan` or says why it cannot; `validate_plan` lists every rule the plan breaks; `repair_plan` fixes what
is safe to fix (and says what it did); `layer_plan` orders the DAG into layers that can run concurrently.
"""

from __future__ import annotations

import itertools
import re
from enum import Enum
from typing import Any, Literal, get_args

import networkx as nx
from pydantic import BaseModel, Field, ValidationError, field_validator

from .replies import ReplyParseError, cut_short, extract_json_object
from .text import content_words

MAX_SUBQUERY_CHARS = 1000
MAX_HINT_TERMS = 16
MAX_TOP_K = 200
MAX_NOTES = 20  # repair notes kept; the rest are summarised
PARENT_REFERENCE = re.compile(r"\{(s\w*)\}")


class PlanOrigin(str, Enum):
    """How the executed plan was obtained."""

    LLM = "llm"  # the LLM's plan, used as is
    REPAIRED = "repaired"  # the LLM's plan after safe repairs
    OFFLINE = "offline"  # the rule-based planner (no LLM configured)
    FALLBACK = "fallback"  # the rule-based planner after the LLM's plan could not be used
    GIVEN = "given"  # passed in by the caller: run(query=..., plan=...)


class Hints(BaseModel):
    must_include: list[str] = Field(default_factory=list)
    synonyms: list[str] = Field(default_factory=list)
    sections: list[str] = Field(default_factory=list)
    top_k: int | None = Field(None, ge=1, le=MAX_TOP_K)

    @field_validator("top_k", mode="before")
    @classmethod
    def _top_k(cls, value: Any) -> int | None:
        # A hint, not a rule: a number out of range is clamped, anything that is not a number ignored.
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            return None
        try:
            number = int(float(value))
        except (ValueError, OverflowError):
            return None
        return min(max(number, 1), MAX_TOP_K)

    @field_validator("must_include", "synonyms", "sections", mode="before")
    @classmethod
    def _terms(cls, value: Any) -> list[str]:
        if value is None:
            return []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise ValueError("must be a list of strings")
        terms = [str(v).strip() for v in value if isinstance(v, (str, int, float)) and str(v).strip()]
        return terms[:MAX_HINT_TERMS]


Role = Literal["question", "side", "bridge", "hop", "step"]
"""What a subquery is for, set once when the plan is made (`assign_roles`), read by everything after:

- `question`: the question as asked, whose ranking is the single-query path's;
- `side`: one side of a comparison (or the first search of one of a bridge-comparison's chains);
- `bridge`: the generic bridge hop, the question asked again about what the question's own search found
  (`{s1}` + the question's words, its one parent a `question`): its parent's ranking is the single path's;
- `hop`: any other search about what a parent found (`{sN}` in its text), a deeper hop or one a planner wrote;
- `step`: any other search a planner wrote.
"""


class SubQuery(BaseModel):
    id: str = Field(min_length=1, max_length=64)
    text: str
    parents: list[str] = Field(default_factory=list)
    hints: Hints = Field(default_factory=Hints)
    role: Role = "step"

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ValueError("id must be a string")
        return str(value).strip()

    @field_validator("text", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError("text must be a string")
        return " ".join(value.split())

    @field_validator("parents", mode="before")
    @classmethod
    def _parents(cls, value: Any) -> list[str]:
        if value is None:
            return []
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, list):
            raise ValueError("parents must be a list of ids")
        return [str(v).strip() for v in value if isinstance(v, (str, int)) and not isinstance(v, bool)]

    @field_validator("hints", mode="before")
    @classmethod
    def _hints(cls, value: Any) -> Any:
        return value if isinstance(value, (dict, Hints)) else {}  # hints are optional: a malformed one is dropped

    @field_validator("role", mode="before")
    @classmethod
    def _role(cls, value: Any) -> Any:
        # Untrusted plans may carry anything here; `assign_roles` sets every role from the plan's shape (a planner's
        # `side` is the one it keeps).
        return value if value in get_args(Role) else "step"


class Plan(BaseModel):
    """The planner's output (DESIGN.md schema)."""

    query: str
    requires_retrieval: bool = True
    hyde_document: str | None = None
    subqueries: list[SubQuery] = Field(default_factory=list)

    @field_validator("query", mode="before")
    @classmethod
    def _query(cls, value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError("query must be a string")
        return " ".join(value.split())

    @field_validator("hyde_document", mode="before")
    @classmethod
    def _hyde(cls, value: Any) -> str | None:
        # An optional aid to the search: anything but text is dropped rather than sinking the plan.
        return value.strip() or None if isinstance(value, str) else None

    @field_validator("requires_retrieval", mode="before")
    @classmethod
    def _requires_retrieval(cls, value: Any) -> bool:
        # Only a clear "no" skips retrieval; anything unreadable means the safe default, retrieve.
        if isinstance(value, str):
            return value.strip().lower() not in ("false", "no", "0")
        return value is not False and value != 0 if isinstance(value, (bool, int)) else True


class PlanIssue(BaseModel):
    """One broken rule."""

    code: str
    message: str
    subquery_id: str | None = None


class ExecutedPlan(Plan):
    """The plan that ran, with its provenance: the `plan` of a QueryResult."""

    origin: PlanOrigin
    notes: list[str] = Field(default_factory=list, description="Repairs made, or why it fell back.")
    layers: list[list[str]] = Field(default_factory=list)


PLAN_FIELDS = ("query", "requires_retrieval", "hyde_document", "subqueries")


class PlanParseError(ReplyParseError):
    """The text holds no JSON object that fits the Plan schema."""


# --- parse ------------------------------------------------------------------------------------------

def parse_plan(text: str, question: str) -> Plan:
    """Parse an LLM reply into a Plan; raises PlanParseError naming what is wrong."""
    try:
        data = extract_json_object(text)
    except ReplyParseError as error:
        raise PlanParseError(str(error)) from None
    if not PLAN_FIELDS & data.keys():  # e.g. one subquery object out of a reply cut short
        fields = ", ".join(PLAN_FIELDS)
        if cut_short(text):  # a small model that repeats a subquery runs into the reply's token cap
            raise PlanParseError(f"the reply was cut off before its JSON object closed, and what it holds is not a "
                                 f"plan: it has none of the fields {fields}")
        raise PlanParseError(f"the JSON object is not a plan: it has none of the fields {fields}")
    if not isinstance(data.get("query"), str) or not data["query"].strip():
        data["query"] = question
    subqueries = data.get("subqueries")
    if isinstance(subqueries, list):
        # Common shorthands: a bare list of strings, or objects without ids. Number them s1..sn.
        data["subqueries"] = [
            {"id": f"s{i}", "text": item} if isinstance(item, str)
            else {**item, "id": f"s{i}"} if isinstance(item, dict) and item.get("id") is None
            else item
            for i, item in enumerate(subqueries, start=1)
        ]
    try:
        return Plan.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'plan'}: {e['msg']}" for e in error.errors()[:5]
        )
        raise PlanParseError(f"the JSON does not fit the plan schema ({problems})") from None


# --- validate ---------------------------------------------------------------------------------------

def _query_limit(question: str) -> int:
    """Longest acceptable standalone rewrite of the question, or subquery: the question itself (the single-query
    plan's one subquery) and a bridge hop over it (`{s1} <the question>`) always fit, however long the question."""
    return max(MAX_SUBQUERY_CHARS, 2 * len(question))


def _is_grounded(subquery_text: str, question_words: set[str]) -> bool:
    if not question_words:  # "Who is he?" has no content word to share
        return True
    return bool(set(content_words(PARENT_REFERENCE.sub(" ", subquery_text))) & question_words)


def validate_plan(plan: Plan, *, question: str, subquery_max: int) -> list[PlanIssue]:
    """Every rule the plan breaks (empty list: the plan is valid)."""
    issues: list[PlanIssue] = []
    if plan.requires_retrieval and not plan.subqueries:
        issues.append(PlanIssue(code="no_subqueries", message="retrieval is required but there are no subqueries"))
    if len(plan.subqueries) > subquery_max:
        issues.append(
            PlanIssue(code="too_many", message=f"{len(plan.subqueries)} subqueries, at most {subquery_max}")
        )
    if len(plan.query) > _query_limit(question):
        issues.append(PlanIssue(code="query_too_long",
                                message=f"the query is {len(plan.query)} characters, at most {_query_limit(question)}"))
    elif not _is_grounded(plan.query, set(content_words(question))):
        issues.append(PlanIssue(code="query_off_topic", message="the query shares no content word with the question"))
    question_words = set(content_words(question)) | set(content_words(plan.query))
    all_ids = {sq.id for sq in plan.subqueries}
    repeats = _repeated_searches(plan.subqueries)
    seen: set[str] = set()
    for sq in plan.subqueries:
        if sq.id in seen:
            issues.append(PlanIssue(code="duplicate_id", message=f"id {sq.id!r} repeats", subquery_id=sq.id))
        if not sq.text.strip():
            issues.append(PlanIssue(code="empty_text", message=f"{sq.id} has no text", subquery_id=sq.id))
        elif len(sq.text) > _query_limit(question):
            issues.append(
                PlanIssue(code="text_too_long", message=f"{sq.id} is over {_query_limit(question)} characters",
                          subquery_id=sq.id)
            )
        elif not _is_grounded(sq.text, question_words):
            issues.append(
                PlanIssue(code="off_topic", message=f"{sq.id} shares no content word with the question",
                          subquery_id=sq.id)
            )
        if sq.id in repeats:
            issues.append(PlanIssue(code="repeated_search", subquery_id=sq.id,
                                    message=f"{sq.id} repeats an earlier subquery's search"))
        if _only_combines(sq):
            issues.append(PlanIssue(
                code="combine_step", subquery_id=sq.id,
                message=f"{sq.id} only combines {', '.join(sq.parents)} (it refers to none of them as {{sN}}): "
                        "the answer is written from the searches, there is nothing to search for"))
        for parent in sq.parents:
            if parent == sq.id:
                issues.append(PlanIssue(code="self_parent", message=f"{sq.id} is its own parent", subquery_id=sq.id))
            elif parent not in seen:
                code, where = ("forward_parent", "later") if parent in all_ids else ("unknown_parent", "unknown")
                issues.append(
                    PlanIssue(code=code, message=f"{sq.id} names {where} parent {parent!r}", subquery_id=sq.id)
                )
        seen.add(sq.id)
    if _has_cycle(plan):
        issues.append(PlanIssue(code="cycle", message="the parent links form a cycle"))
    return issues


def _only_combines(sq: SubQuery) -> bool:
    """A subquery with several parents that names none of them ("Which was decided first?" after one search
    per case) asks to combine answers, which search cannot do. Small LLMs add such steps."""
    return len(set(sq.parents)) >= 2 and not any(f"{{{parent}}}" in sq.text for parent in sq.parents)


def _repeated_searches(subqueries: list[SubQuery]) -> set[str]:
    """Ids of subqueries that search exactly what an earlier one searches and that no subquery builds on, so
    dropping them loses nothing. The same text (case and spacing aside) is the same search: the parents whose
    findings it uses are named in it (`{s1}`), the others only order the searches. Small LLMs write the same
    search three times ("Which country is Dunmere in?" as s2, s3 and s4)."""
    named = {parent for sq in subqueries for parent in sq.parents}
    searched: set[str] = set()
    repeats: set[str] = set()
    for sq in subqueries:
        search = " ".join(sq.text.lower().split())
        if search in searched and sq.id not in named:
            repeats.add(sq.id)
        searched.add(search)
    return repeats


def _graph(plan: Plan) -> nx.DiGraph:
    graph = nx.DiGraph()
    ids = {sq.id for sq in plan.subqueries}
    graph.add_nodes_from(ids)
    graph.add_edges_from(
        (parent, sq.id) for sq in plan.subqueries for parent in sq.parents if parent in ids and parent != sq.id
    )
    return graph


def _has_cycle(plan: Plan) -> bool:
    return not nx.is_directed_acyclic_graph(_graph(plan))


# --- repair -----------------------------------------------------------------------------------------

def repair_plan(plan: Plan, *, question: str, subquery_max: int) -> tuple[Plan, list[str]]:
    """Fix what is safe to fix; returns the new plan and a note per repair. Never raises.

    Safe means no subquery's meaning changes: bad subqueries are dropped, bad links are cut, ids are
    renamed (to ids the plan does not use, so no link changes target). Whether the result is usable is
    for `validate_plan` to say.
    """
    notes: list[str] = []
    query = plan.query
    if len(query) > _query_limit(question):
        notes.append(f"replaced the {len(query)}-character query with the question")
        query = question
    elif not _is_grounded(query, set(content_words(question))):
        notes.append(f"replaced the query {query[:80]!r} (no content word of the question) with the question")
        query = question
    question_words = set(content_words(question)) | set(content_words(query))

    kept: list[SubQuery] = []
    for sq in plan.subqueries:
        if not sq.text.strip():
            notes.append(f"dropped {sq.id}: empty text")
        elif len(sq.text) > _query_limit(question):
            notes.append(f"dropped {sq.id}: over {_query_limit(question)} characters")
        elif not _is_grounded(sq.text, question_words):
            notes.append(f"dropped {sq.id}: shares no content word with the question")
        else:
            kept.append(sq.model_copy(deep=True))

    if len(kept) > subquery_max:
        notes.append(f"kept the first {subquery_max} of {len(kept)} subqueries")
        kept = kept[:subquery_max]

    used = {sq.id for sq in kept}
    taken: set[str] = set()
    fresh = (f"s{n}" for n in itertools.count(1))
    for sq in kept:
        if sq.id in taken:
            new_id = next(i for i in fresh if i not in used)
            used.add(new_id)
            notes.append(f"renamed duplicate id {sq.id} to {new_id}")
            sq.id = new_id
        taken.add(sq.id)

    ids = [sq.id for sq in kept]
    position = {sq_id: i for i, sq_id in enumerate(ids)}
    for i, sq in enumerate(kept):
        parents: list[str] = []
        unknown: list[str] = []
        for parent in sq.parents:
            if parent == sq.id:
                if f"removed self-parent of {sq.id}" not in notes:
                    notes.append(f"removed self-parent of {sq.id}")
            elif parent not in position:
                unknown.append(parent)
            elif parent not in parents:
                parents.append(parent)
        if unknown:
            more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
            shown = ", ".join(repr(p) for p in unknown[:3]) + more
            notes.append(f"removed unknown parent{'s' if len(unknown) > 1 else ''} {shown} of {sq.id}")
        sq.parents = parents
        # Every edge that points backwards in list order is kept, so what remains is acyclic.
        forward = [p for p in sq.parents if position[p] > i]
        if forward:
            candidate = Plan(query=query, subqueries=kept)
            if _has_cycle(candidate):
                sq.parents = [p for p in sq.parents if position[p] < i]
                notes.append(f"cut parent link(s) {', '.join(forward)} -> {sq.id} to break a cycle")

    if any(position[p] > i for i, sq in enumerate(kept) for p in sq.parents):
        kept = [kept[position[node]] for node in nx.lexicographical_topological_sort(
            _graph(Plan(query=query, subqueries=kept)), key=lambda node: position[node])]
        notes.append("reordered subqueries so parents come first")

    # Judged on the links that are left; dropping one can leave another combining two, hence the loop.
    while combiners := {sq.id for sq in kept if _only_combines(sq)}:
        for sq in kept:
            if sq.id in combiners:
                notes.append(f"dropped {sq.id}: it only combines {', '.join(sq.parents)}")
        kept = [sq for sq in kept if sq.id not in combiners]
        for sq in kept:
            sq.parents = [p for p in sq.parents if p not in combiners]

    # After the combiners: cutting their links can make two searches the same.
    while repeats := _repeated_searches(kept):
        notes.extend(f"dropped {sq.id}: it repeats an earlier subquery's search" for sq in kept if sq.id in repeats)
        kept = [sq for sq in kept if sq.id not in repeats]

    if plan.requires_retrieval and not kept and plan.subqueries:
        notes.append("no usable subquery left")
    if len(notes) > MAX_NOTES:
        notes = [*notes[: MAX_NOTES - 1], f"and {len(notes) - MAX_NOTES + 1} more repairs"]
    return plan.model_copy(update={"query": query, "subqueries": kept}), notes


# --- layer ------------------------------------------------------------------------------------------

def layer_plan(plan: Plan) -> list[list[str]]:
    """Topological generations of the DAG; within a layer, the plan's order. Raises on a cycle."""
    graph = _graph(plan)
    order = {sq.id: i for i, sq in enumerate(plan.subqueries)}
    try:
        return [sorted(layer, key=order.__getitem__) for layer in nx.topological_generations(graph)]
    except nx.NetworkXUnfeasible:
        raise ValueError("the plan's parent links form a cycle") from None


def single_query_plan(question: str) -> Plan:
    """The baseline plan: the question itself as the only subquery."""
    return Plan(query=question, subqueries=[SubQuery(id="s1", text=question)])


def assign_roles(plan: Plan) -> Plan:
    """The plan with every subquery's role set from its shape (see `Role`).

    A subquery that searches the plan's query itself (the same content words, no `{sN}`) is the question; one
    that asks the question's words again about the question's own search (`{s1}` + the question) is the bridge;
    any other that refers to a parent is a hop; a side keeps the role its planner gave it (a name made of stopwords
    leaves a side with the question's content words); anything else is a step.
    """
    asked = content_words(plan.query)
    questions = {sq.id for sq in plan.subqueries
                 if asked and sq.role != "side" and not parent_references(sq.text) and content_words(sq.text) == asked}
    subqueries = []
    for sq in plan.subqueries:
        references = parent_references(sq.text)
        if references and references == sq.parents and len(sq.parents) == 1 and sq.parents[0] in questions \
                and content_words(PARENT_REFERENCE.sub(" ", sq.text)) == asked:
            role: Role = "bridge"
        elif references:
            role = "hop"
        elif sq.role == "side":  # a side may share every content word with the question ("Over Under")
            role = "side"
        elif asked and content_words(sq.text) == asked:
            role = "question"
        else:
            role = "step"
        subqueries.append(sq.model_copy(update={"role": role}))
    return plan.model_copy(update={"subqueries": subqueries})


def with_question_searched(plan: ExecutedPlan) -> ExecutedPlan:
    """The plan, searching the question as asked: DESIGN.md's invariant under every planner.

    A plan none of whose subqueries searches the question (role `question`) gains one, `s0` (or the first free
    `sN`), with the plan's query as its text, in the first layer: whatever a planner wrote (an LLM's narrower
    searches, a comparison's sides, a user's own plan), the single path's ranking is among the candidates. Its
    turn in the evidence budget (`select_sources` goes by plan order): after a comparison's sides and their
    chains, which split the question by name and each need their own document; before anything else a planner
    wrote, as the rule planner's bridge puts the question first. A plan that needs no retrieval, or already
    searches the question, is returned as it is. Never raises.
    """
    if not plan.requires_retrieval or not plan.subqueries or any(sq.role == "question" for sq in plan.subqueries):
        return plan
    ids = {sq.id for sq in plan.subqueries}
    question = SubQuery(id=next(f"s{i}" for i in itertools.count() if f"s{i}" not in ids), text=plan.query,
                        role="question")
    comparison = any(sq.role == "side" for sq in plan.subqueries)
    subqueries = [*plan.subqueries, question] if comparison else [question, *plan.subqueries]
    searched = plan.model_copy(update={"subqueries": subqueries})
    return searched.model_copy(update={
        "layers": layer_plan(searched),
        "notes": [*plan.notes, f"added {question.id}: the question as asked (every plan searches it)"]})


def finalize_plan(
    plan: Plan, *, question: str, subquery_max: int, origin: PlanOrigin, notes: list[str] | None = None
) -> ExecutedPlan | None:
    """Validate, repair if needed, give every subquery its role, layer. None when the plan cannot be made valid."""
    notes = list(notes or [])
    issues = validate_plan(plan, question=question, subquery_max=subquery_max)
    if issues:
        plan, repairs = repair_plan(plan, question=question, subquery_max=subquery_max)
        if validate_plan(plan, question=question, subquery_max=subquery_max):
            return None
        notes += repairs
        if origin is PlanOrigin.LLM:
            origin = PlanOrigin.REPAIRED
    plan = assign_roles(plan)
    return ExecutedPlan(**plan.model_dump(), origin=origin, notes=notes, layers=layer_plan(plan))


def parent_references(text: str) -> list[str]:
    """The parent ids a subquery's text refers to as `{sN}`, in order."""
    return PARENT_REFERENCE.findall(text)


def resolve_references(text: str, answers: dict[str, str]) -> str:
    """Fill `{s1}`-style references to parents with what the parents found."""
    return PARENT_REFERENCE.sub(lambda m: answers.get(m.group(1), m.group(0)), text)
