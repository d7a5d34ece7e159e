"""experiments/all_sets.py: the tables of every benchmark set in docs/benchmarks.md come from the result files."""

from __future__ import annotations

import json
import sys

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "experiments"))

import all_sets
import benchmarks_doc
from evalkit.docs import folder_sha256


def test_the_benchmarks_page_holds_the_tables_the_result_files_give():
    document = benchmarks_doc.DOC.read_text(encoding="utf-8")
    assert all(part in document for part in (all_sets.table(), all_sets.answers_table(),
                                             all_sets.comparisons_only_table(), all_sets.comparisons_table())), (
        "docs/benchmarks.md's tables of all sets differ from experiments/results/all-sets: "
        "run .venv/bin/python experiments/all_sets.py table")


def test_every_set_and_budget_has_a_result_with_both_systems_and_the_commit_it_ran_on():
    for benchmark in all_sets.SETS:
        for budget in all_sets.BUDGETS:
            record = json.loads(all_sets.result_path(benchmark.name, budget).read_text(encoding="utf-8"))
            assert record["budget"] == budget and record["config"]["budget"] == budget
            assert {"single", "dag"} <= set(record["systems"]) and record["commit"]
            assert record["systems"]["dag"]["n"] == record["systems"]["single"]["n"] > 0


def test_a_table_row_reads_its_numbers_from_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(all_sets, "RESULTS", tmp_path)
    stats = {"n": 3, "recall": 0.5, "joint_recall": 0.25}
    (tmp_path / "black-k4.json").write_text(json.dumps({
        "set": "black", "budget": 4, "commit": "abc1234", "held_out": False, "config": {"budget": 4},
        "systems": {"single": stats, "dag": {**stats, "joint_recall": 0.5}}}), encoding="utf-8")
    rows = all_sets.table().splitlines()
    assert rows[2:] == ["| black docs | 3 | 4 | 0.500 | 0.500 | 0.250 | 0.500 | +0.250 | - | abc1234 |"]
    paired = {"joint_recall": {"won": 5, "lost": 2, "p": 0.4531}}  # a file made since eval.py pairs the systems
    (tmp_path / "black-k4.json").write_text(json.dumps({
        "set": "black", "budget": 4, "commit": "abc1234", "held_out": False, "config": {"budget": 4},
        "systems": {"single": stats, "dag": {**stats, "joint_recall": 0.5, "against_single": paired}}}),
        encoding="utf-8")
    assert all_sets.table().splitlines()[2:] == [
        "| black docs | 3 | 4 | 0.500 | 0.500 | 0.250 | 0.500 | +0.250 | 5 / 2 (p 0.45) | abc1234 |"]


def test_an_answers_row_reads_match_and_abstaining_from_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(all_sets, "RESULTS", tmp_path)
    single = {"n": 3, "recall": 0.5, "joint_recall": 0.25, "match": 0.25, "abstained": 0.0, "by_type": {}}
    dag = {**single, "match": 0.5, "abstained": 0.125,
           "by_type": {"out-of-collection": {"n": 76, "recall": 0.0, "joint_recall": 0.0, "match": 0.0,
                                             "abstained": 0.75}}}
    (tmp_path / "black-k4.json").write_text(json.dumps({
        "set": "black", "budget": 4, "commit": "abc1234", "held_out": False, "config": {"budget": 4},
        "systems": {"single": single, "dag": dag}}), encoding="utf-8")
    rows = all_sets.answers_table().splitlines()
    assert rows[2:] == ["| black docs | 4 | 0.250 | 0.500 | - | 0.125 | - | 0.750 (76 questions) | abc1234 |"]
    dag.update(match_where_found=0.8, n_found=10)  # a file made since eval.py reports it
    dag["by_type"]["own-code"] = {"n": 4, "recall": 1.0, "joint_recall": 1.0, "match": 0.5, "abstained": 0.25}
    (tmp_path / "black-k4.json").write_text(json.dumps({
        "set": "black", "budget": 4, "commit": "abc1234", "held_out": False, "config": {"budget": 4},
        "systems": {"single": single, "dag": dag}}), encoding="utf-8")
    assert all_sets.answers_table().splitlines()[2:] == [
        "| black docs | 4 | 0.250 | 0.500 | 0.800 (10 questions) | 0.125 | 0.250 (4 questions) | 0.750 (76 questions) "
        "| abc1234 |"]


