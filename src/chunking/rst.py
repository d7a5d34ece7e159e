"""reStructuredText → blocks, by docutils, the language's reference parser.

Sphinx documentation uses directives and roles docutils does not know (`autofunction`, `versionadded`, `:func:`,
`:ref:`). Each name a document uses that docutils does not know is registered, before the parse, as a generic one
that keeps the words: a directive's argument becomes a line and its content is parsed as reStructuredText (a code
directive's content stays code); a role's text becomes code (`` :ref:`Title <label>` `` → `Title`). Nothing runs:
autodoc directives keep the object's name but import nothing, `include` and `raw` are off; a `literalinclude`
shows the code the caller's reader gives it (`chunking.includes`; ingest reads only inside the ingested folder).

A block's text is the document as a reader sees it (roles as code, links as their text, no labels or comments),
which is what the index stores for every format (`ingest`), and its line is where it starts in the source.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from docutils import nodes, utils
from docutils.core import publish_doctree
from docutils.parsers.rst import Directive, directives, roles
from docutils.parsers.rst.languages import en

from .blocks import Block, ChunkedDocument, pack_blocks
from .includes import IncludeReader, included_text

# Parse quietly and safely: no messages to stderr, never halt, no file inclusion or raw passthrough.
_SETTINGS = {"report_level": 5, "halt_level": 5, "warning_stream": False, "file_insertion_enabled": False,
             "raw_enabled": False, "syntax_highlight": "none", "doctitle_xform": False}
_DIRECTIVE_NAME = re.compile(r"^[ \t]*\.\.[ \t]+([A-Za-z][\w:.+-]*)::", re.MULTILINE)
_ROLE_NAME = re.compile(r"(?<![\w`]):([A-Za-z][\w:.+-]*):`")
# Sphinx's code directives (and sphinx-tabs' `code-tab`, sphinx-prompt's `prompt`): their content is code, not
# reStructuredText, and their argument is a language, a group or a file, which a reader does not see; a `:caption:`
# they do. Read as Sphinx reads them even where docutils has its own (`code`, `code-block`): docutils refuses Sphinx's
# options (`:caption:`, `:linenos:`, `:emphasize-lines:`) and the whole block, code and all, was lost.
# The same names as core/markup.py's CODE_DIRECTIVES and HIDDEN_DIRECTIVES (a test holds them equal).
CODE_DIRECTIVES = frozenset({"code", "code-block", "code-cell", "sourcecode", "doctest", "testcode", "testoutput",
                             "literalinclude", "ipython", "jupyter-execute", "code-tab", "prompt"})
# What a reader never reads on the page, so neither does the index: code Sphinx runs and never shows (doctest's
# setup and cleanup), and a toctree, the site's navigation, whose entries are file names ("tutorial config usage") of
# pages that are documents of their own (a hidden one shows nothing; a shown one lists their titles, as links).
HIDDEN_DIRECTIVES = frozenset({"testsetup", "testcleanup", "toctree"})
# Directives whose argument Sphinx does not show (as core/markup.py's _HIDDEN_ARGUMENT): a language, a module, a
# condition; `.. highlight:: python` is not the word "python" on the page. Their content, if any, still is.
_HIDDEN_ARGUMENT = frozenset({"highlight", "toctree", "currentmodule", "module", "namespace", "only", "ifconfig",
                              "index", "program", "tabularcolumns", "sectionauthor", "codeauthor", "moduleauthor"})
_TITLE_AND_TARGET = re.compile(r"^(.*?)\s*<[^<>]+>$", re.DOTALL)
# A field list before anything else (`:orphan:`, `:tocdepth: 2`) is the page's metadata to Sphinx, never shown.
_SKIPPED = (nodes.comment, nodes.target, nodes.substitution_definition, nodes.system_message, nodes.raw,
            nodes.pending, nodes.footnote_reference, nodes.citation_reference, nodes.docinfo)


class _AnyOption(dict[str, Any]):
    """A directive option spec that accepts every option (`:members:`, `:noindex:`) and keeps its text."""

    def __missing__(self, key: str) -> Any:
        return directives.unchanged

    def __bool__(self) -> bool:  # docutils reads options only when a directive's spec is truthy
        return True


# How Sphinx renders its version directives' argument (as core/markup.py's VERSION_PHRASES: chunking imports no other
# part, and a test holds the two equal).
VERSION_PHRASES = {"versionadded": "Added in version", "versionchanged": "Changed in version",
                    "deprecated": "Deprecated since version", "versionremoved": "Removed in version",
                    "version-added": "Added in version", "version-changed": "Changed in version",
                    "version-deprecated": "Deprecated since version", "version-removed": "Removed in version"}


class _KeepWords(Directive):
    """A directive docutils does not know: its argument as a line, its content parsed (or kept as code)."""

    required_arguments = 0
    optional_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec = _AnyOption()

    def run(self) -> list[nodes.Node]:
        if self.name in HIDDEN_DIRECTIVES:
            return []
        found: list[nodes.Node] = []
        code = self.name in CODE_DIRECTIVES
        shown = (self.options.get("caption") if code
                 else None if self.name.rpartition(":")[2] in _HIDDEN_ARGUMENT or not self.arguments
                 else self.arguments[0])  # `py:currentmodule` as `currentmodule`: a domain's names are Sphinx's too
        argument = " ".join(str(shown or "").split())
        if argument:
            text = argument
            if (phrase := VERSION_PHRASES.get(self.name)) is not None:  # as Sphinx shows `.. versionadded:: 2.5 Why.`
                version, _, said = argument.partition(" ")
                text = f"{phrase} {version}: {said}" if said else f"{phrase} {version}."
            found.append(nodes.paragraph(text, "", *self.state.inline_text(text, self.lineno)[0]))  # ``x`` as code
            found[-1].line = self.lineno
        shown_code = "\n".join(self.content) if code else ""
        read = getattr(self.state.document.settings, "read_include", None)
        if self.name == "literalinclude" and not self.content and self.arguments and read is not None:
            shown_code = included_text(read, self.arguments[0], self.options) or ""
        if shown_code:
            found.append(nodes.literal_block(text=shown_code))
            found[-1].line = self.content_offset + 1 if self.content else self.lineno
        elif self.content:
            container = nodes.container()
            self.state.nested_parse(self.content, self.content_offset, container)
            found.extend(container.children)
        return found


def _code_role(name: str, rawtext: str, text: str, lineno: int, inliner: Any,
               options: dict[str, Any] | None = None, content: list[str] | None = None
               ) -> tuple[list[nodes.Node], list[nodes.system_message]]:
    """A role docutils does not know, as code: `` :func:`attrs.define` `` → `attrs.define`; a `Title <target>`
    shows the title; Sphinx's `~` and `!` prefixes go."""
    titled = _TITLE_AND_TARGET.match(text)
    shown = (titled.group(1) if titled and titled.group(1) else text).lstrip("~!")
    return [nodes.literal(rawtext, utils.unescape(shown))], []


