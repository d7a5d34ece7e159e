"""Bridge hops: the pure candidate logic, the pooling, and two-hop questions end to end on the sample."""

from __future__ import annotations

from dataclasses import replace

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from dagrag.agents.rule_planner import find_comparison
from dagrag.agents.searcher import SearchHits, SearchRequest
from dagrag.core.language import ENGLISH
from dagrag.core.names import NAME_CONNECTORS, NO_NAMES, KnownNames, marked_spans, name_key, names_of_page
from dagrag.core.text import content_words
from dagrag.work_flows.hopping.bridge import (
    bridge_entities,
    bridge_queries,
    named_spans,
    opening_clause,
    page_of_entity,
    phrased_queries,
    titled_by,
)
from dagrag.work_flows.hopping.searches import Variant, pool_candidates

from .conftest import sample_records

CORLISS = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
KISS_AND_TELL = ("Kiss and Tell is a 1945 American comedy film starring then 17-year-old Shirley Temple as Corliss "
                 "Archer. In the film, two teenage girls cause their respective parents much concern when they start "
                 "to become interested in boys.")


def test_named_spans_skip_what_the_question_already_names_and_words_that_name_nothing():
    spans = named_spans(KISS_AND_TELL, CORLISS, limit=8)
    assert any("Shirley Temple" in s for s in spans)
    assert not any(s in ("Corliss Archer", "Kiss and Tell", "American", "In") for s in spans)


def test_named_spans_keep_quoted_titles_and_respect_the_limit():
    passage = 'She starred in "The Little Colonel" and Bright Eyes, then Heidi, Wee Willie Winkie and Baby Take a Bow.'
    assert "The Little Colonel" in named_spans(passage, "Which film?", limit=8)
    assert len(named_spans(passage, "Which film?", limit=2)) == 2


@pytest.mark.parametrize("connector", sorted(NAME_CONNECTORS))
def test_the_bridge_and_the_planner_join_a_name_over_the_same_connectors(connector):
    name = f"Alpha {connector} Beta"
    assert named_spans(f"It was built by {name}, then sold.", "Which ship?", limit=8) == [name]
    comparison = find_comparison(f"Who is older, {name} or Gamma Delta?")
    assert comparison is not None and comparison.entities == (name, "Gamma Delta")


def test_named_spans_read_capitals_beyond_ascii_and_titles_joined_by_to():
    passage = "Le Petit Lieutenant stars Élodie Bouchez, and its theme is from Time to Kill. It was shot in Łódź."
    assert named_spans(passage, "Which film?", limit=8) == [
        "Le Petit Lieutenant", "Élodie Bouchez", "Time to Kill", "Łódź"]


def test_a_hop_searches_the_childs_words_its_parents_page_does_not_contain():
    query = bridge_queries("{s1} " + CORLISS, "Kiss and Tell", KISS_AND_TELL, CORLISS, 1)[0]
    assert query.text.split()[-5:] == ["government", "position", "held", "woman", "portrayed"]


def test_bridge_queries_pair_each_entity_with_what_is_left_to_find():
    queries = bridge_queries("{s1} " + CORLISS, "Kiss and Tell (1945 film)", KISS_AND_TELL, CORLISS, limit=8)
    shirley = next(q for q in queries if "Shirley Temple" in q.entity)
    assert shirley.text.endswith("government position held woman portrayed")
    assert all("Corliss" not in q.entity for q in queries)


def test_a_bridge_entity_comes_from_the_passages_prose_not_from_its_code_blocks():
    # A docs chunk: the quoted tab name and string literals inside fences name no page another hop could reach.
    passage = ('```toml tab="config.toml"\n[dirs.env]\nvirtual = "~/.virtualenvs"\n```\n\n'
               'Environments of other types are stored as described in "Hatch Data".\n\n~~~python\nx = "Unclosed"')
    question = "Where does Hatch store environments by default?"
    entities = [q.entity for q in bridge_queries("{s1} " + question, "Configuration", passage, question, limit=8)]
    assert entities == ["Configuration", "Hatch Data"]


