"""What Sphinx makes of a directive, as the readers need it: an object description is a place of its own.

`.. confval:: cmake.define`, `.. py:data:: SECRET_KEY` or ```` ```{py:function} walk(dog) ```` documents one name, and
Sphinx shows it as an entry a reader can link to and find in the page's contents, as it does a section. The readers
give its content that name as one more level of its section path ("cmake > cmake.define"), so a chunk holds one entry
and says which, and a search for the name finds the place it heads (`core.names.headed_by`).
"""

from __future__ import annotations

import re

# Sphinx's object descriptions without a domain (the default `py` domain's and the standard domain's); with one
# (`py:data`, `c:function`), every directive but those that only set a context is a description. The same names as
# core/markup.py's (chunking imports no other part; a test holds the two equal).
DESCRIPTIONS = frozenset({"function", "class", "method", "attribute", "property", "data", "exception", "decorator",
                          "staticmethod", "classmethod", "option", "cmdoption", "envvar", "confval", "describe",
                          "object"})
_CONTEXT = re.compile(r"\w+:(?:module|currentmodule|namespace[\w-]*)")


def described_name(directive: str, argument: str) -> str | None:
    """The name a directive documents ("walk" for `function:: walk(dog, minutes=10)`), or None for a directive that
    describes no object (a note, an autodoc directive, which documents what this reader never imports)."""
    described = directive in DESCRIPTIONS or (":" in directive and not _CONTEXT.fullmatch(directive))
    name = " ".join(argument.split("(", 1)[0].split())
    return name if described and name else None
