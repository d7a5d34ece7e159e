"""The words and sentence forms the offline planner, the bridge hop and the offline writer read, for one language:
English here.

A comparison is recognised by its *form* ("How does X differ from Y?", "X vs Y: which ...?", "Should I use X
or Y for Z?"), whatever X and Y look like: capitalised names, lower-case package names, dotted paths,
`code`, options such as `--exclude`. The planner takes a `Language` (`plan_offline(..., language=...)`), so
another language is another instance of it, not an edit of the planner.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType

_NEVER = r"(?!)"  # matches nothing


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _alternation(words: Iterable[str], *, longest_first: bool = False) -> str:
    """`words` as a regex alternation (escaped; the longest first, if asked, so a word's longer form wins); with no
    words, a pattern that never matches, so no rule fires on an empty word list."""
    listed = sorted(words, key=len, reverse=True) if longest_first else list(words)
    return "|".join(map(re.escape, listed)) or _NEVER


@dataclass(frozen=True)
class Language:
    """What the offline planner, the bridge hop and the offline writer need to know about a language.

    Comparisons by form:
    - `comparison_forms`: patterns over the whole question (trailing "?" removed), each with groups `a` and
      `b` (the two sides) or `items` (a list of sides joined by commas and `list_joiners`); tried in order.
    - `side_ends`: where a side stops when the form leaves its end open ("... or Y *for a monorepo*").
    - `side_openers` / `side_closers`: words a side never starts / ends with ("*the* black hook").
    - `list_joiners`: the words that join the last item of a list ("X, Y *and* Z").
    - `chain_joiners`: the words that join every two items of a list ("X *vs* Y *vs* Z").

    Comparisons by their names and cues, and bridge-comparisons (lower-case words; each list defaults to empty, and
    a language without one simply lacks the rules that read it):
    - `auxiliaries`: verbs that open a yes/no question ("*Were* X and Y ...").
    - `comparison_cues`: words that set two things side by side ("both", "older", "same").
    - `than_comparatives`: comparatives that open "X ... than Y" besides the comparison cues ("faster", "better");
      "other than" and "rather than" compare nothing.
    - `superlatives`: words that compare a list of three or more ("oldest", "fastest").
    - `contrast_words`: words that only say two things are compared ("difference", "versus"): a cue, but no part
      of a search.
    - `linked_cues`: each word that joins the second name ("than", "from"), in the order tried, with the cues it
      needs right before it ("differ *from*", "similar *to*"); the comparison cues and `than_comparatives` may
      come anywhere before "than" ("more titles did X win *than* Y").
    - `not_attributes`: cue words a passage about one side never states ("both", "same"); the contrast words
      neither.
    - `relative_pronouns`: words that open a clause about the first name ("X, *that* is similar to Y").
    - `leading_prepositions`: prepositions a second name may follow ("than *in* Y").
    - `cue_attributes`: what a passage about one side states for a comparative ("older" → "born").
    - `relation_words`: relations that name a second entity whose page holds what is compared ("director").
    - `kind_words`: what kind of thing the compared names are ("film", "album"): not an attribute.
    - `pronouns`: pronoun → what replaces it after a name when a follow-up question is rewritten ("his" → "'s").

    Words:
    - `stopwords`: lower-case words that carry no meaning of their own ("the", "which", "called"): what is left of a
      question without them is what a search, a hop and the hop rule read (`core.text.content_words`). A word
      token ends at an apostrophe, so what "n't" leaves of a word ("doesn" of "doesn't") is listed too; not "won"
      (of "won't"), a word of its own, and not "ll" or "ve", which titles carry ("You'll Find Harrowgate").

    Names:
    - `not_names`: capitalised words that name nothing on their own (sentence openers, months, nationalities).
    - `name_openers`: words, as capitalised, that open a run of capitalised words without being part of the name
      ("*The* Siege of Harrow Vale", "*In* Vellmark"); case matters.

    Clauses (the bridge hop reads a question clause by clause):
    - `clause_openers`: words that open a relative clause ("the country *in which* the hero ... is stranded").
    - `dangling_words`: words a clause may end with once its names are gone ("the lyrics *of*"), dropped.
    - `possessive`: the possessive ending as a regex ("Marwick*'s*"), dropped from a name.

    Sentences (the offline writer reads a passage sentence by sentence):
    - `referring_openers`: lower-case words or phrases that open a sentence which goes on from the one before it
      ("*It* is set to 1000 by default.", "*Instead*, the interactive debugger is shown."): alone it says nothing of
      what it is about.

    Parts (the offline writer answers each part of a question of several):
    - `part_joiners` / `part_openers`: a joiner, after an optional comma, followed by an opener begins a new part
      of the question ("What does X do*, and how* do I turn it off?"), as a question mark followed by more does
      ("Why is X slow? And what can I do?") and a full stop followed by an opener does ("X stops. Which flag ...?").
    """

    comparison_forms: tuple[re.Pattern[str], ...]
    side_ends: re.Pattern[str]
    side_openers: frozenset[str]
    side_closers: frozenset[str]
    list_joiners: tuple[str, ...]
    chain_joiners: tuple[str, ...] = ()
    auxiliaries: frozenset[str] = frozenset()
    comparison_cues: frozenset[str] = frozenset()
    than_comparatives: frozenset[str] = frozenset()
    superlatives: frozenset[str] = frozenset()
    contrast_words: frozenset[str] = frozenset()
    linked_cues: tuple[tuple[str, frozenset[str]], ...] = ()
    not_attributes: frozenset[str] = frozenset()
    relative_pronouns: frozenset[str] = frozenset()
    leading_prepositions: frozenset[str] = frozenset()
    cue_attributes: tuple[tuple[str, str], ...] = ()
    relation_words: frozenset[str] = frozenset()
    kind_words: frozenset[str] = frozenset()
    pronouns: tuple[tuple[str, str], ...] = ()
    stopwords: frozenset[str] = frozenset()
    not_names: frozenset[str] = frozenset()
    name_openers: frozenset[str] = frozenset()
    clause_openers: frozenset[str] = frozenset()
    dangling_words: frozenset[str] = frozenset()
    possessive: str = _NEVER
    referring_openers: frozenset[str] = frozenset()
    part_joiners: frozenset[str] = frozenset()
    part_openers: frozenset[str] = frozenset()
    max_side_words: int = 8

    # Mappings are fields as tuples of pairs, so a Language stays hashable and comparable like any frozen dataclass
    # of hashable values. The views and patterns the rules read are built from the fields once per instance: a
    # cached_property stores its value in the instance's __dict__, which a frozen dataclass leaves writable (it only
    # blocks setattr), and is no field, so equality and hashing ignore it; `dataclasses.replace` starts afresh.
    @cached_property
    def than_cues(self) -> frozenset[str]:
        """Every word that may open "X ... than Y": the comparison cues and the comparatives."""
        return self.comparison_cues | self.than_comparatives

    @cached_property
    def cues_before(self) -> Mapping[str, frozenset[str]]:
        """`linked_cues` as a mapping; "than" also takes every word of `than_cues`."""
        return MappingProxyType({link: words | (self.than_cues if link == "than" else frozenset())
                                 for link, words in self.linked_cues})

    @cached_property
    def link_word(self) -> re.Pattern[str]:
        """A word of `linked_cues` between spaces (group 1 the word), the links in their order."""
        return re.compile(rf"\s({_alternation(link for link, _ in self.linked_cues)})\s")

    @cached_property
    def chain_joiner(self) -> re.Pattern[str]:
        """A word of `chain_joiners` between spaces, any case ("X *vs* Y", "X *Versus* Y")."""
        return re.compile(rf"\s+(?:{_alternation(self.chain_joiners, longest_first=True)})\s+", re.IGNORECASE)

    @cached_property
    def attribute_of(self) -> Mapping[str, str]:
        """`cue_attributes` as a mapping."""
        return MappingProxyType(dict(self.cue_attributes))

    @cached_property
    def pronoun_suffixes(self) -> Mapping[str, str]:
        """`pronouns` as a mapping."""
        return MappingProxyType(dict(self.pronouns))

    @cached_property
    def plural_relations(self) -> Mapping[str, str]:
        """Each relation's plural ("directors") → the relation."""
        return MappingProxyType({f"{word}s": word for word in self.relation_words})

    @cached_property
    def relation_link(self) -> re.Pattern[str]:
        """The relation as a link to a second entity: "has the director", "whose director", "the director(s) of"
        (group 1 or 2 the relation)."""
        relation = _alternation(self.relation_words, longest_first=True)
        return re.compile(rf"\b(?:(?:has|have|had|with)\s+the|whose)\s+({relation})s?\b|\bthe\s+({relation})s?\s+of\b",
                          re.IGNORECASE)

    @cached_property
    def relation_of_each(self) -> re.Pattern[str]:
        """"..., the director of film X or the director of film Y?": each side names its relation (group 1), the
        sides are groups 2 and 3."""
        relation = _alternation(self.relation_words, longest_first=True)
        kind = rf"(?:(?:{_alternation(self.kind_words, longest_first=True)})\s+)?" if self.kind_words else ""
        return re.compile(rf"\bthe\s+({relation})\s+of\s+(?:the\s+)?{kind}(.+?)\s+or\s+the\s+\1\s+of\s+"
                          rf"(?:the\s+)?{kind}(.+?)\s*\??$", re.IGNORECASE)

    @cached_property
    def name_opener(self) -> re.Pattern[str]:
        """A word of `name_openers` and the space after it, at the start of a span."""
        return re.compile(rf"^(?:{_alternation(self.name_openers, longest_first=True)})\s+")

    @cached_property
    def clause_break(self) -> re.Pattern[str]:
        """Where one clause of a question ends and the next begins: a comma, semicolon or colon, or a clause opener
        ("Which region of the country, in which the hero of the novel ... is stranded, is Dunmere in?")."""
        return re.compile(rf"[,;:]|\b(?:{_alternation(self.clause_openers, longest_first=True)})\b", re.IGNORECASE)

    @cached_property
    def dangling_end(self) -> re.Pattern[str]:
        """The dangling words and punctuation a clause ends with ("Who wrote the lyrics of ... and" → "... lyrics")."""
        return re.compile(rf"(?:\s+(?:{_alternation(self.dangling_words, longest_first=True)}))*[\s?.!'’]*$",
                          re.IGNORECASE)

    @cached_property
    def possessive_mark(self) -> re.Pattern[str]:
        """A possessive ending, or a bare apostrophe, before a word boundary, anywhere."""
        return re.compile(rf"(?:{self.possessive}|['’])\b")

    @cached_property
    def possessive_end(self) -> re.Pattern[str]:
        """A possessive ending at the end of a name."""
        return re.compile(rf"(?:{self.possessive})$")

    @cached_property
    def part_break(self) -> re.Pattern[str]:
        """Where one part of a question ends and the next begins: after a question mark, after a full stop followed by
        a part opener (a statement, then what is asked: "My group prints its help page with no subcommand. What exit
        status ...?"), or at a part joiner followed by a part opener."""
        openers = _alternation(self.part_openers, longest_first=True)
        return re.compile(rf"(?<=\?)\s+(?=\S)|(?<=\.)\s+(?=(?:{openers})\b)"
                          rf"|,?\s+(?:{_alternation(self.part_joiners)})\s+(?=(?:{openers})\b)", re.IGNORECASE)

    def question_parts(self, question: str, *, min_words: int = 3) -> list[str]:
        """The parts of a question that asks several things, each of `min_words` words or more; [] when it asks one
        (a shorter piece, "… and why?", is no part of its own)."""
        parts = [part for part in self.part_break.split(question.strip()) if len(part.split()) >= min_words]
        return parts if len(parts) >= 2 else []

    def goes_on_from_before(self, sentence: str) -> bool:
        """Whether `sentence` opens with a word or phrase (of up to four words) of `referring_openers`, after any list
        mark or emphasis, so that it goes on from the sentence before it."""
        words = re.findall(r"\w+", sentence[:80].lower())
        return any(" ".join(words[:length]) in self.referring_openers for length in range(1, min(len(words), 4) + 1))


def _forms(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


_PEOPLE = r"(?:i|we|you|one)"
_ASKING = r"which|what|who|how|when|where|why"
_THEN_ASKS = rf"\s*(?::|\u2014|\s-)\s+(?:{_ASKING})\b.*"  # ": which ...", " - how ..."
# What follows opens no question of its own.
_NO_QUESTION_WORD = rf"(?!(?:do|does|did|is|are|was|were|can|could|should|would|will|whom|{_ASKING})\b)"
_IN_ONE_SENTENCE = r"(?:[^:\u2014.?!]|\.(?=\w))"  # a character of a list that stays in one sentence (`a.b` may)
_CHOOSE = r"(?:use|pick|choose|prefer|go\s+with|take|install|adopt|learn|switch\s+to)"
_THAN_COMPARATIVES = """better worse faster slower heavier lighter richer poorer deeper wider greater newer cheaper
    stronger weaker hotter colder warmer cooler closer farther further louder"""
_CUE_COMPARATIVES = "older younger earlier later higher lower taller shorter longer larger smaller bigger"
# "Is X faster than Y?": a comparative before "than" (the cues' and `than_comparatives`'s, or "more/less" + a word)
_THAN = rf"(?:(?:more|less)\s+\w+|{'|'.join((_THAN_COMPARATIVES + ' ' + _CUE_COMPARATIVES).split())})\s+than"

ENGLISH = Language(
    comparison_forms=_forms(
        # "How does X differ from Y?", "How is X different from Y?", "How does X compare to/with Y?"
        r"\bhow\s+(?:does|do|did|is|are)\s+(?P<a>.+?)\s+(?:differ|different|compare)\s+(?:from|to|with|against)\s+(?P<b>.+)$",
        # "What's the difference between X and Y?", "... between X, Y and Z in W", "choosing between X and Y - which
        # ...?" (a colon or a dash before the question ends the list, as in "X or Y: which ...?")
        r"\b(?:differences?|choos(?:e|es|ing)|pick(?:s|ing)?|decid(?:e|es|ing)|select(?:s|ing)?|torn)\s+between\s+"
        rf"(?P<items>.+?)(?:{_THEN_ASKS})?$",
        # "When would I pick X over Y?", "... use X instead of Y", "Why would I choose X over Y?", "Can I use X instead
        # of Y?"
        rf"\b(?:(?:when|why)\s+)?(?:would|should|do|does|might|could|can)\s+{_PEOPLE}\s+{_CHOOSE}\s+(?P<a>.+?)\s+"
        r"(?:over|instead\s+of|rather\s+than)\s+(?P<b>.+)$",
        # "Should I use X, Y or Z for W?": a list (without it, "X, Y" read as one side lost X to the predicate)
        rf"\b(?:should|shall|do|would|could|can)\s+{_PEOPLE}\s+{_CHOOSE}\s+(?P<items>[^,:]+(?:,\s+[^,:]+)+?,?\s+or\s+.+)$",
        # "Should I use X or Y for Z?", "Do we pick X or Y?"
        rf"\b(?:should|shall|do|would|could|can)\s+{_PEOPLE}\s+{_CHOOSE}\s+(?P<a>.+?),?\s+or\s+(?P<b>.+)$",
        # "Is X similar to Y?", "Is X equivalent to Y?", "Is X the same as Y?", "Is X compatible with Y?"
        r"^(?:is|are|was|were)\s+(?P<a>.+?)\s+(?:(?:similar|comparable|equivalent|identical|analogous)\s+(?:to|with)"
        r"|the\s+same\s+as|(?:compatible|interchangeable)\s+with)\s+(?P<b>.+)$",
        # "Is httpx faster than requests?", "Is uv more stable than pip for Z?": a one-word first side (a longer one,
        # "the Eiffel Tower built earlier than", "the director of Jaws older than", is the name rules' to read)
        rf"^(?:is|are|was|were)\s+(?P<a>\S+)\s+{_THAN}\s+(?P<b>.+)$",
        # "Are structlog and loguru both thread-safe?", "Do uv and pip both read pip.conf?": one-word sides (longer
        # ones are the name rules' to read)
        r"^(?:are|were|do|does|did|can|could|will|would)\s+(?P<a>\S+)\s+and\s+(?P<b>\S+)\s+both\b.*$",
        # "Does mypy or pyright catch more errors?", "Is httpx or requests faster?": one-word sides
        r"^(?:are|is|were|was|do|does|did|can|could|will|would)\s+(?P<a>\S+)\s+or\s+(?P<b>\S+)\s+\w.*$",
        # "What distinguishes X from Y?", "What sets X apart from Y?"
        r"^what\s+(?:distinguishes|separates|sets)\s+(?P<a>.+?)\s+(?:apart\s+)?from\s+(?P<b>.+)$",
        # "X compared to Y, which ...?"
        r"^(?P<a>.+?)\s+(?:compared|in\s+comparison)\s+(?:to|with)\s+(?P<b>.+)$",
        # "When to use X vs Y?", "Why use X or Y?": the opener is the question's, not the first side's
        rf"^(?:when|why|where|how)\s+(?:to|do\s+{_PEOPLE}|should\s+{_PEOPLE})\s+{_CHOOSE}\s+(?P<a>.+?)\s+"
        r"(?:vs\.?|versus|or)\s+(?P<b>.+)$",
        # "X vs Y vs Z: which ...?"
        rf"^(?P<items>.+?(?:\s+(?:vs\.?|versus)\s+.+?){{2,}})(?:{_THEN_ASKS})?$",
        # "X vs Y: which ...?", "X versus Y"
        r"^(?P<a>.+?)\s+(?:vs\.?|versus)\s+(?P<b>.+)$",
        # "Compare X, Y and Z", "Compare X and Y for Z"
        r"^compare\s+(?P<items>.+)$",
        # "Which is better for Z, X or Y?", "Which is faster: X or Y?"
        r"^(?:which|what)\b[^,:]*[,:]\s+(?P<a>[^,:]+?),?\s+or\s+(?P<b>[^,:]+)$",
        # "X or Y: which ...?", "X or Y \u2014 which ...?"
        r"^(?P<a>[^,:\u2014]+?)\s+or\s+(?P<b>[^,:\u2014]+?)\s*(?::|\u2014|\s-)\s+(?:which|what|who|how)\b.*$",
        # "X and Y: which ...?" with one-word sides ("Installed it and ran the tests: what next?" compares nothing),
        # "pros and cons of X and Y"
        r"^(?P<a>[^\s,:\u2014]+)\s+and\s+(?P<b>[^\s,:\u2014]+?)\s*(?::|\u2014)\s+(?:which|what|who|how)\b.*$",
        r"\bpros\s+and\s+cons\s+of\s+(?P<items>.+)$",
        # "An attribute built from another one: X, Y, or Z?" (the choice closes the question)
        rf"[:\u2014]\s+{_NO_QUESTION_WORD}(?P<items>{_IN_ONE_SENTENCE}+?\s+or\s+{_IN_ONE_SENTENCE}+)$",
        # "X or Y for Z?", a one-word first side opening the question
        rf"^{_NO_QUESTION_WORD}(?P<a>[^\s,:]+)\s+or\s+(?P<b>[^,:]+)$",
    ),
    side_ends=re.compile(
        # a clause mark, an em dash ("X vs Y—which ...?") or a sentence's end ("... and Exception. Which ..."); a comma
        # or colon inside code (`partial=("name",)`) is not one
        r"\s*(?:[?;\u2014]|[:,](?!\S))|(?<=[a-z]{3})\.\s|\s+(?:for|to|in|when|if|with|on|at|because|so|which|that|while|regarding|about|"
        r"and\s+(?:why|how|what|which|when))\b"),  # case-sensitive: "Lean On Tomorrow" is a name, " on " is not
    side_openers=frozenset("the a an my our your plain using".split()),
    side_closers=frozenset("itself alone".split()),
    list_joiners=("and", "or"),
    chain_joiners=("vs.", "vs", "versus"),
    auxiliaries=_words("are is were was do does did have has had can could will would"),
    comparison_cues=_words(
        f"""both same share shared common oldest youngest first latest recently more most less fewer different similar
        either {_CUE_COMPARATIVES}"""),
    than_comparatives=_words(_THAN_COMPARATIVES),
    superlatives=_words(
        """best worst fastest slowest largest biggest smallest highest lowest tallest shortest longest heaviest
        lightest richest poorest deepest widest greatest newest cheapest strongest weakest closest earliest"""),
    contrast_words=_words(
        """difference differences differ differs differed distinct compare compares compared comparable contrast
        versus vs"""),
    linked_cues=(("than", frozenset()), ("from", _words("differ differs differed different distinct")),
                 ("to", _words("similar compared comparable")), ("with", _words("compare compares compared"))),
    not_attributes=_words("both same either"),
    relative_pronouns=_words("that which who"),
    leading_prepositions=_words("in at on of for by from with"),
    cue_attributes=(("older", "born"), ("younger", "born"), ("oldest", "born"), ("youngest", "born"),
                    ("earlier", "date"), ("taller", "height"), ("shorter", "height"), ("longer", "length"),
                    ("larger", "size"), ("bigger", "size"), ("smaller", "size"), ("higher", "high"),
                    ("lower", "low")),
    relation_words=_words(
        """director author composer performer producer writer screenwriter lyricist creator founder father mother
        spouse husband wife son daughter editor publisher architect designer developer manufacturer owner"""),
    kind_words=_words(
        """film films movie movies song songs album albums book books novel novels band bands play plays series show
        shows company companies work works"""),
    pronouns=(("he", ""), ("she", ""), ("it", ""), ("they", ""), ("him", ""), ("them", ""),
              ("his", "'s"), ("her", "'s"), ("its", "'s"), ("their", "'s")),
    stopwords=_words(
        """a about above after again against all also am an and any are as at be because been before being below
        between both but by can could did do does doing down during each few for from further had has have having he
        her here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not
        now of off on once only or other our ours ourselves out over own same she should so some such than that the
        their theirs them themselves then there these they this those through to too under until up very was we were
        what when where which while who whom whose why will with would you your yours yourself yourselves one ones
        many much whether either neither known called named
        doesn isn don didn aren wasn weren hasn haven hadn couldn shouldn wouldn mustn needn"""),
    not_names=_words(
        """the a an in on at by he she it they his her its their this that these there after before during when
        while however also born american british english french german italian spanish canadian australian
        january february march april may june july august september october november december"""),
    name_openers=_words("The A An In On At By For From After Before During Since His Her Its Their This That These "
                        "It He She"),
    clause_openers=_words("which where who whom whose that when while"),
    dangling_words=_words("and or of the for in by to a an"),
    possessive=r"['’]s",
    referring_openers=_words(
        """it its they their them this these those he she his her instead otherwise however hence thus therefore
        then""") | frozenset({"in other words", "that is", "as a result", "for this reason", "in this case",
                              "in that case"}),
    part_joiners=_words("and but"),
    part_openers=_words("how what which why where when who whom whose does do did is are can could should would "
                        "will if"),
)
