"""What dense search costs as the collection grows, per search backend: experiments/bench.py's `scale` section.

    python experiments/bench.py --only scale --scale-sizes 10000,100000,1000000 \
        --out experiments/results/bench-scale.json

(the full run: the picture goes beside it, bench-scale.png, and experiments/benchmarks_doc.py shows this file in
place of bench.json's scale section; without --scale-sizes the sizes are small). For each size and backend:
ingest rate, index build time, one query's and one 4-subquery layer's p50/p95 latency, recall@10 against exact
search, resident memory and disk.

Vectors: real 384-d MiniLM embeddings of HotpotQA dev paragraphs (embedded once as dagrag's ingest embeds them,
cached as .npy under runs/bench-scale/), then synthetic vectors drawn from the same distribution up to the size;
the sizes are nested (the 10k collection is the first 10k vectors of the 100k one). Queries are the embeddings
of HotpotQA dev questions, never of passages. The reference, "exact search", is numpy's float32 top-10.

Backends:
- qdrant-local   QdrantClient(path=...): the embedded Qdrant dagrag uses today; it scans every vector (numpy).
                 Sizes where one query would take more than MAX_QUERY_MS (extrapolated linearly from the largest
                 size measured) are skipped, and the row says so. Its upsert commits each point to SQLite, so
                 where that ingest is extrapolated past MAX_DISK_INGEST_S the collection is loaded with
                 QdrantClient(":memory:") instead (the same LocalCollection searches) and the row says so.
- dagrag-embedded  what dagrag searches the embedded store with (agents/embedded_search.py): the qdrant-local
                 collection's vectors read once into memory, each layer one numpy matrix product (exact search).
                 It rides on the qdrant-local collection: its ingest is that one's, build_s is the read, RSS the
                 copy it adds.
- edge-hnsw      Qdrant Edge (qdrant-edge-py), in-process Rust engine, HNSW built by optimize(); searched at
                 several `hnsw_ef`, the row keeps the smallest one that reaches recall@10 >= RECALL_TARGET.
- edge-exact     the same Edge shard searched with SearchParams(exact=True) (a Rust full scan).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "runs" / "bench-scale"
DIM = 384
TOP_K = 10  # recall@10
LAYER = 4  # subqueries in one layer, searched in one batch call
LAYER_TARGET_MS = 50.0  # a layer's search, p50
RECALL_TARGET = 0.98
MAX_QUERY_MS = 2000.0  # a full-scan backend is not run where one query would take longer than this
# Embedded Qdrant on disk commits each point to SQLite (an fsync each): where that ingest is extrapolated past this
# many seconds, the collection is loaded in memory instead (same search code) and the on-disk ingest extrapolated.
MAX_DISK_INGEST_S = 300.0
HNSW = {"m": 16, "ef_construct": 100}  # Qdrant's defaults
EF_SWEEP = (32, 64, 128, 256, 512)
VECTOR_NAME = "text-dense"  # dagrag's dense vector name
# Synthetic vectors: a random convex mix of MIX_PARENTS real passage vectors (Dirichlet weights) plus Gaussian
# noise of NOISE per dimension, normalised.
MIX_PARENTS, MIX_ALPHA, NOISE = 2, 0.5, 0.03
BACKENDS = ("qdrant-local", "dagrag-embedded", "edge-hnsw", "edge-exact")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


def rss_mb() -> float:
    """This process's resident memory (psutil when installed, else /proc/self/status)."""
    try:
        import psutil

        return psutil.Process().memory_info().rss / 2**20
    except ImportError:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def available_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("inf")


