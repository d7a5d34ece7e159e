"""src/ names no benchmark: neither a benchmark itself nor a page its questions are answered from.

Examples in docstrings and comments are invented, so that the code does not read as tuned to the questions
it is measured on. The gold page titles come from the shared benchmark data (../shared/data, as in
test_rule_planner.py and test_deeper_hops.py); a title counts from two words on (one word, such as "Python"
or "London", is too common to mean a quote) and matches as a whole phrase, case-sensitive, with and without
its qualifier ("Kiss and Tell (1945 film)" and "Kiss and Tell").
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
SHARED = ROOT.parent / "shared" / "data"
# The benchmarks themselves: HotpotQA, MuSiQue and 2WikiMultihopQA in any case, the Hatch docs set as the word.
BENCHMARK_NAMES = re.compile(r"\b(?:(?i:hotpot\w*|musique\w*|2wiki\w*)|Hatch)\b")
_QUALIFIER = re.compile(r"\s*\([^)]*\)\s*$")


def _gold_titles() -> set[str]:
    titles: set[str] = set()
    for path in sorted(SHARED.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            gold = list(record.get("supporting_titles") or [])
            gold += [p["title"] for p in record.get("paragraphs") or [] if p.get("is_supporting")]
            for title in gold:
                for variant in (title, _QUALIFIER.sub("", title)):
                    variant = " ".join(variant.split())
                    if len(variant.split()) >= 2:
                        titles.add(variant)
    return titles


def _hits(pattern: re.Pattern[str]) -> list[str]:
    hits = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for match in pattern.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            hits.append(f"{path.relative_to(ROOT)}:{line}: {match.group(0)!r}")
    return hits


def test_src_names_no_benchmark():
    hits = _hits(BENCHMARK_NAMES)
    assert not hits, "benchmark names in src/ (say 'the benchmark sets: ARCHITECTURE.md'):\n" + "\n".join(hits)


@pytest.mark.skipif(not SHARED.is_dir(), reason="needs ../shared/data (the benchmark data) beside the project")
def test_src_quotes_no_gold_page_title_of_the_benchmark_data():
    titles = _gold_titles()
    assert titles, f"no gold titles read from {SHARED}"
    alternatives = "|".join(re.escape(t) for t in sorted(titles, key=len, reverse=True))
    hits = _hits(re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)"))
    assert not hits, "gold page titles of the benchmark data in src/ (invent an example instead):\n" + "\n".join(hits)
