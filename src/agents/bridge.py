"""Bridge hops, offline: from a parent's best passage to the searches its dependent child runs.

"What position was held by the woman who portrayed Corliss Archer?" — hop 1 finds the film's page,
which names the actress; hop 2 must ask about *her*. Without an LLM to read the passage, the child
tries every named span of the parent's passage that the question does not already name (up to a
limit), each joined with the question words the parent's passage does not explain. All of them are
searched as one batch; a candidate page titled by the span is preferred (wiki-style corpora have one
page per entity), and the cross-encoder picks the winner.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.names import CONNECTOR, NAME_WORD
from ..core.plan import PARENT_REFERENCE
from ..core.text import content_words

# A quoted title, or a run of name words that connectors may join ("Kiss and Tell", "Battle of Belleau Wood").
_NAMED_SPAN = re.compile(
    rf"\"([^\"]{{2,80}})\"|“([^”]{{2,80}})”|({NAME_WORD}(?:\s+(?:{CONNECTOR}\s+)*{NAME_WORD})*)")
_LEADING_FUNCTION_WORD = re.compile(
    r"^(?:The|A|An|In|On|At|By|For|From|After|Before|During|Since|His|Her|Its|Their|This|That|These|It|He|She)\s+")
# Capitalised words that name nothing on their own (sentence openers, nationalities, months).
_NOT_NAMES = frozenset(
    """the a an in on at by he she it they his her its their this that these there after before during when
    while however also born american british english french german italian spanish canadian australian
    january february march april may june july august september october november december""".split()
)
_TITLE_QUALIFIER = re.compile(r"\s*\([^)]*\)\s*$")
# A fenced code block, closed by the same fence or by the end of the passage (a chunk may end inside one).
_FENCED_CODE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,})[^\n]*(?:\n.*?(?:^[ ]{0,3}\1[ \t]*$|\Z)|\Z)",
                          re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class BridgeQuery:
    entity: str
    text: str


def named_spans(passage: str, known: str, limit: int) -> list[str]:
    """Named spans of `passage` (capitalised runs, quoted titles) that `known` does not already name."""
    known_words = set(content_words(known))
    spans: list[str] = []
    for match in _NAMED_SPAN.finditer(passage):
        quoted, curly_quoted, capitalised = match.groups()
        span = (quoted or curly_quoted or _LEADING_FUNCTION_WORD.sub("", capitalised or "")).strip(" .,;:'’-")
        words = content_words(span)
        if not words or all(w in known_words for w in words):
            continue
        if len(words) == 1 and words[0] in _NOT_NAMES:
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


def unexplained_words(child_text: str, evidence: str) -> list[str]:
    """The child's content words that the parent's evidence does not contain: what is left to find."""
    seen = set(content_words(evidence))
    words = content_words(PARENT_REFERENCE.sub(" ", child_text))
    return list(dict.fromkeys(w for w in words if w not in seen))


def bridge_queries(child_text: str, parent_title: str, parent_passage: str, question: str,
                   limit: int) -> list[BridgeQuery]:
    """One query per candidate bridge entity: the parent's title (when the question does not name it)
    and the named spans of its passage, each with the words the passage leaves unexplained."""
    rest = " ".join(unexplained_words(child_text, f"{parent_title} {parent_passage}"))
    title = _TITLE_QUALIFIER.sub("", parent_title)
    spans = named_spans(title, question, 1) + named_spans(prose(parent_passage), question, limit)
    entities = list(dict.fromkeys(spans))[:limit]
    return [BridgeQuery(entity=e, text=f"{e} {rest}".strip()) for e in entities]


def title_words(title: str) -> set[str]:
    """The content words of a page's title, its qualifier left out ("Hello Love (song)" → hello, love)."""
    return set(content_words(_TITLE_QUALIFIER.sub("", title)))


def titled_by(title: str, entity: str) -> bool:
    """True when a page's title names the entity ("Shirley Temple" ~ "Shirley Temple Black")."""
    page_words = title_words(title)
    entity_words = set(content_words(entity))
    return bool(page_words) and bool(entity_words) and (
        page_words <= entity_words or entity_words <= page_words)
