"""The LLM client layer: every LLM agent talks to its model through one `LLMClient`."""

from .client import (
    LLMCallError,
    LLMClient,
    LLMReplyError,
    ReplySchema,
    ResponseFormat,
    RetryPolicy,
    describe_error,
    object_schema,
)

__all__ = ["LLMCallError", "LLMClient", "LLMReplyError", "ReplySchema", "ResponseFormat", "RetryPolicy",
           "describe_error", "object_schema"]
