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
                    "## Rerank settings", "## With a real local LLM"):
        assert section not in page


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
