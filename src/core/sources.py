"""How a passage is shown to a model: with its title, and as fenced data that cannot pose as instructions."""

from __future__ import annotations

import hashlib

from llama_index.core.schema import MetadataMode, NodeWithScore

from .markup import plain
from .result import Source


def content_key(text: str) -> str:
    """Two passages with this key say the same thing (case and whitespace aside)."""
    return hashlib.sha256(" ".join(text.split()).lower().encode()).hexdigest()


def passage_text(hit: NodeWithScore) -> str:
    """What the reranker and the resolver read: the passage with its title."""
    return hit.node.get_content(metadata_mode=MetadataMode.LLM)


def source_title(source: Source) -> str:
    """"Title > Section > Subsection" for a chunk of a structured document; the title alone when it has no section
    (a paragraph that has only a title, text before a document's first heading). Headings are shown as a reader
    sees them: "Phases of processing {: #stages }" is "Phases of processing"."""
    title = str(source.metadata.get("title") or source.metadata.get("file_name") or source.node_id[:8])
    section = str(source.metadata.get("section") or "")
    return " ".join(plain(f"{title} > {section}" if section else title).split())


def source_location(source: Source) -> str:
    """Where a passage sits in what was ingested: "docs/config.md:42" (file and line), "manual.pdf p. 3" (a PDF's
    page), the file alone (a JSONL record), or "" when the passage names no file (a node a caller built)."""
    file = str(source.metadata.get("source") or "")
    line, page = source.metadata.get("line"), source.metadata.get("page")
    if not file:
        return ""
    if line is not None:
        return f"{file}:{line}"
    return f"{file} p. {page}" if page is not None else file


def shortened(text: str, max_chars: int | None) -> str:
    """`text` cut to at most `max_chars` characters at a word boundary, marked with "…"."""
    if max_chars is None or len(text) <= max_chars:
        return text
    cut = text[: max_chars - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > max_chars // 2 else cut).rstrip() + "…"


def fence_sources(sources: list[Source], *, max_chars: int | None = None) -> str:
    """Sources as tagged data blocks, each at most `max_chars` long; tag-like text inside a source is
    neutralised so it cannot close a fence."""
    blocks = []
    for n, source in enumerate(sources, start=1):
        body = shortened(source.text, max_chars).replace("<source", "‹source").replace("</source", "‹/source")
        title = source_title(source).replace('"', "'")
        blocks.append(f'<source id="{n}" title="{title}">\n{body}\n</source>')
    return "\n".join(blocks)
