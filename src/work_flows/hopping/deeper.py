"""Bridge chains deeper than two hops, offline: after each hop, one more hop while the question still needs one.

The rule planner's bridge plan is s1 = the question, s2 = `{s1} <the question>` (agents/rule_planner.py). A
three- or four-hop question ("Which airport serves the birthplace of the director of Glass Harbor?") needs a
page neither of them reaches: s1 finds the film, s2 the director, and the airport's page is one more hop away.
So when the last layer of such a chain has been searched (`next_hop`, asked by `schedule`):

- **a bridge hop** `s{n+1}` = `{sN} <the words still missing>` (parent: the last hop) when some content word
  of the question is on none of the chain's kept pages (each hop's best passage; first five letters match,
  as in skip.py) but on some page of the collection (`KnownNames.held`: "How often do the black maintainers try
  to put out a new release?" sent two hops after "often", which black's documentation never writes), and the
  last hop moved the chain: it is covered and explained a word its ancestors had left. It searches each named
  span of the last hop's best page joined with those words (bridge.py), away from every ancestor's kept pages.
  A deeper hop moved the chain only if its best passage was found by one of those searches (`followed_parent`):
  a retry also tries the names of the last hop's lower-ranked pages, which the chain did not reach, and their
  confident matches ("Arno Kessel" after Tallowmere's page) took the slot of a page the writer needed.
- **a name search** `s{n+1}` = `<name> <the missing words of its clauses>` when the chain stopped moving but
  the question names something whose words no kept page explains ("... is Dunmere in?", "... where did
  Veloria have trading ports?"): multi-hop questions often name the last hop's own subject, and its page is then
  what is missing. The name is searched with the missing words of the question's opening clause (what is
  asked) and of its own clause (`name_search_words`), since the other clauses describe other hops. Each name
  is searched once. A hop that found the page of a name the question gives (a name search, or a deeper hop
  whose own words hold the name) starts the chain again from it (`restart_of`, `words_left`): the words of the
  name's clauses that no page found since holds are still to find, whatever the earlier pages, found about
  other things, held ("Corvask Gin" → "last tide regatta held country released", not "last released").
- **stop** otherwise, or when the plan is full: at most SUBQUERY_MAX subqueries and no more than
  CONTEXT_BUDGET, since attribution hands the writer one passage per subquery and a hop whose best passage
  cannot reach the writer is wasted. A deeper hop (s3, s4, ...) that found nothing (uncovered) or explained
  no missing word (the marginal-gain stop) hands the writer none of its passages, so its slot goes back to
  the earlier hops' next passages; no bridge hop follows it.

The plan's notes say which hops were added and why, and where the chain stopped. Only the rule planner's
generic chain grows: an LLM's plan states the hops it judged necessary, and a comparison's subqueries do not
chain. Off with BRIDGE_DEEPER_HOPS=false.
"""

from __future__ import annotations

from dataclasses import dataclass

from llama_index.core.schema import NodeWithScore

from ...core.language import ENGLISH, Language
from ...core.names import NO_NAMES, KnownNames
from ...core.plan import PARENT_REFERENCE, ExecutedPlan, Hints, SubQuery, layer_plan, parent_references
from ...core.sources import passage_text
from ...core.text import content_words, unexplained_words
from ..policy import RetrievalPolicy
from ..run import QueryRun
from .bridge import bridge_queries, clause_breaks, named_spans, phrased_queries, title_words
from .skip import bridge_parent, passages_handed_over

NAME_SPANS_LIMIT = 12  # a question names a handful of things


@dataclass(frozen=True)
class Deepening:
    """What `next_hop` decided after the chain's last layer: a hop to add, or none; and why."""

    hop: SubQuery | None
    notes: tuple[str, ...] = ()
    idle: str | None = None  # the last hop, when it added nothing and hands the writer nothing


def bridge_chain(plan: ExecutedPlan, *, language: Language = ENGLISH) -> list[str]:
    """The ids of the rule planner's bridge chain in order (s1 = the question, s2 = `{s1} <the question>`, then
    each hop this module added: `{prev} <question words>`, or a search of question words after prev), or []
    when the plan is anything else."""
    if len(plan.subqueries) < 2:
        return []
    first, second, *deeper = plan.subqueries
    if bridge_parent(plan, second) != first.id:
        return []
    chain = [first.id, second.id]
    asked = set(content_words(plan.query, language.stopwords))
    for sq in deeper:
        words = content_words(PARENT_REFERENCE.sub(" ", sq.text), language.stopwords)
        if sq.parents != [chain[-1]] or parent_references(sq.text) not in ([], sq.parents) or not set(words) <= asked:
            return []
        chain.append(sq.id)
    return chain


