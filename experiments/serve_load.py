"""A bounded load run against `dagrag serve` on loopback: N clients, each asking /query in a loop for D seconds.

    .venv/bin/python experiments/serve_load.py                      # 16 and 64 clients, 60 s each
    .venv/bin/python experiments/serve_load.py --clients 16 --seconds 20

The server is a real one (uvicorn on 127.0.0.1, the HotpotQA sample collection, the serving defaults: SERVE_MAX_RUNS
from the cores, SERVE_MAX_QUEUE, SERVE_QUEUE_WAIT_S). Each answer is checked to be about the question that asked it
(no cross-talk: the answer's own question, and the same sources the question gets alone). Writes
experiments/results/serve-load.json: per run, the status counts, latency percentiles, the Retry-After values of any
429, cross-talk, and the machine's load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from evalkit.metrics import percentile
from evalkit.provenance import changed_settings, code_commit

from dagrag import Settings
from dagrag.ingest import ingest_nodes, read_nodes
from dagrag.server import DagragService
from dagrag.stack import build_embed_model
from dagrag.testing.live_server import LiveServer

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "data" / "hotpotqa_sample.jsonl"
RESULT = ROOT / "experiments" / "results" / "serve-load.json"
KEY = "load-run-key-0123456789"


def sample_questions() -> list[str]:
    return [" ".join(json.loads(line)["question"].split())
            for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]


def source_ids(answer: dict[str, Any]) -> list[str]:
    return [source["node_id"] for source in answer["sources"]]


async def load(url: str, questions: list[str], clients: int, seconds: float,
               alone: dict[str, list[str]]) -> dict[str, Any]:
    """`clients` closed loops of /query for `seconds`; what came back."""
    statuses: Counter[int] = Counter()
    latencies: list[float] = []
    retry_after: list[int] = []
    cross_talk = 0
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=300,
                                 limits=limits) as http:
        async def client(number: int) -> None:
            nonlocal cross_talk
            turn = number
            while time.monotonic() < deadline:
                question = questions[turn % len(questions)]
                turn += clients
                started = time.perf_counter()
                try:
                    response = await http.post("/query", json={"question": question})
                except httpx.HTTPError:
                    statuses[0] += 1  # no answer at all
                    continue
                latencies.append(time.perf_counter() - started)
                statuses[response.status_code] += 1
                if response.status_code == 200:
                    answer = response.json()
                    if answer["question"] != question or source_ids(answer) != alone[question]:
                        cross_talk += 1
                elif response.status_code == 429:
                    retry_after.append(int(response.headers.get("retry-after", "0")))
                    await asyncio.sleep(min(int(response.headers.get("retry-after", "1")), 5))

        await asyncio.gather(*(client(n) for n in range(clients)))
    answered = sorted(latencies)
    return {
        "clients": clients, "seconds": seconds, "requests": sum(statuses.values()),
        "statuses": {str(code): count for code, count in sorted(statuses.items())},
        "cross_talk": cross_talk,
        "latency_s": {"p50": round(percentile(answered, 50), 3), "p95": round(percentile(answered, 95), 3),
                      "max": round(max(answered), 3) if answered else None},
        "retry_after_s": sorted(Counter(retry_after).items()) if retry_after else [],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


async def run_all(url: str, clients: list[int], seconds: float) -> list[dict[str, Any]]:
    questions = sample_questions()
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=300) as http:
        alone = {q: source_ids((await http.post("/query", json={"question": q})).json()) for q in questions}
    return [await load(url, questions, count, seconds, alone) for count in clients]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="16,64", help="comma list of client counts, one run each")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each run")
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    counts = [int(part) for part in args.clients.split(",") if part.strip()]
    with tempfile.TemporaryDirectory() as store:
        settings = Settings(qdrant_path=Path(store), collection="load", api_key=KEY, serve_runs_db="memory")
        ingest_nodes(settings, read_nodes(SAMPLE), build_embed_model(settings.embed_model, settings.embed_batch_size))
        service = DagragService.from_settings(settings)
        with LiveServer(service) as server:
            runs = asyncio.run(run_all(server.url, counts, args.seconds))
    report = {"commit": code_commit(), "cpus": os.cpu_count(), "serve_max_runs": settings.serve_max_runs,
              "serve_max_queue": settings.serve_max_queue, "serve_queue_wait_s": settings.serve_queue_wait_s,
              "settings_changed": changed_settings(settings), "runs": runs}
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    for run in runs:
        print(f"{run['clients']} clients × {run['seconds']:.0f} s: {run['statuses']}, cross-talk {run['cross_talk']}, "
              f"p50 {run['latency_s']['p50']} s, p95 {run['latency_s']['p95']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
