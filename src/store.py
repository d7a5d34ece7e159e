"""Qdrant for dagrag: opening the embedded folder or a server, and collections that record their embedding model.

Embedded Qdrant admits one client per folder per process, so embedded clients are cached here. A
collection records the embedding model that filled it; a mismatch is refused rather than silently mixing
vector spaces. A hybrid collection carries BM25 sparse vectors beside the dense ones. On a server, a new
collection is laid out as the Settings say (shards, replicas, HNSW graph, vectors on disk: `CollectionLayout`) and
its filtered payload fields are indexed; the embedded store has none of these and is given none.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import logging
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from llama_index.core.schema import BaseNode, TextNode
from llama_index.core.vector_stores.utils import metadata_dict_to_node
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.http import models as rest

from .config import Settings
from .core.errors import CollectionNotFoundError, IngestError, QdrantUnavailableError
from .core.names import NAMES_KEY, WORDS_KEY, names_in_metadata, word_beginnings
from .core.sparse import encode_documents, encode_queries
from .core.store_location import check_store_exists

EMBED_MODEL_KEY = "dagrag_embed_model"
EMBED_DIM_KEY = "dagrag_embed_dim"
# The names a collection knows travel in its metadata (one JSON document): enough for the titles and headings of a
# large documentation set; past it, the names of the first pages ingested are kept.
MAX_RECORDED_NAMES = 50_000
# The words a collection's passages hold (`word_beginnings`), in the same document: a hop looks for a word only where
# some passage has it. Past this many, the collection records that it has too many to list (WORDS_UNLISTED), and every
# word counts as held: a partial list would call words missing that are not.
MAX_RECORDED_WORDS = 200_000
WORDS_UNLISTED = "unlisted"
SCROLL_PAGE = 1024
SPARSE_VECTOR_NAME = "text-sparse-bm25"
logger = logging.getLogger("dagrag")

_local_clients: dict[str, QdrantClient] = {}


def _local_client(location: str) -> QdrantClient:
    if location not in _local_clients:
        if location != ":memory:":
            Path(location).mkdir(parents=True, exist_ok=True)
        _local_clients[location] = QdrantClient(location=":memory:") if location == ":memory:" \
            else QdrantClient(path=location)
    return _local_clients[location]


def close_local_client(location: str | Path) -> None:
    """Release an embedded Qdrant folder this process opened (so another process can open it)."""
    key = str(Path(location).expanduser().resolve()) if str(location) != ":memory:" else ":memory:"
    client = _local_clients.pop(key, None)
    if client is not None:
        client.close()


@atexit.register
def close_local_clients() -> None:
    """Close embedded clients before interpreter teardown (their own __del__ fails that late)."""
    while _local_clients:
        _local_clients.popitem()[1].close()


def open_qdrant(settings: Settings) -> tuple[QdrantClient, AsyncQdrantClient | None]:
    """A connected client (and an async one for servers); raises QdrantUnavailableError naming the place."""
    if settings.qdrant_url:
        api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        client = QdrantClient(url=settings.qdrant_url, api_key=api_key, timeout=int(settings.qdrant_timeout_s))
        try:
            client.get_collections()
        except Exception as error:
            raise QdrantUnavailableError(
                f"cannot reach Qdrant at {settings.qdrant_url} ({type(error).__name__}: {error}); "
                "check DAGRAG_QDRANT_URL / DAGRAG_QDRANT_API_KEY, or unset DAGRAG_QDRANT_URL to use the "
                "embedded store at DAGRAG_QDRANT_PATH") from None
        aclient = AsyncQdrantClient(url=settings.qdrant_url, api_key=api_key, timeout=int(settings.qdrant_timeout_s))
        return client, aclient
    location = str(settings.qdrant_path)
    location = location if location == ":memory:" else str(Path(location).expanduser().resolve())
    try:
        return _local_client(location), None
    except Exception as error:
        raise QdrantUnavailableError(
            f"cannot open the embedded Qdrant at {location} ({error}); another process may hold it — "
            "run a Qdrant server and set DAGRAG_QDRANT_URL to share one collection between processes") from None


def collection_embed_model(client: QdrantClient, collection: str) -> tuple[str | None, int | None]:
    """The embedding model and dimension recorded in a collection (None for collections made elsewhere)."""
    info = client.get_collection(collection)
    metadata = getattr(info.config, "metadata", None) or {}
    vectors = info.config.params.vectors
    dim = next(iter(vectors.values())).size if isinstance(vectors, dict) and vectors else getattr(vectors, "size", None)
    return metadata.get(EMBED_MODEL_KEY), metadata.get(EMBED_DIM_KEY, dim)


def recorded_names(client: QdrantClient, collection: str) -> frozenset[str]:
    """The names recorded in a collection's metadata (`record_names`); empty for one made elsewhere or before."""
    return names_in_metadata(getattr(client.get_collection(collection).config, "metadata", None)).keys


