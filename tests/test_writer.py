"""The offline writer with the real cross-encoder: which sentences it quotes, and how it cites them."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from dagrag.agents.writer import (
    WriterAgent,
    _Candidate,
    _ScoredSentences,
    excerpt,
    going_on,
    in_context,
    quoted_sentences,
    side_openings,
    speaking_documents,
)
from dagrag.core.language import ENGLISH
from dagrag.core.plan import ExecutedPlan, Hints, PlanOrigin, SubQuery
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


def bridge_plan(question: str) -> ExecutedPlan:
    """The question's own search (s1) and a bridge hop from its best page (s2)."""
    return ExecutedPlan(query=question, origin=PlanOrigin.GIVEN, layers=[["s1"], ["s2"]], subqueries=[
        SubQuery(id="s1", text=question, role="question"),
        SubQuery(id="s2", text=f"{{s1}} {question}", parents=["s1"], role="bridge")])


def hop_source(number: int, title: str, text: str) -> Source:
    """A source the bridge hop (s2) found."""
    return source(number, title, text).model_copy(update={"subquery_id": "s2", "subquery_ids": ["s2"]})


def scored_for(reranker, question: str, pages: list[Source]) -> _ScoredSentences:
    """Every sentence of `pages` scored against `question` under a one-search plan, as the writer scores them."""
    return asyncio.run(WriterAgent(reranker)._score(question, one_search_plan(question), pages))


def answer_for(reranker, question: str, pages: list[Source], **options: Any) -> str:
    """The offline writer's answer to `question` from `pages` under a one-search plan (`options`: WriterAgent's)."""
    return asyncio.run(WriterAgent(reranker, **options).awrite(question, one_search_plan(question), pages,
                                                               RunLedger())).text


def test_a_sentence_is_read_after_its_documents_title() -> None:
    assert in_context("Its county seat is Harrowgate.", "Brenton County") == (
        "Brenton County: Its county seat is Harrowgate.")
    assert in_context("Brenton County is a county.", "Brenton County") == "Brenton County is a county."
    assert in_context("A sentence.", "") == "A sentence."


def test_the_answering_sentence_is_quoted_though_it_names_its_page_only_as_its(reranker) -> None:
    # Alone, "Its county seat is Harrowgate." is about nothing and scores under the page's other sentences;
    # read after its page's title it is the answer, and it is quoted so. (Room for one sentence only: read after the
    # title, "It has a population of 12,000." scores 0.94 too, which the confident bar would quote beside it.)
    writer = WriterAgent(reranker, max_sentences=1, every_source=False, confident_from=1.0)
    sources = [source(1, "Brenton County", COUNTY_PAGE), source(2, "County seats of Vellmark", OTHER_PAGE)]
    answer = asyncio.run(writer.awrite(QUESTION, one_search_plan(QUESTION), sources, RunLedger()))
    assert answer.text == "Brenton County: Its county seat is Harrowgate. [1]"
    assert "[2]" not in answer.text


def sectioned(number: int, title: str, section: str, text: str) -> Source:
    return source(number, title, text).model_copy(update={"metadata": {"title": title, "section": section}})


def test_a_sentence_is_scored_and_quoted_under_its_section_heading(reranker) -> None:
    # "Yes, there is support for 3.8 and higher." says what it supports only in its heading; read after the page's
    # title alone it loses to the sentence about Windows, which the question's words do not ask for.
    question = "Does the formatter run under PyPy?"
    faq = [sectioned(1, "Frequently asked questions", "Can I run the formatter with PyPy?",
                     "Yes, there is support for 3.8 and higher."),
           sectioned(2, "Frequently asked questions", "Does the formatter run on Windows?",
                     "The formatter runs on Windows, macOS and Linux.")]
    answer = asyncio.run(WriterAgent(reranker, max_sentences=1, every_source=False).awrite(
        question, one_search_plan(question), faq, RunLedger()))
    assert answer.text == ("Frequently asked questions > Can I run the formatter with PyPy?: "
                           "Yes, there is support for 3.8 and higher. [1]")


def test_every_sentence_that_answers_by_the_abstain_checks_bar_is_quoted_while_there_is_room(reranker) -> None:
    # "Create one renderer per thread instead." answers the question less surely than the sentence that says no
    # (about 0.2 against 0.9), but it answers: under a bar of 0.5 it goes unsaid. Room left after the answering
    # sentences goes to the question's best document (the first source), whatever its sentences score; another
    # passage's sentence that answers nothing ("Rendering is fast ...", under 0.1) stays out.
    question = "Can I share one quill.Renderer object between several worker threads?"
    threads = sectioned(1, "Renderer", "Threads", "A single renderer should not be used from several threads at once. "
                        "The renderer keeps its state between calls to `render`.")
    per_thread = sectioned(2, "Renderer", "Per-thread renderers", "Create one renderer per thread instead. "
                           "Rendering is fast enough for most web servers.")
    scored = scored_for(reranker, question, [threads, per_thread])
    assert 0.1 <= scored.question_score[2] < 0.5 and max(scored.question_score[1], scored.question_score[3]) < 0.1
    answer = answer_for(reranker, question, [threads, per_thread], answers_from=0.1)
    assert answer == ("Renderer > Threads: A single renderer should not be used from several threads at once. [1] "
                      "The renderer keeps its state between calls to `render`. [1] "
                      "Renderer > Per-thread renderers: Create one renderer per thread instead. [2]")
    stricter = answer_for(reranker, question, [threads, per_thread], answers_from=0.5, every_source=False)
    assert "Create one renderer" not in stricter and "keeps its state" in stricter


def test_a_sources_next_quoted_sentence_reads_on_without_its_title_again(reranker) -> None:
    question = "Where is the county seat of Brenton County and when was its courthouse built?"
    page = "Its county seat is Harrowgate. The courthouse there was built in 1901. Its winters are mild and wet."
    answer = asyncio.run(WriterAgent(reranker, max_sentences=2).awrite(
        question, one_search_plan(question), [source(1, "Brenton County", page)], RunLedger()))
    assert answer.text == ("Brenton County: Its county seat is Harrowgate. [1] "
                           "The courthouse there was built in 1901. [1]")


def test_a_sentence_is_quoted_with_its_neighbour_where_the_two_together_answer_better(reranker) -> None:
    # The reason is in the sentence after the one that answers best: it answers too, though less ("This width" is
    # about nothing alone), and with one sentence's room it would go unsaid. Read on from the sentence before it, the
    # pair answers better than that one alone, so it is quoted with it; the sentence about platforms answers nothing.
    question = "Why does tarn wrap lines at 96 characters instead of 80?"
    page = sectioned(1, "Tarn style", "Line length", "Tarn wraps lines at 96 characters, which is 20% over 80. "
                     "This width was found to give much shorter files than 80 or 79. "
                     "Tarn is written in Python and runs on every platform.")
    scored = scored_for(reranker, question, [page])
    assert scored.question_score[0] > scored.question_score[1] >= 0.1 > scored.question_score[2]  # this case
    answer = answer_for(reranker, question, [page], max_sentences=1)
    assert answer == ("Tarn style > Line length: Tarn wraps lines at 96 characters, which is 20% over 80. [1] "
                      "This width was found to give much shorter files than 80 or 79. [1]")