DOCS_PAGE = ("The `hatch env create` command builds the [matrix](environment.md#matrix) variants; `PIP_INDEX_URL` "
             "sets the index. Hatchling is the build backend.")
DOCS_NAMES = KnownNames(frozenset({"hatch env create", "matrix", "hatchling", "environments"}))


def test_names_of_a_page_are_its_title_headings_and_the_code_in_them_compared_case_folded():
    assert names_of_page("Environments", "Configuration > `hatch env create` > Options") == {
        "environments", "configuration", "hatch env create", "options"}
    assert names_of_page("Kiss and Tell") == {"kiss and tell"}
    assert name_key(" `Markdown.markdown()` ") == "markdown.markdown"
    assert marked_spans("a `x` b [link text](u.md) c `rst link <https://e.org>`_ d ``literal``") == [
        "x", "link text", "rst link"]


def test_a_hop_follows_the_code_and_links_of_a_page_only_where_the_collection_knows_the_name():
    question = "Which command builds the variants of the matrix?"
    plain = bridge_entities("Environments", DOCS_PAGE, question, 8)
    assert plain == bridge_entities("Environments", DOCS_PAGE, question, 8, known=NO_NAMES)
    assert plain == ["Environments", "PIP_INDEX_URL", "Hatchling"]  # capitals only
    # The command has a section in the collection; the variable has none; "matrix" is what the question names.
    assert bridge_entities("Environments", DOCS_PAGE, question, 8, known=DOCS_NAMES) == [
        "Environments", "PIP_INDEX_URL", "Hatchling", "hatch env create"]
    assert bridge_entities("Environments", DOCS_PAGE, question, 3, known=DOCS_NAMES) == plain  # names come first


def test_the_parents_title_is_a_candidate_when_the_question_does_not_name_it():
    queries = bridge_queries("{s1} Where was she born?", "Shirley Temple", "She was an actress.",
                             "Where was the actress who played Corliss Archer born?", limit=8)
    assert queries[0].entity == "Shirley Temple" and queries[0].text == "Shirley Temple born"


@pytest.mark.parametrize(("question", "clause"), [
    ("Who was in charge of the state where Shringarpur is located?", "Who was in charge of the state"),
    ("When was the last time the Olympics were held in the country that released Han Vodka?",
     "When was the last time the Olympics were held in the country"),
    ("To which group of mountains does the range belong?", "To which group of mountains does the range belong?"),
])
def test_the_opening_clause_is_what_the_question_asks_up_to_its_first_relative_clause(question, clause):
    assert opening_clause(question) == clause


def test_the_hop_reads_a_question_with_the_word_lists_of_the_language_it_is_given():
    # Another language is another `Language`: here one without clause openers or name openers. The whole question is
    # then one clause, and "The" stays part of the name it opens.
    bare = replace(ENGLISH, clause_openers=frozenset(), name_openers=frozenset())
    question = "Who was in charge of the state where Shringarpur is located?"
    assert opening_clause(question) == "Who was in charge of the state"
    assert opening_clause(question, language=bare) == question
    assert named_spans("The Harrowgate Players staged it.", "", 3) == ["Harrowgate Players"]
    assert named_spans("The Harrowgate Players staged it.", "", 3, language=bare) == ["The Harrowgate Players"]


def test_a_hop_searches_the_words_its_language_does_not_call_stopwords():
    # What a hop adds to the entity is the question's content words the parent's passage lacks; which words carry no
    # meaning is the language's word list, not English's.
    passage = "Ceelmakoile is a town in the central Hiran region of Somalia."
    question = "Who was in charge of the country Ceelmakoile is located in?"
    english = bridge_queries(f"{{s1}} {question}", "Ceelmakoile", passage, question, limit=1)
    assert [q.text for q in english] == ["Hiran charge country located"]
    fewer = replace(ENGLISH, stopwords=frozenset({"is", "in"}))
    searched = bridge_queries(f"{{s1}} {question}", "Ceelmakoile", passage, question, limit=1, language=fewer)
    assert [q.text for q in searched] == ["Hiran who was charge country located"]  # "of", "the": in the passage


