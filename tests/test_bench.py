"""experiments/bench.py: a fast smoke run of its pieces (simulated backends, small sizes)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from dagrag import Settings
from dagrag.ingest import ingest_nodes, make_node
from dagrag.store import close_local_client
from dagrag.testing.openai_server import (
    ANY_AGENT,
    JUDGE_SYSTEM,
    OpenAIServerProcess,
    agent_of,
    simulated_replies,
)

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "experiments"))

import bench


def _config(**overrides) -> bench.BenchConfig:
    values = {"data": bench.DEFAULT_DATA, "index_dir": Path("unused"), "quick": True, "queries": 2, "reps": 1,
              "scale_sizes": [300], "ingest_passages": 16, "orchestration_runs": 3, "sections": list(bench.SECTIONS)}
    values.update(overrides)
    return bench.BenchConfig(**values)


def _body(system: str, user: str) -> dict:
    return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}


def test_simulated_llm_answers_every_agent():
    replies = simulated_replies(bench.QUESTION, bench.SUBQUERIES)

    def reply(body: dict) -> tuple[str, str]:
        agent = agent_of(body)
        answer = replies.get(agent, replies[ANY_AGENT])
        return agent, answer(body) if callable(answer) else answer

    kind, plan = reply(_body("You turn a question into the searches that answer it.", "Question: ..."))
    assert kind == "planner" and [s["text"] for s in json.loads(plan)["subqueries"]] == list(bench.SUBQUERIES)
    fenced = "".join(f'<source id="{n}" title="t">x</source>' for n in (1, 2, 3))
    kind, answer = reply(_body("You answer a question from numbered sources ...", fenced))
    assert kind == "writer" and answer.count("[") == 3
    kind, verdicts = reply(_body("You check an answer against its sources.",
                                 "Sentences:\n1. Born in 1980 [2].\n2. Born later [1].\n\nSources:\n..."))
    assert kind == "verifier" and [v["source"] for v in json.loads(verdicts)["sentences"]] == [2, 1]
    kind, scores = reply(_body(JUDGE_SYSTEM, "Query: annie morton\n[1] Annie Morton is\n[2] other"))
    assert kind == "judge" and json.loads(scores)["scores"] == [2, 0]
    kind, questions = reply({"messages": [{"role": "user", "content":
                                           "Given a user question, and a list of tools, output ..."}]})
    assert kind == "subq_questions" and "wikipedia" in questions
    assert reply(_body("You are an expert Q&A system", "Context information")) == (
        "unknown", "According to the context, the answer is given above.")


@pytest.mark.slow
async def test_network_layer_overlaps_its_calls():
    with OpenAIServerProcess(question=bench.QUESTION, subqueries=list(bench.SUBQUERIES)) as server:
        result = await bench.bench_network(_config(), server)
        server.reset()
        assert server.stats()["calls"] == {}
    calls = result["details"]["calls"]
    assert calls["layer"] == {"embedding_calls": 1, "judge_calls": 4, "layers": 1}
    assert calls["chain"] == {"embedding_calls": 4, "judge_calls": 4, "layers": 4}
    assert result["layer_speedup_network"] > 2.0  # 4 in theory; loose for a busy test machine


async def test_orchestration_and_scale_sections_report_their_keys():
    orchestration = await bench.bench_orchestration(_config())
    assert 0 < orchestration["orchestration_overhead_ms"] < 1000
    assert set(orchestration["details"]) >= {"given_plan", "rule_planner"}
    scale = await bench.bench_scale(_config())
    assert set(scale["qdrant_p50_ms"]) == {"300"} and scale["details"]["300"]["layer_batch4_p50_ms"] > 0


def test_ingest_writes_every_batch_and_skips_them_next_time(tmp_path):
    settings = Settings(qdrant_path=tmp_path / "q", collection="bench_ingest", embed_batch_size=8)
    nodes = [make_node("word " * (i % 7 + 1) + f"passage {i}", f"Title {i}") for i in range(30)]
    done: list[int] = []
    try:
        first = ingest_nodes(settings, nodes, bench.NetworkEmbedding(delay=0.0), progress=done.append)
        again = ingest_nodes(settings, nodes, bench.NetworkEmbedding(delay=0.0))
    finally:
        close_local_client(tmp_path / "q")
    assert first.added == 30 and sum(done) == 30 and len(done) == 4
    assert again.added == 0 and again.already_present == 30


def test_targets_and_table(capsys):
    results = {
        "layer_speedup_network": 3.9, "layer_cpu_efficiency": 1.02, "orchestration_overhead_ms": 7.0,
        "qdrant_p50_ms": {"5000": 3.0},
        "peer_subq": {"dagrag": {"wall_s": 1.0, "llm_calls": 3, "passages": 4},
                      "subq": {"wall_s": 0.4, "llm_calls": 6, "passages": 12},
                      "dagrag_over_subq": {"llm_calls": 0.5}, "met": {"calls": True, "wall": False}},
        "details": {},
    }
    results["targets"] = bench.targets_of(results)
    assert results["targets"]["layer_speedup_network"]["met"] is True
    assert results["targets"]["orchestration_overhead_ms"]["met"] is False
    assert results["targets"]["peer_subq"]["met"] is False
    bench.print_table(results)
    assert "layer_speedup_network" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--quick"], ["--only", "network,scale", "--skip-scale"]])
def test_config_from_flags(argv):
    cfg = bench.config_from(bench.build_parser().parse_args(argv))
    if "--quick" in argv:
        assert cfg.queries == 10 and cfg.pool_questions == 30 and cfg.scale_sizes == [2_000, 5_000]
    else:
        assert cfg.sections == ["network"]


def test_the_query_profile_splits_each_questions_time_by_stage_and_names_the_hot_functions(tmp_path):
    import profile_query

    out = tmp_path / "profile.json"
    assert profile_query.main(["--limit", "2", "--out", str(out)]) == 0
    profile = json.loads(out.read_text())
    assert profile["questions"] == 2 and profile["commit"]
    assert {"search", "rerank", "judge", "write", "total"} <= set(profile["stages_s"])
    assert 0 < profile["wall_s"]["p50"] <= profile["wall_s"]["max"]
    assert profile["top_self_time"] and all(0 <= row["share"] <= 1 for row in profile["top_self_time"])


def test_the_load_run_counts_statuses_latency_and_cross_talk_against_a_live_server(tmp_path):
    import serve_load

    out = tmp_path / "load.json"
    assert serve_load.main(["--clients", "2", "--seconds", "2", "--out", str(out)]) == 0
    [run] = json.loads(out.read_text())["runs"]
    assert run["clients"] == 2 and run["requests"] == sum(run["statuses"].values()) > 0
    assert run["statuses"].get("200") == run["requests"] and run["cross_talk"] == 0
    assert 0 < run["latency_s"]["p50"] <= run["latency_s"]["max"]
