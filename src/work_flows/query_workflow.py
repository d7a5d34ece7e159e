"""QueryWorkflow: plan -> search the DAG layer by layer -> write -> verify.

    QueryStarted --plan--> PlanReady --schedule--> LayerQueued --search_layer--> LayerSearched
                                 ^------------------ schedule <------------------------'
                           schedule (no layer left) --> EvidenceGathered --write--> AnswerDrafted
                           --verify--> StopEvent(result=QueryResult)

Streamed for progress: PlanReady, LayerStarted, SubqueryDone, LayerSearched, AnswerDrafted, VerificationDone.
Every layer's subqueries are searched as one batch and reranked as one batch; per-run state travels
in the events (`QueryRun`), so one workflow instance serves many concurrent runs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from llama_index.core.schema import MetadataMode, NodeWithScore
from workflows import Context, Workflow, step
from workflows.events import StopEvent

from ..agents.aggregator import AggregatorAgent
from ..agents.hyde import HydeAgent
from ..agents.llm_calls import describe_error
from ..agents.planner import QueryPlannerAgent
from ..agents.reranker import RerankerAgent
from ..agents.resolver import ReferenceResolverAgent
from ..agents.searcher import SearcherAgent, SearchHits, SearchRequest
from ..agents.verifier import VerifierAgent
from ..agents.writer import WriterAgent
from ..config import Settings
from .bridge import bridge_queries
from .events import (
    AnswerDrafted,
    EvidenceGathered,
    LayerAccepted,
    LayerQueued,
    LayerSearched,
    LayerStarted,
    PlanReady,
    QueryRun,
    QueryStarted,
    SubqueryDone,
    VerificationDone,
)
from .evidence import confidence, select_sources
from .inputs import check_history, check_question
from .plan import PARENT_REFERENCE, SubQuery, resolve_references
from .result import LLMUsage, QueryResult, RunLedger, Source, SubqueryReport, Verification
from .variants import PooledCandidate, Variant, pool_candidates

if TYPE_CHECKING:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.llms import LLM
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    from ..agents.reranker import PairScorer


T = TypeVar("T")

# The workflow's own timeout is only a backstop: the run deadline (QUERY_TIMEOUT_S) ends a query with a
# partial result first, and what is left to do after it (no-model answer) is quick.
BACKSTOP_GRACE_S = 30.0


async def before_deadline(deadline: float, work: Awaitable[T]) -> T | None:
    """`work`'s result, or None if the deadline passes first (its own timeouts still raise)."""
    left = deadline - time.perf_counter()
    if left <= 0:
        if asyncio.iscoroutine(work):
            work.close()
        return None
    try:
        return await asyncio.wait_for(work, timeout=left)
    except TimeoutError:
        if deadline - time.perf_counter() > 0:
            raise
        return None


def passage_text(hit: NodeWithScore) -> str:
    """What the reranker reads: the passage with its title."""
    return hit.node.get_content(metadata_mode=MetadataMode.LLM)


