"""The Qdrant server path makes one batch query per layer and answers as the embedded store does, and a new
collection on a server is laid out as the Settings say (shards, replicas, HNSW, vectors on disk, payload indexes).

No Qdrant server can run here. qdrant_client's local mode stands in for one behind dagrag's real selection code:
with DAGRAG_QDRANT_URL set, `open_qdrant` builds a QdrantClient and an AsyncQdrantClient "by URL", and these tests
make those two constructors return local clients (the async one over a copy of the embedded folder), each wrapped to
record every call. What runs is dagrag's server path (searches awaited on the async client, the layout and payload
indexes passed at creation) against Qdrant's local implementation; what a real server or cluster does with them is
not tested here (docs/deployment.md).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.http import models as rest

from dagrag import QueryWorkflow, Settings
from dagrag import stack as stack_module
from dagrag import store as store_module
from dagrag.config import settings_problems
from dagrag.ingest import ingest_nodes, make_node
from dagrag.store import SPARSE_VECTOR_NAME, CollectionLayout, open_qdrant

from .conftest import sample_records

URL = "http://qdrant.test:6333"
COLLECTION = "paths"
BRIDGE = sample_records()[0]["question"]  # the woman who portrayed Corliss Archer: s1, then a hop about {s1}
# Two layers and nothing after them: no critic retry, no skipped hop, no deeper hop, no backtrack.
TWO_LAYERS = {"subquery_max_iters": 0, "bridge_when_needed": False, "bridge_deeper_hops": False,
              "verify_backtrack": False}
LAYOUT = {"qdrant_shards": 6, "qdrant_replication_factor": 2, "qdrant_write_consistency": 2, "qdrant_hnsw_m": 32,
          "qdrant_hnsw_ef_construct": 256, "qdrant_on_disk": True}
SEARCHES = ("query", "search", "recommend", "discover")  # every qdrant_client method that searches starts so


class Recorded:
    """A Qdrant client, sync or async, that records each public method called on it: (name, keyword arguments)."""

    def __init__(self, inner: Any, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self._inner, self._calls = inner, calls

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name.startswith("_") or not callable(attr):
            return attr

        def record(*args: Any, **kwargs: Any) -> Any:
            self._calls.append((name, kwargs))
            return attr(*args, **kwargs)  # an async client's coroutine is returned as is, for the caller to await

        return record


def nodes(records: int = 6) -> list:
    return [make_node(p["text"], p["title"]) for r in sample_records()[:records] for p in r["paragraphs"]]


@pytest.fixture(scope="module")
def embedded_path(tmp_path_factory, embed_model) -> Path:
    """An embedded store (hybrid, the default) holding the first six sample questions' pages."""
    path = tmp_path_factory.mktemp("embedded")
    ingest_nodes(Settings(qdrant_path=path, collection=COLLECTION), nodes(), embed_model)
    return path


async def run_recorded(monkeypatch, settings: Settings, embed_model, reranker):
    """The bridge question through the workflow that `from_settings` builds, every Qdrant call recorded."""
    sync_calls: list = []
    async_calls: list = []
    real_open = store_module.open_qdrant

    def recording_open(given: Settings):
        client, aclient = real_open(given)
        return Recorded(client, sync_calls), None if aclient is None else Recorded(aclient, async_calls)

    monkeypatch.setattr(stack_module, "open_qdrant", recording_open)
    workflow = QueryWorkflow.from_settings(settings, embed_model=embed_model, reranker=reranker)
    result = await workflow.run(query=BRIDGE)
    return result, sync_calls, async_calls


def searches(calls: list) -> list:
    return [(name, kwargs) for name, kwargs in calls if name.startswith(SEARCHES)]


