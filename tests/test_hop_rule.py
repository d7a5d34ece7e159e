"""The hop rule (work_flows/hopping/skip.py): a bridge hop runs only when s1's passages leave part of the question
unexplained, and what a hop hands the writer. Pure tests first, then end to end with the real small models."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from llama_index.core.schema import NodeWithScore, TextNode

from dagrag import QueryWorkflow, Settings
from dagrag.agents.rule_planner import bridge_plan, plan_offline
from dagrag.core.plan import Hints, Plan, PlanOrigin, SubQuery, finalize_plan, single_query_plan
from dagrag.core.result import SubqueryReport
from dagrag.core.text import unexplained_words
from dagrag.work_flows.evidence import select_sources
from dagrag.work_flows.hopping import DocumentHops
from dagrag.work_flows.hopping.skip import (
    bridge_parent,
    hop_notes,
    passages_handed_over,
    skip_reason,
)
from dagrag.work_flows.policy import RetrievalPolicy, kept_per_subquery, needs_retry, path_of, pool_size
from dagrag.work_flows.report import record_skipped_hop
from dagrag.work_flows.run import QueryRun

POLICY = replace(RetrievalPolicy.from_settings(Settings()), bridge_when_needed=True, context_budget=4,
                 attribution_top_n=1, coverage_min_score=0.1)
CORLISS = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
UV = "How do I enable UV for the default environment in Hatch?"


def passage(node_id: str, text: str, score: float, title: str = "Doc") -> NodeWithScore:
    return NodeWithScore(node=TextNode(id_=node_id, text=text, metadata={"title": title}), score=score)


def run_of(plan: Plan, question: str) -> QueryRun:
    executed = finalize_plan(plan, question=question, subquery_max=4, origin=PlanOrigin.GIVEN)
    assert executed is not None
    return QueryRun(question=question, plan=executed, path=path_of(POLICY, executed))


# --- pure: what "explained" means, which hops the rule is for -----------------------------------------

def test_words_match_on_their_first_five_letters_and_short_words_exactly():
    passages = ["Enabling the installer: set `installer = \"uv\"` in the default environments table of Hatch."]
    assert unexplained_words(UV, passages) == []  # enable~enabling, environment~environments, uv exactly
    assert unexplained_words("Which environ var holds the path?", passages) == ["var", "holds", "path"]
    assert unexplained_words(CORLISS, ["Kiss and Tell is a 1945 American comedy film starring then 17-year-old "
                                       "Shirley Temple as Corliss Archer."]) == ["government", "position", "held",
                                                                                "woman", "portrayed"]


def test_the_rule_is_for_the_rule_planners_generic_bridge_hop_only():
    bridge = run_of(bridge_plan(CORLISS), CORLISS)
    assert bridge_parent(bridge.plan, bridge.plan.subqueries[1]) == "s1"
    assert bridge_parent(bridge.plan, bridge.plan.subqueries[0]) is None
    llm_hop = run_of(Plan(query=CORLISS, subqueries=[
        SubQuery(id="s1", text="Who portrayed Corliss Archer in the film Kiss and Tell?"),
        SubQuery(id="s2", text="What government position was held by {s1}?", parents=["s1"])]), CORLISS)
    assert bridge_parent(llm_hop.plan, llm_hop.plan.subqueries[1]) is None  # its parent asked something narrower
    comparison = run_of(plan_offline("Were Scott Derrickson and Ed Wood of the same nationality?"),
                        "Were Scott Derrickson and Ed Wood of the same nationality?")
    assert all(bridge_parent(comparison.plan, sq) is None for sq in comparison.plan.subqueries)


# --- pure: rule 1, skip a hop whose question s1 already explains ---------------------------------------

def uv_run(*, explained: bool, fourth_from: str = "Installer") -> QueryRun:
    """s1's five best for UV, s1 covered: the fourth holds the words the first leaves unexplained, if `explained`."""
    run = run_of(bridge_plan(UV), UV)
    last = "Set the installer to uv for the default environment." if explained else "Installers are plugins."
    run.ranked["s1"] = [passage("a", "How to select the installer: enable it in Hatch.", 0.99, "Installer"),
                        passage("b", "Testing configuration.", 0.95, "Testing"),
                        passage("c", "More on installers.", 0.9, "Installer"), passage("d", last, 0.8, fourth_from),
                        passage("e", "UV default environment, fifth.", 0.85, "Installer")]
    run.reports["s1"] = SubqueryReport(id="s1", text=UV, layer=0, status="covered", best_score=0.99)
    return run