def test_the_lead_sentence_brings_its_neighbour_that_answers_nothing_alone_but_completes_it(reranker) -> None:
    # The question's best passage makes its point over two sentences; the second scores nothing alone (it neither
    # answers by itself nor opens with a referring word), but read with the lead sentence the two answer better than
    # the lead alone, so it is quoted beside it, beyond max_sentences. The two sentences after it add nothing to
    # that reading and stay out.
    question = "What's the difference between `plugin_configs` and giving options directly to the plugin class?"
    page = sectioned(1, "Library reference", "Plugins", "The keyword `plugin_configs` accepts a dictionary of "
                     "configuration settings for plugins. Any configuration settings will only be passed to plugins "
                     "loaded by name (as a string). See the plugins keyword for details. "
                     "Tarn is written in Python and runs on every platform.")
    scored = scored_for(reranker, question, [page])
    assert scored.question_lead == 0 and scored.question_score[1] < 0.1  # this case: under the answering bar
    assert not ENGLISH.goes_on_from_before("Any configuration settings will only be passed to plugins.")
    answer = answer_for(reranker, question, [page], max_sentences=1)
    assert answer == ("Library reference > Plugins: The keyword `plugin_configs` accepts a dictionary of configuration "
                      "settings for plugins. [1] Any configuration settings will only be passed to plugins loaded by "
                      "name (as a string). [1]")


def test_the_lead_sentence_is_read_with_the_two_sentences_before_it(reranker) -> None:
    # The answer to "is that not allowed?" is two sentences before the one the cross-encoder prefers (which quotes the
    # asker's own code); the sentence between scores nothing alone. Read together, the three answer better than the
    # lead with its nearer neighbour, so both come with it.
    question = "I declared name = fields.Field() in a schema and get a warning. is that not allowed?"
    page = sectioned(1, "Upgrading", "Field usage", "`Field` is the base class for all fields and should not be used "
                     "directly within schemas. Only use subclasses of `Field` in your schemas. Instantiating `Field` "
                     "will raise a warning in tarn>=3.2 and an error in tarn 4.0. ``` class UserSchema(Schema):\n"
                     "    name = fields.Field()\n```")
    scored = scored_for(reranker, question, [page])
    assert scored.question_lead == 2 and scored.question_score[1] < 0.1  # this case
    answer = answer_for(reranker, question, [page], max_sentences=1)
    assert answer.startswith("Upgrading > Field usage: `Field` is the base class for all fields and should not be "
                             "used directly within schemas. [1] Only use subclasses of `Field` in your schemas. [1] "
                             "Instantiating `Field` will raise a warning")


def test_a_sentence_that_goes_on_from_a_quoted_one_is_quoted_with_it_though_it_answers_nothing_alone(reranker) -> None:
    # "It is set to 1000 by default." holds the asked number, but alone it is about nothing (0.001 against the
    # question): it opens with "It", so it goes on from the sentence before it and is quoted with it. A language that
    # lists no such openers leaves it unsaid; the sentence about platforms, which opens with a name, is not quoted
    # either way.
    question = "How many form fields will quill parse out of one request before it gives up, by default?"
    page = sectioned(1, "Security", "Resource use", "Quill limits what one request may use, so that no client can tie "
                     "up a worker. The number of form fields it parses is one such limit. "
                     "It is set to 1000 by default. Quill is written in Python and runs on every platform.")
    scored = scored_for(reranker, question, [page])
    assert scored.question_score[1] == max(scored.question_score) and scored.question_score[2] < 0.01  # this case
    answer = answer_for(reranker, question, [page], max_sentences=1)
    # The section's opening sentence comes too, read with the lead sentence before it: it names "use", a word of
    # "Resource use" (the heading guard of the lead windows; a thin one for a three-letter word).
    assert answer == ("Security > Resource use: Quill limits what one request may use, so that no client can tie up "
                      "a worker. [1] The number of form fields it parses is one such limit. [1] "
                      "It is set to 1000 by default. [1]")
    no_openers = dataclasses.replace(ENGLISH, referring_openers=frozenset())
    unread = answer_for(reranker, question, [page], max_sentences=1, language=no_openers)
    assert "1000" not in unread and "every platform" not in unread


def test_a_quoted_sentence_that_goes_on_from_the_one_before_brings_it_though_the_two_read_worse(reranker) -> None:
    # The cross-encoder finds "It runs on Windows only under WSL." and nothing else; read with the sentence that says
    # what "it" is, the pair scores lower than the sentence alone, so a pair test would leave the reader with "It".
    # The sentence after it opens with a name and stays out.
    question = "Which of the servers runs on Windows?"
    page = sectioned(1, "Deploying", "Gunicorn > Installing", "Gunicorn is easy to install, as it needs no compiler "
                     "or extra packages. It runs on Windows only under WSL. Rebuilds run at most once a minute.")
    scored = scored_for(reranker, question, [page])
    read_with_it = asyncio.run(reranker.ascore([(question, in_context(
        f"{scored.candidates[0].sentence} {scored.candidates[1].sentence}", scored.candidates[0].context))]))[0]
    assert scored.question_lead == 1 and read_with_it < scored.question_score[1]  # this case
    answer = answer_for(reranker, question, [page], max_sentences=1)
    assert answer == ("Deploying > Gunicorn > Installing: Gunicorn is easy to install, as it needs no compiler or "
                      "extra packages. [1] It runs on Windows only under WSL. [1]")
    no_openers = dataclasses.replace(ENGLISH, referring_openers=frozenset())
    assert "easy to install" not in answer_for(reranker, question, [page], max_sentences=1, language=no_openers)


def test_the_sentences_that_go_on_from_a_chosen_one_or_that_it_goes_on_from_are_its_neighbours(reranker) -> None:
    page = sectioned(1, "Usage", "--stubs", "Format every input file like a typing stub. This is useful when piping "
                     "source on standard input. It needs no other option. Rebuilds run at most once a minute.")
    candidates = scored_for(reranker, "What does --stubs do?", [page]).candidates
    assert going_on(candidates, [0], ENGLISH) == [1]  # the next sentence goes on from it
    assert going_on(candidates, [1], ENGLISH) == [2, 0]  # and on from the next; it goes on from the one before
    assert going_on(candidates, [0, 1], ENGLISH) == [2]  # chosen ones are not repeated
    assert going_on(candidates, [3], ENGLISH) == []  # the last sentence opens with a name
    assert going_on(candidates, [0], dataclasses.replace(ENGLISH, referring_openers=frozenset())) == []
    # A page with a title alone: "It" is mostly the page's subject, which the title quoted before it names.
    untitled = scored_for(reranker, "What does --stubs do?", [source(1, "Stubs", page.text)]).candidates
    assert going_on(untitled, [0], ENGLISH) == going_on(untitled, [1], ENGLISH) == []


