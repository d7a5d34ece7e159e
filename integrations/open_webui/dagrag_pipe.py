"""
title: dagrag
author: dagrag
description: Multi-hop answers from `dagrag serve`: layers as status lines, sources as citations, the DAG in Mermaid.
version: 0.1.0
license: MIT
"""

# An Open WebUI Function (a pipe: it shows up as a model named "dagrag"). Install it in Open WebUI under
# Admin Panel → Functions → Import (or "+" and paste this file), then set its valves. It imports only what
# Open WebUI ships (standard library, httpx, pydantic), never dagrag itself: the work happens in `dagrag serve`,
# reached over HTTP at POST /query/stream (server-sent events: progress summaries, then the QueryResult).

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
from pydantic import BaseModel, Field

EventEmitter = Callable[[dict[str, Any]], Awaitable[None]]

MAX_LABEL_TEXT = 60  # these rules copy dagrag.core.diagram (a test holds the two pictures to the same text)
# Mermaid wraps a label at 200 px; a subquery reads better in wider boxes (GitHub and Open WebUI honour this).
WIDER_LABELS = '%%{init: {"flowchart": {"wrappingWidth": 380}}}%%'
STATUS_STYLES = {
    "covered": "fill:#dff5e1,stroke:#2e7d32,color:#1b1b1b",
    "uncovered": "fill:#fff4d6,stroke:#b7791f,color:#1b1b1b",
    "failed": "fill:#fde2e1,stroke:#c62828,color:#1b1b1b",
    "skipped": "fill:#eeeeee,stroke:#757575,color:#1b1b1b",
    "not_run": "fill:#eeeeee,stroke:#757575,color:#1b1b1b,stroke-dasharray:4 3",
}


LLM_ACTIVITY = {"planner": "planning…", "writer": "writing the answer…", "verifier": "verifying…"}


class DagragUnavailable(Exception):
    """The server could not be asked (down, refused the key, refused the question): the message says which."""


class Pipe:
    class Valves(BaseModel):
        DAGRAG_URL: str = Field(default="http://127.0.0.1:8000", description="Where `dagrag serve` listens.")
        DAGRAG_API_KEY: str = Field(default="", description="The server's DAGRAG_API_KEY (empty on loopback).")
        SHOW_PLAN: bool = Field(default=True, description="End the answer with the question's DAG as Mermaid.")
        TIMEOUT_S: float = Field(default=300.0, description="How long one question may take, in seconds.")

    def __init__(self) -> None:
        self.valves = self.Valves()

    async def pipe(self, body: dict[str, Any], __user__: dict[str, Any] | None = None,
                   __event_emitter__: EventEmitter | None = None) -> str:
        emit = __event_emitter__ or _ignore
        question, history = question_and_history(body.get("messages") or [])
        if not question:
            return "Ask a question: the last message has no text."
        await status(emit, "planning the searches…")
        try:
            result = await self.ask(question, history, emit)
        except DagragUnavailable as problem:
            await status(emit, f"dagrag: {problem}", done=True)
            return f"**dagrag could not answer.** {problem}"
        for number, source in enumerate(result.get("sources") or [], start=1):
            await emit(source_event(number, source))
        await status(emit, summary(result), done=True)
        answer = str(result.get("answer") or "")
        if self.valves.SHOW_PLAN:
            answer += f"\n\n```mermaid\n{result_mermaid(result)}\n```"
        return answer

    async def ask(self, question: str, history: list[dict[str, str]], emit: EventEmitter) -> dict[str, Any]:
        """Streams the question to the server, turning its progress into status lines; returns the QueryResult."""
        url = self.valves.DAGRAG_URL.rstrip("/") + "/query/stream"
        headers = {"Accept": "text/event-stream"}
        if self.valves.DAGRAG_API_KEY:
            headers["Authorization"] = f"Bearer {self.valves.DAGRAG_API_KEY}"
        timeout = httpx.Timeout(self.valves.TIMEOUT_S, connect=10.0)
        try:
            async with httpx.AsyncClient(timeout=timeout) as client, client.stream(
                    "POST", url, json={"question": question, "history": history}, headers=headers) as response:
                if response.status_code != 200:
                    raise DagragUnavailable(refusal(response.status_code, await response.aread(), url))
                async for name, data in server_sent_events(response.aiter_lines()):
                    if name == "result":
                        return data
                    if name == "error":
                        raise DagragUnavailable(f"the server failed the question ({data.get('status')}): "
                                                f"{data.get('detail')}")
                    line = progress_line(name, data)
                    if line:
                        await status(emit, line)
        except httpx.TimeoutException:
            raise DagragUnavailable(f"no answer from {url} within {self.valves.TIMEOUT_S:g} s "
                                    "(raise the TIMEOUT_S valve, or the server's DAGRAG_QUERY_TIMEOUT_S)") from None
        except httpx.HTTPError as error:
            raise DagragUnavailable(f"cannot reach the dagrag server at {self.valves.DAGRAG_URL} "
                                    f"({type(error).__name__}: {error}). Is `dagrag serve` running there? "
                                    "Check the DAGRAG_URL valve.") from None
        raise DagragUnavailable(f"the stream from {url} ended without a result")


