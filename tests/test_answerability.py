"""Abstaining when no kept passage answers: the pure rules, and the workflow on the real sample collection and on a
real documentation page."""

from __future__ import annotations

import json
import re

import pytest

from dagrag.agents.writer import NO_EVIDENCE_ANSWER
from dagrag.core.names import KnownNames, Place, code_names, word_beginnings
from dagrag.core.result import Source, WrittenAnswer
from dagrag.work_flows.answerability import (
    AbstainBar,
    AnswerScore,
    abstain_bar,
    abstain_reason,
    abstention_text,
    answer_score,
    declined_reason,
    every_side_answered,
    joined_evidence,
    mentions,
    undocumented_member_reason,
    undocumented_members,
    undocumented_side_reason,
    undocumented_sides,
    unfound_names,
    what_the_writer_said,
)

from .conftest import ROOT, ingested_workflow

ANSWERABLE = "Were Scott Derrickson and Ed Wood of the same nationality?"
OTHER_DOMAIN = "How do I roll back a Kubernetes deployment to its previous revision?"


def test_the_answer_score_is_the_best_of_every_passage_and_sentence_score() -> None:
    assert answer_score([0.2, 0.05], [[0.1, 0.9], [0.3]]) == AnswerScore(0.9, 1)
    assert answer_score([0.2, 0.7], [[0.1], []]) == AnswerScore(0.7, 2)
    assert answer_score([], []) == AnswerScore(0.0, None)
    with pytest.raises(ValueError):
        answer_score([0.2], [])  # every source needs its sentences' scores, even none


def test_abstain_under_the_threshold_only() -> None:
    assert abstain_reason(AnswerScore(0.05, 2), AbstainBar(0.1)) == (
        "no kept passage answers the question: the best, source [2], scores 0.050 against the question, "
        "under ABSTAIN_BELOW 0.1")
    assert abstain_reason(AnswerScore(0.1, 2), AbstainBar(0.1)) is None
    assert abstain_reason(AnswerScore(0.0, None), AbstainBar(0.1)) == "no passage was found"
    assert abstain_reason(AnswerScore(0.0, None), AbstainBar(0.0)) is None  # 0 turns abstaining off


def test_the_code_a_question_names() -> None:
    assert code_names("What happens when I pass --line-ranges-auto?") == ["--line-ranges-auto"]
    assert code_names("What's the difference between -S and -C, i.e. which one skips?") == ["-S", "-C"]
    assert code_names("Compare nl2br, sane_lists and `legacy_em`, e.g. for markdown.Markdown()") == [
        "sane_lists", "legacy_em", "markdown.Markdown"]
    assert code_names("Are mypyc-compiled wheels faster in Black 24.1?") == []  # hyphenated words are prose too


def test_a_name_counts_as_found_as_a_reader_reads_the_passage() -> None:
    found = ["Use `--line-ranges` to format part of a file.", "Enable [sane lists](sane_lists.md) with `Sane_Lists`."]
    assert unfound_names(["--line-ranges", "sane_lists", "--line-ranges-auto", "legacy_em"], found) == [
        "--line-ranges-auto", "legacy_em"]

    def never_read():
        raise AssertionError("the passages were read for a question that names no code")
        yield ""
    assert unfound_names([], never_read()) == []


def test_code_no_passage_found_contains_raises_the_bar() -> None:
    raised = abstain_bar(abstain_below=0.1, unknown_name_below=0.5, unfound=["--line-ranges-auto"])
    assert raised == AbstainBar(0.5, ("--line-ranges-auto",), "ABSTAIN_UNKNOWN_NAME_BELOW")
    assert abstain_reason(AnswerScore(0.46, 1), raised) == (
        "no kept passage answers the question: the question names --line-ranges-auto, which no passage found "
        "contains, and the best, source [1], scores 0.460 against the question, under ABSTAIN_UNKNOWN_NAME_BELOW 0.5")
    assert abstain_reason(AnswerScore(0.5, 1), raised) is None
    assert abstain_bar(abstain_below=0.1, unknown_name_below=0.5, unfound=[]) == AbstainBar(0.1)
    assert abstain_bar(abstain_below=0.1, unknown_name_below=0.0, unfound=["x.y"]) == AbstainBar(0.1)
    assert abstain_bar(abstain_below=0.0, unknown_name_below=0.5, unfound=["x.y"]) == AbstainBar(0.0)  # still off