def test_a_sentence_goes_on_from_the_one_before_when_it_opens_with_a_referring_word() -> None:
    assert ENGLISH.goes_on_from_before("It is set to 1000 by default.")
    assert ENGLISH.goes_on_from_before("- *Instead*, the interactive debugger is shown.")
    assert ENGLISH.goes_on_from_before("In other words, the text is rendered as a paragraph.")  # a phrase
    assert not ENGLISH.goes_on_from_before("In most cases `root` is an element.")  # the phrase, not its first word
    words_only = dataclasses.replace(ENGLISH, referring_openers=frozenset({"it", "instead"}))
    assert not words_only.goes_on_from_before("In other words, the text is rendered as a paragraph.")
    assert not ENGLISH.goes_on_from_before("Italy is a country.")  # the whole first word, not its start
    assert not ENGLISH.goes_on_from_before("`MAX_FORM_PARTS` controls how many fields are parsed.")
    assert not ENGLISH.goes_on_from_before("")


def test_a_quoted_sentence_that_announces_what_follows_is_quoted_with_it(reranker) -> None:
    # The steps answer "how", but the sentence that says so scores best; quoted alone it would end at "steps:".
    question = "How do I make tarn reformat only one project in my editor?"
    page = sectioned(1, "Editor integration", "Per project", "If you want tarn to reformat just one project, "
                     "follow these steps:\n\n1. Open the project's properties.\n2. Pick tarn as the formatter.\n\n"
                     "Tarn is written in Python and runs on every platform.")
    scored = scored_for(reranker, question, [page])
    assert scored.question_score[0] == max(scored.question_score)  # this case: the announcing sentence leads
    answer = answer_for(reranker, question, [page], max_sentences=1, confident_from=1.0)  # "2. Pick ..." scores 0.90
    assert answer.startswith("Editor integration > Per project: If you want tarn to reformat just one project, "
                             "follow these steps: [1] 1. Open the project's properties. [1]")
    assert "every platform" not in answer


def test_a_sentence_announces_what_follows_by_the_marks_the_chunker_keeps() -> None:
    from dagrag.chunking import blocks
    from dagrag.core.text import INTRODUCING_MARKS

    assert blocks._INTRODUCING == INTRODUCING_MARKS  # two homes only because chunking imports no other part


def test_a_quoted_sentence_keeps_the_space_before_a_dotted_name() -> None:
    # Only the space a removed footnote mark leaves before punctuation goes: `-a .codehilite` is an option's value.
    assert quoted_sentences("Run `pygmentize -a .codehilite > styles.css` once. See the docs [7] .") == [
        "Run `pygmentize -a .codehilite > styles.css` once.", "See the docs."]


def test_an_excerpt_shows_each_picked_sentence_after_the_one_before_it_and_marks_gaps() -> None:
    sentences = ["A.", "B.", "C.", "D.", "E."]
    assert excerpt(sentences, {3}) == "… C. D. …"
    assert excerpt(sentences, {0}) == "A. …"
    assert excerpt(sentences, {1, 4}) == "A. B. … D. E."
    assert excerpt(sentences, {2, 3}) == "… B. C. D. …"
    assert excerpt(sentences, set()) == ""


def test_the_llms_excerpts_show_code_as_written(reranker) -> None:
    # The LLM reads a source's best sentences (LLM_EVIDENCE_SENTENCES): a command in them keeps its lines, as in an
    # offline answer, and a block that ends a sentence stands apart from the next one.
    question = "What does black --check exit with when a file would be reformatted?"
    page = sectioned(1, "The basics", "Check mode", "Black can run in CI as a check. Run it like this:\n\n"
                     "```console\n$ black --check .\n```\n\nIt exits with 1 when a file would be reformatted. "
                     "Formatting is deterministic. Other projects use it too.")
    writer = WriterAgent(reranker, evidence_sentences=1)
    shown = asyncio.run(writer._shown_to_llm(question, one_search_plan(question), [page], RunLedger()))[0].text
    assert "```console\n$ black --check .\n```" in shown and "Other projects" not in shown
    sentences = ["Run it like this:\n\n```console\n$ black --check .\n```", "It exits with 1.", "Done."]
    assert excerpt(sentences, {1}) == "Run it like this:\n\n```console\n$ black --check .\n```\n\nIt exits with 1. …"


LONG_COUNTY_PAGE = ("Brenton County is a county in the state of Vellmark. Its winters are mild and wet. "
                    "The Orvel river floods most springs. A harvest fair is held every September. "
                    "Its county seat is Harrowgate. The courthouse there was built in 1901. "
                    "Tourists come for the lakes in the north.")


def test_the_llm_writer_reads_the_answering_sentences_not_the_whole_passage(reranker) -> None:
    from dagrag import Settings
    from dagrag.stack import build_llm_client
    from dagrag.testing.openai_server import ScriptedOpenAIServer, dagrag_llm

    sources = [source(1, "Brenton County", LONG_COUNTY_PAGE), source(2, "County seats of Vellmark", OTHER_PAGE)]
    reply = "Answer: Harrowgate\nIts county seat is Harrowgate [1]."
    with ScriptedOpenAIServer({"writer": [reply, reply]}) as server:
        client = build_llm_client(Settings(), dagrag_llm(server))

        async def write_both() -> None:
            for sentences in (1, 0):
                ledger = RunLedger()
                writer = WriterAgent(reranker, client, evidence_sentences=sentences)
                answer = await writer.awrite(QUESTION, one_search_plan(QUESTION), sources, ledger)
                assert answer.concise == "Harrowgate" and not ledger.degradations

        asyncio.run(write_both())
        excerpted, whole = (r["messages"][-1]["content"] for r in server.requests_of("writer"))
    # One sentence per source, after the sentence before it: the county seat, read after the fair.
    assert "A harvest fair is held every September. Its county seat is Harrowgate. …" in excerpted
    assert "winters" not in excerpted and "Tourists" not in excerpted
    assert '<source id="2" title="County seats of Vellmark">' in excerpted
    assert LONG_COUNTY_PAGE in whole and len(excerpted) < len(whole)


def test_a_hop_plans_answer_still_quotes_the_sentence_that_answers_the_question_best(reranker) -> None:
    # Every plan searches the question; every answer quotes the sentence the question itself scores highest, even
    # when the hop's sentence is quoted and nothing scores 0.5 against the question: here the only sentence that
    # names what the question asks about (Nora Quill) is on the page the hop started from.
    question = "Which public office did the actress who played Nora Quill hold?"
    film = ("Salt and Ember is a 1946 comedy film. The part of the teenage heroine went to Lena Marwick, then 17. "
            "Its heroine is a girl called Nora Quill.")
    actress = ("Lena Marwick was a film star and later a diplomat. "
               "She served as Harbour Commissioner of Vellmark from 1969 to 1974.")
    plan = bridge_plan(question)
    sources = [source(1, "Salt and Ember", film),
               hop_source(2, "Lena Marwick", actress)]
    writer = WriterAgent(reranker)
    best = asyncio.run(writer._score(question, plan, sources))
    top = max(range(len(best.candidates)), key=lambda i: best.question_score[i])
    assert best.question_score[top] < 0.5 and best.candidates[top].source_number == 1  # what makes this case
    answer = asyncio.run(writer.awrite(question, plan, sources, RunLedger())).text
    assert f"{best.candidates[top].sentence} [1]" in answer  # after its page's title or the sentence before it
    assert "[2]" in answer  # the hop still speaks through its own best document


