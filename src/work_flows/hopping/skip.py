"""When the offline bridge hop runs, and what it may hand the writer: a DAG that never does worse than one search.

The rule planner turns every question that is not a comparison into a bridge: s1 searches the question,
s2 = `{s1} <the question>` searches again about the entities s1's best page names. The second hop pays off
when the question describes something s1's page only leads to ("the actress who played Nora Quill in Salt
and Ember" → the film's page names Lena Marwick → her page holds "Harbour Commissioner"). When s1's own
passages already hold the answer, the hop only takes context budget away from them. So, for that generic
bridge hop (`bridge_parent`), three rules, and two more for every hop; all off with BRIDGE_WHEN_NEEDED=false:

1. **Skip the hop when one document already explains the question** (`skip_reason`, asked before the hop's
   layer is searched). s1 is covered, and its best passage, read together with the other passages of the
   same document among those the single-query path would hand the writer (s1's best CONTEXT_BUDGET),
   contains every content word of the question, title and section included; words match on their first
   five letters ("environments" ~ "environment", "enabling" ~ "enable"), shorter words exactly. Then
   nothing is left for a hop to find: s2 is not searched, its report says `skipped` and why, the plan's
   notes say so, and the run becomes the single-query path (`path` "single"): the whole budget goes to
   s1, exactly what one search hands the writer. A word left unexplained ("Harbour Commissioner" is not
   on the film's page, so "public" and "office" are not) means the hop runs as before. One document,
   because words spread over unrelated pages are explained by accident: for "Neon Tides is the debut album
   of a Danish girl group that was formed by whom?" the album's page and another band's page can hold
   every word between them, and the hop to the group's own page is still needed. A question that needs
   two documents is what the hop is for.
2. **An uncovered hop hands over nothing** (`passages_handed_over`). A hop whose best passage is still under
   COVERAGE_MIN_SCORE after the critic's retry found no page about anything s1 names; its slots go to s1's
   next best passages, the single path's, instead of to its noise. A covered hop keeps its share as before.
3. **The hop's best passage goes after s1's next one unless the cross-encoder or s1's own search backs it**
   (`evidence_order`). In turn order the hop's best passage takes the slot of s1's next, the single path's; it
   keeps that place when s1's search also ranked it (two searches found it), when it stands out in its own search
   (STANDS_OUT above the hop's runner-up) while s1's next does not stand out as far in s1's (when both do, a gap
   backs neither and the scores decide), or when the cross-encoder scores it, for the hop's search, at least as
   high as s1's next passage for the question (within SCORE_TIE: probabilities that close are a tie, and a tie keeps
   the plan's order). That last backing does not hold for another passage of the document s1's best passage is
   from while s1's next is s1's own second: a hop that stayed on its parent's page did not hop, it ranked that
   page's sections again with the question's words, and the question's own search, which put its second passage
   first, is the better judge of which the writer reads. Otherwise s1's next passage goes first, and the hop's
   follows it; at the edge of the budget that decides which of the two the writer reads. Not when the
   cross-encoder failed: then scores are the search's order.

4. **A hop's passage its search did not find goes after the question's found ones** (`unfound_hop_passages`).
   A passage under COVERAGE_MIN_SCORE is one its search did not find (rule 2 holds back a bridge hop whose *best*
   is under it); a covered hop's lower-ranked passages can be, and in turn order they took slots from passages the
   question's own search found ("Tab completion works for my command's arguments ... but not when the command asks
   for a path with click.prompt": the hop's second passage, at 0.006, in place of the question's third, at 0.956,
   which held the answer). So every passage of a hop (the generic bridge hop and the
   deeper ones) scoring under COVERAGE_MIN_SCORE bids after the last passage the question's search found. A
   comparison's sides keep their turns: a side needs its own document, whatever its scores.
5. **A hop's runner-ups from the question's best document go after the question's found passages**
   (`question_page_passages`). A hop's best passage is what its search was for (rule 3 places the bridge hop's);
   its lower-ranked passages from the page the question's best passage is from, which the question's search did
   not rank at all, are that page's sections ranked again with the question's words, and the question's own search
   has already judged that page. In turn order such a passage took a slot from a passage the question found ("My
   group prints its help page when somebody runs it with no subcommand. What exit status does the process return
   then?": the hop's second passage from the question's best page, at 0.126, in place of the question's third, at
   0.649, which held the answer). So every such runner-up of a hop (the generic bridge hop and the deeper ones)
   bids after the last passage the question's search found. A hop's best passage, and its passages from any other
   page, keep their turns: a deeper hop's best on the question's page is often what its words were missing.

Measured on the benchmark sets (a documentation set and multi-hop QA sets, budgets 2 and 4): ARCHITECTURE.md,
"A bridge hop only when the question needs one".

Why only the generic hop: its parent searched the question itself, so the parent's ranking *is* the
single-query path's, and giving the hop's share back to it yields exactly what one search would have handed
the writer. A hop an LLM wrote ("What river flows through {s1}?") follows a parent that asked something
narrower ("In which city was Ada Lovelace born?"): that parent's next passages are more about the city,
not the single path's passages, and the LLM wrote the hop because it judged a second fact necessary; the
question's words occurring in the city's passages says nothing about whether the river's page was found.
An LLM's plan that does not search the question gains that search (`core.plan.with_question_searched`), first in
its first layer, so the single path's best passage is among its evidence whatever the LLM's searches find; a plan
of the question alone is the single path and hands over the whole budget.
"""