def test_the_no_bridge_column_reads_its_own_system_on_docs_sets_only(tmp_path, monkeypatch):
    monkeypatch.setattr(all_sets, "RESULTS", tmp_path)
    stats = {"n": 8, "recall": 0.75, "joint_recall": 0.75}
    record = {"set": "black", "budget": 2, "commit": "abc1234", "held_out": False, "config": {"budget": 2},
              "systems": {"single": stats, "dag": {**stats, "joint_recall": 0.625},
                          "dag-no-bridge": {**stats, "joint_recall": 0.875}}}
    (tmp_path / "black-k2.json").write_text(json.dumps(record), encoding="utf-8")
    (tmp_path / "hotpotqa-k2.json").write_text(json.dumps({**record, "set": "hotpotqa"}), encoding="utf-8")
    without = {**record, "set": "hatch", "systems": {"single": stats, "dag": stats}}  # a file from before it ran
    (tmp_path / "hatch-k2.json").write_text(json.dumps(without), encoding="utf-8")
    rows = all_sets.comparisons_only_table().splitlines()
    assert rows[2:] == ["| black docs | 2 | 0.750 | 0.625 | 0.875 | +0.125 | abc1234 |"]


def test_a_long_set_name_is_cut_after_a_hyphen_so_labels_do_not_run_into_each_other():
    assert all_sets.tick_label({"set": "scikit-build-core"}) == "scikit-\nbuild-core\ndocs"
    assert all_sets.tick_label({"set": "hotpotqa"}) == "hotpotqa\n(first 120)"
    assert all_sets.tick_label({"set": all_sets.HELD_OUT}).endswith("\n(held out)")
    for name in all_sets.BY_NAME:  # every line fits, unless it is one word with no hyphen to cut at
        assert all(len(line) <= 12 or "-" not in line[1:12] for line in all_sets.tick_label({"set": name}).split("\n"))


def test_pooled_rows_add_up_each_groups_questions_won_and_lost_and_say_which_losses_are_beyond_chance(
        tmp_path, monkeypatch):
    monkeypatch.setattr(all_sets, "RESULTS", tmp_path)

    def write(name, budget, joint, recall, n=50):
        dag = {"n": n, "recall": 0.5, "joint_recall": 0.5,
               "against_single": {"joint_recall": joint, "recall": recall, "match": joint}}
        (tmp_path / f"{name}-k{budget}.json").write_text(json.dumps({
            "set": name, "budget": budget, "commit": "abc1234", "held_out": name == all_sets.HELD_OUT,
            "config": {}, "systems": {"single": {"n": n, "recall": 0.5, "joint_recall": 0.5}, "dag": dag}}))

    assert all_sets.pooled_table() == ""  # no result file: no table
    write("black", 2, {"won": 2, "lost": 5, "p": 0.45}, {"won": 0, "lost": 11, "p": 0.001})
    write("click", 2, {"won": 1, "lost": 4, "p": 0.38}, {"won": 3, "lost": 3, "p": 1.0})
    write("hotpotqa", 4, {"won": 40, "lost": 1, "p": 0.0}, {"won": 40, "lost": 2, "p": 0.0}, n=120)
    rows = all_sets.pooled_table().splitlines()[2:]
    assert rows == ["| Wikipedia sets (1) | 4 | 120 | 40 / 1 (p < 0.01) | 40 / 2 (p < 0.01) |",
                    "| documentation sets (2) | 2 | 100 | 3 / 9 (p 0.15) | 3 / 14 (p 0.01) |"]  # 3 of 12, 3 of 17
    records = all_sets.records()
    # black's evidence recall, 0 / 11, is beyond chance; its joint recall and click's are not
    assert "on black docs at budget 2 (recall 0 / 11 (p < 0.01));" in benchmarks_doc.beyond_chance(records)
    write("black", 2, {"won": 2, "lost": 5, "p": 0.45}, {"won": 5, "lost": 6, "p": 1.0})
    assert "none of these losses is beyond chance" in benchmarks_doc.beyond_chance(all_sets.records())