async def _ignore(event: dict[str, Any]) -> None:
    """The emitter when Open WebUI gives none (a background task): progress goes nowhere."""


async def status(emit: EventEmitter, description: str, *, done: bool = False) -> None:
    await emit({"type": "status", "data": {"description": description, "done": done, "hidden": False}})


def message_text(content: Any) -> str:
    """A chat message's text: a string, or the text parts of a multimodal message."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content
                        if isinstance(part, dict) and part.get("type") == "text")
    return ""


def question_and_history(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, str]]]:
    """The last user message is the question; the user and assistant turns before it are its history."""
    turns = [(m.get("role"), message_text(m.get("content")).strip()) for m in messages]
    last = max((i for i, (role, text) in enumerate(turns) if role == "user" and text), default=None)
    if last is None:
        return "", []
    history = [{"role": str(role), "content": text} for role, text in turns[:last]
               if role in ("user", "assistant") and text]
    return turns[last][1], history


async def server_sent_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """(event name, JSON data) per event of a text/event-stream."""
    name, data = "message", []
    async for line in lines:
        if line.startswith("event:"):
            name = line.split(":", 1)[1].strip()
        elif line.startswith("data:"):
            data.append(line.split(":", 1)[1].strip())
        elif not line and data:
            yield name, json.loads("\n".join(data))
            name, data = "message", []


def progress_line(name: str, data: dict[str, Any]) -> str | None:
    """The status line for one of the server's progress events (None: not worth a line of its own)."""
    if name == "PlanChosen":
        count, layers = len(data.get("subqueries") or []), len(data.get("layers") or [])
        return f"plan: {count} subquer{'y' if count == 1 else 'ies'} in {layers} layer{'' if layers == 1 else 's'}"
    if name == "HopAdded":
        return f"the question needs one more hop: {(data.get('subquery') or {}).get('id', '?')}"
    if name == "LayerStarted":
        return f"searching {', '.join(data.get('subquery_ids') or [])} …"
    if name == "AnswerWritten":
        return "verifying the answer against its sources…"
    if name == "LLMProgress" and not data.get("done"):  # a finished call: the next event says what came of it
        agent = str(data.get("agent") or "the LLM")
        tokens = int(data.get("tokens") or 0)
        attempt = int(data.get("attempt") or 1)
        line = LLM_ACTIVITY.get(agent, agent + "…")
        if tokens:  # the call's start has none yet
            line += f" {tokens} token{'' if tokens == 1 else 's'}, {float(data.get('seconds') or 0):.0f} s"
        return line + (f" (attempt {attempt})" if attempt > 1 else "")
    return None


def summary(result: dict[str, Any]) -> str:
    """The last status line: how many sources, coverage and confidence; that it abstained, when it did."""
    features = result.get("retrieval_confidence_features") or {}
    if result.get("abstained"):
        return f"the collection does not answer this · {len(result.get('sources') or [])} closest sources cited"
    line = (f"{len(result.get('sources') or [])} sources · {int(features.get('covered_count', 0))}/"
            f"{int(features.get('subquery_count', 0))} subqueries covered · confidence "
            f"{result.get('retrieval_confidence', '?')}")
    return line + (" · partial: " + str(result.get("partial_reason")) if result.get("partial") else "")


def refusal(status_code: int, body: bytes, url: str) -> str:
    """What a non-200 reply means for the user."""
    try:
        detail = json.loads(body).get("detail", "")
    except (ValueError, AttributeError):
        detail = body[:200].decode("utf-8", "replace")
    if status_code == 401:
        return ("the dagrag server refused the API key (401). Set the DAGRAG_API_KEY valve to the server's "
                "DAGRAG_API_KEY.")
    if status_code == 404:
        return f"{url} is not a dagrag server (404). Check the DAGRAG_URL valve. {detail}".strip()
    if status_code == 429:
        return "the dagrag server is busy with other questions (429); ask again in a few seconds."
    return f"the dagrag server refused the question ({status_code}): {detail}"


def source_title(source: dict[str, Any]) -> str:
    metadata = source.get("metadata") or {}
    title = str(metadata.get("title") or metadata.get("file_name") or str(source.get("node_id", ""))[:8])
    return f"{title} > {metadata['section']}" if metadata.get("section") else title