def test_a_member_the_collection_never_writes_of_a_namespace_it_does_is_undocumented() -> None:
    pages = "Flask supports async views with asyncio. Use click.echo to print; click.prompt asks. Config from request."
    known = KnownNames(frozenset({"flask"}), frozenset(word_beginnings(pages)))
    assert undocumented_members(["asyncio.TaskGroup"], known) == ["asyncio.TaskGroup"]
    assert undocumented_members(["@click.Spinner()"], known) == ["@click.Spinner()"]
    assert undocumented_members(["click.prompt"], known) == []  # documented
    assert undocumented_members(["trio.open_nursery"], known) == []  # a namespace the pages never write: no claim
    assert undocumented_members(["request.config"], known) == []  # a user's own attribute, in words the pages write
    assert undocumented_members(["build.yml"], known) == []  # a file's name, not a member
    assert undocumented_members(["[click.envs.frobnicator]"], known) == []  # a table of the user's own config
    assert undocumented_members(["asyncio.TaskGroup", "show_profile"], known) == []  # it also asks about other code
    assert undocumented_members(["asyncio.TaskGroup"], KnownNames(frozenset({"flask"}))) == []  # no words recorded
    assert undocumented_members([], known) == []
    reason = undocumented_member_reason(["asyncio.TaskGroup"], 0.1)
    assert reason is not None and "names asyncio.TaskGroup" in reason
    assert undocumented_member_reason(["asyncio.TaskGroup"], 0.0) is None  # abstaining off
    assert undocumented_member_reason([], 0.1) is None


def test_joined_evidence_reads_each_two_sources_best_sentences_together_in_source_order() -> None:
    sentences = [["a1", "a2"], [], ["c1", "c2", "c3"], ["d1"]]
    scores = [[0.01, 0.05], [], [0.02, 0.03, 0.001], [0.0]]
    assert joined_evidence(sentences, scores) == ["a2 c2", "a2 d1", "c2 d1"]  # the source without sentences: none
    assert joined_evidence([["a1"], []], [[0.5], []]) == []  # fewer than two sources with sentences
    with pytest.raises(ValueError):
        joined_evidence([["a1"], ["b1"]], [[0.5]])  # every source needs its sentences' scores


def test_joined_evidence_answers_only_at_its_own_bar_and_never_under_the_raised_one() -> None:
    bar = abstain_bar(abstain_below=0.1, unknown_name_below=0.5, unfound=[], joined_below=0.9)
    assert bar == AbstainBar(0.1, joined=0.9)
    best = AnswerScore(0.05, 2)
    assert abstain_reason(best, bar, joined=0.95) is None
    assert abstain_reason(best, bar, joined=0.6) == (
        "no kept passage answers the question: the best, source [2], scores 0.050 against the question, under "
        "ABSTAIN_BELOW 0.1; read together, two sources' best sentences score 0.600, under ABSTAIN_JOINED_BELOW 0.9")
    assert abstain_reason(best, bar) is not None  # not scored: no answer from it
    assert abstain_reason(best, AbstainBar(0.1), joined=0.99) is not None  # ABSTAIN_JOINED_BELOW 0: off
    raised = abstain_bar(abstain_below=0.1, unknown_name_below=0.5, unfound=["--line-ranges-auto"], joined_below=0.9)
    assert raised.joined == 0.0 and abstain_reason(AnswerScore(0.3, 1), raised, joined=0.99) is not None


def test_the_abstention_names_the_closest_sources() -> None:
    sources = [Source(node_id=f"n{n}", text="x", metadata={"title": f"Page {n}", "section": "Usage"}, score=0.01,
                      subquery_id="s1", rank_in_subquery=n, subquery_ids=["s1"]) for n in (1, 2, 3, 4)]
    text = abstention_text(sources)
    assert "does not seem to answer" in text
    assert "[1] Page 1 > Usage; [2] Page 2 > Usage; [3] Page 3 > Usage." in text and "Page 4" not in text
    assert abstention_text([]) == NO_EVIDENCE_ANSWER
    assert abstention_text(sources, undocumented=["fastapi"]).startswith(
        "The collection does not seem to document 'fastapi'. The closest passages: [1] Page 1 > Usage;")


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


