"""The offline planner: deterministic rules that turn a question into a Plan, and a history rewriter.

It is the planner when no LLM is configured and the fallback when the LLM's plan cannot be used.
Rules: a comparison of named entities ("Were X and Y ...", "Which ..., X or Y?", "both X and Y", "Is X
taller than Y?", "How does X differ from Y?", "X vs Y", "Who is oldest, X, Y or Z?") becomes one subquery
per entity; a bridge-comparison, one that compares what a relation of each entity
names ("Which film has the director born earlier, X or Y?", "Who was born first, the director of X or the
director of Y?"), becomes two chains: s1, s2 find each entity's page, s3 = `{s1} <attribute>` and
s4 = `{s2} <attribute>` the pages those name (the director's); any other question becomes a two-hop
bridge plan (s1 finds the page the question describes, s2 asks the question again about the entity s1's
page names, `{s1}`; work_flows/hopping/deeper.py adds a third or fourth hop when the question still needs
one), or the single-query plan when bridging is off.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.language import ENGLISH, Language
from ..core.names import CODE_IDENTIFIER, NO_NAMES, KnownNames, is_abbreviation, is_connector, is_name_word
from ..core.plan import Hints, Plan, SubQuery, single_query_plan
from ..core.text import content_words

MAX_NAME_WORDS = 12  # longer, a "name" is a clause the rules misread
# "X or Y, had more members", "X or Y — what's each for?": the name ends at the comma or the em dash
_CLAUSE_AFTER_NAME = re.compile(r",\s+(?=[a-z])|\s*\u2014")
_SENTENCE_END = re.compile(r"[a-z]{3}[.!?]$")  # "... HTTPException and Exception. Which one ...": no "St." or "Jr."
# A quoted or `code` span, a call written out, or code without backticks (`--option`, `pkg.module`, `snake_case`).
_QUOTED = re.compile(rf"`([^`]+)`|\"([^\"]+)\"|“([^”]+)”"
                     rf"|([A-Za-z_][\w.]*(?:\((?:[^()]|\([^()]*\))*\)|\[(?:[^\[\]]|\[[^\[\]]*\])*\]))|{CODE_IDENTIFIER}")
_QUOTED_SPANS = 4  # the groups before CODE_IDENTIFIER's: spans quoted or written as a call or a subscript
_QUOTE_GROUPS = (2, 3)  # "..." and “...”: quotes of prose, dropped unless they are part of code (`markdown="block"`)
_HELD_PAIR = re.compile(r"(?<![\w-])(Quoted\d+),?\s+or\s+(Quoted\d+)(?=[\s?,:;.!]|$)")
_WORD = re.compile(r"\S+")
BRIDGE_MIN_CONTENT_WORDS = 3  # "Who is he?" has nothing for a second hop to build on


@dataclass(frozen=True)
class Comparison:
    entities: tuple[str, ...]  # two, or more for a list ("X, Y or Z")
    predicate: list[str]


def _leading_name(words: list[str]) -> list[str]:
    """The longest run of name-like words at the start (connectors allowed between name words)."""
    run: list[str] = []
    i = 0
    if words and words[0].lower() == "the":
        i = 1
    while i < len(words):
        word = words[i]
        if is_name_word(word):
            run = words[: i + 1]
            if word.endswith((",", ":")) or _SENTENCE_END.search(word):
                break
            i += 1
        elif is_connector(word) and i + 1 < len(words) and is_name_word(words[i + 1]) and run:
            i += 1
        else:
            break
    return run


def _trailing_name(words: list[str]) -> list[str]:
    """The longest run of name-like words at the end."""
    reversed_run = _leading_name(list(reversed(words)))
    run = list(reversed(reversed_run))
    # A connector cannot start a name ("of Mara Vance" -> "Mara Vance").
    while run and is_connector(run[0]):
        run = run[1:]
    return run


def _clean(name: str) -> str:
    name = name.strip(" \"'“”,:;?.")
    return re.sub(r"^(the|both)\s+", "", name, flags=re.IGNORECASE).strip()


def _predicate(question: str, entities: tuple[str, ...], language: Language) -> list[str]:
    entity_words = set(content_words(" ".join(entities), language.stopwords))
    words = [w for w in content_words(question, language.stopwords)
             if w not in entity_words and w not in language.auxiliaries]
    not_attributes = language.not_attributes | language.contrast_words
    mapped = [language.attribute_of.get(w, w) for w in words if w not in not_attributes]
    return list(dict.fromkeys(mapped))


def _past_opening_words(words: list[str], language: Language, also: frozenset[str] = frozenset()) -> list[str]:
    """Words past a capitalised sentence opener ("What", "Were", and any of `also`): those are no name."""
    while words and words[0].lower().strip("\"'") in language.stopwords | language.auxiliaries | also:
        words = words[1:]
    return words


def _up_to_clause(tail: str) -> str:
    """What follows a comparison's last "or"/"and" up to a comma that opens a clause."""
    clause = _CLAUSE_AFTER_NAME.search(tail)
    return tail[: clause.start()] if clause else tail