from __future__ import annotations

from dataclasses import dataclass

from llama_index.core.schema import NodeWithScore

from ...core.language import ENGLISH, Language
from ...core.plan import ExecutedPlan, SubQuery
from ...core.sources import passage_text
from ...core.text import unexplained_words
from ..evidence import Offer, offers, sources_within
from ..policy import RetrievalPolicy, kept_per_subquery
from ..run import QueryRun

# Reranker probabilities this close are a tie: at the top of the scale a passage scored 0.9865 for the hop's search
# and one scored 0.9912 for the question say the same, and a tie keeps the plan's order (rule 3).
SCORE_TIE = 0.01
# A hop's best passage this far above the hop's own runner-up stands out: its search found what it was looking for,
# whatever its probability against the question's passages says (rule 3). Probabilities for a keyword search are low
# against a question's; the gap within one search reads the same for every search, so it reads the same for the
# question's next passage: when that stands out in the question's search too, the gap backs neither passage.
STANDS_OUT = 0.5


def bridge_parent(plan: ExecutedPlan, sq: SubQuery) -> str | None:
    """The parent of a generic bridge hop (role `bridge`: `{s1}` + the question, after s1 = the question), or None
    for any other subquery."""
    return sq.parents[0] if sq.role == "bridge" and sq.parents else None


def document_of(hit: NodeWithScore) -> str:
    """The document a passage belongs to: its title (a page, or the document a chunk was cut from)."""
    return str(hit.node.metadata.get("title", ""))


def skip_reason(policy: RetrievalPolicy, run: QueryRun, sq: SubQuery, *, language: Language = ENGLISH) -> str | None:
    """Why the generic bridge hop `sq` need not be searched (rule 1), or None when it must be."""
    if not policy.bridge_when_needed:
        return None
    parent = bridge_parent(run.plan, sq)
    if parent is None or any(sq.id in other.parents for other in run.plan.subqueries):
        return None  # a hop another subquery builds on runs whatever its parent found
    report, handed = run.reports.get(parent), run.ranked.get(parent, [])[: policy.context_budget]
    if report is None or report.status != "covered" or not handed:
        return None
    document = document_of(handed[0])
    one_document = [hit for hit in handed if document_of(hit) == document]
    if unexplained_words(run.plan.query, [passage_text(hit) for hit in one_document], stopwords=language.stopwords):
        return None
    passages = ("best passage contains" if len(one_document) == 1
                else f"{len(one_document)} passages of its best document contain")
    return (f"{parent}'s {passages} every content word of the question ({document!r}), so a second hop has "
            f"nothing left to find; its share of the context budget went to {parent}")


