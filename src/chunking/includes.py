"""Sphinx's `literalinclude`: a code example kept in a file of its own, shown where the page names it.

Many Sphinx projects keep their examples as files beside the pages (`.. literalinclude:: snippets/threads.py`,
or MyST's ```` ```{literalinclude} ```` fence); Sphinx shows each file's code on the page, and without it a page
reads "To run a callable in a worker thread:" and stops. Reading files is `ingest`'s job: the chunkers get an
`IncludeReader`, which gives a named file's text or None (ingest's reads only inside the folder being ingested).
Here: which lines of that text the page shows (`:start-after:`, `:end-before:`, `:lines:`, as Sphinx selects them)
and, for Markdown, the fence that carries them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

# The text of the file a page's `literalinclude` names (its argument, as written), or None when it cannot be shown.
IncludeReader = Callable[[str], "str | None"]

# MyST: ```{literalinclude} path, its `:key: value` option lines, then the closing fence (a literalinclude has no
# body of its own).
_MYST_INCLUDE = re.compile(r"^([ \t]*)(`{3,}|~{3,})\{literalinclude\}[ \t]+(\S[^\n]*?)[ \t]*\n"
                           r"((?:[ \t]*:[\w-]+:[^\n]*\n)*)[ \t]*\2[ \t]*$", re.MULTILINE)
_OPTION = re.compile(r"^[ \t]*:([\w-]+):[ \t]*([^\n]*)$", re.MULTILINE)
_LINE_RANGE = re.compile(r"^\s*(\d*)\s*(?:(-)\s*(\d*))?\s*$")


def included_text(read: IncludeReader, argument: str, options: Mapping[str, object]) -> str | None:
    """The lines of the file `argument` names that Sphinx would show under `options`: after `start-after`'s
    first match (or from `start-at`'s line), before `end-before`'s (or through `end-at`'s), then `lines` ("1,3,
    5-10", "12-", counted from 1 in what is left), with trailing blank lines dropped. None when `read` gives nothing
    or the selection is empty."""
    text = read(argument.strip())
    if text is None:
        return None
    lines = text.splitlines()
    lines = _after(lines, str(options.get("start-after") or ""), str(options.get("start-at") or ""))
    lines = _before(lines, str(options.get("end-before") or ""), str(options.get("end-at") or ""))
    if options.get("lines"):
        lines = _numbered(lines, str(options["lines"]))
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines) if any(line.strip() for line in lines) else None


def _after(lines: list[str], after: str, at: str) -> list[str]:
    for number, line in enumerate(lines):
        if after and after in line:
            return lines[number + 1:]
        if at and at in line:
            return lines[number:]
    return lines


def _before(lines: list[str], before: str, at: str) -> list[str]:
    for number, line in enumerate(lines):
        if before and before in line:
            return lines[:number]
        if at and at in line:
            return lines[:number + 1]
    return lines


def _numbered(lines: list[str], spec: str) -> list[str]:
    """`lines` picked by a Sphinx line spec; a part that is not a number or a range is ignored."""
    picked: list[str] = []
    for part in spec.split(","):
        match = _LINE_RANGE.match(part)
        if not match or not (match.group(1) or match.group(3)):
            continue
        first = int(match.group(1) or 1)
        last = (int(match.group(3)) if match.group(3) else len(lines)) if match.group(2) else first
        picked.extend(lines[max(first, 1) - 1:last])
    return picked


def expand_myst_includes(text: str, read: IncludeReader) -> str:
    """A Markdown page with each MyST `literalinclude` fence given the code it names as its body (options kept, so
    the reader still sees its language and caption); a fence whose file cannot be read stays as written. The fence
    grows where the code holds a fence of its own length."""
    def expand(match: re.Match[str]) -> str:
        indent, fence, argument, options = match.groups()
        shown = included_text(read, argument, dict(_OPTION.findall(options)))
        if shown is None:
            return match.group(0)
        while re.search(rf"^[ \t]*{re.escape(fence)}", shown, re.MULTILINE):
            fence += fence[0]
        body = "\n".join(f"{indent}{line}" if line else line for line in shown.split("\n"))
        return f"{indent}{fence}{{literalinclude}} {argument}\n{options}{body}\n{indent}{fence}"

    return _MYST_INCLUDE.sub(expand, text)
