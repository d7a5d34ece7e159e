"""Ingest documents into the Qdrant collection: JSONL (the benchmark format or plain records) or text files.

Each input is parsed and checked in full before anything is written, so a malformed record costs
nothing. Node ids are derived from content, so re-ingesting adds nothing, and documents already in
the collection are skipped before they are embedded. Batches are written as they are embedded: an
interrupted ingest keeps what it wrote and the next run finishes the rest.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import MetadataMode, TextNode
from llama_index.vector_stores.qdrant.base import DEFAULT_DENSE_VECTOR_NAME
from qdrant_client import QdrantClient

from .config import Settings
from .core.errors import IngestError
from .core.sources import content_key
from .store import check_collection_model, create_collection, open_qdrant, open_vector_store

ID_NAMESPACE = uuid.UUID("6f1c2a4e-5d0b-4c1e-9a57-d4a6b0e2c3f1")
TEXT_SUFFIXES = (".txt", ".md")
HIDDEN_FROM_MODELS = ["source", "line"]


@dataclass
class IngestReport:
    collection: str
    documents: int
    added: int
    already_present: int
    seconds: float


def node_id_for(title: str, text: str) -> str:
    return str(uuid.uuid5(ID_NAMESPACE, content_key(f"{title}\n{text}")))


def make_node(text: str, title: str, **metadata: Any) -> TextNode:
    return TextNode(
        id_=node_id_for(title, text), text=text, metadata={"title": title, **metadata},
        excluded_embed_metadata_keys=list(HIDDEN_FROM_MODELS), excluded_llm_metadata_keys=list(HIDDEN_FROM_MODELS),
    )


def _record_nodes(record: Any, where: str) -> Iterator[TextNode]:
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
            yield make_node(paragraph["text"].strip(), paragraph["title"].strip(), source=where)
    elif isinstance(record.get("text"), str) and record["text"].strip():
        title = record.get("title", "")
        metadata = record.get("metadata") or {}
        if not isinstance(title, str) or not isinstance(metadata, dict):
            raise IngestError(f"{where}: 'title' must be a string and 'metadata' an object")
        yield make_node(record["text"].strip(), title.strip(), source=where, **metadata)
    else:
        raise IngestError(f"{where}: a record needs 'paragraphs' (benchmark format) or a non-empty 'text'")


def _jsonl_nodes(path: Path) -> Iterator[TextNode]:
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise IngestError(f"{where}: not valid JSON ({error.msg})") from None
            yield from _record_nodes(record, where)


def _text_nodes(path: Path, root: Path, splitter: SentenceSplitter) -> Iterator[TextNode]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise IngestError(f"{path}: not UTF-8 text") from None
    name = str(path.relative_to(root)) if path != root else path.name
    for chunk in splitter.split_text(text):
        if chunk.strip():
            yield make_node(chunk.strip(), path.stem.replace("_", " "), source=name)


def read_nodes(path: Path, *, chunk_tokens: int = 256) -> list[TextNode]:
    """Every document under `path`, deduplicated; raises IngestError naming the file and line."""
    if not path.exists():
        raise IngestError(f"{path}: no such file or folder")
    splitter = SentenceSplitter(chunk_size=chunk_tokens, chunk_overlap=chunk_tokens // 8)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix.lower() in (*TEXT_SUFFIXES, ".jsonl") and p.is_file())
        if not files:
            raise IngestError(f"{path}: no .jsonl, .txt or .md files in this folder")
    else:
        files = [path]
    nodes: dict[str, TextNode] = {}
    for file in files:
        suffix = file.suffix.lower()
        if suffix == ".jsonl":
            found: Iterable[TextNode] = _jsonl_nodes(file)
        elif suffix in TEXT_SUFFIXES:
            found = _text_nodes(file, path if path.is_dir() else file, splitter)
        else:
            raise IngestError(f"{file}: unsupported file type (use .jsonl, .txt or .md)")
        for node in found:
            nodes.setdefault(node.node_id, node)
    return list(nodes.values())


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
) -> IngestReport:
    """Embed and write the nodes not yet in the collection, creating it if needed."""
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
                          vector_name=DEFAULT_DENSE_VECTOR_NAME, hybrid=settings.hybrid)
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
    return IngestReport(collection=settings.collection, documents=len(nodes), added=len(todo),
                        already_present=len(present), seconds=time.perf_counter() - started)