def holds_back(policy: RetrievalPolicy, plan: ExecutedPlan, sq: SubQuery, *, covered: bool) -> bool:
    """Rule 2: an uncovered generic bridge hop hands the writer none of its passages."""
    return policy.bridge_when_needed and not covered and bridge_parent(plan, sq) is not None


def passages_handed_over(policy: RetrievalPolicy, run: QueryRun) -> dict[str, list[NodeWithScore]]:
    """Each subquery's ranked passages that may reach the writer (rule 2, and deeper hops that added nothing:
    deeper.py); the evidence picks from these."""
    rankings = dict(run.ranked)
    for sq in run.plan.subqueries:
        report = run.reports.get(sq.id)
        if sq.id in rankings and (sq.id in run.idle_hops or holds_back(
                policy, run.plan, sq, covered=report is not None and report.status == "covered")):
            rankings[sq.id] = []
    return rankings


@dataclass(frozen=True)
class BridgeDeferral:
    """Rule 3's decision: the bridge hop's best passage (`hop`) goes after its parent's next one (`parent_next`)."""

    hop: Offer
    parent_next: Offer
    same_document: str | None = None  # the parent's best document, when the hop's passage is from it (the reason)


def _stands_out(offered: list[Offer], offer: Offer) -> bool:
    """Whether `offer` scores STANDS_OUT above the passage its search ranked right after it (0 when none)."""
    after = next((o.score for o in offered if o.subquery_id == offer.subquery_id and o.rank == offer.rank + 1), 0.0)
    return offer.score - after >= STANDS_OUT


def bridge_deferrals(policy: RetrievalPolicy, run: QueryRun, offered: list[Offer]) -> list[BridgeDeferral]:
    """Rule 3 over the run's turn order (`evidence.offers`): each generic bridge hop whose best passage its parent's
    search did not rank, that does not stand out in its own search (STANDS_OUT), and that scores more than
    SCORE_TIE under the parent's next passage offered after it, or is from the parent's best document while that
    next passage is the parent's own second; and each whose best stands out while the parent's next stands out in
    the parent's search too, when it scores more than SCORE_TIE under that passage. None without the
    cross-encoder's probabilities: the scores are then the search's order, and the turn order stands."""
    if not policy.bridge_when_needed or not run.reranked():
        return []
    plan = run.plan
    deferrals = []
    first: dict[str, int] = {}  # where each passage is first offered: later offers of it are no new passage
    for at, offer in enumerate(offered):
        first.setdefault(offer.key, at)
    for sq in plan.subqueries:
        parent = bridge_parent(plan, sq)
        if parent is None:
            continue
        hop_at = next((i for i, o in enumerate(offered) if o.subquery_id == sq.id and o.rank == 0), None)
        if hop_at is None:
            continue
        hop = offered[hop_at]
        if first[hop.key] < hop_at or any(o.subquery_id == parent and o.key == hop.key for o in offered):
            continue  # offered before, or its parent's search ranked it too
        parent_next = next((o for i, o in enumerate(offered)
                            if i > hop_at and o.subquery_id == parent and first[o.key] == i), None)
        if parent_next is None:
            continue
        if _stands_out(offered, hop):
            # the hop's search is sure of it; unless the question's search is as sure of its next: then a gap backs
            # neither, and the scores decide
            if _stands_out(offered, parent_next) and hop.score < parent_next.score - SCORE_TIE:
                deferrals.append(BridgeDeferral(hop, parent_next))
            continue
        if hop.score < parent_next.score - SCORE_TIE:
            deferrals.append(BridgeDeferral(hop, parent_next))
            continue
        parent_best = next((o for o in offered if o.subquery_id == parent and o.rank == 0), None)
        if parent_best is not None and parent_next.rank == 1 and document_of(hop.hit) == document_of(parent_best.hit):
            deferrals.append(BridgeDeferral(hop, parent_next, same_document=document_of(parent_best.hit)))
    return deferrals


