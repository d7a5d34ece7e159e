"""README.md stays a user guide: short, with the test command CI runs."""

from __future__ import annotations

from .conftest import ROOT

MAX_README_LINES = 300  # the rest lives in docs/ (generated where it holds numbers) and ARCHITECTURE.md


def test_the_readme_is_a_guide_of_at_most_300_lines_with_the_test_command_ci_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= MAX_README_LINES
    command = ".venv/bin/python -m pytest -q"
    assert command in readme and command in ci
