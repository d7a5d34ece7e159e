"""The retrieval policy, tested directly as plan.py is: pure functions over a run's state, no models, no Qdrant."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from dagrag import Settings
from dagrag.core.language import ENGLISH
from dagrag.core.names import names_all
from dagrag.core.plan import Hints, Plan, PlanOrigin, SubQuery, finalize_plan
from dagrag.core.result import SentenceCheck, Source, SubqueryReport, Verification
from dagrag.core.search import SearchHits
from dagrag.work_flows.hopping import DocumentHops
from dagrag.work_flows.hopping.searches import (
    PooledCandidate,
    Variant,
    merge_scores,
    pool_candidates,
    side_code,
    subquery_searches,
    unscored,
)
from dagrag.work_flows.policy import (
    RetrievalPolicy,
    backtrack_targets,
    is_hop,
    kept_per_subquery,
    needs_retry,
    parents_kept,
    path_of,
    pool_size,
)
from dagrag.work_flows.report import record_search
from dagrag.work_flows.run import QueryRun, before_deadline

QUESTION = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
POLICY = replace(RetrievalPolicy.from_settings(Settings()), topk_base=5, topk_step=3, bridge_rerank_top=3,
                 max_retries=1, critic_min_score=0.2, coverage_min_score=0.1, bridge_max_entities=8)
HOPS = DocumentHops(POLICY)


def node(title: str, text: str, node_id: str | None = None) -> NodeWithScore:
    return NodeWithScore(node=TextNode(id_=node_id or title, text=text, metadata={"title": title}), score=0.9)


def bridge_run(**plan_overrides) -> QueryRun:
    plan = Plan(query=QUESTION, hyde_document="A passage.", subqueries=[
        SubQuery(id="s1", text=QUESTION),
        SubQuery(id="s2", text=f"{{s1}} {QUESTION}", parents=["s1"],
                 hints=Hints(synonyms=["post"], must_include=["Corliss Archer"]))], **plan_overrides)
    executed = finalize_plan(plan, question=QUESTION, subquery_max=4, origin=PlanOrigin.GIVEN)
    assert executed is not None
    return QueryRun(question=QUESTION, plan=executed, path=path_of(POLICY, executed))


KISS_AND_TELL = node("Kiss and Tell (1945 film)",
                     "Kiss and Tell is a 1945 American comedy film starring then 17-year-old Shirley Temple as "
                     "Corliss Archer.")


def test_the_policy_reads_its_knobs_from_settings_once():
    policy = RetrievalPolicy.from_settings(Settings(subquery_topk_base=7, bridge_rerank_top=2, subquery_max_iters=0,
                                                    planner_enable_dag=False, verify_backtrack=False))
    assert (policy.topk_base, policy.bridge_rerank_top, policy.max_retries) == (7, 2, 0)
    assert not policy.enable_dag and not policy.verify_backtrack


def test_one_subquery_or_the_dag_off_is_the_single_path():
    run = bridge_run()
    assert path_of(POLICY, run.plan) == "dag"
    assert path_of(replace(POLICY, enable_dag=False), run.plan) == "single"
    single = finalize_plan(Plan(query=QUESTION, subqueries=[SubQuery(id="s1", text=QUESTION)]), question=QUESTION,
                           subquery_max=4, origin=PlanOrigin.GIVEN)
    assert path_of(POLICY, single) == "single"
    assert kept_per_subquery(replace(POLICY, attribution_top_n=1, context_budget=4), "dag") == 1
    assert kept_per_subquery(replace(POLICY, attribution_top_n=1, context_budget=4), "single") == 4


def test_a_hop_is_a_subquery_still_naming_a_parent_when_searched():
    run = bridge_run()
    s1, s2 = run.plan.subqueries
    assert not is_hop(run, s1) and is_hop(run, s2)
    run.rewritten["s2"] = "What government position did Shirley Temple hold?"
    assert not is_hop(run, s2)


def test_pool_size_is_one_rule_for_hops_and_plain_subqueries_and_widens_on_retry():
    run = bridge_run()
    s1, s2 = run.plan.subqueries
    assert [pool_size(POLICY, run, s1, attempt) for attempt in (1, 2, 3)] == [5, 8, 11]
    assert [pool_size(POLICY, run, s2, attempt) for attempt in (1, 2)] == [3, 6]
    hinted = s1.model_copy(update={"hints": Hints(top_k=12)})
    assert pool_size(POLICY, run, hinted, 1) == 12
    run.rewritten["s2"] = "What government position did Shirley Temple hold?"
    assert pool_size(POLICY, run, s2, 1) == 5  # rewritten by an LLM: a plain search again


def test_a_plain_subquery_runs_one_search_and_a_retry_widens_it():
    run = bridge_run()
    s1 = run.plan.subqueries[0]
    [first] = subquery_searches(POLICY, run, s1, attempt=1)
    assert first.request.text == QUESTION and first.request.top_k == 5 and first.entity is None
    assert first.request.hyde is None  # the plan's HyDE passage is for the single path only
    s2_rewritten = run.plan.subqueries[1]
    run.rewritten["s2"] = "Shirley Temple government position"
    [retry] = subquery_searches(POLICY, run, s2_rewritten, attempt=2)
    assert retry.request.text == "Shirley Temple government position post Corliss Archer"
    assert retry.request.top_k == 8 and retry.request.must_include == ("Corliss Archer",)


def test_a_hop_searches_each_entity_its_parents_best_page_names():
    run = bridge_run()
    run.ranked["s1"] = [KISS_AND_TELL]
    variants = subquery_searches(POLICY, run, run.plan.subqueries[1], attempt=1)
    entities = [v.entity for v in variants]
    assert "Corliss Archer" not in entities  # the question already names it
    assert all(v.request.top_k == 3 and "{" not in v.request.text for v in variants)
    shirley = next(v for v in variants if "Shirley Temple" in (v.entity or ""))
    assert shirley.request.text.startswith(f"{shirley.entity} ") and "government" in shirley.request.text


def test_the_hop_strategy_searches_in_the_language_it_is_given():
    run = bridge_run()
    run.ranked["s1"] = [node("Salt and Ember", "The Harrowgate Players staged it in 1946.")]
    bare = DocumentHops(POLICY, replace(ENGLISH, name_openers=frozenset()))
    assert "Harrowgate Players" in {v.entity for v in HOPS.searches(run, run.plan.subqueries[1], 1)}
    assert "The Harrowgate Players" in {v.entity for v in bare.searches(run, run.plan.subqueries[1], 1)}


@pytest.mark.parametrize(("second_page_score", "widened"), [(0.6, True), (0.002, False)])
def test_a_hops_retry_widens_to_the_parents_next_page_only_when_the_reranker_found_it_relevant(
        second_page_score, widened):
    run = bridge_run()
    second = node("Meet Corliss Archer", "Meet Corliss Archer aired on CBS; Janet Waldo played the lead.", "m")
    run.ranked["s1"] = [NodeWithScore(node=KISS_AND_TELL.node, score=0.95),
                        NodeWithScore(node=second.node, score=second_page_score)]
    entities = {v.entity for v in subquery_searches(POLICY, run, run.plan.subqueries[1], attempt=2)}
    assert any("Shirley Temple" in (e or "") for e in entities)  # the best page's names, always
    assert any("Janet Waldo" in (e or "") for e in entities) is widened


def test_a_hop_whose_parent_found_nothing_searches_the_words_around_the_reference():
    run = bridge_run()
    [variant] = subquery_searches(POLICY, run, run.plan.subqueries[1], attempt=1)
    assert variant.request.text == QUESTION and variant.entity is None


def test_a_hop_may_not_reuse_what_its_parents_keep():
    run = bridge_run()
    run.reports["s1"] = SubqueryReport(id="s1", text=QUESTION, layer=0, status="covered", kept_node_ids=["a", "b"])
    run.reports["s3"] = SubqueryReport(id="s3", text="x", layer=0, status="covered", kept_node_ids=["c"])
    assert parents_kept(run, run.plan.subqueries[1]) == frozenset({"a", "b"})
    assert parents_kept(run, run.plan.subqueries[0]) == frozenset()


@pytest.mark.parametrize(("status", "best", "attempts", "retry"), [
    ("failed", None, 1, True),
    ("uncovered", 0.05, 1, True),
    ("covered", 0.15, 1, True),  # covered, but under CRITIC_MIN_SCORE
    ("covered", 0.9, 1, False),
    ("uncovered", 0.05, 2, False),  # its one retry is spent
])
def test_the_critic_retries_failed_uncovered_and_weak_subqueries_while_retries_are_left(status, best, attempts, retry):
    run = bridge_run()
    run.reports["s1"] = SubqueryReport(id="s1", text=QUESTION, layer=0, status=status, best_score=best)
    run.attempts["s1"] = attempts
    assert needs_retry(POLICY, run, "s1") is retry
    assert needs_retry(POLICY, run, "s2") is False  # not searched yet


def _sources() -> list[Source]:
    return [Source(node_id=n, text="t", score=0.9, subquery_id=sq, rank_in_subquery=1, subquery_ids=[sq])
            for n, sq in (("a", "s1"), ("b", "s2"))]


def _verification(*checks: tuple[bool, list[int]]) -> Verification:
    return Verification(sentences=[SentenceCheck(sentence="x", citations=c, supported=ok, method="lexical")
                                   for ok, c in checks])


def test_backtracking_targets_the_subqueries_behind_unsupported_sentences_once():
    run = bridge_run()
    run.deadline = float("inf")
    verification = _verification((True, [1]), (False, [2, 7]))  # [7] names no source: ignored
    assert backtrack_targets(POLICY, run, _sources(), verification) == ["s2"]
    assert backtrack_targets(POLICY, run, _sources(), _verification((True, [1]), (True, [2]))) == []
    assert backtrack_targets(replace(POLICY, verify_backtrack=False), run, _sources(), verification) == []
    run.backtracked = ["s2"]
    assert backtrack_targets(POLICY, run, _sources(), verification) == []  # once per run
    late = bridge_run()
    late.deadline = 0.0
    assert backtrack_targets(POLICY, late, _sources(), verification) == []


def test_only_unscored_candidates_meet_the_reranker_and_the_best_names_its_query():
    run = bridge_run()
    seen, fresh_node = node("Old", "old passage", "old"), node("New", "new passage", "new")
    run.ranked["s1"] = [NodeWithScore(node=seen.node, score=0.4)]
    variant = Variant("s1", subquery_searches(POLICY, run, run.plan.subqueries[0], 1)[0].request)
    pools = {"s1": pool_candidates([variant], [SearchHits(candidates=[seen, fresh_node])], keep=5)}
    fresh = unscored(run, pools)
    assert [c.hit.node.node_id for _, c in fresh] == ["new"]
    merge_scores(run, ["s1"], fresh, [0.8])
    assert [(h.node.node_id, h.score) for h in run.ranked["s1"]] == [("new", 0.8), ("old", 0.4)]
    assert run.searched_as["s1"] == QUESTION


def test_a_side_named_by_code_ranks_the_passages_that_name_it_first_led_by_its_own_section():
    question = "When would I pick --force-exclude over --exclude?"
    plan = Plan(query=question, subqueries=[
        SubQuery(id=f"s{i}", text=f"{side} pick", hints=Hints(must_include=[side]), role="side")
        for i, side in enumerate(["--force-exclude", "--exclude"], start=1)])
    executed = finalize_plan(plan, question=question, subquery_max=4, origin=PlanOrigin.GIVEN)
    run = QueryRun(question=question, plan=executed, path=path_of(POLICY, executed))
    passages = [node("Extend", "Use `--extend-exclude` to add to the default exclusions.", "extend"),
                node("Exclude", "`--exclude` is a regex of paths to skip.", "exclude"),
                node("Force", "Like `--exclude`, but files passed directly are skipped: `--force-exclude`.", "force")]
    variants = {sq_id: Variant(sq_id, subquery_searches(POLICY, run, run.plan.subqueries[n], 1)[0].request)
                for n, sq_id in enumerate(["s1", "s2"])}
    pools = {sq_id: pool_candidates([v], [SearchHits(candidates=passages)], keep=5) for sq_id, v in variants.items()}
    fresh = unscored(run, pools)
    scores = {"extend": 0.99, "exclude": 0.6, "force": 0.3}
    merge_scores(run, ["s1", "s2"], fresh, [scores[c.hit.node.node_id] for _, c in fresh])
    # --exclude is not named inside --extend-exclude; each side's passages that name it come first, by score.
    assert [h.node.node_id for h in run.ranked["s1"]] == ["force", "extend", "exclude"]
    assert [h.node.node_id for h in run.ranked["s2"]] == ["exclude", "force", "extend"]
    # Led by its own section: the passage under the heading `--exclude`, though another that names it scores higher,
    # and asked for: the side's search hints the sections its name heads.
    own = NodeWithScore(node=TextNode(id_="own", text="Paths listed in .gitignore are skipped by default.",
                                      metadata={"title": "The basics", "section": "Options > --exclude"}), score=0.9)
    merge_scores(run, ["s2"], [("s2", PooledCandidate(variants["s2"], own, 0.9))], [0.2])
    assert [h.node.node_id for h in run.ranked["s2"]] == ["own", "exclude", "force", "extend"]
    assert variants["s2"].request.sections == ("--exclude",)
    # The question itself and prose sides keep the cross-encoder's order.
    assert side_code(executed.subqueries[0]) == ["--force-exclude"]
    assert side_code(SubQuery(id="s3", text="Shirley Temple", hints=Hints(must_include=["Shirley Temple"]),
                              role="side")) == []
    assert not names_all("pass -s to skip", ["-S"])  # case kept: -S is not -s


def test_a_hops_retry_asks_in_the_questions_words_and_rescores_what_it_finds_keeping_each_pages_best():
    run = bridge_run()
    run.ranked["s1"] = [NodeWithScore(node=KISS_AND_TELL.node, score=0.95)]
    first = subquery_searches(POLICY, run, run.plan.subqueries[1], attempt=1)
    retry = subquery_searches(POLICY, run, run.plan.subqueries[1], attempt=2)
    assert not any(v.rescores for v in first)
    narrower = bridge_run()
    narrower.ranked["s1"] = run.ranked["s1"]
    narrower.rewritten["s2"] = "{s1} government position"  # a hop that asks less than the question: keywords
    assert not any(v.rescores for v in subquery_searches(POLICY, narrower, narrower.plan.subqueries[1], attempt=2))
    shirley = next(v for v in retry if v.entity and "Shirley Temple" in v.entity)
    assert shirley.rescores and shirley.request.text.endswith("What government position was held by the woman")
    keywords = next(v for v in retry if v.entity == shirley.entity and not v.rescores)  # still searched as well
    page = node("Shirley Temple", "x")
    weaker = NodeWithScore(node=page.node, score=0.2)
    both = pool_candidates([keywords, shirley], [SearchHits(candidates=[page]), SearchHits(candidates=[weaker])],
                           keep=5, title_boost=0.3)
    assert [(c.variant.rescores, round(c.priority, 2)) for c in both] == [(True, 1.2)]  # its best priority
    temple, other = node("Shirley Temple", "Temple was a US ambassador."), node("Other", "other passage")
    run.ranked["s2"] = [NodeWithScore(node=temple.node, score=0.05), NodeWithScore(node=other.node, score=0.3)]
    pools = {"s2": pool_candidates([shirley], [SearchHits(candidates=[temple, other])], keep=5)}
    # Temple's page was scored before, against the keywords: the phrased search scores it again. Any other page
    # matches the question's general words and is not what it asks about.
    fresh = unscored(run, pools)
    assert [c.hit.node.node_id for _, c in fresh] == ["Shirley Temple"]
    merge_scores(run, ["s2"], fresh, [0.9])
    merge_scores(run, ["s2"], fresh, [0.2])  # a page keeps its best score
    assert [(h.node.node_id, h.score) for h in run.ranked["s2"]] == [("Shirley Temple", 0.9), ("Other", 0.3)]
    assert run.searched_as["s2"] == shirley.request.text


def test_a_failed_retry_keeps_the_earlier_report_but_counts_the_attempt():
    run = bridge_run()
    s1 = run.plan.subqueries[0]
    run.ranked["s1"] = [NodeWithScore(node=KISS_AND_TELL.node, score=0.7)]
    first = record_search(POLICY, HOPS, run, s1, [SearchHits()], retry=False)
    assert first is not None and first.status == "covered" and first.kept_node_ids == [KISS_AND_TELL.node.node_id]
    assert record_search(POLICY, HOPS, run, s1, [RuntimeError("qdrant down")], retry=True) is None
    assert run.reports["s1"].status == "covered" and run.reports["s1"].attempts == 2
    failed = record_search(POLICY, HOPS, run, run.plan.subqueries[1], [RuntimeError("qdrant down")], retry=False)
    assert failed is not None and failed.status == "failed" and "qdrant down" in (failed.error or "")
    skipped = record_search(POLICY, HOPS, run, run.plan.subqueries[1], None, retry=False)
    assert skipped is not None and skipped.status == "skipped"


# --- the run deadline ---------------------------------------------------------------------------------------

async def test_a_run_without_a_deadline_never_runs_out_of_time_and_is_json():
    run = bridge_run()
    assert run.deadline is None and not run.out_of_time()
    assert await before_deadline(run.deadline, asyncio.sleep(0, result="done")) == "done"
    assert '"deadline":null' in run.model_dump_json(include={"deadline"})  # JSON has no Infinity


async def test_work_that_outlives_the_deadline_gives_none_and_a_passed_deadline_does_not_start_it():
    assert await before_deadline(time.perf_counter() + 0.05, asyncio.sleep(5, result="late")) is None
    late = asyncio.sleep(0, result="never")
    assert await before_deadline(time.perf_counter() - 1, late) is None
    assert late.cr_frame is None  # closed without running
