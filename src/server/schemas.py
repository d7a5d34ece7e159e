"""Request bodies the server accepts, and how a refused body is explained (which field, what is wrong)."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

# Open WebUI's external retrieval contract, as AarhusAI/retrieval-agent implements it.
COLLECTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
MAX_SEARCH_QUERIES = 10
MAX_SEARCH_QUERY_CHARS = 2000
MAX_MESSAGES = 50
MAX_MESSAGE_CHARS = 10_000


class BadRequest(Exception):
    """A request the server refuses; `field` names the part of the body at fault ("body" for the whole)."""

    def __init__(self, status: int, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.status = status
        self.field = field
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"detail": f"{self.field}: {self.message}", "field": self.field}


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    role: str = Field(max_length=32)
    content: str = Field(max_length=MAX_MESSAGE_CHARS)


class SearchBody(BaseModel):
    """`POST /search`: Open WebUI's external retrieval request."""

    model_config = ConfigDict(extra="ignore", strict=True)

    queries: list[str] | None = Field(None, max_length=MAX_SEARCH_QUERIES)
    messages: list[ChatMessage] | None = Field(None, max_length=MAX_MESSAGES)
    collection_names: list[str] = Field(min_length=1, max_length=20)
    k: int = Field(5, ge=1, le=100)

    @field_validator("queries")
    @classmethod
    def _short_queries(cls, queries: list[str] | None) -> list[str] | None:
        for query in queries or []:
            if len(query) > MAX_SEARCH_QUERY_CHARS:
                raise ValueError(f"a query is {len(query)} characters; at most {MAX_SEARCH_QUERY_CHARS}")
        return queries

    @field_validator("collection_names")
    @classmethod
    def _valid_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not COLLECTION_NAME.fullmatch(name):
                raise ValueError(f"{name[:140]!r} does not match {COLLECTION_NAME.pattern}")
        return names

    def questions(self) -> list[tuple[str, list[str]]]:
        """(question, history) pairs to search: each query alone, else the last user message after the others.

        BadRequest naming `queries` or `messages` when there is nothing to search."""
        if self.queries:
            return [(query, []) for query in self.queries]
        messages = self.messages or []
        users = [i for i, m in enumerate(messages) if m.role == "user" and m.content.strip()]
        if not users:
            if self.messages:
                raise BadRequest(422, "messages", "no user message with text: the last one is the question")
            raise BadRequest(422, "queries", "give 'queries', or 'messages' with a non-empty user message")
        last = users[-1]
        return [(messages[last].content, [m.content for m in messages[:last]])]


class QueryBody(BaseModel):
    """`POST /query` and `/query/stream`."""

    model_config = ConfigDict(extra="forbid", strict=True)

    question: str
    history: list[str | ChatMessage] | None = Field(None, max_length=MAX_MESSAGES)

    def history_turns(self) -> list[str]:
        return [turn if isinstance(turn, str) else turn.content for turn in self.history or []]


def is_json_media_type(content_type: str) -> bool:
    """`application/json` or `application/<x>+json`, parameters (`; charset=utf-8`) aside."""
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def parse_json(raw: bytes) -> Any:
    if not raw.strip():
        raise BadRequest(400, "body", "empty; send a JSON object")
    try:
        return json.loads(raw)
    except UnicodeDecodeError:
        raise BadRequest(400, "body", "not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise BadRequest(400, "body", f"malformed JSON ({error.msg} at line {error.lineno} column {error.colno})"
                         ) from None
    except RecursionError:  # json's parser recurses per level: `[[[[…` a few thousand deep would be a 500
        raise BadRequest(400, "body", "JSON nested too deeply") from None


def parse_body(model: type[BaseModel], raw: bytes) -> Any:
    """The body as `model`, or BadRequest naming the first field at fault (422) or the JSON problem (400)."""
    data = parse_json(raw)
    if not isinstance(data, dict):
        raise BadRequest(422, "body", f"expected a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as error:
        first = error.errors(include_url=False, include_input=False)[0]
        field = ".".join(str(part) for part in first["loc"]) or "body"
        raise BadRequest(422, field, first["msg"]) from None
