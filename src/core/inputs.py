"""Checks on what a caller hands to QueryWorkflow.run: clear errors before any work starts."""

from __future__ import annotations

from typing import Any

from .errors import InvalidQuestionError
from .text import has_control_chars, has_lone_surrogates, without_control_chars

MAX_HISTORY_TURNS = 50


def check_question(query: Any, max_chars: int) -> str:
    """The question, whitespace-normalised; raises InvalidQuestionError naming what is wrong."""
    if query is None:
        raise InvalidQuestionError("no question given: call run(query='...')")
    if not isinstance(query, str):
        raise InvalidQuestionError(f"the question must be a string, got {type(query).__name__}")
    if has_control_chars(query):
        raise InvalidQuestionError("the question contains control characters")
    if has_lone_surrogates(query):
        raise InvalidQuestionError("the question is not valid Unicode text (it holds a lone surrogate)")
    question = " ".join(query.split())
    if not question:
        raise InvalidQuestionError("the question is empty")
    if len(question) > max_chars:
        raise InvalidQuestionError(
            f"the question is {len(question)} characters long; the limit is {max_chars} (MAX_QUESTION_CHARS)")
    return question


def check_history(history: Any, max_chars: int) -> list[str]:
    """Chat history as a list of turn texts; accepts strings or {'role', 'content'} dicts."""
    if history is None:
        return []
    if not isinstance(history, list):
        raise InvalidQuestionError("history must be a list of turns (strings or {'role', 'content'} dicts)")
    turns: list[str] = []
    for turn in history[-MAX_HISTORY_TURNS:]:
        text = turn.get("content") if isinstance(turn, dict) else getattr(turn, "content", turn)
        if not isinstance(text, str):
            raise InvalidQuestionError("each history turn must be a string or have a string 'content'")
        turns.append(" ".join(without_control_chars(text).split())[: max_chars * 4])  # context, not a question
    return [t for t in turns if t]
