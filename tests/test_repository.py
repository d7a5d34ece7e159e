"""What the repository tracks: project content, not a machine's local state (a symlink to a local folder, an index,
a cache). A worktree's `git add -A` once committed `.dagrag`, a symlink to a local index folder."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _git(*args: str) -> list[str]:
    result = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return [line for line in result.stdout.splitlines() if line]


pytestmark = pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                                reason="needs a git checkout of the project")


def test_no_tracked_file_is_a_symlink():
    links = [line.split("\t", 1)[1] for line in _git("ls-files", "-s") if line.startswith("120000 ")]
    assert not links, f"symlinks tracked (local state, not content): {links}"


def test_no_tracked_file_is_one_gitignore_ignores():
    assert not _git("ls-files", "-ci", "--exclude-standard"), "tracked files that .gitignore ignores"
