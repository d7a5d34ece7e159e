"""The sentence forms the offline planner reads, for one language: English here.

A comparison is recognised by its *form* ("How does X differ from Y?", "X vs Y: which ...?", "Should I use X
or Y for Z?"), whatever X and Y look like: capitalised names, lower-case package names, dotted paths,
`code`, options such as `--exclude`. The planner takes a `Language` (`plan_offline(..., language=...)`), so
another language is another instance of it, not an edit of the planner.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Language:
    """What the planner needs to know about a language to split a comparison into its sides.

    - `comparison_forms`: patterns over the whole question (trailing "?" removed), each with groups `a` and
      `b` (the two sides) or `items` (a list of sides joined by commas and `list_joiners`); tried in order.
    - `side_ends`: where a side stops when the form leaves its end open ("... or Y *for a monorepo*").
    - `side_openers` / `side_closers`: words a side never starts / ends with ("*the* black hook").
    - `list_joiners`: the words that join the last item of a list ("X, Y *and* Z").
    """

    comparison_forms: tuple[re.Pattern[str], ...]
    side_ends: re.Pattern[str]
    side_openers: frozenset[str]
    side_closers: frozenset[str]
    list_joiners: tuple[str, ...]
    max_side_words: int = 8


def _forms(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


_PEOPLE = r"(?:i|we|you|one)"
_CHOOSE = r"(?:use|pick|choose|prefer|go\s+with|take|install|adopt|learn|switch\s+to)"

ENGLISH = Language(
    comparison_forms=_forms(
        # "How does X differ from Y?", "How is X different from Y?", "How does X compare to/with Y?"
        r"\bhow\s+(?:does|do|did|is|are)\s+(?P<a>.+?)\s+(?:differ|different|compare)\s+(?:from|to|with|against)\s+(?P<b>.+)$",
        # "What's the difference between X and Y?", "... between X, Y and Z in W"
        r"\bdifferences?\s+between\s+(?P<items>.+)$",
        # "When would I pick X over Y?", "... use X instead of Y"
        rf"\bwhen\s+(?:would|should|do|does|might|could|can)\s+{_PEOPLE}\s+{_CHOOSE}\s+(?P<a>.+?)\s+"
        r"(?:over|instead\s+of|rather\s+than)\s+(?P<b>.+)$",
        # "Should I use X or Y for Z?", "Do we pick X or Y?"
        rf"\b(?:should|shall|do|would|could|can)\s+{_PEOPLE}\s+{_CHOOSE}\s+(?P<a>.+?),?\s+or\s+(?P<b>.+)$",
        # "Is X similar to Y?", "Is X equivalent to Y?"
        r"^(?:is|are|was|were)\s+(?P<a>.+?)\s+(?:similar|comparable|equivalent|identical|analogous)\s+"
        r"(?:to|with)\s+(?P<b>.+)$",
        # "X compared to Y, which ...?"
        r"^(?P<a>.+?)\s+(?:compared|in\s+comparison)\s+(?:to|with)\s+(?P<b>.+)$",
        # "X vs Y: which ...?", "X versus Y"
        r"^(?P<a>.+?)\s+(?:vs\.?|versus)\s+(?P<b>.+)$",
        # "Compare X, Y and Z", "Compare X and Y for Z"
        r"^compare\s+(?P<items>.+)$",
        # "Which is better for Z, X or Y?", "Which is faster: X or Y?"
        r"^(?:which|what)\b[^,:]*[,:]\s+(?P<a>[^,:]+?),?\s+or\s+(?P<b>[^,:]+)$",
        # "X or Y: which ...?"
        r"^(?P<a>[^,:]+?)\s+or\s+(?P<b>[^,:]+):\s+(?:which|what|who|how)\b.*$",
    ),
    side_ends=re.compile(
        r"\s*[?:;,]|\s+(?:for|to|in|when|if|with|on|at|because|so|which|that|while|regarding|about|"
        r"and\s+(?:why|how|what|which|when))\b"),  # case-sensitive: "Lean On Tomorrow" is a name, " on " is not
    side_openers=frozenset("the a an my our your plain using".split()),
    side_closers=frozenset("itself alone".split()),
    list_joiners=("and", "or"),
)