# --- code the collection never mentions: black's command-line page, real models ---------------------------

BLACK_BASICS = ROOT / "experiments" / "data" / "docs_corpus" / "black" / "docs" / "usage_and_configuration"


@pytest.fixture(scope="module")
def docs_workflow(tmp_path_factory: pytest.TempPathFactory, embed_model, reranker):
    folder = tmp_path_factory.mktemp("black-basics")
    (folder / "the_basics.md").write_bytes((BLACK_BASICS / "the_basics.md").read_bytes())
    return ingested_workflow(folder, folder / "qdrant", "basics", embed_model, reranker)


async def test_an_option_the_collection_never_mentions_abstains(docs_workflow) -> None:
    near_miss = "What happens when I pass --line-ranges-auto?"  # black has --line-ranges, not this
    result = await docs_workflow().run(query=near_miss)
    assert result.abstained and "names --line-ranges-auto, which no passage found contains" in result.abstain_reason
    assert "ABSTAIN_UNKNOWN_NAME_BELOW" in result.abstain_reason
    # Without the higher bar the passages on --line-ranges answer it well enough for ABSTAIN_BELOW.
    assert not (await docs_workflow(abstain_unknown_name_below=0.0).run(query=near_miss)).abstained


async def test_a_member_of_a_documented_namespace_the_collection_never_writes_abstains(docs_workflow) -> None:
    """black's command-line page writes "black" on every line and nothing called a spinner: the passages on its
    output options would answer "show a progress spinner" well enough, and say nothing of `black.Spinner`."""
    result = await docs_workflow(abstain_unknown_name_below=0.0).run(
        query="How do I show a progress spinner with black.Spinner?")  # whatever the passages score
    assert result.abstained and "no page of the collection writes the member's name" in result.abstain_reason
    assert result.answer.startswith("The collection does not seem to document 'black.Spinner'. The closest passages:")
    assert not (await docs_workflow(abstain_below=0.0).run(query="What does black.Spinner show?")).abstained
    documented = await docs_workflow().run(query="Which keys does black read from tool.black in pyproject.toml?")
    assert not documented.abstained, documented.abstain_reason


async def test_an_option_the_collection_documents_is_answered(docs_workflow) -> None:
    result = await docs_workflow().run(query="What happens when I pass --line-ranges?")
    assert not result.abstained and "--line-ranges" in result.answer


