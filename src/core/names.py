"""What counts as a name, for the offline heuristics that look for named entities without a model.

One vocabulary for every such heuristic: the rule planner (the two entities of a comparison question, the
subject of a turn for the history rewrite) scans whitespace-separated words; the bridge hop finds named
spans in a passage with a regular expression. Both build on the same two facts:

- a *name word* starts with a capital letter or a digit ("Mara", "Vance", "1945", "Émile");
- a *connector* is a lower-case word that may join name words inside one name ("Echoes to Nowhere",
  "Siege of Harrow Vale", "Leonardo da Vinci", "Salt and Ember"), never start or end one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, NamedTuple

from .text import MATCHING_LETTERS, tokens

# "to" also glues ranges in passages ("1945 to 1969", "Ashford to Dunmere"); it stays because comparison
# questions need it ("Echoes to Nowhere or Velvet Static"), and on the multi-hop benchmark sets
# (ARCHITECTURE.md) it changed no bridge hop's chance to name the second page (a merged range also frees a slot
# under the span limit).
NAME_CONNECTORS = frozenset(
    """of the to for in on and & y de la le du del da di von van der den""".split()
)

# Every capital letter of the Basic Multilingual Plane, so "Émile" and "Łódź" are names too (`str.isupper`).
_CAPITALS = "".join(c for c in map(chr, range(0x10000)) if c.isupper())
NAME_START = f"[{re.escape(_CAPITALS)}\\d]"
"""A regex character class: the first character of a name word."""
NAME_WORD = rf"{NAME_START}(?:[\w'’\-]|\.(?=\w))*"
"""A regex for one name word in running text; a dot only inside it ("J.R.R"), never a sentence end."""
CONNECTOR = "(?:{})".format("|".join(re.escape(c) for c in sorted(NAME_CONNECTORS)))
"""A regex for one connector."""

_NAME_START = re.compile(NAME_START)
_WRAPPING = "\"'()“”‘’,:;"


def is_name_word(word: str) -> bool:
    """A whitespace-separated word that can be part of a name: past quotes and brackets, a capital or a digit."""
    return _NAME_START.match(word.strip(_WRAPPING)) is not None


def is_connector(word: str) -> bool:
    return word.lower() in NAME_CONNECTORS


# --- names the collection itself knows ------------------------------------------------------------------
# Users name things in lower case, dotted or as code (`httpx`, `quillpack.ext.toc`, `--strict-mode`): no
# capital letter marks those. What the collection calls its pages and sections, and the code its headings name, is
# a name whatever its case: gathered at ingest (`names_of_page`) and read back as `KnownNames`.

_CODE_SPAN = re.compile(r"(?<!`)`([^`\n]{1,80})`(?![`_])")
# A Markdown link's text ("[the cache guide](cache.md)") or a reStructuredText one (`the cache guide <cache.html>`_).
_LINK_TEXT = re.compile(r"(?<!!)\[([^\]\n]{1,80})\]\([^)\n]*\)|`([^`<\n]{1,80}?)\s*<[^>\n]+>`__?")
MAX_NAME_CHARS = 80
_RECORD = re.compile(r":\d+$")  # a JSON Lines record's source: "corpus.jsonl:12"
NAMES_KEY = "dagrag_names"
"""The key of a collection's metadata that records the names it knows."""
WORDS_KEY = "dagrag_words"
"""The key of a collection's metadata that records the words its passages hold (`word_beginnings`)."""


# The code a question names, which is spelled one way: a `span`, an --option or -x flag, a dotted or underscored
# identifier (`markdown.Markdown`, `sane_lists`, `setup.py`). Hyphenated words are left out: prose has them too.
CODE_IDENTIFIER = r"(?<![\w-])(--?[A-Za-z][\w-]*)|(?<![\w.])([A-Za-z_]\w*(?:[._]\w+)+)"
"""A regex for code written without backticks: an --option or -x flag, or a dotted or underscored identifier (two
groups, one of which matches)."""
_CODE_NAME = re.compile(rf"`([^`\n]{{1,80}})`|{CODE_IDENTIFIER}")


def code_names(text: str) -> list[str]:
    """The code `text` names (see `_CODE_NAME`), in order, each once; not an abbreviation like "i.e." or "e.g."
    (every part one letter)."""
    names = []
    for match in _CODE_NAME.finditer(text):
        name = next(group for group in match.groups() if group).strip()
        if name and not is_abbreviation(name):
            names.append(name)
    return list(dict.fromkeys(names))


def is_abbreviation(name: str) -> bool:
    """Whether a dotted or underscored `name` is an abbreviation ("i.e", "e.g": every part one letter), not code."""
    return all(len(part) <= 1 for part in re.split(r"[._]", name))


def names_all(text: str, code: Sequence[str]) -> bool:
    """Whether `text` names each piece of `code` as written (case kept: `-S` is not `-s`), not inside a longer name
    (`--exclude` is not in `--extend-exclude`). No code: False for every text."""
    return bool(code) and all(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) for name in code)


def is_code(term: str) -> bool:
    """Whether `term` is one piece of code as a whole (`--exclude`, `-S`, `markdown.markdown`), not prose."""
    return code_names(term) == [term.strip()]


