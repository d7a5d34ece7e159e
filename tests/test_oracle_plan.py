"""evalkit/data.py: MuSiQue's gold decompositions as the oracle's plan, "X >> relation" steps as questions."""

from __future__ import annotations

import sys

import pytest

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "experiments"))

from evalkit.data import Example, decomposition_plan, natural_step


@pytest.mark.parametrize(("step", "question"), [
    ("#1 >> place of birth", "What is the place of birth of #1?"),
    ("Hello Love >> performer", "Who is the performer of Hello Love?"),
    ("Johnnycake, West Virginia >> located in the administrative territorial entity",
     "In which administrative territory is Johnnycake, West Virginia located?"),
    ("Margraviate of #2 >> instance of", "What is Margraviate of #2 an instance of?"),
    ("Midway (near Pleasant Plains), #2 , #1 >> country",
     "In which country is Midway (near Pleasant Plains), #2 , #1?"),
    ("Who was in charge of #2 ?", "Who was in charge of #2 ?"),  # already a question: left as written
])
def test_relation_steps_read_as_questions(step, question):
    assert natural_step(step) == question


def test_the_oracle_plan_keeps_its_references_and_links():
    example = Example(id="x", question="Who was in charge of the country of the composer of Aschenbrodel?",
                      answers=["Karl Renner"], type="3hop1", paragraphs=[],
                      decomposition=["Aschenbrödel >> composer", "#1 >> country of citizenship",
                                     "Who was in charge of #2 ?"])
    plan = decomposition_plan(example)
    assert plan is not None
    assert [(sq["text"], sq["parents"]) for sq in plan["subqueries"]] == [
        ("Who is the composer of Aschenbrödel?", []),
        ("What is the country of citizenship of {s1}?", ["s1"]),
        ("Who was in charge of {s2} ?", ["s2"])]
