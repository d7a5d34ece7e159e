"""Ingest documents into the Qdrant collection: JSONL (the benchmark format or plain records), or Markdown,
reStructuredText, plain text, HTML and PDF files, chunked along their own structure (`chunking`).

Each input is parsed and checked in full before anything is written, so a malformed record costs
nothing. Node ids are derived from content, so re-ingesting adds nothing, and documents already in
the collection are skipped before they are embedded. Batches are written as they are embedded: an
interrupted ingest keeps what it wrote and the next run finishes the rest.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import MetadataMode, NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.vector_stores.qdrant.base import DEFAULT_DENSE_VECTOR_NAME
from qdrant_client import QdrantClient

from .chunking import (
    ChunkedDocument,
    IncludeReader,
    UnreadablePdfError,
    chunk_html,
    chunk_markdown,
    chunk_pdf,
    chunk_plain_text,
    chunk_rst,
)
from .config import Settings
from .core.errors import IngestError
from .core.markup import plain
from .core.names import is_record, names_of_page
from .core.sources import content_key
from .core.text import content_words
from .store import (
    CollectionLayout,
    check_collection_model,
    create_collection,
    open_qdrant,
    open_vector_store,
    record_names,
    record_words,
    remove_replaced,
)

ID_NAMESPACE = uuid.UUID("6f1c2a4e-5d0b-4c1e-9a57-d4a6b0e2c3f1")
MARKDOWN_SUFFIXES = (".md", ".markdown")
HTML_SUFFIXES = (".html", ".htm")
RST_SUFFIXES = (".rst", ".rest")
DOCUMENT_SUFFIXES = (*MARKDOWN_SUFFIXES, *RST_SUFFIXES, ".txt", *HTML_SUFFIXES, ".pdf")
# Where a chunk sits is for citing and for fetching its neighbours, not for embedding or for an LLM to read.
HIDDEN_FROM_MODELS = ["source", "line", "page", "position"]


@dataclass
class IngestReport:
    collection: str
    documents: int
    added: int
    already_present: int
    seconds: float
    removed: int = 0  # chunks of the ingested documents that they no longer hold (`replace`)


def node_id_for(title: str, text: str, section: str = "") -> str:
    """From content only, so re-ingesting adds nothing; the same paragraph under two headings is two chunks."""
    key = f"{title}\n{section}\n{text}" if section else f"{title}\n{text}"
    return str(uuid.uuid5(ID_NAMESPACE, content_key(key)))


def make_node(text: str, title: str, **metadata: Any) -> TextNode:
    hidden = [*HIDDEN_FROM_MODELS, *(["section"] if metadata.get("section") == "" else [])]
    return TextNode(
        id_=node_id_for(title, text, str(metadata.get("section") or "")), text=text,
        metadata={"title": title, **metadata}, excluded_embed_metadata_keys=list(hidden),
        excluded_llm_metadata_keys=list(hidden),
    )


def _record_nodes(record: Any, where: str, source: str) -> Iterator[TextNode]:
    if not isinstance(record, dict):
        raise IngestError(f"{where}: expected a JSON object, got {type(record).__name__}")
    if "paragraphs" in record:
        paragraphs = record["paragraphs"]
        if not isinstance(paragraphs, list):
            raise IngestError(f"{where}: 'paragraphs' must be a list")
        for i, paragraph in enumerate(paragraphs):
            if not (isinstance(paragraph, dict) and isinstance(paragraph.get("title"), str)
                    and isinstance(paragraph.get("text"), str) and paragraph["text"].strip()):
                raise IngestError(f"{where}: paragraph {i} needs a string 'title' and a non-empty string 'text'")
            yield make_node(paragraph["text"].strip(), paragraph["title"].strip(), source=source)
    elif isinstance(record.get("text"), str) and record["text"].strip():
        title = record.get("title", "")
        metadata = record.get("metadata") or {}
        if not isinstance(title, str) or not isinstance(metadata, dict):
            raise IngestError(f"{where}: 'title' must be a string and 'metadata' an object")
        yield make_node(record["text"].strip(), title.strip(), **{"source": source, **metadata})  # theirs wins
    else:
        raise IngestError(f"{where}: a record needs 'paragraphs' (benchmark format) or a non-empty 'text'")


def _source_name(path: Path, root: Path) -> str:
    """How a passage names its file: the path inside the ingested folder, or the file's name (never where the
    folder sits on the machine that ingested it: that is not the reader's business)."""
    return path.relative_to(root).as_posix() if path != root else path.name


def _jsonl_nodes(path: Path, root: Path) -> Iterator[TextNode]:
    name = _source_name(path, root)
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"  # errors name the file as the user gave it
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise IngestError(f"{where}: not valid JSON ({error.msg})") from None
            yield from _record_nodes(record, where, f"{name}:{number}")


