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
