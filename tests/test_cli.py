"""`dagrag query` end to end on the sample collection: what a user reads, and a clear error for a bad question."""

from __future__ import annotations

import json

import pytest

from dagrag.cli import main

QUESTION = "Were Scott Derrickson and Ed Wood of the same nationality?"


@pytest.fixture
def sample_env(monkeypatch, sample_store_path):
    monkeypatch.setenv("DAGRAG_QDRANT_PATH", str(sample_store_path))
    monkeypatch.setenv("DAGRAG_COLLECTION", "sample")


def test_query_prints_the_answer_and_each_subquerys_status_in_the_plan(sample_env, capsys):
    assert main(["query", QUESTION]) == 0
    printed = capsys.readouterr().out
    assert "Answer" in printed and "[1]" in printed
    # A status in brackets must reach the terminal as text, not be swallowed as console markup.
    assert "s1: Scott Derrickson nationality  [covered best=" in printed
    assert "s2: Ed Wood nationality  [covered best=" in printed


def test_query_json_is_the_query_result(sample_env, capsys):
    assert main(["query", QUESTION, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["question"] == QUESTION and [s["id"] for s in result["subqueries"]] == ["s1", "s2"]


def test_a_bad_question_exits_2_naming_the_problem(sample_env, capsys):
    assert main(["query", "Who is\x00 Ed Wood?"]) == 2
    assert "control characters" in capsys.readouterr().err