def _decoded(path: Path, data: bytes) -> str:
    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise IngestError(f"{path}:{line}: a NUL byte: a binary file, not text")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise IngestError(f"{path}:{line}: not UTF-8 text (byte 0x{data[error.start]:02x})") from None


# The largest file a page's `literalinclude` may show (an example, not a data dump).
INCLUDE_MAX_BYTES = 256_000


def include_reader(document: Path, root: Path) -> IncludeReader:
    """What a page's `literalinclude` may show: the UTF-8 text of the file its argument names, relative to the page's
    folder (from `root` for "/path", as Sphinx reads it from its source folder), only where that file, links
    resolved, is inside `root`, the folder being ingested (the file's own folder when one file is): ingesting a
    folder shows nothing beside it. None for a file outside it, missing, over INCLUDE_MAX_BYTES, not UTF-8 or
    holding a NUL byte."""
    inside = root.resolve()

    def read(argument: str) -> str | None:
        base = inside if argument.startswith("/") else document.parent
        try:
            target = (base / argument.lstrip("/")).resolve()
            if not target.is_relative_to(inside) or not target.is_file() or target.stat().st_size > INCLUDE_MAX_BYTES:
                return None
            text = target.read_bytes().decode("utf-8")
        except (OSError, ValueError):  # unreadable, a NUL in the name, or not UTF-8 (UnicodeDecodeError)
            return None
        return None if "\x00" in text else text  # binary, as a document with a NUL byte is refused

    return read


def _chunked(path: Path, chunk_tokens: int, root: Path) -> ChunkedDocument:
    """`path`'s chunks; `root` is what is being ingested, a folder or `path` itself."""
    suffix = path.suffix.lower()
    data = path.read_bytes()
    if suffix == ".pdf":
        try:
            return chunk_pdf(data, chunk_tokens=chunk_tokens)
        except UnreadablePdfError as error:
            raise IngestError(f"{path}: {error}") from None
    if suffix in HTML_SUFFIXES:
        try:
            return chunk_html(data, chunk_tokens=chunk_tokens)   # the page's own meta tags name its encoding
        except RecursionError:  # markdownify walks the tree recursively: 500 nested <div>s exhaust the stack
            raise IngestError(f"{path}: the HTML is nested too deeply to convert") from None
    read_include = include_reader(path, root if root.is_dir() else path.parent)
    if suffix in RST_SUFFIXES:
        try:
            return chunk_rst(_decoded(path, data), chunk_tokens=chunk_tokens, read_include=read_include)
        except RecursionError:
            raise IngestError(f"{path}: the reStructuredText is nested too deeply to read") from None
    if suffix in MARKDOWN_SUFFIXES:
        return chunk_markdown(_decoded(path, data), chunk_tokens=chunk_tokens, read_include=read_include)
    return chunk_plain_text(_decoded(path, data), chunk_tokens=chunk_tokens)


def _document_nodes(path: Path, root: Path, chunk_tokens: int) -> list[TextNode]:
    """A document's chunks as nodes, in order, each knowing its position and its neighbours."""
    document = _chunked(path, chunk_tokens, root)
    title = document.title or path.stem.replace("_", " ")
    source = _source_name(path, root)
    nodes: dict[str, TextNode] = {}
    for chunk in document.chunks:
        # The index keeps the source as written (embedded and reranked as is: its clean form measured worse, see
        # ARCHITECTURE.md); a chunk that is only markup (a label, a directive line) says nothing and is left out.
        if not content_words(plain(chunk.text)):
            continue
        where = {key: value for key, value in (("line", chunk.line), ("page", chunk.page)) if value is not None}
        node = make_node(chunk.text, title, section=" > ".join(chunk.section), source=source, **where)
        nodes.setdefault(node.node_id, node)   # a chunk repeated word for word is kept once, where it first is
    ordered = list(nodes.values())
    for position, node in enumerate(ordered):
        node.metadata["position"] = position
        # Relationships travel in the stored node (Qdrant's `_node_content`) and never reach a model's text.
        if position > 0:
            node.relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(node_id=ordered[position - 1].node_id)
        if position + 1 < len(ordered):
            node.relationships[NodeRelationship.NEXT] = RelatedNodeInfo(node_id=ordered[position + 1].node_id)
    return ordered


@dataclass(frozen=True)
class SkippedFile:
    path: Path
    reason: str


@dataclass
class ReadResult:
    """What reading a file or folder gave: the nodes, how many files they came from, and every file left out."""

    nodes: list[TextNode]
    files_read: int
    skipped: list[SkippedFile] = field(default_factory=list)


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


