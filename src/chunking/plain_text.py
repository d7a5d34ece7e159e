"""Plain text → blocks: paragraphs (blank-line separated), and headings only where they are unambiguous.

A heading is a line underlined (or over- and underlined) with one repeated punctuation character, as in
reStructuredText and setext Markdown, at the start of a paragraph, the underline at least about as long as
the title. Levels follow reStructuredText: each underline style gets the next level the first time it
appears. Nothing else is taken for structure: a line in capitals, a numbered line or a short line stays
text, since plain text gives no way to tell them from sentences.
"""

from __future__ import annotations

from .blocks import Block, ChunkedDocument, pack_blocks

_UNDERLINE_CHARS = set("=-~^*#+")


def _rule_char(line: str) -> str | None:
    """The character of a line made of one repeated underline character (at least 3), else None."""
    stripped = line.rstrip()
    if len(stripped) >= 3 and stripped[0] in _UNDERLINE_CHARS and stripped == stripped[0] * len(stripped):
        return stripped[0]
    return None


def _heading(lines: list[str]) -> tuple[tuple[str, bool], str, int] | None:
    """(style, title, lines used) when the paragraph opens with an underlined title; None otherwise."""
    overlined = len(lines) >= 3 and _rule_char(lines[0]) is not None and lines[2].rstrip() == lines[0].rstrip()
    title_at = 1 if overlined else 0
    if len(lines) < title_at + 2:
        return None
    title = lines[title_at].strip()
    underline = lines[title_at + 1].rstrip()
    char = _rule_char(underline)
    if not title or char is None or _rule_char(title) is not None or lines[title_at + 1][0].isspace():
        return None
    if not overlined and lines[0][0].isspace():  # an indented line is quoted text in reST, not a title
        return None
    if len(underline) < len(title) * 2 // 3:  # a short rule under a long line is a separator, not a heading
        return None
    return (char, overlined), title, title_at + 2


def _paragraphs(lines: list[str]) -> list[tuple[int, list[str]]]:
    """(index of the first line, lines) of each run of non-blank lines."""
    found: list[tuple[int, list[str]]] = []
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        if found and found[-1][0] + len(found[-1][1]) == number:
            found[-1][1].append(line)
        else:
            found.append((number, [line]))
    return found


def plain_text_blocks(text: str) -> tuple[str | None, list[Block]]:
    """The title (a heading that opens the document) and the paragraphs, each under its heading path."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    title: str | None = None
    levels: dict[tuple[str, bool], int] = {}
    headings: list[tuple[int, str]] = []
    blocks: list[Block] = []
    for first, paragraph in _paragraphs(lines):
        heading = _heading(paragraph)
        if heading is not None:
            style, name, used = heading
            level = levels.setdefault(style, len(levels) + 1)
            if title is None and not blocks and not headings:
                title = name   # the document opens with its title; it is no section
            else:
                while headings and headings[-1][0] >= level:
                    headings.pop()
                headings.append((level, name))
            first, paragraph = first + used, paragraph[used:]
        if all(_rule_char(line) for line in paragraph):
            continue  # a transition line (----) or nothing left after the heading
        blocks.append(Block("\n".join(line.rstrip() for line in paragraph),
                            tuple(name for _, name in headings), line=first + 1))
    return title, blocks


def chunk_plain_text(text: str, *, chunk_tokens: int) -> ChunkedDocument:
    title, blocks = plain_text_blocks(text)
    return ChunkedDocument(title=title, chunks=pack_blocks(blocks, chunk_tokens))