def scored_sentences(pages: dict[str, list[tuple[str, float]]], best_for: dict[str, tuple[str, int]]
                     ) -> _ScoredSentences:
    """Sentences of numbered pages with their scores against the question; `best_for`: subquery -> (title, position)."""
    titles = list(pages)
    candidates = [_Candidate(n, position, sentence, title, in_context(sentence, title), sentence,
                             in_context(sentence, title))
                  for n, title in enumerate(titles, start=1) for position, (sentence, _) in enumerate(pages[title])]
    scores = [score for title in titles for _, score in pages[title]]
    index = {(titles[c.source_number - 1], c.position): i for i, c in enumerate(candidates)}
    return _ScoredSentences(candidates, scores, {sq: (0.5, index[at]) for sq, at in best_for.items()})


def test_a_hops_sentence_that_links_the_chain_is_quoted_beside_the_answering_sentences_not_instead(reranker) -> None:
    # The hop's page speaks through the sentence that answers its own search and the question best together. When
    # that sentence does not answer the question by itself (under the bar), it is the link of the chain: quoted
    # besides the sentences that answer, so a bridge answer states both the bridge and the asked fact.
    question = "Which public office did the actress who played Nora Quill hold?"
    plan = bridge_plan(question)
    pages = {"Salt and Ember": [("Salt and Ember is a comedy film.", 0.02),
                                ("Its heroine Nora Quill was played by Lena Marwick.", 0.6)],
             "Lena Marwick": [("Lena Marwick was born in Harrowgate.", 0.03),
                              ("She served as Harbour Commissioner.", 0.3), ("She retired in 1980.", 0.01)]}
    writer = WriterAgent(reranker, max_sentences=2, answers_from=0.1)

    def extractive(plan: ExecutedPlan, scored: _ScoredSentences) -> str:  # the choice, without neighbours
        return writer._quoted(scored, writer._chosen(plan, scored))

    linked = extractive(plan, scored_sentences(pages, {"s2": ("Lena Marwick", 0)}))
    assert linked == ("Salt and Ember: Its heroine Nora Quill was played by Lena Marwick. [1] "
                      "Lena Marwick was born in Harrowgate. [2] She served as Harbour Commissioner. [2]")
    # A hop's sentence that answers the question takes one of the answering sentences' places.
    answering = extractive(plan, scored_sentences(pages, {"s2": ("Lena Marwick", 1)}))
    assert answering == ("Salt and Ember: Its heroine Nora Quill was played by Lena Marwick. [1] "
                         "Lena Marwick: She served as Harbour Commissioner. [2]")
    # One search: nothing links, and `max_sentences` is the whole answer's bound.
    single = extractive(one_search_plan(question), scored_sentences(pages, {}))
    assert single == ("Salt and Ember: Its heroine Nora Quill was played by Lena Marwick. [1] "
                      "Lena Marwick: She served as Harbour Commissioner. [2]")


def test_each_side_of_a_comparison_beyond_the_first_brings_one_more_answering_sentence(reranker) -> None:
    # Every side's sentence takes one of the answer's places; with two sides and the bound of two, nothing would be
    # left for what else answers. Each side beyond the first adds a place; one search over the same pages does not.
    question = "How does tarn differ from quill?"
    pages = {"Tarn": [("Tarn formats code in place.", 0.9), ("Tarn rewrites files only when they change.", 0.5)],
             "Quill": [("Quill lints code.", 0.8), ("Quill never rewrites a file.", 0.4)],
             "Reed": [("Reed checks types.", 0.7), ("Reed reads stub files.", 0.3)]}
    writer = WriterAgent(reranker, max_sentences=2, answers_from=0.1, every_source=False)

    def comparison(*sides: str) -> ExecutedPlan:
        subqueries = [SubQuery(id=f"s{n}", text=f"{side} differ", role="side") for n, side in enumerate(sides, 1)]
        return ExecutedPlan(query=question, origin=PlanOrigin.GIVEN, layers=[[sq.id for sq in subqueries] + ["s0"]],
                            subqueries=[*subqueries, SubQuery(id="s0", text=question, role="question")])

    def chosen(plan: ExecutedPlan, best_for: dict[str, tuple[str, int]]) -> list[str]:
        scored = scored_sentences(pages, best_for)
        return [scored.candidates[i].sentence for i in writer._chosen(plan, scored)]

    two = {"s1": ("Tarn", 0), "s2": ("Quill", 0)}
    assert chosen(one_search_plan(question), two) == ["Tarn formats code in place.", "Quill lints code."]
    assert chosen(comparison("tarn", "quill"), two) == [
        "Tarn formats code in place.", "Quill lints code.", "Reed checks types."]  # the next that answers best
    assert chosen(comparison("tarn", "quill", "reed"), {**two, "s3": ("Reed", 0)}) == [
        "Tarn formats code in place.", "Quill lints code.", "Reed checks types.",
        "Tarn rewrites files only when they change."]


def side_plan(question: str, *names: str) -> ExecutedPlan:
    """A comparison plan: one side per name (s1, s2, …, each searching its name), then the question itself (s0)."""
    sides = [SubQuery(id=f"s{n}", text=f"{name} {question}", hints=Hints(must_include=[name]), role="side")
             for n, name in enumerate(names, start=1)]
    return ExecutedPlan(query=question, origin=PlanOrigin.GIVEN, layers=[[sq.id for sq in sides] + ["s0"]],
                        subqueries=[*sides, SubQuery(id="s0", text=question, role="question")])


def listed_by(number: int, section: str, text: str, *subquery_ids: str) -> Source:
    return sectioned(number, "Tarn", section, text).model_copy(
        update={"subquery_id": subquery_ids[0], "subquery_ids": list(subquery_ids)})


def test_each_side_speaks_through_a_document_no_earlier_side_speaks_through_headed_by_it_where_one_is() -> None:
    plan = side_plan("Which is the default?", "--quick", "--careful")
    both = listed_by(1, "Options > --quick / --careful", "Both flags.", "s1", "s2", "s0")
    careful = listed_by(2, "Safety", "The careful check.", "s2")
    quick = listed_by(3, "Speed", "The quick path.", "s1")
    assert speaking_documents(plan, [both, careful, quick]) == {"s1": 1, "s2": 2, "s0": 1}
    # A side with no other document shares the first; a subquery of any other role keeps its first.
    assert speaking_documents(plan, [both, quick]) == {"s1": 1, "s2": 1, "s0": 1}
    # Of the documents no earlier side speaks through, the first headed by the side, where one is: the overview
    # that came first names both flags in its text, the section on --careful is the side's own.
    overview = listed_by(2, "Options", "Tarn has a quick and a careful mode.", "s2")
    assert speaking_documents(plan, [both, overview, careful, quick])["s2"] == 2  # no heading names --careful
    own = listed_by(3, "Options > --careful", "The careful check.", "s2")
    assert speaking_documents(plan, [both, overview, own, quick]) == {"s1": 1, "s2": 3, "s0": 1}
    assert speaking_documents(bridge_plan("Which is the default?"),
                              [hop_source(1, "A", "x").model_copy(update={"subquery_ids": ["s1", "s2"]})]) == {
        "s1": 1, "s2": 1}


