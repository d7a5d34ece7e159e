"""select_sources (work_flows/evidence.py): which ranked passages reach the writer, and whose they are. Pure."""

from __future__ import annotations

from llama_index.core.schema import NodeWithScore, TextNode

from dagrag.core.plan import ExecutedPlan, PlanOrigin, SubQuery
from dagrag.work_flows.evidence import select_sources

QUESTION = "When was the senior member of the presidential campaign of Donald Trump born?"


def plan_of(*subquery_ids: str) -> ExecutedPlan:
    subqueries = [SubQuery(id=sq_id, text=f"{QUESTION} ({sq_id})") for sq_id in subquery_ids]
    return ExecutedPlan(query=QUESTION, subqueries=subqueries, origin=PlanOrigin.GIVEN, layers=[list(subquery_ids)])


def ranking(*node_ids: str) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(id_=node_id, text=f"The page {node_id}."), score=1.0 - rank / 10)
            for rank, node_id in enumerate(node_ids)]


def picked(sources: list) -> list[tuple[str, str, int]]:
    return [(s.node_id, s.subquery_id, s.rank_in_subquery) for s in sources]


def test_every_subquerys_first_document_comes_before_any_second_one():
    sources = select_sources(plan_of("s1", "s2"), {"s1": ranking("a", "b", "c"), "s2": ranking("x", "y")},
                             per_subquery=1, budget=4)
    assert picked(sources) == [("a", "s1", 1), ("x", "s2", 1), ("b", "s1", 2), ("y", "s2", 2)]


def test_a_document_another_subquery_took_still_uses_up_that_rank():
    # s1's second page is s2's best ("Manafort" search found "David Urban"): s1's rank-2 turn is spent on it,
    # and the fourth slot goes to s2's runner-up, not s1's third page. Letting s1 skip to its third page won
    # one HotpotQA question and lost two MuSiQue ones (Henry Worrall, Akinoshu Kenji), whose gold page was a
    # hop's runner-up (README, MuSiQue results: "Also tried").
    ranked = {"s1": ranking("manafort", "urban", "russia-meeting"), "s2": ranking("urban", "ford-library"),
              "s3": ranking("ikeda")}
    sources = select_sources(plan_of("s1", "s2", "s3"), ranked, per_subquery=1, budget=4)
    assert picked(sources) == [("manafort", "s1", 1), ("urban", "s2", 1), ("ikeda", "s3", 1),
                               ("ford-library", "s2", 2)]
    assert sources[1].subquery_ids == ["s2", "s1"]  # the shared page is credited to both


def test_a_shared_first_document_is_that_subquerys_evidence_and_takes_no_second_slot_early():
    ranked = {"s1": ranking("a", "b"), "s2": ranking("a", "z")}
    sources = select_sources(plan_of("s1", "s2"), ranked, per_subquery=1, budget=2)
    assert picked(sources) == [("a", "s1", 1), ("b", "s1", 2)]
    assert sources[0].subquery_ids == ["s1", "s2"]


def test_the_budget_caps_the_sources_and_short_rankings_end_cleanly():
    ranked = {"s1": ranking("a"), "s2": ranking("a", "b", "c", "d", "e")}
    assert [s.node_id for s in select_sources(plan_of("s1", "s2"), ranked, per_subquery=2, budget=3)] == [
        "a", "b", "c"]
    assert select_sources(plan_of("s1", "s2"), {"s1": [], "s2": []}, per_subquery=1, budget=4) == []
