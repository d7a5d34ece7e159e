"""The hop rule (work_flows/hopping/skip.py): a bridge hop runs only when s1's passages leave part of the question
unexplained, and what a hop hands the writer. Pure tests first, then end to end with the real small models."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from hypothesis import given
from hypothesis import strategies as st
from llama_index.core.schema import NodeWithScore, TextNode

from dagrag import QueryWorkflow, Settings
from dagrag.agents.rule_planner import bridge_plan, plan_offline
from dagrag.core.plan import Hints, Plan, PlanOrigin, SubQuery, finalize_plan, layer_plan, single_query_plan
from dagrag.core.result import SubqueryReport
from dagrag.core.text import unexplained_words
from dagrag.work_flows.evidence import offers, select_sources, sources_within
from dagrag.work_flows.hopping import DocumentHops
from dagrag.work_flows.hopping.skip import (
    SCORE_TIE,
    STANDS_OUT,
    bridge_parent,
    deferred_order,
    document_of,
    evidence_order,
    hop_notes,
    passages_handed_over,
    question_page_passages,
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
    # h1 scores above s1's next passage (b, 0.95), so rule 3 leaves it its turn too
    run.ranked["s2"] = [passage("h1", "Hop page.", 0.97), passage("h2", "Hop runner-up.", 0.5)]
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


# --- pure: rule 3, where the hop's best passage bids for the budget ------------------------------------------

def covered_hop(run: QueryRun, *ranked: NodeWithScore) -> QueryRun:
    run.ranked["s2"] = list(ranked)
    run.reports["s2"] = SubqueryReport(id="s2", text="", layer=1, status="covered", best_score=ranked[0].score)
    return run


def kept(run: QueryRun, budget: int, policy: RetrievalPolicy = POLICY) -> list[str]:
    offered = offers(run.plan, passages_handed_over(policy, run), per_subquery=1)
    return [s.node_id for s in sources_within(evidence_order(policy, run, offered), budget=budget)]


def test_a_hop_passage_nothing_backs_goes_after_s1s_next_and_the_notes_say_so():
    run = covered_hop(uv_run(explained=False), passage("h1", "Hop page.", 0.6), passage("h2", "Hop runner-up.", 0.5))
    assert kept(run, 2) == ["a", "b"]  # what one search hands over: b scored 0.95 for the question, h1 0.6
    assert kept(run, 3) == ["a", "b", "h1"]  # behind s1's next, not out
    assert kept(run, 4) == ["a", "b", "h1", "h2"]
    assert [s.node_id for s in select_sources(run.plan, run.ranked, per_subquery=1, budget=2)] == ["a", "h1"]
    assert hop_notes(POLICY, run) == ["s2's best passage went after s1's next: s1's search did not rank it, and it "
                                      "scored 0.600 for its search against 0.950 for the question"]
    assert kept(run, 2, replace(POLICY, bridge_when_needed=False)) == ["a", "h1"]


def test_a_hop_passage_keeps_its_turn_when_s1s_search_ranked_it_too_or_it_scores_as_well():
    s1_fourth = uv_run(explained=False).ranked["s1"][3]
    both_found = covered_hop(uv_run(explained=False), s1_fourth)  # found by the hop and by s1 (0.8 < 0.95)
    assert kept(both_found, 2) == ["a", "d"] and hop_notes(POLICY, both_found) == []
    a_tie = covered_hop(uv_run(explained=False), passage("h1", "Hop page.", 0.95 - SCORE_TIE / 2),
                        passage("h2", "Hop runner-up.", 0.9))
    assert kept(a_tie, 2) == ["a", "h1"]
    # the hop's search is sure of it: its best stands STANDS_OUT above its runner-up, whatever s1's next scores
    stands_out = covered_hop(uv_run(explained=False), passage("h1", "Hop page.", 0.6),
                             passage("h2", "Hop runner-up.", 0.6 - STANDS_OUT))
    assert kept(stands_out, 2) == ["a", "h1"]


def test_when_s1s_next_stands_out_in_its_search_too_the_scores_decide():
    # b (0.95) stands as far above s1's following passage (0.3) as h1 (0.9) above the hop's runner-up: a gap backs
    # neither, and s1's next outscores the hop's best
    run = covered_hop(uv_run(explained=False), passage("h1", "Hop page.", 0.9, "Hop"),
                      passage("h2", "Hop runner-up.", 0.3, "Hop"))
    run.ranked["s1"][2:] = [passage("c", "More on installers.", 0.3, "Installer")]
    assert kept(run, 2) == ["a", "b"]
    assert hop_notes(POLICY, run) == ["s2's best passage went after s1's next: s1's search did not rank it, and it "
                                      "scored 0.900 for its search against 0.950 for the question"]
    outscores = covered_hop(uv_run(explained=False), passage("h1", "Hop page.", 0.97, "Hop"),
                            passage("h2", "Hop runner-up.", 0.3, "Hop"))
    outscores.ranked["s1"][2:] = [passage("c", "More on installers.", 0.3, "Installer")]
    assert kept(outscores, 2) == ["a", "h1"]
    # and when only the hop's best stands out, it keeps its turn whatever s1's next scores (above)


def test_a_hop_passage_from_s1s_best_document_goes_after_s1s_second_whatever_it_scores():
    # h1 outscores s1's second (b, 0.95) but is another section of s1's best page: the hop did not leave it
    run = covered_hop(uv_run(explained=False), passage("h1", "Another installer section.", 0.99, "Installer"),
                      passage("h2", "Hop runner-up.", 0.9))
    assert kept(run, 2) == ["a", "b"]
    assert kept(run, 4) == ["a", "b", "h1", "h2"]
    assert hop_notes(POLICY, run) == ["s2's best passage went after s1's next: s1's search did not rank it, and it "
                                      "is from s1's best document ('Installer'): the hop stayed on its parent's "
                                      "page, where s1's search put its own second passage first"]
    # what still backs it: it stands out in its own search; and the reason is s1's second passage, the one one
    # search keeps at budget 2, so when that is no new passage (the same text as s1's best) only scores decide
    stands_out = covered_hop(uv_run(explained=False), passage("h1", "Another installer section.", 0.99, "Installer"),
                             passage("h2", "Hop runner-up.", 0.99 - STANDS_OUT))
    assert kept(stands_out, 2) == ["a", "h1"]
    repeated = covered_hop(uv_run(explained=False), passage("h1", "Another installer section.", 0.99, "Installer"),
                           passage("h2", "Hop runner-up.", 0.9))
    best = repeated.ranked["s1"][0]
    repeated.ranked["s1"][1] = passage("b", best.node.get_content(), 0.95, "Installer")
    assert kept(repeated, 2) == ["a", "h1"]  # s1's next new passage is its third, and h1 outscores it


def test_without_the_cross_encoders_probabilities_the_turn_order_stands():
    run = covered_hop(uv_run(explained=False), passage("h1", "Hop page.", 0.6), passage("h2", "Hop runner-up.", 0.5))
    assert hop_notes(POLICY, run) != []  # with them, h1 would go after s1's next
    run.ledger.degrade("reranker", "ConnectionError", "dense order kept")
    offered = offers(run.plan, passages_handed_over(POLICY, run), per_subquery=1)
    assert DocumentHops(POLICY).evidence_order(run, offered) == offered
    assert hop_notes(POLICY, run) == []


@given(s1_scores=st.lists(st.floats(0, 1), min_size=1, max_size=5),
       hop_scores=st.lists(st.floats(0, 1), min_size=1, max_size=4),
       shared=st.booleans(), same_page=st.booleans())
def test_at_budget_two_the_hop_takes_the_single_paths_second_slot_only_when_backed(s1_scores, hop_scores, shared,
                                                                                   same_page):
    """The property of rule 3: s1's best is always kept; the second slot is the bridge hop's best passage only
    when s1's search ranked it too, it stands out in its own search (and s1's second does not stand out in s1's, or
    scores no higher), or it scores within SCORE_TIE of s1's second (the single path's) and is not from s1's best
    document, and it was found (rule 4); else it is s1's second."""
    s1_scores = sorted(s1_scores, reverse=True)
    run = run_of(bridge_plan(UV), UV)
    run.ranked["s1"] = [passage(f"q{i}", f"Question passage {i}.", score, "Question page")
                        for i, score in enumerate(s1_scores)]
    hop_page = "Question page" if same_page else "Hop page"
    hop = [passage(f"h{i}", f"Hop passage {i}.", score, hop_page) for i, score in enumerate(hop_scores)]
    if shared and len(s1_scores) > 2:
        hop[0] = passage("q2", "Question passage 2.", hop_scores[0], "Question page")  # s1 ranked it third
    covered_hop(run, *hop)
    chosen = kept(run, 2)
    assert chosen[0] == "q0"
    if len(s1_scores) == 1:
        assert chosen == ["q0", hop[0].node.node_id]
    else:
        runner_up = hop_scores[1] if len(hop_scores) > 1 else 0.0
        after_next = s1_scores[2] if len(s1_scores) > 2 else 0.0
        outscored = hop_scores[0] < s1_scores[1] - SCORE_TIE
        # standing out backs the hop unless s1's next stands out in its search too: then the scores decide
        stands_out = hop_scores[0] - runner_up >= STANDS_OUT and not (
            s1_scores[1] - after_next >= STANDS_OUT and outscored)
        backed = ((shared and len(s1_scores) > 2) or stands_out or (not outscored and not same_page))
        # rule 4: a hop passage its search did not find bids after the question's found ones
        unfound = hop_scores[0] < POLICY.coverage_min_score and max(s1_scores[1:]) >= POLICY.coverage_min_score
        assert chosen[1] == (hop[0].node.node_id if backed and not unfound else "q1")


