"""Documents → chunks that follow the document's own structure: headings, paragraphs, list items, table
rows, code blocks. One module per format turns a document into blocks; `blocks.pack_blocks` merges and cuts
them under the token budget. Nothing here reads files or knows about nodes or stores: that is `ingest`'s job.
"""

from .blocks import HARD_CAP_FACTOR, Block, Chunk, ChunkedDocument, count_tokens, pack_blocks
from .html import chunk_html
from .includes import IncludeReader
from .markdown import chunk_markdown
from .pdf import UnreadablePdfError, chunk_pdf
from .plain_text import chunk_plain_text
from .rst import chunk_rst

__all__ = [
    "HARD_CAP_FACTOR",
    "Block",
    "Chunk",
    "ChunkedDocument",
    "IncludeReader",
    "UnreadablePdfError",
    "chunk_html",
    "chunk_markdown",
    "chunk_pdf",
    "chunk_plain_text",
    "chunk_rst",
    "count_tokens",
    "pack_blocks",
]