def record_names(client: QdrantClient, collection: str, names: set[str]) -> None:
    """Add names to those the collection records (a no-op when it has them all)."""
    before = recorded_names(client, collection)
    if names <= before:
        return
    merged = sorted(before) + sorted(names - before)
    client.update_collection(collection_name=collection, metadata={NAMES_KEY: merged[:MAX_RECORDED_NAMES]})


def record_words(client: QdrantClient, collection: str, nodes: list[BaseNode], *, existed: bool) -> None:
    """Add the words of `nodes` (`passage_words`) to those the collection records. A collection that `existed` before
    this ingest and records no words yet (made elsewhere, or before words were recorded) first has every stored
    passage's words read, once, so that the list is whole; past MAX_RECORDED_WORDS it is WORDS_UNLISTED."""
    recorded = (getattr(client.get_collection(collection).config, "metadata", None) or {}).get(WORDS_KEY)
    if recorded == WORDS_UNLISTED:
        return
    before = set(recorded or ())
    words = set().union(*(passage_words(node) for node in nodes))
    if recorded is None and existed:
        words |= stored_words(client, collection)
    if words <= before:
        return
    merged = before | words
    value: list[str] | str = sorted(merged) if len(merged) <= MAX_RECORDED_WORDS else WORDS_UNLISTED
    client.update_collection(collection_name=collection, metadata={WORDS_KEY: value})


def passage_words(node: BaseNode) -> set[str]:
    """The words (`word_beginnings`) of a passage, its title and its section."""
    return word_beginnings(f"{node.metadata.get('title', '')} {node.metadata.get('section', '')} {node.get_content()}")


def stored_words(client: QdrantClient, collection: str) -> set[str]:
    """The words (`passage_words`) of every passage stored in the collection: the node LlamaIndex stored with it, or
    a point's `text` field in a collection another tool made."""
    words: set[str] = set()
    offset = None
    while True:
        page, offset = client.scroll(collection, limit=SCROLL_PAGE, offset=offset, with_payload=True,
                                     with_vectors=False)
        for point in page:
            payload = point.payload or {}
            try:
                node = metadata_dict_to_node(payload)
            except ValueError:  # no stored node
                node = TextNode(text=str(payload.get("text", "")), metadata={})
            words |= passage_words(node)
        if offset is None:
            return words


def remove_replaced(client: QdrantClient, collection: str, sources: set[str], kept_ids: set[str]) -> int:
    """Delete the points whose `source` is one of `sources` and whose id is not in `kept_ids`: the chunks an edited
    document no longer has. Returns how many were deleted."""
    if not sources:
        return 0
    stale = rest.Filter(must=[rest.FieldCondition(key="source", match=rest.MatchAny(any=sorted(sources)))],
                        must_not=[rest.HasIdCondition(has_id=sorted(kept_ids))])
    count = client.count(collection, count_filter=stale, exact=True).count
    if count:
        client.delete(collection, points_selector=rest.FilterSelector(filter=stale), wait=True)
    return count


def check_collection_model(client: QdrantClient, collection: str, embed_spec: str, dim: int | None = None) -> None:
    recorded, recorded_dim = collection_embed_model(client, collection)
    if recorded is not None and recorded != embed_spec:
        raise IngestError(
            f"collection {collection!r} was built with embedding model {recorded!r}, not {embed_spec!r}; "
            "use the same DAGRAG_EMBED_MODEL, or another DAGRAG_COLLECTION")
    if dim is not None and recorded_dim is not None and recorded_dim != dim:
        raise IngestError(
            f"collection {collection!r} holds {recorded_dim}-d vectors; {embed_spec!r} makes {dim}-d ones")


# The payload fields anything run on a dagrag collection filters on, with their index type. dagrag's searches filter
# on `title` and `section` by their words when a comparison side is named by code (the passages its name heads:
# `SearcherAgent`; it also matches `source`, left unindexed so that a user's keyword index can serve their own filters
# on it), every other search being a dense or dense + BM25 query over the whole collection; ingest reads
# points by id. LlamaIndex's QdrantVectorStore filters on `doc_id` (`delete(ref_doc_id)`, a query's `doc_ids`) and
# indexes it when it creates a collection itself; dagrag creates the collection, so it makes that index in its place.
PAYLOAD_INDEXES: dict[str, rest.PayloadSchemaType] = {"doc_id": rest.PayloadSchemaType.KEYWORD,
                                                      "title": rest.PayloadSchemaType.TEXT,
                                                      "section": rest.PayloadSchemaType.TEXT}