def disk_mb(path: Path) -> float:
    """Blocks actually used under `path` (sparse files count what they hold, as du does)."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(os.path.join(folder, name)).st_blocks * 512
    return total / 2**20


# --- the vectors ----------------------------------------------------------------------------------------

@dataclass
class Corpus:
    vectors: np.ndarray  # (max size, DIM) float32, unit length; the first `real` rows are real passages
    real: int
    texts: list[str]  # the real passages' texts; text_of[i] indexes it (a synthetic passage borrows a length)
    titles: list[str]
    text_of: np.ndarray
    queries: np.ndarray  # (n, DIM) float32, unit length: real questions
    how: dict[str, Any]


def real_embeddings(data: Path, cache: Path, *, max_passages: int | None, max_questions: int | None,
                    embed_spec: str | None = None) -> tuple[np.ndarray, np.ndarray, list[str], list[str], str]:
    """HotpotQA paragraphs and questions embedded with dagrag's default model, as dagrag embeds them; cached."""
    from evalkit.data import load_examples
    from llama_index.core.schema import MetadataMode

    from dagrag import Settings
    from dagrag.ingest import make_node

    spec = embed_spec or Settings().embed_model
    examples = load_examples(data)
    seen: dict[tuple[str, str], None] = {}
    for example in examples:
        for paragraph in example.paragraphs:
            if paragraph.text.strip():
                seen.setdefault((paragraph.title.strip(), paragraph.text.strip()), None)
    passages = list(seen)[:max_passages]
    questions = [e.question for e in examples][:max_questions]
    nodes = [make_node(text, title, source=data.name) for title, text in passages]
    passage_texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
    key = hashlib.sha256(json.dumps([spec, passage_texts, questions]).encode()).hexdigest()[:12]
    cache.mkdir(parents=True, exist_ok=True)
    p_file, q_file = cache / f"passages-{key}.npy", cache / f"questions-{key}.npy"
    if p_file.exists() and q_file.exists():
        log(f"scale: cached embeddings {p_file}")
        P, Q = np.load(p_file), np.load(q_file)
    else:
        from dagrag.stack import build_embed_model

        model = build_embed_model(spec, 64)
        started = time.perf_counter()
        P = np.asarray(model.get_text_embedding_batch(passage_texts), dtype=np.float32)
        Q = np.asarray(model.get_text_embedding_batch(questions), dtype=np.float32)
        log(f"scale: embedded {len(passages)} passages and {len(questions)} questions in "
            f"{time.perf_counter() - started:.0f} s -> {p_file}")
        np.save(p_file, P)
        np.save(q_file, Q)
    return (normalise(P), normalise(Q), [text for _, text in passages], [title for title, _ in passages],
            str(p_file))


def normalise(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)


def synthesise(real: np.ndarray, count: int, rng: np.random.Generator, chunk: int = 50_000) -> np.ndarray:
    """`count` vectors like the real ones: convex mixes of MIX_PARENTS real vectors plus small noise, normalised."""
    out = np.empty((count, real.shape[1]), dtype=np.float32)
    for start in range(0, count, chunk):
        n = min(chunk, count - start)
        parents = rng.integers(0, len(real), size=(n, MIX_PARENTS))
        weights = rng.dirichlet([MIX_ALPHA] * MIX_PARENTS, size=n).astype(np.float32)
        mixed = np.einsum("np,npd->nd", weights, real[parents])
        mixed += rng.normal(0.0, NOISE, size=mixed.shape).astype(np.float32)
        out[start:start + n] = normalise(mixed)
    return out


def mean_pairwise_cosine(matrix: np.ndarray, rng: np.random.Generator, pairs: int = 20_000) -> float:
    a, b = rng.integers(0, len(matrix), pairs), rng.integers(0, len(matrix), pairs)
    keep = a != b
    return round(float(np.mean(np.sum(matrix[a[keep]] * matrix[b[keep]], axis=1))), 4)


def nearest_cosines(sample: np.ndarray) -> list[float]:
    similarity = sample @ sample.T
    np.fill_diagonal(similarity, -1.0)
    return [round(float(v), 3) for v in np.percentile(similarity.max(axis=1), [10, 50, 90])]