async def test_the_server_path_makes_one_batch_query_per_layer_and_answers_as_the_embedded_store(
        monkeypatch, tmp_path, embedded_path, embed_model, reranker):
    embedded = Settings(qdrant_path=embedded_path, collection=COLLECTION, **TWO_LAYERS)
    e_result, e_sync, e_async = await run_recorded(monkeypatch, embedded, embed_model, reranker)

    # The "server": the embedded client for the sync calls (collection checks), and an AsyncQdrantClient in local
    # mode over a copy of the folder (the embedded folder admits one client) for the searches, as open_qdrant's
    # URL branch hands them out.
    copy = shutil.copytree(embedded_path, tmp_path / "server")
    sync_client = open_qdrant(embedded)[0]
    async_client = AsyncQdrantClient(path=str(copy))
    made: list[str] = []

    def by_url(kind: str, client: Any):
        def make(url: str, api_key: str | None = None, timeout: int | None = None) -> Any:
            assert url == URL
            made.append(kind)
            return client
        return make

    monkeypatch.setattr(store_module, "QdrantClient", by_url("sync", sync_client))
    monkeypatch.setattr(store_module, "AsyncQdrantClient", by_url("async", async_client))
    try:
        server = Settings(qdrant_url=URL, collection=COLLECTION, **TWO_LAYERS)
        s_result, s_sync, s_async = await run_recorded(monkeypatch, server, embed_model, reranker)
    finally:
        await async_client.close()
    assert made == ["sync", "async"]  # open_qdrant took the URL branch

    layers = sorted({s.layer for s in e_result.subqueries})
    assert layers == sorted({s.layer for s in s_result.subqueries}) and len(layers) == 2
    assert all(s.attempts == 1 and s.status != "skipped" for s in e_result.subqueries)
    # Server: every search awaited on the async client, exactly one query_batch_points per layer, each request
    # dense and BM25 prefetches fused by RRF inside Qdrant. Embedded: no search call reaches Qdrant (its vectors are
    # read once and searched in-process, agents/embedded_search.py), and the answer is the same.
    assert searches(e_async) == searches(e_sync) == searches(s_sync) == []
    server_batches = searches(s_async)
    assert [name for name, _ in server_batches] == ["query_batch_points"] * 2
    for _, call in server_batches:
        assert call["collection_name"] == COLLECTION
        assert all(r.query == rest.FusionQuery(fusion=rest.Fusion.RRF)
                   and [p.using for p in r.prefetch] == ["text-dense", SPARSE_VECTOR_NAME] for r in call["requests"])
    assert [name for name, _ in e_sync if name == "scroll"]  # the embedded store's vectors, read
    first, hop = (len(call["requests"]) for _, call in server_batches)
    assert first == 1 and hop > 1
    assert [s.node_id for s in e_result.sources] == [s.node_id for s in s_result.sources]
    assert e_result.answer == s_result.answer


LOCAL_INDEXES = "ignore:Payload indexes have no effect in the local Qdrant"  # the stand-in says so, once


@pytest.mark.filterwarnings(LOCAL_INDEXES)
def test_a_new_collection_on_a_server_is_laid_out_as_the_settings_say(monkeypatch, tmp_path, embed_model):
    calls: list = []
    async_calls: list = []
    local = QdrantClient(path=str(tmp_path / "server"))  # stands in for the server
    monkeypatch.setattr(store_module, "QdrantClient", lambda url, api_key=None, timeout=None: Recorded(local, calls))
    monkeypatch.setattr(store_module, "AsyncQdrantClient",
                        lambda url, api_key=None, timeout=None: Recorded(AsyncQdrantClient(":memory:"), async_calls))
    settings = Settings(qdrant_url=URL, collection="laid-out", **LAYOUT)
    try:
        report = ingest_nodes(settings, nodes(1), embed_model)
        [create] = [kwargs for name, kwargs in calls if name == "create_collection"]
        assert {key: create[key] for key in ("shard_number", "replication_factor", "write_consistency_factor",
                                             "hnsw_config")} == {
            "shard_number": 6, "replication_factor": 2, "write_consistency_factor": 2,
            "hnsw_config": rest.HnswConfigDiff(m=32, ef_construct=256)}
        # The vectors as the embedded store has them, the dense ones served from disk.
        assert create["vectors_config"] == {
            "text-dense": rest.VectorParams(size=384, distance=rest.Distance.COSINE, on_disk=True)}
        assert create["sparse_vectors_config"] == {
            SPARSE_VECTOR_NAME: rest.SparseVectorParams(modifier=rest.Modifier.IDF)}
        assert [kwargs for name, kwargs in calls if name == "create_payload_index"] == [
            {"collection_name": "laid-out", "field_name": "doc_id", "field_schema": rest.PayloadSchemaType.KEYWORD},
            {"collection_name": "laid-out", "field_name": "title", "field_schema": rest.PayloadSchemaType.TEXT},
            {"collection_name": "laid-out", "field_name": "section", "field_schema": rest.PayloadSchemaType.TEXT}]
        assert async_calls == []  # ingest writes through the sync client
        assert report.added == local.count("laid-out").count == len(nodes(1))
    finally:
        local.close()


