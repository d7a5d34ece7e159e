"""The offline writer with the real cross-encoder: which sentences it quotes, and how it cites them."""

from __future__ import annotations

import asyncio

from dagrag.agents.writer import WriterAgent, in_context
from dagrag.core.plan import ExecutedPlan, PlanOrigin, SubQuery
from dagrag.core.result import RunLedger, Source

QUESTION = "Which town is the county seat of Brenton County?"
COUNTY_PAGE = ("Brenton County is a county in the state of Vellmark. The county was formed in 1827. "
               "It has a population of 12,000. Its county seat is Harrowgate.")
OTHER_PAGE = "Many counties in Vellmark moved their county seats in the 1900s. Most of them kept their courthouses."


def source(number: int, title: str, text: str) -> Source:
    return Source(node_id=f"n{number}", text=text, metadata={"title": title}, score=0.9, subquery_id="s1",
                  rank_in_subquery=number, subquery_ids=["s1"])


def one_search_plan(question: str) -> ExecutedPlan:
    return ExecutedPlan(query=question, subqueries=[SubQuery(id="s1", text=question)], origin=PlanOrigin.GIVEN,
                        layers=[["s1"]])


def test_a_sentence_is_read_after_its_documents_title() -> None:
    assert in_context("Its county seat is Harrowgate.", "Brenton County") == (
        "Brenton County: Its county seat is Harrowgate.")
    assert in_context("Brenton County is a county.", "Brenton County") == "Brenton County is a county."
    assert in_context("A sentence.", "") == "A sentence."


def test_the_answering_sentence_is_quoted_though_it_names_its_page_only_as_its(reranker) -> None:
    # Alone, "Its county seat is Harrowgate." is about nothing and scores under the page's other sentences;
    # read after its page's title it is the answer, and it is quoted so.
    writer = WriterAgent(reranker, max_sentences=2)
    sources = [source(1, "Brenton County", COUNTY_PAGE), source(2, "County seats of Vellmark", OTHER_PAGE)]
    answer = asyncio.run(writer.awrite(QUESTION, one_search_plan(QUESTION), sources, RunLedger()))
    assert "Brenton County: Its county seat is Harrowgate. [1]" in answer.text
    assert "[2]" not in answer.text
