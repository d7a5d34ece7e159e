"""Bridge chains deeper than two hops (work_flows/hopping/deeper.py) and bridge-comparisons (agents/rule_planner.py).

Pure tests of the depth rule over hand-made runs first, then end to end with the real small models over one
MuSiQue question's paragraphs, then the rule planner on 2Wiki's bridge-comparison questions.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from dagrag import Settings
from dagrag.agents.rule_planner import bridge_plan, find_bridge_comparison, plan_offline
from dagrag.core.names import KnownNames, word_beginnings
from dagrag.core.plan import Plan, PlanOrigin, SubQuery, finalize_plan
from dagrag.core.result import SubqueryReport
from dagrag.work_flows.evidence import select_sources
from dagrag.work_flows.hopping.deeper import apply_deepening, bridge_chain, name_search_words, next_hop
from dagrag.work_flows.hopping.skip import passages_handed_over
from dagrag.work_flows.policy import RetrievalPolicy, parents_kept, path_of
from dagrag.work_flows.progress import HopAdded
from dagrag.work_flows.run import QueryRun

from .conftest import ingested_workflow

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
POLICY = replace(RetrievalPolicy.from_settings(Settings()), bridge_deeper_hops=True, bridge_when_needed=True,
                 context_budget=4, subquery_max=4, attribution_top_n=1, coverage_min_score=0.1)
AIRPORT = "What is the main international airport in the birth place of the director of Hornets' Nest?"


def passage(node_id: str, text: str, score: float, title: str) -> NodeWithScore:
    return NodeWithScore(node=TextNode(id_=node_id, text=text, metadata={"title": title}), score=score)


def searched(run: QueryRun, sq_id: str, hits: list[NodeWithScore], *, covered: bool = True) -> None:
    run.ranked[sq_id] = hits
    run.reports[sq_id] = SubqueryReport(
        id=sq_id, text="", layer=run.layer_of(sq_id), status="covered" if covered else "uncovered",
        best_score=hits[0].score, kept_node_ids=[hits[0].node.node_id])


def two_hop_run() -> QueryRun:
    """s1 found the film (names its director), s2 the director (his birth place): the airport is still missing."""
    executed = finalize_plan(bridge_plan(AIRPORT), question=AIRPORT, subquery_max=4, origin=PlanOrigin.OFFLINE)
    assert executed is not None
    run = QueryRun(question=AIRPORT, plan=executed, path=path_of(POLICY, executed))
    searched(run, "s1", [passage("film", "Hornets' Nest is a 2009 film directed by Daniel Alfredson.", 0.9,
                                 "Hornets' Nest (film)"),
                         passage("film2", "The film was shot in Gothenburg.", 0.5, "Hornets' Nest (film)")])
    searched(run, "s2", [passage("dir", "Daniel Alfredson is a Swedish film director; his birth place is Stockholm.",
                                 0.95, "Daniel Alfredson"),
                         passage("dir2", "Alfredson directed three films.", 0.3, "Daniel Alfredson")])
    return run


# --- pure: when the chain grows, and when it stops ------------------------------------------------------

def test_a_third_hop_follows_the_last_hops_page_for_the_words_no_kept_page_explains():
    run = two_hop_run()
    assert bridge_chain(run.plan) == ["s1", "s2"]
    deepening = next_hop(POLICY, run)
    assert deepening is not None and deepening.hop is not None
    assert (deepening.hop.id, deepening.hop.text, deepening.hop.parents) == (
        "s3", "{s2} main international airport", ["s2"])
    assert len(deepening.notes) == 1 and deepening.notes[0].startswith("s3 added: main, international, airport")
    apply_deepening(run, deepening)
    assert run.plan.layers == [["s1"], ["s2"], ["s3"]] and run.plan.notes == list(deepening.notes)
    assert bridge_chain(run.plan) == ["s1", "s2", "s3"]
    assert parents_kept(run, run.plan.subqueries[2]) == {"film", "dir"}  # every ancestor's page, not only s2's


def test_a_deeper_hop_that_explains_a_missing_word_keeps_its_slot():
    run = two_hop_run()
    apply_deepening(run, next_hop(POLICY, run))
    searched(run, "s3", [passage("arn", "Stockholm Arlanda Airport is the main international airport of Stockholm.",
                                 0.9, "Stockholm Arlanda Airport")])
    assert next_hop(POLICY, run) is None  # every word explained: nothing left to hop for, nothing to note
    sources = select_sources(run.plan, passages_handed_over(POLICY, run), per_subquery=1, budget=4)
    assert [s.node_id for s in sources] == ["film", "dir", "arn", "film2"]


@pytest.mark.parametrize(("text", "score", "why"), [
    ("Stockholm has many museums.", 0.9, "explains none of the words s1, s2 left (main, international, airport)"),
    ("The main international airport of Oslo is Gardermoen.", 0.02, "found no page (best 0.020"),
])
def test_a_deeper_hop_that_adds_nothing_hands_over_nothing_and_the_chain_stops(text, score, why):
    run = two_hop_run()
    apply_deepening(run, next_hop(POLICY, run))
    searched(run, "s3", [passage("noise", text, score, "Elsewhere")], covered=score >= POLICY.coverage_min_score)
    deepening = next_hop(POLICY, run)
    assert deepening is not None and deepening.hop is None and deepening.idle == "s3"
    assert why in deepening.notes[0] and deepening.notes[-1] == "the chain stops"
    apply_deepening(run, deepening)
    assert run.reports["s3"].kept_node_ids == []
    sources = select_sources(run.plan, passages_handed_over(POLICY, run), per_subquery=1, budget=4)
    assert [s.node_id for s in sources] == ["film", "dir", "film2", "dir2"]  # what the two-hop plan handed over


@pytest.mark.parametrize(("searched_as", "moved"), [
    ("Stockholm main international airport", True),  # a name on s2's best page
    ("Gardermoen main international airport", False),  # a retry's name, from a page the chain did not reach
])
def test_a_deeper_hops_page_counts_only_when_a_search_from_the_previous_hops_best_page_found_it(searched_as, moved):
    run = two_hop_run()
    apply_deepening(run, next_hop(POLICY, run))
    searched(run, "s3", [passage("arn", "Gardermoen is the main international airport of Oslo.", 0.9, "Gardermoen")])
    run.searched_as["s3"] = searched_as
    deepening = next_hop(POLICY, run)
    if moved:
        assert deepening is None  # every word explained: the chain is done, s3 keeps its slot
        return
    assert deepening is not None and deepening.idle == "s3" and deepening.hop is None
    assert f"found by {searched_as!r}, a search from a page other than s2's best ('Daniel Alfredson')" in (
        deepening.notes[0])
    apply_deepening(run, deepening)
    sources = select_sources(run.plan, passages_handed_over(POLICY, run), per_subquery=1, budget=4)
    assert [s.node_id for s in sources] == ["film", "dir", "film2", "dir2"]


def test_a_rewritten_hop_or_an_unrecorded_search_is_not_judged_by_where_it_came_from():
    run = two_hop_run()
    apply_deepening(run, next_hop(POLICY, run))
    searched(run, "s3", [passage("arn", "Gardermoen is the main international airport of Oslo.", 0.9, "Gardermoen")])
    assert next_hop(POLICY, run) is None  # no query recorded
    run.searched_as["s3"] = run.rewritten["s3"] = "Which is the main international airport near Oslo?"
    assert next_hop(POLICY, run) is None  # a resolver's own search, with no parent left in it


@pytest.mark.parametrize(("question", "name", "words"), [
    # the opening clause (what is asked) and the name's own; the clause between describes another hop
    ("What part of the state, in which the actor is stuck in The Terminal, is Rochester in?", "Rochester",
     ["part", "state"]),
    ("Besides the continent of the river which the Tekeze River turns into, where did Germany have imperial "
     "interests?", "Germany", ["besides", "continent", "river", "imperial", "interests"]),
    ("Where are Gila monsters found, in the country of the party that Sergio belongs to?", "Gila",
     ["monsters", "found"]),
    ("Which river is Rochester on?", "Rochester", ["river"]),
    ("Which river is it on?", "Rochester", ["river"]),  # the name is not in the question as written: every word
    # the question's own wh-word opens no other clause: what is asked is "last olympics held"
    ("When was the last time the Olympics were held in the country that released Han Vodka?", "Han Vodka",
     ["last", "time", "olympics", "held", "country", "released"]),
])
def test_a_name_is_searched_with_the_words_of_the_opening_clause_and_its_own(question, name, words):
    assert name_search_words(question, name) == words


ROCHESTER = "What part of the state where the director of Hornets' Nest lives is Rochester in?"


def run_with_third_hop(question: str, first: NodeWithScore, second: NodeWithScore, third: str) -> QueryRun:
    """The rule planner's chain for `question` after s1 found `first` and s2 `second`: s3 (`third`) added."""
    executed = finalize_plan(bridge_plan(question), question=question, subquery_max=4, origin=PlanOrigin.OFFLINE)
    assert executed is not None
    run = QueryRun(question=question, plan=executed, path="dag")
    searched(run, "s1", [first])
    searched(run, "s2", [second])
    bridge = next_hop(POLICY, run)
    assert bridge is not None and bridge.hop is not None and bridge.hop.text == third
    apply_deepening(run, bridge)
    return run


