"""scripts/config_doc.py: docs/configuration.md is written from dagrag.config.Settings, so it cannot drift."""

from __future__ import annotations

import sys
from pathlib import Path

from dagrag.config import Settings

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))

import config_doc


def test_the_committed_configuration_page_is_the_one_the_settings_give():
    assert config_doc.DOC.read_text(encoding="utf-8") == config_doc.render(), (
        "docs/configuration.md differs from dagrag.config.Settings: run .venv/bin/python scripts/config_doc.py")


def test_every_setting_is_on_the_page_with_its_default():
    page = config_doc.render()
    for name in Settings.model_fields:
        assert f"| `DAGRAG_{name.upper()}` |" in page
    assert "| `DAGRAG_CONTEXT_BUDGET` | 4 | ≥ 1, ≤ 100 |" in page
    assert "| `DAGRAG_WRITER_MODE` | `direct` | `direct`, `aggregate` |" in page


def test_the_page_is_the_same_on_every_machine():
    page = config_doc.render()
    assert str(Path.home()) not in page  # defaults computed from this machine are described, not printed


def test_the_scripts_own_meanings_are_only_for_settings_that_exist():
    assert set(config_doc.MEANINGS) <= set(Settings.model_fields)
    assert set(config_doc.FACTORY_DEFAULTS) <= set(Settings.model_fields)
