"""Abstaining when no kept passage answers: the pure rule, and the workflow on the real sample collection."""

from __future__ import annotations

import re

import pytest

from dagrag.agents.writer import NO_EVIDENCE_ANSWER
from dagrag.core.result import Source
from dagrag.work_flows.answerability import AnswerScore, abstain_reason, abstention_text, answer_score

ANSWERABLE = "Were Scott Derrickson and Ed Wood of the same nationality?"
OTHER_DOMAIN = "How do I roll back a Kubernetes deployment to its previous revision?"


def test_the_answer_score_is_the_best_of_every_passage_and_sentence_score() -> None:
    assert answer_score([0.2, 0.05], [[0.1, 0.9], [0.3]]) == AnswerScore(0.9, 1)
    assert answer_score([0.2, 0.7], [[0.1], []]) == AnswerScore(0.7, 2)
    assert answer_score([], []) == AnswerScore(0.0, None)
    with pytest.raises(ValueError):
        answer_score([0.2], [])  # every source needs its sentences' scores, even none


def test_abstain_under_the_threshold_only() -> None:
    assert abstain_reason(AnswerScore(0.05, 2), threshold=0.1) == (
        "no kept passage answers the question: the best, source [2], scores 0.050 against the question, "
        "under ABSTAIN_BELOW 0.1")
    assert abstain_reason(AnswerScore(0.1, 2), threshold=0.1) is None
    assert abstain_reason(AnswerScore(0.0, None), threshold=0.1) == "no passage was found"
    assert abstain_reason(AnswerScore(0.0, None), threshold=0.0) is None  # 0 turns abstaining off


def test_the_abstention_names_the_closest_sources() -> None:
    sources = [Source(node_id=f"n{n}", text="x", metadata={"title": f"Page {n}", "section": "Usage"}, score=0.01,
                      subquery_id="s1", rank_in_subquery=n, subquery_ids=["s1"]) for n in (1, 2, 3, 4)]
    text = abstention_text(sources)
    assert "does not seem to answer" in text
    assert "[1] Page 1 > Usage; [2] Page 2 > Usage; [3] Page 3 > Usage." in text and "Page 4" not in text
    assert abstention_text([]) == NO_EVIDENCE_ANSWER


async def test_a_question_from_another_domain_abstains_and_is_not_written_or_verified(make_workflow) -> None:
    result = await make_workflow().run(query=OTHER_DOMAIN)
    assert result.abstained and "under ABSTAIN_BELOW" in result.abstain_reason
    assert result.answer.startswith("The collection does not seem to answer this question.")
    assert result.sources  # the closest passages are still listed
    assert result.verification.method == "none: the answer abstained" and not result.backtracked_subqueries


async def test_an_answerable_question_does_not_abstain(make_workflow) -> None:
    result = await make_workflow().run(query=ANSWERABLE)
    assert not result.abstained and result.abstain_reason is None
    assert "[1]" in result.answer


async def test_abstain_below_zero_never_abstains(make_workflow) -> None:
    result = await make_workflow(abstain_below=0.0).run(query=OTHER_DOMAIN)
    assert not result.abstained and re.search(r"\[\d\]", result.answer)  # a cited answer from unrelated passages