class Place(NamedTuple):
    """Where a passage sits in its collection: its document's title, its section path (" > "-joined headings) and
    the file it comes from (`source`), as its payload holds them."""

    title: str
    section: str = ""
    source: str = ""

    @classmethod
    def of(cls, metadata: Mapping[str, Any] | None) -> Place:
        """A passage's place, read from its metadata or payload (a missing field reads as "")."""
        metadata = metadata or {}
        return cls(*(str(metadata.get(key) or "") for key in cls._fields))


def is_record(source: str) -> bool:
    """Whether a passage's `source` names a record of a JSON Lines file (`corpus.jsonl:12`), not a document."""
    return bool(_RECORD.search(source))


def file_name(source: str) -> str:
    """The name of the file a passage comes from, without its folder or extension (`extensions/sane_lists.md` →
    `sane_lists`); none for a record of a JSON Lines file (`corpus.jsonl:12`), which is not a page of its own."""
    if not source or is_record(source):
        return ""
    return PurePosixPath(source.replace("\\", "/")).stem


def headed_by(place: Place, code: Sequence[str]) -> bool:
    """Whether a passage's place — its document's title, a heading on its section path, or its file's name — names
    each piece of `code` as written (`names_all`): the section `--exclude` heads is about `--exclude`, one that mentions
    it may not be; documentation names a page after what it documents (`extensions/sane_lists.md`, titled "Sane Lists",
    is about `sane_lists`)."""
    return names_all(" > ".join([place.title, place.section, file_name(place.source)]), code)


def opening(passages: Sequence[Mapping[str, Any] | None]) -> int:
    """Of passages that share a place (`headed_by` the same name), given as their metadata or payloads, the index of the
    one that opens it: the earliest by its `position` in its document (0 where ingest recorded none), from the first
    passage's file. A page or a section says what it is about first ("The Sane Lists extension alters …"); its later
    passages, which often name the code, do not. Raises IndexError for no passages."""
    def position(i: int) -> int:
        value = (passages[i] or {}).get("position")
        return value if isinstance(value, int) else 0

    source = Place.of(passages[0]).source
    return min((i for i, metadata in enumerate(passages) if Place.of(metadata).source == source), key=position)


def name_key(name: str) -> str:
    """How a name is compared: case-folded, without quotes, backticks or a call's "()", spaces collapsed."""
    key = " ".join(name.strip().strip("`\"'“”‘’").split()).casefold()
    return key[:-2] if key.endswith("()") else key


def marked_spans(text: str) -> list[str]:
    """The spans a page marks as names in running text: inline code and link texts, in order, each once."""
    spans = [m.group(1) for m in _CODE_SPAN.finditer(text)]
    spans += [m.group(1) or m.group(2) for m in _LINK_TEXT.finditer(text)]
    return list(dict.fromkeys(s.strip() for s in spans if s.strip()))


def names_of_page(title: str, section: str = "") -> set[str]:
    """The names a chunk's place in its collection gives (as `name_key`s): its document's title, each heading of its
    section path (" > "-joined) and each code span in those headings."""
    names = [title, *section.split(" > ")] if section else [title]
    names += [span for heading in names for span in _CODE_SPAN.findall(heading)]
    keys = {name_key(name) for name in names}
    return {key for key in keys if key and len(key) <= MAX_NAME_CHARS and any(c.isalnum() for c in key)}


def word_beginnings(text: str) -> set[str]:
    """The words of `text` as a collection records them: each token (`core/text.tokens`) of at least MATCHING_LETTERS
    letters by its first MATCHING_LETTERS, a shorter one whole; the way a hop tells whether a page explains a word."""
    return {token[:MATCHING_LETTERS] for token in tokens(text)}


@dataclass(frozen=True)
class KnownNames:
    """What a collection knows: the names of its pages and sections (`names_of_page` over every chunk), and the words
    its passages hold (`word_beginnings`); either empty when the store recorded none."""

    keys: frozenset[str] = frozenset()
    words: frozenset[str] = frozenset()

    def knows(self, span: str) -> bool:
        return name_key(span) in self.keys

    def held(self, words: Sequence[str]) -> list[str]:
        """The `words` (lower-case tokens) some passage of the collection has, in order: the only ones a search can
        find. A word of at least MATCHING_LETTERS letters counts by its beginning, as `unexplained_words` matches; all
        of them when the collection records no words (then nothing can be said)."""
        return [word for word in words if not self.words or word[:MATCHING_LETTERS] in self.words]

    def __bool__(self) -> bool:
        return bool(self.keys)


NO_NAMES = KnownNames()
"""A collection that records no names (made elsewhere, or before names were recorded): hops follow capitals only."""


def names_in_metadata(metadata: Mapping[str, Any] | None) -> KnownNames:
    """The names and words a collection's metadata records under NAMES_KEY and WORDS_KEY (none when it records none)."""
    metadata = metadata or {}
    words = metadata.get(WORDS_KEY)  # a list, or a word saying there were too many to list (store.WORDS_UNLISTED)
    return KnownNames(frozenset(metadata.get(NAMES_KEY) or ()),
                      frozenset(words) if isinstance(words, list) else frozenset())
