"""Helpers for testing code built on dagrag, such as a fake OpenAI-compatible server (`dagrag.testing.openai_server`).

Nothing is imported here, so that `python -m dagrag.testing.openai_server` runs the module only once.
"""
