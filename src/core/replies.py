"""Reading an LLM's reply: the JSON object inside whatever text came back. Pure, bounded, never trusts the text."""

from __future__ import annotations

import json
import re
from typing import Any

MAX_REPLY_CHARS = 200_000  # a longer LLM reply is refused unread
MAX_OBJECT_STARTS = 256  # `{` positions tried per candidate when looking for the JSON object
_JSON_FENCE_OPENS = r"```(?:json|JSON)?\s*"


class ReplyParseError(ValueError):
    """An LLM reply holds nothing of the expected shape."""


def valid_text(value: Any) -> Any:
    """`value` with every string made valid Unicode: JSON may escape half a surrogate pair (`"\\ud800"`), which no
    UTF-8 output can hold; a lone half reads as U+FFFD, a whole pair as its character."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [valid_text(item) for item in value]
    if isinstance(value, dict):
        return {valid_text(key): valid_text(item) for key, item in value.items()}
    return value


def extract_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in `text`: bare, inside ```json fences, or wrapped in prose, its strings valid Unicode.

    Raises ReplyParseError (and nothing else) when there is none. The work is bounded: replies over
    MAX_REPLY_CHARS are refused, and at most MAX_OBJECT_STARTS `{` per candidate are tried.
    """
    if not isinstance(text, str) or not text.strip():
        raise ReplyParseError("the reply is empty")
    if len(text) > MAX_REPLY_CHARS:
        raise ReplyParseError(f"the reply is {len(text)} characters long, over the {MAX_REPLY_CHARS} read")
    candidates = [m.group(1) for m in re.finditer(rf"{_JSON_FENCE_OPENS}(.*?)```", text, re.DOTALL)]
    candidates.append(text)
    decoder = json.JSONDecoder()
    for candidate in candidates:
        starts = (i for i, ch in enumerate(candidate) if ch == "{")
        for _, start in zip(range(MAX_OBJECT_STARTS), starts):
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except (ValueError, RecursionError):  # JSONDecodeError, or e.g. an integer over Python's digit limit
                continue
            if isinstance(value, dict):
                return valid_text(value)
    raise ReplyParseError("the reply holds no JSON object")


def cut_short(text: str) -> bool:
    """Whether `text` opens a JSON object (bare or after a ```json fence) that never closes: a reply cut off inside
    it, as by its token cap."""
    opened = re.sub(f"^{_JSON_FENCE_OPENS}", "", text.strip())
    if not opened.startswith("{"):
        return False
    try:
        json.JSONDecoder().raw_decode(opened)
    except (ValueError, RecursionError):
        return True
    return False


def extract_json_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object that decodes from one of the first MAX_OBJECT_STARTS `{` in `text`, nested ones
    included: what can be saved from a reply cut short inside its outer object. [] when there is none."""
    if not isinstance(text, str) or len(text) > MAX_REPLY_CHARS:
        return []
    decoder = json.JSONDecoder()
    found = []
    starts = (i for i, ch in enumerate(text) if ch == "{")
    for _, start in zip(range(MAX_OBJECT_STARTS), starts):
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            found.append(valid_text(value))
    return found


ANSWER_LINE = re.compile(r"^\s*\**\s*(?:final\s+|short\s+)?answer\s*\**\s*:\s*\**\s*(.*?)\s*\**\s*$", re.IGNORECASE)
_CITATION = re.compile(r"\s*\[\d+\]")
NO_ANSWER_WORDS = {"unknown", "none", "n/a", "not stated", "not given", "cannot be determined"}
# The answers that say the sources do not answer: the writer's prompt asks for "Answer: unknown". Not "none", which
# answers "Which of them ...?" as well.
DECLINING_WORDS = NO_ANSWER_WORDS - {"none"}
MAX_CONCISE_CHARS = 200  # a longer "short answer" is not one: it stays part of the answer text


def split_concise_answer(reply: str) -> tuple[str | None, str]:
    """`"Answer: Nokia\nNokia was founded in 1865 [1]."` → `("Nokia", "Nokia was founded in 1865 [1].")`.

    The first non-empty line is the concise answer when it reads "Answer: …"; the rest is the cited text.
    "unknown" and the like give None. A reply without that line is all text, with no concise answer; so is
    a reply that is nothing but that line (its text is then the line's answer, uncited).
    """
    lines = reply.strip().splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return None, ""
    match = ANSWER_LINE.match(lines[first])
    if match is None or not match.group(1) or len(match.group(1)) > MAX_CONCISE_CHARS:
        return None, reply.strip()
    concise = _CITATION.sub("", match.group(1)).strip().rstrip(".").strip()
    rest = "\n".join(lines[first + 1:]).strip()
    if not rest and concise != match.group(1).strip():  # "Answer: Nokia was first [1]." is the cited text too
        rest = match.group(1).strip()
    if concise.lower() in NO_ANSWER_WORDS:
        return None, rest or concise
    return concise, rest or concise


def declines(reply: str) -> bool:
    """Whether `reply` opens with an answer line that declines to answer ("Answer: unknown", "Answer: Unknown [1]."),
    as the writer's prompt asks when the sources do not answer the question."""
    first = next((line for line in reply.strip().splitlines() if line.strip()), "")
    match = ANSWER_LINE.match(first)
    if match is None:
        return False
    said = _CITATION.sub("", match.group(1)).strip().rstrip(".").strip().lower()
    return said in DECLINING_WORDS
