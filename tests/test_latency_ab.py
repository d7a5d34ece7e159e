"""experiments/latency_ab.py: an earlier commit runs as the `dagrag` package beside today's."""

from __future__ import annotations

import json
import os
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
    (tree / "experiments" / "eval.py").write_text("print('no such option: --systems')\nraise SystemExit(2)\n")
    scratch = tmp_path / "scratch"
    (scratch / "runs").mkdir(parents=True)
    with pytest.raises(SystemExit, match="exited 2 on hatch:\nno such option: --systems"):
        latency_ab.run("base", tree, None, "hatch", 4, scratch, "hatch-1-base")


def test_a_base_that_names_no_commit_is_refused(capsys):
    with pytest.raises(SystemExit):
        latency_ab.main(["--base", "no-such-revision-here", "--out", "unused.json"])
    assert "--base: 'no-such-revision-here' names no commit" in capsys.readouterr().err
