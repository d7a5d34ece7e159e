"""Probe a running local llama-server (scripts/local_llm.sh) through the OpenAI-compatible API.

Sends one chat completion with response_format json_object and one with json_schema, checks that
each reply parses as JSON (and, for the schema, has its required keys), and prints the reply, the
server's token counts and speeds, and the server's memory. Exit 1 if a call fails or a reply is not
the JSON asked for. Run it as `scripts/local_llm.sh probe`, or directly:

    .venv/bin/python scripts/local_llm_probe.py --base-url http://127.0.0.1:8080/v1 --model NAME [--pid PID]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from openai import OpenAI

SYSTEM = "You are a planner for a retrieval system. Reply with JSON only."
# The schema is also spelled out in the prompt: with the schema alone (grammar-constrained, greedy)
# the 1.5B model was seen looping inside the "answer" string until max_tokens.
ANSWER_SYSTEM = ('You answer from the given context. Reply with JSON only: {"answer": a short answer, '
                 '"supported": true if the context supports it, "confidence": a number from 0 to 1}.')
QUESTION = "Which river flows through the city where the author of 'Les Misérables' was born?"

JSON_OBJECT_PROMPT = (
    f"Split this question into the smallest sub-questions that must be answered in order:\n{QUESTION}\n"
    'Return a JSON object {"subqueries": [{"id": "s1", "text": "...", "depends_on": []}, ...]}; '
    "a later sub-question may refer to an earlier answer as {s1}."
)

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "supported": {"type": "boolean"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["answer", "supported", "confidence"],
    "additionalProperties": False,
}
JSON_SCHEMA_PROMPT = (
    "Context: [1] Victor Hugo, the author of Les Misérables, was born in Besançon in 1802. "
    "[2] Besançon lies in a loop of the river Doubs.\n"
    f"Question: {QUESTION}\nAnswer from the context only."
)


def rss_mb(pid: int | None) -> str:
    if pid is None:
        return "unknown (no --pid)"
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError as exc:
        return f"unknown ({exc})"
    fields = dict(re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB", status, flags=re.M))
    return ", ".join(f"{name} {int(kb) / 1024:.0f} MB" for name, kb in fields.items())


def call(client: OpenAI, model: str, label: str, system: str, prompt: str,
         response_format: dict[str, Any]) -> dict[str, Any]:
    start = time.perf_counter()
    resp = client.chat.completions.create(
        model=model, temperature=0, max_tokens=256, response_format=response_format,  # type: ignore[arg-type]
        messages=[{"role": "system", "content": system}, {"role": "user", "content": prompt}],
    )
    elapsed = time.perf_counter() - start
    text = resp.choices[0].message.content or ""
    timings = (resp.model_extra or {}).get("timings") or {}
    usage = resp.usage
    print(f"--- {label}: {elapsed:.1f} s wall, finish_reason={resp.choices[0].finish_reason}")
    print(text)
    if usage:
        print(f"tokens: prompt {usage.prompt_tokens}, completion {usage.completion_tokens}")
    if timings:
        print(f"server timings: prompt {timings.get('prompt_n')} tok at {timings.get('prompt_per_second', 0):.1f} tok/s"
              f" (cached {timings.get('cache_n', 0)}), generation {timings.get('predicted_n')} tok at "
              f"{timings.get('predicted_per_second', 0):.1f} tok/s")
    return json.loads(text)  # a reply that is not JSON fails the probe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--pid", type=int)
    parser.add_argument("--log", help="llama-server log (its last speed lines are printed)")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()

    client = OpenAI(base_url=args.base_url, api_key="none", timeout=args.timeout, max_retries=0)
    models = [m.id for m in client.models.list().data]
    print(f"server models: {models}")
    failed = False
    try:
        plan = call(client, args.model, "json_object", SYSTEM, JSON_OBJECT_PROMPT, {"type": "json_object"})
        if not isinstance(plan, dict):
            print("json_object reply is not a JSON object")
            failed = True
        answer = call(client, args.model, "json_schema", ANSWER_SYSTEM, JSON_SCHEMA_PROMPT, {
            "type": "json_schema", "json_schema": {"name": "answer", "strict": True, "schema": ANSWER_SCHEMA}})
        missing = [key for key in ANSWER_SCHEMA["required"] if key not in answer]
        if missing:
            print(f"json_schema reply lacks {missing}")
            failed = True
    except Exception as exc:  # report any failure of the probe
        print(f"probe failed: {type(exc).__name__}: {exc}")
        failed = True
    print(f"--- server memory: {rss_mb(args.pid)}")
    if args.log and Path(args.log).exists():
        lines = [ln.strip() for ln in Path(args.log).read_text(errors="replace").splitlines()
                 if "tokens per second" in ln]
        for line in lines[-4:]:
            print(f"log: {line}")
    print("probe: FAILED" if failed else "probe: OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
