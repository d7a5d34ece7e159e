"""PDF → blocks, with pypdf: the text layer of each page, in paragraphs, under the PDF's outline (bookmarks).

A PDF records no headings in its text, but most generated PDFs carry an outline: each entry names a section
and the page where it starts. A section starts at the line of its page that reads as the entry's title
(which is then dropped from the text), or at the top of that page when no line does. Without an outline
every chunk has an empty section. A page without a text layer (a scan) gives nothing: no OCR here.
"""

from __future__ import annotations

import io
import logging
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pypdf import PdfReader
from pypdf.errors import PyPdfError

from .blocks import Block, ChunkedDocument, pack_blocks


class UnreadablePdfError(ValueError):
    """The bytes are not a PDF pypdf can read, or it is encrypted."""


def _words(text: str) -> str:
    return " ".join(text.split()).casefold()


def _outline(reader: PdfReader) -> tuple[str | None, dict[int, list[tuple[str, tuple[str, ...]]]]]:
    """The outline's single root entry, if it has one (the document's title), and page index -> the entries
    starting there as (title, heading path), in outline order."""
    starts: dict[int, list[tuple[str, tuple[str, ...]]]] = defaultdict(list)
    entries: list[tuple[int, str, tuple[str, ...]]] = []

    def walk(items: list[Any], path: tuple[str, ...]) -> None:
        parent: tuple[str, ...] | None = None
        for item in items:
            if isinstance(item, list):   # pypdf nests an entry's children as a list right after it
                if parent is not None:
                    walk(item, parent)
                continue
            name = " ".join(str(item.title or "").split())
            parent = (*path, name)
            page = reader.get_destination_page_number(item)
            if name and page is not None and page >= 0:
                entries.append((page, name, parent))

    try:
        walk(reader.outline, ())
    except (PyPdfError, KeyError, AttributeError, TypeError, ValueError):
        return None, {}   # a broken outline costs the sections, not the document
    roots = {path[0] for _, _, path in entries}
    root = next(iter(roots)) if len(roots) == 1 and any(len(path) > 1 for _, _, path in entries) else None
    for page, name, path in entries:
        if root is not None:
            path = path[1:]
        if path:
            starts[page].append((name, path))
    return root, starts


def _reads_as(line: str, title: str) -> bool:
    """A line that is the title, perhaps numbered ("2.1 Results" for "Results")."""
    words = _words(line)
    return bool(words) and words.endswith(title) and len(words) <= len(title) + 8


def _section_starts(lines: list[str], entries: list[tuple[str, tuple[str, ...]]]
                    ) -> tuple[dict[int, tuple[str, ...]], set[int]]:
    """Line index -> the section that begins there, and the heading lines (dropped from the text)."""
    begins: dict[int, tuple[str, ...]] = {}
    headings: set[int] = set()
    cursor = 0
    for name, path in entries:
        title = _words(name)
        line = next((i for i in range(cursor, len(lines)) if _reads_as(lines[i], title)), None)
        if line is None:   # no line shows the title: the section begins where the previous one did
            begins[cursor] = path
            continue
        begins[line] = path
        headings.add(line)
        cursor = line + 1
    return begins, headings


@contextmanager
def _quiet_pypdf() -> Iterator[None]:
    """pypdf logs what it repairs ("EOF marker not found") as warnings: the file is read, or refused with its
    own error; the warnings only reach the user's terminal as noise."""
    logger = logging.getLogger("pypdf")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def pdf_blocks(data: bytes) -> tuple[str | None, list[Block]]:
    """The title (document information, else the outline's root) and the paragraphs of every page."""
    with _quiet_pypdf():
        return _pdf_blocks(data)


def _pdf_blocks(data: bytes) -> tuple[str | None, list[Block]]:
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadablePdfError("the PDF is encrypted")
        info_title = reader.metadata.title if reader.metadata else None
        root, starts = _outline(reader)
        pages = [page.extract_text() or "" for page in reader.pages]
    except UnreadablePdfError:
        raise
    except Exception as error:  # pypdf meets untrusted bytes: any failure of it means "cannot read this file"
        raise UnreadablePdfError(f"not a readable PDF ({type(error).__name__}: {error})") from None
    section: tuple[str, ...] = ()
    blocks: list[Block] = []
    for index, text in enumerate(pages):
        lines = text.split("\n")
        begins, headings = _section_starts(lines, starts.get(index, []))
        paragraph: list[str] = []
        for number, line in enumerate([*lines, ""]):
            if paragraph and (number in begins or not line.strip()):
                blocks.append(Block("\n".join(paragraph), section, page=index + 1))
                paragraph = []
            section = begins.get(number, section)
            if line.strip() and number not in headings:
                paragraph.append(line.rstrip())
    return (str(info_title).strip() if info_title and str(info_title).strip() else root), blocks


def chunk_pdf(data: bytes, *, chunk_tokens: int) -> ChunkedDocument:
    title, blocks = pdf_blocks(data)
    return ChunkedDocument(title=title, chunks=pack_blocks(blocks, chunk_tokens))