def _register_unknown_names(text: str) -> None:
    """Register the directives and roles `text` uses that docutils does not know, and Sphinx's code directives
    (the registry is docutils' own, process-wide, as Sphinx and its extensions register theirs)."""
    known_directives = {*directives._directive_registry, *directives._directives, *en.directives}
    for name in set(_DIRECTIVE_NAME.findall(text)):
        if name.lower() not in known_directives or name.lower() in CODE_DIRECTIVES | HIDDEN_DIRECTIVES:
            directives.register_directive(name.lower(), _KeepWords)
    known_roles = {*roles._role_registry, *roles._roles, *en.roles}
    for name in set(_ROLE_NAME.findall(text)):
        if name.lower() not in known_roles:
            roles.register_local_role(name.lower(), _code_role)


def _inline(node: nodes.Node) -> str:
    """A text element's words as a reader sees them: code in backticks, links and emphasis as their text."""
    parts: list[str] = []
    for child in node.children:
        if isinstance(child, nodes.Text):
            parts.append(child.astext())
        elif isinstance(child, _SKIPPED):
            continue
        elif isinstance(child, (nodes.literal, nodes.title_reference)):
            parts.append(f"`{child.astext()}`")
        else:
            parts.append(_inline(child))
    return "".join(parts)


def _line(node: nodes.Node) -> int | None:
    """The source line a block starts on (its own, else its first descendant's that has one)."""
    if node.line is not None:
        return node.line
    return next((n.line for n in node.findall(nodes.Element) if n.line is not None), None)


