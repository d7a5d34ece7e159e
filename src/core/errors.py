"""The errors dagrag raises at its boundaries. Each message names the problem and, where one exists, the fix."""

from __future__ import annotations


class DagragError(Exception):
    """Base class of every error dagrag raises on purpose."""


class InvalidQuestionError(DagragError, ValueError):
    """The question is empty, too long, not text, or holds control characters."""


class QdrantUnavailableError(DagragError, ConnectionError):
    """The Qdrant server or embedded folder cannot be reached or opened."""


class CollectionNotFoundError(DagragError, LookupError):
    """The collection to search does not exist (nothing was ingested). `collection` names it, so a server can say
    which without repeating the message, which names the store's folder or URL."""

    def __init__(self, message: str, *, collection: str | None = None) -> None:
        super().__init__(message)
        self.collection = collection


class IngestError(DagragError, ValueError):
    """An input record is malformed or the collection does not fit the embedding model."""


class ConfigurationError(DagragError, ValueError):
    """The settings are valid one by one but cannot work together here (a model's API key is missing, ...)."""
