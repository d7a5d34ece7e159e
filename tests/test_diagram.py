"""Pictures: a known plan's Mermaid text, `dagrag query --mermaid`, and `dagrag draw` naming every step."""

from __future__ import annotations

from pathlib import Path

import pytest
from workflows.utils import get_steps_from_class

from dagrag import QueryResult, QueryWorkflow
from dagrag.cli import main
from dagrag.core.diagram import mermaid_label_text, mermaid_node_ids
from dagrag.work_flows.drawing import workflow_mermaid

COMPARISON = QueryResult.model_validate({
    "question": "Were Scott Derrickson and Ed Wood of the same nationality?", "answer": "Both American [1][2].",
    "retrieval_confidence": "high",
    "plan": {"query": "Were Scott Derrickson and Ed Wood of the same nationality?", "origin": "offline",
             "subqueries": [{"id": "s1", "text": "Scott Derrickson nationality"},
                            {"id": "s2", "text": "Ed Wood nationality"}],
             "layers": [["s1", "s2"]]},
    "subqueries": [{"id": "s1", "text": "Scott Derrickson nationality", "layer": 0, "status": "covered",
                    "best_score": 0.9996},
                   {"id": "s2", "text": "Ed Wood nationality", "layer": 0, "status": "uncovered", "best_score": 0.2}],
    "sources": [{"node_id": "a", "text": "…", "metadata": {"title": "Scott Derrickson"}, "score": 0.9996,
                 "subquery_id": "s1", "rank_in_subquery": 1, "subquery_ids": ["s1"]},
                {"node_id": "b", "text": "…", "metadata": {"title": "Ed Wood (film)"}, "score": 0.2,
                 "subquery_id": "s2", "rank_in_subquery": 1, "subquery_ids": ["s2"]}]})

TWO_HOP = QueryResult.model_validate({
    "question": "Which post did the actress of Kiss and Tell hold?", "answer": "Chief of Protocol [2].",
    "retrieval_confidence": "mid",
    "plan": {"query": "Which post did the actress of Kiss and Tell hold?", "origin": "llm",
             "subqueries": [{"id": "s1", "text": 'Who played Corliss Archer in "Kiss and Tell"?'},
                            {"id": "s2", "text": "{s1} government position", "parents": ["s1"]}],
             "layers": [["s1"], ["s2"]]},
    "subqueries": [{"id": "s1", "text": 'Who played Corliss Archer in "Kiss and Tell"?', "layer": 0,
                    "status": "covered", "best_score": 0.987},
                   {"id": "s2", "text": "{s1} government position", "layer": 1, "status": "covered",
                    "best_score": 0.965, "searched_as": "Shirley Temple government position"}],
    "sources": [{"node_id": "a", "text": "…", "metadata": {"title": "Kiss and Tell (1945 film)"}, "score": 0.987,
                 "subquery_id": "s1", "rank_in_subquery": 1},
                {"node_id": "b", "text": "…", "metadata": {"title": "Shirley Temple"}, "score": 0.965,
                 "subquery_id": "s2", "rank_in_subquery": 1}]})

COMPARISON_MERMAID = """\
%%{init: {"flowchart": {"wrappingWidth": 380}}}%%
flowchart TB
    subgraph layer_0["layer 0"]
        direction LR
        sq_s1["<b>s1</b>: Scott Derrickson nationality<br/>covered → Scott Derrickson (1.000)"]:::covered
        sq_s2["<b>s2</b>: Ed Wood nationality<br/>uncovered → Ed Wood (film) (0.200)"]:::uncovered
    end
    classDef covered fill:#dff5e1,stroke:#2e7d32,color:#1b1b1b
    classDef uncovered fill:#fff4d6,stroke:#b7791f,color:#1b1b1b"""