# --- pure: rule 4, a hop's passage its search did not find ------------------------------------------------

def test_a_hop_passage_under_the_coverage_score_goes_after_the_questions_found_passages_and_the_notes_say_so():
    run = covered_hop(uv_run(explained=False), passage("h1", "Hop page.", 0.97, "Hop"),
                      passage("h2", "Hop noise.", 0.05, "Hop"))
    assert kept(run, 4) == ["a", "h1", "b", "c"]  # in turn order h2 (0.05) took the fourth slot from c (0.9)
    assert kept(run, 4, replace(POLICY, bridge_when_needed=False)) == ["a", "h1", "b", "h2"]
    assert hop_notes(POLICY, run) == ["s2's passage ranked 2 went after s1's found passages: it scored 0.050, under "
                                      "COVERAGE_MIN_SCORE 0.1"]
    # nothing the question's search found comes after it: it keeps its turn
    unfound_question = covered_hop(uv_run(explained=False), passage("h1", "Hop page.", 0.97, "Hop"),
                                   passage("h2", "Hop noise.", 0.05, "Hop"))
    unfound_question.ranked["s1"] = [unfound_question.ranked["s1"][0],
                                     *(passage(f"q{i}", f"Weak {i}.", 0.02) for i in range(3))]
    assert kept(unfound_question, 4) == ["a", "h1", "q0", "h2"]


