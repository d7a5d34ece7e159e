"""Small text utilities shared by the agents: tokens, content words, sentences, citations."""

from __future__ import annotations

import bisect
import re
import textwrap
import threading
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .language import ENGLISH

if TYPE_CHECKING:
    from nltk.tokenize.punkt import PunktSentenceTokenizer

_TOKEN = re.compile(r"\w+", re.UNICODE)
_LEADING_CITATIONS = re.compile(r"(?:\s*\[\d+(?:\s*,\s*\d+)*\])+")
_SENTENCE_OPENING = re.compile(r"[\"'“‘(\[]*([^\W_])")  # opening quotes or brackets, then a letter or digit
_TRAILING_INITIALS = re.compile(r"(?:^|[\s(])((?:[A-Z]\.){2,4})\s*$")  # "... by J.R.R. " / "(George H.W. "
_CITATION = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
_CITATION_PIECE = re.compile(r"[\[\]\d,]+")  # a word of a mark: `[3,` `4]`
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # C0 and C1 controls but tab and newlines
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def tokens(text: str) -> list[str]:
    """Lower-case word tokens, accents folded so 'Mañalac' matches 'Manalac'."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return _TOKEN.findall(folded.lower())


def content_words(text: str, stopwords: frozenset[str] = ENGLISH.stopwords) -> list[str]:
    """Tokens that carry meaning: not `stopwords` (a `Language`'s), not single characters."""
    return [t for t in tokens(text) if t not in stopwords and len(t) > 1]


# Words match on their first five letters: enough to join inflections ("builds"/"builder"/"build",
# "matches"/"match") without a stemmer's model, few enough false friends in a question's dozen words.
MATCHING_LETTERS = 5


def unexplained_words(text: str, passages: Sequence[str], *, matching_letters: int | None = MATCHING_LETTERS,
                      stopwords: frozenset[str] = ENGLISH.stopwords) -> list[str]:
    """The content words of `text` that none of the passages contains, each once, in order: what is left to find.

    A word is contained when a passage has it or, with `matching_letters`, a word of at least that many letters
    that begins the same ("environments" ~ "environment"); `None` asks for the word exactly. Whether a document
    explains the question reads inflections as the same word; a hop searches with every word its parent's page
    lacks exactly. One rule for both lost on five benchmark sets (ARCHITECTURE.md, "A bridge hop only when the
    question needs one"). Content words are those outside `stopwords` (`content_words`)."""
    vocabulary = set(content_words(" ".join(passages), stopwords))
    letters = matching_letters or 0
    beginnings = {word[:letters] for word in vocabulary if len(word) >= letters} if letters else set()

    def explained(word: str) -> bool:
        return word in vocabulary or (len(word) >= letters and word[:letters] in beginnings)

    return list(dict.fromkeys(word for word in content_words(text, stopwords) if not explained(word)))


def has_control_chars(text: str) -> bool:
    return bool(_CONTROL.search(text))


def has_lone_surrogates(text: str) -> bool:
    """Python strings can hold halves of UTF-16 pairs that no UTF-8 encoder (HTTP, JSON, Qdrant) accepts."""
    return bool(_SURROGATE.search(text))


def without_control_chars(text: str) -> str:
    return _SURROGATE.sub(" ", _CONTROL.sub(" ", text))


class _OrthoContext(dict):
    """Punkt's word-case statistics. Looking up an unseen word gives 0 and, unlike the defaultdict nltk
    loads, stores nothing: splitting never writes to the shared model (thread-safe, and it does not grow)."""

    def __missing__(self, key: str) -> int:
        return 0


@dataclass(frozen=True)
class _SentenceModel:
    punkt: PunktSentenceTokenizer
    abbreviations: frozenset[str]  # "u.s", "j.k", "dr": Punkt's known abbreviations, without the final dot


_sentence_model: _SentenceModel | None = None
_sentence_model_lock = threading.Lock()


def load_sentence_model() -> _SentenceModel:
    """NLTK's English Punkt model, from the copy llama-index-core ships as package data (never downloaded).

    Loaded once, on first use or by `stack.build_agents`: importing nltk takes a second or more, which
    `import dagrag` should not pay."""
    global _sentence_model
    with _sentence_model_lock:
        if _sentence_model is None:
            import llama_index.core
            import nltk
            from nltk.tokenize.punkt import PunktSentenceTokenizer, load_punkt_params

            data = str(Path(llama_index.core.__file__).parent / "_static" / "nltk_cache")
            if data not in nltk.data.path:  # nltk opens model files only under its data path
                nltk.data.path.append(data)  # (llama-index-core appends the same folder when it uses nltk)
            params = load_punkt_params(nltk.data.find("tokenizers/punkt_tab/english/", paths=[data]))
            params.ortho_context = _OrthoContext(params.ortho_context)
            punkt = PunktSentenceTokenizer(params)
            punkt.tokenize("Compile the lazy regexes now. Not in two threads at once.")
            _sentence_model = _SentenceModel(punkt, frozenset(params.abbrev_types))
        return _sentence_model


# How far a parenthesis may run on: one that stays open longer is an unbalanced bracket, not an aside.
_PARENTHESIS_SPAN = 160
_PARENTHESIS_DEPTH = {"(": 1, ")": -1}


def _closing_parenthesis(text: str, at: int, depth: int) -> int | None:
    """Where the parenthesis open `depth` deep at `at` closes, within _PARENTHESIS_SPAN; None if it does not."""
    for i in range(at, min(len(text), at + _PARENTHESIS_SPAN)):
        depth += _PARENTHESIS_DEPTH.get(text[i], 0)
        if depth == 0:
            return i
    return None


def _within_parenthesis(text: str, sentence_start: int, start: int) -> bool:
    """Whether a sentence boundary Punkt found at `start` is inside an aside: in a parenthesis opened since the
    sentence began at `sentence_start` that closes soon after ("The company (est. 1901) makes cars"), or opening one
    after which its sentence goes on in lower case ("Rear Adm. Tobias Renwick, USN (Ret.) (March 2, 1931 – 2004)
    was ..."). A parenthesis that is a sentence of its own ("(It was rebuilt.) It ...") still opens one."""
    before = text[sentence_start:start]
    depth = before.count("(") - before.count(")")
    if depth > 0:
        return _closing_parenthesis(text, start, depth) is not None
    if text[start] != "(":
        return False
    close = _closing_parenthesis(text, start, 0)
    after = text[close + 1:].lstrip() if close is not None else ""
    return bool(after) and after[0].islower()


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences, keeping citations like `[1]` with the sentence they close.

    NLTK's Punkt model finds the boundaries, so abbreviations and initials do not end a sentence
    ("Marcus Ellery Vance Jr. (March 3, 1931 ...", "U.S. Army", "J. R. R. Tolkien"). Three corrections:
    a citation after the period ("... French. [1] He ...") moves back to the sentence it closes; a
    "sentence" that starts in lower case continues the previous one (an abbreviation Punkt does not know:
    "Harwick Rovers F.C. and ...", "i.e. light welterweight"); and run-together initials that are not in
    Punkt's abbreviation list ("J.R.R. Tolkien", "A.R. Rahman") are a name, not a sentence end.
    """
    markers = _list_marker_words(text)
    text = " ".join(text.split())
    if not text:
        return []
    model = _sentence_model or load_sentence_model()
    word_starts = [match.start() for match in re.finditer(r"\S+", text)] if markers else []
    starts = [0]
    for start, _ in model.punkt.span_tokenize(text):
        if start == 0:
            continue
        initials = _TRAILING_INITIALS.search(text, max(0, start - 12), start)
        if initials and initials.group(1)[:-1].lower() not in model.abbreviations:
            continue
        citation = _LEADING_CITATIONS.match(text, start)
        if citation:
            start = citation.end()
            while start < len(text) and text[start] == " ":
                start += 1
        # A sentence starts after a space, with a word that is not lower case ("etc.), and", "Love? ", and"), and
        # not within a parenthesis ("(est. 1901)", "(Ret.) (October 23, 1924 – 2007) was").
        opening = _SENTENCE_OPENING.match(text, start)
        if (start > starts[-1] and text[start - 1] == " " and opening and not opening.group(1).islower()
                and not _within_parenthesis(text, starts[-1], start)):
            starts.append(start)
            # A numbered item's marker ("2." opening its line) read as the end of the sentence before it opens
            # its own: "… `sudo installer` 2. Run the script" → "… `sudo installer`" and "2. Run the script".
            word = bisect.bisect_left(word_starts, start) - 1
            if word >= 0 and word in markers:
                if word_starts[word] > starts[-2]:
                    starts[-1] = word_starts[word]
                else:  # the marker alone was a sentence: it opens this one
                    starts.pop()
    return [text[a:b].strip() for a, b in zip(starts, [*starts[1:], len(text)]) if text[a:b].strip()]


# How a sentence that announces what follows it ends ("… follow these steps:"), ASCII and full-width; chunking/blocks.py
# keeps the same marks for a paragraph that introduces the next block (chunking imports no other part).
INTRODUCING_MARKS = (":", "\uff1a")


def introduces_what_follows(sentence: str) -> bool:
    """Whether a sentence ends by announcing what comes after it ("The new `InlineProcessor` provides two major
    enhancements to `Patterns`:"); a citation after it does not count."""
    return strip_citations(sentence).rstrip().endswith(INTRODUCING_MARKS)


_LIST_NUMBER = re.compile(r"^[ \t>]*(\d{1,3}[.)])(?=[ \t])", re.MULTILINE)


def _list_marker_words(text: str) -> set[int]:
    """The index, among the whitespace-separated words of `text`, of each numbered list item's marker ("2." at the
    start of a line)."""
    found = [match.start(1) for match in _LIST_NUMBER.finditer(text)]
    if not found:
        return set()
    word_starts = [match.start() for match in re.finditer(r"\S+", text)]
    return {bisect.bisect_left(word_starts, at) for at in found}


# A fenced code block opens with three or more backticks or tildes at a line's start, indented as far as the list item
# or admonition it sits in is.
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
# A pipe table's delimiter row: "---- | :---:", with or without outer pipes.
_TABLE_DELIMITER = re.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)+\|?\s*$")


def block_lines(text: str) -> list[bool] | None:
    """For each line of `text` (split on "\n"), whether it belongs to a fenced code block or a pipe table: lines
    whose line breaks carry meaning. None when a fence is left open (a chunk cut inside a code block), since then
    which lines are code cannot be told."""
    lines = text.split("\n")
    marks = [False] * len(lines)
    fence: str | None = None
    for number, line in enumerate(lines):
        if fence is not None:
            marks[number] = True
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
            continue
        opening = _FENCE.match(line)
        if opening:
            fence, marks[number] = opening.group(1), True
        elif "|" in line and number + 1 < len(lines) and _TABLE_DELIMITER.match(lines[number + 1]):
            row = number
            while row < len(lines) and "|" in lines[row] and not _FENCE.match(lines[row]):
                marks[row] = True
                row += 1
    return None if fence is not None else marks


def split_sentences_as_written(text: str, *, prose: Callable[[str], str] = str.strip,
                               block_line: Callable[[str], str] = str.rstrip,
                               cited_blocks_end: bool = False) -> list[tuple[str, str]]:
    """The sentences of `text`, each beside its text as written: a fenced code block or a pipe table inside it
    keeps its lines and stands apart by blank lines (so Markdown shows it as a block: collapsed onto one line, code
    and tables cannot be read), all other whitespace collapsed as `split_sentences` does. `prose` is applied to each
    run of prose (collapsed), `block_line` to each line of a block. With `cited_blocks_end` (an answer, not a
    source), a sentence also ends at the `[n]` marks right after a block (`_after_cited_blocks`).

    The sentences are `split_sentences`'s, with none starting inside a fenced code block or a table
    (`_block_bounded`: Punkt reads "make all. Then" in code, or "(1 indexed)" in a cell, as a sentence end). Every
    sentence of a text whose fences do not pair is written as `prose` of the sentence, as split.
    """
    sentences = split_sentences(text)
    marks = block_lines(text)
    if not marks or not any(marks):
        return [(sentence, prose(sentence)) for sentence in sentences]
    lines = text.split("\n")
    line_starts = [0]
    for line in lines[:-1]:
        line_starts.append(line_starts[-1] + len(line) + 1)
    tokens = list(re.finditer(r"\S+", text))
    token_line = [bisect.bisect_right(line_starts, token.start()) - 1 for token in tokens]
    # A block is a run of marked lines; each token belongs to one block (by its first line) or to none.
    block_of_line: list[int | None] = []
    block = -1
    for number, marked in enumerate(marks):
        if marked and not (number and marks[number - 1]):
            block += 1
        block_of_line.append(block if marked else None)
    token_block = [block_of_line[line] for line in token_line]
    words = [token.group() for token in tokens]
    starts = _sentence_starts(sentences, words)
    if starts is None:  # the sentences are not the text's tokens in order (never expected): as split
        return [(sentence, prose(sentence)) for sentence in sentences]
    starts = _block_bounded(starts, token_block)
    if cited_blocks_end:
        starts = _after_cited_blocks(starts, words, token_block)
    written: list[tuple[str, str]] = []
    for first, end in zip(starts, [*starts[1:], len(words)]):
        sentence, last = " ".join(words[first:end]), end - 1
        pieces = _pieces(lines, tokens, token_block, token_line, first, last)
        written.append((sentence, "\n\n".join(
            "\n".join(block_line(line) for line in piece.split("\n")) if is_block else prose(piece)
            for piece, is_block in pieces)))
    return written


def _sentence_starts(sentences: list[str], words: list[str]) -> list[int] | None:
    """The index of each sentence's first word among `words`, or None unless the sentences are exactly the words in
    order (as `split_sentences` cuts a text: every word in one sentence)."""
    starts: list[int] = []
    at = 0
    for sentence in sentences:
        own = sentence.split(" ")
        if words[at:at + len(own)] != own:
            return None
        starts.append(at)
        at += len(own)
    return starts if at == len(words) else None


def _block_bounded(starts: list[int], token_block: list[int | None]) -> list[int]:
    """Sentence starts (word indexes) with none inside a code block or a table: their lines are code and cells, not
    prose with sentence ends. The prose after a block goes on in the sentence that holds the block, as Punkt read
    it."""
    return [start for start in starts
            if not (start and token_block[start] is not None and token_block[start - 1] == token_block[start])]


def _after_cited_blocks(starts: list[int], words: list[str], token_block: list[int | None]) -> list[int]:
    """`starts`, and the word after each block's citations where more follows: an answer cites a quoted block on the
    line after it ("| `==1.*` | `>=1.0.0, <2.0.0` |" then "[2]"), and the next quote goes on from there with no full
    stop between for Punkt to end a sentence at, so three quotes of three sources would be read as one sentence."""
    found = set(starts)
    for index in range(len(words) - 1):
        if token_block[index] is None or token_block[index + 1] is not None:
            continue  # not a block's last word
        after, end = index + 1, index + 1  # `[3, 4]` is two words
        while end < len(words) and token_block[end] is None and _CITATION_PIECE.fullmatch(words[end]):
            end += 1
            if _LEADING_CITATIONS.fullmatch(" ".join(words[index + 1:end])):
                after = end
        if index + 1 < after < len(words):
            found.add(after)
    return sorted(found)


def split_sentences_around_blocks(text: str) -> list[str]:
    """`split_sentences`, with no sentence starting inside a fenced code block or a pipe table, and one ending at a
    block's citation: an answer's sentences as the writer cut them (`split_sentences_as_written`), so a quoted block
    is read with the sentence and the `[n]` it belongs to, not as sentences of its own that cite nothing, nor with
    the quotes after it."""
    return [sentence for sentence, _ in split_sentences_as_written(text, cited_blocks_end=True)]


def _pieces(lines: list[str], tokens: list[re.Match[str]], token_block: list[int | None], token_line: list[int],
            first: int, last: int) -> list[tuple[str, bool]]:
    """Tokens first..last as runs of prose (collapsed to single spaces) and blocks (their whole lines), each with
    whether it is a block."""
    pieces: list[tuple[str, bool]] = []
    index = first
    while index <= last:
        block = token_block[index]
        end = index
        while end + 1 <= last and token_block[end + 1] == block:
            end += 1
        if block is None:
            pieces.append((" ".join(token.group() for token in tokens[index:end + 1]), False))
        else:  # the block's lines as written, from its first line's start to its last line's end, moved left as
            # far as they all go: a fence in a list item or an admonition is indented, and shown so it reads as code
            written = "\n".join(lines[token_line[index]:token_line[end] + 1])
            pieces.append((textwrap.dedent(written).strip("\n"), True))
        index = end + 1
    return pieces


# Code: a run of backticks to the next run of the same length (an inline span, or a fenced block read on one line).
_CODE = re.compile(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)", re.DOTALL)


def _citation_marks(sentence: str) -> list[re.Match[str]]:
    """The `[n]` marks of a sentence outside code: `blocks[0]` or `[1, 2, 3]` in code is code, not a citation."""
    code = [match.span() for match in _CODE.finditer(sentence)]
    return [mark for mark in _CITATION.finditer(sentence)
            if not any(start <= mark.start() < end for start, end in code)]


def citations(sentence: str) -> list[int]:
    """The source numbers a sentence cites (its `[n]` marks outside code), in order, without repeats."""
    found: list[int] = []
    for mark in _citation_marks(sentence):
        for number in mark.group(1).split(","):
            n = int(number)
            if n not in found:
                found.append(n)
    return found


def strip_citations(sentence: str) -> str:
    """The sentence without its `[n]` marks (those outside code), whitespace collapsed."""
    kept, end = [], 0
    for mark in _citation_marks(sentence):
        kept.append(sentence[end:mark.start()])
        end = mark.end()
    return " ".join(" ".join([*kept, sentence[end:]]).split())


def containment(claim: str, evidence: str) -> float:
    """Share of the claim's content words found in the evidence (1.0 for a claim with none)."""
    claim_words = set(content_words(claim))
    if not claim_words:
        return 1.0
    return len(claim_words & set(content_words(evidence))) / len(claim_words)