def test_a_side_speaks_of_its_own_thing_from_its_own_document(reranker) -> None:
    # The section on both flags comes first for both sides, and its sentences answer the question for the first one.
    # The second side's own page says what it does; that sentence names the side, the shared section's best does not.
    question = "--quick vs --careful: which one does tarn use if I pass neither?"
    careful = "When run with `--careful` (the default), tarn checks that the formatted code means the same as before."
    pages = [listed_by(1, "Options > --quick / --careful",
                       "By default, tarn compares the syntax tree before and after formatting. The `--quick` flag "
                       "turns this check off, which makes formatting about twice as fast.", "s1", "s2", "s0"),
             listed_by(2, "Code style > Safety", f"Tarn never changes what code means. {careful} This check costs "
                       "time on large files.", "s2")]
    plan = side_plan(question, "--quick", "--careful")
    scored = asyncio.run(WriterAgent(reranker)._score(question, plan, pages))
    assert scored.candidates[scored.best_for["s2"][1]].sentence == careful
    assert f"{careful} [2]" in asyncio.run(WriterAgent(reranker).awrite(question, plan, pages, RunLedger())).text


def test_a_sides_sentence_is_not_one_that_names_another_side_and_not_it(reranker) -> None:
    # The side's page opens with the other side: that sentence answers the question best, and would speak for both.
    # Its last sentence names the other side too. The side speaks with the sentence that names it.
    question = "greenlets vs async handlers: which is meant for many long-lived connections in tarn?"
    holds = "Each request still holds one worker, even with async handlers."
    pages = [listed_by(1, "Concurrency > Greenlets", "Greenlets are the way to serve many long-lived connections "
                       "at once. Tarn patches the standard library for them.", "s1", "s0"),
             listed_by(2, "Concurrency > Async", f"Greenlets are the way to serve many long-lived connections at "
                       f"once. {holds} Unlike greenlets, one handler can run several tasks at once.", "s2", "s0")]
    plan = side_plan(question, "greenlets", "async handlers")
    scored = asyncio.run(WriterAgent(reranker)._score(question, plan, pages))
    said = {sq_id: scored.candidates[index].sentence for sq_id, (_, index) in scored.best_for.items()}
    assert said["s2"] == holds and said["s1"].startswith("Greenlets are the way")
    at = {(c.source_number, c.sentence): i for i, c in enumerate(scored.candidates)}
    assert scored.question_score[at[(2, holds)]] < scored.question_score[at[(2, said["s1"])]]  # what makes this case


def test_a_sides_sentence_may_name_no_side_when_the_one_that_names_it_only_says_where_it_is(reranker) -> None:
    # Each side's page names it once, in a line that says where it is found; the sentence that answers for the side
    # names no side at all. Only a sentence that names *another* side is passed over: each side speaks with its
    # page's sentence on datetimes, not with "Found at ...".
    question = "tarn.codecs.pack vs tarn.codecs.cbor: how does each encode a datetime by default?"
    pack = "Datetimes are encoded as UNIX timestamp floats."
    cbor = "Datetimes are encoded as a text string by default."
    pages = [listed_by(1, "Codecs > pack", f"Found at `tarn.codecs.pack`. Sets become lists. {pack}", "s1", "s0"),
             listed_by(2, "Codecs > cbor", "Found at `tarn.codecs.cbor`. Unlike `tarn.codecs.pack`, it keeps "
                       f"sets as sets. {cbor}", "s2")]
    plan = side_plan(question, "tarn.codecs.pack", "tarn.codecs.cbor")
    scored = asyncio.run(WriterAgent(reranker)._score(question, plan, pages))
    said = {sq_id: scored.candidates[index].sentence for sq_id, (_, index) in scored.best_for.items()}
    assert said["s1"] == pack and said["s2"] == cbor
    answer = asyncio.run(WriterAgent(reranker).awrite(question, plan, pages, RunLedger())).text
    assert f"{pack} [1]" in answer and f"{cbor} [2]" in answer


def test_a_side_also_quotes_the_opening_of_its_document_where_its_heading_names_the_side(reranker) -> None:
    # The --diff side speaks with its sentence that names it (a detail on colour); its section, headed "--diff",
    # opens by saying what the option does, and that sentence is quoted as well. The same sentences under a heading
    # that does not name the side ("Output") leave the opening out.
    question = "tarn --check vs --diff: which one makes a CI step fail on unformatted code?"
    check = listed_by(1, "Options > --check", "Tarn exits with code 1 when some files would be reformatted. With "
                      "`--check`, nothing is written.", "s1", "s0")
    text = "Don't write the files back, just print what would change. Coloured output of `--diff` needs `--color`."
    plan = side_plan(question, "--check", "--diff")
    writer = WriterAgent(reranker)
    for heading, opens in (("Options > --diff", True), ("Output", False)):
        pages = [check, listed_by(2, heading, text, "s2")]
        scored = asyncio.run(writer._score(question, plan, pages))
        assert scored.candidates[scored.best_for["s2"][1]].sentence.startswith("Coloured output")  # this case
        answer = asyncio.run(writer.awrite(question, plan, pages, RunLedger())).text
        assert ("Don't write the files back" in answer) is opens


def test_a_side_whose_heading_does_not_name_it_also_quotes_its_documents_first_sentence_that_does(reranker) -> None:
    # The --diff side's page is headed "Output": it says what --diff does where it first names it, and the side's best
    # sentence by the cross-encoder is a later one that names it with the question's words. The first naming sentence
    # is quoted too; the page's opening, which names no side, is not.
    question = "tarn --check vs --diff: which one makes a CI step fail on unformatted code?"
    check = listed_by(1, "Options > --check", "Tarn exits with code 1 when some files would be reformatted. With "
                      "`--check`, nothing is written.", "s1", "s0")
    defines = "With `--diff`, tarn does not write the files back and prints what would change instead."
    output = listed_by(2, "Output", f"Tarn reports each file it formats. {defines} A CI step that runs `tarn --diff` "
                       "shows what would change.", "s2")
    plan = side_plan(question, "--check", "--diff")
    writer = WriterAgent(reranker)
    scored = asyncio.run(writer._score(question, plan, [check, output]))
    assert scored.candidates[scored.best_for["s2"][1]].sentence.startswith("A CI step")  # what makes this case
    assert [scored.candidates[i].sentence for i in side_openings(plan, scored)] == [
        "Tarn exits with code 1 when some files would be reformatted.", defines]  # --check's heading names it
    answer = asyncio.run(writer.awrite(question, plan, [check, output], RunLedger())).text
    assert f"{defines} [2]" in answer and "reports each file" not in answer