def rochester_run(question: str = ROCHESTER) -> QueryRun:
    """s1 and s2 reach the director's state, s3's page explains nothing new: s4 searches the name "Rochester"."""
    run = run_with_third_hop(
        question, passage("film", "Hornets' Nest is a film directed by Daniel Alfredson.", 0.9, "Film"),
        passage("dir", "Daniel Alfredson lives in the state of New York.", 0.9, "Alfredson"), "{s2} part rochester")
    searched(run, "s3", [passage("ny", "New York is a state of the United States.", 0.9, "New York (state)")])
    deepening = next_hop(POLICY, run)
    assert deepening is not None and deepening.idle == "s3" and deepening.hop is not None
    hop = deepening.hop
    assert (hop.id, hop.text, hop.parents, hop.hints.must_include) == ("s4", "Rochester part", ["s3"], ["Rochester"])
    assert deepening.notes[1].startswith("s4 added: the question names 'Rochester'")
    apply_deepening(run, deepening)
    assert bridge_chain(run.plan) == ["s1", "s2", "s3", "s4"]
    return run


def test_a_name_the_question_gives_is_searched_as_written_though_no_page_has_its_words():
    # A misspelt or unlisted name ("Son of al Quada") still finds its page by how it is written; only the words of a
    # hop from the last page are held to the collection's.
    run = run_with_third_hop(
        ROCHESTER, passage("film", "Hornets' Nest is a film directed by Daniel Alfredson.", 0.9, "Film"),
        passage("dir", "Daniel Alfredson lives in the state of New York.", 0.9, "Alfredson"), "{s2} part rochester")
    searched(run, "s3", [passage("ny", "New York is a state of the United States.", 0.9, "New York (state)")])
    run.known_names = KnownNames(words=frozenset(word_beginnings(
        "Hornets' Nest is a film directed by Daniel Alfredson, who lives in the state of New York, in part.")))
    deepening = next_hop(POLICY, run)
    assert deepening is not None and deepening.hop is not None and deepening.hop.text == "Rochester part"


