"""QueryWorkflow: plan -> search the DAG layer by layer (critic retries) -> write -> verify (backtrack once).

    QueryStarted --plan--> PlanReady --schedule--> LayerQueued --search_layer--> LayerSearched --critique-->
        RetryQueued --search_layer--> LayerSearched (weak, uncovered or failed subqueries; SUBQUERY_MAX_ITERS)
        LayerAccepted --schedule--> LayerQueued (next layer, or a deeper bridge hop) | EvidenceGathered (none left)
    EvidenceGathered --judge--> EvidenceJudged --write--> AnswerDrafted --verify--> StopEvent(result=QueryResult)
                                                                          \\--> BacktrackQueued --backtrack-->
                                                                               EvidenceGathered (once)
                     \\--judge--> AnswerDrafted (no kept passage answers: the answer abstains) --verify--> StopEvent
    (the writer says the sources do not answer, an LLM's "Answer: unknown": write's AnswerDrafted abstains too)

Streamed for progress (small summaries, progress.py): PlanChosen, LayerStarted, SubqueryDone, LayerDone,
HopAdded (a deeper bridge hop joined the plan), AnswerWritten, VerificationDone, and LLMProgress from each
step that calls an LLM (the step attaches a listener to the run's ledger for its calls, so they stream).
Every layer's subqueries are searched as one batch and reranked as one batch; per-run state travels in
the events (`QueryRun`), so one workflow instance serves many concurrent runs. The decisions (what to
search, how much to keep, what to retry, what to report) are pure functions in policy.py and report.py, and how
a run hops is one `HopStrategy` (hopping/); the steps here run them against the agents and the run deadline.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from workflows import Context, Workflow, step
from workflows.events import StopEvent

from ..agents.resolver import ReferenceResolverAgent
from ..agents.writer import source_sentences
from ..config import Settings
from ..core.inputs import check_history, check_question
from ..core.language import ENGLISH, Language
from ..core.names import KnownNames, Place, code_names
from ..core.plan import ExecutedPlan, SubQuery, parent_references, with_question_searched
from ..core.result import ProgressListener, RunLedger, Source, Verification, WrittenAnswer
from ..core.roles import (
    NameSource,
    PassageWriter,
    Planner,
    ReferenceResolver,
    Reranker,
    Searcher,
    Verifier,
    Writer,
)
from ..core.search import SearchHits
from ..core.sources import passage_text
from .answerability import (
    abstain_bar,
    abstain_reason,
    abstention_text,
    answer_score,
    declined_reason,
    every_side_answered,
    joined_evidence,
    undocumented_member_reason,
    undocumented_members,
    undocumented_side_reason,
    undocumented_sides,
    unfound_names,
    what_the_writer_said,
)
from .events import (
    AnswerDrafted,
    BacktrackQueued,
    EvidenceGathered,
    EvidenceJudged,
    LayerAccepted,
    LayerQueued,
    LayerSearched,
    LayerStarted,
    PlanReady,
    QueryStarted,
    RetryQueued,
    SubqueryDone,
    VerificationDone,
)
from .evidence import offers, sources_within
from .hopping import (
    DocumentHops,
    HopStrategy,
    PooledCandidate,
    Variant,
    apply_deepening,
    merge_scores,
    side_code,
    side_name,
    unscored,
)
from .llamaindex import DagragQueryEngine, as_query_engine, as_tool
from .policy import (
    RetrievalPolicy,
    backtrack_targets,
    is_hop,
    kept_per_subquery,
    needs_retry,
    path_of,
)
from .progress import AnswerWritten, HopAdded, LayerDone, LLMProgress, PlanChosen
from .report import build_result, record_search, record_skipped_hop
from .run import QueryRun, before_deadline

if TYPE_CHECKING:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.llms import LLM
    from llama_index.core.tools import FunctionTool
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    from ..agents.reranker import PairScorer, RerankerAgent

# The workflow's own timeout is only a backstop: the run deadline (QUERY_TIMEOUT_S) ends a query with a
# partial result first, and what is left to do after it (no-model answer) is quick.
BACKSTOP_GRACE_S = 30.0

SearchResults = dict[str, list[SearchHits | BaseException]]


def llm_progress(ctx: Context) -> ProgressListener:
    """Streams the progress of the LLM calls a step makes, through that step's own context (a step's context
    serves only that step: its stream writes are finished before the step's result moves on)."""
    return lambda progress: ctx.write_event_to_stream(LLMProgress.of(progress))


