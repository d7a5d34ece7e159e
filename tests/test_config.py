"""Settings: defaults from the design note, environment names, and errors that name the setting."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dagrag import Settings


def test_design_defaults():
    s = Settings()
    assert (s.planner_enable_dag, s.subquery_max, s.subquery_topk_base, s.subquery_max_iters, s.subquery_topk_step,
            s.attribution_top_n, s.coverage_min_ratio, s.section_boost_weight) == (True, 4, 5, 1, 3, 1, 0.5, 0.2)
    assert s.llm == "none" and not s.uses_llm


def test_environment_names(monkeypatch):
    monkeypatch.setenv("DAGRAG_PLANNER_ENABLE_DAG", "false")
    monkeypatch.setenv("DAGRAG_SUBQUERY_MAX", "3")
    monkeypatch.setenv("DAGRAG_COLLECTION", "wiki")
    monkeypatch.setenv("DAGRAG_QDRANT_URL", "http://qdrant:6333")
    s = Settings()
    assert (s.planner_enable_dag, s.subquery_max, s.collection, s.qdrant_url) == (False, 3, "wiki", "http://qdrant:6333")


@pytest.mark.parametrize(("env", "value", "message"), [
    ("DAGRAG_SUBQUERY_MAX", "0", "subquery_max"),
    ("DAGRAG_COVERAGE_MIN_RATIO", "1.5", "coverage_min_ratio"),
    ("DAGRAG_LLM", "claude:opus", "DAGRAG_LLM='claude:opus'"),
    ("DAGRAG_LLM", "openai", "name the model"),
    ("DAGRAG_LLM", "openai-like:llama", "needs DAGRAG_LLM_BASE_URL"),
    ("DAGRAG_EMBED_MODEL", "local:bge", "bundled model is local:all-MiniLM-L6-v2"),
    ("DAGRAG_RERANKER", "cohere:rerank", "DAGRAG_RERANKER"),
    ("DAGRAG_SUBQUERY_MAXX", "3", "unknown setting.*DAGRAG_SUBQUERY_MAXX"),
])
def test_invalid_settings_fail_with_their_name(monkeypatch, env, value, message):
    monkeypatch.setenv(env, value)
    with pytest.raises(ValidationError, match=message):
        Settings()


def test_unknown_keyword_is_refused():
    with pytest.raises(ValidationError, match="subquery_maxx"):
        Settings(subquery_maxx=3)


@pytest.mark.parametrize(("overrides", "line"), [
    ({"llm": "foo:bar"}, "DAGRAG_LLM='foo:bar': kind must be one of none, openai, openai-like"),
    ({"api_keys": "alice"}, "DAGRAG_API_KEYS entry 1: expected name=KEY"),
    ({"subquery_max": 0}, "DAGRAG_SUBQUERY_MAX=0: input should be greater than or equal to 1"),
])
def test_a_settings_error_is_one_line_that_names_the_variable_once(overrides, line):
    from pydantic import ValidationError

    from dagrag.config import settings_problems

    with pytest.raises(ValidationError) as raised:
        Settings(**overrides)
    printed = settings_problems(raised.value)
    assert printed.startswith(line) and "\n" not in printed and printed.count("DAGRAG_") == 1


@pytest.mark.parametrize(("model", "billions"), [
    ("qwen2.5-coder-1.5b-instruct", 1.5), ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", 1.5), ("llama3.2:3b", 3.0),
    ("Meta-Llama-3.1-70B-Instruct", 70.0), ("Qwen3-30B-A3B", 30.0), ("gpt-4o-mini", None), ("mixtral-8x7b", None),
])
def test_a_models_size_is_read_from_its_name(model, billions):
    from dagrag.config import model_billions

    assert model_billions(model) == billions


def test_verifier_auto_leaves_a_small_models_judgement_to_the_offline_judge():
    from dagrag.config import llm_verifies

    assert not llm_verifies("auto", "qwen2.5-coder-1.5b-instruct")
    assert llm_verifies("auto", "Meta-Llama-3.1-70B-Instruct") and llm_verifies("auto", "gpt-4o-mini")
    assert llm_verifies("llm", "qwen2.5-coder-1.5b-instruct") and not llm_verifies("offline", "gpt-4o")