def test_a_comparison_is_answered_side_by_side() -> None:
    basics = Place("The basics", "Usage > Command line options", "usage_and_configuration/the_basics.md")
    minus_s = (0.78, "-S, --skip-string-normalization: By default, Black uses double quotes for all strings.", basics)
    minus_c = (0.80, "-C, --skip-magic-trailing-comma: By default, Black uses existing trailing commas.", basics)
    assert every_side_answered([[minus_s], [minus_c]], [["-S"], ["-C"]], 0.1)
    assert not every_side_answered([[minus_s], [(0.05, *minus_c[1:])]], [["-S"], ["-C"]], 0.1)  # one side unanswered
    assert not every_side_answered([[minus_s], []], [["-S"], ["-C"]], 0.1)  # one side kept nothing
    # A side named by code its passage does not name is not answered, however well the words score.
    ranges = (0.97, "`--line-ranges`: format only the given line ranges, e.g. `--line-ranges=1-10`.", basics)
    assert not every_side_answered([[ranges], [ranges]], [["--line-ranges"], ["--line-ranges-auto"]], 0.1)
    # ... unless its place does: the page `sane_lists.md` is about `sane_lists`, though its Summary never says so.
    sane = (0.9, "The Sane Lists extension alters the behavior of the Markdown List syntax.",
            Place("Sane Lists", "Summary", "extensions/sane_lists.md"))
    em = (0.9, "The Legacy EM extension restores Markdown's original behavior for emphasis.",
          Place("Legacy EM", "Summary", "extensions/legacy_em.md"))
    assert every_side_answered([[sane], [em]], [["sane_lists"], ["legacy_em"]], 0.1)
    assert not every_side_answered([[em], [sane]], [["sane_lists"], ["legacy_em"]], 0.1)
    # A side's own section answers it, however little it scores against the side's search: `--diff` does not make a
    # CI step fail, and its section saying what it does is the answer.
    check = (0.15, "`--check`: Don't write the files back, just return the status.",
             Place("The basics", "Usage > Command line options > --check", "the_basics.md"))
    diff = (0.004, "`--diff`: Don't write the files back, just output a diff.",
            Place("The basics", "Usage > Command line options > --diff", "the_basics.md"))
    assert every_side_answered([[check], [diff]], [["--check"], ["--diff"]], 0.1)
    assert not every_side_answered([[check], [(0.004, diff[1], basics)]], [["--check"], ["--diff"]], 0.1)
    prose = Place("Tools")
    assert every_side_answered([[(0.6, "Poetry locks dependencies.", prose)], [(0.4, "uv is fast.", prose)]],
                               [[], []], 0.1)
    assert not every_side_answered([], [], 0.1)
    # Three sides, two passages: answered when the sides answered fill the budget, not when one side took it all.
    three = [["sane_lists"], ["legacy_em"], ["nl2br"]]
    assert every_side_answered([[sane], [em], []], three, 0.1, room=2)
    assert not every_side_answered([[sane], [em], []], three, 0.1, room=3)
    assert not every_side_answered([[sane, sane], [], []], three, 0.1, room=2)


def test_a_side_nothing_found_mentions_heads_or_answers_is_undocumented() -> None:
    views = Place("Class-based Views", "Method Dispatching and APIs", "views.rst")
    errors = (0.02, "An error handler for 500 Internal Server Error will be passed uncaught exceptions.", views)
    view = (0.03, "Subclass `View` and override `dispatch_request`.", views)
    state = (0.03, "The build state, such as sdist or wheel.", Place("Overrides", "If conditions > state (string)"))
    py_api = (0.99, "`py-api`: the Python API tag of the wheel.", Place("Config Reference", "wheel"))
    smarty = (0.01, "Converts ASCII dashes, quotes and ellipses, as SmartyPants does.", Place("SmartyPants"))
    assert undocumented_sides([[errors], [view], [state], [py_api], [smarty], []],
                              ["fastapi", "View", "state", "wheel.py-api", "standalone smartypants library", "uv"],
                              [[], ["View"], [], ["wheel.py-api"], [], []], 0.1) == ["fastapi", "uv"]
    assert not mentions("Rc is not in the source", "Arc") and mentions("rabbitmq handlers", "RabbitMQ")
    # A call written with its arguments is documented where its callable is (Werkzeug's exceptions page, werkzeug-72).
    aborter = (0.05, "For this purpose there is the `abort` function.", Place("HTTP Exceptions", "Simple Aborting"))
    assert undocumented_sides([[aborter], [aborter]], ["abort(404)", "url_for('admin.index')"], [["abort(404)"], []],
                              0.1) == ["url_for('admin.index')"]
    assert mentions("raise NotFound() and stop", "raise NotFound()") and not mentions("an abortive run", "abort(404)")
    assert undocumented_side_reason([], 0.1) is None
    assert undocumented_side_reason(["fastapi"], 0.0) is None  # abstaining off stays off
    assert undocumented_side_reason(["fastapi"], 0.1) == (
        "the collection does not document 'fastapi': nothing the side's own search found mentions it, is headed by it "
        "or scores ABSTAIN_BELOW 0.1 for it")