def deferred_order(policy: RetrievalPolicy, run: QueryRun, offered: list[Offer]) -> list[Offer]:
    """The run's turn order with rule 3 applied: a deferred bridge hop's best passage right after its parent's next."""
    order = list(offered)
    for deferral in bridge_deferrals(policy, run, offered):
        order.remove(deferral.parent_next)
        order.insert(order.index(deferral.hop), deferral.parent_next)
    return order


def _last_found_by_question(policy: RetrievalPolicy, plan: ExecutedPlan, offered: list[Offer]) -> int | None:
    question = {sq.id for sq in plan.subqueries if sq.role == "question"}
    return max((i for i, o in enumerate(offered)
                if o.subquery_id in question and o.score >= policy.coverage_min_score), default=None)


def _unfound_moved(policy: RetrievalPolicy, run: QueryRun, order: list[Offer]) -> tuple[list[Offer], list[Offer]]:
    """Rule 4 over an order of offers: the order with the hops' unfound passages moved right after the question's
    last found one, and those passages (see `unfound_hop_passages`)."""
    plan = run.plan
    last = (_last_found_by_question(policy, plan, order)
            if policy.bridge_when_needed and run.reranked() else None)
    if last is None:
        return order, []
    hops = {sq.id for sq in plan.subqueries if sq.role in ("bridge", "hop")}
    unfound = [o for o in order[:last] if o.subquery_id in hops and o.score < policy.coverage_min_score]
    if not unfound:
        return order, []
    moved = {id(offer) for offer in unfound}
    return [o for o in order[:last + 1] if id(o) not in moved] + unfound + order[last + 1:], unfound


def _question_page_moved(policy: RetrievalPolicy, run: QueryRun,
                         order: list[Offer]) -> tuple[list[Offer], list[Offer]]:
    """Rule 5 over an order of offers: the order with the hops' passages from the question's best document that the
    question's search did not rank moved right after the question's last found passage, and those passages (see
    `question_page_passages`)."""
    plan = run.plan
    last = (_last_found_by_question(policy, plan, order)
            if policy.bridge_when_needed and run.reranked() else None)
    if last is None:
        return order, []
    question = {sq.id for sq in plan.subqueries if sq.role == "question"}
    question_best = next(o for o in order if o.subquery_id in question and o.rank == 0)
    page, ranked_by_question = document_of(question_best.hit), {o.key for o in order if o.subquery_id in question}
    hops = {sq.id for sq in plan.subqueries if sq.role in ("bridge", "hop")}
    moved = [o for o in order[:last] if o.subquery_id in hops and o.rank > 0
             and o.key not in ranked_by_question and document_of(o.hit) == page]
    if not moved:
        return order, []
    ids = {id(offer) for offer in moved}
    return [o for o in order[:last + 1] if id(o) not in ids] + moved + order[last + 1:], moved


def question_page_passages(policy: RetrievalPolicy, run: QueryRun, offered: list[Offer]) -> list[Offer]:
    """Rule 5 over an order of offers: the hops' passages (roles `bridge` and `hop`) below each one's best, from the
    document the question's best passage is from, that the question's search did not rank and that bid before the
    last passage that search found (at or above COVERAGE_MIN_SCORE). None without the cross-encoder's
    probabilities."""
    return _question_page_moved(policy, run, offered)[1]


def unfound_hop_passages(policy: RetrievalPolicy, run: QueryRun, offered: list[Offer]) -> list[Offer]:
    """Rule 4 over an order of offers: the hops' passages (roles `bridge` and `hop`) scoring under
    COVERAGE_MIN_SCORE that bid before the last passage the question's search found (at or above it). None
    without the cross-encoder's probabilities (the scores are then the search's order)."""
    return _unfound_moved(policy, run, offered)[1]


