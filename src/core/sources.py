"""How a passage is shown to a model: with its title, and as fenced data that cannot pose as instructions."""

from __future__ import annotations

import hashlib

from llama_index.core.schema import MetadataMode, NodeWithScore

from .result import Source


def content_key(text: str) -> str:
    """Two passages with this key say the same thing (case and whitespace aside)."""
    return hashlib.sha256(" ".join(text.split()).lower().encode()).hexdigest()


def passage_text(hit: NodeWithScore) -> str:
    """What the reranker and the resolver read: the passage with its title."""
    return hit.node.get_content(metadata_mode=MetadataMode.LLM)


def source_title(source: Source) -> str:
    return str(source.metadata.get("title") or source.metadata.get("file_name") or source.node_id[:8])


def fence_sources(sources: list[Source]) -> str:
    """Sources as tagged data blocks; tag-like text inside a source is neutralised so it cannot close a fence."""
    blocks = []
    for n, source in enumerate(sources, start=1):
        body = source.text.replace("<source", "‹source").replace("</source", "‹/source")
        title = source_title(source).replace('"', "'")
        blocks.append(f'<source id="{n}" title="{title}">\n{body}\n</source>')
    return "\n".join(blocks)