def source_event(number: int, source: dict[str, Any]) -> dict[str, Any]:
    """A source as Open WebUI's citation: `[number]` in the answer cites it. Its id is the passage's, so two
    passages of one document stay two citations."""
    title = source_title(source)
    return {"type": "source", "data": {
        "source": {"id": str(source.get("node_id", number)), "name": f"[{number}] {title}"},
        "document": [str(source.get("text", ""))],
        "metadata": [{"source": title, "name": f"[{number}] {title}", "subquery_id": source.get("subquery_id"),
                      "rank_in_subquery": source.get("rank_in_subquery")}],
        "distances": [float(source.get("score") or 0.0)],
    }}


# --- the executed plan as Mermaid (the rules of dagrag.core.diagram, over the result's JSON) ---------------

def label_text(text: str, max_chars: int = MAX_LABEL_TEXT) -> str:
    flat = " ".join(str(text).split())
    if len(flat) > max_chars:
        cut = flat[: max_chars - 1]
        space = cut.rfind(" ")
        flat = (cut[:space] if space > max_chars // 2 else cut).rstrip() + "…"
    escaped = flat.replace("#", "#35;")
    for char, code in (('"', "#quot;"), ("<", "#lt;"), (">", "#gt;"), ("`", "#96;")):
        escaped = escaped.replace(char, code)
    return escaped


def node_ids(subquery_ids: list[str]) -> dict[str, str]:
    taken: set[str] = set()
    ids: dict[str, str] = {}
    for sq_id in subquery_ids:
        base = "sq_" + re.sub(r"\W", "_", sq_id)
        node_id, n = base, 2
        while node_id in taken:
            node_id, n = f"{base}_{n}", n + 1
        taken.add(node_id)
        ids[sq_id] = node_id
    return ids


def best_title(result: dict[str, Any], sq_id: str) -> str | None:
    own = [s for s in result.get("sources") or []
           if s.get("subquery_id") == sq_id or sq_id in (s.get("subquery_ids") or [])]
    if not own:
        return None
    best = min(own, key=lambda s: (s.get("subquery_id") != sq_id, s.get("rank_in_subquery") or 0))
    return str((best.get("metadata") or {}).get("title") or "") or None


def node_label(sq: dict[str, Any], report: dict[str, Any] | None, title: str | None) -> str:
    lines = [f"<b>{label_text(sq['id'], 20)}</b>: {label_text(sq.get('text', ''))}"]
    searched_as = (report or {}).get("searched_as")
    if searched_as and searched_as != sq.get("text"):
        lines.append(f"<i>searched as: {label_text(searched_as)}</i>")
    outcome = ((report or {}).get("status") or "not_run").replace("_", " ")
    if title:
        outcome += f" → {label_text(title, 40)}"
    if (report or {}).get("best_score") is not None:
        outcome += f" ({report['best_score']:.3f})"
    lines.append(outcome)
    return "<br/>".join(lines)


def result_mermaid(result: dict[str, Any]) -> str:
    """The executed plan: a band per layer, a box per subquery coloured by its status, an edge per parent link."""
    plan = result.get("plan") or {}
    subqueries = plan.get("subqueries") or []
    reports = {r["id"]: r for r in result.get("subqueries") or []}
    ids = node_ids([sq["id"] for sq in subqueries])
    by_id = {sq["id"]: sq for sq in subqueries}
    status_of = {sq["id"]: (reports.get(sq["id"]) or {}).get("status") or "not_run" for sq in subqueries}
    labels = {sq["id"]: node_label(sq, reports.get(sq["id"]), best_title(result, sq["id"])) for sq in subqueries}
    lines = [WIDER_LABELS, "flowchart TB"]
    placed: set[str] = set()
    for index, layer in enumerate(plan.get("layers") or []):
        lines += [f'    subgraph layer_{index}["layer {index}"]', "        direction LR"]
        for sq_id in layer:
            if sq_id in by_id and sq_id not in placed:
                placed.add(sq_id)
                lines.append(f'        {ids[sq_id]}["{labels[sq_id]}"]:::{status_of[sq_id]}')
        lines.append("    end")
    for sq in subqueries:
        if sq["id"] not in placed:
            lines.append(f'    {ids[sq["id"]]}["{labels[sq["id"]]}"]:::{status_of[sq["id"]]}')
    for sq in subqueries:
        for parent in sq.get("parents") or []:
            if parent in ids:
                lines.append(f"    {ids[parent]} --> {ids[sq['id']]}")
    used = set(status_of.values())
    lines += [f"    classDef {name} {style}" for name, style in STATUS_STYLES.items() if name in used]
    return "\n".join(lines)