def evidence_order(policy: RetrievalPolicy, run: QueryRun, offered: list[Offer]) -> list[Offer]:
    """The run's turn order with rules 3, 4 and 5 applied: a deferred bridge hop's best passage right after its
    parent's next; then the hops' passages their searches did not find, then their other passages from the
    question's best document, right after the question's last found one."""
    return _question_page_moved(policy, run, _unfound_moved(policy, run, deferred_order(policy, run, offered))[0])[0]


def deferral_note(deferral: BridgeDeferral) -> str:
    """The plan's note for one of rule 3's decisions: what moved and why."""
    hop, parent = deferral.hop.subquery_id, deferral.parent_next.subquery_id
    why = (f"it is from {parent}'s best document ({deferral.same_document!r}): the hop stayed on its parent's page, "
           f"where {parent}'s search put its own second passage first" if deferral.same_document is not None
           else f"it scored {deferral.hop.score:.3f} for its search against {deferral.parent_next.score:.3f} for the "
                f"question")
    return f"{hop}'s best passage went after {parent}'s next: {parent}'s search did not rank it, and {why}"


def _out_of_budget(policy: RetrievalPolicy, before: list[Offer], after: list[Offer], moved: list[Offer]) -> list[Offer]:
    """The `moved` offers that were within the context budget in the order `before` and are not in `after`."""
    if not moved:
        return []
    was_in = {source.node_id for source in sources_within(before, budget=policy.context_budget)}
    still_in = {source.node_id for source in sources_within(after, budget=policy.context_budget)}
    return [o for o in moved if o.hit.node.node_id in was_in and o.hit.node.node_id not in still_in]


def moved_notes(policy: RetrievalPolicy, run: QueryRun, offered: list[Offer]) -> list[str]:
    """Rules 4 and 5's notes: each hop passage they moved out of the context budget, and why."""
    deferred = deferred_order(policy, run, offered)
    after_unfound, unfound = _unfound_moved(policy, run, deferred)
    after_page, on_question_page = _question_page_moved(policy, run, after_unfound)
    unfound_out = _out_of_budget(policy, deferred, after_unfound, unfound)
    page_out = _out_of_budget(policy, after_unfound, after_page, on_question_page)
    if not unfound_out and not page_out:
        return []
    question = next(sq.id for sq in run.plan.subqueries if sq.role == "question")

    def went(o: Offer) -> str:
        return f"{o.subquery_id}'s passage ranked {o.rank + 1} went after {question}'s found passages: it"

    return ([f"{went(o)} scored {o.score:.3f}, under COVERAGE_MIN_SCORE {policy.coverage_min_score}"
             for o in unfound_out]
            + [f"{went(o)} is from {question}'s best document ({document_of(o.hit)!r}), whose sections {question}'s "
               f"search ranked without it" for o in page_out])


def hop_notes(policy: RetrievalPolicy, run: QueryRun) -> list[str]:
    """What the rule did to the plan, for its notes: hops skipped, hops whose passages were held back, hops whose
    best passage went after their parent's next, and hops' passages that left the budget (rules 4 and 5)."""
    notes = [f"{sq_id} skipped: {reason}" for sq_id, reason in run.skipped_hops.items()]
    handed = passages_handed_over(policy, run)
    offered = offers(run.plan, handed, per_subquery=kept_per_subquery(policy, run.path))
    notes += [deferral_note(d) for d in bridge_deferrals(policy, run, offered)]
    notes += moved_notes(policy, run, offered)
    for sq in run.plan.subqueries:
        parent = bridge_parent(run.plan, sq)
        report = run.reports.get(sq.id)
        if parent is not None and run.ranked.get(sq.id) and not handed.get(sq.id) and report is not None:
            notes.append(f"{sq.id} found nothing its parent names (best {report.best_score or 0.0:.3f}, under "
                         f"COVERAGE_MIN_SCORE {policy.coverage_min_score}): none of its passages went to the "
                         f"writer; its share went to {parent}'s next best passages")
    return notes