def _best_passages(policy: RetrievalPolicy, run: QueryRun, ids: list[str]) -> dict[str, NodeWithScore]:
    """Each subquery's best passage that may reach the writer (skip.py's rule 2 and idle hops respected)."""
    handed = passages_handed_over(policy, run)
    return {sq_id: handed[sq_id][0] for sq_id in ids if handed.get(sq_id)}


def next_hop(policy: RetrievalPolicy, run: QueryRun, *, language: Language = ENGLISH) -> Deepening | None:
    """After the chain's last searched layer: the next hop and why, a stop worth noting, or None (nothing to say)."""
    if not policy.bridge_deeper_hops or run.path != "dag" or run.partial_reason is not None:
        return None
    room = min(policy.subquery_max, policy.context_budget)
    if room <= 2:
        return None  # a third hop could never reach the writer (budget 2): nothing to decide, nothing to note
    chain = bridge_chain(run.plan, language=language)
    if len(chain) < 2 or any(sq_id in run.skipped_hops or sq_id not in run.reports for sq_id in chain):
        return None
    last, earlier = chain[-1], chain[:-1]
    question = run.plan.query
    best_hits = _best_passages(policy, run, chain)
    best = {sq_id: passage_text(hit) for sq_id, hit in best_hits.items()}
    titles = {sq_id: _title(hit) for sq_id, hit in best_hits.items()}
    left_before = words_left(run.plan, earlier, best, restart_of(run.plan, earlier, best, titles, language=language),
                             language=language)
    gain = [w for w in left_before
            if last in best and not unexplained_words(w, [best[last]], stopwords=language.stopwords)]
    report = run.reports[last]
    hop_of_last = next(sq for sq in run.plan.subqueries if sq.id == last)
    parent_best = passages_handed_over(policy, run).get(earlier[-1], [])[:1]
    followed = len(chain) == 2 or not parent_best or followed_parent(
        run.rewritten.get(last, hop_of_last.text), run.searched_as.get(last), parent_best[0], question,
        policy.bridge_max_entities, run.known_names, language=language)
    # The last hop moved the chain: it reached a page, from the previous hop's own page, that explains something new.
    moved = report.status == "covered" and bool(gain) and followed
    notes: list[str] = []
    idle = None
    if len(chain) > 2 and not moved:
        idle = last
        best.pop(last, None)
        why = (f"it found no page (best {report.best_score or 0.0:.3f}, under COVERAGE_MIN_SCORE "
               f"{policy.coverage_min_score})" if report.status != "covered"
               else f"its best passage explains none of the words {', '.join(earlier)} left "
                    f"({', '.join(left_before)})" if not gain
               else f"its best passage was found by {run.searched_as.get(last)!r}, a search from a page other "
                    f"than {earlier[-1]}'s best ({_title(parent_best[0])!r}), which the chain does not lead to")
        notes.append(f"{last} added nothing: {why}; none of its passages went to the writer")
    restart = restart_of(run.plan, chain, best, titles, language=language)
    left = words_left(run.plan, chain, best, restart, language=language)
    # A word no page of the collection has ("often", asked of documentation that never writes it) is no page's to
    # explain: the next hop from the last page searches only the words some page has. A name the question gives is
    # searched as written, its words held or not: a name's spelling ("al Quada") still finds its page.
    findable = run.known_names.held(left)
    searched_names = {name for sq in run.plan.subqueries for name in sq.hints.must_include}
    name = unexplained_name(question, left, searched=searched_names, language=language)
    hop_id = _free_id(run.plan)
    missing = ", ".join(left)
    hop: SubQuery | None = None
    if left and moved and findable:
        hop = SubQuery(id=hop_id, text=f"{{{last}}} {' '.join(findable)}", parents=[last], role="hop")
        pages = (f"the kept pages since {restart[0]} found the page of {restart[1]!r}, which the question names (the "
                 f"pages before it were found about other hops)" if restart is not None
                 else f"the kept pages of {', '.join(chain)}")
        notes.append(f"{hop_id} added: {', '.join(findable)} on none of {pages}, and {last} explained "
                     f"{', '.join(gain)}: one more hop from {last}'s best page")
    elif left and moved:
        notes.append(f"no hop after {last}: {missing} on none of the kept pages, and on no page of the collection")
    elif left and name is not None:
        # The chain stopped moving, but the question names something no kept page explains ("... is Dunmere
        # in?"): that thing's own page is missing, and a search for the name is what is left to try.
        rest = [w for w in name_search_words(question, name, language=language) if w in set(left)]
        hop = SubQuery(id=hop_id, text=" ".join([name, *rest]), parents=[last], hints=Hints(must_include=[name]),
                       role="hop")
        notes.append(f"{hop_id} added: the question names {name!r}, which none of the kept pages explains "
                     f"({missing} on none): a search for it")
    if hop is not None and len(run.plan.subqueries) >= room:
        notes[-1] = (f"no hop after {last}: {missing} still to find, but the plan has {room} subqueries "
                     f"(SUBQUERY_MAX / CONTEXT_BUDGET)")
        hop = None
    if hop is None and idle is not None:
        notes.append("the chain stops")
    if not notes:
        return None  # nothing left, or s2 moved nowhere (skip.py's notes say what happened to it)
    return Deepening(hop=hop, notes=tuple(notes), idle=idle)