def test_when_the_chain_stops_moving_a_name_the_question_gives_and_no_page_explains_is_searched_once():
    run = rochester_run()
    searched(run, "s4", [passage("kent", "Chatham is a town in Kent.", 0.5, "Chatham")])
    last = next_hop(replace(POLICY, subquery_max=8, context_budget=8), run)
    assert last is not None and last.hop is None and last.idle == "s4"  # "Rochester" is not searched again


def test_after_a_name_search_the_next_hop_asks_what_the_names_clauses_ask_that_its_page_leaves():
    run = rochester_run("What part of the state, where the director of Hornets' Nest lives, is Rochester in?")
    searched(run, "s4", [passage("roc", "Rochester is a city in Monroe County.", 0.9, "Rochester")])
    deepening = next_hop(replace(POLICY, subquery_max=8, context_budget=8), run)
    assert deepening is not None and deepening.hop is not None
    # "state" is on the director's page, found about another hop; Rochester's page does not say which state.
    assert (deepening.hop.id, deepening.hop.text, deepening.hop.parents) == ("s5", "{s4} part state", ["s4"])
    assert deepening.notes[0].startswith("s5 added: part, state on none of the kept pages since s4 found the page "
                                         "of 'Rochester', which the question names")


SIGNMARK = "What currency predated the Euro in the country Signmark is from?"


