"""Backend faults and the query deadline: a search or the cross-encoder fails or is slow, the run still ends.

Real embeddings, Qdrant and cross-encoder; the faults are injected by wrapping the real agents.
"""

from __future__ import annotations

import asyncio

from dagrag.agents.reranker import RerankerAgent
from dagrag.agents.searcher import SearcherAgent, SearchRequest
from dagrag.agents.writer import NO_EVIDENCE_ANSWER
from dagrag.core.result import RunLedger

DERRICKSON = "Were Scott Derrickson and Ed Wood of the same nationality?"
HANG_GUARD_S = 120  # only a hang can reach it


class SearcherFailingFor(SearcherAgent):
    """The real searcher, except that any batch holding a request about `bad` raises (a backend fault)."""

    def __init__(self, inner: SearcherAgent, bad: str | None) -> None:
        self.__dict__.update(inner.__dict__)
        self.bad = bad

    async def asearch_layer(self, requests):
        if self.bad is None or any(self.bad in r.text for r in requests):
            raise ConnectionError(f"search backend unavailable for {self.bad or 'everything'}")
        return await super().asearch_layer(requests)


class SlowSearcher(SearcherAgent):
    def __init__(self, inner: SearcherAgent) -> None:
        self.__dict__.update(inner.__dict__)

    async def asearch_layer(self, requests):
        await asyncio.sleep(HANG_GUARD_S)


class BrokenReranker(RerankerAgent):
    def __init__(self, inner: RerankerAgent) -> None:
        self.__dict__.update(inner.__dict__)
        self.calls = 0

    async def ascore(self, pairs):
        self.calls += 1
        raise RuntimeError("onnxruntime session lost")


class SlowReranker(RerankerAgent):
    def __init__(self, inner: RerankerAgent) -> None:
        self.__dict__.update(inner.__dict__)

    async def ascore(self, pairs):
        await asyncio.sleep(HANG_GUARD_S)


async def run(workflow, question: str = DERRICKSON):
    return await asyncio.wait_for(workflow.run(query=question), timeout=HANG_GUARD_S)


# --- search ---------------------------------------------------------------------------------------

async def test_one_failing_subquery_is_reported_failed_and_the_others_complete(make_workflow):
    workflow = make_workflow()
    workflow.searcher = SearcherFailingFor(workflow.searcher, "Ed Wood")
    result = await run(workflow)

    reports = {r.text: r for r in result.subqueries}
    failed, covered = reports["Ed Wood nationality"], reports["Scott Derrickson nationality"]
    assert failed.status == "failed" and "search backend unavailable for Ed Wood" in failed.error
    assert failed.kept_node_ids == [] and failed.best_score is None
    assert covered.status == "covered" and covered.kept_node_ids
    # The failed subqueries (the side and the question itself, both naming Ed Wood) contribute nothing; the other
    # one's evidence is all there.
    assert reports[DERRICKSON].status == "failed"
    assert result.sources and {s.subquery_id for s in result.sources} == {covered.id}
    assert result.sources[0].metadata["title"] == "Scott Derrickson"
    features = result.retrieval_confidence_features
    assert (features["subquery_count"], features["covered_count"], features["failed_count"]) == (3, 1, 2)
    assert abs(features["coverage_ratio"] - 1 / 3) < 1e-3 and result.retrieval_confidence != "high"
    assert result.answer and not result.partial


async def test_when_every_search_fails_the_answer_says_nothing_was_found(make_workflow):
    workflow = make_workflow()
    workflow.searcher = SearcherFailingFor(workflow.searcher, None)
    result = await run(workflow)
    assert [r.status for r in result.subqueries] == ["failed", "failed", "failed"]
    assert result.sources == [] and result.answer == NO_EVIDENCE_ANSWER
    assert result.abstained and result.abstain_reason == "no passage was found"
    assert result.abstained and result.abstain_reason == "no passage was found"
    assert result.retrieval_confidence == "low" and result.retrieval_confidence_features["coverage_ratio"] == 0.0


# --- reranker ---------------------------------------------------------------------------------------

async def test_a_failing_cross_encoder_keeps_the_dense_order_and_every_agent_says_so(make_workflow):
    workflow = make_workflow()
    broken = BrokenReranker(workflow.reranker)
    workflow.reranker = workflow.writer.reranker = workflow.verifier.reranker = broken
    result = await run(workflow)

    assert broken.calls >= 3  # search, the abstain check and the writer each tried it
    # The lead sentences are copied from their sources: the verifier settles them by words, without the model.
    assert [(d.agent, d.fallback) for d in result.degradations] == [
        ("reranker", "dense order kept"), ("answerability", "no abstain check"),
        ("writer", "lead sentence of each source")]
    assert not result.abstained
    assert result.verification.support_rate == 1.0
    # A sentence the words do not settle needs the model; without it the verifier judges by words and says so.
    ledger = RunLedger()
    paraphrase = "Derrickson is a filmmaker from the States [1]."
    verdict = await workflow.verifier.averify(paraphrase, result.sources, ledger)
    assert [(d.agent, d.fallback) for d in ledger.degradations] == [("verifier", "lexical verifier")]
    assert verdict.method == "lexical" and not verdict.sentences[0].supported
    assert all("onnxruntime session lost" in d.reason for d in result.degradations)
    # Dense order kept: each subquery's best document is the one the dense search ranked first.
    for sq, report in zip(result.plan.subqueries, result.subqueries):
        [dense] = await workflow.searcher.asearch_layer([SearchRequest(
            text=sq.text, top_k=5, must_include=tuple(sq.hints.must_include), sections=tuple(sq.hints.sections))])
        assert report.kept_node_ids[0] == dense.candidates[0].node.node_id
    assert {s.metadata["title"] for s in result.sources} >= {"Scott Derrickson", "Ed Wood"}
    assert result.answer.endswith("]") and result.verification.method == "lexical+cross-encoder"
    assert result.verification.support_rate == 1.0  # lead sentences are, word for word, in what they cite


# --- the query deadline -------------------------------------------------------------------------------

async def test_a_reranker_slower_than_the_deadline_ends_with_a_partial_result_in_dense_order(make_workflow):
    workflow = make_workflow(query_timeout_s=3)
    workflow.reranker = workflow.writer.reranker = workflow.verifier.reranker = SlowReranker(workflow.reranker)
    result = await run(workflow)

    assert result.partial and "rerank" in result.partial_reason
    assert ("reranker", "dense order kept") in [(d.agent, d.fallback) for d in result.degradations]
    assert {s.metadata["title"] for s in result.sources} >= {"Scott Derrickson", "Ed Wood"}  # what was retrieved
    assert result.answer != NO_EVIDENCE_ANSWER and result.verification.method.startswith("skipped")


async def test_a_search_slower_than_the_deadline_ends_with_a_partial_result(make_workflow):
    workflow = make_workflow(query_timeout_s=1)
    workflow.searcher = SlowSearcher(workflow.searcher)
    result = await run(workflow)

    assert result.partial and "search" in result.partial_reason
    assert [r.status for r in result.subqueries] == ["skipped", "skipped", "skipped"]
    assert result.sources == [] and result.answer == NO_EVIDENCE_ANSWER
    assert result.abstained and result.abstain_reason == "no passage was found"
    assert result.retrieval_confidence == "low"


async def test_a_deadline_that_passes_while_planning_still_returns_a_result(make_workflow):
    result = await run(make_workflow(query_timeout_s=0.0001))
    assert result.partial and result.partial_reason and result.plan.subqueries
    assert result.answer and result.question == DERRICKSON