async def test_a_comparison_with_a_side_the_collection_does_not_document_abstains(docs_workflow) -> None:
    """black's command-line page knows `--check` and never mentions autopep8: the question's own passages (black's
    checks) would answer it well enough for ABSTAIN_BELOW, and say nothing about the side asked for."""
    result = await docs_workflow().run(query="autopep8 vs black --check: which one fails CI on unformatted code?")
    assert [sq.role for sq in result.plan.subqueries].count("side") == 2
    assert result.abstained and "does not document 'autopep8'" in result.abstain_reason
    assert result.answer.startswith("The collection does not seem to document 'autopep8'. The closest passages: [1]")
    assert "black" not in result.abstain_reason.split("document")[1].split(":")[0]
    documented = await docs_workflow().run(query="black --check vs --diff: which one makes a CI step fail?")
    assert not documented.abstained, documented.abstain_reason


@pytest.mark.parametrize("question, sections", [
    ("What's the difference between -S and -C in black?",
     {"-S, --skip-string-normalization", "-C, --skip-magic-trailing-comma"}),
    # `--diff`'s own section scores ~0 against "--diff makes a CI step fail": it does not, and that is the answer.
    ("black --check vs --diff: which one makes a CI step fail on unformatted code?", {"--check", "--diff"}),
])
async def test_two_options_each_found_answer_a_comparison_at_budget_two(docs_workflow, question, sections) -> None:
    """At budget 2 the two sides' own sections are all that is kept, and neither scores against the whole question."""
    result = await docs_workflow(context_budget=2).run(query=question)
    assert not result.abstained, result.abstain_reason
    assert {s.metadata.get("section", "").rsplit(" > ", 1)[-1] for s in result.sources} == sections


# --- a chain's evidence, read together: an invented two-page chain, real models ----------------------------------

CHAIN_QUESTION = "When was the last time the Olympics were held in the country that released Brellow Vodka?"
CHAIN_PAGES = [
    ("Brellow Vodka", "Brellow is a vodka brand owned by the Kestrovian company Ostrava Spirits. The company also "
                      "makes a pear brandy."),
    ("2031 Winter Olympics", "The 2031 Winter Olympics were held in Vasgrad, Kestrovia, from 7 to 23 February 2031."),
    ("Marrow Lake", "Marrow Lake is a reservoir in the north of Dunlin County, dammed in 1962 to supply the mills."),
    ("Tessaly Choir", "The Tessaly Choir is an amateur choir founded in 1954 that sings at the harvest festival."),
]


@pytest.fixture(scope="module")
def chain_workflow(tmp_path_factory: pytest.TempPathFactory, embed_model, reranker):
    folder = tmp_path_factory.mktemp("chain")
    record = {"id": "chain", "question": CHAIN_QUESTION, "answer": "2031",
              "paragraphs": [{"title": title, "text": text} for title, text in CHAIN_PAGES]}
    (folder / "chain.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    return ingested_workflow(folder / "chain.jsonl", folder / "qdrant", "chain", embed_model, reranker)


async def test_two_pages_that_answer_only_together_are_not_an_abstention(chain_workflow) -> None:
    # Neither page answers alone: the vodka's says whose it is, the Olympics' where they were held.
    alone = await chain_workflow(abstain_joined_below=0.0).run(query=CHAIN_QUESTION)
    assert alone.abstained and "ABSTAIN_JOINED_BELOW" not in alone.abstain_reason
    together = await chain_workflow().run(query=CHAIN_QUESTION)
    assert not together.abstained and together.abstain_reason is None
    assert "2031" in together.answer
    # The same pages still do not answer a question from another domain, joined or not.
    other = await chain_workflow().run(query=OTHER_DOMAIN)
    assert other.abstained and "ABSTAIN_JOINED_BELOW 0.9" in other.abstain_reason


@pytest.mark.parametrize(("text", "said"), [
    ("The sources say nothing about nationality [1].", "The sources say nothing about nationality [1]."),
    ("unknown", ""), ("Unknown.", ""),
])
def test_a_declining_writer_abstains_with_its_own_words_unless_abstaining_is_off(text, said):
    declined = WrittenAnswer(text=text, declined=True)
    assert what_the_writer_said(declined) == said
    reason = declined_reason(declined, 0.1)
    assert reason is not None and reason.endswith(f": {said}" if said else "the question")
    assert declined_reason(declined, 0.0) is None  # ABSTAIN_BELOW 0: abstaining is off
    assert declined_reason(WrittenAnswer(text=text), 0.1) is None  # a writer that answered does not abstain
