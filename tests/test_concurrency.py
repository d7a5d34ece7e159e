"""50 concurrent runs on ONE QueryWorkflow instance: every result belongs to its own question.

Each question is first run alone, then all 50 run at once on the same instance (real rule planner,
embeddings, Qdrant and cross-encoder). The writer and verifier are scripted LLMs whose replies are built
from the request they receive, so a prompt that carried another run's question or sources would show in
the answer and in the token counts.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from dagrag.llm import LLMClient
from dagrag.work_flows.events import SubqueryDone
from dagrag.work_flows.progress import HopAdded, PlanChosen

from .conftest import sample_records
from .scripted_llm import ScriptedLLM

HANG_GUARD_S = 600  # only a hang can reach it


def fifty_questions() -> list[str]:
    records = sample_records()
    titles = sorted({title for r in records for title in r["supporting_titles"]})
    questions = [" ".join(r["question"].split()) for r in records] + [f"What is known about {t}?" for t in titles]
    assert len(set(questions[:50])) == 50
    return questions[:50]


def echo_writer(user: str) -> str:
    """Answers with the question it was asked and the titles of the sources it was given."""
    question = re.search(r"^Question: (.*)$", user, re.MULTILINE).group(1)
    titles = re.findall(r'<source id="(\d+)" title="([^"]*)">', user)
    return f"{question} [1]. " + " ".join(f"Source {n} is {title} [{n}]." for n, title in titles)


def echo_verifier(user: str) -> str:
    """Judges every sentence supported, except, for "Which/Who ..." questions, those citing source 3 or
    later: those runs go back to search again (backtracking) while the others run."""
    sentences = re.findall(r"^(\d+)\. (.*?)\[(\d+)\]", user, re.MULTILINE)
    backtrack = bool(sentences) and sentences[0][1].startswith(("Which", "Who"))
    return json.dumps({"sentences": [{"index": int(i), "supported": not (backtrack and int(n) >= 3), "source": int(n)}
                                     for i, _, n in sentences]})


def forget_model_outputs(workflow) -> None:
    """Empty the agents' score and embedding caches, so a run cannot be answered from another's work."""
    for cache_owner, name in ((workflow.reranker, "cache"), (workflow.searcher, "query_cache")):
        cache = getattr(cache_owner, name, None)
        if cache is not None:
            cache.clear()


def fingerprint(result) -> dict:
    """Everything about a result that must not depend on what else was running (timings aside)."""
    return {
        "question": result.question, "answer": result.answer, "path": result.path,
        "plan": result.plan.model_dump(),
        "sources": [(s.node_id, s.subquery_id, s.rank_in_subquery) for s in result.sources],
        "subqueries": [(r.id, r.text, r.status, r.kept_node_ids) for r in result.subqueries],
        "confidence": (result.retrieval_confidence, result.retrieval_confidence_features),
        "verification": result.verification.model_dump(),
        "llm_calls": [(c.agent, c.ok, c.prompt_tokens, c.completion_tokens) for c in result.llm_calls.calls],
        "degradations": result.degradations, "partial": result.partial,
    }


@pytest.mark.slow
async def test_fifty_concurrent_runs_on_one_instance_each_get_their_own_result(make_workflow):
    # isolation is the point, not depth: fewer pairs to score, and every run writes (no abstaining)
    workflow = make_workflow(subquery_topk_base=2, abstain_below=0.0)
    workflow.writer.client = workflow.verifier.client = LLMClient(ScriptedLLM(
        replies={"writer": echo_writer, "verifier": echo_verifier}))
    questions = fifty_questions()

    async def streamed(question: str):
        handler = workflow.run(query=question)
        events = [event async for event in handler.stream_events()]
        return events, await handler

    # Each question alone first, then all 50 at once. Model outputs can shift in the last digits with the
    # batch they are computed in (padding; INT8 dynamic quantization when RERANK_BATCH_SIZE > 1), which
    # could flip near-ties, so the concurrent runs read the scores and query embeddings the runs alone
    # cached; everything else (Qdrant searches, plans, hops, critic, backtracking, writer and verifier
    # calls, the shared caches themselves) runs for real, side by side.
    forget_model_outputs(workflow)
    alone = {q: await asyncio.wait_for(workflow.run(query=q), timeout=HANG_GUARD_S) for q in questions}
    together = await asyncio.wait_for(asyncio.gather(*(streamed(q) for q in questions)), timeout=HANG_GUARD_S)

    for question, (events, result) in zip(questions, together):
        solo = alone[question]
        assert result.question == question and result.answer.startswith(f"{question} [1].")
        assert fingerprint(result) == fingerprint(solo)
        assert result.sources and set(result.timings) == set(solo.timings)
        # The progress stream of a run carries its own plan and subqueries only: the plan chosen, then each
        # deeper hop as it joined the plan.
        [ready] = [e for e in events if isinstance(e, PlanChosen)]
        hops = [e for e in events if isinstance(e, HopAdded)]
        assert ready.question == question
        assert (hops[-1].layers if hops else ready.layers) == result.plan.layers
        streamed_texts = [sq.text for sq in ready.subqueries] + [e.subquery.text for e in hops]
        assert streamed_texts == [sq.text for sq in result.plan.subqueries]
        done = [e for e in events if isinstance(e, SubqueryDone)]
        assert {e.subquery_id for e in done} == {sq.id for sq in result.plan.subqueries}
    # Some runs went back to search again (a second writer call), concurrently with the others.
    assert any(len(r.llm_calls.calls) > 2 for _, r in together)
    # Different questions really did get different evidence (the comparison above is not vacuous).
    assert len({tuple(s.node_id for s in r.sources) for _, r in together}) >= 45