def test_a_side_named_nowhere_in_its_own_document_is_scored_on_the_other_sources_that_name_it(reranker) -> None:
    # The `if.none` side's search landed on a section that never names it; the sentence that says what it means sits
    # in the passage the other side kept. That sentence speaks for the side; with no source naming the side, the
    # side keeps its own document's best.
    question = "How does if.all differ from if.none in tarn overrides?"
    none = "With `if.none`, the override applies only if none of its conditions hold."
    overrides = listed_by(1, "Overrides > Conditions", "With `if.all`, the override applies only if every condition "
                          f"holds. {none}", "s1", "s0")
    failed = listed_by(2, "Overrides > Failed builds", "An override can also apply after a failed build. Set "
                       "`failed = true` to retry with other settings.", "s2")
    plan = side_plan(question, "if.all", "if.none")
    writer = WriterAgent(reranker)
    scored = asyncio.run(writer._score(question, plan, [overrides, failed]))
    assert scored.candidates[scored.best_for["s2"][1]].sentence == none
    assert f"{none} [1]" in asyncio.run(writer.awrite(question, plan, [overrides, failed], RunLedger())).text
    unnamed = side_plan(question, "if.all", "if.any")
    scored = asyncio.run(writer._score(question, unnamed, [overrides, failed]))
    assert scored.candidates[scored.best_for["s2"][1]].source_number == 2


def test_a_hops_answer_is_the_sentence_that_answers_as_read_after_its_parents(reranker) -> None:
    # The hop's page answers the question only through the chain: scored alone, its office sentence is about someone
    # the question never names (0.003), and a sentence repeating the question's words wins the hop's own choice. Read
    # after the film page's sentence that names her, the office sentence answers, and it is quoted beside the others.
    question = "What government position was held by the actress who played Nora Quill in Salt and Ember?"
    film = ("Salt and Ember is a 1946 comedy film directed by Arlo Fenn. It was adapted from a stage play of the same "
            "name. The part of Nora Quill went to Lena Marwick, then 17. The film was a modest success.")
    office = "From 1969 to 1974 she was Harbour Commissioner of Vellmark."
    actress = ("Lena Marwick (born 1929) is a former actress from Harrowgate. She appeared in eleven films "
               "between 1945 and 1952. She played Nora Quill again in a 1950 radio version of Salt and Ember. "
               f"{office} She married the painter Ivo Stane in 1955.")
    plan = bridge_plan(question)
    sources = [source(1, "Salt and Ember", film),
               hop_source(2, "Lena Marwick", actress)]
    writer = WriterAgent(reranker, max_sentences=2)
    scored = asyncio.run(writer._score(question, plan, sources))
    at = {c.sentence: i for i, c in enumerate(scored.candidates)}
    assert scored.question_score[at[office]] < 0.1 and scored.best_for["s2"][1] != at[office]  # what makes this case
    assert scored.after_parent == {"s2": at[office]}
    answer = asyncio.run(writer.awrite(question, plan, sources, RunLedger())).text
    assert f"{office} [2]" in answer and "went to Lena Marwick" in answer  # the bridge and the asked fact
    # One search over the same pages has no parent to read after: the office sentence is not quoted.
    single = asyncio.run(writer.awrite(question, one_search_plan(question), sources, RunLedger())).text
    assert office not in single


def test_a_hops_page_also_quotes_what_the_question_asks_of_it_beyond_its_parents_page(reranker) -> None:
    # Read after the player's sentence, the team page's sentence that repeats how the question describes the team
    # wins, and the year the question asks for scores 0.006 against the question. The words the player's page leaves
    # unexplained (founding, franchises, league, established, ...) are what the question asks of the team's page:
    # its sentence that answers them is quoted too.
    question = ("Ada Brill spent nine seasons with an American professional baseball team that is based in Tarrow, "
                "Vellmark, and was one of the Coastal League's six founding franchises when the league was "
                "established in what year?")
    player = ("Ada Brill (born 1950) is a retired pitcher who spent nine seasons with the Tarrow Hawks (1973-1981). "
              "She was one of the first players to sign as a free agent. An injury ended her career in 1982.")
    described = "The Tarrow Hawks are an American professional baseball team based in Tarrow, Vellmark."
    founded = ("As one of the league's six founding franchises when it was established in 1931, the club spent its "
               "first year in Dunmore before moving to Tarrow.")
    team = f"{described} The Hawks play in the Coastal League's East division. {founded} Their stadium opened in 1992."
    plan = bridge_plan(question)
    sources = [source(1, "Ada Brill", player),
               hop_source(2, "Tarrow Hawks", team)]
    writer = WriterAgent(reranker)
    scored = asyncio.run(writer._score(question, plan, sources))
    at = {c.sentence: i for i, c in enumerate(scored.candidates)}
    assert scored.question_score[at[founded]] < 0.1 and scored.after_parent == {"s2": at[described]}  # the case
    assert scored.asked_of_hop == {"s2": at[founded]}
    answer = asyncio.run(writer.awrite(question, plan, sources, RunLedger())).text
    assert f"{described} [2]" in answer and f"{founded} [2]" in answer
    # One search over the same pages has no hop: the year is not quoted.
    assert founded not in asyncio.run(writer.awrite(question, one_search_plan(question), sources, RunLedger())).text
    # Nor when the hop found the parent's own page: nothing is left unexplained by another page.
    same_page = [sources[0].model_copy(update={"subquery_ids": ["s1", "s2"]})]
    assert asyncio.run(writer._score(question, plan, same_page)).asked_of_hop == {}


def test_a_question_of_two_parts_is_answered_part_by_part(reranker) -> None:
    # Against the whole question the sentence on excluding a directory scores 0.06 (under the bar): the question's
    # first part draws the cross-encoder, and the answer would say what the flag does and nothing about excluding.
    # Scored against the part that asks it, the sentence scores 0.99, and is quoted.
    question = ("What does the --reload flag of tarn serve do, and how do I exclude the build directory from the "
                "reloader?")
    excluded = ("Directories listed in `watch.exclude` are skipped by the reloader, for example "
                "`watch.exclude = [\"build\"]`.")
    pages = [sectioned(1, "Development server", "Reloader",
                       "With `--reload`, tarn serve restarts the server whenever a Python file changes. The reloader "
                       "polls every file of the project once a second. Restarts keep the same port, so open browser "
                       "tabs keep working. The reloader is meant for development only."),
             sectioned(2, "Configuration", "Watched paths",
                       f"Tarn reads its settings from `tarn.toml` at the project root. {excluded} Every setting can "
                       "also be given as an environment variable."),
             sectioned(3, "Deployment", "Production",
                       "In production, run tarn behind a process manager and never with `--reload`. The reload flag "
                       "adds a file watcher thread that costs memory.")]
    scored = scored_for(reranker, question, pages)
    at = {c.sentence: i for i, c in enumerate(scored.candidates)}
    assert scored.question_score[at[excluded]] < 0.1  # what makes this case
    assert scored.answers_part == [at[excluded]]  # the first part is the whole question's: not scored again
    answer = answer_for(reranker, question, pages)
    assert f"Configuration > Watched paths: {excluded} [2]" in answer and "restarts the server" in answer
    # Read as one question (a language with no part joiners), the answer leaves the second part out.
    whole = dataclasses.replace(ENGLISH, part_joiners=frozenset())
    assert "watch.exclude" not in answer_for(reranker, question, pages, language=whole, every_source=False)


