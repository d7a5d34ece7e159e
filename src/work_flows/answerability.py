"""Whether the kept passages answer the question at all, or the answer should say the collection does not.

Retrieval always returns something: asked "How do I roll back a Kubernetes deployment?" over a package's docs, the
nearest passages are about something else, and an extractive or LLM writer still quotes them. So before writing,
the cross-encoder reads the question against each kept passage (with its title, as the reranker does) and against
each of its sentences (after the title, as the extractive writer does); the best of those probabilities is the
answer score. Under ABSTAIN_BELOW the run abstains: the answer says the collection does not answer the question and
names the closest sources, and no writer or verifier runs.

A question about code the search never came across is held to a higher bar. Code is spelled one way: asked about
`--line-ranges-auto`, a passage on `--line-ranges` scores well for the words it shares and still says nothing about
the option asked for. So when the question names code (`core/names.code_names`: a `span`, an --option, a dotted or
underscored identifier) that no passage any subquery's search found contains, the best kept passage must score
ABSTAIN_UNKNOWN_NAME_BELOW (0.5: the cross-encoder finds an answer more likely than not). The passages *found*, not
the ones kept: at budget 2 a comparison's second side may have been found and not kept. Prose names are not held so:
they have aliases, inflections and misspellings ("JFK", "Margaraviate") that a string test would take for absence.

Code the collection writes around but never names is not documented there. Asked "How do I use asyncio.TaskGroup to
cancel sibling tasks on error?", Flask's documentation, which writes about asyncio and never about a TaskGroup, keeps
its background-tasks section, which scores well enough even for the raised bar. So when every piece of code the
question names is a dotted name whose qualifier some page writes and whose member no page does (`undocumented_members`,
over the words the collection records at ingest), the run abstains whatever the passages score, naming the code.

A chain's evidence is read together. "When was the last time the Olympics were held in the country that released
Brellow Vodka?" is answered by two pages, the vodka's (a Kestrovian company's brand) and the Olympics' (held in
Kestrovia in 2031), and neither, nor any of their sentences, answers it alone. So when nothing reaches the bar, each
two kept sources' best sentences are read as one text (`joined_evidence`), and the question is answered when one
such pair reaches ABSTAIN_JOINED_BELOW (0.9, well above ABSTAIN_BELOW: two passages share more words with any
question than one, and questions about invented films and people reach 0.6 this way). Not when the question names
code no passage found contains.

A comparison is answered side by side (`every_side_answered`), and a side the collection does not document at all
(`undocumented_sides`: nothing its own search found mentions it, is headed by it or scores ABSTAIN_BELOW for it) makes
the run abstain, naming the side: "fastapi vs flask?" asked of Flask's documentation is not a comparison it can answer.

With an LLM writing, the model reads the kept passages as well, and may still find that they do not answer ("Answer:
unknown", as its prompt asks): the run then abstains as if the cross-encoder had (`declined_reason`), with the
model's words on what the passages lack as the reason, and nothing is verified.

Whole passages and single sentences both count because each misses cases the other catches: a table row or a list
is one "sentence" that reads as noise alone, and a long passage buries the one sentence that answers. The question
is what is judged, never a subquery: a subquery's passage can be a perfect answer to the subquery (the page of the
film) and still not answer what was asked. Calibrated on answerable questions and on questions from other domains
and near misses against every benchmark collection: ARCHITECTURE.md, "Abstain when nothing answers".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

from ..agents.writer import NO_EVIDENCE_ANSWER
from ..core.markup import plain
from ..core.names import KnownNames, Place, headed_by, names_all
from ..core.replies import DECLINING_WORDS
from ..core.result import Source, WrittenAnswer
from ..core.sources import source_title
from ..core.text import tokens

# `build.yml`, `my_cli.py`, `Express.js`: a short lower-case last part is a file's kind, not a member of a namespace
_FILE_KIND = re.compile(r"[a-z0-9]{1,4}")
# `[tool.mytool.envs.linkcheck]`: a table of the user's own configuration file, its last part a name the user chose
_TABLE_HEADER = re.compile(r"\[\[?[^\[\]]+\]\]?")


@dataclass(frozen=True)
class AnswerScore:
    """The best probability that a kept passage, or one of its sentences, answers the question; and whose."""

    score: float
    source_number: int | None  # 1-based, None when there are no sources


def answer_score(passage_scores: Sequence[float], sentence_scores: Sequence[Sequence[float]]) -> AnswerScore:
    """The best of each source's passage score and its sentences' scores (`sentence_scores[i]` are source i's)."""
    best = AnswerScore(0.0, None)
    for number, (passage, sentences) in enumerate(zip(passage_scores, sentence_scores, strict=True), start=1):
        score = max([passage, *sentences])
        if best.source_number is None or score > best.score:
            best = AnswerScore(score, number)
    return best


def unfound_names(names: Sequence[str], found: Iterable[str]) -> list[str]:
    """The names (as `code_names` gives them) that none of the `found` texts contains, case-folded and read as a
    reader sees them (`plain`: no backticks or link markup in the way). `found` is not read when there are no names."""
    if not names:
        return []
    haystack = "\n".join(" ".join(plain(text).split()).casefold() for text in found)
    return [name for name in names if " ".join(plain(name).split()).casefold() not in haystack]


def undocumented_members(names: Sequence[str], known: KnownNames) -> list[str]:
    """The dotted code among `names` (`asyncio.TaskGroup`, `click.Spinner()`) whose qualifier the collection writes and
    whose member it never does: every word of the qualifier is on some page, no word of the member on any
    (`KnownNames.held`, as the collection records its words). All of `names` must be such, else [] (a question that
    also names code the collection may document asks about that); [] too when the collection records no words, and
    for a file's name (`build.yml`). A user's own code is not caught: `show_profile` has no qualifier, and the
    members of `request.user_id` or `g.current_user` are words every collection writes; nor is a table of the user's
    configuration (`[tool.mytool.envs.linkcheck]`), whose last part is the user's own name."""
    if not names or not known.words:
        return []
    for name in names:
        if _TABLE_HEADER.fullmatch(name.strip("`")):
            return []
        qualifier, dot, member = name.strip("`@").removesuffix("()").rpartition(".")
        qualifier_words, member_words = tokens(qualifier), tokens(member)
        if not dot or not qualifier_words or not member_words or _FILE_KIND.fullmatch(member):
            return []
        if len(known.held(qualifier_words)) < len(qualifier_words) or known.held(member_words):
            return []
    return list(names)


def undocumented_member_reason(members: Sequence[str], abstain_below: float) -> str | None:
    """Why the run abstains when the question asks only about `members` (`undocumented_members`) of namespaces the
    collection writes about; None when there are none, or abstaining is off (`abstain_below` 0, ABSTAIN_BELOW)."""
    if not members or abstain_below <= 0:
        return None
    named = ", ".join(members)
    return (f"the question names {named}, and no page of the collection writes the member's name, though its pages "
            f"write the name before the dot: the collection does not document it")


@dataclass(frozen=True)
class AbstainBar:
    """The score some kept passage must reach against the question, and what set it."""

    threshold: float
    unfound: tuple[str, ...] = ()  # code the question names that no passage found contains
    setting: str = "ABSTAIN_BELOW"
    joined: float = 0.0  # what two kept sources' best sentences read together must reach instead; 0: not asked


def abstain_bar(*, abstain_below: float, unknown_name_below: float, unfound: Sequence[str],
                joined_below: float = 0.0) -> AbstainBar:
    """ABSTAIN_BELOW, raised to ABSTAIN_UNKNOWN_NAME_BELOW when the question names code no passage found contains;
    the joined evidence of two sources may answer instead at `joined_below` (ABSTAIN_JOINED_BELOW), except under the
    raised bar. Abstaining off (ABSTAIN_BELOW 0) stays off."""
    if abstain_below <= 0:
        return AbstainBar(abstain_below)
    if not unfound or unknown_name_below <= abstain_below:
        return AbstainBar(abstain_below, joined=joined_below)
    return AbstainBar(unknown_name_below, tuple(unfound), "ABSTAIN_UNKNOWN_NAME_BELOW")


def joined_evidence(sentences: Sequence[Sequence[str]], scores: Sequence[Sequence[float]]) -> list[str]:
    """Each two sources' best sentences (by `scores[i]`, source i's sentences' scores against the question) as one
    text, in source order: [1]+[2], [1]+[3], ..., [2]+[3], ... A source without sentences takes no part; fewer than
    two with sentences: none."""
    best = [own[max(range(len(own)), key=marks.__getitem__)]
            for own, marks in zip(sentences, scores, strict=True) if own]
    return [f"{first} {second}" for first, second in combinations(best, 2)]


def abstain_reason(best: AnswerScore, bar: AbstainBar, joined: float | None = None) -> str | None:
    """Why the answer should abstain, or None when a kept passage answers well enough, or the best `joined` evidence
    reaches `bar.joined` (None: not scored), or abstaining is off."""
    if bar.threshold <= 0:
        return None
    if best.source_number is None:
        return "no passage was found"
    joined = joined if bar.joined > 0 else None  # a joined score counts only where the bar asks for one
    if best.score >= bar.threshold or (joined is not None and joined >= bar.joined):
        return None
    unfound = (f"the question names {', '.join(bar.unfound)}, which no passage found contains, and "
               if bar.unfound else "")
    together = (f"; read together, two sources' best sentences score {joined:.3f}, under ABSTAIN_JOINED_BELOW "
                f"{bar.joined}" if joined is not None else "")
    return (f"no kept passage answers the question: {unfound}the best, source [{best.source_number}], scores "
            f"{best.score:.3f} against the question, under {bar.setting} {bar.threshold}{together}")


def every_side_answered(side_passages: Sequence[Sequence[tuple[float, str, Place]]], side_code: Sequence[Sequence[str]],
                        bar: float, room: int | None = None) -> bool:
    """Whether each side of a comparison has a kept passage that answers the side. For a side named by code: the
    passage the collection gives that code, its place names it (`headed_by`: the section `--diff` heads, the Summary
    of `sane_lists.md`), whatever it scores against the side's search ("--diff makes a CI step fail" is not what the
    `--diff` section says, and that is the answer); or a passage that names it as written (`names_all`, read as a
    reader sees it) and whose reranker probability for the side's own search reaches `bar`. For a side named in prose:
    a passage at the bar.
    `side_passages[i]` are side i's kept passages as (score, text, place). `room` is how many passages the budget
    holds: a comparison of more sides than that is answered when the sides answered fill it (two passages cannot show
    three extensions). No sides: False.

    A comparison is answered side by side. "What's the difference between -S and -C?" is answered by the two options'
    own sections, and no one of them scores against the whole question; a side the collection does not document
    (`--line-ranges-auto` beside `--line-ranges`, `httpx` in another project's docs) finds no passage that answers it.
    """
    answered = [any(headed_by(place, code) or (score >= bar and (not code or names_all(plain(text), code)))
                    for score, text, place in passages)
                for passages, code in zip(side_passages, side_code, strict=True)]
    if room is not None and len(answered) > room:
        return sum(answered) >= room
    return bool(answered) and all(answered)


def undocumented_sides(side_passages: Sequence[Sequence[tuple[float, str, Place]]], side_names: Sequence[str],
                       side_code: Sequence[Sequence[str]], bar: float) -> list[str]:
    """The names of the sides the collection does not document: of the passages their own search found, kept or not
    (`side_passages[i]`, as (score, text, place)), none reaches `bar` for that search, none is in a place headed by the
    side's code (or its name, when it has no code: `headed_by`), and none mentions the side (`mentions`).

    "fastapi vs flask for a small internal API?", asked of Flask's documentation: the question's own passages (Flask's
    class-based views, its error handlers) score well enough against the question, and an answer from them would seem
    to compare while saying nothing about fastapi, which no passage mentions. Weaker than `every_side_answered` on
    purpose: it asks whether the collection says anything about a side, not whether a kept passage answers it.
    Documentation writes `wheel.py-api` as `py-api` under a `[tool.scikit-build.wheel]` table, "state (string)" heads
    the `state` condition's section that scores 0.03 against the bare word, and "Is click.echo similar to print?" is
    answered by a page that mentions print and is headed by neither."""
    return [name for passages, name, code in zip(side_passages, side_names, side_code, strict=True)
            if not any(score >= bar or headed_by(place, code or [name]) or mentions(plain(text), name)
                       for score, text, place in passages)]


_CALLED = re.compile(r"([A-Za-z_][\w.]*)\(")  # the callable of a call written with its arguments: `abort(404)`


def mentions(text: str, name: str) -> bool:
    """Whether `text` says any word of `name` (case aside, a whole word: `Rc` is not in "source"). A side's name may
    carry the question's description ("standalone SmartyPants library"), so any of its words will do; a call written
    with its arguments is said by its callable's name (`abort(404)` by a page that documents `abort`)."""
    words = {word for word in name.strip("` ").split() if len(word) >= 2} | set(_CALLED.findall(name))
    return any(re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text, re.IGNORECASE) for word in words)