MEGABYTE = 1_000_000
NO_TEXT = "no text to index (an empty file, or a PDF without a text layer)"


@dataclass(frozen=True)
class SizeLimits:
    """How much one ingest reads, in megabytes (0 = no limit): per file, and all files together."""

    max_file_mb: float = 0
    max_total_mb: float = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> SizeLimits:
        return cls(max_file_mb=settings.ingest_max_file_mb, max_total_mb=settings.ingest_max_total_mb)

    def file_too_large(self, size: int) -> str | None:
        """Why a file of `size` bytes is not read, or None."""
        if self.max_file_mb and size > self.max_file_mb * MEGABYTE:
            return f"{size / MEGABYTE:.1f} MB, over DAGRAG_INGEST_MAX_FILE_MB={self.max_file_mb:g}"
        return None

    def check_total(self, path: Path, sizes: Iterable[int]) -> None:
        """IngestError when the files to read add up to more than the limit (nothing has been read yet)."""
        total = sum(sizes)
        if self.max_total_mb and total > self.max_total_mb * MEGABYTE:
            raise IngestError(
                f"{path}: {total / MEGABYTE:.1f} MB of documents to read, over DAGRAG_INGEST_MAX_TOTAL_MB="
                f"{self.max_total_mb:g}; ingest the folder in parts, or raise the limit")


def read_documents(path: Path, *, chunk_tokens: int = 256, limits: SizeLimits = SizeLimits()) -> ReadResult:
    """Every document under `path`, deduplicated, and every file that was left out, with why.

    A file given alone must be readable (IngestError names the file and line). In a folder, a file of another type
    (`.rst`, `.py`, `.png`), one over `limits.max_file_mb`, or one that cannot be read (not UTF-8, a broken PDF,
    binary) is skipped and named, and the rest is read; hidden files and folders (`.git`) are passed over.
    IngestError when nothing could be read, or when the files to read add up to more than `limits.max_total_mb`
    (checked before any is read). JSONL records become one node each, as they are; other documents are chunked
    along their structure into chunks of about `chunk_tokens` tokens (see `chunking`)."""
    if not path.exists():
        raise IngestError(f"{path}: no such file or folder")
    supported = (*DOCUMENT_SUFFIXES, ".jsonl")
    if not path.is_dir():
        if path.suffix.lower() not in supported:
            raise IngestError(f"{path}: unsupported file type (use .jsonl, {', '.join(DOCUMENT_SUFFIXES)})")
        size = path.stat().st_size
        too_large = limits.file_too_large(size)
        if too_large:
            raise IngestError(f"{path}: {too_large}")
        limits.check_total(path, [size])
        nodes = _unique(_file_nodes(path, path, chunk_tokens))
        if not nodes:
            raise IngestError(f"{path}: {NO_TEXT}")
        return ReadResult(nodes=nodes, files_read=1)
    nodes: list[TextNode] = []
    skipped: list[SkippedFile] = []
    sizes: dict[Path, int] = {}  # the files to read, and their sizes
    for file in sorted(p for p in path.rglob("*") if p.is_file() and not _hidden(p, path)):
        size = file.stat().st_size
        if file.suffix.lower() not in supported:
            skipped.append(SkippedFile(file, f"not a type dagrag reads ({file.suffix or 'no suffix'})"))
        elif too_large := limits.file_too_large(size):
            skipped.append(SkippedFile(file, too_large))
        else:
            sizes[file] = size
    limits.check_total(path, sizes.values())
    read = 0
    for file in sizes:
        try:
            found = _file_nodes(file, path, chunk_tokens)
        except IngestError as error:
            skipped.append(SkippedFile(file, _reason(str(error), file)))
            continue
        if not found:
            skipped.append(SkippedFile(file, NO_TEXT))
            continue
        read += 1
        nodes.extend(found)
    if not read:
        why = "; ".join(f"{s.path.name}: {s.reason}" for s in skipped[:5]) or "the folder is empty"
        raise IngestError(f"{path}: no document could be read (.jsonl, {', '.join(DOCUMENT_SUFFIXES)}): {why}")
    return ReadResult(nodes=_unique(nodes), files_read=read, skipped=skipped)


def _unique(nodes: Iterable[TextNode]) -> list[TextNode]:
    """Each node once (by id: its content), where it first occurs."""
    unique: dict[str, TextNode] = {}
    for node in nodes:
        unique.setdefault(node.node_id, node)
    return list(unique.values())


def _reason(message: str, file: Path) -> str:
    """An IngestError's message without the file it names first ("PATH:3: not UTF-8" → "line 3: not UTF-8")."""
    rest = message.removeprefix(str(file))
    line = re.match(r":(\d+): ", rest)
    return f"line {line.group(1)}: {rest[line.end():]}" if line else rest.removeprefix(": ")


