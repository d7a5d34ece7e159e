"""The offline planner on real HotpotQA questions."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from dagrag.agents.planner import QueryPlannerAgent
from dagrag.agents.rule_planner import find_comparison, plan_offline, rewrite_with_history
from dagrag.core.language import ENGLISH, Language
from dagrag.core.names import KnownNames
from dagrag.core.result import RunLedger

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "hotpotqa_dev.jsonl"


@pytest.mark.parametrize(("question", "entities"), [
    ("Were Scott Derrickson and Ed Wood of the same nationality?", ("Scott Derrickson", "Ed Wood")),
    ("Who is older, Annie Morton or Terry Richardson?", ("Annie Morton", "Terry Richardson")),
    ("Which band, Letters to Cleo or Screaming Trees, had more members?", ("Letters to Cleo", "Screaming Trees")),
    ("Which came out first, Dinosaur or McFarland, USA", ("Dinosaur", "McFarland, USA")),
    ("Are both Elko Regional Airport and Gerald R. Ford International Airport located in Michigan?",
     ("Elko Regional Airport", "Gerald R. Ford International Airport")),
    ("What occupation do Chris Menges and Aram Avakian share?", ("Chris Menges", "Aram Avakian")),
    ("Is the Marsilea or the Brabejum the genus of more individual species of plants?", ("Marsilea", "Brabejum")),
    ("Which of these battles occurred earlier--the Battle of Peleliu or the Battle of Belleau Wood?",
     ("Battle of Peleliu", "Battle of Belleau Wood")),
    ("Who was born first, Leonardo da Vinci or Émile Zola?", ("Leonardo da Vinci", "Émile Zola")),
    ("How many more singles titles did Kim Warwick win than Jorge Lozano?", ("Kim Warwick", "Jorge Lozano")),
    ("Is Mount Everest taller than K2?", ("Mount Everest", "K2")),
    ("Was the Eiffel Tower built earlier than the Statue of Liberty?", ("Eiffel Tower", "Statue of Liberty")),
    ("Does Hatch support more Python versions than Poetry?", ("Hatch", "Poetry")),
    ("Are there more people in Tokyo than in Paris?", ("Tokyo", "Paris")),
    ("What is the difference between Hatch and Poetry?", ("Hatch", "Poetry")),
    ("Compare Scott Derrickson and Ed Wood.", ("Scott Derrickson", "Ed Wood")),
    ("How does Hatch differ from Poetry?", ("Hatch", "Poetry")),
    ("Is Hatch similar to Poetry?", ("Hatch", "Poetry")),
    ("How does Hatch compare with Poetry for monorepos?", ("Hatch", "Poetry")),
    ("Hatch vs Poetry: which is faster?", ("Hatch", "Poetry")),
    ("Scott Derrickson versus Ed Wood: who directed more films?", ("Scott Derrickson", "Ed Wood")),
    ("Who was born earlier, Ed Wood, or Scott Derrickson?", ("Ed Wood", "Scott Derrickson")),
    ("Which has the highest peak Mount Everest or K2?", ("Mount Everest", "K2")),
    ("Which airport Grand Forks International Airport or El Paso International Airport is closer to their town?",
     ("Grand Forks International Airport", "El Paso International Airport")),
    ("What is the difference between `hatch env create` and `hatch shell`?", ("hatch env create", "hatch shell")),
    ("Which is faster, `uv` or `pip`?", ("uv", "pip")),
    ('"A Summer in the Cage" and "American Hardcore" are both what kind of film?',
     ("A Summer in the Cage", "American Hardcore")),
    ('Which came to market first, "Hey Pa! There\'s a Goat on the Roof" or "Poleconomy"',
     ("Hey Pa! There's a Goat on the Roof", "Poleconomy")),
])
def test_comparisons_split_into_their_two_entities(question, entities):
    comparison = find_comparison(question)
    assert comparison is not None and comparison.entities == entities


@pytest.mark.parametrize("question", [
    "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?",
    "Is the Pakistan fast bowler who joined the Kent County Cricket Club in June, 2011 a left-hand or right-hand"
    " batsmans?",
])
def test_other_questions_get_a_two_hop_bridge_plan(question):
    plan = plan_offline(question)
    assert [sq.text for sq in plan.subqueries] == [question, f"{{s1}} {question}"]
    assert plan.subqueries[1].parents == ["s1"]
    assert [sq.text for sq in plan_offline(question, bridge=False).subqueries] == [question]


@pytest.mark.parametrize("question", [
    "Other than racing, what sport does the 1998 champion of the Toyota GRand Prix practice?",
    "In which case does the Hatch documentation advise staying with setuptools rather than Hatchling?",
    "Did Apple earn more than 100 billion dollars in 2020?",
    "Is the building located at 200 West Street taller than the one at 888 7th Avenue?",
    "Who moved from Paris to London in 1990?",
    "How do I migrate from setuptools to Hatch?",
    "Where is the Bubblegum Alley, that is similar to Gum Wall, located in California?",
])
def test_a_linking_word_that_does_not_join_two_compared_names_is_no_comparison(question):
    assert find_comparison(question) is None


@pytest.mark.parametrize(("question", "entities"), [
    ("Who is older, Ed Wood, Tim Burton or Johnny Depp?", ("Ed Wood", "Tim Burton", "Johnny Depp")),
    ("Who is older, Ed Wood, Tim Burton, or Johnny Depp?", ("Ed Wood", "Tim Burton", "Johnny Depp")),
    ("Were Ed Wood, Tim Burton and Johnny Depp all American?", ("Ed Wood", "Tim Burton", "Johnny Depp")),
    ("Compare Hatch, Poetry and PDM.", ("Hatch", "Poetry", "PDM")),
    ("What is the difference between Hatch, Poetry and PDM?", ("Hatch", "Poetry", "PDM")),
    ("Which is fastest: `uv`, `pip` or `Poetry`?", ("uv", "pip", "Poetry")),
    ("Which came first, A, B, C or D?", ("A", "B", "C", "D")),  # "A" between commas is a name, not an article
    # "should I use" with a list: "pytest, unittest" is two sides, not one whose first word joins the predicate
    ("Should I use pytest, unittest or nose for tests?", ("pytest", "unittest", "nose")),
    ("Should we pick httpx, requests, or aiohttp for HTTP/2?", ("httpx", "requests", "aiohttp")),
])
def test_a_list_of_three_or_more_names_is_compared_one_subquery_each(question, entities):
    comparison = find_comparison(question)
    assert comparison is not None and comparison.entities == entities
    assert [sq.hints.must_include for sq in plan_offline(question).subqueries] == [[e] for e in entities]


def test_a_list_longer_than_the_plan_allows_is_searched_as_asked_never_cut_short():
    question = "Which is the largest, Paris, London, Berlin, Rome or Madrid?"
    assert len(find_comparison(question).entities) == 5
    assert [sq.text for sq in plan_offline(question, subquery_max=4).subqueries] == [question, f"{{s1}} {question}"]
    # Without a cue, a list is no comparison, and its last two names are no pair either.
    assert find_comparison("Where did Ed Wood, Tim Burton or Johnny Depp grow up?") is None


def test_words_that_only_set_two_names_side_by_side_are_left_out_of_the_subqueries():
    plan = plan_offline("How does Hatch compare with Poetry for monorepos?")
    assert [sq.text for sq in plan.subqueries] == ["Hatch monorepos", "Poetry monorepos"]
    assert [sq.text for sq in plan_offline("Is Mount Everest taller than K2?").subqueries] == [
        "Mount Everest height", "K2 height"]


def test_a_than_comparison_of_related_entities_is_two_chains():
    plan = plan_offline("Is the director of Jaws older than the director of Alien?")
    assert [(sq.text, sq.parents) for sq in plan.subqueries] == [
        ("Jaws director", []), ("Alien director", []), ("{s1} born older", ["s1"]), ("{s2} born older", ["s2"])]


def test_a_question_with_too_little_to_build_on_gets_the_single_query_plan():
    assert [sq.text for sq in plan_offline("Who is he?").subqueries] == ["Who is he?"]


def test_comparison_plan_shape():
    plan = plan_offline("Who is older, Annie Morton or Terry Richardson?")
    assert [(sq.id, sq.text, sq.hints.must_include, sq.parents) for sq in plan.subqueries] == [
        ("s1", "Annie Morton born", ["Annie Morton"], []), ("s2", "Terry Richardson born", ["Terry Richardson"], [])]
    assert len(plan_offline("Who is older, Annie Morton or Terry Richardson?", enable_dag=False).subqueries) == 1


@pytest.mark.skipif(not SHARED.exists(), reason="needs ../shared/data")
def test_most_hotpotqa_comparisons_name_both_gold_titles():
    records = [json.loads(line) for line in SHARED.read_text(encoding="utf-8").splitlines()]
    comparisons = [r for r in records if r["type"] == "comparison"]
    hits = 0
    for record in comparisons:
        found = find_comparison(record["question"])
        titles = [t.lower() for t in record["supporting_titles"]]
        hits += bool(found) and all(any(e.lower() in t or t in e.lower() for t in titles) for e in found.entities)
    assert hits / len(comparisons) >= 0.9


def test_history_rewrite_uses_the_subject_of_the_latest_turn():
    history = ["Who played Corliss Archer?", "Shirley Temple played Corliss Archer in Kiss and Tell."]
    assert rewrite_with_history("What position did she hold?", history) == "What position did Shirley Temple hold?"
    assert rewrite_with_history("What was his nationality?", ["Ed Wood directed it."]) == \
        "What was Ed Wood's nationality?"
    assert rewrite_with_history("Who directed Ed Wood?", history) is None



# --- comparisons by their form, whatever the names look like ------------------------------------------

@pytest.mark.parametrize(("question", "sides"), [
    ("How does httpx differ from requests?", ("httpx", "requests")),
    ("How does attrs differ from Pydantic?", ("attrs", "Pydantic")),
    ("Should I use Poetry or uv for a monorepo?", ("Poetry", "uv")),
    ("httpx vs requests: which one supports HTTP/2?", ("httpx", "requests")),
    ("What's the difference between attrs.define and attr.s?", ("attrs.define", "attr.s")),
    ("Is pydantic.BaseModel similar to dataclasses.dataclass?", ("pydantic.BaseModel", "dataclasses.dataclass")),
    ("uv compared to pip, which is faster?", ("uv", "pip")),
    ("When would I pick --force-exclude over --exclude?", ("--force-exclude", "--exclude")),
    ("Should I use the `black` hook or `black-jupyter` in pre-commit?", ("black hook", "black-jupyter")),
    ("What's the difference between -S and -C in black?", ("-S", "-C")),
    ("Is blackd similar to the normal black command, or what's different?", ("blackd", "normal black command")),
    ("-x compared to -c for python -m markdown, which one loads an extension?", ("-x", "-c")),
    ("Compare pip, uv and poetry", ("pip", "uv", "poetry")),
    ("Compare nl2br, sane_lists and legacy_em: what does each one change?", ("nl2br", "sane_lists", "legacy_em")),
    ("Compare blacken-docs, blackdoc and black itself for docstrings", ("blacken-docs", "blackdoc", "black")),
    ("Which is better for a small CLI, click or typer?", ("click", "typer")),
    ("tox or nox: which runs faster?", ("tox", "nox")),
    # A call is one name, commas and all: its arguments are no list.
    ("IntRange(0, 5, clamp=True) compared to IntRange(0, 5), which one accepts 10?",
     ("IntRange(0, 5, clamp=True)", "IntRange(0, 5)")),
    ("How does json.dumps(obj, indent=2) differ from json.dump(obj, fp)?",
     ("json.dumps(obj, indent=2)", "json.dump(obj, fp)")),
    # A dash asks the question as a colon does.
    ("tox or nox \u2014 which runs faster?", ("tox", "nox")),
    ("f-strings or %s args in log.info - which is better?", ("f-strings", "%s args")),
    # Choosing between, a choice after a colon, a chain of "vs", one word and "or".
    ("choosing between httpx.AsyncClient and aiohttp.ClientSession - which one pools connections?",
     ("httpx.AsyncClient", "aiohttp.ClientSession")),
    ("caching a computed attribute (fetched once per object): functools.cached_property, a property, or a memo dict?",
     ("functools.cached_property", "property", "memo dict")),
    ("pytest vs unittest vs nose \u2014 which one should a new project start with?", ("pytest", "unittest", "nose")),
    ("requests or httpx to call a REST API from a script?", ("requests", "httpx")),
    # A side starts where the sentence before it ends.
    ("The service reads JSON lines all day. orjson vs ujson: which parser is faster?", ("orjson", "ujson")),
    # A call inside a call is still one name.
    ("json.loads(path.read_text()) or json.load(open(path)) for a small settings file?",
     ("json.loads(path.read_text())", "json.load(open(path))")),
    # A subscript is one name too, commas and all.
    ('Annotated[int, Field(alias="id")] vs a plain int field: what does the model accept?',
     ('Annotated[int, Field(alias="id")]', "int field")),
    # The last side ends at an em dash that asks the question, written close up or not.
    ("pack.Warning vs PackError\u2014which one stops the build?", ("pack.Warning", "PackError")),
    ("pack.Warning vs PackError \u2014 which one stops the build?", ("pack.Warning", "PackError")),
    # More ways to set two things side by side: "the same as", "compatible with", "what distinguishes X from Y",
    # "why would I choose X over Y", "can I use X instead of Y".
    ("is @checks the same as @checks_model?", ("@checks", "@checks_model")),
    ("Is pack.lock compatible with stow.lock?", ("pack.lock", "stow.lock")),
    ("What distinguishes quill.Session from quill.get?", ("quill.Session", "quill.get")),
    ("Why would I choose quillpack over stowbuild?", ("quillpack", "stowbuild")),
    ("Can I use tomlread instead of tomlparse?", ("tomlread", "tomlparse")),
    ("When to use threading vs multiprocessing?", ("threading", "multiprocessing")),  # not "When to use threading"
    ("Is quillpack faster than stowbuild for big repos?", ("quillpack", "stowbuild")),
    ("Is pack.lock more reliable than stow.lock in CI?", ("pack.lock", "stow.lock")),
    ("Are quillpack and stowbuild both thread-safe?", ("quillpack", "stowbuild")),
    ("Does quillcheck or stowcheck catch more errors?", ("quillcheck", "stowcheck")),
    ("quillpack and stowbuild: which is faster?", ("quillpack", "stowbuild")),
    ("What are the pros and cons of quillserve and stowserve?", ("quillserve", "stowserve")),
    # Quotes glued to code are part of it: the documents write `mode="fast"`, not `mode=fast`.
    ('How does mode="fast" differ from mode="safe" with the cache on?', ('mode="fast"', 'mode="safe"')),
])
def test_a_comparison_is_recognised_by_its_form_with_lower_case_dotted_and_code_names(question, sides):
    comparison = find_comparison(question)
    assert comparison is not None and comparison.entities == sides
    plan = plan_offline(question)
    assert [sq.role for sq in plan.subqueries] == ["side"] * len(sides)
    assert not any(sq.parents for sq in plan.subqueries)
    assert [sq.hints.must_include for sq in plan.subqueries] == [[side] for side in sides]


@pytest.mark.parametrize(("question", "sides"), [
    # code written without backticks is a name like a `code` span: its sides are the two pieces of code
    ("format_exc_info or dict_tracebacks for exceptions in JSON logs?", ("format_exc_info", "dict_tracebacks")),
    ("Should I raise click.BadParameter or click.UsageError from my callback?",
     ("click.BadParameter", "click.UsageError")),
    ("structlog.get_logger vs structlog.stdlib.get_logger \u2014 is the stdlib one doing any configuration?",
     ("structlog.get_logger", "structlog.stdlib.get_logger")),
    ("The payload is a child class. include_subclasses or configure_tagged_union?",
     ("include_subclasses", "configure_tagged_union")),
    ("Should I decorate my tasks with `@celery_app.task` or `@shared_task` in an app factory?",
     ("@celery_app.task", "@shared_task")),
    ("Does --check or --diff make a CI step fail?", ("--check", "--diff")),
])
def test_two_pieces_of_code_joined_by_or_are_compared_wherever_the_sentence_puts_them(question, sides):
    found = find_comparison(question)
    assert found is not None and found.entities == sides
    assert [sq.role for sq in plan_offline(question).subqueries] == ["side", "side"]


@pytest.mark.parametrize("question", [
    "Should I write e.g or i.e before an example?",  # abbreviations are not code
    "Which option turns off the cache, or is there none?",
    "Is the cache in ~/.cache or in the project folder?",
    # A question after a colon is no list of choices; a list does not run across a sentence's end.
    "a field with both converter= and validator= : does the validator see the raw input or the converted value?",
    "class Meta: strict = True is gone in the new release. how do I keep strict loading, or get the old error back?",
    "Who or what inspired the title of the novel?",
])
def test_or_between_what_is_not_code_or_a_name_compares_nothing(question):
    assert find_comparison(question) is None


def test_a_quoted_one_letter_name_is_still_a_name_though_e_g_written_out_is_not_code():
    found = find_comparison('What is the difference between "x" and "y" modes?')
    assert found is not None and found.entities == ("x", "y modes")


def test_what_a_side_is_compared_on_joins_each_sides_search():
    plan = plan_offline("Should I use Poetry or uv for a monorepo?")
    assert [sq.text for sq in plan.subqueries] == ["Poetry use monorepo", "uv use monorepo"]


@pytest.mark.parametrize(("question", "sides", "shared"), [
    ("How does isort's default way of wrapping long imports differ from black's?", ("isort", "black"),
     "default way wrapping long imports"),
    ("Is black's line length similar to ruff's?", ("black", "ruff"), "line length"),
])
def test_what_the_first_side_owns_is_compared_on_both_when_the_second_is_a_bare_possessive(question, sides, shared):
    plan = plan_offline(question)
    assert [sq.hints.must_include for sq in plan.subqueries] == [[side] for side in sides]
    assert all(sq.text.startswith(f"{side} {shared}") for sq, side in zip(plan.subqueries, sides))


def test_two_sides_that_each_own_something_keep_what_they_own():
    found = find_comparison("Should I use pre-commit's exclude or black's force-exclude to skip migrations?")
    assert found is not None and found.entities == ("pre-commit's exclude", "black's force-exclude")


def test_a_name_with_capitalised_small_words_is_not_cut_where_a_sentence_would_go_on():
    found = find_comparison("Which song was released more recently, Come With Me (Pure Imagination) or Hold On Me "
                            "(Grinspoon Song)?")
    assert found is not None and found.entities[1] == "Hold On Me (Grinspoon Song)"


def test_a_pronoun_is_no_side_and_two_clauses_before_a_colon_are_no_comparison():
    assert find_comparison("what's a native logger and why would I prefer it over routing logs through stdlib?") is None
    assert find_comparison("Installed the package and ran the tests: what next?") is None


def test_a_name_ends_where_its_sentence_ends_but_not_at_an_en_dash_or_abbreviation_inside_it():
    found = find_comparison("I have handlers for both LockError and Exception. Which one handles a timeout?")
    assert found is not None and found.entities == ("LockError", "Exception")
    found = find_comparison("Which airport is busier, Velmora Regional Airport or Tarrasine\u2013Quill Airport?")
    assert found is not None and found.entities == ("Velmora Regional Airport", "Tarrasine\u2013Quill Airport")
    found = find_comparison("Who was born first, Mara Vance Jr. or Tomas St. Reyne?")
    # (the full stop closing a name was never kept)
    assert found is not None and found.entities == ("Mara Vance Jr", "Tomas St. Reyne")


def test_another_language_is_another_language_object_not_an_edit_of_the_planner():
    import re
    german = Language(
        comparison_forms=(re.compile(r"^wie\s+unterscheidet\s+sich\s+(?P<a>.+?)\s+von\s+(?P<b>.+)$", re.I),),
        side_ends=re.compile(r"\s*[?:;,]|\s+(?:für|bei)\b"), side_openers=frozenset({"der", "die", "das"}),
        side_closers=frozenset(), list_joiners=("und", "oder"))
    found = find_comparison("Wie unterscheidet sich httpx von requests?", german)
    assert found is not None and found.entities == ("httpx", "requests")
    assert find_comparison("Wie unterscheidet sich httpx von requests?", ENGLISH) is None


def test_the_word_lists_come_with_the_language_not_the_planner():
    from dataclasses import replace

    def texts(question: str, language: Language = ENGLISH) -> list[str]:
        return [sq.text for sq in plan_offline(question, language=language).subqueries]

    older = "Who is older, Mara Vance or Tomas Reyne?"
    assert texts(older) == ["Mara Vance born", "Tomas Reyne born"]
    by_date = replace(ENGLISH, cue_attributes=(("older", "birth date"),))
    assert texts(older, language=by_date) == ["Mara Vance birth date", "Tomas Reyne birth date"]
    # no yes/no verbs: "Were X and Y ...?" without a cue is no comparison, only a question to bridge
    members = "Were Mara Vance and Tomas Reyne members of Quillpack?"
    assert texts(members) == ["Mara Vance members quillpack", "Tomas Reyne members quillpack"]
    assert texts(members, language=replace(ENGLISH, auxiliaries=frozenset())) == [members, f"{{s1}} {members}"]
    # other relations: "the director" links to no second entity, so no chain through it
    earlier = "Which film has the director born earlier, Salt and Ember or Paper Lanterns?"
    assert len(texts(earlier)) == 4
    regisseur = replace(ENGLISH, relation_words=frozenset({"regisseur"}))
    assert texts(earlier, language=regisseur) == ["Salt and Ember film director born date",
                                                  "Paper Lanterns film director born date"]
    # the stopwords: what is left of a comparison's predicate, and whether a question has enough words for a hop
    assert texts(older, language=replace(ENGLISH, stopwords=ENGLISH.stopwords - {"who", "is"})) == \
        ["Mara Vance who born", "Tomas Reyne who born"]
    short = "Wann wurde die Burg gebaut?"  # "wann", "burg", "gebaut": three content words in English's eyes
    assert texts(short) == [short, f"{{s1}} {short}"]
    assert texts(short, language=replace(ENGLISH, stopwords=ENGLISH.stopwords | {"wann", "wurde", "die"})) == [short]
    # the pronouns a follow-up question uses
    german = replace(ENGLISH, pronouns=(("sie", ""), ("ihr", "s")))
    assert rewrite_with_history("Wann wurde sie geboren?", ["Mara Vance schrieb es."], language=german) == \
        "Wann wurde Mara Vance geboren?"
    assert rewrite_with_history("Wann wurde sie geboren?", ["Mara Vance schrieb es."]) is None


TOOL_NAMES = KnownNames(frozenset({"black", "isort", "httpx", "requests", "nl2br", "sane_lists", "configuration",
                                   "tomas ul reyne", "dead by morning"}))


@pytest.mark.parametrize(("question", "entities"), [
    ("Do black and isort read pyproject.toml the same way?", ("black", "isort")),  # ("... both ...?" is a form)
    ("Were nl2br and sane_lists added in the same release?", ("nl2br", "sane_lists")),
    # a known name with lower-case words inside is one name, not the capitalised runs around them
    ("Who was born first, Tomas ul Reyne or Mara Vance?", ("Tomas ul Reyne", "Mara Vance")),
    ("Were Sound Harbour and Dead by Morning both formed before 2010?", ("Sound Harbour", "Dead by Morning")),
])
def test_names_the_collection_knows_make_a_comparison_of_lower_case_names(question, entities):
    assert find_comparison(question) is None or find_comparison(question).entities != entities
    found = find_comparison(question, known=TOOL_NAMES)
    assert found is not None and found.entities == entities
    plan = plan_offline(question, known=TOOL_NAMES)
    assert len(plan.subqueries) == 2 and not any(sq.parents for sq in plan.subqueries)  # one layer, a side each


def test_a_known_name_changes_nothing_where_the_question_compares_nothing_and_stays_in_the_predicate():
    question = "How does black read its configuration?"
    assert find_comparison(question, known=TOOL_NAMES) is None
    assert plan_offline(question, known=TOOL_NAMES) == plan_offline(question)  # the bridge plan, as without names
    found = find_comparison("Which needs more configuration, black or isort?", known=TOOL_NAMES)
    assert found is not None and found.entities == ("black", "isort") and "configuration" in found.predicate


def test_the_planner_agent_reads_the_names_from_its_name_source():
    class Names:
        async def known_names(self) -> KnownNames:
            return TOOL_NAMES

    question = "Do black and isort read pyproject.toml the same way?"
    plain = asyncio.run(QueryPlannerAgent().aplan(question, [], RunLedger()))
    assert [sq.role for sq in plain.subqueries] != ["side", "side"]
    named = asyncio.run(QueryPlannerAgent(names=Names()).aplan(question, [], RunLedger()))
    assert [sq.text for sq in named.subqueries] == ["black read pyproject toml way", "isort read pyproject toml way"]