@pytest.mark.filterwarnings(LOCAL_INDEXES)
def test_a_server_collection_without_layout_settings_leaves_every_choice_to_qdrant(monkeypatch, tmp_path, embed_model):
    calls: list = []
    local = QdrantClient(path=str(tmp_path / "server"))
    monkeypatch.setattr(store_module, "QdrantClient", lambda url, api_key=None, timeout=None: Recorded(local, calls))
    monkeypatch.setattr(store_module, "AsyncQdrantClient", lambda url, api_key=None, timeout=None: None)
    try:
        ingest_nodes(Settings(qdrant_url=URL, collection="plain", hybrid=False), nodes(1), embed_model)
        [create] = [kwargs for name, kwargs in calls if name == "create_collection"]
        assert set(create) == {"collection_name", "vectors_config", "sparse_vectors_config", "metadata"}
        assert create["vectors_config"] == {"text-dense": rest.VectorParams(size=384, distance=rest.Distance.COSINE)}
        assert create["sparse_vectors_config"] is None
    finally:
        local.close()


def test_the_embedded_store_ignores_the_layout_with_one_warning_and_makes_no_payload_index(
        tmp_path, embed_model, caplog):
    settings = Settings(qdrant_path=tmp_path, collection="one", **LAYOUT)
    calls: list = []
    client = open_qdrant(settings)[0]
    with caplog.at_level(logging.WARNING, logger="dagrag"):
        ingest_nodes(settings, nodes(1), embed_model, clients=(Recorded(client, calls), None))
        ingest_nodes(settings.model_copy(update={"collection": "two"}), nodes(1), embed_model,
                     clients=(Recorded(client, calls), None))
    creates = [kwargs for name, kwargs in calls if name == "create_collection"]
    assert len(creates) == 2
    for create in creates:  # today's collection: dense + BM25 sparse vectors, nothing else
        assert set(create) == {"collection_name", "vectors_config", "sparse_vectors_config", "metadata"}
        assert create["vectors_config"] == {"text-dense": rest.VectorParams(size=384, distance=rest.Distance.COSINE)}
    assert not [name for name, _ in calls if name == "create_payload_index"]
    [warning] = [r.getMessage() for r in caplog.records if "ignored by the embedded store" in r.getMessage()]
    for name in ("SHARDS", "REPLICATION_FACTOR", "WRITE_CONSISTENCY", "HNSW_M", "HNSW_EF_CONSTRUCT", "ON_DISK"):
        assert f"DAGRAG_QDRANT_{name}" in warning and f"qdrant_{name.lower()}" in Settings.model_fields
    assert client.count("one").count == client.count("two").count == len(nodes(1))


def test_the_layout_is_read_from_the_environment_and_left_to_qdrant_by_default(monkeypatch):
    default = CollectionLayout.from_settings(Settings())
    assert default == CollectionLayout() and default.collection_options() == {} and default.settings_given() == []
    for name, value in LAYOUT.items():
        monkeypatch.setenv(f"DAGRAG_{name.upper()}", str(value).lower())
    assert CollectionLayout.from_settings(Settings()) == CollectionLayout(
        shards=6, replication_factor=2, write_consistency=2, hnsw_m=32, hnsw_ef_construct=256, on_disk=True)


@pytest.mark.parametrize(("env", "line"), [
    ({"DAGRAG_QDRANT_SHARDS": "0"}, "DAGRAG_QDRANT_SHARDS=0: input should be greater than or equal to 1"),
    ({"DAGRAG_QDRANT_SHARDS": "two"}, "DAGRAG_QDRANT_SHARDS=two: input should be a valid integer"),
    ({"DAGRAG_QDRANT_REPLICATION_FACTOR": "0"},
     "DAGRAG_QDRANT_REPLICATION_FACTOR=0: input should be greater than or equal to 1"),
    ({"DAGRAG_QDRANT_WRITE_CONSISTENCY": "0"},
     "DAGRAG_QDRANT_WRITE_CONSISTENCY=0: input should be greater than or equal to 1"),
    ({"DAGRAG_QDRANT_REPLICATION_FACTOR": "2", "DAGRAG_QDRANT_WRITE_CONSISTENCY": "3"},
     "DAGRAG_QDRANT_WRITE_CONSISTENCY=3: more than DAGRAG_QDRANT_REPLICATION_FACTOR=2"),
    ({"DAGRAG_QDRANT_HNSW_M": "-1"}, "DAGRAG_QDRANT_HNSW_M=-1: input should be greater than or equal to 0"),
    ({"DAGRAG_QDRANT_HNSW_EF_CONSTRUCT": "2"},
     "DAGRAG_QDRANT_HNSW_EF_CONSTRUCT=2: input should be greater than or equal to 4"),
    ({"DAGRAG_QDRANT_ON_DISK": "sometimes"}, "DAGRAG_QDRANT_ON_DISK=sometimes: input should be a valid boolean"),
])
def test_a_bad_layout_setting_is_refused_naming_it(monkeypatch, env, line):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as refused:
        Settings()
    assert settings_problems(refused.value).startswith(line)
