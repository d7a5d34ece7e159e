"""Reading an LLM's reply: the JSON object inside whatever text came back. Pure, bounded, never trusts the text."""

from __future__ import annotations

import json
import re
from typing import Any

MAX_REPLY_CHARS = 200_000  # a longer LLM reply is refused unread
MAX_OBJECT_STARTS = 256  # `{` positions tried per candidate when looking for the JSON object


class ReplyParseError(ValueError):
    """An LLM reply holds nothing of the expected shape."""


def extract_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in `text`: bare, inside ```json fences, or wrapped in prose.

    Raises ReplyParseError (and nothing else) when there is none. The work is bounded: replies over
    MAX_REPLY_CHARS are refused, and at most MAX_OBJECT_STARTS `{` per candidate are tried.
    """
    if not isinstance(text, str) or not text.strip():
        raise ReplyParseError("the reply is empty")
    if len(text) > MAX_REPLY_CHARS:
        raise ReplyParseError(f"the reply is {len(text)} characters long, over the {MAX_REPLY_CHARS} read")
    candidates = [m.group(1) for m in re.finditer(r"```(?:json|JSON)?\s*(.*?)```", text, re.DOTALL)]
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
                return value
    raise ReplyParseError("the reply holds no JSON object")
