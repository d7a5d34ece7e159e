"""The searches a subquery runs (its variants), how their candidates are pooled, and how scores merge back.

A plain subquery runs one search. A hop (`{s1}` still in its text) runs one search per candidate bridge
entity of its parent's best passages (the resolver's offline twin, `bridge.py`); a retry runs a
wider search, and a hop's retry asks about each entity of the parent's best page in the question's own words
(`phrased_queries`). Their candidates meet in one pool per subquery; only pairs not scored before meet the
cross-encoder, except that a phrased search scores its candidates again (the keyword search's score may be what
failed), and a page keeps its best score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from llama_index.core.schema import NodeWithScore

from ...core.language import ENGLISH, Language
from ...core.names import Place, code_names, headed_by, names_all, opening
from ...core.plan import SubQuery, parent_references, resolve_references
from ...core.search import SearchHits, SearchRequest
from ...core.sources import passage_text
from ..policy import RetrievalPolicy, pool_size
from ..run import QueryRun
from .bridge import bridge_queries, page_of_entity, phrased_queries, titled_by


@dataclass(frozen=True)
class Variant:
    subquery_id: str
    request: SearchRequest
    entity: str | None = None  # the bridge entity this search is about, if any
    rescores: bool = False  # its candidates meet the cross-encoder even if the subquery has scored them before


@dataclass
class PooledCandidate:
    variant: Variant
    hit: NodeWithScore
    priority: float


def _title(hit: NodeWithScore) -> str:
    return str(hit.node.metadata.get("title", ""))


def subquery_searches(policy: RetrievalPolicy, run: QueryRun, sq: SubQuery, attempt: int, *,
                      language: Language = ENGLISH) -> list[Variant]:
    """The searches a subquery runs on its `attempt`-th try: one, or one per candidate bridge entity for a hop.

    A retry (attempt > 1) widens: top_k grows by SUBQUERY_TOPK_STEP, the text gains the hints'
    synonyms and must_include terms, and a bridge tries the entities of one more parent document (one the
    reranker scored at least COVERAGE_MIN_SCORE). The generic bridge hop's retry searches the entities of the
    parent's best page with the question's opening clause as written (`phrased_queries`), and rescores what it
    finds: the cross-encoder reads a question better than the keywords that found nothing it scored high.
    """
    text = run.rewritten.get(sq.id, sq.text)
    request = SearchRequest(
        text=text, top_k=pool_size(policy, run, sq, attempt),
        hyde=run.hyde.get(sq.id) or (run.plan.hyde_document if run.path == "single" else None),
        # A side named by code asks for the sections its name heads (the searcher looks them up).
        must_include=tuple(sq.hints.must_include), sections=tuple(dict.fromkeys([*sq.hints.sections, *side_code(sq)])))
    if attempt > 1:
        extra = [t for t in [*sq.hints.synonyms, *sq.hints.must_include] if t.lower() not in text.lower()]
        request = replace(request, text=" ".join([text, *extra]))
    references = parent_references(text)
    if not references:
        return [Variant(sq.id, request)]
    found = {parent: hits for parent, hits in run.ranked.items() if hits}
    titles = {parent: _title(hits[0]) for parent, hits in found.items()}
    bridge_parent = next((r for r in references if r in found), None)
    if bridge_parent is None:  # no parent found anything: search the words around the references
        text = " ".join(resolve_references(request.text, {r: "" for r in references}).split())
        return [Variant(sq.id, replace(request, text=text or run.plan.query))]
    child = resolve_references(request.text, {p: t for p, t in titles.items() if p != bridge_parent})
    variants: list[Variant] = []
    # A retry widens to the parent's next pages, but only to pages the reranker found about the parent's search:
    # names on a page it scored under COVERAGE_MIN_SCORE lead the hop away from the chain.
    parent_pages = [hit for rank, hit in enumerate(found[bridge_parent][:attempt])
                    if rank == 0 or (hit.score or 0.0) >= policy.coverage_min_score]
    # The question's opening clause is what the generic bridge hop (`{s1} <the question>`) asks, not what a deeper hop,
    # an LLM's own hop or a resolver's rewrite of the bridge asks.
    asks_the_question = sq.role == "bridge" and text == sq.text
    for rank, parent_hit in enumerate(parent_pages):
        page = (_title(parent_hit), parent_hit.node.get_content(), run.plan.query, policy.bridge_max_entities)
        known = run.known_names
        phrased = (phrased_queries(*page, known=known, language=language)
                   if attempt > 1 and rank == 0 and asks_the_question else [])
        keyword = bridge_queries(child, *page, known=known, language=language)
        for query, rescores in [*((q, True) for q in phrased), *((q, False) for q in keyword)]:
            if all(v.request.text != query.text for v in variants):
                variants.append(Variant(sq.id, replace(request, text=query.text), entity=query.entity,
                                        rescores=rescores))
    fallback = " ".join(resolve_references(child, {bridge_parent: titles[bridge_parent]}).split())
    return variants or [Variant(sq.id, replace(request, text=fallback))]


def pool_candidates(
    variants: Sequence[Variant],
    hits: Sequence[SearchHits | BaseException],
    *,
    exclude_node_ids: frozenset[str] = frozenset(),
    keep: int,
    question: str = "",
    title_boost: float = 0.0,
    language: Language = ENGLISH,
) -> list[PooledCandidate]:
    """One subquery's candidates from all its variants: each node once (at its best priority), best first.

    Priority is the search score, lifted by `title_boost` when the page is titled by the variant's entity. A
    phrased variant (one that rescores) keeps only the entity's own page (`page_of_entity`; none the `question`
    names): "... What is the average yearly rainfall in the city" matches every city's rainfall, and the entity's
    page is what it asks about.
    """
    best: dict[str, PooledCandidate] = {}
    for variant, result in zip(variants, hits):
        if not isinstance(result, SearchHits):
            continue
        for hit in result.candidates:
            node_id = hit.node.node_id
            if node_id in exclude_node_ids:
                continue
            titled = bool(variant.entity) and titled_by(_title(hit), variant.entity or "", language=language)
            if variant.rescores and not (variant.entity
                                         and page_of_entity(_title(hit), variant.entity, question, language=language)):
                continue  # in the question's general words any page on the topic matches; the entity's own counts
            priority = float(hit.score or 0.0) + (title_boost if titled else 0.0)
            before = best.get(node_id)
            if before is None:
                best[node_id] = PooledCandidate(variant=variant, hit=hit, priority=priority)
            elif before.variant.rescores == variant.rescores:
                if before.priority < priority:
                    best[node_id] = PooledCandidate(variant=variant, hit=hit, priority=priority)
            else:  # the phrased variant keeps the page (to score it again), at the best priority any search gave it
                phrased = before if before.variant.rescores else PooledCandidate(variant, hit, priority)
                best[node_id] = replace(phrased, priority=max(priority, before.priority))
    ranked = sorted(best.values(), key=lambda c: c.priority, reverse=True)
    # An entity's own page, found by a phrased search, is scored on top of the `keep` best (one page per entity).
    return [c for c in ranked if c.variant.rescores] + [c for c in ranked if not c.variant.rescores][:keep]


def unscored(run: QueryRun, pools: dict[str, list[PooledCandidate]]) -> list[tuple[str, PooledCandidate]]:
    """(subquery id, candidate) pairs the cross-encoder must score: those the subquery's ranking does not hold yet,
    and those of a variant that rescores."""
    fresh: list[tuple[str, PooledCandidate]] = []
    for sq_id, pool in pools.items():
        seen = {hit.node.node_id for hit in run.ranked.get(sq_id, [])}
        fresh.extend((sq_id, c) for c in pool if c.variant.rescores or c.hit.node.node_id not in seen)
    return fresh


def side_name(sq: SubQuery) -> str:
    """What a comparison side is about, as the question names it (its `must_include`), or its search's text."""
    return " ".join(sq.hints.must_include) or sq.text


