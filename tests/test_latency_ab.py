"""experiments/latency_ab.py: an earlier commit runs as the `dagrag` package beside today's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "experiments"))

import latency_ab


def test_the_base_commit_is_what_imports_as_dagrag(tmp_path):
    # This checkout is installed as `dagrag` too; the exported commit must win, or the A/B times today's code twice.
    package_root = latency_ab.export("HEAD", tmp_path / "base")
    imported = subprocess.run([sys.executable, "-c", "import dagrag.work_flows.query_workflow as m; print(m.__file__)"],
                              env={**os.environ, "PYTHONPATH": str(package_root)}, cwd=tmp_path,
                              capture_output=True, text=True, check=True).stdout.strip()
    assert Path(imported).resolve().is_relative_to((tmp_path / "base" / "src").resolve())
    assert (tmp_path / "base" / "experiments" / "eval.py").is_file()


def test_only_the_dag_rows_that_ran_are_timed(tmp_path):
    rows = [{"system": "dag", "metrics": {"latency_s": 1.5}}, {"system": "single", "metrics": {"latency_s": 9.0}},
            {"system": "dag", "failed": True, "metrics": {"latency_s": 30.0}},
            {"system": "dag", "metrics": {"latency_s": 0.5}}]
    (tmp_path / "per_question.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert latency_ab.latencies(tmp_path) == [1.5, 0.5]


def test_a_failing_eval_says_what_it_printed_before_its_scratch_folder_goes(tmp_path):
    tree = tmp_path / "tree"
    (tree / "experiments").mkdir(parents=True)
    (tree / "experiments" / "eval.py").write_text(
        f"print('no such option: --systems')\nprint('error: {tree}/experiments/data/q.jsonl:4: bad type')\n"
        "raise SystemExit(2)\n")
    scratch = tmp_path / "scratch"
    (scratch / "runs").mkdir(parents=True)
    said = re.escape("base's eval.py exited 2 on hatch:\nno such option: --systems")
    with pytest.raises(latency_ab.SetFailed, match=said):
        latency_ab.run("base", tree, None, "hatch", 4, scratch, "hatch-1-base")
    with pytest.raises(latency_ab.SetFailed) as failure:  # files by their place in the tree, not this machine's path
        latency_ab.run("base", tree, None, "hatch", 4, scratch, "hatch-1-base")
    said = str(failure.value)
    assert "error: experiments/data/q.jsonl:4: bad type" in said and str(tmp_path) not in said


def test_a_set_one_side_cannot_run_is_reported_and_the_others_are_still_timed(tmp_path, monkeypatch):
    # An older commit's eval.py may refuse a set's newer question types; that must not throw away the sets timed.
    def fake_run(side, tree, python_path, set_name, budget, scratch, label):
        if set_name == "black" and side == "base":
            raise latency_ab.SetFailed("base's eval.py exited 2 on black:\nerror: type 'comparison' is not one of fact")
        return {"side": side, "set": set_name, "questions": 3, "p50_s": 1.0 if side == "base" else 0.5,
                "p95_s": 2.0, "mean_s": 1.0, "load_before": 1.0, "load_after": 1.0}

    monkeypatch.setattr(latency_ab, "run", fake_run)
    monkeypatch.setattr(latency_ab, "export", lambda commit, into: into)
    out = tmp_path / "ab.json"
    sets = "hatch,black,hotpotqa"
    assert latency_ab.main(["--base", "HEAD", "--sets", sets, "--rounds", "1", "--out", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["p50_s"] == {"hatch": {"base": 1.0, "today": 0.5}, "hotpotqa": {"base": 1.0, "today": 0.5}}
    assert report["sets"] == "hatch,hotpotqa" and len(report["runs"]) == 8
    assert "type 'comparison' is not one of fact" in report["skipped"]["black"]
    monkeypatch.setattr(latency_ab, "run", lambda side, *rest: fake_run(side, None, None, "black", 4, None, ""))
    assert latency_ab.main(["--base", "HEAD", "--sets", "black", "--out", str(out)]) == 1  # nothing timed


def test_a_base_that_names_no_commit_is_refused(capsys):
    with pytest.raises(SystemExit):
        latency_ab.main(["--base", "no-such-revision-here", "--out", "unused.json"])
    assert "--base: 'no-such-revision-here' names no commit" in capsys.readouterr().err
