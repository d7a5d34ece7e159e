"""The prompts a small model sees: what they show, that their worked examples obey the rules they teach,
and how the replies they ask for are read."""

from __future__ import annotations

import json
import re

import pytest

from dagrag.agents.aggregator import AGGREGATE_SYSTEM, SUBANSWER_SYSTEM
from dagrag.agents.hyde import HYDE_SYSTEM
from dagrag.agents.planner import PLAN_SCHEMA, PLANNER_EXAMPLES, QueryPlannerAgent, example_plans
from dagrag.agents.resolver import RESOLVER_SYSTEM
from dagrag.agents.verifier import VERDICTS_SCHEMA, VERIFIER_SYSTEM
from dagrag.agents.writer import WRITER_SYSTEM
from dagrag.core.plan import Plan, parent_references, validate_plan
from dagrag.core.replies import declines, split_concise_answer
from dagrag.testing.openai_server import AGENT_MARKERS

SYSTEM_PROMPTS = {
    "planner": QueryPlannerAgent(subquery_max=4)._system_prompt(has_history=True),
    "writer": WRITER_SYSTEM.format(source_count=3, max_sentences=4),
    "verifier": VERIFIER_SYSTEM.format(),
    "resolver": RESOLVER_SYSTEM.format(),
    "hyde": HYDE_SYSTEM.format(),
    "subanswer": SUBANSWER_SYSTEM.format(source_count=3),
    "aggregator": AGGREGATE_SYSTEM.format(max_sentences=4),
}


@pytest.mark.parametrize("agent", sorted(SYSTEM_PROMPTS))
def test_each_prompt_reads_as_written(agent):
    prompt = SYSTEM_PROMPTS[agent]
    # The scripted server (and any log reader) tells the agents apart by these first words.
    assert prompt.startswith(AGENT_MARKERS[agent])
    # LlamaIndex's formatter keeps doubled braces as they are: "{{s1}}" would reach the model verbatim.
    assert "{{" not in prompt and "}}" not in prompt
    assert "Example" in prompt  # a small model follows a worked example, not a description


def test_the_planner_examples_are_plans_the_validator_accepts_and_teach_each_shape():
    shapes = set()
    for question, searches in PLANNER_EXAMPLES:
        plan = Plan.model_validate({"query": question, "subqueries": [
            {"id": f"s{i}", "text": text, "parents": parents} for i, (text, parents) in enumerate(searches, 1)]})
        assert validate_plan(plan, question=question, subquery_max=4) == [], question
        for sq in plan.subqueries:
            assert sq.text.endswith("?"), "searches are questions, never statements"
            assert set(parent_references(sq.text)) <= set(sq.parents)
        chained = [sq for sq in plan.subqueries if sq.parents]
        roots = [sq for sq in plan.subqueries if not sq.parents]
        depth = max((int(sq.parents[0][1:]) for sq in chained), default=0)
        shapes.add("single" if len(plan.subqueries) == 1 else
                   "comparison" if not chained else
                   "bridge-comparison" if len(roots) > 1 else
                   "three-hop" if depth >= 2 else "bridge")
    assert shapes == {"single", "comparison", "bridge", "three-hop", "bridge-comparison"}


def test_examples_that_need_more_searches_than_allowed_are_left_out():
    shown = example_plans(subquery_max=2)
    replies = [json.loads(line) for line in shown.splitlines() if line.startswith("{")]
    assert replies and all(len(r["subqueries"]) <= 2 for r in replies)
    assert len(replies) < len(PLANNER_EXAMPLES)
    assert "At most 2 searches" in QueryPlannerAgent(subquery_max=2)._system_prompt(has_history=False)


def test_the_history_rule_is_shown_only_with_a_chat_history():
    planner = QueryPlannerAgent(subquery_max=4)
    assert "stand alone" in planner._system_prompt(has_history=True)
    assert "stand alone" not in planner._system_prompt(has_history=False)


