"""Prometheus metrics of one server (its own registry, so two apps in one process never share counters)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ..core.result import QueryResult

# Seconds; a query takes from tens of milliseconds (search, cached) to minutes (a slow local LLM).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class ServerMetrics:
    """Requests by route and status, latencies, query stage durations, degradations, runs in flight."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("dagrag_requests", "HTTP requests by route template, method and status.",
                                ["route", "method", "status"], registry=self.registry)
        self.client_requests = Counter("dagrag_client_requests", "HTTP requests by the name of the API key they "
                                       "carried (DAGRAG_API_KEYS; `admin`: DAGRAG_API_KEY; `local`: no key).",
                                       ["client"], registry=self.registry)
        self.latency = Histogram("dagrag_request_seconds", "HTTP request duration by route template.",
                                 ["route"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.stages = Histogram("dagrag_query_stage_seconds", "Time spent per query stage (plan, search, rerank, "
                                "write, verify, total) in the runs the server answered.", ["stage"],
                                buckets=LATENCY_BUCKETS, registry=self.registry)
        self.degradations = Counter("dagrag_degradations", "Agents that fell back (LLM failure, deadline, reranker "
                                    "error), by agent.", ["agent"], registry=self.registry)
        self.partial = Counter("dagrag_partial_results", "Runs cut short by QUERY_TIMEOUT_S.",
                               registry=self.registry)
        self.runs_in_flight = Gauge("dagrag_runs_in_flight", "Queries and searches running now.",
                                    registry=self.registry)
        self.rejected = Counter("dagrag_runs_rejected", "Requests refused with 429: every run slot was busy.",
                                registry=self.registry)

    def observe_result(self, result: QueryResult) -> None:
        for stage, seconds in result.timings.items():
            if not stage.startswith("layer_"):  # per-layer keys would make the label set unbounded
                self.stages.labels(stage.removesuffix("_s")).observe(seconds)
        for degradation in result.degradations:
            self.degradations.labels(degradation.agent).inc()
        if result.partial:
            self.partial.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
