"""Small text utilities shared by the agents: tokens, content words, sentences, citations."""

from __future__ import annotations

import re
import unicodedata

STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom whose why will with would you your yours yourself yourselves one ones many much whether
    either neither did does which what whom known called named""".split()
)

_TOKEN = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])((?:\s*\[\d+(?:\s*,\s*\d+)*\])*)\s+(?=[\"'(]?[A-Z0-9])")
_ONLY_CITATIONS = re.compile(r"(?:\s*\[\d+(?:\s*,\s*\d+)*\])+")
_CITATION = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # C0 and C1 controls but tab and newlines
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def tokens(text: str) -> list[str]:
    """Lower-case word tokens, accents folded so 'Mañalac' matches 'Manalac'."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return _TOKEN.findall(folded.lower())


def content_words(text: str) -> list[str]:
    """Tokens that carry meaning: not stopwords, not single characters."""
    return [t for t in tokens(text) if t not in STOPWORDS and len(t) > 1]


def has_control_chars(text: str) -> bool:
    return bool(_CONTROL.search(text))


def has_lone_surrogates(text: str) -> bool:
    """Python strings can hold halves of UTF-16 pairs that no UTF-8 encoder (HTTP, JSON, Qdrant) accepts."""
    return bool(_SURROGATE.search(text))


def without_control_chars(text: str) -> str:
    return _SURROGATE.sub(" ", _CONTROL.sub(" ", text))


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences, keeping trailing citations like `[1]` with their sentence."""
    text = " ".join(text.split())
    if not text:
        return []
    pieces: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        end = match.end(1)
        pieces.append(text[start:end].strip())
        start = match.end()
    pieces.append(text[start:].strip())
    sentences: list[str] = []
    for piece in pieces:
        if sentences and _ONLY_CITATIONS.fullmatch(piece):
            sentences[-1] = f"{sentences[-1]} {piece}"  # "... Wood. [4]" keeps its citation
        elif piece:
            sentences.append(piece)
    return sentences


def citations(sentence: str) -> list[int]:
    """The source numbers a sentence cites, in order, without repeats."""
    found: list[int] = []
    for group in _CITATION.findall(sentence):
        for number in group.split(","):
            n = int(number)
            if n not in found:
                found.append(n)
    return found


def strip_citations(sentence: str) -> str:
    return " ".join(_CITATION.sub(" ", sentence).split())


def containment(claim: str, evidence: str) -> float:
    """Share of the claim's content words found in the evidence (1.0 for a claim with none)."""
    claim_words = set(content_words(claim))
    if not claim_words:
        return 1.0
    return len(claim_words & set(content_words(evidence))) / len(claim_words)