def _listed_name(segment: str, language: Language, *, opens: bool = False) -> str | None:
    """A list item that is a name; in the segment that opens the question, past its opening words ("Were Mara
    Vance", "Compare Quillpack"). Between commas every word counts: "Which came first, A, B or C?"."""
    words = _past_opening_words(segment.split(), language, language.contrast_words) if opens else segment.split()
    if not words or _leading_name(words) != words or all(w.isdigit() for w in words):
        return None
    return _clean(" ".join(words)) or None


def _comparison_of_a_list(question: str, language: Language) -> tuple[str, ...] | None:
    """Three or more names in a list: "Who is oldest, X, Y or Z?", "Were X, Y and Z all American?",
    "Compare X, Y, and Z"; None for two (the other forms read those)."""
    body = question.rstrip(" ?.")
    lowered = body.lower().split()
    cues = language.than_cues | language.contrast_words | language.superlatives
    cued = (bool(lowered) and lowered[0] in language.auxiliaries) or any(w.strip(",:") in cues for w in lowered)
    last = max(body.rfind(" or "), body.rfind(" and "))
    if not cued or last < 0:
        return None
    head, (_, *tail) = body[:last].rstrip(","), body[last:].split(maxsplit=1)
    names: list[str] = []
    segments = head.split(",")
    for index in reversed(range(len(segments))):
        _, colon, item = segments[index].rpartition(":")  # "Which is fastest: X" (a title may hold one too)
        name = _listed_name(item, language, opens=index == 0)
        if name is None:
            break
        names.insert(0, name)
        if colon:
            break  # the question's opening words came before the colon
    right = _clean(" ".join(_leading_name(_up_to_clause(tail[0]).split()))) if tail else ""
    items = [*names, right]
    if len(names) < 2 or not right or any(len(item.split()) > MAX_NAME_WORDS for item in items):
        return None
    if len({item.lower() for item in items}) < len(items):
        return None
    return tuple(items)


def _comparison_with_or(question: str, language: Language) -> tuple[str, str] | None:
    """"Who is older, X or Y?" / "Is X or Y the ...?" """
    body = question.rstrip(" ?").replace("--", ", ")
    at = body.find(" or ")
    if at < 0:
        return None
    head, tail = body[:at].rstrip(","), body[at + 4:]  # "..., X, or Y" (a serial comma)
    split_at = max(head.rfind(","), head.rfind(":"))
    head_words = head.split()
    if split_at >= 0:
        left = head[split_at + 1:]
        if _leading_name(left.split()) != left.split():  # "... in May, 2009 a goalkeeper or ..."
            return None
        *earlier, before = head[:split_at].split(",")
        listed = _listed_name(before, language, opens=not earlier)
        if head[split_at] == "," and ":" not in before and listed is not None:
            return None  # "X, Y or Z" that no cue made a comparison of a list: not a pair either
    elif head_words and head_words[0].lower() in language.auxiliaries:
        # "Is the Velmora or the Tarrasine ...": everything between the verb and "or" must be the name.
        left_words = head_words[1:]
        if not left_words or _leading_name(left_words) != left_words:
            return None
        left = " ".join(left_words)
    elif any(w.lower().strip(",?") in language.than_cues | language.superlatives for w in body.split()):
        # "Which genus has more species Velmora or Tarrasine?": the name closes the head.
        left = " ".join(_trailing_name(head_words))
    else:
        return None
    # The second entity runs to the end, or to a comma that opens a clause ("..., had more members").
    right = _up_to_clause(tail)
    if split_at < 0:
        right = " ".join(_leading_name(right.split())) or right
    left, right = _clean(left), _clean(right)
    if not left or not right or len(left.split()) > MAX_NAME_WORDS or len(right.split()) > MAX_NAME_WORDS:
        return None
    return left, right


