"""Opt-in: the LLM path against a real model (any OpenAI-compatible server), end to end on the sample collection.

Skipped unless DAGRAG_TEST_LLM_BASE_URL is set; CI keeps the scripted loopback server. With the local model:

    bash scripts/local_llm.sh start      # prints the DAGRAG_* settings to export
    DAGRAG_TEST_LLM_BASE_URL=http://127.0.0.1:8080/v1 .venv/bin/python -m pytest -q tests/test_real_llm.py

A small model is slow (tens of seconds a question on one CPU thread) and weak, so these check what must hold
whatever the model says: the LLM planned (its plan used or repaired, not replaced), every citation names a
source the writer was handed, the LLM judged the answer, and nothing degraded without saying so.
"""

from __future__ import annotations

import pytest

from dagrag import Settings
from dagrag.stack import build_llm

from .conftest import TEST_ENV

BASE_URL = TEST_ENV.get("DAGRAG_TEST_LLM_BASE_URL")
MODEL = TEST_ENV.get("DAGRAG_TEST_LLM_MODEL", "local")
TIMEOUT_S = float(TEST_ENV.get("DAGRAG_TEST_LLM_TIMEOUT_S", "300"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not BASE_URL, reason="set DAGRAG_TEST_LLM_BASE_URL to run against a real LLM server"),
]

QUESTIONS = {
    "comparison": "Were Scott Derrickson and Ed Wood of the same nationality?",
    # Qwen2.5-Coder-1.5B repeats one subquery until the reply is cut off for "What government position was held by
    # the woman who portrayed Corliss Archer ...?" (the planner then falls back, as it should); it plans this one.
    "bridge": 'The director of the romantic comedy "Big Stone Gap" is based in what New York city?',
}


@pytest.mark.parametrize("kind", list(QUESTIONS))
async def test_a_real_llm_plans_writes_and_judges_with_valid_citations(kind, make_workflow):
    llm = build_llm(Settings(llm=f"openai-like:{MODEL}", llm_base_url=BASE_URL, llm_timeout_s=TIMEOUT_S))
    # VERIFIER=auto gives a model this small the offline judge; this test is of the LLM judging.
    workflow = make_workflow(llm=llm, llm_timeout_s=TIMEOUT_S, llm_max_retries=1, verifier="llm")
    result = await workflow.run(query=QUESTIONS[kind])

    assert result.plan.origin.value in ("llm", "repaired"), (result.plan.origin, result.plan.notes)
    assert result.sources and result.answer.strip()
    assert result.concise_answer, f"no 'Answer:' line: {result.answer!r}"
    cited = [n for check in result.verification.sentences for n in check.citations]
    assert cited, f"the answer cites no source: {result.answer!r}"
    assert all(1 <= n <= len(result.sources) for n in cited), (cited, len(result.sources))
    assert result.verification.method == "llm", [d.model_dump() for d in result.degradations]
    answered = {c.agent for c in result.llm_calls.calls if c.ok}
    assert answered >= {"planner", "writer", "verifier"}, [c.model_dump() for c in result.llm_calls.calls]
