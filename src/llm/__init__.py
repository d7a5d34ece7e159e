"""The LLM client layer: every LLM agent talks to its model through one `LLMClient`."""

from .client import LLMCallError, LLMClient, LLMReplyError, RetryPolicy, describe_error

__all__ = ["LLMCallError", "LLMClient", "LLMReplyError", "RetryPolicy", "describe_error"]