def _comparison_with_and(question: str, language: Language) -> tuple[str, str] | None:
    """"Were X and Y of the same nationality?" / "What occupation do X and Y share?" """
    words = _WORD.findall(question.rstrip(" ?"))
    lowered = [w.lower().strip(",") for w in words]
    starts_with_aux = bool(lowered) and lowered[0] in language.auxiliaries
    has_cue = any(w.strip(".,") in language.comparison_cues | language.contrast_words for w in lowered)
    if not (starts_with_aux or has_cue):
        return None
    for i, word in enumerate(lowered):
        if word != "and" or i == 0:
            continue
        left_words = [w.rstrip(",") for w in words[:i]]
        if starts_with_aux:
            left_words = left_words[1:]
        if left_words and left_words[0].lower() == "both":
            left_words = left_words[1:]
        left = _trailing_name(left_words)
        while left and left[0].lower() in language.contrast_words:  # "Compare X and Y"
            left = left[1:]
        right = _leading_name(words[i + 1:])
        if left and right:
            return _clean(" ".join(left)), _clean(" ".join(right))
    return None


def _second_entity(words: list[str], language: Language) -> str | None:
    """The name a linking word introduces: "than (in) (the) (director of) Y ..."; None for "than 300 papers"."""
    if words and words[0].lower() in language.leading_prepositions:
        words = words[1:]
    if words and words[0].lower() == "the":
        words = words[1:]
    if len(words) > 1 and words[0].lower() in language.relation_words and words[1].lower() == "of":
        words = words[2:]
    name = _leading_name(words)
    if not name or name[0][0].isdigit():
        return None
    return _clean(" ".join(name)) or None


def _comparison_with_link(question: str, language: Language) -> tuple[str, str] | None:
    """"Is X taller than Y?", "How many more titles did X win than Y?", "How does X differ from Y?",
    "Is X similar to Y?", "How does X compare with Y?"

    X is the first name after the question's opening words, Y the name the linking word introduces (past a
    preposition, "the" and a relation such as "director of"). Not a comparison of two entities: "more than
    300 papers", "other than racing", "than the one at ...", "moved from Paris" (no cue before "from"),
    "X, that is similar to Y, ..." (a relative clause describes X; the question asks something else).
    """
    body = question.rstrip(" ?")
    for match in language.link_word.finditer(body):
        link = match.group(1)
        head_words = [w.lower().strip(",") for w in body[:match.start()].split()]
        cues = language.cues_before.get(link, frozenset())
        # "X, that is similar to Y, ..." describes X: a relative pronoun before the cue compares nothing
        cued = (any(w in cues for w in head_words) if link == "than"
                else bool(head_words) and head_words[-1] in cues
                and not language.relative_pronouns & set(head_words[-3:-1]))
        if not cued:
            continue
        left = _first_named_entity(body[:match.start()], language)
        right = _second_entity(body[match.end():].split(), language)
        if left and right and len(left.split()) <= MAX_NAME_WORDS and len(right.split()) <= MAX_NAME_WORDS:
            return left, right
        return None
    return None


def _comparison_with_versus(question: str, language: Language) -> tuple[str, str] | None:
    """"Quillpack vs Stowbuild: which is faster?" / "Tomas Reyne versus Mara Vance: who directed more films?" """
    parts = language.chain_joiner.split(question.rstrip(" ?"), maxsplit=1)
    if len(parts) != 2:
        return None
    left = _clean(" ".join(_past_opening_words(_trailing_name(parts[0].split()), language)))
    right = _second_entity(parts[1].split(), language)
    return (left, right) if left and right else None


def _comparison_of_held_pair(question: str) -> tuple[str, str] | None:
    """Two names held as one word each (code, quoted, or known to the collection) joined by "or", wherever the
    sentence puts them: "format_exc_info or dict_tracebacks for exceptions?", "Should I raise click.BadParameter or
    click.UsageError from my callback?". Capitalised words are left to the rules above: "Is Mara Vance or ..." is
    read by where the verb and the commas put the names."""
    match = _HELD_PAIR.search(question)
    return (match.group(1), match.group(2)) if match else None