def test_a_hop_whose_question_s1s_best_document_explains_is_skipped_and_says_why():
    run = uv_run(explained=True)
    s2 = run.plan.subqueries[1]
    reason = skip_reason(POLICY, run, s2)
    assert reason is not None and "every content word of the question" in reason and "'Installer'" in reason
    # Only the passages the single path would hand over count (the fifth is past the budget), and only
    # those of s1's best document: words spread over other documents are explained by accident.
    assert skip_reason(POLICY, uv_run(explained=False), s2) is None
    assert skip_reason(POLICY, uv_run(explained=True, fourth_from="Another page"), s2) is None
    assert skip_reason(replace(POLICY, bridge_when_needed=False), run, s2) is None
    assert skip_reason(POLICY, run, run.plan.subqueries[0]) is None  # s1 is no hop
    run.reports["s1"] = SubqueryReport(id="s1", text=UV, layer=0, status="uncovered", best_score=0.05)
    assert skip_reason(POLICY, run, s2) is None  # an s1 that found nothing sure explains nothing


def test_a_skipped_hop_is_reported_and_its_budget_goes_to_s1s_next_passages():
    run = uv_run(explained=True)
    s2 = run.plan.subqueries[1]
    record_skipped_hop(POLICY, run, s2, "s1 explains it")
    report = run.reports["s2"]
    assert (report.status, report.error, report.attempts, report.layer) == ("skipped", "s1 explains it", 0, 1)
    assert run.path == "single" and run.skipped_hops == {"s2": "s1 explains it"}
    assert run.reports["s1"].kept_node_ids == ["a", "b", "c", "d"]  # s1 now keeps what the single path keeps
    assert not needs_retry(POLICY, run, "s2")  # the critic leaves a skipped hop alone
    sources = select_sources(run.plan, passages_handed_over(POLICY, run),
                             per_subquery=kept_per_subquery(POLICY, run.path), budget=POLICY.context_budget)
    assert [(s.node_id, s.subquery_id) for s in sources] == [("a", "s1"), ("b", "s1"), ("c", "s1"), ("d", "s1")]
    assert hop_notes(POLICY, run) == ["s2 skipped: s1 explains it"]


# --- pure: rule 2, what a hop that ran hands over ----------------------------------------------------------

def test_a_covered_hop_keeps_its_share_as_before():
    run = uv_run(explained=False)
    run.ranked["s2"] = [passage("h1", "Hop page.", 0.9), passage("h2", "Hop runner-up.", 0.5)]
    run.reports["s2"] = SubqueryReport(id="s2", text="", layer=1, status="covered", best_score=0.9)
    sources = select_sources(run.plan, passages_handed_over(POLICY, run), per_subquery=1, budget=4)
    assert [s.node_id for s in sources] == ["a", "h1", "b", "h2"]
    assert hop_notes(POLICY, run) == []


def test_an_uncovered_hop_hands_over_nothing_and_the_notes_say_so():
    run = uv_run(explained=False)
    run.ranked["s2"] = [passage("h1", "Unrelated.", 0.03)]
    run.reports["s2"] = SubqueryReport(id="s2", text="", layer=1, status="uncovered", best_score=0.03)
    sources = select_sources(run.plan, passages_handed_over(POLICY, run), per_subquery=1, budget=4)
    assert [s.node_id for s in sources] == ["a", "b", "c", "d"]
    [note] = hop_notes(POLICY, run)
    assert note.startswith("s2 found nothing its parent names (best 0.030")


def test_a_one_subquery_plan_is_the_single_path_and_draws_enough_candidates_for_the_whole_budget():
    plan = Plan(query=UV, subqueries=[SubQuery(id="s1", text=UV, hints=Hints(top_k=2))])
    run = run_of(plan, UV)
    assert run.path == "single" and kept_per_subquery(POLICY, run.path) == POLICY.context_budget
    assert pool_size(POLICY, run, run.plan.subqueries[0], 1) == POLICY.context_budget  # not the hint's 2
    single = run_of(single_query_plan(UV), UV)
    assert pool_size(replace(POLICY, context_budget=8), single, single.plan.subqueries[0], 1) == 8


# --- end to end: the real models over the HotpotQA sample ----------------------------------------------

# Every word of it is on the film's page: nothing is left for a second hop to find.
FILM = "Which 1945 American comedy film starred Shirley Temple as Corliss Archer?"


async def test_a_question_s1_explains_skips_its_hop_and_hands_over_s1s_passages_like_one_search(make_workflow):
    result = await make_workflow().run(query=FILM)
    single = await make_workflow(planner_enable_dag=False).run(query=FILM)
    s1, s2 = result.subqueries
    assert s1.status == "covered" and s2.status == "skipped" and s2.attempts == 0 and s2.candidates == 0
    assert s2.error is not None and "every content word of the question" in s2.error
    assert any(note.startswith("s2 skipped: ") for note in result.plan.notes)
    assert result.path == "single" and result.retrieval_confidence_features["subquery_count"] == 1
    assert [(s.subquery_id, s.rank_in_subquery) for s in result.sources] == [("s1", rank) for rank in (1, 2, 3, 4)]
    assert [s.node_id for s in result.sources] == [s.node_id for s in single.sources]
    assert result.sources[0].metadata["title"] == "Kiss and Tell (1945 film)"