def build_corpus(data: Path, size: int, cache: Path = CACHE, *, max_passages: int | None = None,
                 max_questions: int | None = None, seed: int = 0) -> Corpus:
    P, Q, texts, titles, cached = real_embeddings(data, cache, max_passages=max_passages,
                                                  max_questions=max_questions)
    rng = np.random.default_rng(seed)
    real = min(size, len(P))
    vectors = np.empty((size, DIM), dtype=np.float32)
    vectors[:real] = P[:real]
    if size > real:
        vectors[real:] = synthesise(P, size - real, rng)
    text_of = np.concatenate([np.arange(real), rng.integers(0, len(texts), size=size - real)])
    check = np.random.default_rng(seed + 1)
    stats: dict[str, Any] = {"mean_pairwise_cosine_real": mean_pairwise_cosine(P, check)}
    synthetic = vectors[real:real + min(size - real, 20_000)]
    if len(synthetic) > 1:  # equal-sized samples: the cosine to each one's nearest neighbour within its sample
        m = min(len(P), len(synthetic), 2000)
        stats["mean_pairwise_cosine_synthetic"] = mean_pairwise_cosine(synthetic, check)
        stats["nearest_cosine_p10_p50_p90_real"] = nearest_cosines(P[:m])
        stats["nearest_cosine_p10_p50_p90_synthetic"] = nearest_cosines(synthetic[:m])
    shown = os.path.relpath(cached, ROOT) if cached.startswith(str(ROOT)) else cached
    how = {"real_passages": len(P), "questions": len(Q), "cache": shown, "seed": seed,
           "synthetic": f"convex mix of {MIX_PARENTS} random real passage vectors (Dirichlet α={MIX_ALPHA}) "
                        f"+ N(0, {NOISE}²) per dimension, normalised; its payload is the text of a random real "
                        "passage, so payload lengths follow the real ones",
           "distribution_check": stats}
    return Corpus(vectors=vectors, real=real, texts=texts, titles=titles, text_of=text_of, queries=Q, how=how)


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int = TOP_K, chunk: int = 100_000) -> np.ndarray:
    """The exact top-k ids of each query by inner product (float32, chunked): the reference."""
    best_ids = np.empty((len(queries), 0), dtype=np.int64)
    best_scores = np.empty((len(queries), 0), dtype=np.float32)
    for start in range(0, len(vectors), chunk):
        scores = queries @ vectors[start:start + chunk].T
        kk = min(k, scores.shape[1])
        top = np.argpartition(-scores, kk - 1, axis=1)[:, :kk]
        ids = np.concatenate([best_ids, top + start], axis=1)
        all_scores = np.concatenate([best_scores, np.take_along_axis(scores, top, axis=1)], axis=1)
        order = np.argsort(-all_scores, axis=1)[:, :k]
        best_ids, best_scores = np.take_along_axis(ids, order, axis=1), np.take_along_axis(all_scores, order, axis=1)
    return best_ids


def payload(corpus: Corpus, i: int) -> dict[str, Any]:
    """What dagrag's ingest (LlamaIndex's QdrantVectorStore) stores with a passage: its node as JSON + metadata."""
    j = int(corpus.text_of[i])
    title = corpus.titles[j] if i < corpus.real else f"Synthetic passage {i}"
    metadata = {"title": title, "source": "hotpotqa_dev.jsonl"}
    node = {"id_": f"p{i}", "metadata": metadata, "text": corpus.texts[j], "class_name": "TextNode"}
    return {**metadata, "_node_content": json.dumps(node), "_node_type": "TextNode", "doc_id": "None",
            "document_id": "None", "ref_doc_id": "None"}


# --- timing ---------------------------------------------------------------------------------------------

Search = Callable[[list[float]], list[int]]
LayerSearch = Callable[[list[list[float]]], list[list[int]]]


def measure(single: Search, layer: LayerSearch, queries: list[list[float]], truth: np.ndarray, *, singles: int,
            layers: int, budget_s: float) -> dict[str, Any]:
    """p50/p95 of one query and of one layer's batch of 4, and recall@10 of everything returned against exact, after
    a warm-up. Each phase stops early after `budget_s` (at least 10 queries and 5 layers are timed)."""
    n = len(queries)
    warm = time.perf_counter()
    for i in range(n):  # warm up (a fresh index's pages, caches): every question once, or 2 s
        single(queries[i])
        if time.perf_counter() - warm > 2.0:
            break
    found: list[tuple[int, list[int]]] = []
    one_ms: list[float] = []
    started = time.perf_counter()
    for i in range(singles):
        t0 = time.perf_counter()
        ids = single(queries[i % n])
        one_ms.append((time.perf_counter() - t0) * 1000)
        found.append((i % n, ids))
        if i >= 9 and time.perf_counter() - started > budget_s:
            break
    layer_ms: list[float] = []
    started = time.perf_counter()
    for j in range(layers):
        picked = [(singles + LAYER * j + k) % n for k in range(LAYER)]
        t0 = time.perf_counter()
        results = layer([queries[q] for q in picked])
        layer_ms.append((time.perf_counter() - t0) * 1000)
        found.extend(zip(picked, results))
        if j >= 4 and time.perf_counter() - started > budget_s:
            break
    recall = statistics.fmean(len(set(ids[:TOP_K]) & set(truth[q].tolist())) / TOP_K for q, ids in found)
    return {"query_p50_ms": round(percentile(one_ms, 50), 2), "query_p95_ms": round(percentile(one_ms, 95), 2),
            "layer_p50_ms": round(percentile(layer_ms, 50), 2), "layer_p95_ms": round(percentile(layer_ms, 95), 2),
            "recall_at_10": round(recall, 4), "queries": len(one_ms), "layers": len(layer_ms)}