def _strict(schema: dict) -> None:
    """OpenAI's strict structured outputs: every object lists all its properties as required, no others."""
    if schema.get("type") == "object":
        assert schema["additionalProperties"] is False
        assert sorted(schema["required"]) == sorted(schema["properties"])
        for child in schema["properties"].values():
            _strict(child)
    if schema.get("type") == "array":
        _strict(schema["items"])


@pytest.mark.parametrize("schema", [PLAN_SCHEMA, VERDICTS_SCHEMA], ids=lambda s: s.name)
def test_reply_schemas_are_strict_and_describe_their_fields(schema):
    _strict(schema.schema)
    leaves = []

    def walk(node: dict) -> None:
        if node.get("type") == "object":
            for child in node["properties"].values():
                walk(child)
        elif node.get("type") == "array" and node["items"].get("type") == "object":
            walk(node["items"])
        else:
            leaves.append(node)
    walk(schema.schema)
    # Without a description in the schema a small model under a grammar fills fields with anything.
    assert leaves and all(leaf.get("description") for leaf in leaves)


@pytest.mark.parametrize(("reply", "concise", "text"), [
    ("Answer: Nokia\nNokia was founded in 1865 [1].", "Nokia", "Nokia was founded in 1865 [1]."),
    ("**Answer:** Yes.\n\nBoth are American [1][2].", "Yes", "Both are American [1][2]."),
    ("answer: 1865", "1865", "1865"),
    ("Answer: Nokia was founded first [1].", "Nokia was founded first", "Nokia was founded first [1]."),
    ("Answer: unknown\nThe sources do not say when Ericsson was founded.", None,
     "The sources do not say when Ericsson was founded."),
    ("Nokia was founded first [1].", None, "Nokia was founded first [1]."),
    ("The answer: see below [1].", None, "The answer: see below [1]."),
])
def test_the_concise_answer_line_is_split_from_the_cited_text(reply, concise, text):
    assert split_concise_answer(reply) == (concise, text)


@pytest.mark.parametrize(("reply", "declined"), [
    ("Answer: unknown\nThe sources do not say when Ericsson was founded.", True),
    ("**Answer:** Unknown [1].", True),
    ("\nAnswer: cannot be determined", True),
    ("Answer: none\nNeither of them was born in Ohio [1][2].", False),  # "none" answers "which of them?"
    ("Answer: Nokia\nNokia was founded in 1865 [1].", False),
    ("The sources do not say. Answer: unknown", False),  # only an answer line that opens the reply
    ("unknown", False),
])
def test_a_reply_declines_when_its_answer_line_says_the_sources_do_not_answer(reply, declined):
    assert declines(reply) is declined


def test_a_long_answer_line_is_not_a_concise_answer():
    reply = "Answer: " + "word " * 60 + "[1]."
    assert split_concise_answer(reply) == (None, reply)


def _worked_replies(prompt: str) -> list[str]:
    """Each worked example's reply: the text after "the whole reply is:" up to a blank line or the prompt's end."""
    return re.findall(r"the whole reply is:\n(.*?)(?:\n\n|$)", prompt, re.S)


def test_the_writers_worked_examples_are_replies_it_would_accept():
    replies = _worked_replies(SYSTEM_PROMPTS["writer"])
    assert replies, "the writer prompt shows at least one whole reply"
    for reply in replies:
        concise, text = split_concise_answer(reply)
        assert concise and len(concise.split()) <= 3, reply  # "as few words as possible"
        sentences = [s for s in text.split(". ") if s]
        assert 1 <= len(sentences) <= 4, reply
        cited = {int(n) for n in re.findall(r"\[(\d+)\]", text)}
        assert cited and cited <= {1, 2}, reply  # each example has two sources
        assert all(re.search(r"\[\d+\]\.?$", s.strip()) for s in sentences), reply  # every sentence cites