def test_a_source_is_heard_only_through_a_sentence_chosen_for_the_whole_question(reranker) -> None:
    # A statement, then what is asked: the asking part alone draws "The old behavior can be restored by passing ..."
    # from the plugin page. That sentence answers a part; the page's best sentence for the whole question (what
    # changed, 0.007) is still quoted, as every kept source's is: a part's sentence does not make its source heard.
    question = ("after upgrading tarn my cache keys for naive timestamps changed and missing plugins now fail at "
                "startup. how do i get both old behaviours back?")
    changed = "Missing plugins were changed to raise an error when the app starts instead of on first use."
    restored = "The old behavior can be restored by passing `lazy_plugins=True` when creating the app."
    pages = [sectioned(1, "Migrations", "4.0 > Cache keys for naive timestamps",
                       "Tarn computes cache keys from timestamps with `time.mktime`, which reads a naive timestamp as "
                       "local time. The keys therefore depended on the timezone of the machine. From this version on, "
                       "naive timestamps are read as UTC. The old behavior can be restored by setting "
                       "`cache.local_time = true`."),
             sectioned(2, "Migrations", "3.2 > Plugin loading", f"{changed} {restored}"),
             sectioned(3, "Plugins", "Loading", "Plugins are found by entry point. Each plugin is loaded once per "
                                                "process.")]
    scored = scored_for(reranker, question, pages)
    at = {c.sentence: i for i, c in enumerate(scored.candidates)}
    assert scored.answers_part == [at[restored]]  # what makes this case: the part's sentence is from page 2
    assert scored.question_score[at[changed]] > scored.question_score[at[restored]]  # page 2's best, whole question
    answer = answer_for(reranker, question, pages)
    assert f"{changed} [2]" in answer and f"{restored} [2]" in answer
    assert "[3]" in answer  # every kept source still speaks


def test_a_question_is_split_into_parts_at_a_question_mark_a_joined_question_word_or_after_a_statement() -> None:
    assert ENGLISH.question_parts("Why is the reloader slow? And what can I do about it?") == [
        "Why is the reloader slow?", "And what can I do about it?"]
    assert ENGLISH.question_parts("What does --reload do, and how do I turn it off?") == [
        "What does --reload do", "how do I turn it off?"]
    assert ENGLISH.question_parts("Which flag restarts the server but can I keep the port?") == [
        "Which flag restarts the server", "can I keep the port?"]
    # A statement before the question: what it asks is a part of its own ("My group ... no subcommand. What exit
    # status ...?"), read apart from the circumstances the statement gives.
    assert ENGLISH.question_parts("My app prints its help when run with no command. What exit status does it return?"
                                  ) == ["My app prints its help when run with no command.",
                                        "What exit status does it return?"]
    # A full stop inside a name, or before a word that opens no question, splits nothing.
    assert ENGLISH.question_parts("Which option does tarn.serve take?") == []
    assert ENGLISH.question_parts("I run tarn serve. Then it stops. Which flag keeps it running?") == [
        "I run tarn serve. Then it stops.", "Which flag keeps it running?"]
    # "and" between two names, or a part too short to ask anything of its own, splits nothing.
    assert ENGLISH.question_parts("How do tarn serve and tarn watch differ?") == []
    assert ENGLISH.question_parts("What does --reload do, and why?") == []
    assert ENGLISH.question_parts("What does --reload do?") == []
    assert dataclasses.replace(ENGLISH, part_joiners=frozenset()).question_parts(
        "What does --reload do, and how do I turn it off?") == []


# A release-cadence page the question's search ranks first, whose answering sentence alone scores under the bar,
# and a runner-up page that only shares the words "new release".
RELEASE_QUESTION = "How often do the quill maintainers put out a new release?"
CADENCE = sectioned(1, "Release process", "Release cadence", "We aim to release whatever is on `main` every 1-2 "
                    "months. Maintainers find the workload predictable.")
CUTTING = sectioned(2, "Release process", "Cutting a release", "Congratulations! You've successfully cut a new "
                    "release of quill. Go stand up and take a break.")


def test_room_left_after_the_answering_sentences_goes_to_the_questions_best_document(reranker) -> None:
    # The question's search ranked the release-cadence passage first, but its answering sentence alone scores under
    # the bar, while a sentence of the runner-up that only shares the words "new release" clears it. With room
    # left, the best document speaks too, its sentences best first while there is room ("We aim to release ..."
    # before "Maintainers find ..."); without room, the sentences that answer keep it.
    question, cadence, cutting = RELEASE_QUESTION, CADENCE, CUTTING
    scored = scored_for(reranker, question, [cadence, cutting])
    top = max(range(len(scored.candidates)), key=lambda i: scored.question_score[i])
    assert scored.candidates[top].source_number == 2 and scored.question_score[0] < 0.1  # what makes this case
    assert scored.question_lead == 0
    answer = answer_for(reranker, question, [cadence, cutting])
    assert answer == ("Release process > Release cadence: We aim to release whatever is on `main` every 1-2 months. "
                      "[1] Maintainers find the workload predictable. [1] "
                      "Release process > Cutting a release: You've successfully cut a new release of quill. [2]")
    two = answer_for(reranker, question, [cadence, cutting], max_sentences=2)
    assert "every 1-2 months" in two and "workload" not in two
    full = answer_for(reranker, question, [cadence, cutting], max_sentences=1, every_source=False)
    assert full == "Release process > Cutting a release: You've successfully cut a new release of quill. [2]"


def test_a_kept_source_no_chosen_sentence_quotes_says_its_best_sentence_beyond_the_bound(reranker) -> None:
    # With one place, the runner-up's sentence (the best alone) takes it and the question's best document would say
    # nothing, though its answering sentence scores only under the bar. Every kept source says its best sentence,
    # one each, beyond WRITER_MAX_SENTENCES; a source already quoted adds nothing.
    question, cadence, cutting = RELEASE_QUESTION, CADENCE, CUTTING
    assert answer_for(reranker, question, [cadence, cutting], max_sentences=1) == (
        "Release process > Release cadence: We aim to release whatever is on `main` every 1-2 months. [1] "
        "Release process > Cutting a release: You've successfully cut a new release of quill. [2]")
    assert answer_for(reranker, question, [cadence, cutting], max_sentences=1, every_source=False).count("[") == 1
    # Where every source is quoted already, nothing is added.
    assert (answer_for(reranker, question, [cadence, cutting], max_sentences=4)
            == answer_for(reranker, question, [cadence, cutting], max_sentences=4, every_source=False))