def test_a_deeper_hop_that_searched_a_name_the_question_gives_and_found_its_page_starts_the_chain_again():
    # A false start: the Euro's page, then a country it names; together they explain "currency" and "country".
    run = run_with_third_hop(
        SIGNMARK, passage("euro", "The euro is the currency of 19 member states, Estonia among them.", 0.7, "Euro"),
        passage("ee", "Estonia is a country whose president is Alar Karis.", 0.4, "Estonia"), "{s2} predated signmark")
    searched(run, "s3", [passage("sm", "Signmark is a Finnish rapper from Helsinki.", 0.6, "Signmark (rapper)")])
    deepening = next_hop(POLICY, run)
    assert deepening is not None and deepening.hop is not None
    # Counted on the Euro's and Estonia's pages only "predated" would be left; from Signmark's page on, all of it.
    assert deepening.hop.text == "{s3} currency predated euro country"
    assert "on none of the kept pages since s3 found the page of 'Signmark', which the question names" in (
        deepening.notes[0])


def test_a_word_no_passage_of_the_collection_holds_asks_for_no_hop():
    # The chain searches for what no kept page explains; a word no page of the collection has at all cannot be found
    # by any hop (black's documentation never writes "often"), so it neither grows the chain nor goes into the next
    # hop's search.
    pages = [hit.node.get_content() for hits in two_hop_run().ranked.values() for hit in hits]
    collection = " ".join([*pages, "Stockholm Arlanda Airport is the main airport of Stockholm."])
    run = two_hop_run()
    run.known_names = KnownNames(words=frozenset(word_beginnings(collection)))
    deepening = next_hop(POLICY, run)
    assert deepening is not None and deepening.hop is not None
    assert deepening.hop.text == "{s2} main airport"  # "international" is on no page of the collection
    run = two_hop_run()
    run.known_names = KnownNames(words=frozenset(word_beginnings(" ".join(pages))))
    deepening = next_hop(POLICY, run)  # no page has the words left: nothing a hop could find, and the notes say so
    assert deepening is not None and deepening.hop is None and deepening.idle is None
    assert deepening.notes == ("no hop after s2: main, international, airport on none of the kept pages, and on no "
                               "page of the collection",)
    assert next_hop(POLICY, two_hop_run()).hop.text == "{s2} main international airport"  # no words recorded


def test_without_a_name_search_every_page_of_the_chain_counts():
    run = two_hop_run()  # s2 reached Daniel Alfredson, whom the question does not name
    deepening = next_hop(POLICY, run)
    assert deepening is not None and deepening.hop is not None
    assert "kept pages of s1, s2, and" in deepening.notes[0] and "which the question names" not in deepening.notes[0]


def test_no_hop_when_the_last_hop_explained_nothing_new_or_the_plan_is_full():
    run = two_hop_run()
    searched(run, "s2", [passage("same", "Hornets' Nest was directed by Daniel Alfredson.", 0.9, "Reviews")])
    assert next_hop(POLICY, run) is None  # s2 moved the chain nowhere: no page worth following
    assert next_hop(replace(POLICY, context_budget=2), two_hop_run()) is None  # budget 2: no third hop, no note
    full = two_hop_run()
    apply_deepening(full, next_hop(POLICY, full))
    searched(full, "s3", [passage("arn", "Arlanda is an airport near Stockholm.", 0.9, "Arlanda")])
    deepening = next_hop(replace(POLICY, context_budget=3), full)
    assert deepening is not None and deepening.hop is None and deepening.idle is None
    assert deepening.notes[0].startswith("no hop after s3: main, international still to find")
    assert "SUBQUERY_MAX / CONTEXT_BUDGET" in deepening.notes[0]
    assert next_hop(replace(POLICY, bridge_deeper_hops=False), two_hop_run()) is None


def test_only_the_rule_planners_chain_grows():
    llm_plan = finalize_plan(Plan(query=AIRPORT, subqueries=[
        SubQuery(id="s1", text="Who directed Hornets' Nest?"),
        SubQuery(id="s2", text="Where was {s1} born?", parents=["s1"])]), question=AIRPORT, subquery_max=4,
        origin=PlanOrigin.LLM)
    assert llm_plan is not None and bridge_chain(llm_plan) == []
    comparison = "Were Scott Derrickson and Ed Wood of the same nationality?"
    executed = finalize_plan(plan_offline(comparison), question=comparison, subquery_max=4, origin=PlanOrigin.OFFLINE)
    assert executed is not None and bridge_chain(executed) == []


def test_the_rule_is_a_setting_on_by_default(monkeypatch):
    assert RetrievalPolicy.from_settings(Settings()).bridge_deeper_hops is True
    monkeypatch.setenv("DAGRAG_BRIDGE_DEEPER_HOPS", "false")
    assert RetrievalPolicy.from_settings(Settings()).bridge_deeper_hops is False