def _hold_quoted(question: str) -> tuple[str, dict[str, str]]:
    """The question with each quoted or `code` span, each call or subscript written out (`IntRange(0, 5, clamp=True)`,
    `Annotated[int, override(rename="id")]`) and each piece of code written without backticks (`--exclude`,
    `structlog.stdlib.get_logger`, `format_exc_info`) as one name word ("Quoted0"), and what each stands for: "Which
    is faster, `uv` or `pip`?" compares two names, lower case or not, with spaces or commas inside. Quotes glued to
    what comes before them are code and stay (`markdown="block"` is what the documents write)."""
    spans: dict[str, str] = {}

    def hold(match: re.Match[str]) -> str:
        span = next(group for group in match.groups() if group is not None).strip()
        before = question[match.start() - 1] if match.start() else " "
        if match.lastindex in _QUOTE_GROUPS and not before.isspace() and before not in "([{":  # glued: code
            span = match.group(0)
        if match.lastindex is not None and match.lastindex > _QUOTED_SPANS and is_abbreviation(span):
            return match.group(0)  # "e.g" written out is not code (a quoted `x` is still a name)
        token = f"Quoted{len(spans)}"
        spans[token] = span
        return token

    return _QUOTED.sub(hold, question), spans


_EDGE_PUNCTUATION = ",.;:!?)("
_LONGEST_KNOWN_NAME = 5  # words


def _hold_known_names(question: str, spans: dict[str, str], known: KnownNames, language: Language) -> str:
    """The question with each name the collection knows that is not capitalised throughout (`quillpack`,
    `smart_lists`, `quill env create`: the capital-letter rules would miss it) as one name word too, longest first;
    `spans` gains what each stands for. A name of `language`'s stopwords alone ("the", "how") is never one."""
    if not known:
        return question
    words = question.split()
    out: list[str] = []
    i = 0
    while i < len(words):
        for n in range(min(_LONGEST_KNOWN_NAME, len(words) - i), 0, -1):
            run = words[i:i + n]
            name = " ".join(run).strip(_EDGE_PUNCTUATION)
            trailing = " ".join(run)[len(" ".join(run).rstrip(_EDGE_PUNCTUATION)):]
            if (any(w.startswith("Quoted") for w in run) or all(is_name_word(w) for w in run)
                    or not content_words(name, language.stopwords) or not known.knows(name)):
                continue
            token = f"Quoted{len(spans)}"
            spans[token] = name
            out.append(token + trailing)
            i += n
            break
        else:
            out.append(words[i])
            i += 1
    return " ".join(out)


def _restore(text: str, spans: dict[str, str]) -> str:
    return re.sub(r"Quoted\d+", lambda m: spans.get(m.group(0), m.group(0)), text)


def _side(text: str, language: Language, *, open_end: bool) -> str:
    """One side of a comparison as the form captured it (`_side_as_written`), less a bare possessive ("black's" ->
    "black")."""
    return _without_possessive(_side_as_written(text, language, open_end=open_end), language)


def _without_possessive(name: str, language: Language) -> str:
    return re.sub(rf"(?<=\w)(?:{language.possessive})$", "", name)


def _side_as_written(text: str, language: Language, *, open_end: bool) -> str:
    """One side of a comparison as the form captured it: from its last comma or colon (the question's own words
    come before those) or, when the form leaves its end open, to where the question goes on (`side_ends`), less the
    words a side never starts or ends with."""
    if open_end:
        end = language.side_ends.search(text)
        text = text[: end.start()] if end else text
    else:
        text = re.split(r"[,:]\s|(?<=[a-z]{3}[.!?])\s+", text)[-1]  # after "... instead of dicts." too
    words = text.strip(" \"'“”.?").split()
    while words and words[0].lower() in language.side_openers:
        words = words[1:]
    while words and words[-1].lower() in language.side_closers:
        words = words[:-1]
    return " ".join(words)


def _owner_and_owned(a: str, b: str, language: Language) -> tuple[str, str] | None:
    """"isort's default way of wrapping" against a bare "black's": the sides are the two owners, "isort" and "black"
    (what is owned is said once, on the first side, and is the predicate both share); None for any other pair."""
    b_words, a_words = b.split(), a.split()
    if len(b_words) != 1 or _without_possessive(b, language) == b:
        return None
    owner = next((i for i, word in enumerate(a_words[:-1]) if _without_possessive(word, language) != word), None)
    if owner is None:
        return None
    return _without_possessive(" ".join(a_words[: owner + 1]), language), _without_possessive(b, language)


