"""Does your LLM server give the same plan for the same question twice? The planner asked twice, in two orders.

    eval "$(scripts/local_llm.sh start)"        # or: start -- --no-cache-prompt
    python experiments/llm_repeat.py --data ../shared/data/hotpotqa_dev.jsonl --questions 8 --out runs/repeat.json

At temperature 0 a reply should depend on its prompt alone. A server that reuses the cached state of a prompt's
opening (llama.cpp's prompt cache) reads the rest from where it parts from the cached prompt, and the model's
numbers can then differ in their last digits, enough to change a token. This asks dagrag's planner (its prompt,
schema and client, from DAGRAG_* settings) for the first N questions in order, then again in reverse order, so that
each prompt follows another one the second time; it counts the questions whose two plans differ and times the
calls. Two runs of anything with the model can only be compared on a server where that count is 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from eval import write_atomically
from evalkit.provenance import code_commit

from dagrag import Settings
from dagrag.agents.planner import QueryPlannerAgent
from dagrag.core.result import RunLedger
from dagrag.stack import build_llm_client


def plan_steps(executed: Any) -> list[tuple[str, str, tuple[str, ...]]]:
    """What a plan searches, in order: (id, text, parents) per subquery."""
    return [(sq.id, sq.text, tuple(sq.parents)) for sq in executed.subqueries]


async def ask_twice(planner: QueryPlannerAgent, questions: list[str]) -> dict[str, Any]:
    """Each question planned in order, then in reverse order; the plans that differ and the seconds per call."""
    first: dict[str, Any] = {}
    second: dict[str, Any] = {}
    seconds: list[float] = []
    for record, order in ((first, questions), (second, list(reversed(questions)))):
        for question in order:
            started = time.perf_counter()
            executed = await planner.aplan(question, [], RunLedger())
            seconds.append(time.perf_counter() - started)
            record[question] = {"origin": str(executed.origin), "steps": plan_steps(executed)}
    differing = [{"question": q, "first": first[q], "second": second[q]}
                 for q in questions if first[q] != second[q]]
    return {"questions": len(questions), "differ": len(differing), "differing": differing,
            "call_p50_s": round(statistics.median(seconds), 2) if seconds else None,
            "calls_s": round(sum(seconds), 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="JSONL with a `question` field per line")
    parser.add_argument("--questions", type=int, default=8, help="how many of the first questions to ask")
    parser.add_argument("--out", type=Path, help="write the result as JSON here")
    args = parser.parse_args(argv)
    if args.questions < 1:
        parser.error("--questions must be at least 1")
    settings = Settings()
    client = build_llm_client(settings)
    if client is None:
        parser.error("no LLM: set DAGRAG_LLM (and DAGRAG_LLM_BASE_URL), e.g. eval \"$(scripts/local_llm.sh start)\"")
    with args.data.open(encoding="utf-8") as lines:
        questions = [json.loads(line)["question"] for line, _ in zip(lines, range(args.questions))]
    planner = QueryPlannerAgent(client, subquery_max=settings.subquery_max)
    result = asyncio.run(ask_twice(planner, questions))
    result.update(llm=settings.llm, data=str(args.data), commit=code_commit())
    print(f"{result['differ']} of {result['questions']} questions got another plan the second time; "
          f"plan call p50 {result['call_p50_s']} s", file=sys.stderr)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(args.out, json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
