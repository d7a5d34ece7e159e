"""What a result ran on: the code's commit and the settings that differ from dagrag's defaults."""

from __future__ import annotations

import hashlib
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from dagrag import Settings

ROOT = Path(__file__).resolve().parents[2]
# Where the run's own index lives and what it is called: reported by the harness beside the settings.
NOT_SETTINGS = frozenset({"qdrant_path", "collection"})
# The installed libraries whose numerics decide scores and rankings: the same commit gives other retrieval numbers
# with another onnxruntime or tokenizers (measured: 2Wiki dag joint recall 0.917 on one machine, 1.000 on another,
# same src; Python-Markdown's single path 0.661 against 0.679), so a result says what it ran on.
SCORING_LIBRARIES = ("onnxruntime", "tokenizers", "sentence-transformers", "torch", "numpy", "scipy",
                     "qdrant-client", "nltk", "llama-index-core")


def code_commit() -> str:
    """The repository's short commit, "+uncommitted" when src/ has changes; "unknown" outside a git checkout."""
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        return "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "src"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return done.stdout.strip() + ("+uncommitted" if dirty else "")


def code_version() -> str:
    """What answers are made with: the git tree of src/ at HEAD, and where src/ has uncommitted changes (edits or new
    files) a hash of them ("3f2a9c1+5d41402abc4b"); "unknown" outside a git checkout. A commit that changes only
    results or docs leaves it equal; any edit to src/ changes it."""
    tree = subprocess.run(["git", "rev-parse", "--short", "HEAD:src"], cwd=ROOT, capture_output=True, text=True)
    if tree.returncode != 0:
        return "unknown"
    changed = subprocess.run(["git", "diff", "HEAD", "--", "src"], cwd=ROOT, capture_output=True).stdout
    new = subprocess.run(["git", "ls-files", "--others", "--exclude-standard", "-z", "src"], cwd=ROOT,
                         capture_output=True).stdout
    for name in filter(None, new.split(b"\0")):
        changed += name + b"\0" + (ROOT / name.decode()).read_bytes()
    return tree.stdout.strip() + (f"+{hashlib.sha256(changed).hexdigest()[:12]}" if changed else "")


def library_versions(names: tuple[str, ...] = SCORING_LIBRARIES) -> dict[str, str | None]:
    """Each library's installed version (None when it is not installed)."""
    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {name: installed(name) for name in names}


def changed_settings(settings: Settings) -> dict[str, Any]:
    """The settings a run used that are not dagrag's defaults (secrets left out), as JSON values."""
    dumped = settings.model_dump(mode="json")
    changed: dict[str, Any] = {}
    for name, field in Settings.model_fields.items():
        if name in NOT_SETTINGS or isinstance(getattr(settings, name), SecretStr):
            continue
        default = field.get_default(call_default_factory=True)
        if getattr(settings, name) != default:
            changed[name] = dumped[name]
    return changed
