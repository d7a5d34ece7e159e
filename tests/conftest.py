"""Shared fixtures: the real models are loaded once per session, the sample is ingested once."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# Tests describe their settings explicitly; the developer's environment must not leak in. DAGRAG_TEST_*
# variables configure opt-in tests (tests/test_real_llm.py): kept here, out of the environment, where
# Settings would refuse them as unknown settings.
TEST_ENV = {k.upper(): os.environ[k] for k in os.environ if k.upper().startswith("DAGRAG_TEST_")}
for _key in [k for k in os.environ if k.upper().startswith("DAGRAG_")]:
    del os.environ[_key]
# Servers started by tests keep their runs in memory, never in the user's data directory; the test of runs that
# survive a restart names its own file.
os.environ["DAGRAG_SERVE_RUNS_DB"] = "memory"

from dagrag import QueryWorkflow, Settings  # noqa: E402
from dagrag.agents.reranker import RerankerAgent  # noqa: E402
from dagrag.ingest import ingest_nodes, read_nodes  # noqa: E402
from dagrag.stack import build_embed_model, build_reranker  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "data" / "hotpotqa_sample.jsonl"


def sample_records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]


def record_for(question: str) -> dict[str, Any]:
    return next(r for r in sample_records() if r["question"] == question)


@pytest.fixture(scope="session")
def embed_model():
    return build_embed_model(Settings().embed_model)


@pytest.fixture(scope="session")
def reranker() -> RerankerAgent:
    return build_reranker(Settings())


@pytest.fixture(scope="session")
def sample_store_path(tmp_path_factory: pytest.TempPathFactory, embed_model) -> Path:
    """An embedded Qdrant on disk holding the HotpotQA sample."""
    path = tmp_path_factory.mktemp("qdrant-sample")
    settings = Settings(qdrant_path=path, collection="sample")
    ingest_nodes(settings, read_nodes(SAMPLE), embed_model)
    return path


def ingested_workflow(source: Path, store: Path, collection: str, embed_model, reranker
                      ) -> Callable[..., QueryWorkflow]:
    """Ingest `source` (a file or folder) into an embedded Qdrant at `store`; a builder of QueryWorkflows over that
    collection, its keyword arguments Settings overrides."""
    ingest_nodes(Settings(qdrant_path=store, collection=collection), read_nodes(source), embed_model)

    def build(**overrides: Any) -> QueryWorkflow:
        return QueryWorkflow.from_settings(Settings(qdrant_path=store, collection=collection, **overrides),
                                           embed_model=embed_model, reranker=reranker)

    return build


@pytest.fixture(scope="session")
def make_workflow(sample_store_path: Path, embed_model, reranker) -> Callable[..., QueryWorkflow]:
    """A QueryWorkflow over the sample collection; keyword arguments are Settings overrides."""

    def build(llm: Any = None, **overrides: Any) -> QueryWorkflow:
        settings = Settings(qdrant_path=sample_store_path, collection="sample", **overrides)
        return QueryWorkflow.from_settings(settings, llm=llm, embed_model=embed_model, reranker=reranker)

    return build