def _listed_sides(items: str, language: Language) -> list[str]:
    """"X, Y and Z for W" -> [X, Y, Z]: comma-separated, the last two joined by a `list_joiners` word; "X vs Y vs Z"
    -> [X, Y, Z]: every two joined by a `chain_joiners` word."""
    chained = language.chain_joiner.split(items)
    if len(chained) >= 2:
        return chained
    *firsts, last = [part for part in re.split(r",\s*", items) if part.strip()] or [""]
    joiners = "|".join(language.list_joiners)
    firsts = [re.sub(rf"^(?:{joiners})\s+", "", f.strip()) for f in firsts]
    serial = re.match(rf"(?:{joiners})\s+", last)  # "X, Y, or Z": the joiner after the last comma
    if serial is not None and firsts:
        return [*firsts, last[serial.end():]]
    joiner = re.search(rf"\s+(?:{joiners})\s+", last)
    if joiner is None:
        return []
    return [*firsts, last[: joiner.start()], last[joiner.end():]]


def _comparison_by_form(question: str, language: Language) -> tuple[str, ...] | None:
    """The sides of a comparison recognised by its form alone (`Language.comparison_forms`), any kind of name."""
    body = question.strip().rstrip(" ?.!")
    for form in language.comparison_forms:
        match = form.search(body)
        if match is None:
            continue
        groups = match.groupdict()
        if groups.get("items") is not None:
            listed = _listed_sides(groups["items"], language)
            sides = [_side(item, language, open_end=i == len(listed) - 1) for i, item in enumerate(listed)]
        else:
            a = _side_as_written(groups["a"], language, open_end=False)
            b = _side_as_written(groups["b"], language, open_end=True)
            sides = list(_owner_and_owned(a, b, language)
                         or (_without_possessive(a, language), _without_possessive(b, language)))
        if len(sides) >= 2 and all(sides) and all(len(s.split()) <= language.max_side_words for s in sides) \
                and len({s.lower() for s in sides}) == len(sides) \
                and not any(_says_nothing(side, language) for side in sides):
            return tuple(sides)
    return None


def _says_nothing(side: str, language: Language) -> bool:
    """Whether a side is one word that names nothing ("... why would I prefer *it* over ..."), written in lower case
    (a capital "A" in "A, B or C" is a name; "doing it with gunicorn" still says how)."""
    return side.islower() and side in language.stopwords


def find_comparison(question: str, language: Language = ENGLISH, known: KnownNames = NO_NAMES) -> Comparison | None:
    """The entities a comparison question compares (two, or more for a list), or None.

    Its form first ("How does X differ from Y?", "X vs Y", "Should I use X or Y for Z?", ...: any kind of
    name), then the forms that need names to look like names ("Were X and Y ...?", "Who is older, X or Y?"): a
    capitalised run, a quoted or `code` span, or a name the collection knows (`known`: "Do quillpack and stowbuild both
    read pyproject.toml?" on a collection with pages or sections about both).
    """
    held, spans = _hold_quoted(question)
    quoted = set(spans)
    held = _hold_known_names(held, spans, known, language)
    named = set(spans) - quoted
    found = (_comparison_by_form(held, language) or _comparison_of_a_list(held, language)
             or _comparison_with_or(held, language) or _comparison_with_and(held, language)
             or _comparison_with_link(held, language) or _comparison_with_versus(held, language)
             or _comparison_of_held_pair(held))
    if found is None:
        return None
    # The predicate is read with the quoted sides held (their words are no attribute) and the rest as written.
    as_written = {token: span for token, span in spans.items()
                  if token in named or not any(token in side for side in found)}
    predicate = _predicate(_restore(held, as_written), tuple(_restore(e, as_written) for e in found), language)
    entities = tuple(_restore(e, spans) for e in found)
    if not all(entities) or len({e.lower() for e in entities}) < len(entities):
        return None
    return Comparison(entities=entities, predicate=predicate)


@dataclass(frozen=True)
class BridgeComparison:
    entities: tuple[str, str]
    relation: str  # "director": what of each entity the chain goes through
    attribute: list[str]  # what is compared about the related entity ("born", "died first")