def test_what_a_contraction_leaves_of_a_word_is_no_word_a_hop_searches():
    # A token ends at the apostrophe: "doesn't" leaves "doesn". Left as content words such remnants were the whole
    # of a deeper hop's search ("{s2} doesn know info").
    passage = "Ceelmakoile is a town in the central Hiran region of Somalia."
    question = "Why doesn't the country Ceelmakoile is located in have a president, and haven't you heard?"
    assert [q.text for q in bridge_queries(f"{{s1}} {question}", "Ceelmakoile", passage, question, limit=1)] == [
        "Hiran country located president heard"]
    assert content_words("Why won't it build, and isn't re the module I've named?") == [
        "won", "build", "re", "module", "ve"]


def test_phrased_queries_ask_the_opening_clause_about_each_entity_without_the_names_the_question_gives():
    passage = "Ceelmakoile is a town in the central Hiran region of Somalia."
    queries = phrased_queries("Ceelmakoile", passage, "Who was in charge of the country Ceelmakoile is located in?",
                              limit=8)
    assert [q.entity for q in queries] == ["Hiran", "Somalia"]
    assert queries[1].text == "Somalia Who was in charge of the country is located"
    boots = phrased_queries("Lee Hazlewood", "Barton Lee Hazlewood was a singer.",
                            "Who was the writer of These Boots Are Made for Walkin' and who died in 2007?", limit=1)
    assert [q.text for q in boots] == ["Lee Hazlewood Who was the writer"]  # the song named the first hop


@pytest.mark.parametrize(("title", "entity", "expected"), [
    ("Shirley Temple", "17-year-old Shirley Temple", True),
    ("Shirley Temple Black", "Shirley Temple", True),
    ("Kiss and Tell (1945 film)", "Kiss and Tell", True),
    ("Janet Waldo", "Shirley Temple", False),
    ("", "Shirley Temple", False),
])
def test_titled_by(title, entity, expected):
    assert titled_by(title, entity) is expected


def _hit(node_id: str, title: str, score: float) -> NodeWithScore:
    return NodeWithScore(node=TextNode(id_=node_id, text=title, metadata={"title": title}), score=score)


def test_pool_keeps_each_node_once_at_its_best_priority_and_lifts_titled_pages():
    a = Variant("s2", SearchRequest(text="Janet Waldo x", top_k=3), entity="Janet Waldo")
    b = Variant("s2", SearchRequest(text="Shirley Temple x", top_k=3), entity="Shirley Temple")
    hits = [SearchHits([_hit("1", "Janet Waldo", 0.5), _hit("2", "Meet Corliss Archer", 0.6)]),
            SearchHits([_hit("2", "Meet Corliss Archer", 0.7), _hit("3", "Shirley Temple", 0.45)])]
    pool = pool_candidates([a, b], hits, keep=3, title_boost=0.3)
    assert [(c.hit.node.node_id, round(c.priority, 2)) for c in pool] == [("1", 0.8), ("3", 0.75), ("2", 0.7)]
    assert pool[2].variant is b  # the variant that found it best is the query it is reranked against


@pytest.mark.parametrize(("title", "entity", "expected"), [
    ("Somalia", "Somalia", True),
    ("Shirley Temple", "17-year-old Shirley Temple", True),
    ("Margaret Sanger", "Margaret", False),  # a page about more than the entity
    ("", "Somalia", False),
    ("National Hockey League All-Star Game", "60th National Hockey League All-Star Game", False),  # the question's
])
def test_page_of_entity(title, entity, expected):
    question = 'Which position does the Captain of the National Hockey League All-Star Game "Away Team" play?'
    assert page_of_entity(title, entity, question) is expected