# --- end to end: a MuSiQue three-hop question with the real models --------------------------------------

MIDWAY = "In which country is Midway, in the same county as McRae in the same state as KAGH-FM?"


@pytest.fixture(scope="module")
def musique_workflow(tmp_path_factory: pytest.TempPathFactory, embed_model, reranker):
    """A workflow over the 20 paragraphs MuSiQue gives with the Midway question (its gold chain is three pages)."""
    records = [json.loads(line) for line in (SHARED / "musique_train_sample.jsonl").read_text("utf-8").splitlines()]
    record = next(r for r in records if r["question"] == MIDWAY)
    folder = tmp_path_factory.mktemp("musique-midway")
    (folder / "midway.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    return ingested_workflow(folder / "midway.jsonl", folder / "qdrant", "midway", embed_model, reranker)


@pytest.mark.skipif(not (SHARED / "musique_train_sample.jsonl").exists(), reason="needs ../shared/data")
async def test_a_three_hop_question_grows_a_third_hop_that_reaches_the_last_page(musique_workflow):
    handler = musique_workflow().run(query=MIDWAY)
    [added] = [event async for event in handler.stream_events() if isinstance(event, HopAdded)]
    result = await handler
    assert added.subquery.id == "s3" and added.subquery.parents == ["s2"] and added.layers == result.plan.layers
    assert added.reason.startswith("s3 added: ") and added.reason in result.plan.notes
    assert [sq.id for sq in result.plan.subqueries] == ["s1", "s2", "s3"]
    assert result.plan.subqueries[2].parents == ["s2"] and result.plan.layers == [["s1"], ["s2"], ["s3"]]
    assert any(note.startswith("s3 added: ") for note in result.plan.notes)
    titles = {s.metadata["title"] for s in result.sources}
    assert {"KAGH-FM", "McRae, Arkansas", "Midway (near Pleasant Plains), White County, Arkansas"} <= titles
    two_hops = await musique_workflow(bridge_deeper_hops=False).run(query=MIDWAY)
    assert [sq.id for sq in two_hops.plan.subqueries] == ["s1", "s2"]


# --- the rule planner: bridge-comparisons as two chains --------------------------------------------------

def test_a_bridge_comparison_becomes_two_chains_one_layer_each():
    question = "Who was born first, the director of film Kiss Me Kate or the director of film The Cell?"
    plan = plan_offline(question)
    assert [(sq.id, sq.text, sq.parents) for sq in plan.subqueries] == [
        ("s1", "Kiss Me Kate director", []), ("s2", "Cell director", []),
        ("s3", "{s1} born first", ["s1"]), ("s4", "{s2} born first", ["s2"])]
    executed = finalize_plan(plan, question=question, subquery_max=4, origin=PlanOrigin.OFFLINE)
    assert executed is not None and executed.layers == [["s1", "s2"], ["s3", "s4"]] and not executed.notes
    assert len(plan_offline(question, subquery_max=3).subqueries) < 4  # no room for two chains: no chains


@pytest.mark.parametrize("question", [
    "Which film director is younger, Ed Wood or Scott Derrickson?",  # the directors are the entities
    "Were Scott Derrickson and Ed Wood of the same nationality?",
])
def test_a_plain_comparison_is_no_bridge_comparison(question):
    assert find_bridge_comparison(question) is None


@pytest.mark.skipif(not (SHARED / "2wiki_dev_sample.jsonl").exists(), reason="needs ../shared/data")
def test_every_2wiki_bridge_comparison_is_planned_as_two_chains_and_nothing_else_is():
    records = [json.loads(line) for line in (SHARED / "2wiki_dev_sample.jsonl").read_text("utf-8").splitlines()]
    assert any(r["type"] == "bridge_comparison" for r in records)
    for record in records:
        plan = finalize_plan(plan_offline(record["question"]), question=record["question"], subquery_max=4,
                             origin=PlanOrigin.OFFLINE)
        assert plan is not None
        two_chains = len(plan.layers) == 2 and len(plan.layers[0]) == 2 and all(
            len(sq.parents) == 1 and sq.parents[0] in plan.layers[0] for sq in plan.subqueries[2:])
        assert two_chains == (record["type"] == "bridge_comparison"), record["question"]