# --- backends -------------------------------------------------------------------------------------------

def run_qdrant_local(corpus: Corpus, size: int, folder: Path, queries: list[list[float]], truth: np.ndarray,
                     opts: dict[str, Any], *, on_disk: bool = True) -> dict[str, Any]:
    """QdrantClient(path=folder), or (on_disk=False) ":memory:": the same LocalCollection answers, without the
    SQLite commit per point the folder costs on upsert."""
    from qdrant_client import QdrantClient
    from qdrant_client.http import models as rest

    before = rss_mb()
    client = QdrantClient(path=str(folder)) if on_disk else QdrantClient(location=":memory:")
    try:
        client.create_collection("scale", vectors_config={VECTOR_NAME: rest.VectorParams(
            size=DIM, distance=rest.Distance.COSINE)})
        started = time.perf_counter()
        batch = 1000
        for start in range(0, size, batch):
            ids = list(range(start, min(size, start + batch)))
            client.upsert("scale", points=rest.Batch(ids=ids, vectors={VECTOR_NAME: corpus.vectors[ids].tolist()},
                                                     payloads=[payload(corpus, i) for i in ids]), wait=True)
        ingest_s = time.perf_counter() - started
        limit = opts["limit"]

        def single(vector: list[float]) -> list[int]:
            hits = client.query_points("scale", query=vector, using=VECTOR_NAME, limit=limit, with_payload=True)
            return [int(p.id) for p in hits.points]

        def layer(vectors: list[list[float]]) -> list[list[int]]:
            requests = [rest.QueryRequest(query=v, using=VECTOR_NAME, limit=limit, with_payload=True)
                        for v in vectors]
            return [[int(p.id) for p in r.points] for r in client.query_batch_points("scale", requests=requests)]

        timed = measure(single, layer, queries, truth, singles=opts["singles"], layers=opts["layers"],
                        budget_s=opts["budget_s"])
        rss = rss_mb() - before
        local = {"storage": "disk" if on_disk else "memory", "ingest_per_s": round(size / ingest_s, 1),
                 "ingest_s": round(ingest_s, 2), "build_s": 0.0, **timed, "rss_mb": round(rss, 1),
                 "disk_mb": round(disk_mb(folder), 1) if on_disk else None}
        rows = {"qdrant-local": local, "dagrag-embedded": run_in_process(client, local, queries, truth, opts)}
    finally:
        client.close()
    return rows


def run_in_process(client: Any, local: dict[str, Any], queries: list[list[float]], truth: np.ndarray,
                   opts: dict[str, Any]) -> dict[str, Any]:
    """dagrag's in-process search of the embedded collection the qdrant-local row just filled (payloads included)."""
    from dagrag.agents.embedded_search import EmbeddedSearch

    before = rss_mb()
    search = EmbeddedSearch(client, "scale", VECTOR_NAME, None)
    started = time.perf_counter()
    search.index()
    read_s = time.perf_counter() - started
    limit = opts["limit"]

    def single(vector: list[float]) -> list[int]:
        return [int(p.id) for p in search.search([vector], None, [limit])[0]]

    def layer(vectors: list[list[float]]) -> list[list[int]]:
        return [[int(p.id) for p in points] for points in search.search(vectors, None, [limit] * len(vectors))]

    timed = measure(single, layer, queries, truth, singles=opts["singles"], layers=opts["layers"],
                    budget_s=opts["budget_s"])
    return {"storage": local["storage"], "ingest_per_s": local["ingest_per_s"], "ingest_s": local["ingest_s"],
            "build_s": round(read_s, 2), **timed, "rss_mb": round(rss_mb() - before, 1), "disk_mb": local["disk_mb"],
            "note": "the qdrant-local collection's vectors read into memory (build_s) and searched by one matrix "
                    "product per batch; RSS is the copy it adds"}