@given(s1_scores=st.lists(st.floats(0, 1), min_size=1, max_size=5),
       hop_scores=st.lists(st.floats(0, 1), min_size=1, max_size=4))
def test_no_unfound_hop_passage_bids_before_a_passage_the_question_found(s1_scores, hop_scores):
    """The property of rule 4: it only moves the hops' passages under COVERAGE_MIN_SCORE, every other passage keeps
    its place relative to the others, and none of those moved bids before a found passage of the question's."""
    run = run_of(bridge_plan(UV), UV)
    run.ranked["s1"] = [passage(f"q{i}", f"Question passage {i}.", score, "Question page")
                        for i, score in enumerate(sorted(s1_scores, reverse=True))]
    covered_hop(run, *(passage(f"h{i}", f"Hop passage {i}.", score, "Hop page")
                       for i, score in enumerate(sorted(hop_scores, reverse=True))))
    offered = offers(run.plan, passages_handed_over(POLICY, run), per_subquery=1)
    order = evidence_order(POLICY, run, offered)
    unfound = [o for o in order if o.subquery_id == "s2" and o.score < POLICY.coverage_min_score]
    assert sorted(map(id, order)) == sorted(map(id, offered))
    assert [o for o in order if o not in unfound] == [o for o in deferred_order(POLICY, run, offered)
                                                      if o not in unfound]
    found = [i for i, o in enumerate(order) if o.subquery_id == "s1" and o.score >= POLICY.coverage_min_score]
    assert all(order.index(o) > found[-1] for o in unfound) if found else order == deferred_order(
        POLICY, run, offered)


# --- pure: rule 5, a hop's passages from the question's best document -----------------------------------------

def test_a_hops_runner_up_from_the_questions_best_document_goes_after_the_questions_found_passages():
    run = covered_hop(uv_run(explained=False), passage("h1", "Hop page.", 0.97, "Hop"),
                      passage("h2", "The installer page's sections again.", 0.5, "Installer"))
    assert kept(run, 4) == ["a", "h1", "b", "c"]  # in turn order h2 took the fourth slot from c, the question's third
    assert kept(run, 4, replace(POLICY, bridge_when_needed=False)) == ["a", "h1", "b", "h2"]
    assert hop_notes(POLICY, run) == ["s2's passage ranked 2 went after s1's found passages: it is from s1's best "
                                      "document ('Installer'), whose sections s1's search ranked without it"]
    # from another page, it is where the hop went: it keeps its turn
    elsewhere = covered_hop(uv_run(explained=False), passage("h1", "Hop page.", 0.97, "Hop"),
                            passage("h2", "The hop page's second section.", 0.5, "Hop"))
    assert kept(elsewhere, 4) == ["a", "h1", "b", "h2"] and hop_notes(POLICY, elsewhere) == []
    # the question's search ranked it too: two searches found it, and it keeps its turn
    ranked_twice = covered_hop(uv_run(explained=False), passage("h1", "Hop page.", 0.97, "Hop"),
                               passage("h2", "More on installers.", 0.5, "Installer"))
    assert kept(ranked_twice, 4) == ["a", "h1", "b", "h2"]  # h2 is c's text, which s1's search ranked third