def _flat(node: nodes.Node) -> str:
    """A list item, definition or table cell as one text: its blocks' texts, one per line."""
    texts = [block.text for block in _blocks(node, (), [0])]
    return "\n".join(texts) if texts else " ".join(node.astext().split())


def _table_rows(table: nodes.table) -> tuple[str, list[tuple[str, int | None]]]:
    """A table as Markdown-style rows: its header (and delimiter) line, and each body row with its line."""
    def cells(row: nodes.row) -> str:
        return "| " + " | ".join(" ".join(_flat(entry).split()) for entry in row.children) + " |"

    head = [cells(row) for thead in table.findall(nodes.thead) for row in thead.children]
    body = [(cells(row), _line(row)) for tbody in table.findall(nodes.tbody) for row in tbody.children]
    width = max((text.count(" | ") + 1 for text, _ in body), default=1)
    header = "\n".join([*head, "|" + "---|" * width]) if head else ""
    return header, body


def _blocks(parent: nodes.Node, section: tuple[str, ...], group: list[int]) -> Iterator[Block]:
    """The blocks under `parent`, in order; `group` counts lists and tables (shared across the document)."""
    for child in parent.children:
        if isinstance(child, (nodes.Text, nodes.title, *_SKIPPED)):
            continue
        line = _line(child)
        if isinstance(child, nodes.section):
            title = child.next_node(nodes.title)
            name = " ".join(title.astext().split()) if title is not None else ""
            yield from _blocks(child, (*section, name) if name else section, group)
        elif isinstance(child, (nodes.literal_block, nodes.doctest_block)):
            yield Block(f"```\n{child.astext()}\n```", section, "code", line=line)
        elif isinstance(child, (nodes.bullet_list, nodes.enumerated_list, nodes.definition_list, nodes.field_list,
                                nodes.option_list)):
            group[0] += 1
            for item in child.children:
                if isinstance(item, nodes.definition_list_item | nodes.field | nodes.option_list_item):
                    term, *rest = item.children
                    text = f"{' '.join(_inline(term).split())}: " + "\n".join(_flat(r) for r in rest)
                else:
                    text = f"- {_flat(item)}"
                yield Block(text.strip(), section, "item", group=group[0], line=_line(item))
        elif isinstance(child, nodes.table):
            group[0] += 1
            header, rows = _table_rows(child)
            for text, row_line in rows:
                yield Block(text, section, "row", group=group[0], table_header=header, line=row_line)
        elif isinstance(child, nodes.TextElement):  # paragraphs, rubrics, line blocks' lines
            text = " ".join(_inline(child).split())
            if text:
                yield Block(text, section, line=line)
        elif isinstance(child, nodes.Element):  # admonitions, containers, block quotes, topics: their content
            yield from _blocks(child, section, group)


def rst_blocks(text: str, *, read_include: IncludeReader | None = None) -> tuple[str | None, list[Block]]:
    """The document's title (the title of its one top-level section, as Sphinx reads a page) and its blocks in
    order; under the title, the top-level section's subsections are the sections. A `literalinclude` shows the
    code `read_include` gives for it (`chunking.includes`), nothing without one."""
    _register_unknown_names(text)
    doctree = publish_doctree(text, settings_overrides={**_SETTINGS, "read_include": read_include})
    top = [child for child in doctree.children if not isinstance(child, _SKIPPED)]
    if len(top) == 1 and isinstance(top[0], nodes.section):
        heading = top[0].next_node(nodes.title)
        title = " ".join(heading.astext().split()) if heading is not None else None
        return title or None, list(_blocks(top[0], (), [-1]))
    return None, list(_blocks(doctree, (), [-1]))


def chunk_rst(text: str, *, chunk_tokens: int, read_include: IncludeReader | None = None) -> ChunkedDocument:
    title, blocks = rst_blocks(text, read_include=read_include)
    return ChunkedDocument(title=title, chunks=pack_blocks(blocks, chunk_tokens))
