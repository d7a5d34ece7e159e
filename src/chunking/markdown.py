"""Markdown → blocks, by a CommonMark parser (markdown-it-py, with GFM tables).

LlamaIndex's MarkdownNodeParser splits on `#` lines only, outside ``` fences: it takes a `# comment` inside
a ~~~ fence or an indented code block for a heading, misses setext headings (`Title` over `=====`), and
returns whole sections, so the blocks inside them (list items, table rows, code) would need a second
parser that could disagree with it about where code starts. One CommonMark parse gives both, with the
source line of every block; each block's text is the document's own Markdown, sliced by those lines.
"""

from __future__ import annotations

import html
import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

from .blocks import Block, ChunkedDocument, pack_blocks
from .includes import IncludeReader, expand_myst_includes

_PARSER = MarkdownIt("commonmark").enable("table")
_FRONT_MATTER_END = ("---", "...")
_FRONT_MATTER_TITLE = re.compile(r"""^title:\s*["']?(.*?)["']?\s*$""")
_TAG = re.compile(r"<[^>]*>")
# A heading's attribute list at its end (`## Locker plugin ## {: #locker }`, `# Usage {#usage .wide}`: Python-Markdown's
# attr_list, Pandoc, kramdown, MyST) names an anchor; no reader sees it, nor the closing hashes before it.
_HEADING_ATTRIBUTES = re.compile(r"(?:\s+#+)?\s*\{:?\s*[#.][^{}]*\}$")


def _heading_text(inline: Token) -> str:
    """A heading as plain words: `**Settings** for [Qdrant](url)` -> "Settings for Qdrant"."""
    words = "".join(child.content if child.type in ("text", "code_inline") else " " if child.type == "softbreak"
                    else "" for child in inline.children or [])
    return _HEADING_ATTRIBUTES.sub("", " ".join(words.split()))


def _front_matter(lines: list[str]) -> tuple[int, str | None]:
    """Lines taken by a YAML front matter block at the top (0 if none), and its `title:` if it has one."""
    if not lines or lines[0].strip() != "---":
        return 0, None
    for end in range(1, len(lines)):
        if lines[end].strip() in _FRONT_MATTER_END:
            titles = [m.group(1) for line in lines[1:end] if (m := _FRONT_MATTER_TITLE.match(line))]
            return end + 1, (titles[0].strip() or None) if titles else None
    return 0, None


def markdown_blocks(text: str) -> tuple[str | None, list[Block]]:
    """The document's title (its first H1, else its front matter's title) and its blocks in order."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    skipped, front_title = _front_matter(lines)
    # Front matter is blanked, not removed, so the parser's line numbers stay the file's.
    source = "\n".join([""] * skipped + lines[skipped:])
    tokens = _PARSER.parse(source)

    def sliced(start: int, end: int) -> str:
        return "\n".join(lines[start:end]).strip("\n").rstrip()

    title: str | None = None
    headings: list[tuple[int, str]] = []   # (level, text) of the headings above the current position
    blocks: list[Block] = []
    group = -1
    table_header = ""
    table_body_start = -1
    for index, token in enumerate(tokens):
        if token.map is None:
            continue
        start, end = token.map
        section = tuple(text for _, text in headings)
        if token.level == 0:
            if token.type == "heading_open":
                level, name = int(token.tag[1:]), _heading_text(tokens[index + 1])
                if not name:
                    continue
                if level == 1 and title is None:
                    title, headings = name, []   # the title heads the document; it is no section
                    continue
                while headings and headings[-1][0] >= level:
                    headings.pop()
                headings.append((level, name))
            elif token.type in ("bullet_list_open", "ordered_list_open"):
                group += 1
            elif token.type == "table_open":
                group += 1
                body = next((t for t in tokens[index:] if t.type in ("tbody_open", "table_close")), None)
                table_body_start = body.map[0] if body is not None and body.map else end
                table_header = sliced(start, table_body_start)
                if table_body_start >= end:  # a header and no rows: the table is one block
                    blocks.append(Block(table_header, section, "paragraph", line=start + 1))
            elif token.type in ("fence", "code_block"):
                blocks.append(Block(sliced(start, end), section, "code", line=start + 1))
            elif token.type == "html_block":
                # Raw HTML (logos, badges, comments): only its visible text is worth embedding.
                visible = " ".join(html.unescape(_TAG.sub(" ", token.content)).split())
                if visible:
                    blocks.append(Block(visible, section, line=start + 1))
            elif token.type != "hr":   # paragraphs, block quotes
                blocks.append(Block(sliced(start, end), section, line=start + 1))
        elif token.level == 1 and token.type == "list_item_open":
            blocks.append(Block(sliced(start, end), section, "item", group=group, line=start + 1))
        elif token.level == 2 and token.type == "tr_open" and start >= table_body_start:
            blocks.append(Block(sliced(start, end), section, "row", group=group, table_header=table_header,
                                line=start + 1))
    return title or front_title, blocks


def chunk_markdown(text: str, *, chunk_tokens: int, read_include: IncludeReader | None = None) -> ChunkedDocument:
    """`text`'s chunks; a MyST `literalinclude` fence carries the code `read_include` gives for it
    (`chunking.includes`)."""
    title, blocks = markdown_blocks(expand_myst_includes(text, read_include) if read_include else text)
    return ChunkedDocument(title=title, chunks=pack_blocks(blocks, chunk_tokens))