def side_code(sq: SubQuery) -> list[str]:
    """The code a comparison side is named by (`--check`, `wheel.exclude`, `sane_lists`), or none: a side's name is its
    `must_include`."""
    if sq.role != "side":
        return []
    return [name for term in sq.hints.must_include for name in code_names(term)]


def merge_scores(run: QueryRun, subquery_ids: Sequence[str], fresh: Sequence[tuple[str, PooledCandidate]],
                 scores: Sequence[float]) -> None:
    """Add the newly scored candidates to each subquery's ranking (best first; a page scored again keeps its best
    score; a side named by code puts the passages that name it first, `side_code`, led by the one that opens the page
    or section its name heads, `headed_by` and `opening`) and note the query behind its best."""
    query_of: dict[tuple[str, str], str] = {}
    for sq_id in subquery_ids:
        run.ranked.setdefault(sq_id, [])
    for (sq_id, candidate), score in zip(fresh, scores):
        ranked = run.ranked[sq_id]
        node_id = candidate.hit.node.node_id
        before = next((i for i, hit in enumerate(ranked) if hit.node.node_id == node_id), None)
        if before is not None and (ranked[before].score or 0.0) >= score:
            continue
        if before is not None:
            ranked.pop(before)
        ranked.append(NodeWithScore(node=candidate.hit.node, score=score))
        query_of[(sq_id, node_id)] = candidate.variant.request.text
    by_id = {sq.id: sq for sq in run.plan.subqueries}
    for sq_id in subquery_ids:
        ranked = run.ranked[sq_id]
        code = side_code(by_id[sq_id]) if sq_id in by_id else []
        if code:  # a side named by code: the passages that name it first, each group by score
            ranked.sort(key=lambda h: (names_all(passage_text(h), code), h.score or 0.0), reverse=True)
            # led by its own page or section: the passage that opens the place its name heads, not one that mentions it
            heads = [i for i, hit in enumerate(ranked) if headed_by(Place.of(hit.node.metadata), code)]
            if heads:
                lead = heads[opening([ranked[i].node.metadata for i in heads])]
                ranked.insert(0, ranked.pop(lead))
        else:
            ranked.sort(key=lambda h: h.score or 0.0, reverse=True)
        if ranked and (sq_id, ranked[0].node.node_id) in query_of:
            run.searched_as[sq_id] = query_of[(sq_id, ranked[0].node.node_id)]