TWO_HOP_MERMAID = """\
%%{init: {"flowchart": {"wrappingWidth": 380}}}%%
flowchart TB
    subgraph layer_0["layer 0"]
        direction LR
        sq_s1["<b>s1</b>: Who played Corliss Archer in #quot;Kiss and Tell#quot;?<br/>covered → Kiss and Tell (1945 film) (0.987)"]:::covered
    end
    subgraph layer_1["layer 1"]
        direction LR
        sq_s2["<b>s2</b>: {s1} government position<br/><i>searched as: Shirley Temple government position</i><br/>covered → Shirley Temple (0.965)"]:::covered
    end
    sq_s1 --> sq_s2
    classDef covered fill:#dff5e1,stroke:#2e7d32,color:#1b1b1b"""  # noqa: E501


def test_a_comparison_plan_is_one_layer_of_two_boxes():
    assert COMPARISON.mermaid() == COMPARISON_MERMAID


def test_a_two_hop_plan_is_two_layers_joined_by_the_parent_edge():
    assert TWO_HOP.mermaid() == TWO_HOP_MERMAID


def test_labels_cannot_break_out_of_their_quotes():
    assert mermaid_label_text('say "hi" <b>#1</b> `x`') == "say #quot;hi#quot; #lt;b#gt;#35;1#lt;/b#gt; #96;x#96;"
    assert mermaid_label_text("word " * 30).endswith("…") and len(mermaid_label_text("word " * 30)) <= 60
    assert mermaid_node_ids(["end", "s-1", "s_1", "s 1"]) == {"end": "sq_end", "s-1": "sq_s_1", "s_1": "sq_s_1_2",
                                                              "s 1": "sq_s_1_3"}


def test_a_plan_that_never_ran_still_shows_its_subqueries():
    never_ran = TWO_HOP.model_copy(update={"subqueries": [], "sources": []})
    picture = never_ran.mermaid()
    assert ":::not_run" in picture and "classDef not_run" in picture and "covered" not in picture


@pytest.fixture
def sample_env(monkeypatch, sample_store_path):
    monkeypatch.setenv("DAGRAG_QDRANT_PATH", str(sample_store_path))
    monkeypatch.setenv("DAGRAG_COLLECTION", "sample")


def test_query_mermaid_prints_the_executed_dag(sample_env, capsys):
    question = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
    assert main(["query", question, "--mermaid"]) == 0
    printed = capsys.readouterr().out
    assert "\nflowchart TB\n" in printed and "sq_s1 --> sq_s2" in printed
    assert "covered → Kiss and Tell (1945 film)" in printed and "covered → Shirley Temple" in printed


def test_draw_writes_a_page_that_names_every_step(tmp_path: Path, capsys):
    out = tmp_path / "pictures" / "workflow.html"
    assert main(["draw", "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    steps = sorted(get_steps_from_class(QueryWorkflow))  # the steps as the workflow itself registers them
    assert steps == ["backtrack", "critique", "judge", "plan", "schedule", "search_layer", "verify", "write"]
    for name in [*steps, "QueryStarted", "LayerQueued", "RetryQueued", "BacktrackQueued", "StopEvent"]:
        assert f'"label": "{name}"' in page, name
    # The page loads its graph library from beside it, so it opens without a network.
    assert "cdnjs.cloudflare.com/ajax/libs/vis-network/9.1.2/dist/vis-network.min.js" not in page
    assert (out.parent / "lib" / "vis-9.1.2" / "vis-network.min.js").exists()

    assert main(["draw", "--mermaid"]) == 0
    mermaid = capsys.readouterr().out
    assert mermaid.startswith("flowchart TD")
    for name in steps:
        assert f'step_{name}["{name}"]' in mermaid
    assert "event_EvidenceGathered --> step_judge" in mermaid and "event_EvidenceJudged --> step_write" in mermaid
    assert "classDef toolStyle" not in mermaid


def test_the_workflow_picture_in_architecture_md_matches_the_code():
    architecture = (Path(__file__).resolve().parent.parent / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert f"```mermaid\n{workflow_mermaid()}\n```" in architecture, (
        "run .venv/bin/python scripts/update_architecture_diagram.py")
