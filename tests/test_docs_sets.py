"""Every documentation benchmark set (experiments/all_sets.py) against its corpus: the evidence quotes are where
the questions say, once, and a chunk of that page as dagrag ingests it holds each of them (else the set would score
zero recall for that quote whatever retrieval did, as quotes copied with reStructuredText markup did)."""

from __future__ import annotations

import sys
from collections import Counter, defaultdict

import pytest

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "experiments"))

import all_sets
from evalkit.data import DOCS_TYPES, load_examples, load_own_code
from evalkit.docs import evidence_problems
from evalkit.metrics import quoted_in

from dagrag.ingest import read_nodes

DOCS_SETS = [s for s in all_sets.SETS if s.corpus is not None]


def test_the_held_out_set_is_a_docs_set_run_with_the_others():
    assert all_sets.HELD_OUT in {s.name for s in DOCS_SETS}


@pytest.mark.parametrize("benchmark", DOCS_SETS, ids=lambda s: s.name)
def test_each_quote_is_once_in_its_page_and_in_a_chunk_of_it(benchmark):
    questions = load_examples(benchmark.data)
    assert evidence_problems(questions, benchmark.corpus, unique=True) == []
    chunks: dict[str, list[str]] = defaultdict(list)
    for node in read_nodes(benchmark.corpus):
        chunks[node.metadata["source"]].append(node.text)
    unreachable = [f"{q.id}: {quote[:60]!r}" for q in questions for quote, page in zip(q.evidence, q.documents)
                   if not any(quoted_in(quote, chunk) for chunk in chunks[page])]
    assert unreachable == []


@pytest.mark.parametrize("path", [p for p in all_sets.OWN_CODE if p.exists()], ids=lambda p: p.stem)
def test_each_own_code_question_quotes_its_sets_pages_once(path):
    asked = 0
    for benchmark in DOCS_SETS:
        questions = load_own_code(path, set_name=benchmark.name)
        assert evidence_problems(questions, benchmark.corpus, unique=True) == [], benchmark.name
        asked += len(questions)
    assert asked == len(load_own_code(path)) >= 20  # every question names a docs set


@pytest.mark.parametrize("benchmark", DOCS_SETS, ids=lambda s: s.name)
def test_each_set_has_the_question_kinds_the_benchmark_needs(benchmark):
    questions = load_examples(benchmark.data)
    kinds = Counter(q.type for q in questions)
    assert set(kinds) <= set(DOCS_TYPES) and len({q.id for q in questions}) == len(questions)
    assert len(questions) >= 40
    assert sum(kinds[k] for k in ("two-section", "two-document", "comparison")) * 4 >= len(questions)  # two pieces
    for question in questions:
        if question.type == "two-section":
            assert len(question.evidence) >= 2 and len(set(question.documents)) == 1, question.id
        elif question.type in ("two-document", "comparison"):
            assert len(question.evidence) >= 2, question.id


@pytest.mark.parametrize("benchmark", DOCS_SETS, ids=lambda s: s.name)
def test_each_corpus_is_the_listed_pages_of_a_pinned_sdist_with_its_licence(benchmark):
    manifest = (ROOT / "experiments" / "data" / "corpora" / f"{benchmark.name}.sh").read_text(encoding="utf-8")
    fields = dict(line.split("=", 1) for line in manifest.splitlines() if line[:1].isupper() and "=" in line)
    project = benchmark.corpus.parent
    assert f"{fields['PACKAGE']}=={fields['VERSION']}" in (project / "SOURCE.md").read_text(encoding="utf-8")
    assert (project / fields["LICENSE_FILE"].split()[0]).is_file()
    if "NOTICE_FILE" in fields:  # a notice the licence asks to travel with the pages (Apache-2.0's NOTICE)
        assert (project / fields["NOTICE_FILE"].split()[0]).is_file()
    listed = {line.strip() for line in manifest.split("DOCS=(", 1)[1].split(")", 1)[0].splitlines() if line.strip()}
    assert listed == {str(p.relative_to(benchmark.corpus)) for p in benchmark.corpus.rglob("*") if p.is_file()}