def test_the_comparisons_row_reads_the_split_and_the_evidence_found_from_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(all_sets, "RESULTS", tmp_path)
    single = {"n": 10, "recall": 0.5, "joint_recall": 0.4,
              "by_type": {"comparison": {"n": 4, "recall": 0.5, "joint_recall": 0.25}}}
    dag = {**single, "by_type": {"comparison": {"n": 4, "recall": 1.0, "joint_recall": 0.75, "sides_split": 0.75}}}
    record = {"set": "black", "budget": 4, "commit": "abc1234", "held_out": False, "config": {"budget": 4},
              "systems": {"single": single, "dag": dag}}
    (tmp_path / "black-k4.json").write_text(json.dumps(record), encoding="utf-8")
    before = {**record, "set": "flask", "systems": {"single": single, "dag": {**dag, "by_type": single["by_type"]}}}
    (tmp_path / "flask-k4.json").write_text(json.dumps(before), encoding="utf-8")  # a file from before it was reported
    rows = all_sets.comparisons_table().splitlines()
    assert rows[2:] == ["| black docs | 4 | 4 | 0.750 | 0.250 | 0.750 | abc1234 |", "",
                        "The documentation sets together, budget 4: 4 comparisons, 0.750 searched side by side, all "
                        "evidence found for 0.750 (one search: 0.250)."]


def test_keep_copies_each_types_numbers_and_the_sides_split_where_the_summary_has_it(tmp_path, monkeypatch):
    monkeypatch.setattr(all_sets, "RESULTS", tmp_path / "results")
    run = tmp_path / "run"
    run.mkdir()
    comparison = {"n": 4, "recall": 1.0, "joint_recall": 0.75, "match": 0.5, "abstained": 0.0, "sides_split": 0.75,
                  "latency_p50_s": 0.4}
    older = {"n": 2, "recall": 0.5, "joint_recall": 0.5, "match": 0.0}  # a summary from before abstaining was counted
    summary = {"config": {"budget": 4, "data": str(all_sets.ROOT / "data.jsonl")},
               "systems": {"dag": {"n": 6, "recall": 0.8, "by_type": {"comparison": comparison, "bridge": older}}}}
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    all_sets.keep(all_sets.BY_NAME["black"], 4, run, "abc1234")
    kept = json.loads(all_sets.result_path("black", 4).read_text(encoding="utf-8"))
    assert kept["commit"] == "abc1234" and kept["config"]["data"] == "data.jsonl"
    assert kept["systems"]["dag"]["by_type"]["comparison"] == {
        "n": 4, "recall": 1.0, "joint_recall": 0.75, "match": 0.5, "abstained": 0.0, "sides_split": 0.75}
    assert kept["systems"]["dag"]["by_type"]["bridge"] == {"n": 2, "recall": 0.5, "joint_recall": 0.5, "match": 0.0,
                                                          "abstained": 0.0}


def test_a_run_made_by_other_code_or_settings_starts_over_and_one_of_this_code_resumes(tmp_path):
    out = tmp_path / "hatch-k4"
    pool = {"subquery_topk_base": 8}
    assert not all_sets.made_otherwise(out, "3f2a9c1", {})  # nothing there yet
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"budget": 4, "code": "3f2a9c1", "settings": {}}))
    assert not all_sets.made_otherwise(out, "3f2a9c1", {})
    assert all_sets.made_otherwise(out, "3f2a9c1+5d41402abc4b", {})  # src/ edited since
    assert all_sets.made_otherwise(out, "3f2a9c1", pool)  # DAGRAG_SUBQUERY_TOPK_BASE=8 is another system
    (out / "run.json").write_text(json.dumps({"budget": 4, "code": "3f2a9c1", "settings": pool}))
    assert not all_sets.made_otherwise(out, "3f2a9c1", pool)
    assert all_sets.made_otherwise(out, "3f2a9c1", {})
    (out / "run.json").write_text(json.dumps({"budget": 4, "code": "3f2a9c1"}))  # from before runs recorded settings
    assert all_sets.made_otherwise(out, "3f2a9c1", {})
    (out / "run.json").write_text(json.dumps({"budget": 4}))  # a run from before runs recorded their code
    assert all_sets.made_otherwise(out, "3f2a9c1", {})


def test_a_run_made_from_another_version_of_its_docs_corpus_starts_over(tmp_path):
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "page.rst").write_text("A page.\n")
    out = tmp_path / "pkg-k4"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"code": "3f2a9c1", "settings": {},
                                              "corpus_sha256": folder_sha256(corpus)}))
    assert not all_sets.made_otherwise(out, "3f2a9c1", {}, corpus)
    (corpus / "snippets").mkdir()
    (corpus / "snippets" / "example.py").write_text("print('an example the page includes')\n")
    assert all_sets.made_otherwise(out, "3f2a9c1", {}, corpus)  # the page now shows an example it did not
    (out / "run.json").write_text(json.dumps({"code": "3f2a9c1", "settings": {}}))  # from before runs recorded it
    assert all_sets.made_otherwise(out, "3f2a9c1", {}, corpus)