def test_the_questions_best_document_speaks_even_when_other_sentences_fill_the_room(reranker) -> None:
    # Two sentences of the runner-up clear the bar ("... new release of quill", 0.59 each) and would fill a room of
    # two; the question's best document's answering sentence scores 0.05 alone. It is quoted all the same, one of
    # the two: the cross-encoder ranked its passage first for the question.
    question, cadence = RELEASE_QUESTION, CADENCE
    announce = sectioned(2, "Release process", "Cutting a release", "Congratulations! You've successfully cut a new "
                         "release of quill. Announce the new release of quill on the mailing list. Go stand up and "
                         "take a break.")
    scored = scored_for(reranker, question, [cadence, announce])
    assert scored.question_lead == 0 and scored.question_score[0] < 0.1  # what makes this case
    assert sum(score >= 0.1 for score in scored.question_score) >= 2
    two = answer_for(reranker, question, [cadence, announce], max_sentences=2)
    assert "every 1-2 months" in two and "Announce the new release" in two


def _page_lines(corpus: str, path: str, first: str, last: str) -> str:
    from .conftest import ROOT

    text = (ROOT / "experiments" / "data" / "docs_corpus" / corpus / "docs" / path).read_text(encoding="utf-8")
    start = text.index(first)
    return text[start:text.index(last, start) + len(last)]


def test_quoted_code_and_tables_render_as_blocks_with_their_citation_outside(reranker) -> None:
    # Collapsed onto one line, a command or a table cannot be read (and "black --check ." lost its space before
    # the dot, which names the folder); quoted as written, Markdown shows a code block and a table, each cited.
    from markdown_it import MarkdownIt

    docker = _page_lines("black", "usage_and_configuration/black_docker_image.md",
                         "```console\n$ docker run --rm --volume", "be considered.")
    smarty = _page_lines("markdown", "extensions/smarty.md", "The following options", "```python\n")
    smarty += "markdown.markdown(some_text, extensions=['smarty'])\n```\n"
    for question, source, code, block in (
            ("How do I check my code with the Black Docker image?",
             sectioned(1, "Black Docker image", "Usage > Check code", docker),
             "pyfound/black:latest_release black --check .\n", "fence"),
            ("Which smarty options are turned on by default?", sectioned(1, "SmartyPants", "Usage", smarty),
             "markdown.markdown(some_text, extensions=['smarty'])\n", "table_open")):
        answer = asyncio.run(WriterAgent(reranker).awrite(question, one_search_plan(question), [source], RunLedger()))
        tokens = MarkdownIt("commonmark").enable("table").parse(answer.text)
        fences = [t.content for t in tokens if t.type == "fence"]
        assert any(code in fence for fence in fences), answer.text
        assert any(t.type == block for t in tokens)
        assert "[1]" in answer.text and all("[1]" not in fence for fence in fences)


def test_a_quoted_tables_citation_stands_outside_the_table(reranker) -> None:
    # On the line just below a table, Markdown reads "[1]" as one more row of it: the citation follows a blank line.
    # Punkt ends a sentence inside a cell ("… of the loop. (1 indexed)"): cut there, a sentence ran from one row into
    # the next and the answer showed the table on one line; the verifier read the cells as sentences citing nothing.
    from markdown_it import MarkdownIt

    from dagrag.agents.verifier import VerifierAgent

    text = ("Inside of a for-loop block, you can access some special variables:\n\n| Variable | Description |\n"
            "|---|---|\n| `loop.index` | The current iteration of the loop. (1 indexed) |\n"
            "| `loop.index0` | The current iteration of the loop. (0 indexed) |\n"
            "| `loop.length` | The number of items in the sequence |\n")
    question = "Which loop variable counts iterations from 0?"
    source = sectioned(1, "Template Designer Documentation", "For", text)
    answer = asyncio.run(WriterAgent(reranker).awrite(question, one_search_plan(question), [source], RunLedger()))
    depth, cells = 0, []
    for token in MarkdownIt("commonmark").enable("table").parse(answer.text):
        depth += {"table_open": 1, "table_close": -1}.get(token.type, 0)
        if depth and token.type == "inline":
            cells.append(token.content)
    assert any("loop.index0" in cell for cell in cells), answer.text
    assert "[1]" in answer.text and not any("[1]" in cell for cell in cells), answer.text
    verification = asyncio.run(VerifierAgent(reranker).averify(answer.text, [source], RunLedger()))
    assert all(check.citations == [1] for check in verification.sentences), verification.sentences
    assert verification.support_rate == 1.0


def test_a_quoted_code_block_keeps_its_subscripts_and_cites_only_outside_it(reranker) -> None:
    # `)[0]` in code is an index, not a citation of source 0: it is quoted, and the verifier reads only the [1].
    from dagrag.core.text import citations, split_sentences

    text = _page_lines("black", "the_black_code_style/future_style.md", "When an expression containing trailers",
                       "    )[0]\n)\n```")
    question = "Does Black keep trailers like [0] intact when a trailing comment makes the line too long?"
    answer = asyncio.run(WriterAgent(reranker).awrite(
        question, one_search_plan(question), [sectioned(1, "Preview style", "Keep trailers", text)], RunLedger()))
    assert 'zzz.get_data("key")[0].get_nested(  # type: ignore' in answer.text
    assert "    )[0]\n)\n```\n[1]" in answer.text
    assert {n for sentence in split_sentences(answer.text) for n in citations(sentence)} == {1}


def test_a_sentence_the_cross_encoder_is_confident_answers_is_quoted_beyond_the_bound(reranker) -> None:
    # Two ways to turn the reloader off, on two pages, each scoring above 0.99; a bound of one sentence leaves the
    # second out unless a confident sentence is quoted whatever the room. A sentence under the bar is not added.
    question = "How do I turn off the reloader of tarn serve?"
    flag = "Pass `--no-reload` to tarn serve to turn the reloader off."
    setting = "Setting `reload = false` under `[serve]` turns the reloader off for every run."
    pages = [sectioned(1, "Development server", "Command line",
                       f"{flag} Tarn serve listens on port 8000 unless told otherwise."),
             sectioned(2, "Configuration", "The serve table",
                       f"Tarn reads its settings from tarn.toml at the project root. {setting}"),
             sectioned(3, "Deployment", "Production", "In production, run tarn behind a process manager.")]
    scored = scored_for(reranker, question, pages)
    at = {c.sentence: i for i, c in enumerate(scored.candidates)}
    assert min(scored.question_score[at[flag]], scored.question_score[at[setting]]) >= 0.9  # what makes this case
    bounded = answer_for(reranker, question, pages, max_sentences=1, every_source=False, confident_from=1.0)
    assert (flag in bounded) != (setting in bounded)  # the room holds one of them
    answer = answer_for(reranker, question, pages, max_sentences=1, every_source=False)
    assert f"{flag} [1]" in answer and f"{setting} [2]" in answer
    assert "port 8000" not in answer and "tarn.toml at the project root" not in answer and "[3]" not in answer


def test_the_writer_settings_reach_the_offline_writer(reranker) -> None:
    from dagrag import Settings
    from dagrag.stack import build_writer

    assert build_writer(Settings(), reranker).every_source is True
    assert build_writer(Settings(writer_every_source=False), reranker).every_source is False
    assert build_writer(Settings(), reranker).confident_from == 0.9
    assert build_writer(Settings(writer_confident_from=1.0), reranker).confident_from == 1.0