def side_passages(run: QueryRun, sides: list[SubQuery], kept: set[str] | None = None,
                  ) -> list[list[tuple[float, str, Place]]]:
    """Each side's passages as `answerability` reads them (score, text, place), best first: those its search found,
    or only the `kept` ones."""
    return [[(hit.score or 0.0, passage_text(hit), Place.of(hit.node.metadata)) for hit in run.ranked.get(sq.id, [])
             if kept is None or hit.node.node_id in kept] for sq in sides]


class QueryWorkflow(Workflow):
    """`await QueryWorkflow.from_settings(settings).run(query=..., history=None, plan=None)` -> QueryResult.

    `plan` (a Plan) skips the planner: it is validated and repaired like an LLM's, then executed. A bad
    question or history fails the run in its first step with InvalidQuestionError, however it was started.
    `hops` (a `hopping.HopStrategy`) decides how a run hops; the default, `DocumentHops`, follows the documents and
    reads questions and passages in `language` (`core/language.py`, English unless given).
    """

    def __init__(
        self,
        *,
        planner: Planner,
        searcher: Searcher,
        reranker: Reranker,
        writer: Writer,
        verifier: Verifier,
        settings: Settings,
        resolver: ReferenceResolver | None = None,
        hyde: PassageWriter | None = None,
        hops: HopStrategy | None = None,
        language: Language = ENGLISH,
        **workflow_kwargs: Any,
    ) -> None:
        workflow_kwargs.setdefault("timeout", settings.query_timeout_s + BACKSTOP_GRACE_S)
        super().__init__(**workflow_kwargs)
        self.planner = planner
        self.searcher = searcher
        self.reranker = reranker
        self.writer = writer
        self.verifier = verifier
        self.resolver = resolver or ReferenceResolverAgent()
        self.hyde = hyde
        self.settings = settings
        self.policy = RetrievalPolicy.from_settings(settings)
        self.hops = hops or DocumentHops(self.policy, language)

    @classmethod
    def from_settings(
        cls,
        settings: Settings | None = None,
        *,
        llm: LLM | None = None,
        embed_model: BaseEmbedding | None = None,
        reranker: RerankerAgent | PairScorer | None = None,
        vector_store: QdrantVectorStore | None = None,
        language: Language = ENGLISH,
        **workflow_kwargs: Any,
    ) -> QueryWorkflow:
        """The default stack from Settings (`stack.build_agents`); any part can be passed in instead. `language` is
        what the rule planner and the hops read questions in: another language is another `Language`, passed here."""
        from ..stack import build_agents

        settings = settings or Settings()
        agents = build_agents(settings, llm=llm, embed_model=embed_model, reranker=reranker,
                              vector_store=vector_store, language=language)
        return cls(**vars(agents), settings=settings, language=language, **workflow_kwargs)

    def as_query_engine(self, **engine_fields: Any) -> DagragQueryEngine:
        """This workflow as a LlamaIndex query engine: a Response with source_nodes in citation order."""
        return as_query_engine(self, **engine_fields)

    def as_tool(self, name: str = "dagrag", description: str | None = None) -> FunctionTool:
        """This workflow as a LlamaIndex agent tool: the cited answer and its numbered sources, as text."""
        return as_tool(self, name=name, description=description)

    # --- the pipeline ----------------------------------------------------------------------------

    @step
    async def plan(self, ctx: Context, ev: QueryStarted) -> PlanReady:
        started = time.perf_counter()
        question = check_question(ev.query, self.settings.max_question_chars)
        history = check_history(ev.history, self.settings.max_question_chars)
        deadline = started + self.settings.query_timeout_s
        ledger = RunLedger()
        with ledger.listening(llm_progress(ctx)):
            plan = await before_deadline(deadline, self.planner.aplan(question, history, ledger, given=ev.plan))
        if plan is None:
            ledger.degrade("planner", "query deadline passed", "rule-based planner")
            plan = self.planner.fallback_plan(question, history, "the query deadline passed while planning")
        plan = with_question_searched(plan)
        run = QueryRun(question=question, plan=plan, ledger=ledger, started_at=started, deadline=deadline,
                       path=path_of(self.policy, plan), known_names=await self._known_names(plan))
        if run.out_of_time():
            run.record_partial("planning")
        run.add_time("plan_s", time.perf_counter() - started)
        ready = PlanReady(run=run)
        ctx.write_event_to_stream(PlanChosen.of(run))  # a summary: the run itself stays in-process
        return ready

    @step
    async def schedule(self, ctx: Context, ev: PlanReady | LayerAccepted) -> LayerQueued | EvidenceGathered:
        """Queue the next layer that has something to search (a layer of skipped hops is passed over)."""
        next_layer = ev.layer_index + 1 if isinstance(ev, LayerAccepted) else 0
        while ev.run.plan.requires_retrieval:
            if next_layer >= len(ev.run.plan.layers) and not self._deepen(ctx, ev.run):
                break
            if self._to_search(ctx, ev.run, next_layer):
                return LayerQueued(run=ev.run, layer_index=next_layer)
            next_layer += 1
        return self._evidence(ev.run)

    @step
    async def search_layer(self, ctx: Context, ev: LayerQueued | RetryQueued) -> LayerSearched:
        retry = isinstance(ev, RetryQueued)
        ids = ev.subquery_ids if isinstance(ev, RetryQueued) else [
            sq_id for sq_id in ev.run.plan.layers[ev.layer_index] if sq_id not in ev.run.skipped_hops]
        await self._search(ctx, ev.run, ev.run.subqueries(ids), ev.layer_index, retry=retry)
        searched = LayerSearched(run=ev.run, layer_index=ev.layer_index)
        ctx.write_event_to_stream(LayerDone.of(ev.run, ev.layer_index))
        return searched

    @step
    async def critique(self, ev: LayerSearched) -> RetryQueued | LayerAccepted:
        """Send weak, uncovered or failed subqueries of the layer back for a wider search (SUBQUERY_MAX_ITERS times)."""
        run = ev.run
        retry = [sq_id for sq_id in run.plan.layers[ev.layer_index] if needs_retry(self.policy, run, sq_id)]
        if retry and run.out_of_time():
            run.record_partial("the critic")
        elif retry:
            return RetryQueued(run=run, layer_index=ev.layer_index, subquery_ids=retry)
        return LayerAccepted(run=run, layer_index=ev.layer_index)

    @step
    async def judge(self, ev: EvidenceGathered) -> EvidenceJudged | AnswerDrafted:
        """Abstain when no kept passage answers the question (answerability.py); else go on to write."""
        started = time.perf_counter()
        members = await self._undocumented_members(ev.run)
        reason = (undocumented_member_reason(members, self.policy.abstain_below)
                  or await self._abstain_reason(ev.run, ev.sources))
        ev.run.add_time("judge_s", time.perf_counter() - started)
        if reason is None:
            return EvidenceJudged(run=ev.run, sources=ev.sources)
        text = abstention_text(ev.sources, undocumented=members or self._undocumented_sides(ev.run))
        return AnswerDrafted(run=ev.run, sources=ev.sources, answer=WrittenAnswer(text=text, abstain_reason=reason))

    @step
    async def write(self, ctx: Context, ev: EvidenceJudged) -> AnswerDrafted:
        started = time.perf_counter()
        run = ev.run
        with run.ledger.listening(llm_progress(ctx)):
            answer = await before_deadline(run.deadline, self.writer.awrite(run.plan.query, run.plan, ev.sources,
                                                                            run.ledger))
        if answer is None:
            run.record_partial("writing")
            answer = WrittenAnswer(text=self.writer.lead_sentences(ev.sources))
        if (reason := declined_reason(answer, self.policy.abstain_below)) is not None:
            answer = WrittenAnswer(text=abstention_text(ev.sources, writer_said=what_the_writer_said(answer)),
                                   abstain_reason=reason)
        run.add_time("write_s", time.perf_counter() - started)
        drafted = AnswerDrafted(run=run, sources=ev.sources, answer=answer)
        ctx.write_event_to_stream(AnswerWritten.of(answer.text, ev.sources))
        return drafted

    @step
    async def verify(self, ctx: Context, ev: AnswerDrafted) -> StopEvent | BacktrackQueued:
        run = ev.run
        if ev.answer.abstain_reason is not None:  # nothing was claimed, so nothing to verify or search again
            run.add_time("total_s", time.perf_counter() - run.started_at)
            return StopEvent(result=build_result(self.policy, self.hops, run, ev.answer, ev.sources,
                                                 Verification(method="none: the answer abstained")))
        started = time.perf_counter()
        with run.ledger.listening(llm_progress(ctx)):
            verification = await before_deadline(run.deadline,
                                                 self.verifier.averify(ev.answer.text, ev.sources, run.ledger))
        if verification is None:
            run.record_partial("verification")
            verification = Verification(method="skipped: query deadline passed")
        run.add_time("verify_s", time.perf_counter() - started)
        ctx.write_event_to_stream(VerificationDone(verification=verification))
        targets = backtrack_targets(self.policy, run, ev.sources, verification)
        if targets:
            run.backtracked = targets
            return BacktrackQueued(run=run, subquery_ids=targets)
        run.add_time("total_s", time.perf_counter() - run.started_at)
        return StopEvent(result=build_result(self.policy, self.hops, run, ev.answer, ev.sources, verification))

    @step
    async def backtrack(self, ctx: Context, ev: BacktrackQueued) -> EvidenceGathered:
        """Search the subqueries behind unsupported sentences again (wider), then write and verify once more."""
        subqueries = ev.run.subqueries(ev.subquery_ids)
        await self._search(ctx, ev.run, subqueries, max(ev.run.layer_of(sq.id) for sq in subqueries), retry=True)
        return self._evidence(ev.run)

    # --- what the steps share ----------------------------------------------------------------------

    def _to_search(self, ctx: Context, run: QueryRun, layer_index: int) -> list[str]:
        """The layer's subqueries to search; the bridge hops s1 already answers are recorded as skipped instead."""
        to_search = []
        for sq in run.subqueries(run.plan.layers[layer_index]):
            reason = self.hops.skip_reason(run, sq)
            if reason is None:
                to_search.append(sq.id)
            else:
                record_skipped_hop(self.policy, run, sq, reason)
                ctx.write_event_to_stream(SubqueryDone(subquery_id=sq.id, status="skipped"))
        return to_search

    def _deepen(self, ctx: Context, run: QueryRun) -> bool:
        """Grow an offline bridge chain by one hop when the question still needs one (hopping/deeper.py)."""
        deepening = self.hops.next_hop(run)
        if deepening is None:
            return False
        apply_deepening(run, deepening)
        if deepening.hop is None:
            return False
        ctx.write_event_to_stream(HopAdded.of(run, deepening.hop.id))
        return True

    async def _known_names(self, plan: ExecutedPlan) -> KnownNames:
        """What the collection names (titles, headings), for the hops to follow; read only when a plan has a hop."""
        if len(plan.subqueries) < 2 or not isinstance(self.searcher, NameSource):
            return KnownNames()
        return await self.searcher.known_names()

    async def _undocumented_members(self, run: QueryRun) -> list[str]:
        """The dotted code the question asks about whose member no page of the collection writes
        (`answerability.undocumented_members`); the collection's words are read only when the question names code."""
        names = code_names(run.plan.query)
        if self.policy.abstain_below <= 0 or not run.plan.requires_retrieval or not names:
            return []
        known = run.known_names
        if not known.words and isinstance(self.searcher, NameSource):
            known = await self.searcher.known_names()  # a plan of one search read none
        return undocumented_members(names, known)

    async def _abstain_reason(self, run: QueryRun, sources: list[Source]) -> str | None:
        """Score the question against each kept passage's sentences and, only if none of them answers, against the
        whole passages; why to abstain, or None. Sentences first: the extractive writer scores the same pairs (the
        reranker's cache serves them again), and one answering sentence settles it. A comparison whose every side
        keeps a passage that answers the side (`every_side_answered`) is answered without asking; when nothing else
        answers, two sources' best sentences read together may (`joined_evidence`). A run out of time,
        or a failing cross-encoder, does not abstain: the writer's own fallbacks take over."""
        if self.policy.abstain_below <= 0 or not run.plan.requires_retrieval:
            return None
        hits = {hit.node.node_id: hit for ranked in run.ranked.values() for hit in ranked}
        bar = abstain_bar(abstain_below=self.policy.abstain_below,
                          unknown_name_below=self.policy.abstain_unknown_name_below,
                          unfound=unfound_names(code_names(run.plan.query), (passage_text(h) for h in hits.values())),
                          joined_below=self.policy.abstain_joined_below)
        if not sources:
            return abstain_reason(answer_score([], []), bar)
        sides = [sq for sq in run.plan.subqueries if sq.role == "side"]
        # A side's scores are the cross-encoder's probabilities, unless it failed and the search's order stood.
        if sides and run.reranked():
            kept = {s.node_id for s in sources}
            if every_side_answered(side_passages(run, sides, kept), [side_code(sq) for sq in sides], bar.threshold,
                                   room=self.policy.context_budget):
                return None
            reason = undocumented_side_reason(self._undocumented_sides(run), self.policy.abstain_below)
            if reason is not None:
                return reason
        sentences = [source_sentences(s) for s in sources]
        flat = await self._question_scores(run, [t for own in sentences for t in own])
        if flat is None:
            return None
        cuts = [0]
        for own in sentences:
            cuts.append(cuts[-1] + len(own))
        per_source = [flat[cuts[i]:cuts[i + 1]] for i in range(len(sources))]
        unscored = [0.0] * len(sources)  # passages: only scored when no sentence answers
        if abstain_reason(answer_score(unscored, per_source), bar) is None:
            return None
        passages = await self._question_scores(
            run, [passage_text(hits[s.node_id]) if s.node_id in hits else s.text for s in sources])
        if passages is None:
            return None
        best = answer_score(passages, per_source)
        reason = abstain_reason(best, bar)
        joined_texts = joined_evidence(sentences, per_source) if reason and bar.joined > 0 else []
        if not joined_texts:
            return reason
        joined = await self._question_scores(run, joined_texts)
        if joined is None:
            return None
        return abstain_reason(best, bar, max(joined))

    def _undocumented_sides(self, run: QueryRun) -> list[str]:
        """The comparison sides the collection does not document (`answerability.undocumented_sides`), at
        ABSTAIN_BELOW: the question's unfound code raises its bar, not a side's. Only sides whose search ran (a failed
        search says nothing of the collection) and only with the cross-encoder's probabilities."""
        if self.policy.abstain_below <= 0 or not run.reranked():
            return []
        searched = [sq for sq in run.plan.subqueries if sq.role == "side"
                    and sq.id in run.reports and run.reports[sq.id].status in ("covered", "uncovered")]
        return undocumented_sides(side_passages(run, searched), [side_name(sq) for sq in searched],
                                  [side_code(sq) for sq in searched], self.policy.abstain_below)

    async def _question_scores(self, run: QueryRun, texts: list[str]) -> list[float] | None:
        """The cross-encoder's probability for the question against each text; None when the deadline passed or
        the cross-encoder failed (recorded in the ledger)."""
        if not texts:
            return []
        try:
            scores = await before_deadline(run.deadline, self.reranker.ascore([(run.plan.query, t) for t in texts]))
        except Exception as error:
            run.ledger.degrade("answerability", f"{type(error).__name__}: {str(error)[:300]}", "no abstain check")
            return None
        return None if scores is None else list(scores)

    def _evidence(self, run: QueryRun) -> EvidenceGathered:
        offered = offers(run.plan, self.hops.handed_over(run), per_subquery=kept_per_subquery(self.policy, run.path))
        sources = sources_within(self.hops.evidence_order(run, offered), budget=self.policy.context_budget)
        return EvidenceGathered(run=run, sources=sources)

    async def _search(self, ctx: Context, run: QueryRun, subqueries: list[SubQuery], layer_index: int, *,
                      retry: bool) -> None:
        """Search and rerank the subqueries as one batch, then record and stream each one's outcome."""
        ctx.write_event_to_stream(LayerStarted(layer_index=layer_index, subquery_ids=[sq.id for sq in subqueries]))
        started = time.perf_counter()
        if not retry:
            with run.ledger.listening(llm_progress(ctx)):
                await self._prepare_layer(run, subqueries)
        results = await self._search_and_rerank(run, subqueries, layer_index)
        run.add_time(f"layer_{layer_index}_s", time.perf_counter() - started)
        for sq in subqueries:
            outcome = None if results is None else results[sq.id]
            report = record_search(self.policy, self.hops, run, sq, outcome, retry=retry)
            if report is not None:
                best = run.ranked.get(sq.id, [])
                ctx.write_event_to_stream(SubqueryDone(
                    subquery_id=sq.id, status=report.status, best_score=report.best_score,
                    best_title=str(best[0].node.metadata.get("title", "")) if best else None))

    async def _prepare_layer(self, run: QueryRun, subqueries: list[SubQuery]) -> None:
        """LLM help before a layer's first search: `{sN}` rewrites from the parents' findings, then HyDE passages."""
        dependent = [sq for sq in subqueries if parent_references(sq.text)]
        if dependent:
            findings = {parent.id: (parent.text, passage_text(run.ranked[parent.id][0]))
                        for sq in dependent for parent in run.subqueries(sq.parents) if run.ranked.get(parent.id)}
            run.rewritten.update(await self.resolver.arewrite({sq.id: sq.text for sq in dependent}, findings,
                                                              run.ledger))
        if self.hyde is not None:
            searchable = [sq.model_copy(update={"text": run.rewritten.get(sq.id, sq.text)}) for sq in subqueries
                          if not is_hop(run, sq)]
            run.hyde.update(await self.hyde.apassages(searchable, run.ledger))

    async def _search_and_rerank(self, run: QueryRun, subqueries: list[SubQuery], layer_index: int
                                 ) -> SearchResults | None:
        """Every search of every subquery in one batch, then one rerank call; None if out of time."""
        started = time.perf_counter()
        attempt = {sq.id: run.attempts.get(sq.id, 0) + 1 for sq in subqueries}
        variants = {sq.id: self.hops.searches(run, sq, attempt[sq.id]) for sq in subqueries}
        flat = [v for sq_variants in variants.values() for v in sq_variants]
        hits = await before_deadline(run.deadline, self._search_batch(flat))
        searched = time.perf_counter()
        run.add_time("search_s", searched - started)
        if hits is None:
            run.record_partial(f"the search of layer {layer_index}")
            return None
        results: SearchResults = {sq.id: [] for sq in subqueries}
        for variant, result in zip(flat, hits):
            results[variant.subquery_id].append(result)
        await self._rerank(run, {
            sq.id: self.hops.pool(run, sq, variants[sq.id], results[sq.id], attempt[sq.id]) for sq in subqueries})
        run.add_time("rerank_s", time.perf_counter() - searched)
        return results

    async def _search_batch(self, variants: list[Variant]) -> list[SearchHits | BaseException]:
        requests = [v.request for v in variants]
        try:
            return list(await self.searcher.asearch_layer(requests))
        except Exception:
            # The batch failed: search one by one, so one bad subquery cannot sink the others.
            single = await asyncio.gather(*(self.searcher.asearch_layer([r]) for r in requests),
                                          return_exceptions=True)
            return [result if isinstance(result, BaseException) else result[0] for result in single]

    async def _rerank(self, run: QueryRun, pools: dict[str, list[PooledCandidate]]) -> None:
        """One cross-encoder call over every new (query, candidate) pair of the layer; the search order if it fails."""
        fresh = unscored(run, pools)
        search_order = [c.priority for _, c in fresh]
        try:
            scores = await before_deadline(run.deadline, self.reranker.ascore(
                [(c.variant.request.text, passage_text(c.hit)) for _, c in fresh]))
        except Exception as error:
            run.ledger.degrade("reranker", f"{type(error).__name__}: {error}", "dense order kept")
            scores = search_order
        if scores is None:
            run.record_partial("reranking")
            run.ledger.degrade("reranker", "query deadline passed", "dense order kept")
            scores = search_order
        merge_scores(run, list(pools), fresh, scores)
