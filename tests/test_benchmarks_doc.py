"""experiments/benchmarks_doc.py: docs/benchmarks.md is written from experiments/results/, never typed by hand."""

from __future__ import annotations

import json
import re
import shutil
import sys

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "experiments"))

import benchmarks_doc

RESULTS = ROOT / "experiments" / "results"


def test_the_committed_benchmarks_page_is_the_one_the_result_files_give():
    assert benchmarks_doc.DOC.read_text(encoding="utf-8") == benchmarks_doc.render(), (
        "docs/benchmarks.md differs from experiments/results/: run .venv/bin/python experiments/benchmarks_doc.py")


def test_a_number_changed_in_a_result_file_changes_the_page(tmp_path, monkeypatch):
    monkeypatch.setattr(benchmarks_doc, "RESULTS", tmp_path)
    shutil.copy(RESULTS / "bench.json", tmp_path / "bench.json")
    shutil.copytree(RESULTS / "hotpotqa-k4", tmp_path / "hotpotqa-k4")
    before = benchmarks_doc.render()
    bench = json.loads((tmp_path / "bench.json").read_text(encoding="utf-8"))
    bench["targets"]["e2e_p50_s"]["value"] = 12.345
    (tmp_path / "bench.json").write_text(json.dumps(bench), encoding="utf-8")
    summary = json.loads((tmp_path / "hotpotqa-k4" / "summary.json").read_text(encoding="utf-8"))
    summary["systems"]["dag"]["joint_recall"] = 0.1234
    (tmp_path / "hotpotqa-k4" / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    after = benchmarks_doc.render()
    assert after != before
    assert "| `e2e_p50_s` | one whole offline query, median | 12.345 |" in after
    assert re.search(r"\| dag \| all \| 485 \| [0-9.]+ \| [0-9.]+ \| 0\.123 \|", after)


def test_a_missing_result_file_leaves_its_section_out(tmp_path, monkeypatch):
    monkeypatch.setattr(benchmarks_doc, "RESULTS", tmp_path)
    page = benchmarks_doc.render()
    assert "## Every benchmark set" in page  # all_sets' own folder is still there
    for section in ("## HotpotQA dev", "## What each feature adds", "## Latency and cost", "## Chunking",
                    "## Rerank settings", "## With a real local LLM", "## The LLM planner with a small model"):
        assert section not in page


def test_the_planner_section_shows_each_replayed_set_and_each_end_to_end_run(tmp_path, monkeypatch):
    monkeypatch.setattr(benchmarks_doc, "RESULTS", tmp_path)
    (tmp_path / "planner-probe").mkdir()
    (tmp_path / "real-llm-planner").mkdir()
    probe = {"commit": "abc1234", "systems": {name: {"n": 40, "recall": 0.9, "joint_recall": joint, "subqueries": 2.5}
                                              for name, joint in (("single", 0.7), ("llm-plan", 0.925))}}
    (tmp_path / "planner-probe" / "hotpot40.json").write_text(json.dumps(probe), encoding="utf-8")
    run = {"config": {"commit": "def5678"}, "systems": {"dag": {"n": 40, "f1": 0.496, "joint_recall": 0.85}}}
    (tmp_path / "real-llm-planner" / "hotpot40.json").write_text(json.dumps(run), encoding="utf-8")
    page = benchmarks_doc.render()
    assert "## The LLM planner with a small model" in page
    assert "| hotpot40 | llm-plan | 40 | 0.900 | 0.925 | 2.50 |" in page
    assert re.search(r"\| hotpot40 \| dag \| 40 \| 0\.496 \| [^|]+ \| [^|]+ \| 0\.85 \|.*\| `def5678` \|$", page, re.M)
    assert "`abc1234`, `def5678`" in page


def test_check_fails_with_one_line_on_a_stale_page_and_passes_once_written(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(benchmarks_doc, "DOC", tmp_path / "benchmarks.md")
    (tmp_path / "benchmarks.md").write_text("a number typed by hand: 0.999\n", encoding="utf-8")
    assert benchmarks_doc.main(["--check"]) == 1
    message = capsys.readouterr().err
    assert message.count("\n") == 1 and "experiments/benchmarks_doc.py" in message
    assert benchmarks_doc.main([]) == 0
    assert benchmarks_doc.main(["--check"]) == 0


def test_every_relative_link_in_the_readme_and_docs_names_a_file_that_exists():
    pages = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (page.parent / target.split("#", 1)[0]).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_a_scale_run_of_its_own_stands_in_for_bench_jsons_scale_table(tmp_path, monkeypatch):
    import scale_bench

    monkeypatch.setattr(benchmarks_doc, "RESULTS", tmp_path)
    shutil.copy(RESULTS / "bench.json", tmp_path / "bench.json")
    alone = benchmarks_doc.render()  # bench.json's own (small) scale section
    assert "### Search backends by collection size" in alone and "dagrag-embedded" in alone

    def row(size, backend, layer, recall, **extra):
        return {"size": size, "backend": backend, "layer_p50_ms": layer, "layer_p95_ms": layer * 1.5,
                "query_p50_ms": layer / 4, "recall_at_10": recall, "ingest_per_s": 1000.0, "build_s": 1.0,
                "rss_mb": size / 1000, "disk_mb": size / 900, **extra}

    rows = [row(10_000, "qdrant-local", 64.03, 1.0, storage="disk"),
            row(100_000, "qdrant-local", 640.0, 1.0, storage="memory", note="loaded in memory: on disk, ..."),
            {"size": 1_000_000, "backend": "qdrant-local", "skipped": "not run: one query would take ~2500 ms",
             "extrapolated": {"query_p50_ms": 2500.0, "layer_p50_ms": 6400.0, "rss_mb": 3000.0}},
            row(10_000, "edge-hnsw", 2.02, 0.98, ef=32, ef_sweep={"32": {"recall_at_10": 0.98, "layer_p50_ms": 2.02}}),
            row(100_000, "edge-hnsw", 6.5, 0.99, ef=64, ef_sweep={"64": {"recall_at_10": 0.99, "layer_p50_ms": 6.5}}),
            row(1_000_000, "edge-hnsw", 23.4, 0.985, ef=128,
                ef_sweep={"128": {"recall_at_10": 0.985, "layer_p50_ms": 23.4}}),
            row(10_000, "edge-exact", 2.59, 1.0), row(100_000, "edge-exact", 25.0, 1.0),
            row(1_000_000, "edge-exact", 250.0, 1.0)]
    scale = {"rows": rows, "limit": 20, "recall_target": 0.98, "hnsw": {"m": 16, "ef_construct": 100},
             "vectors": {"real_passages": 4709, "questions": 485, "synthetic": "convex mixes"},
             "how": "as the section measures", "plot": "bench-scale.png", "verdict": "(written again from the rows)"}
    (tmp_path / "bench-scale.png").write_bytes(b"png")
    best = scale_bench.best_at_largest(rows)
    (tmp_path / "bench-scale.json").write_text(json.dumps({
        "qdrant_p50_ms": {"10000": 16.0}, "scale_layer_ms": best, "details": {"scale": scale},
        "targets": {"scale_layer_ms": {"value": best, "target": "≤ 50 ms, recall@10 ≥ 0.98, largest size",
                                       "met": True}},
        "config": {"command": "python experiments/bench.py --only scale --scale-sizes 10000,100000,1000000",
                   "date": "2026-01-01", "cpu_count": 2}}), encoding="utf-8")
    page = benchmarks_doc.render()
    assert "Embedded Qdrant at scale (exact search" not in page and "### Search backends by collection size" in page
    assert "| `scale_layer_ms` |" in page and "backend: edge-hnsw" in page
    assert "| 1,000,000 | edge-hnsw (ef 128) | 23.4 | 35.1 | 5.85 | 0.985 |" in page
    assert "| 1,000,000 | qdrant-local | not run (~6400 ms, extrapolated) |" in page
    assert "| 100,000 | qdrant-local, in memory | 640 |" in page
    assert "![Layer p50" in page and "](../experiments/results/bench-scale.png)" not in page  # RESULTS is tmp_path
    assert scale_bench.verdict(rows) in page and "edge-hnsw meets it at every size measured" in page
    assert "qdrant-local meets it at none of the sizes; at 10,000 a layer takes 64.03 ms" in page
    assert "At 1,000,000 passages use edge-hnsw (23.4 ms per layer, recall@10 0.985)." in page
    assert "--only scale --scale-sizes 10000,100000,1000000 --out\nexperiments/results/bench-scale.json" in page
    assert "| `e2e_p50_s` |" in page  # bench.json's other sections stay