@dataclass(frozen=True)
class CollectionLayout:
    """How a new collection is laid out on a Qdrant server or cluster; None leaves a parameter to Qdrant's default.

    Qdrant's own names: `shard_number`, `replication_factor`, `write_consistency_factor`, `hnsw_config.m`,
    `hnsw_config.ef_construct`, and `on_disk` for the dense vectors (the setting older servers read as well as newer).
    """

    shards: int | None = None
    replication_factor: int | None = None
    write_consistency: int | None = None
    hnsw_m: int | None = None
    hnsw_ef_construct: int | None = None
    on_disk: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> CollectionLayout:
        return cls(shards=settings.qdrant_shards, replication_factor=settings.qdrant_replication_factor,
                   write_consistency=settings.qdrant_write_consistency, hnsw_m=settings.qdrant_hnsw_m,
                   hnsw_ef_construct=settings.qdrant_hnsw_ef_construct, on_disk=settings.qdrant_on_disk)

    def settings_given(self) -> list[str]:
        """The DAGRAG_QDRANT_* variables given a value (rather than left to Qdrant)."""
        return [f"DAGRAG_QDRANT_{field.name.upper()}" for field in fields(self)
                if getattr(self, field.name) != field.default]

    def collection_options(self) -> dict[str, Any]:
        """The keyword arguments of `create_collection` these stand for (only those given)."""
        options: dict[str, Any] = {}
        for option, value in (("shard_number", self.shards), ("replication_factor", self.replication_factor),
                              ("write_consistency_factor", self.write_consistency)):
            if value is not None:
                options[option] = value
        if self.hnsw_m is not None or self.hnsw_ef_construct is not None:
            options["hnsw_config"] = rest.HnswConfigDiff(m=self.hnsw_m, ef_construct=self.hnsw_ef_construct)
        return options


@functools.cache
def _warn_layout_ignored(names: tuple[str, ...], location: str) -> None:
    logger.warning("%s: ignored by the embedded store at %s, which holds one copy of every vector in memory and "
                   "searches them all; they lay out a collection on a Qdrant server (DAGRAG_QDRANT_URL)",
                   ", ".join(names), location)


def create_collection(client: QdrantClient, collection: str, *, dim: int, embed_spec: str, vector_name: str,
                      hybrid: bool = False, layout: CollectionLayout | None = None, server: bool = False,
                      location: str = "") -> None:
    """A new collection recording its embedding model. On a server (`server`), laid out as `layout` says, and its
    PAYLOAD_INDEXES made; the embedded store searches every vector exactly in one process, so it is given neither
    (a layout given anyway is named in one warning per process and place, and ignored)."""
    layout = layout or CollectionLayout()
    if not server:
        if layout.settings_given():
            _warn_layout_ignored(tuple(layout.settings_given()), location or "this folder")
        layout = CollectionLayout()
    client.create_collection(
        collection_name=collection,
        vectors_config={vector_name: rest.VectorParams(size=dim, distance=rest.Distance.COSINE,
                                                       on_disk=True if layout.on_disk else None)},
        # Qdrant computes the IDF of the BM25 sparse vectors from the collection itself.
        sparse_vectors_config={SPARSE_VECTOR_NAME: rest.SparseVectorParams(modifier=rest.Modifier.IDF)}
        if hybrid else None,
        metadata={EMBED_MODEL_KEY: embed_spec, EMBED_DIM_KEY: dim},
        **layout.collection_options(),
    )
    if server:
        for field_name, schema in PAYLOAD_INDEXES.items():
            client.create_payload_index(collection_name=collection, field_name=field_name, field_schema=schema)


def has_sparse_vectors(client: QdrantClient, collection: str) -> bool:
    return SPARSE_VECTOR_NAME in (client.get_collection(collection).config.params.sparse_vectors or {})


class LocalAwareQdrantVectorStore(QdrantVectorStore):
    """QdrantVectorStore whose async query also works on an embedded (sync-only) client.

    The embedded client cannot be opened twice, so there is no AsyncQdrantClient for it; async
    callers (LlamaIndex retrievers, SubQuestionQueryEngine) get the sync query in a worker thread.
    """

    async def aquery(self, query: Any, **kwargs: Any) -> Any:
        if self._aclient is None:
            return await asyncio.to_thread(self.query, query, **kwargs)
        return await super().aquery(query, **kwargs)


def open_vector_store(
    settings: Settings, *, must_exist: bool = True, clients: tuple[QdrantClient, AsyncQdrantClient | None] | None = None
) -> QdrantVectorStore:
    if must_exist and clients is None:
        check_store_exists(settings)
    client, aclient = clients or open_qdrant(settings)
    if must_exist:
        if not client.collection_exists(settings.collection):
            raise CollectionNotFoundError(
                f"collection {settings.collection!r} does not exist at {settings.qdrant_location()}; "
                f"ingest documents first: dagrag ingest PATH", collection=settings.collection)
        check_collection_model(client, settings.collection, settings.embed_model)
    exists = client.collection_exists(settings.collection)
    sparse = exists and has_sparse_vectors(client, settings.collection)
    if settings.hybrid and exists and not sparse:
        logger.warning("collection %r has no sparse vectors: dense search only (ingest into a new collection for "
                       "hybrid search, or set DAGRAG_HYBRID=false to silence this)", settings.collection)
    # A collection with sparse vectors gets them on every write, whether or not this run searches them.
    hybrid = {"enable_hybrid": True, "sparse_doc_fn": encode_documents, "sparse_query_fn": encode_queries,
              "sparse_vector_name": SPARSE_VECTOR_NAME} if sparse or (settings.hybrid and not exists) else {}
    return LocalAwareQdrantVectorStore(collection_name=settings.collection, client=client, aclient=aclient, **hybrid)