def test_a_phrased_search_keeps_only_the_entitys_own_page_and_it_is_scored_beyond_keep():
    keywords = Variant("s2", SearchRequest(text="Somalia charge located", top_k=3), entity="Somalia")
    phrased = Variant("s2", SearchRequest(text="Somalia Who was in charge", top_k=3), entity="Somalia", rescores=True)
    hits = [SearchHits([_hit("a", "Katherine Dhanani", 0.9), _hit("b", "Haw River", 0.8)]),
            SearchHits([_hit("c", "Republic of the Congo", 0.95), _hit("s", "Somalia", 0.1)])]
    pool = pool_candidates([keywords, phrased], hits, keep=1)
    assert [(c.hit.node.node_id, c.variant.rescores) for c in pool] == [("s", True), ("a", False)]


def test_pool_skips_failed_searches_and_excluded_nodes_and_cuts_to_keep():
    a = Variant("s2", SearchRequest(text="q", top_k=3))
    hits = [RuntimeError("down"), SearchHits([_hit("1", "A", 0.9), _hit("2", "B", 0.8), _hit("3", "C", 0.7)])]
    pool = pool_candidates([a, a], hits, exclude_node_ids=frozenset({"1"}), keep=1)
    assert [c.hit.node.node_id for c in pool] == ["2"]


async def test_corliss_archer_two_hops_find_shirley_temple(make_workflow):
    result = await make_workflow(context_budget=2).run(query=CORLISS)
    assert result.plan.layers == [["s1"], ["s2"]] and result.plan.subqueries[1].parents == ["s1"]
    titles = [s.metadata["title"] for s in result.sources]
    assert titles == ["Kiss and Tell (1945 film)", "Shirley Temple"]
    hop2 = result.subqueries[1]
    assert hop2.text.startswith("{s1}") and "Shirley Temple" in hop2.searched_as
    assert "Chief of Protocol" in result.answer


async def test_without_bridging_the_same_question_runs_one_search_and_misses_the_second_hop(make_workflow):
    result = await make_workflow(context_budget=2, planner_bridge=False).run(query=CORLISS)
    assert result.path == "single"
    assert "Shirley Temple" not in [s.metadata["title"] for s in result.sources]


@pytest.mark.slow
async def test_bridge_questions_of_the_sample_gain_joint_recall_over_the_single_query(make_workflow):
    bridges = [r for r in sample_records() if r["type"] == "bridge"][:8]
    joint = {}
    for name, overrides in {"single": {"planner_enable_dag": False}, "dag": {}}.items():
        workflow = make_workflow(context_budget=2, **overrides)
        hits = 0
        for record in bridges:
            titles = {s.metadata["title"] for s in (await workflow.run(query=record["question"])).sources}
            hits += set(record["supporting_titles"]) <= titles
        joint[name] = hits / len(bridges)
    assert joint["dag"] >= joint["single"] + 0.2, joint


async def test_the_critic_retries_weak_subqueries_with_a_wider_search(make_workflow):
    question = "Who is older, Annie Morton or Terry Richardson?"
    once = await make_workflow(subquery_max_iters=0, critic_min_score=1.0).run(query=question)
    retried = await make_workflow(subquery_max_iters=1, critic_min_score=1.0, subquery_topk_step=3).run(query=question)
    assert [r.attempts for r in once.subqueries] == [1, 1, 1]  # each side, then the question
    assert [r.attempts for r in retried.subqueries] == [2, 2, 2]
    for first, second in zip(once.subqueries, retried.subqueries):
        assert second.candidates > first.candidates  # the retry brought new candidates
        assert second.best_score >= first.best_score


async def test_the_critic_leaves_strong_subqueries_alone(make_workflow):
    result = await make_workflow(subquery_max_iters=3, critic_min_score=0.0).run(
        query="Who is older, Annie Morton or Terry Richardson?")
    assert [r.attempts for r in result.subqueries] == [1, 1, 1]
