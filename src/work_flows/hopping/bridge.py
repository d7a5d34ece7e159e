"""Bridge hops, offline: from a parent's best passage to the searches its dependent child runs.

"Which public office did the actress who played Nora Quill hold?" — hop 1 finds the film's page,
which names the actress; hop 2 must ask about *her*. Without an LLM to read the passage, the child
tries every named span of the parent's passage that the question does not already name (up to a
limit), each joined with the question words the parent's passage does not explain. All of them are
searched as one batch; a candidate page titled by the span is preferred (wiki-style corpora have one
page per entity), and the cross-encoder picks the winner.

Those keyword searches are what a dense and a sparse index match best, but a cross-encoder trained on questions
reads them badly: a query like "Veloria charge country located" can score Veloria's paragraph on its president
near zero (0.001 in one measured case). A hop's second try (`phrased_queries`) pairs each entity with the
question's opening clause as written instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...core.language import ENGLISH, Language
from ...core.names import CONNECTOR, NAME_WORD, NO_NAMES, KnownNames, marked_spans
from ...core.plan import PARENT_REFERENCE
from ...core.text import content_words, unexplained_words

# A quoted title, or a run of name words that connectors may join ("Salt and Ember", "Siege of Harrow Vale").
_NAMED_SPAN = re.compile(
    rf"\"([^\"]{{2,80}})\"|“([^”]{{2,80}})”|({NAME_WORD}(?:\s+(?:{CONNECTOR}\s+)*{NAME_WORD})*)")
_TITLE_QUALIFIER = re.compile(r"\s*\([^)]*\)\s*$")
# A fenced code block, closed by the same fence or by the end of the passage (a chunk may end inside one).
_FENCED_CODE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,})[^\n]*(?:\n.*?(?:^[ ]{0,3}\1[ \t]*$|\Z)|\Z)",
                          re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class BridgeQuery:
    entity: str
    text: str


def named_spans(passage: str, known: str, limit: int, *, language: Language = ENGLISH) -> list[str]:
    """Named spans of `passage` (capitalised runs, quoted titles) that `known` does not already name; a lone word of
    `language.not_names` (a sentence opener, a month) is none."""
    known_words = set(content_words(known, language.stopwords))
    spans: list[str] = []
    for match in _NAMED_SPAN.finditer(passage):
        quoted, curly_quoted, capitalised = match.groups()
        span = (quoted or curly_quoted or language.name_opener.sub("", capitalised or "")).strip(" .,;:'’-")
        words = content_words(span, language.stopwords)
        if not words or all(w in known_words for w in words):
            continue
        if len(words) == 1 and words[0] in language.not_names:
            continue
        if span not in spans:
            spans.append(span)
        if len(spans) >= limit:
            break
    return spans


def prose(passage: str) -> str:
    """The passage without its fenced code blocks: a quoted string there is a literal (`tab="config.toml"`,
    `virtual = "~/.virtualenvs"`), not the title of something another page is about."""
    return _FENCED_CODE.sub(" ", passage)


def bridge_entities(parent_title: str, parent_passage: str, question: str, limit: int, *,
                    language: Language = ENGLISH, known: KnownNames = NO_NAMES) -> list[str]:
    """The candidate bridge entities of a parent page, at most `limit`: its title (when the question does not name
    it), then the named spans of its passage's prose, then its code spans and link texts that name something the
    collection has a page or section for (`known`): a hop follows a name to where the collection explains it."""
    title = _TITLE_QUALIFIER.sub("", parent_title)
    text = prose(parent_passage)
    asked = set(content_words(question, language.stopwords))
    spans = [*named_spans(title, question, 1, language=language),
             *named_spans(text, question, limit, language=language),
             *(s for s in marked_spans(text)
               if known.knows(s) and not set(content_words(s, language.stopwords)) <= asked)]
    return list(dict.fromkeys(spans))[:limit]


def bridge_queries(child_text: str, parent_title: str, parent_passage: str, question: str, limit: int, *,
                   language: Language = ENGLISH, known: KnownNames = NO_NAMES) -> list[BridgeQuery]:
    """One query per candidate bridge entity (`bridge_entities`), each with the words the passage leaves
    unexplained."""
    rest = " ".join(unexplained_words(PARENT_REFERENCE.sub(" ", child_text), [parent_title, parent_passage],
                                      matching_letters=None, stopwords=language.stopwords))
    return [BridgeQuery(entity=e, text=f"{e} {rest}".strip())
            for e in bridge_entities(parent_title, parent_passage, question, limit, language=language, known=known)]


def clause_breaks(question: str, *, language: Language = ENGLISH) -> list[re.Match[str]]:
    """Where the question's clauses meet (`Language.clause_break`): each relative clause describes another thing
    of the chain. A break with no content word before it is the question's own wh-word ("When was ...", "To which
    group ..."), not the start of another clause."""
    return [b for b in language.clause_break.finditer(question)
            if content_words(question[:b.start()], language.stopwords)]


def opening_clause(question: str, *, language: Language = ENGLISH) -> str:
    """The question up to its first clause break, as written: what it asks ("Who governed the province",
    from "... the province where Tallowmere is located?")."""
    breaks = clause_breaks(question, language=language)
    return question[:breaks[0].start()].strip() if breaks else question.strip()


def phrased_queries(parent_title: str, parent_passage: str, question: str, limit: int, *,
                    language: Language = ENGLISH, known: KnownNames = NO_NAMES) -> list[BridgeQuery]:
    """One query per candidate bridge entity, each with the question's opening clause as written, less the
    names the question gives ("Veloria Who governed the country is located"): the names describe
    the hops before, and the entity stands in for them."""
    clause = opening_clause(question, language=language)
    wh_word = re.match(r"\W*\w+", clause)
    start = wh_word.end() if wh_word else 0  # "Who was ...": the first word is no name
    rest = _NAMED_SPAN.sub(lambda m: " " if content_words(m.group(0), language.stopwords) else m.group(0),
                           clause[start:])
    rest = language.dangling_end.sub("", language.possessive_mark.sub("", rest))
    clause = " ".join(f"{clause[:start]} {rest}".split())
    return [BridgeQuery(entity=e, text=f"{e} {clause}".strip())
            for e in bridge_entities(parent_title, parent_passage, question, limit, language=language, known=known)]


def title_words(title: str, *, language: Language = ENGLISH) -> set[str]:
    """The content words of a page's title, its qualifier left out ("Paper Lanterns (song)" → paper, lanterns)."""
    return set(content_words(_TITLE_QUALIFIER.sub("", title), language.stopwords))


def page_of_entity(title: str, entity: str, question: str = "", *, language: Language = ENGLISH) -> bool:
    """True when a page's title names nothing but the entity ("Veloria" for Veloria, "Lena Marwick" for
    "17-year-old Lena Marwick"), not a page about more ("Margaret Hollis" for "Margaret"), nor one the question
    itself names ("Northern Rowing League Cup Final", for the entity "60th Northern Rowing League Cup Final":
    that is where the chain started, not where its hop leads)."""
    page_words = title_words(title, language=language)
    return (bool(page_words) and page_words <= set(content_words(entity, language.stopwords))
            and not page_words <= set(content_words(question, language.stopwords)))


def titled_by(title: str, entity: str, *, language: Language = ENGLISH) -> bool:
    """True when a page's title names the entity ("Lena Marwick" ~ "Lena Marwick Dale")."""
    page_words = title_words(title, language=language)
    entity_words = set(content_words(entity, language.stopwords))
    return bool(page_words) and bool(entity_words) and (
        page_words <= entity_words or entity_words <= page_words)