def _file_nodes(file: Path, root: Path, chunk_tokens: int) -> list[TextNode]:
    """One file's nodes (read whole, so a file that fails halfway adds nothing)."""
    if file.suffix.lower() == ".jsonl":
        return list(_jsonl_nodes(file, root))
    return _document_nodes(file, root, chunk_tokens)


def read_nodes(path: Path, *, chunk_tokens: int = 256) -> list[TextNode]:
    """The nodes of `read_documents` (files it skips are left out)."""
    return read_documents(path, chunk_tokens=chunk_tokens).nodes


def existing_ids(client: QdrantClient, collection: str, ids: list[str], batch: int = 512) -> set[str]:
    present: set[str] = set()
    for start in range(0, len(ids), batch):
        points = client.retrieve(collection, ids=ids[start:start + batch], with_payload=False, with_vectors=False)
        present.update(str(p.id) for p in points)
    return present


def ingest_nodes(
    settings: Settings,
    nodes: list[TextNode],
    embed_model: BaseEmbedding,
    *,
    progress: Callable[[int], None] | None = None,
    clients: Any = None,
    replace: bool = False,
) -> IngestReport:
    """Embed and write the nodes not yet in the collection, creating it if needed.

    With `replace`, the nodes are each document's whole text: once they are written, every chunk in the collection
    from one of their documents (by `source`, the path inside the ingested folder) that is not among them is deleted,
    so an edited document's old sentences are no longer found or cited. IngestError, before anything is written, for
    JSON Lines records (each is a passage of its own, named by its line: a record moved to another line would be
    deleted by name)."""
    sources = [str(n.metadata.get("source", "")) for n in nodes]
    if replace and (record := next((source for source in sources if is_record(source)), None)):
        raise IngestError(f"{record}: --replace reads documents; a JSON Lines record is a passage of its own, "
                          "named by its line: ingest a changed JSONL file into a new collection")
    started = time.perf_counter()
    clients = clients or open_qdrant(settings)
    client = clients[0]
    exists = client.collection_exists(settings.collection)
    if exists:
        check_collection_model(client, settings.collection, settings.embed_model)
        present = existing_ids(client, settings.collection, [n.node_id for n in nodes])
    else:
        present = set()
    todo = [n for n in nodes if n.node_id not in present]
    dim = len(embed_model.get_text_embedding("dimension probe")) if todo else None
    if todo and exists:  # a collection made elsewhere records no model: its vector size must still fit
        check_collection_model(client, settings.collection, settings.embed_model, dim=dim)
    if todo and not exists:
        create_collection(client, settings.collection, dim=dim, embed_spec=settings.embed_model,
                          vector_name=DEFAULT_DENSE_VECTOR_NAME, hybrid=settings.hybrid,
                          layout=CollectionLayout.from_settings(settings), server=bool(settings.qdrant_url),
                          location=settings.qdrant_location())
    if todo:
        store = open_vector_store(settings, clients=clients)
        batch_size = settings.embed_batch_size
        # Batches of similar length waste little on padding (as the encoder sorts within one call), and each
        # batch is written while the next is embedded (an embedded store's per-point commits wait on the disk).
        todo.sort(key=lambda n: len(n.get_content(metadata_mode=MetadataMode.EMBED)), reverse=True)
        done = progress or (lambda count: None)

        def write(batch: list[TextNode]) -> int:
            store.add(batch)
            return len(batch)

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dagrag-ingest") as writer:
            pending: Future[int] | None = None
            for start in range(0, len(todo), batch_size):
                batch = todo[start:start + batch_size]
                vectors = embed_model.get_text_embedding_batch(
                    [n.get_content(metadata_mode=MetadataMode.EMBED) for n in batch])
                for node, vector in zip(batch, vectors):
                    node.embedding = vector
                if pending is not None:
                    done(pending.result())  # one write in flight at most; its error stops the ingest here
                pending = writer.submit(write, batch)
            if pending is not None:
                done(pending.result())
    if nodes and (exists or todo):
        # The names the collection knows (titles, headings): a hop follows the ones its parent's page mentions.
        record_names(client, settings.collection, set().union(*(
            names_of_page(str(n.metadata.get("title", "")), str(n.metadata.get("section", ""))) for n in nodes)))
        # The words its passages hold: a hop looks for a word only where some passage has it.
        record_words(client, settings.collection, nodes, existed=exists)
    removed = (remove_replaced(client, settings.collection, set(filter(None, sources)), {n.node_id for n in nodes})
               if replace and exists else 0)
    return IngestReport(collection=settings.collection, documents=len(nodes), added=len(todo),
                        already_present=len(present), seconds=time.perf_counter() - started, removed=removed)
