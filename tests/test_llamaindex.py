"""dagrag inside LlamaIndex: a query engine (alone and behind a RouterQueryEngine) and an agent tool called by real
FunctionAgent and ReActAgent runs, whose LLM is the scripted OpenAI-compatible server on loopback.

The workflow itself is the real one over the sample collection, offline (no LLM of its own): only the router's
selector and the agents talk to the scripted server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent, ReActAgent, ToolCallResult
from llama_index.core.base.response.schema import Response
from llama_index.core.query_engine import CustomQueryEngine, RouterQueryEngine
from llama_index.core.selectors import LLMSingleSelector
from llama_index.core.tools import QueryEngineTool
from llama_index.llms.openai_like import OpenAILike

from dagrag import QueryResult
from dagrag.testing.openai_server import ScriptedOpenAIServer, ToolCall
from dagrag.work_flows.llamaindex import as_query_engine, as_tool, response_of, tool_text

DERRICKSON = "Were Scott Derrickson and Ed Wood of the same nationality?"
KISS_AND_TELL = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
AGENT_SYSTEM = "You are a research assistant. Use the dagrag tool for factual questions."


@pytest.fixture(scope="module")
def offline_workflow(make_workflow):
    return make_workflow()


@pytest.fixture
def llm_server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as server:
        yield server


def scripted_llm(server: ScriptedOpenAIServer) -> OpenAILike:
    """A function-calling chat model at the scripted server, as a user would point OpenAILike at vLLM or Ollama."""
    return OpenAILike(model="scripted-model", api_base=server.base_url, api_key="not-needed", is_chat_model=True,
                      is_function_calling_model=True, max_retries=0, timeout=30)


def last_tool_message(request: dict[str, Any]) -> str:
    """What the agent handed back to the model from the tool (the OpenAI `tool` message, or ReAct's Observation)."""
    for message in reversed(request["messages"]):
        if message["role"] == "tool":
            return str(message["content"])
        content = str(message.get("content") or "")
        if "Observation:" in content:
            return content.split("Observation:", 1)[1].strip()
    raise AssertionError("the model was never shown the tool's output")


# --- the query engine --------------------------------------------------------------------------------

async def test_the_query_engine_answers_with_source_nodes_in_citation_order(offline_workflow):
    response = await offline_workflow.as_query_engine().aquery(DERRICKSON)
    assert isinstance(response, Response)
    titles = [hit.node.metadata["title"] for hit in response.source_nodes]
    assert titles[:2] == ["Scott Derrickson", "Ed Wood"]
    # [n] in the answer is source_nodes[n-1]: each cited passage's opening words are in the answer.
    assert "[1]" in response.response and "[2]" in response.response
    assert response.source_nodes[0].node.get_content()[:40] in response.response
    first = response.source_nodes[0]
    assert first.node.metadata["subquery_id"] == "s1" and first.node.metadata["rank_in_subquery"] == 1
    assert first.node.metadata["citation"] == 1 and first.score > 0.9
    metadata = response.metadata
    assert [sq["id"] for sq in metadata["plan"]["subqueries"]] == ["s1", "s2", "s0"]  # the sides, the question
    assert metadata["plan"]["layers"] == [["s1", "s2", "s0"]] and metadata["plan"]["origin"] == "offline"
    assert metadata["coverage"]["covered_count"] == 3 and metadata["coverage"]["coverage_ratio"] == 1.0
    assert metadata["retrieval_confidence"] == "high"
    assert metadata["verification"]["support_rate"] == 1.0 and metadata["degradations"] == []
    assert "flowchart TB" in metadata["mermaid"]
    json.dumps(metadata)  # JSON-ready: it can be logged or returned by any server


def test_the_sync_query_runs_inside_a_running_loop_too(offline_workflow):
    # query() from synchronous code: the workflow runs to completion in a loop of its own.
    response = as_query_engine(offline_workflow).query(KISS_AND_TELL)
    assert [hit.node.metadata["subquery_id"] for hit in response.source_nodes][:2] == ["s1", "s2"]
    assert "Chief of Protocol" in response.response
    assert response.metadata["plan"]["layers"] == [["s1"], ["s2"]]


async def test_a_router_sends_a_multi_hop_question_to_dagrag(offline_workflow, llm_server):
    class Greeter(CustomQueryEngine):
        def custom_query(self, query_str: str) -> str:
            return "Hello!"

    # LLMSingleSelector's reply: the 1-based choice among the tools, with a reason.
    llm_server.script("unknown", json.dumps([{"choice": 2, "reason": "a factual multi-hop question"}]))
    llm = scripted_llm(llm_server)
    router = RouterQueryEngine(
        selector=LLMSingleSelector.from_defaults(llm=llm), llm=llm,  # llm: only a multi-selection's summariser
        query_engine_tools=[
            QueryEngineTool.from_defaults(Greeter(), name="greeter", description="Says hello."),
            QueryEngineTool.from_defaults(as_query_engine(offline_workflow), name="dagrag",
                                          description="Answers factual questions from Wikipedia paragraphs."),
        ])
    response = await router.aquery(DERRICKSON)
    selector_prompt = llm_server.requests_of("unknown")[0]["messages"][-1]["content"]
    assert "Answers factual questions from Wikipedia paragraphs." in selector_prompt and DERRICKSON in selector_prompt
    assert response.metadata["selector_result"].ind == 1
    assert [hit.node.metadata["title"] for hit in response.source_nodes][:2] == ["Scott Derrickson", "Ed Wood"]
    assert response.metadata["retrieval_confidence"] == "high"


def test_a_result_without_sources_is_a_response_without_nodes(offline_workflow):
    result = QueryResult.model_validate({
        "question": "q", "answer": "I found nothing.", "retrieval_confidence": "low",
        "plan": {"query": "q", "origin": "offline", "subqueries": [{"id": "s1", "text": "q"}], "layers": [["s1"]]},
        "subqueries": [{"id": "s1", "text": "q", "layer": 0, "status": "uncovered"}]})
    response = response_of(result)
    assert response.response == "I found nothing." and response.source_nodes == []
    assert response.metadata["subqueries"][0]["status"] == "uncovered"


async def test_a_question_the_collection_does_not_answer_says_so_in_the_response_and_the_tool_text(
        offline_workflow):
    response = await offline_workflow.as_query_engine().aquery("How do I roll back a Kubernetes deployment?")
    assert response.metadata["abstained"] and "ABSTAIN_BELOW" in response.metadata["abstain_reason"]
    assert response.response.startswith("The collection does not seem to answer this question.")
    assert response.source_nodes  # the closest passages, for whoever wants to look
    assert "The collection does not answer this question; the sources above are only the closest" in tool_text(
        response)
    answered = await offline_workflow.as_query_engine().aquery(DERRICKSON)
    assert answered.metadata["abstained"] is False and "does not answer" not in tool_text(answered)


# --- the agent tool -------------------------------------------------------------------------------------

async def test_a_function_agent_calls_the_tool_and_answers_with_dagrags_answer(offline_workflow, llm_server):
    llm_server.script("unknown", ToolCall("dagrag", {"question": KISS_AND_TELL}),
                      lambda request: "According to dagrag: " + last_tool_message(request).split("\n\nSources:")[0])
    agent = FunctionAgent(tools=[offline_workflow.as_tool()], llm=scripted_llm(llm_server), system_prompt=AGENT_SYSTEM)
    handler = agent.run(user_msg=KISS_AND_TELL)
    tool_results = [event async for event in handler.stream_events() if isinstance(event, ToolCallResult)]
    output = await handler

    assert [(r.tool_name, r.tool_kwargs) for r in tool_results] == [("dagrag", {"question": KISS_AND_TELL})]
    dagrag_response = tool_results[0].tool_output.raw_output
    assert isinstance(dagrag_response, Response)
    tool_text = tool_results[0].tool_output.content
    assert tool_text.startswith(dagrag_response.response)
    assert "[2] Shirley Temple (subquery s2" in tool_text and "Chief of Protocol" in tool_text
    assert str(output.response.content) == f"According to dagrag: {dagrag_response.response}"
    # The model was offered the tool with its schema, and saw the tool's text before its final answer.
    first, second = llm_server.requests_of("unknown")
    offered = first["tools"][0]["function"]
    assert offered["name"] == "dagrag" and offered["parameters"]["required"] == ["question"]
    assert last_tool_message(second) == tool_text


async def test_a_react_agent_calls_the_tool_through_its_text_protocol(offline_workflow, llm_server):
    action = json.dumps({"question": DERRICKSON})
    llm_server.script("unknown", f"Thought: I need to look this up.\nAction: dagrag\nAction Input: {action}",
                      lambda request: "Thought: I can answer now.\nAnswer: Both were American. "
                                      + last_tool_message(request).split("\n")[0])
    agent = ReActAgent(tools=[as_tool(offline_workflow)], llm=scripted_llm(llm_server))
    handler = agent.run(user_msg=DERRICKSON)
    tool_results = [event async for event in handler.stream_events() if isinstance(event, ToolCallResult)]
    output = await handler
    assert [r.tool_kwargs for r in tool_results] == [{"question": DERRICKSON}]
    answer = tool_results[0].tool_output.raw_output.response
    assert str(output.response.content).startswith("Both were American.") and answer in str(output.response.content)