class QueryWorkflow(Workflow):
    def __init__(
        self,
        *,
        planner: QueryPlannerAgent,
        searcher: SearcherAgent,
        reranker: RerankerAgent,
        writer: WriterAgent,
        verifier: VerifierAgent,
        settings: Settings,
        resolver: ReferenceResolverAgent | None = None,
        hyde: HydeAgent | None = None,
        aggregator: AggregatorAgent | None = None,
        **workflow_kwargs: Any,
    ) -> None:
        workflow_kwargs.setdefault("timeout", settings.query_timeout_s + BACKSTOP_GRACE_S)
        super().__init__(**workflow_kwargs)
        self.planner = planner
        self.searcher = searcher
        self.reranker = reranker
        self.writer = writer
        self.verifier = verifier
        self.settings = settings
        self.resolver = resolver
        self.hyde = hyde
        self.aggregator = aggregator

    @classmethod
    def from_settings(
        cls,
        settings: Settings | None = None,
        *,
        llm: LLM | None = None,
        embed_model: BaseEmbedding | None = None,
        reranker: RerankerAgent | PairScorer | None = None,
        vector_store: QdrantVectorStore | None = None,
        **workflow_kwargs: Any,
    ) -> QueryWorkflow:
        """The default stack from Settings; any part can be passed in instead."""
        from ..stack import build_stack

        settings = settings or Settings()
        stack = build_stack(settings, llm=llm, embed_model=embed_model, reranker=reranker,
                            vector_store=vector_store)
        llm_options = {"llm_timeout_s": settings.llm_timeout_s, "json_mode": settings.llm_json_mode}
        return cls(
            planner=QueryPlannerAgent(stack.llm, subquery_max=settings.subquery_max,
                                      enable_dag=settings.planner_enable_dag, bridge=settings.planner_bridge,
                                      llm_timeout_s=settings.llm_timeout_s, json_mode=settings.llm_json_mode),
            searcher=SearcherAgent(stack.vector_store, stack.embed_model,
                                   dense_overfetch=settings.dense_overfetch,
                                   must_include_boost=settings.must_include_boost,
                                   section_boost_weight=settings.section_boost_weight,
                                   hybrid=settings.hybrid and getattr(stack.vector_store, "enable_hybrid", False)),
            reranker=stack.reranker,
            writer=WriterAgent(stack.reranker, stack.llm, max_sentences=settings.writer_max_sentences,
                               llm_timeout_s=settings.llm_timeout_s),
            verifier=VerifierAgent(stack.reranker, stack.llm, min_overlap=settings.verify_min_overlap,
                                   min_score=settings.verify_min_score, llm_timeout_s=settings.llm_timeout_s,
                                   json_mode=settings.llm_json_mode),
            settings=settings,
            resolver=ReferenceResolverAgent(stack.llm, **llm_options)
            if stack.llm is not None and settings.resolve_with_llm else None,
            hyde=HydeAgent(stack.llm, **llm_options) if stack.llm is not None and settings.subquery_hyde else None,
            aggregator=AggregatorAgent(stack.llm, max_sentences=settings.writer_max_sentences, **llm_options)
            if stack.llm is not None and settings.writer_mode == "aggregate" else None,
            **workflow_kwargs,
        )

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """`await workflow.run(query=..., history=None, plan=None)` -> QueryResult.

        `plan` (a Plan) skips the planner: it is validated and repaired like an LLM's, then executed.
        Bad input raises here, at once.
        """
        if "query" in kwargs:
            kwargs["query"] = check_question(kwargs["query"], self.settings.max_question_chars)
            kwargs["history"] = check_history(kwargs.get("history"), self.settings.max_question_chars)
        return super().run(*args, **kwargs)

    def _get_steps(self) -> dict[str, Any]:
        # The runtime looks the steps up (inspect.getmembers) several times per step it runs: ~1 ms a query.
        # They change only when a step is added to the class, so they are found once per class version.
        version = type(self)._step_functions_version
        cached = self.__dict__.get("_steps_by_version")
        if cached is None or cached[0] != version:
            cached = self.__dict__["_steps_by_version"] = (version, super()._get_steps())
        return dict(cached[1])

    # --- the pipeline ----------------------------------------------------------------------------

    @step
    async def plan(self, ctx: Context, ev: QueryStarted) -> PlanReady:
        started = time.perf_counter()
        deadline = started + self.settings.query_timeout_s
        question = check_question(ev.query, self.settings.max_question_chars)
        ledger = RunLedger()
        plan = await before_deadline(deadline, self.planner.aplan(question, ev.history, ledger, given=ev.plan))
        if plan is None:
            ledger.degrade("planner", "query deadline passed", "rule-based planner")
            plan = self.planner.fallback_plan(question, ev.history, "the query deadline passed while planning")
        run = QueryRun(question=question, plan=plan, ledger=ledger, started_at=started, deadline=deadline)
        run.out_of_time("planning")
        run.path = "dag" if self.settings.planner_enable_dag and len(run.plan.subqueries) > 1 else "single"
        run.add_time("plan_s", time.perf_counter() - started)
        ready = PlanReady(run=run)
        ctx.write_event_to_stream(ready)
        return ready

    @step
    async def schedule(self, ev: PlanReady | LayerAccepted) -> LayerQueued | EvidenceGathered:
        next_layer = ev.layer_index + 1 if isinstance(ev, LayerAccepted) else 0
        if ev.run.plan.requires_retrieval and next_layer < len(ev.run.plan.layers):
            return LayerQueued(run=ev.run, layer_index=next_layer)
        sources = select_sources(ev.run.plan, ev.run.ranked, per_subquery=self._kept_per_subquery(ev.run),
                                 budget=self.settings.context_budget)
        return EvidenceGathered(run=ev.run, sources=sources)

    @step
    async def search_layer(self, ctx: Context, ev: LayerQueued) -> LayerSearched:
        run = ev.run
        by_id = {sq.id: sq for sq in run.plan.subqueries}
        subqueries = [by_id[i] for i in (ev.retry_ids or run.plan.layers[ev.layer_index])]
        ctx.write_event_to_stream(LayerStarted(layer_index=ev.layer_index, subquery_ids=[s.id for s in subqueries]))
        started = time.perf_counter()
        if not ev.retry_ids:
            await self._prepare_layer(run, subqueries)
        results = await self._search_and_rerank(run, subqueries, ev.layer_index)
        run.add_time(f"layer_{ev.layer_index}_s", time.perf_counter() - started)
        for sq in subqueries:
            done = self._record(run, sq, None if results is None else results[sq.id], retry=bool(ev.retry_ids))
            if done is not None:
                ctx.write_event_to_stream(done)
        searched = LayerSearched(run=run, layer_index=ev.layer_index)
        ctx.write_event_to_stream(searched)
        return searched

    @step
    async def critique(self, ev: LayerSearched) -> LayerQueued | LayerAccepted:
        """Send weak, uncovered or failed subqueries of the layer back for a wider search (SUBQUERY_MAX_ITERS times)."""
        run = ev.run
        retry = [sq_id for sq_id in run.plan.layers[ev.layer_index] if self._needs_retry(run, sq_id)]
        if retry and not run.out_of_time("the critic"):
            return LayerQueued(run=run, layer_index=ev.layer_index, retry_ids=retry)
        return LayerAccepted(run=run, layer_index=ev.layer_index)

    @step
    async def write(self, ctx: Context, ev: EvidenceGathered) -> AnswerDrafted:
        started = time.perf_counter()
        run = ev.run
        answer = None if run.out_of_time("writing") else await before_deadline(
            run.deadline, self._write(run, ev.sources))
        if answer is None:
            run.out_of_time("writing")
            answer = self.writer.lead_sentences(ev.sources, self.settings.writer_max_sentences)
        ev.run.add_time("write_s", time.perf_counter() - started)
        drafted = AnswerDrafted(run=ev.run, sources=ev.sources, answer=answer)
        ctx.write_event_to_stream(drafted)
        return drafted

    @step
    async def verify(self, ctx: Context, ev: AnswerDrafted) -> StopEvent | LayerQueued:
        run = ev.run
        started = time.perf_counter()
        verification = None if run.out_of_time("verification") else await before_deadline(
            run.deadline, self.verifier.averify(ev.answer, ev.sources, run.ledger))
        if verification is None:
            run.out_of_time("verification")
            verification = Verification(method="skipped: query deadline passed")
        run.add_time("verify_s", time.perf_counter() - started)
        ctx.write_event_to_stream(VerificationDone(verification=verification))
        backtrack = self._backtrack_targets(run, ev.sources, verification)
        if backtrack:  # search the subqueries behind unsupported sentences again, then write once more
            run.backtracked = backtrack
            return LayerQueued(run=run, layer_index=len(run.plan.layers) - 1, retry_ids=backtrack, backtrack=True)
        run.add_time("total_s", time.perf_counter() - run.started_at)
        return StopEvent(result=self._result(run, ev.answer, ev.sources, verification))

    # --- helpers -----------------------------------------------------------------------------------

    async def _prepare_layer(self, run: QueryRun, subqueries: list[SubQuery]) -> None:
        """LLM help before a layer's first search: `{sN}` rewrites from the parents' findings, then HyDE passages."""
        dependent = [sq for sq in subqueries if PARENT_REFERENCE.search(sq.text)]
        if self.resolver is not None and dependent:
            by_id = {sq.id: sq for sq in run.plan.subqueries}
            findings = {parent: (by_id[parent].text, passage_text(run.ranked[parent][0]))
                        for sq in dependent for parent in sq.parents if run.ranked.get(parent)}
            if findings:
                run.rewritten.update(await self.resolver.aresolve(
                    {sq.id: sq.text for sq in dependent}, findings, run.ledger))
        if self.hyde is not None:
            searchable = [sq.model_copy(update={"text": run.rewritten.get(sq.id, sq.text)}) for sq in subqueries
                          if sq.id in run.rewritten or not PARENT_REFERENCE.search(sq.text)]
            run.hyde.update(await self.hyde.apassages(searchable, run.ledger))

    async def _write(self, run: QueryRun, sources: list[Source]) -> str:
        if self.aggregator is not None and sources:
            try:
                return await self.aggregator.awrite(run.plan.query, run.plan, sources, run.ledger)
            except Exception as error:
                run.ledger.degrade("aggregator", describe_error(error), "single-pass writer")
        return await self.writer.awrite(run.plan.query, run.plan, sources, run.ledger)

    def _backtrack_targets(self, run: QueryRun, sources: list[Source], verification: Verification) -> list[str]:
        """The subqueries whose sources the unsupported sentences cite (once per run, if time allows)."""
        if not self.settings.verify_backtrack or run.backtracked or run.time_left() <= 0:
            return []
        cited = {sq_id for check in verification.sentences if not check.supported
                 for n in check.citations if 1 <= n <= len(sources) for sq_id in sources[n - 1].subquery_ids}
        return [sq.id for sq in run.plan.subqueries if sq.id in cited]

    def _kept_per_subquery(self, run: QueryRun) -> int:
        """Attribution keeps the top N per subquery; the single-query path keeps the whole budget."""
        return self.settings.attribution_top_n if run.path == "dag" else self.settings.context_budget

    def _variants(self, run: QueryRun, sq: SubQuery, attempt: int) -> list[Variant]:
        """The searches a subquery runs: one, or one per candidate bridge entity when it references a parent.

        A retry (attempt > 1) widens: top_k grows by SUBQUERY_TOPK_STEP, the text gains the hints'
        synonyms and must_include terms, and a bridge tries the entities of one more parent document.
        """
        widen = self.settings.subquery_topk_step * (attempt - 1)
        text = run.rewritten.get(sq.id, sq.text)
        request = SearchRequest(
            text=text, top_k=(sq.hints.top_k or self.settings.subquery_topk_base) + widen,
            hyde=run.hyde.get(sq.id) or (run.plan.hyde_document if run.path == "single" else None),
            must_include=tuple(sq.hints.must_include), sections=tuple(sq.hints.sections))
        if attempt > 1:
            extra = [t for t in [*sq.hints.synonyms, *sq.hints.must_include] if t.lower() not in text.lower()]
            request = replace(request, text=" ".join([text, *extra]))
        references = PARENT_REFERENCE.findall(text)
        if not references:
            return [Variant(sq.id, request)]
        found = {parent: hits for parent, hits in run.ranked.items() if hits}
        titles = {parent: str(hits[0].node.metadata.get("title", "")) for parent, hits in found.items()}
        bridge_parent = next((r for r in references if r in found), None)
        if bridge_parent is None:  # no parent found anything: search the words around the references
            text = " ".join(resolve_references(request.text, {r: "" for r in references}).split())
            return [Variant(sq.id, replace(request, text=text or run.plan.query))]
        child = resolve_references(request.text, {p: t for p, t in titles.items() if p != bridge_parent})
        variants: list[Variant] = []
        for parent_hit in found[bridge_parent][:attempt]:
            for query in bridge_queries(child, str(parent_hit.node.metadata.get("title", "")),
                                        parent_hit.node.get_content(), run.plan.query,
                                        self.settings.bridge_max_entities):
                if all(v.request.text != query.text for v in variants):
                    variants.append(Variant(sq.id, replace(request, text=query.text,
                                                           top_k=self.settings.bridge_rerank_top + widen),
                                            entity=query.entity))
        fallback = " ".join(resolve_references(child, {bridge_parent: titles[bridge_parent]}).split())
        return variants or [Variant(sq.id, replace(request, text=fallback))]

    @staticmethod
    def _layer_of(run: QueryRun, sq_id: str) -> int:
        return next(i for i, layer in enumerate(run.plan.layers) if sq_id in layer)

    def _pool_size(self, run: QueryRun, sq: SubQuery) -> int:
        widen = self.settings.subquery_topk_step * run.attempts.get(sq.id, 0)
        if PARENT_REFERENCE.search(sq.text) and sq.id not in run.rewritten:
            return self.settings.bridge_rerank_top + widen
        return (sq.hints.top_k or self.settings.subquery_topk_base) + widen

    def _parents_kept(self, run: QueryRun, sq: SubQuery) -> frozenset[str]:
        """A hop's evidence must be new: the documents its parents keep are not its candidates."""
        return frozenset(node_id for parent in sq.parents if parent in run.reports
                         for node_id in run.reports[parent].kept_node_ids)

    def _needs_retry(self, run: QueryRun, sq_id: str) -> bool:
        report = run.reports.get(sq_id)
        if report is None or run.attempts.get(sq_id, 0) > self.settings.subquery_max_iters:
            return False
        return report.status in ("failed", "uncovered") or (report.best_score or 0.0) < self.settings.critic_min_score

    async def _search_and_rerank(self, run: QueryRun, subqueries: list[SubQuery], layer_index: int
                                 ) -> dict[str, list[SearchHits | BaseException]] | None:
        """Every variant of every subquery in one search batch, then one rerank call; None if out of time."""
        started = time.perf_counter()
        variants = {sq.id: self._variants(run, sq, attempt=run.attempts.get(sq.id, 0) + 1) for sq in subqueries}
        flat = [v for sq_variants in variants.values() for v in sq_variants]
        hits = None if run.out_of_time(f"layer {layer_index}") else await before_deadline(
            run.deadline, self._search(flat))
        searched = time.perf_counter()
        run.add_time("search_s", searched - started)
        if hits is None:
            run.out_of_time(f"the search of layer {layer_index}")
            return None
        results: dict[str, list[SearchHits | BaseException]] = {sq.id: [] for sq in subqueries}
        for variant, result in zip(flat, hits):
            results[variant.subquery_id].append(result)
        await self._rerank(run, {
            sq.id: pool_candidates(variants[sq.id], results[sq.id], exclude_node_ids=self._parents_kept(run, sq),
                                   keep=self._pool_size(run, sq), title_boost=self.settings.bridge_title_boost)
            for sq in subqueries})
        run.add_time("rerank_s", time.perf_counter() - searched)
        return results

    def _record(self, run: QueryRun, sq: SubQuery, results: list[SearchHits | BaseException] | None, *,
                retry: bool) -> SubqueryDone | None:
        """The subquery's report after this search; a failed retry keeps what the earlier try found."""
        run.attempts[sq.id] = run.attempts.get(sq.id, 0) + 1
        searched_ok = results is not None and any(isinstance(h, SearchHits) for h in results)
        if retry and not searched_ok and sq.id in run.reports:
            run.reports[sq.id].attempts = run.attempts[sq.id]
            return None
        outcome = None if results is None else (SearchHits() if searched_ok else results[0])
        report = run.reports[sq.id] = self._report(run, sq, self._layer_of(run, sq.id), outcome)
        best = run.ranked.get(sq.id, [])
        return SubqueryDone(subquery_id=sq.id, status=report.status, best_score=report.best_score,
                            best_title=str(best[0].node.metadata.get("title", "")) if best else None)

    async def _search(self, variants: list[Variant]) -> list[SearchHits | Exception]:
        requests = [v.request for v in variants]
        try:
            return list(await self.searcher.asearch_layer(requests))
        except Exception:
            # The batch failed: search one by one, so one bad subquery cannot sink the others.
            single = await asyncio.gather(*(self.searcher.asearch_layer([r]) for r in requests),
                                          return_exceptions=True)
            return [result if isinstance(result, BaseException) else result[0] for result in single]

    async def _rerank(self, run: QueryRun, pools: dict[str, list[PooledCandidate]]) -> None:
        """One cross-encoder call over every new (query, candidate) pair of the layer, merged into run.ranked."""
        fresh: list[tuple[str, PooledCandidate]] = []
        for sq_id, pool in pools.items():
            seen = {hit.node.node_id for hit in run.ranked.get(sq_id, [])}
            fresh.extend((sq_id, c) for c in pool if c.hit.node.node_id not in seen)
        dense = [c.priority for _, c in fresh]
        try:
            scores = await before_deadline(run.deadline, self.reranker.ascore(
                [(c.variant.request.text, passage_text(c.hit)) for _, c in fresh]))
        except Exception as error:
            run.ledger.degrade("reranker", f"{type(error).__name__}: {error}", "dense order kept")
            scores = dense
        if scores is None:
            run.out_of_time("reranking")
            run.ledger.degrade("reranker", "query deadline passed", "dense order kept")
            scores = dense
        query_of: dict[tuple[str, str], str] = {}
        for sq_id in pools:
            run.ranked.setdefault(sq_id, [])
        for (sq_id, candidate), score in zip(fresh, scores):
            run.ranked[sq_id].append(NodeWithScore(node=candidate.hit.node, score=score))
            query_of[(sq_id, candidate.hit.node.node_id)] = candidate.variant.request.text
        for sq_id in pools:
            ranked = run.ranked[sq_id]
            ranked.sort(key=lambda h: h.score or 0.0, reverse=True)
            if ranked and (sq_id, ranked[0].node.node_id) in query_of:
                run.searched_as[sq_id] = query_of[(sq_id, ranked[0].node.node_id)]

    def _report(self, run: QueryRun, sq: SubQuery, layer: int, hits: SearchHits | BaseException | None
                ) -> SubqueryReport:
        attempts = run.attempts.get(sq.id, 1)
        if hits is None:
            return SubqueryReport(id=sq.id, text=sq.text, layer=layer, status="skipped", attempts=attempts,
                                  error=run.partial_reason or "not searched")
        if not isinstance(hits, SearchHits):
            return SubqueryReport(id=sq.id, text=sq.text, layer=layer, status="failed", attempts=attempts,
                                  error=f"{type(hits).__name__}: {hits}"[:500])
        ranked = run.ranked.get(sq.id, [])
        best = float(ranked[0].score or 0.0) if ranked else None
        covered = best is not None and best >= self.settings.coverage_min_score
        keep = self._kept_per_subquery(run)
        return SubqueryReport(
            id=sq.id, text=sq.text, layer=layer, status="covered" if covered else "uncovered",
            searched_as=run.searched_as.get(sq.id), attempts=attempts,
            best_score=round(best, 6) if best is not None else None, candidates=len(ranked),
            kept_node_ids=[h.node.node_id for h in ranked[:keep]])

    def _result(self, run: QueryRun, answer: str, sources: list, verification: Any) -> QueryResult:
        reports = [run.reports.get(sq.id) or SubqueryReport(
            id=sq.id, text=sq.text, layer=self._layer_of(run, sq.id), status="skipped",
            error=run.partial_reason or "the plan needs no retrieval") for sq in run.plan.subqueries]
        label, features = confidence(reports, min_ratio=self.settings.coverage_min_ratio,
                                     high_score=self.settings.high_confidence_score)
        calls = run.ledger.llm_calls
        prompt = [c.prompt_tokens for c in calls if c.prompt_tokens is not None]
        completion = [c.completion_tokens for c in calls if c.completion_tokens is not None]
        return QueryResult(
            question=run.question, answer=answer, sources=sources, plan=run.plan, subqueries=reports,
            retrieval_confidence=label, retrieval_confidence_features=features, verification=verification,
            timings=run.timings, degradations=run.ledger.degradations, path=run.path,  # type: ignore[arg-type]
            backtracked_subqueries=run.backtracked,
            partial=run.partial_reason is not None, partial_reason=run.partial_reason,
            llm_calls=LLMUsage(count=len(calls), prompt_tokens=sum(prompt) if prompt else None,
                               completion_tokens=sum(completion) if completion else None, calls=calls),
        )
