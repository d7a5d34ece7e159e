"""Answer and retrieval metrics. Answer normalisation is the official HotpotQA/SQuAD one."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
from scipy.stats import binomtest

from dagrag.core.markup import plain

_BACKTICKS = re.compile(r"`+")


def normalize_answer(text: str) -> str:
    """Lower-case, strip punctuation and articles, collapse whitespace (HotpotQA's evaluate script)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str) -> float:
    """Token F1; yes/no/noanswer must match exactly, as in the official script."""
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    if (pred in ("yes", "no", "noanswer") or ref in ("yes", "no", "noanswer")) and pred != ref:
        return 0.0
    pred_tokens, ref_tokens = pred.split(), ref.split()
    common = Counter(pred_tokens) & Counter(ref_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


def answer_match(prediction: str, gold: str) -> float:
    """1 when the normalised gold answer occurs in the normalised prediction as whole words."""
    ref = normalize_answer(gold)
    return float(bool(ref) and f" {ref} " in f" {normalize_answer(prediction)} ")


def best_over_aliases(metric, prediction: str, golds: Iterable[str]) -> float:
    return max((metric(prediction, gold) for gold in golds if gold), default=0.0)


def supporting_recall(retrieved: set[str], supporting: Sequence[str]) -> tuple[float, float]:
    """(share of supporting paragraphs retrieved, 1 if all of them were)."""
    if not supporting:
        return 0.0, 0.0
    found = sum(key in retrieved for key in supporting)
    return found / len(supporting), float(found == len(supporting))


def squash(text: str) -> str:
    """As a reader sees it (`dagrag.core.markup.plain`), whitespace collapsed, case folded and a code span's
    backticks one: how evidence is looked for in a passage, so that a chunker's re-indenting or re-wrapping of the
    document, or an index that holds the text without its markup, does not count as losing the evidence. The
    reStructuredText reader gives an inline literal (``only``) as a Markdown code span (`only`), so a quote copied
    from the page as written is found in the passage the reader made of it."""
    return _BACKTICKS.sub("`", " ".join(plain(text).split()).casefold())


def _read(text: str) -> tuple[str, str]:
    """`text` as a reader sees it (`squash`) and as written (case and whitespace aside)."""
    return squash(text), " ".join(text.split()).casefold()


def _holds(text: tuple[str, str], quote: tuple[str, str]) -> bool:
    return quote[0] in text[0] or quote[1] in text[1]


def quoted_in(quote: str, text: str) -> bool:
    """Whether `text` holds `quote` as a reader sees both (`squash`) or as written (case and whitespace aside): a
    quote cut from a code block (`echo "**bold**"`) keeps markup that the same words in prose would lose."""
    return _holds(_read(text), _read(quote))


def evidence_recall(passages: Sequence[str], evidence: Sequence[str]) -> tuple[float, float]:
    """(share of evidence strings contained in at least one passage, 1 if all of them are); see `quoted_in`."""
    if not evidence:
        return 0.0, 0.0
    read = [_read(passage) for passage in passages]  # each passage read once, not once per quote
    found = sum(any(_holds(passage, _read(piece)) for passage in read) for piece in evidence)
    return found / len(evidence), float(found == len(evidence))


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


def paired_outcome(ours: Sequence[float], theirs: Sequence[float]) -> dict[str, float | int]:
    """One system against another on the same questions (`ours[i]` and `theirs[i]` score question i): how many
    questions it scored higher on (`won`), lower (`lost`), and the two-sided sign test's p-value of that split (ties
    left out; 1.0 when there is none). A difference of a question or two on a set of fifty reads as a difference in a
    table of means; the counts and p say whether it is more than a coin would give."""
    if len(ours) != len(theirs):
        raise ValueError(f"paired_outcome: {len(ours)} scores against {len(theirs)}; pair them by question first")
    return sign_test(sum(o > t for o, t in zip(ours, theirs)), sum(o < t for o, t in zip(ours, theirs)))


def sign_test(won: int, lost: int) -> dict[str, float | int]:
    """Questions won and lost, with the two-sided sign test's p of that split (1.0 when there is none)."""
    p = binomtest(won, won + lost, 0.5).pvalue if won + lost else 1.0
    return {"won": won, "lost": lost, "p": round(float(p), 4)}


def won_lost(outcome: dict[str, float | int]) -> str:
    """A paired outcome as a table cell: "7 / 3 (p 0.34)", "43 / 1 (p < 0.01)"."""
    p = f"p {outcome['p']:.2f}" if outcome["p"] >= 0.01 else "p < 0.01"
    return f"{outcome['won']} / {outcome['lost']} ({p})"
