"""Documentation markup as a reader sees it: what an answer quotes and the cross-encoder reads.

A chunk keeps its source as written (citations point at lines of it), but quoted as is, an answer says
"it will [get you](how-frozen) there", `` {obj}`attrs.setters.frozen` ``, `(how-slotted)=` or `!!! tip`. `plain`
renders the constructs of Markdown, MyST, reStructuredText and the mkdocs family that mean nothing to a reader:

- links keep their text (`[text](url)`, `[text][ref]`, `![alt](src)`, rST `` `text <url>`_ ``); a link without text
  reads as its target's words (`[](./ctypes.md)` → "ctypes", `[](#build-requires)` → "build requires");
- roles keep their target's words (`` {role}`text` ``, `` {role}`Title <label>` ``, `` :role:`text` ``), as code,
  without Sphinx's `~` and `!` prefixes;
- directive and admonition lines go, their content stays (`` ```{note} ``, `:::{warning}`, `.. note::`,
  `!!! tip "Title"`, `=== "Tab"`, option lines `:key: value` right after a directive); an rST directive's argument
  stays as a line where Sphinx shows it, as the rST reader (`chunking/rst.py`) keeps it: the name a description
  documents (`.. confval:: cmake.define` → `` `cmake.define` ``), a version directive's phrase (`.. versionadded:: 2.0`
  → "Added in version 2.0."), a title (`.. admonition:: Beware`); not a path, a language or a module it only sets;
- a field list's lines read as their field and value (`:Default: false` → "Default: false");
- labels (`(name)=`, `.. _name:`), attribute lists (`{: #id .class }`, `{ .label }`), HTML comments go;
- footnotes (Markdown's, MyST's): a mark in the text goes ("colorful[^win] console output"), and a definition reads as
  its note ("[^win]: Requires Colorama on Windows." → "Requires Colorama on Windows.");
- inline HTML reads as its text (a table cell's `<ul><li>a</li><li>b</li></ul>` as "a; b", `<br>` as a space,
  `<code>v1</code>` as code) and character references as their characters (`&gt;=` as ">=");
- doctest prompts (`>>> `, `... `) go, the code stays;
- emphasis outside code goes, its words stay (`**We aim to …**`, `_Black_`, `*not*`): a reader sees no asterisks, and
  a sentence that ends inside bold ("… every month.** This …") is a sentence end again.

Regular expressions and not a parser: the text is a chunk cut from a page (a fence may open in one chunk and close
in the next), it mixes dialects no one parser reads, and every rule here only removes markup around words it keeps.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
# A link's text may wrap onto the next line, not past a paragraph; "[3][4]" is two footnote marks, not a link.
_LINK_TEXT = r"(?![\d,\s]+\])((?:[^\]\n]|\n(?!\n))+)"
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\([^)\n]*\)")
# CommonMark lets a line end come between a link's target and its closing parenthesis.
_INLINE_LINK = re.compile(rf"\[{_LINK_TEXT}\]\((?:[^()\n]|\([^()\n]*\))*(?:\n[ \t]*)?\)")
# A link with no text (MyST's `[](./overrides.md)`, `[](#dynamic-linking)`): Sphinx shows the target's title, which
# its last path part or anchor spells.
_EMPTY_LINK = re.compile(r"\[\]\((?:[^()\s]*?/)?([^()/\s]*)\)")
_REFERENCE_LINK = re.compile(rf"\[{_LINK_TEXT}\]\[[^\]\n]*\]")
_RST_LINK = re.compile(r"`([^`<\n]+?)\s*<[^>\n]+>`__?")
_MYST_ROLE = re.compile(r"(?<![`\w])\{[\w:.+-]+\}`(?:([^`<\n]+?)\s*<[^>\n]+>|([^`\n]+))`")
_RST_ROLE = re.compile(r"(?<![\w`]):[\w:.+-]+:`(?:([^`<\n]+?)\s*<[^>\n]+>|([^`\n]+))`")
# A MyST directive fenced like code: ```{doctest} ... ``` (the closing fence may be in the next chunk).
_FENCED_DIRECTIVE = re.compile(r"^([ \t]*)(`{3,}|~{3,})\{([\w:.+-]+)\}[ \t]*([^\n]*)\n(.*?)(?:^[ \t]*\2[ \t]*$\n?|\Z)",
                               re.MULTILINE | re.DOTALL)
CODE_DIRECTIVES = frozenset({"code", "code-block", "code-cell", "sourcecode", "doctest", "testcode", "testoutput",
                             "literalinclude", "ipython", "jupyter-execute", "code-tab", "prompt"})
# What a reader never reads on the page, so neither does the index: code Sphinx runs and never shows (doctest's
# setup and cleanup), and a toctree, the site's navigation, whose entries are file names ("tutorial config usage") of
# pages that are documents of their own (a hidden one shows nothing; a shown one lists their titles, as links).
HIDDEN_DIRECTIVES = frozenset({"testsetup", "testcleanup", "toctree"})
_DIRECTIVE_LINE = re.compile(
    r"^[ \t]*(?::{3,}[ \t]*"  # a ::: closing a MyST block
    r"|(?:!!!|\?\?\?\+?)[ \t]+\w[^\n]*"  # !!! tip "Title" / ??? note (admonitions)
    r"|===[ \t]+\"[^\"\n]*\"[ \t]*"  # === "Tab" (content tabs)
    r")$\n?", re.MULTILINE)
_OPTION_LINE = r"[ \t]*:[\w-]+:(?:[ \t][^\n]*)?$\n?"  # `:key: value` after a directive
_DIRECTIVE_OPTION = re.compile(rf"^{_OPTION_LINE}", re.MULTILINE)
# `.. name:: argument` (reStructuredText) or `:::{name} argument` (MyST), with the option lines that follow directly.
_DIRECTIVE_WITH_ARGUMENT = re.compile(r"^([ \t]*)(?:\.\.[ \t]+([\w:.+-]+)::|:{3,}\{([\w:.+-]+)\})([^\n]*)$\n?"
                                      rf"(?:{_OPTION_LINE})*", re.MULTILINE)
# A MyST directive's options open its body.
_LEADING_OPTIONS = re.compile(rf"\A(?:{_OPTION_LINE})+", re.MULTILINE)
# Directives whose argument Sphinx does not show: a path, a language, a condition, the module or role it sets, or an
# object autodoc would document from code this reader does not import.
_HIDDEN_ARGUMENT = re.compile(
    r"(?:\w+:)?(?:auto\w*|image|figure|include|literalinclude|raw|code|code-block|sourcecode|highlight|toctree|"
    r"currentmodule|module|namespace|only|ifconfig|index|contents|default-role|role|program|tabularcolumns|meta)")
# Sphinx's object descriptions (and any domain's, `py:function`): the argument is the name they document, shown as code.
_DESCRIPTIONS = frozenset({"function", "class", "method", "attribute", "property", "data", "exception", "decorator",
                           "staticmethod", "classmethod", "option", "cmdoption", "envvar", "confval", "describe",
                           "object"})
# How Sphinx renders its version directives' argument.
VERSION_PHRASES = {"versionadded": "Added in version", "versionchanged": "Changed in version",
                   "deprecated": "Deprecated since version", "versionremoved": "Removed in version",
                   "version-added": "Added in version", "version-changed": "Changed in version",
                   "version-deprecated": "Deprecated since version", "version-removed": "Removed in version"}
# A field list's line (`:Default: false`, `:Environment variable: ...`), not a role (`:func:` is followed by "`").
_FIELD = re.compile(r"^([ \t]*):([^\s:`][^:`\n]*):[ \t]+(?=\S)", re.MULTILINE)
# Inline HTML that Markdown passes through (a table cell's list or line break, `<code>`, `<kbd>`, a link), and
# character references: shown as a reader sees them. Only these tags: "<PackageName>_ROOT" is a placeholder.
_HTML_CODE = re.compile(r"<code>([^<>\n]*)</code>", re.IGNORECASE)
_HTML_NEXT_ITEM = re.compile(r"</li>\s*<li>", re.IGNORECASE)
_HTML_BREAK = re.compile(r"[ \t]*<br\s*/?>[ \t]*", re.IGNORECASE)
_HTML_INLINE_TAG = re.compile(r"</?(?:ul|ol|li|p|b|strong|i|em|span|sup|sub|kbd|small|mark|u|s|del|ins|a)\b[^<>\n]*>",
                              re.IGNORECASE)
_CHARACTER_REFERENCE = re.compile(r"&(?:#\d+|#[xX][0-9a-fA-F]+|[a-zA-Z]+\d*);")
# A footnote's mark and the marker that opens its definition; a name may hold any character but "]" and a line end.
_FOOTNOTE = r"\[\^[^\]\n]+\]"
_FOOTNOTE_DEFINITION = re.compile(rf"^([ \t]*){_FOOTNOTE}:[ \t]*", re.MULTILINE)
_FOOTNOTE_MARK = re.compile(_FOOTNOTE)
_LABEL_LINE = re.compile(r"^[ \t]*(?:\([\w./:-]+\)=|\.\.[ \t]+_[^:\n]+:)[ \t]*$\n?", re.MULTILINE)
_ATTRIBUTE_LIST = re.compile(r"[ \t]*\{:?[ \t]*(?:[#.][\w-]+|[\w-]+=(?:\"[^\"\n]*\"|[^\s}]+))"
                             r"(?:[ \t]+(?:[#.][\w-]+|[\w-]+=(?:\"[^\"\n]*\"|[^\s}]+)))*[ \t]*\}")
_DOCTEST_PROMPT = re.compile(r"^([ \t]*)(?:>>>|\.\.\.)(?:[ \t]|$)", re.MULTILINE)
# A fenced code block, to its closing fence or the chunk's end.
_FENCE_BLOCK = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?(?:^[ \t]*\1[ \t]*$|\Z)", re.MULTILINE | re.DOTALL)
_PROMPT_LINE = re.compile(r"^[ \t]*>>>(?:[ \t]|$)", re.MULTILINE)
# Code is left as written: a fenced block (to its closing fence, or the chunk's end) or an inline code span.
_CODE = re.compile(rf"{_FENCE_BLOCK.pattern}|`+[^`\n]*`+", re.MULTILINE | re.DOTALL)
# CommonMark's flanking rules, simplified: the marker touches a word on its inner side and none on its outer side
# (so snake_case, `2 * 3 * 4`, "*.py" and a list's "* item" are not emphasis), and it closes on the same line.
# Emphasis starts at a word (or a quote, bracket or code span): `26.*.*` is a pattern. A lone word in double
# underscores is a Python name (__init__), not strong emphasis.
_STRONG = re.compile(r"(?<![\w*\\])(\*\*(?=[^\W_]|[\x00\"'(\[])[^\n]+?(?<=[^\s*_])\*\*"
                     r"|__(?=[^\W_]|[\x00\"'(\[])(?:(?!__)[^\n])*?\W(?:(?!__)[^\n])*?(?<=[^\s*_])__)(?![\w*])")
_EMPHASIS = re.compile(r"(?<![\w*\\])([*_])(?=[^\W_]|[\x00\"'(\[])([^\n]+?)(?<=[^\s*_])\1(?![\w*])")
_HELD = re.compile("\x00(\\d+)\x00")


def _target_words(match: re.Match[str]) -> str:
    """`./index.md#cmake-and-ninja-minimum-versions` → "cmake and ninja minimum versions"; `./ctypes.md` → "ctypes"."""
    page, _, anchor = match.group(1).partition("#")
    return " ".join(re.sub(r"\.\w+$", "", anchor or page).replace("-", " ").replace("_", " ").split())


def _role(match: re.Match[str]) -> str:
    """A role as code, its title if it has one; Sphinx's `~` and `!` prefixes go (`` {class}`~click.ParamType` `` →
    `click.ParamType`), as the rST reader renders them (`chunking/rst.py`)."""
    return f"`{(match.group(1) or match.group(2)).strip().lstrip('~!')}`"


def _fenced_directive(match: re.Match[str]) -> str:
    """A code directive stays a code block (its language, if it gives one); any other keeps its argument as Sphinx
    shows it (`_shown`) and its content, where directives may nest (````{tab} around ```{literalinclude})."""
    indent, fence, name, argument, body = match.groups()
    body = body if body.endswith("\n") or not body else f"{body}\n"
    options = _LEADING_OPTIONS.match(body)
    body = body[options.end():] if options else body
    if name in HIDDEN_DIRECTIVES:
        return ""
    if name in CODE_DIRECTIVES:  # an included file's language is an option; its argument is the file's path
        given = _option(options, "language").partition(" ")[0]
        language = given or ("" if name == "literalinclude" else (argument.split() or [""])[0])
        return f"{_caption(indent, options)}{indent}{fence}{language}\n{body}{indent}{fence}\n"
    return _shown(indent, name, argument) + _FENCED_DIRECTIVE.sub(_fenced_directive, body)


def _option(options: re.Match[str] | None, key: str) -> str:
    """The value of a directive's `:key: value` line among its option lines, spaces collapsed; "" without one."""
    given = re.search(rf"^[ \t]*:{key}:[ \t]*(\S[^\n]*)", options.group(0) if options else "", re.MULTILINE)
    return " ".join(given.group(1).split()) if given else ""


def _caption(indent: str, options: re.Match[str] | None) -> str:
    """A code directive's `:caption:` as a line above its code, where Sphinx shows it (`hello.py` over the file's
    code), as the rST reader keeps it; nothing without one."""
    caption = _option(options, "caption")
    return f"{indent}{caption}\n" if caption else ""


def _directive_line(match: re.Match[str]) -> str:
    """An rST or MyST directive's opening line and options as Sphinx shows them: a code directive's caption, any
    other's argument (`_shown`)."""
    indent, name = match.group(1), match.group(2) or match.group(3)
    if name in CODE_DIRECTIVES:
        return _caption(indent, _LEADING_OPTIONS.search(match.group(0).partition("\n")[2]))
    return _shown(indent, name, match.group(4))


def _shown(indent: str, name: str, argument: str) -> str:
    """A directive's argument as Sphinx shows it, as a line: the name a description documents (as code), a version
    directive's phrase, a title or text as written; nothing for an argument Sphinx does not show."""
    argument = " ".join(argument.split())
    if not argument or _HIDDEN_ARGUMENT.fullmatch(name):
        return ""
    if name in VERSION_PHRASES:  # `.. versionadded:: 2.5 The *x* parameter.` reads "Added in version 2.5: The ..."
        version, _, said = argument.partition(" ")
        return f"{indent}{VERSION_PHRASES[name]} {version}{f': {said}' if said else '.'}\n"
    described = ":" in name or name in _DESCRIPTIONS
    return f"{indent}`{argument}`\n" if described else f"{indent}{argument}\n"


def plain(text: str) -> str:
    """`text` with the markup above rendered as a reader sees it; words, code and line breaks kept."""
    # A comment in code is code: ```{include}``` options quote "<!-- end-example" markers, unclosed in the fence.
    text = _in_prose(text, lambda prose: _HTML_COMMENT.sub("", prose))
    text = _FENCED_DIRECTIVE.sub(_fenced_directive, text)
    text = _LABEL_LINE.sub("", text)
    text = _DIRECTIVE_WITH_ARGUMENT.sub(_directive_line, text)
    text = _DIRECTIVE_LINE.sub("", text)
    text = _in_prose(text, _field_lines)  # a docstring's `:param x:` in a code block stays as written
    text = _DIRECTIVE_OPTION.sub("", text)
    text = _in_prose(text, _without_footnote_marks)  # `[^1]` in code is code (the footnotes extension's own docs)
    # Not in a code block: `create_memory_object_stream[str]()` is code, not a link. (Inline spans are not held
    # here: a role and an rST link are written with backticks.)
    text = _outside_fences(text, _links_as_text)
    text = _MYST_ROLE.sub(_role, text)
    text = _RST_ROLE.sub(_role, text)
    text = _ATTRIBUTE_LIST.sub("", text)
    text = _in_prose(text, lambda prose: _inline_html(_without_emphasis(prose)))
    return _without_prompts(text)


def _links_as_text(text: str) -> str:
    text = _IMAGE.sub(r"\1", text)
    text = _EMPTY_LINK.sub(_target_words, text)
    text = _INLINE_LINK.sub(r"\1", text)
    text = _REFERENCE_LINK.sub(r"\1", text)
    return _RST_LINK.sub(r"\1", text)


def _outside_fences(text: str, render: Callable[[str], str], code: Callable[[str], str] = str) -> str:
    """`text` with `render` applied outside its fenced code blocks and `code` to each block (as written by default)."""
    if "\x00" in text:  # the placeholder (`_held_aside`): a text that has it is rendered whole
        return render(text)
    return _held_aside(text, _FENCE_BLOCK, render, code)


def _without_prompts(text: str) -> str:
    """Doctest's `>>>` and `...` prompts removed, in prose and in a code block that holds a `>>>` line; in other
    code a `...` line is Python's Ellipsis (`try:` / `...`), kept."""
    def without(code: str) -> str:
        return _DOCTEST_PROMPT.sub(r"\1", code)

    return _outside_fences(text, without, lambda block: without(block) if _PROMPT_LINE.search(block) else block)


def _in_prose(text: str, render: Callable[[str], str]) -> str:
    """`text` with `render` applied to its prose; code (blocks and spans, held aside meanwhile) is left as written."""
    if "\x00" in text:  # the placeholder (`_held_aside`); no document text has it, and one that does is left as it is
        return text
    return _held_aside(text, _CODE, render)


def _held_aside(text: str, pattern: re.Pattern[str], render: Callable[[str], str],
                code: Callable[[str], str] = str) -> str:
    """`render` applied to `text` with each match of `pattern` held aside as a placeholder ("\\x00n\\x00"), then the
    matches put back, each through `code`."""
    held: list[str] = []

    def hold(match: re.Match[str]) -> str:
        held.append(code(match.group(0)))
        return f"\x00{len(held) - 1}\x00"

    return _HELD.sub(lambda m: held[int(m.group(1))], render(pattern.sub(hold, text)))


def _indented_as_code(line: str) -> bool:
    """Whether a line is indented as Markdown's indented code block (four spaces or a tab)."""
    return line.startswith(("    ", "\t"))


def _without_footnote_marks(prose: str) -> str:
    """Footnote marks and definition markers gone, except on a line indented as code (`r'[^*]+'` is a pattern)."""
    def line_as_read(line: str) -> str:
        return line if _indented_as_code(line) else _FOOTNOTE_MARK.sub("", _FOOTNOTE_DEFINITION.sub(r"\1", line))

    return "\n".join(line_as_read(line) for line in prose.split("\n"))


def _field_lines(prose: str) -> str:
    return _FIELD.sub(r"\1\2: ", prose)


def _inline_html(prose: str) -> str:
    """`<ul><li>x86_64</li><li>arm64</li></ul>` → "x86_64; arm64", `<code>v1</code>` → `` `v1` ``, `&gt;=` → ">=";
    a line indented as code (four spaces or a tab: Markdown's indented code block, an example's HTML) as written,
    unless it is a table's row (a table inside an admonition or a content tab is indented too)."""
    def line_as_read(line: str) -> str:
        if _indented_as_code(line) and not line.lstrip().startswith("|"):
            return line
        line = _HTML_CODE.sub(r"`\1`", line)
        line = _HTML_INLINE_TAG.sub("", _HTML_BREAK.sub(" ", _HTML_NEXT_ITEM.sub("; ", line)))
        return _CHARACTER_REFERENCE.sub(lambda m: html.unescape(m.group(0)), line)

    return "\n".join(line_as_read(line) for line in prose.split("\n"))


def _without_emphasis(prose: str) -> str:
    return _EMPHASIS.sub(r"\2", _STRONG.sub(lambda m: m.group(1)[2:-2], prose))