async def test_a_question_s1_leaves_unexplained_runs_its_hop(make_workflow):
    result = await make_workflow().run(query=CORLISS)
    assert result.path == "dag" and [r.status for r in result.subqueries] == ["covered", "covered"]
    assert not any("skipped" in note for note in result.plan.notes)
    assert [(s.subquery_id, s.rank_in_subquery) for s in result.sources] == [("s1", 1), ("s2", 1), ("s1", 2), ("s2", 2)]
    assert "Shirley Temple" in [s.metadata["title"] for s in result.sources]


async def test_with_the_rule_off_every_bridge_hop_runs_and_shares_the_budget(make_workflow):
    result = await make_workflow(bridge_when_needed=False).run(query=FILM)
    assert result.path == "dag" and [r.status for r in result.subqueries][1] in ("covered", "uncovered")
    assert result.subqueries[1].attempts >= 1 and not result.plan.notes
    assert {s.subquery_id for s in result.sources} == {"s1", "s2"}


def test_the_rule_is_a_setting_on_by_default(monkeypatch):
    assert RetrievalPolicy.from_settings(Settings()).bridge_when_needed is True
    monkeypatch.setenv("DAGRAG_BRIDGE_WHEN_NEEDED", "false")
    assert RetrievalPolicy.from_settings(Settings()).bridge_when_needed is False


async def test_a_one_subquery_plan_hands_over_the_whole_budget_as_the_single_path_does(make_workflow):
    narrow = Plan(query=FILM, subqueries=[SubQuery(id="s1", text=FILM, hints=Hints(top_k=2))])
    result = await make_workflow().run(query=FILM, plan=narrow)
    assert result.path == "single" and len(result.sources) == Settings().context_budget


async def test_a_hop_an_llm_wrote_runs_whatever_its_parent_found(make_workflow):
    written = Plan(query=FILM, subqueries=[
        SubQuery(id="s1", text=FILM),
        SubQuery(id="s2", text="Who directed the film {s1}?", parents=["s1"])])
    result = await make_workflow().run(query=FILM, plan=written)
    assert result.path == "dag" and result.subqueries[1].status != "skipped" and result.subqueries[1].attempts >= 1


async def test_a_plan_that_never_searches_the_question_still_has_the_single_paths_best_passage(make_workflow):
    # A small model's decomposition gives up the strongest search there is: the question itself. The workflow adds
    # it (s0, first), so the single path's best passage reaches the writer whatever the plan's searches find.
    narrow = Plan(query=CORLISS, subqueries=[
        SubQuery(id="s1", text="Who portrayed Corliss Archer?"),
        SubQuery(id="s2", text="What government position was held by {s1}?", parents=["s1"])])
    result = await make_workflow().run(query=CORLISS, plan=narrow)
    single = await make_workflow(planner_enable_dag=False).run(query=CORLISS)
    assert [(sq.id, sq.role) for sq in result.plan.subqueries] == [("s0", "question"), ("s1", "step"), ("s2", "hop")]
    assert result.plan.layers[0] == ["s0", "s1"] and "added s0" in result.plan.notes[-1]
    assert (result.sources[0].subquery_id, result.sources[0].node_id) == ("s0", single.sources[0].node_id)
    assert {r.id for r in result.subqueries} == {"s0", "s1", "s2"}


async def test_a_comparisons_sides_keep_their_turns_ahead_of_the_question(make_workflow):
    sides = Plan(query="Were Scott Derrickson and Ed Wood of the same nationality?", subqueries=[
        SubQuery(id="s1", text="Scott Derrickson nationality", role="side"),
        SubQuery(id="s2", text="Ed Wood nationality", role="side")])
    result = await make_workflow(context_budget=2).run(query=sides.query, plan=sides)
    assert [sq.id for sq in result.plan.subqueries] == ["s1", "s2", "s0"]
    assert [s.subquery_id for s in result.sources] == ["s1", "s2"]  # at budget 2 each side keeps its document


async def test_the_workflow_asks_the_hop_strategy_it_is_given(sample_store_path, embed_model, reranker):
    """`QueryWorkflow(hops=...)`: a user's strategy decides; here one that never hops makes the run one search."""

    class NeverHop(DocumentHops):
        def skip_reason(self, run: QueryRun, subquery: SubQuery) -> str | None:
            return "this collection answers in one search" if subquery.parents else None

    settings = Settings(qdrant_path=sample_store_path, collection="sample")
    build = partial(QueryWorkflow.from_settings, settings, embed_model=embed_model, reranker=reranker)
    result = await build(hops=NeverHop(RetrievalPolicy.from_settings(settings))).run(query=CORLISS)
    single = await QueryWorkflow.from_settings(settings.model_copy(update={"planner_enable_dag": False}),
                                               embed_model=embed_model, reranker=reranker).run(query=CORLISS)
    assert [(r.status, r.error) for r in result.subqueries][1] == ("skipped", "this collection answers in one search")
    assert result.path == "single" and [s.node_id for s in result.sources] == [s.node_id for s in single.sources]
    default = await build().run(query=CORLISS)
    assert default.path == "dag" and default.subqueries[1].status == "covered"