def _title(hit: NodeWithScore) -> str:
    return str(hit.node.metadata.get("title", ""))


def followed_parent(searched_text: str, searched_as: str | None, parent_best: NodeWithScore, question: str,
                    max_entities: int, known: KnownNames = NO_NAMES, *, language: Language = ENGLISH) -> bool:
    """Whether the hop's best passage was found by one of the bridge searches from its parent's best passage (the
    page the chain reached and the writer is handed), given the text the hop was searched with (a resolver's
    rewrite, or its own), the query behind its best passage (`run.searched_as`) and the parent's best passage.

    A retry also tries the entities of the parent's lower-ranked pages; a deeper hop's parent is a page the chain
    reached, and its next pages are mostly ones no hop asked for ("Arno Kessel" after Tallowmere's page), whose
    confident match the chain does not lead to. True when there is nothing to judge: no query recorded, or a
    rewrite that names no parent any more (an LLM resolver read the parent and wrote its own search).
    """
    if searched_as is None or not parent_references(searched_text):
        return True
    queries = [*bridge_queries(searched_text, _title(parent_best), parent_best.node.get_content(), question,
                               max_entities, known=known, language=language),
               *phrased_queries(_title(parent_best), parent_best.node.get_content(), question, max_entities,
                                known=known, language=language)]
    fallback = " ".join(f"{_title(parent_best)} {PARENT_REFERENCE.sub(' ', searched_text)}".split())
    return searched_as in {query.text for query in queries} | {fallback}


def words_left(plan: ExecutedPlan, chain: list[str], best: dict[str, str], restart: tuple[str, str] | None, *,
               language: Language = ENGLISH) -> list[str]:
    """The question's content words still to find after `chain` (`best`: each hop's best passage, if it has one):
    those on none of the chain's pages and, once a hop has searched a name the question gives and found its
    page (`restart`: that hop and the name, from `restart_of`), those of the name's clauses (`name_search_words`)
    on none of the pages found since, in the question's order.

    Reaching the page of a name the question gives starts the chain again from it ("Corvask Gin", after the first
    hops found the 2019 Tide Regatta): what the earlier pages held was found about other things, and counting
    it as explained left the hop from the named page "last released" to search with, not "last tide regatta
    held country released".
    """
    question = plan.query
    left = set(unexplained_words(question, [best[sq_id] for sq_id in chain if sq_id in best],
                                 stopwords=language.stopwords))
    if restart is not None:
        hop_id, name = restart
        since = [sq_id for sq_id in chain[chain.index(hop_id):] if sq_id in best]
        left |= set(unexplained_words(" ".join(name_search_words(question, name, language=language)),
                                      [best[sq_id] for sq_id in since], stopwords=language.stopwords))
    return [word for word in dict.fromkeys(content_words(question, language.stopwords)) if word in left]