def run_edge(corpus: Corpus, size: int, folder: Path, queries: list[list[float]], truth: np.ndarray,
             opts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """One Edge shard: upserted, HNSW built, searched at each ef and exactly. Rows for edge-hnsw and edge-exact."""
    from qdrant_edge import (
        Distance,
        EdgeConfig,
        EdgeOptimizersConfig,
        EdgeShard,
        EdgeVectorParams,
        HnswIndexConfig,
        Point,
        Query,
        QueryBatchRequest,
        QueryRequest,
        SearchParams,
        UpdateOperation,
    )

    before = rss_mb()
    config = EdgeConfig(vectors=EdgeVectorParams(size=DIM, distance=Distance.Cosine),
                        hnsw_config=HnswIndexConfig(m=HNSW["m"], ef_construct=HNSW["ef_construct"],
                                                    full_scan_threshold=10),  # KB: HNSW answers even tiny shards
                        optimizers=EdgeOptimizersConfig(indexing_threshold=1))  # KB: every segment gets an index
    shard = EdgeShard.create(str(folder), config)
    try:
        started = time.perf_counter()
        batch = 1000
        for start in range(0, size, batch):
            ids = range(start, min(size, start + batch))
            rows = corpus.vectors[start:start + len(ids)].tolist()
            shard.update(UpdateOperation.upsert_points([Point(i, row, payload(corpus, i))
                                                        for i, row in zip(ids, rows)]))
        shard.flush()
        ingest_s = time.perf_counter() - started
        started = time.perf_counter()
        shard.optimize()
        shard.flush()
        build_s = time.perf_counter() - started
        info = shard.info()
        limit = opts["limit"]

        def searches(params: Any) -> tuple[Search, LayerSearch]:
            def single(vector: list[float]) -> list[int]:
                hits = shard.query(QueryRequest(limit=limit, query=Query.Nearest(vector), with_payload=True,
                                                params=params))
                return [int(h.id) for h in hits]

            def layer(vectors: list[list[float]]) -> list[list[int]]:
                batch = QueryBatchRequest([QueryRequest(limit=limit, query=Query.Nearest(v), with_payload=True,
                                                        params=params) for v in vectors])
                return [[int(h.id) for h in hits] for hits in shard.query_batch(batch)]
            return single, layer

        sweep: dict[str, dict[str, Any]] = {}
        for ef in opts["efs"]:
            sweep[str(ef)] = measure(*searches(SearchParams(hnsw_ef=ef)), queries, truth, singles=opts["singles"],
                                     layers=opts["layers"], budget_s=opts["budget_s"])
            reached = [e for e, r in sweep.items() if r["recall_at_10"] >= RECALL_TARGET]
            if reached and reached[0] != str(ef):
                break  # one ef past the first that reaches the target shows the margin; larger ones only cost more
        exact = None
        if opts["edge_exact"]:
            exact = measure(*searches(SearchParams(exact=True)), queries, truth, singles=opts["singles"],
                            layers=opts["layers"], budget_s=opts["budget_s"])
        rss = rss_mb() - before
        disk = disk_mb(folder)
    finally:
        shard.close()
    chosen = next((ef for ef, r in sweep.items() if r["recall_at_10"] >= RECALL_TARGET), list(sweep)[-1])
    common = {"ingest_per_s": round(size / ingest_s, 1), "ingest_s": round(ingest_s, 2), "rss_mb": round(rss, 1),
              "disk_mb": round(disk, 1), "segments": info.segments_count,
              "indexed_vectors": info.indexed_vectors_count}
    rows = {"edge-hnsw": {**common, "build_s": round(build_s, 2), **sweep[chosen], "ef": int(chosen),
                          "ef_sweep": {ef: {k: r[k] for k in ("query_p50_ms", "layer_p50_ms", "recall_at_10")}
                                       for ef, r in sweep.items()}}}
    if exact is not None:
        rows["edge-exact"] = {**common, "build_s": 0.0, **exact,
                              "note": "the edge-hnsw shard searched with exact=True; RSS and disk are the shard's"}
    return rows


# --- the section ----------------------------------------------------------------------------------------

def skip_reason(backend: str, size: int, done: dict[int, dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
    """Why `backend` is not run at `size`, predicted from its largest measured size (linear in size); or None."""
    measured = [(s, r) for s, r in done.items() if "skipped" not in r]
    if not measured:
        return None
    base_size, base = max(measured)
    scale = size / base_size
    predicted = {"query_p50_ms": round(base["query_p50_ms"] * scale, 1),
                 "layer_p50_ms": round(base["layer_p50_ms"] * scale, 1),
                 "rss_mb": round(base["rss_mb"] * scale, 1)}
    if backend != "edge-hnsw" and predicted["query_p50_ms"] > MAX_QUERY_MS:
        return (f"not run: one query would take ~{predicted['query_p50_ms']:.0f} ms (> {MAX_QUERY_MS:.0f}), "
                f"extrapolated linearly from {base_size:,} passages ({base['query_p50_ms']} ms); a full scan grows "
                "with the collection"), predicted
    if predicted["rss_mb"] > 0.8 * available_mb():
        return (f"not run: would need ~{predicted['rss_mb']:.0f} MB resident (extrapolated from {base_size:,} "
                f"passages), more than 80% of the {available_mb():.0f} MB available"), predicted
    return None


def slow_disk_ingest(size: int, done: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    """When embedded Qdrant's on-disk ingest at `size` is extrapolated past MAX_DISK_INGEST_S: why, and how long."""
    measured = [(s, r) for s, r in done.items() if r.get("storage") == "disk"]
    if not measured:
        return None
    base_size, base = max(measured)
    seconds = size / base["ingest_per_s"]
    if seconds <= MAX_DISK_INGEST_S:
        return None
    return {"disk_ingest_s_extrapolated": round(seconds, 0),
            "note": f"loaded in memory: on disk, ingest would take ~{seconds:,.0f} s at the {base['ingest_per_s']} "
                    f"points/s measured at {base_size:,} (a SQLite commit per point); the search is the same code"}


def run_scale(data: Path, sizes: Sequence[int], *, cache: Path = CACHE, plot_path: Path | None = None,
              limit: int = 20, max_passages: int | None = None, max_questions: int | None = None,
              singles: int = 100, layers: int = 50, budget_s: float = 20.0, efs: Sequence[int] = EF_SWEEP,
              edge_exact: bool = True) -> dict[str, Any]:
    sizes = sorted(set(sizes))
    corpus = build_corpus(data, max(sizes), cache, max_passages=max_passages, max_questions=max_questions)
    queries = corpus.queries.tolist()
    opts = {"limit": limit, "singles": singles, "layers": layers, "budget_s": budget_s, "efs": list(efs),
            "edge_exact": edge_exact}
    done: dict[str, dict[int, dict[str, Any]]] = {name: {} for name in BACKENDS if edge_exact or name != "edge-exact"}
    for size in sizes:
        started = time.perf_counter()
        truth = exact_top(corpus.vectors[:size], corpus.queries)
        truth_s = time.perf_counter() - started
        base = {"real": min(size, corpus.real), "synthetic": max(0, size - corpus.real), "exact_top10_s":
                round(truth_s, 2)}
        for backend in ("edge-hnsw", "qdrant-local"):
            watched = ["edge-hnsw", "edge-exact"] if backend == "edge-hnsw" else ["qdrant-local", "dagrag-embedded"]
            reasons = {name: skip_reason(name, size, done[name]) for name in watched if name in done}
            if all(reasons.values()):
                for name, (why, predicted) in reasons.items():  # type: ignore[misc]
                    done[name][size] = {**base, "skipped": why, "extrapolated": predicted}
                    log(f"scale {size:,} {name}: {why}")
                continue
            folder = Path(tempfile.mkdtemp(prefix=f"dagrag-scale-{backend}-"))
            gc.collect()
            try:
                log(f"scale {size:,}: {backend} ...")
                if backend == "qdrant-local":
                    slow = slow_disk_ingest(size, done["qdrant-local"])
                    ran = run_qdrant_local(corpus, size, folder, queries, truth, opts, on_disk=slow is None)
                    ran["qdrant-local"] = {**ran["qdrant-local"], **(slow or {})}
                else:  # edge-exact rides on the same shard unless it is to be skipped
                    ran = run_edge(corpus, size, folder, queries, truth,
                                    {**opts, "edge_exact": opts["edge_exact"] and not reasons.get("edge-exact")})
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            for name, reason in reasons.items():
                if reason and name not in ran:
                    ran[name] = {"skipped": reason[0], "extrapolated": reason[1]}
            for name, row in ran.items():
                done[name][size] = {**base, **row}
                log(f"scale {size:,} {name}: " + (row.get("skipped") or ", ".join(f"{k} {row[k]}" for k in (
                    "layer_p50_ms", "recall_at_10", "ingest_per_s", "build_s", "rss_mb") if k in row)))
            gc.collect()
    rows = [{"size": size, "backend": name, **row} for name, by_size in done.items() for size, row in by_size.items()]
    rows.sort(key=lambda r: (r["size"], BACKENDS.index(r["backend"])))
    result: dict[str, Any] = {
        "rows": rows, "sizes": sizes, "limit": limit, "layer_target_ms": LAYER_TARGET_MS,
        "recall_target": RECALL_TARGET, "hnsw": {**HNSW, "ef_sweep": list(efs)},
        "vectors": corpus.how, "verdict": verdict(rows),
        "how": (f"{DIM}-d vectors: real MiniLM embeddings of HotpotQA dev paragraphs (as dagrag ingests them) up to "
                f"{corpus.how['real_passages']}, then synthetic ones from the same distribution "
                f"({corpus.how['synthetic']}); queries: {corpus.how['questions']} HotpotQA dev questions embedded "
                f"the same way. Reference: exact top-{TOP_K} by numpy (float32). Each size: a fresh folder per "
                "backend, upsert in batches of 1000 with dagrag's payload (ingest rate), then, after a warm-up "
                f"(each question once, at most 2 s), up to {singles} single queries and {layers} layers of {LAYER} "
                f"(one batch call), limit {limit} with payloads, each phase cut after {budget_s:.0f} s; "
                f"recall@{TOP_K} over every query answered. qdrant-local = QdrantClient(path=...) (exact numpy "
                "scan, what dagrag uses; where its on-disk ingest, a SQLite commit per point, is extrapolated past "
                f"{MAX_DISK_INGEST_S:.0f} s it is loaded in memory instead, the same search code, and the row says "
                f"so); edge-hnsw = qdrant-edge-py, HNSW m={HNSW['m']} ef_construct={HNSW['ef_construct']} built by "
                f"optimize() (build_s), the smallest hnsw_ef reaching recall {RECALL_TARGET} on these queries "
                "(ef_sweep has each tried, up to one past it); edge-exact = that shard with exact=True. RSS = "
                "resident memory added by the backend (vectors, index, payloads, mapped pages touched); disk = "
                f"blocks used. A full scan is skipped where one query is extrapolated past {MAX_QUERY_MS:.0f} ms."),
    }
    if plot_path is not None:
        plot(result, plot_path)
        result["plot"] = plot_path.name
    return result


# --- the verdict and the picture ------------------------------------------------------------------------

def fmt_size(size: int) -> str:
    return f"{size // 1_000_000}M" if size >= 1_000_000 and size % 1_000_000 == 0 else (
        f"{size // 1000}k" if size >= 1000 and size % 1000 == 0 else str(size))


def meets(row: dict[str, Any]) -> bool:
    return ("skipped" not in row and row.get("layer_p50_ms", float("inf")) <= LAYER_TARGET_MS
            and row.get("recall_at_10", 0.0) >= RECALL_TARGET)


def best_at_largest(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The fastest backend (layer p50) with recall@10 >= target at the largest size measured."""
    measured = [r for r in rows if "skipped" not in r]
    if not measured:
        return None
    largest = max(r["size"] for r in measured)
    good = [r for r in measured if r["size"] == largest and r["recall_at_10"] >= RECALL_TARGET]
    if not good:
        return None
    row = min(good, key=lambda r: r["layer_p50_ms"])
    return {"size": largest, "backend": row["backend"], "layer_p50_ms": row["layer_p50_ms"],
            "recall_at_10": row["recall_at_10"]}


def verdict(rows: list[dict[str, Any]]) -> str:
    """Where each backend stops meeting LAYER_TARGET_MS per layer (at recall@10 >= RECALL_TARGET), in words."""
    parts = []
    for backend in BACKENDS:
        mine = sorted((r for r in rows if r["backend"] == backend), key=lambda r: r["size"])
        if not mine:
            continue
        failing = next((r for r in mine if not meets(r)), None)
        passing = [r for r in mine if meets(r) and (failing is None or r["size"] < failing["size"])]
        if failing is None:
            last = mine[-1]
            parts.append(f"{backend} meets it at every size measured (up to {last['size']:,} passages: layer p50 "
                         f"{last['layer_p50_ms']:g} ms, recall@10 {last['recall_at_10']:g})")
            continue
        upto = f"up to {passing[-1]['size']:,} passages" if passing else "at none of the sizes"
        if "skipped" in failing:
            why = (f"at {failing['size']:,} it was not run (a layer extrapolated to "
                   f"~{failing['extrapolated']['layer_p50_ms']:,.0f} ms)")
        elif failing["recall_at_10"] < RECALL_TARGET:
            why = (f"at {failing['size']:,} its recall@10 is {failing['recall_at_10']:g} (layer p50 "
                   f"{failing['layer_p50_ms']:g} ms)")
        else:
            why = f"at {failing['size']:,} a layer takes {failing['layer_p50_ms']:g} ms (p50)"
        parts.append(f"{backend} meets it {upto}; {why}")
    best = best_at_largest(rows)
    measured = [r["size"] for r in rows if "skipped" not in r]
    largest = max(measured) if measured else 0
    if best and best["layer_p50_ms"] <= LAYER_TARGET_MS:
        tail = (f"At {largest:,} passages use {best['backend']} ({best['layer_p50_ms']:g} ms per layer, "
                f"recall@10 {best['recall_at_10']:g}).")
    elif best:
        tail = (f"At {largest:,} passages no backend here meets {LAYER_TARGET_MS:g} ms per layer with recall@10 ≥ "
                f"{RECALL_TARGET:g}; the fastest that keeps that recall is {best['backend']} "
                f"({best['layer_p50_ms']:g} ms): past this size use a Qdrant server (HNSW, more cores) via "
                "DAGRAG_QDRANT_URL.")
    else:
        tail = f"At {largest:,} passages no backend keeps recall@10 ≥ {RECALL_TARGET:g}."
    return (f"A 4-subquery layer within {LAYER_TARGET_MS:g} ms (p50) at recall@10 ≥ {RECALL_TARGET:g}: "
            + "; ".join(parts) + ". " + tail)


def plot(result: dict[str, Any], path: Path) -> None:
    """Layer p50 (log-log, recall@10 beside each point), build + ingest seconds and resident memory, by size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    colours = {"qdrant-local": "#9aa5b1", "dagrag-embedded": "#2e9d5b", "edge-hnsw": "#2f6fb0",
               "edge-exact": "#d08a2e"}
    figure, (latency, build, memory) = plt.subplots(1, 3, figsize=(14, 4.4))
    for backend in BACKENDS:
        mine = sorted((r for r in result["rows"] if r["backend"] == backend), key=lambda r: r["size"])
        ran = [r for r in mine if "skipped" not in r]
        if not mine:
            continue
        colour = colours[backend]
        if ran:
            sizes = [r["size"] for r in ran]
            latency.plot(sizes, [r["layer_p50_ms"] for r in ran], "o-", color=colour, label=backend)
            for r in ran:
                latency.annotate(f"R@10 {r['recall_at_10']:.3f}", (r["size"], r["layer_p50_ms"]), fontsize=7,
                                 textcoords="offset points", xytext=(4, 4), color=colour)
            build.plot(sizes, [r.get("disk_ingest_s_extrapolated", r["ingest_s"]) + r["build_s"] for r in ran], "o-",
                       color=colour, label=backend)
            guessed = [r for r in ran if "disk_ingest_s_extrapolated" in r]
            if guessed:
                build.plot([r["size"] for r in guessed], [r["disk_ingest_s_extrapolated"] for r in guessed], "o",
                           color=colour, mfc="white", label=f"{backend} (on-disk ingest extrapolated)")
            memory.plot(sizes, [max(r["rss_mb"], 0.1) for r in ran], "o-", color=colour, label=backend)
        skipped = [r for r in mine if "skipped" in r]
        if ran and skipped:
            xs = [ran[-1]["size"], *(r["size"] for r in skipped)]
            ys = [ran[-1]["layer_p50_ms"], *(r["extrapolated"]["layer_p50_ms"] for r in skipped)]
            latency.plot(xs, ys, "o--", color=colour, mfc="white", label=f"{backend} (extrapolated, not run)")
    latency.axhline(LAYER_TARGET_MS, color="#c0392b", ls=":", lw=1)
    latency.text(0.99, LAYER_TARGET_MS, f"{LAYER_TARGET_MS:g} ms ", color="#c0392b", fontsize=8, va="bottom",
                 ha="right", transform=latency.get_yaxis_transform())
    sizes = sorted({r["size"] for r in result["rows"]})
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    for axis, title, label in ((latency, f"a layer of {LAYER} subqueries, p50", "ms"),
                               (build, "ingest + index build", "seconds"),
                               (memory, "resident memory added", "MB")):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xticks(sizes, [fmt_size(size) for size in sizes])
        axis.xaxis.set_minor_formatter(NullFormatter())
        axis.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.yaxis.set_major_formatter(plain)
        axis.yaxis.set_minor_formatter(NullFormatter())
        axis.set_title(title)
        axis.set_ylabel(label)
        axis.set_xlabel("passages")
        axis.grid(alpha=0.3, which="both")
    latency.legend(fontsize=7, loc="upper left")
    build.legend(fontsize=7, loc="upper left")
    figure.suptitle("Dense search cost against collection size (experiments/bench.py --only scale)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