def test_a_deeper_hops_runner_up_from_the_questions_best_document_goes_after_the_questions_found_passages():
    run = uv_run(explained=False)  # the chain grown by a deeper hop, as hopping/deeper.py grows it
    deeper = SubQuery(id="s3", text="{s2} installer plugins", parents=["s2"], role="hop")
    grown = run.plan.model_copy(update={"subqueries": [*run.plan.subqueries, deeper]})
    run.plan = grown.model_copy(update={"layers": layer_plan(grown)})
    covered_hop(run, passage("h1", "Hop page.", 0.97, "Hop"), passage("h2", "Hop page, second.", 0.9, "Hop"))
    run.ranked["s3"] = [passage("d1", "The installer page, its plugins section.", 0.99, "Installer"),
                        passage("d2", "The installer page once more.", 0.9, "Installer")]
    run.reports["s3"] = SubqueryReport(id="s3", text="", layer=2, status="covered", best_score=0.99)
    assert [sq.role for sq in run.plan.subqueries] == ["question", "bridge", "hop"]
    offered = offers(run.plan, passages_handed_over(POLICY, run), per_subquery=1)
    assert [o.hit.node.node_id for o in question_page_passages(POLICY, run, offered)] == ["d2"]
    # the deeper hop's best keeps its turn: it is what the hop's words were missing
    assert kept(run, 5) == ["a", "h1", "d1", "b", "h2"]
    assert kept(run, 5, replace(POLICY, bridge_when_needed=False)) == ["a", "h1", "d1", "b", "h2"]
    assert kept(run, 6) == ["a", "h1", "d1", "b", "h2", "c"]  # in turn order d2 took the sixth slot from c
    assert kept(run, 6, replace(POLICY, bridge_when_needed=False)) == ["a", "h1", "d1", "b", "h2", "d2"]


@given(s1_scores=st.lists(st.floats(0, 1), min_size=1, max_size=5),
       hop_scores=st.lists(st.floats(0, 1), min_size=1, max_size=4),
       hop_pages=st.lists(st.sampled_from(["Question page", "Other page"]), min_size=4, max_size=4))
def test_no_hop_passage_from_the_questions_best_document_bids_before_a_passage_the_question_found(
        s1_scores, hop_scores, hop_pages):
    """The property of rule 5: it moves only hop passages from the question's best document that the question's
    search did not rank, every other passage keeps its place relative to the others, and none of those moved bids
    before a found passage of the question's."""
    run = run_of(bridge_plan(UV), UV)
    run.ranked["s1"] = [passage(f"q{i}", f"Question passage {i}.", score, "Question page")
                        for i, score in enumerate(sorted(s1_scores, reverse=True))]
    covered_hop(run, *(passage(f"h{i}", f"Hop passage {i}.", score, hop_pages[i])
                       for i, score in enumerate(sorted(hop_scores, reverse=True))))
    offered = offers(run.plan, passages_handed_over(POLICY, run), per_subquery=1)
    order, moved = evidence_order(POLICY, run, offered), question_page_passages(POLICY, run, offered)
    assert sorted(map(id, order)) == sorted(map(id, offered))
    assert all(o.subquery_id == "s2" and o.rank > 0 and document_of(o.hit) == "Question page" for o in moved)
    found = [i for i, o in enumerate(order) if o.subquery_id == "s1" and o.score >= POLICY.coverage_min_score]
    assert all(order.index(o) > found[-1] for o in moved)


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
    # s2's second passage is one its search did not find (under COVERAGE_MIN_SCORE): s1's third found one goes first
    assert [(s.subquery_id, s.rank_in_subquery) for s in result.sources] == [("s1", 1), ("s2", 1), ("s1", 2), ("s1", 3)]
    assert any(note.startswith("s2's passage ranked 2 went after s1's found passages") for note in result.plan.notes)
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