def restart_of(plan: ExecutedPlan, chain: list[str], best: dict[str, str], titles: dict[str, str], *,
               language: Language = ENGLISH) -> tuple[str, str] | None:
    """The chain's last hop after the first that searched a name the question gives and found a page (one in
    `best`), with that name; or None. Such a hop is a name search (the name in `Hints.must_include`, no `{sN}`),
    or a deeper hop whose own words hold the name and whose best page (`titles`) is the name's page ("{s2}
    predated korvin" found Korvin's page). The generic s2 is never one: it searches the whole question."""
    hops = {sq.id: sq for sq in plan.subqueries}
    names = [language.possessive_end.sub("", span)
             for span in named_spans(plan.query, "", NAME_SPANS_LIMIT, language=language)]
    for index in range(len(chain) - 1, 0, -1):
        hop = hops.get(chain[index])
        if hop is None or hop.id not in best:
            continue
        if hop.hints.must_include and not parent_references(hop.text):
            return hop.id, hop.hints.must_include[0]
        if index >= 2:
            searched = set(content_words(PARENT_REFERENCE.sub(" ", hop.text), language.stopwords))
            page = title_words(titles.get(hop.id, ""), language=language)
            name = next((n for n in names if page and set(content_words(n, language.stopwords)) == page <= searched),
                        None)
            if name is not None:
                return hop.id, name
    return None


def name_search_words(question: str, name: str, *, language: Language = ENGLISH) -> list[str]:
    """The content words of `question` to search a name it gives with, the name's own words left out: those of
    the question's opening clause (what is asked: "Which region of the country") and of the clause that holds
    the name ("..., is Dunmere in?"), in the question's order; every content word but the name's when the name
    is not in the question as written. Words of the other clauses describe other hops of the chain, and searched
    with the name they pull its page down (in "Dunmere region hero novel adapted" most words are about the
    novel, not Dunmere)."""
    name_words = set(content_words(name, language.stopwords))
    at = question.find(name)
    if at < 0:
        return [w for w in content_words(question, language.stopwords) if w not in name_words]
    breaks = clause_breaks(question, language=language)
    opening_end = breaks[0].start() if breaks else len(question)
    start = max([0, *(b.end() for b in breaks if b.end() <= at)])
    end = min([len(question), *(b.start() for b in breaks if b.start() >= at + len(name))])
    words = [*content_words(question[:opening_end], language.stopwords),
             *content_words(question[start:end], language.stopwords)]
    return [w for w in dict.fromkeys(words) if w not in name_words]


def _free_id(plan: ExecutedPlan) -> str:
    taken = {sq.id for sq in plan.subqueries}
    number = len(plan.subqueries) + 1
    while f"s{number}" in taken:
        number += 1
    return f"s{number}"


def unexplained_name(question: str, left: list[str], *, searched: set[str] | frozenset[str] = frozenset(),
                     language: Language = ENGLISH) -> str | None:
    """The first name the question gives ("Dunmere", "Paper Lanterns") whose words are all among `left`, the words
    no kept page explains, and that no hop has searched yet; a capitalised first word is a sentence opener
    ("Besides ..."), not a name."""
    missing = set(left)
    for span in named_spans(question, "", NAME_SPANS_LIMIT, language=language):
        name = language.possessive_end.sub("", span)
        words = content_words(name, language.stopwords)
        opener = question.startswith(span) and len(words) == 1
        if words and not opener and set(words) <= missing and name not in searched:
            return name
    return None


def apply_deepening(run: QueryRun, deepening: Deepening) -> None:
    """Record the decision on the run: the new hop joins the plan (a new last layer), notes, idle hops."""
    plan = run.plan
    notes = [*plan.notes, *deepening.notes]
    if deepening.idle is not None:
        run.idle_hops[deepening.idle] = deepening.notes[0] if deepening.notes else "added nothing"
        report = run.reports.get(deepening.idle)
        if report is not None:
            report.kept_node_ids = []
    if deepening.hop is None:
        run.plan = plan.model_copy(update={"notes": notes})
        return
    grown = plan.model_copy(update={"subqueries": [*plan.subqueries, deepening.hop], "notes": notes})
    run.plan = grown.model_copy(update={"layers": layer_plan(grown)})