def find_bridge_comparison(question: str, language: Language = ENGLISH) -> BridgeComparison | None:
    """A comparison of a relation of two entities ("Which film has the director born earlier, X or Y?"), or None.

    The relation must link to a second entity ("has the director", "whose director", "the director of"):
    in "Which film director is younger, X or Y?" the directors are the entities themselves.
    """
    each = language.relation_of_each.search(question.rstrip())
    if each is not None:
        relation, left, right = each.group(1).lower(), _clean(each.group(2)), _clean(each.group(3))
        entities: tuple[str, str] | None = (left, right) if left and right and left.lower() != right.lower() else None
    else:
        link = language.relation_link.search(question)
        comparison = find_comparison(question, language) if link is not None else None
        entities = None
        if comparison is not None and len(comparison.entities) == 2:  # two chains fill four subqueries
            entities = (comparison.entities[0], comparison.entities[1])
        relation = (link.group(1) or link.group(2)).lower() if link is not None else ""
    if entities is None:
        return None
    entity_words = set(content_words(" ".join(entities), language.stopwords))
    words = [w for w in content_words(question, language.stopwords) if w not in entity_words
             and w not in language.auxiliaries and w not in language.kind_words
             and language.plural_relations.get(w, w) not in language.relation_words
             and w not in language.not_attributes]
    # The mapped attribute ("older" -> "born") is what the related entity's page states; the word as asked
    # stays too, so the hop shares a word with the question (plans are checked for that).
    attribute = list(dict.fromkeys([language.attribute_of.get(w, w) for w in words] + words))
    return BridgeComparison(entities=entities, relation=relation, attribute=attribute)


def bridge_comparison_plan(question: str, found: BridgeComparison) -> Plan:
    """Two chains, one layer each: s1, s2 find each entity's page and the related entity it names; s3, s4 search
    each related entity's page for the attribute; the writer compares."""
    firsts = [SubQuery(id=f"s{i}", text=f"{entity} {found.relation}", hints=Hints(must_include=[entity]), role="side")
              for i, entity in enumerate(found.entities, start=1)]
    attribute = " ".join(found.attribute) or found.relation
    hops = [SubQuery(id=f"s{i + 2}", text=f"{{{first.id}}} {attribute}", parents=[first.id])
            for i, first in enumerate(firsts, start=1)]
    return Plan(query=question, subqueries=[*firsts, *hops])


def bridge_plan(question: str) -> Plan:
    """Hop 1 searches the question as asked; hop 2 searches it again about the entity hop 1 found."""
    return Plan(query=question, subqueries=[
        SubQuery(id="s1", text=question),
        SubQuery(id="s2", text=f"{{s1}} {question}", parents=["s1"]),
    ])


def plan_offline(question: str, *, enable_dag: bool = True, subquery_max: int = 4, bridge: bool = True,
                 language: Language = ENGLISH, known: KnownNames = NO_NAMES) -> Plan:
    """The rule-based plan for a (standalone) question, read with `language`'s words and forms and the names the
    collection knows."""
    if not enable_dag or subquery_max < 2:
        return single_query_plan(question)
    bridge_comparison = find_bridge_comparison(question, language) if bridge and subquery_max >= 4 else None
    if bridge_comparison is not None:
        return bridge_comparison_plan(question, bridge_comparison)
    comparison = find_comparison(question, language, known)
    if comparison is not None and len(comparison.entities) > subquery_max:
        comparison = None  # a subquery each would not fit; the question is searched as asked
    if comparison is None:
        worth_a_hop = bridge and len(content_words(question, language.stopwords)) >= BRIDGE_MIN_CONTENT_WORDS
        return bridge_plan(question) if worth_a_hop else single_query_plan(question)
    subqueries = [
        SubQuery(
            id=f"s{i}",
            text=" ".join([entity, *comparison.predicate]),
            hints=Hints(must_include=[entity]),
            role="side",
        )
        for i, entity in enumerate(comparison.entities, start=1)
    ]
    return Plan(query=question, subqueries=subqueries)


def _first_named_entity(text: str, language: Language) -> str | None:
    words = _WORD.findall(text)
    for i in range(len(words)):
        run = _past_opening_words(_leading_name(words[i:]), language)
        if run:
            return _clean(" ".join(run)) or None
    return None


def rewrite_with_history(question: str, history: list[str], language: Language = ENGLISH) -> str | None:
    """Replace the first pronoun of a follow-up question with the subject of the latest turn that names one.

    Returns None when the question needs no rewrite (no pronoun, or no name to put in its place).
    """
    words = _WORD.findall(question)
    for i, word in enumerate(words):
        key = word.lower().strip("?,.!")
        if key not in language.pronoun_suffixes:
            continue
        for turn in reversed(history):
            entity = _first_named_entity(turn, language)
            if entity:
                trailing = word[len(word.rstrip("?,.!")):]
                words[i] = entity + language.pronoun_suffixes[key] + trailing
                return " ".join(words)
        return None
    return None
