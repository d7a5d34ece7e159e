"""Blocks → chunks under a token budget: the rules every format shares.

A format reader turns a document into `Block`s (a paragraph, a list item, a table row, a code block), each
with the heading path it sits under. `pack_blocks` merges neighbouring blocks of one section up to the
budget and never lets a chunk span two sections. What must stay whole stays whole: a list item, a table
row or a code block is cut only when it alone exceeds the hard cap (HARD_CAP_FACTOR × budget); a
paragraph over the budget is cut between sentences by LlamaIndex's SentenceSplitter. Every piece of a table
starts with the table's header row, so a row is never read without its column names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import groupby, islice, takewhile
from typing import Literal

from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.utils import get_tokenizer

BlockKind = Literal["paragraph", "item", "row", "code"]

# A list item, table row or code block up to this many budgets is kept whole in one (oversized) chunk:
# cutting a code block or a settings row in half loses more than an embedding truncated at its end.
HARD_CAP_FACTOR = 4
# What joining two blocks costs, in tokens ("\n\n" or "\n"); counted so a chunk's sum stays an upper bound.
JOIN_TOKENS = 1
# The most text one call of the sentence splitter reads. NLTK (3.10 on) runs Punkt's regular expressions under a
# 5-second wall-clock limit per call, and a 2 MB paragraph (a log, a book without blank lines) took longer than that
# on a busy CPU and failed the ingest; cut at line breaks first, each call reads a bounded span.
SPLITTER_SPAN_CHARS = 20_000
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
# How a paragraph that announces the block after it ends (ASCII and full-width colon; core/text.INTRODUCING_MARKS).
_INTRODUCING = (":", "\uff1a")


@dataclass(frozen=True)
class Block:
    """One unit of a document's structure, in document order."""

    text: str
    section: tuple[str, ...] = ()     # heading path below the document's title
    kind: BlockKind = "paragraph"
    group: int = -1                   # list items and table rows: which list or table they belong to
    table_header: str = ""            # table rows: header and delimiter lines, repeated on every piece
    line: int | None = None           # 1-based line of the source where the block starts
    page: int | None = None           # 1-based page (PDF)


@dataclass(frozen=True)
class Chunk:
    text: str
    section: tuple[str, ...]
    line: int | None
    page: int | None


@dataclass(frozen=True)
class ChunkedDocument:
    title: str | None                 # the document's own title (first H1, <title>, ...); None if it has none
    chunks: list[Chunk]


TokenCounter = Callable[[str], int]


def count_tokens(text: str) -> int:
    """Tokens as LlamaIndex's splitters count them (its default tokenizer), so budgets mean the same thing."""
    return len(get_tokenizer()(text))


@lru_cache(maxsize=8)
def _sentence_splitter(budget: int) -> SentenceSplitter:
    return SentenceSplitter(chunk_size=budget, chunk_overlap=0)


def _cut_code(block: Block, budget: int, tokens: TokenCounter) -> list[Block]:
    """A code block over the hard cap, cut between lines; a fenced block's pieces are fenced again."""
    lines = block.text.split("\n")
    opening = closing = ""
    if len(lines) >= 2 and _FENCE.match(lines[0]):
        opening = lines.pop(0)
        if lines and _FENCE.match(lines[-1]):
            closing = lines.pop()
    fence_tokens = tokens(opening) + tokens(closing) + 2 * JOIN_TOKENS
    pieces: list[list[str]] = [[]]
    used = fence_tokens
    for line in lines:
        cost = tokens(line) + JOIN_TOKENS
        if pieces[-1] and used + cost > budget:
            pieces.append([])
            used = fence_tokens
        pieces[-1].append(line)
        used += cost
    return [replace(block, text="\n".join(part for part in (opening, *piece, closing) if part)) for piece in pieces]


def _fit(block: Block, budget: int, tokens: TokenCounter) -> list[Block]:
    """The block, or its pieces when it is too long to stay whole."""
    size = tokens(block.text)
    limit = budget if block.kind == "paragraph" else budget * HARD_CAP_FACTOR
    if size <= limit:
        return [block]
    if block.kind == "code":
        return _cut_code(block, budget, tokens)
    splitter = _sentence_splitter(budget)
    return [replace(block, text=piece) for span in _spans(block.text, SPLITTER_SPAN_CHARS)
            for piece in splitter.split_text(span)]


