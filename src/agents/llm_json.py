"""Ask an LLM for a JSON object of short texts keyed by subquery id; shared by the hop agents."""

from __future__ import annotations

from llama_index.core.llms import LLM

from ..work_flows.plan import extract_json_object
from ..work_flows.result import RunLedger
from .llm_calls import chat

MAX_TEXT_CHARS = 2000


async def ask_texts_by_id(llm: LLM, *, system: str, user: str, agent: str, ledger: RunLedger, timeout_s: float,
                          json_mode: bool, ids: list[str]) -> dict[str, str]:
    """`{id: text}` for the ids the reply answers with a non-empty string; raises when it answers none."""
    reply = await chat(llm, system=system, user=user, agent=agent, ledger=ledger, timeout_s=timeout_s,
                       json_mode=json_mode)
    data = extract_json_object(reply)
    texts = {i: " ".join(str(data[i]).split())[:MAX_TEXT_CHARS] for i in ids
             if isinstance(data.get(i), str) and data[i].strip()}
    if not texts:
        raise ValueError(f"the reply names none of {', '.join(ids)}")
    return texts