def undocumented_side_reason(sides: Sequence[str], bar: float) -> str | None:
    """Why a comparison should abstain when the collection does not document `sides` (`undocumented_sides` at `bar`,
    ABSTAIN_BELOW); None when there are none, or abstaining is off (`bar` 0)."""
    if not sides or bar <= 0:
        return None
    named = ", ".join(repr(side) for side in sides)
    return (f"the collection does not document {named}: nothing the side's own search found mentions it, is headed by "
            f"it or scores ABSTAIN_BELOW {bar} for it")


def declined_reason(answer: WrittenAnswer, abstain_below: float) -> str | None:
    """Why the run abstains when the writer itself said the sources do not answer (`answer.declined`: an LLM's
    "Answer: unknown"), or None: it did not, or abstaining is off (`abstain_below` 0, ABSTAIN_BELOW).

    The cross-encoder reads topic, not answerability: "How do I register my pytest fixture with Flask's test client?"
    scores Flask's testing page well, and an LLM that reads the page can still find nothing there that answers. Its
    answer "unknown" is then an abstention like the cross-encoder's, shown and counted as one."""
    if not answer.declined or abstain_below <= 0:
        return None
    said = what_the_writer_said(answer)
    return f"the writer read the kept passages and said they do not answer the question{f': {said}' if said else ''}"


def what_the_writer_said(answer: WrittenAnswer) -> str:
    """The declining writer's own words on what the passages lack, on one line ("" when it said only "unknown")."""
    said = " ".join(answer.text.split())
    return "" if said.casefold().rstrip(".") in DECLINING_WORDS else said


def abstention_text(sources: Sequence[Source], *, closest: int = 3, undocumented: Sequence[str] = (),
                    writer_said: str = "") -> str:
    """The answer when the run abstains: that the collection does not answer, or what of the question it does not
    document (a comparison's `undocumented` sides), where it came closest, and what a declining writer said of the
    passages (`writer_said`), kept so that nothing it read is lost."""
    if not sources:
        return NO_EVIDENCE_ANSWER
    near = "; ".join(f"[{n}] {source_title(s)}" for n, s in enumerate(sources[:closest], start=1))
    missing = (f"document {', '.join(repr(side) for side in undocumented)}" if undocumented
               else "answer this question")
    return f"The collection does not seem to {missing}. The closest passages: {near}." + (
        f" {writer_said}" if writer_said else "")
