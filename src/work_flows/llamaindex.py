"""A QueryWorkflow where LlamaIndex expects a query engine or an agent tool.

    engine = as_query_engine(workflow)        # or workflow.as_query_engine()
    response = await engine.aquery("Were Tomas Reyne and Mara Vance born in the same country?")
    response.response                         # the cited answer; [n] is response.source_nodes[n-1]
    response.metadata["plan"], ["retrieval_confidence"], ["coverage"], ["verification"], ["degradations"],
    ["abstained"] (no kept passage answers: the answer says so), ["abstain_reason"]

    tool = as_tool(workflow, name="dagrag")   # or workflow.as_tool(...): FunctionAgent / ReActAgent tools

The workflow is typed as a plain `Workflow` whose run returns a QueryResult, so this module does not import
query_workflow.py (which offers these as methods by importing this module).
"""

from __future__ import annotations

import textwrap
from typing import Any

from llama_index.core.async_utils import asyncio_run
from llama_index.core.base.response.schema import Response
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.core.tools import FunctionTool
from pydantic import Field
from workflows import Workflow

from ..core.result import QueryResult, Source
from ..core.sources import source_title

DEFAULT_TOOL_DESCRIPTION = (
    "Answers a factual question from the document collection, including questions that need several "
    "documents (comparisons of two things, or a fact about something another document names). "
    "Input: the question as a full sentence. Output: an answer whose [n] cite the numbered sources listed after it.")
TOOL_PASSAGE_CHARS = 300  # of each source in the tool's text: enough to check a claim, short enough for a prompt


def source_node(source: Source, citation: int) -> NodeWithScore:
    """A source as LlamaIndex's node, keeping its id, text, metadata and where it came from in the plan."""
    metadata = {**source.metadata, "title": source_title(source), "subquery_id": source.subquery_id,
                "rank_in_subquery": source.rank_in_subquery, "subquery_ids": list(source.subquery_ids),
                "citation": citation}
    return NodeWithScore(node=TextNode(id_=source.node_id, text=source.text, metadata=metadata), score=source.score)


def response_of(result: QueryResult) -> Response:
    """The QueryResult as LlamaIndex's Response: source_nodes in citation order (CitationQueryEngine's convention,
    `[n]` is `source_nodes[n-1]`), and what dagrag did in `metadata` (JSON-ready dicts)."""
    metadata: dict[str, Any] = {
        "question": result.question,
        "concise_answer": result.concise_answer,
        "plan": result.plan.model_dump(mode="json"),
        "subqueries": [report.model_dump(mode="json") for report in result.subqueries],
        "retrieval_confidence": result.retrieval_confidence,
        "coverage": dict(result.retrieval_confidence_features),
        "verification": result.verification.model_dump(mode="json"),
        "degradations": [d.model_dump(mode="json") for d in result.degradations],
        "path": result.path,
        "abstained": result.abstained,
        "abstain_reason": result.abstain_reason,
        "partial": result.partial,
        "partial_reason": result.partial_reason,
        "timings": dict(result.timings),
        "llm_calls": result.llm_calls.count,
        "mermaid": result.mermaid(),
    }
    nodes = [source_node(source, n) for n, source in enumerate(result.sources, start=1)]
    return Response(response=result.answer, source_nodes=nodes, metadata=metadata)


class DagragQueryEngine(CustomQueryEngine):
    """A query engine over a QueryWorkflow: each query is one workflow run (plan, layered search, write, verify).

    `aquery` runs in the caller's event loop; `query` runs the workflow to completion in a loop of its own (in a
    worker thread when the caller's loop is already running, as in a notebook).
    """

    workflow: Workflow = Field(description="A QueryWorkflow (any Workflow whose run returns a QueryResult).")

    def custom_query(self, query_str: str) -> Response:
        return asyncio_run(self.acustom_query(query_str))

    async def acustom_query(self, query_str: str) -> Response:
        result = await self.workflow.run(query=query_str)
        if not isinstance(result, QueryResult):
            raise TypeError(f"the workflow returned {type(result).__name__}, not a QueryResult")
        return response_of(result)


def as_query_engine(workflow: Workflow, **engine_fields: Any) -> DagragQueryEngine:
    """`workflow` as a LlamaIndex query engine (fields of CustomQueryEngine, e.g. callback_manager, may be given)."""
    return DagragQueryEngine(workflow=workflow, **engine_fields)


def tool_text(response: Response) -> str:
    """What an agent reads back from the tool: the cited answer, then each numbered source with its title, the
    subquery that found it and the start of its passage, so the agent can quote and cite."""
    lines = [str(response.response or "").strip() or "(no answer)", "", "Sources:"]
    for n, hit in enumerate(response.source_nodes, start=1):
        metadata = hit.node.metadata
        passage = textwrap.shorten(hit.node.get_content(), TOOL_PASSAGE_CHARS, placeholder="…")
        lines.append(f"[{n}] {metadata.get('title', '')} (subquery {metadata.get('subquery_id', '?')}, "
                     f"score {hit.score or 0.0:.2f}): {passage}")
    if len(lines) == 3:
        lines.append("(none: the collection had nothing on this question)")
    if (response.metadata or {}).get("abstained"):
        lines += ["", "The collection does not answer this question; the sources above are only the closest "
                  "passages."]
    confidence = (response.metadata or {}).get("retrieval_confidence")
    if confidence:
        lines += ["", f"Retrieval confidence: {confidence}."]
    return "\n".join(lines)


def as_tool(workflow: Workflow, *, name: str = "dagrag", description: str | None = None) -> FunctionTool:
    """`workflow` as a LlamaIndex tool taking `question`: its text is `tool_text` (the cited answer and the
    sources), its raw output the Response (source_nodes and metadata as `as_query_engine` gives them)."""
    engine = as_query_engine(workflow)

    async def ask(question: str) -> Response:
        """question: the question to answer, as a full sentence that names what it is about."""
        return await engine.aquery(question)

    # Given only the coroutine, FunctionTool's sync `call` runs it to completion in a loop of its own.
    return FunctionTool.from_defaults(async_fn=ask, name=name,
                                      description=description or DEFAULT_TOOL_DESCRIPTION, callback=tool_text)