def _spans(text: str, limit: int) -> list[str]:
    """`text` in consecutive spans of at most `limit` characters, each cut after a line break where there is one
    (else after a space, else at the limit); the text itself when it is no longer than that."""
    spans: list[str] = []
    while len(text) > limit:
        cut = text.rfind("\n", 0, limit) + 1 or text.rfind(" ", 0, limit) + 1 or limit
        spans.append(text[:cut])
        text = text[cut:]
    return [*spans, text] if text else spans


def _joined(blocks: Sequence[Block]) -> str:
    """Blocks as text: items of one list and rows of one table on consecutive lines, a table piece under its header."""
    parts: list[str] = []
    previous: Block | None = None
    for block in blocks:
        same_group = previous is not None and block.group >= 0 and block.group == previous.group
        if same_group:
            parts.append("\n")
        elif previous is not None:
            parts.append("\n\n")
        if block.kind == "row" and not same_group and block.table_header:
            parts.append(block.table_header + "\n")
        parts.append(block.text)
        previous = block
    return "".join(parts)


def _group_size(blocks: Sequence[Block], start: int, tokens: TokenCounter) -> int:
    """Tokens of the list or table that starts at blocks[start], whole, as it would sit in one chunk."""
    group = blocks[start].group
    members = list(takewhile(lambda block: block.group == group, islice(blocks, start, None)))
    header = tokens(members[0].table_header) + JOIN_TOKENS if members[0].table_header else 0
    return header + sum(tokens(b.text) + JOIN_TOKENS for b in members)


def introduces(block: Block) -> bool:
    """Whether a block is a paragraph that announces what follows it ("To cut a release:", "you would do:")."""
    return block.kind == "paragraph" and block.text.rstrip().endswith(_INTRODUCING)


def _closing(chunk: list[Block]) -> tuple[list[Block], list[Block]]:
    """A full chunk as it closes, and what the next chunk starts with: a closing paragraph that introduces the next
    block moves on with it (code, a table or a list without the sentence saying what it is reads as noise)."""
    if len(chunk) > 1 and introduces(chunk[-1]):
        return chunk[:-1], chunk[-1:]
    return chunk, []


def _pack_section(blocks: Sequence[Block], budget: int, tokens: TokenCounter) -> Iterator[list[Block]]:
    current: list[Block] = []
    used = 0
    pieces = [piece for block in blocks for piece in _fit(block, budget, tokens)]
    for index, block in enumerate(pieces):
        continues_group = bool(current) and block.group >= 0 and current[-1].group == block.group
        cost = tokens(block.text) + JOIN_TOKENS
        if block.kind == "row" and not continues_group:
            cost += tokens(block.table_header) + JOIN_TOKENS
        # A list or table that fits a chunk of its own is not split across two: start it afresh.
        opens_group = block.group >= 0 and not continues_group
        whole = _group_size(pieces, index, tokens) if current and opens_group else 0
        if current and (used + cost > budget or used + whole > budget >= whole > 0):
            done, current = _closing(current)
            used = sum(tokens(lead.text) + JOIN_TOKENS for lead in current)
            # What a lead-in introduces joins it even past the budget, as an item or code block may pass it alone.
            yield done
            if block.kind == "row":  # the next piece of the table opens with its header again
                cost = tokens(block.text) + tokens(block.table_header) + 2 * JOIN_TOKENS
        current.append(block)
        used += cost
    if current:
        yield current


def pack_blocks(blocks: Sequence[Block], budget: int, tokens: TokenCounter = count_tokens) -> list[Chunk]:
    """Neighbouring blocks of one section merged up to `budget` tokens; a chunk never spans two sections."""
    sizes: dict[str, int] = {}

    def counted(text: str) -> int:  # a block's size is asked for more than once
        if text not in sizes:
            sizes[text] = tokens(text)
        return sizes[text]

    chunks: list[Chunk] = []
    for section, run in groupby(blocks, key=lambda block: block.section):
        for members in _pack_section(list(run), budget, counted):
            text = _joined(members).strip()
            if text:
                chunks.append(Chunk(text=text, section=section, line=members[0].line, page=members[0].page))
    return chunks
