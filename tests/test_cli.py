"""`dagrag query` end to end on the sample collection: what a user reads, and a clear error for a bad question."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys

import pytest

from dagrag.cli import main
from dagrag.testing.openai_server import ScriptedOpenAIServer, stalled

from .test_llm_path import GOOD_PLAN, VERIFIER_REPLY, WRITER_REPLY

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
    assert "s0: Were Scott Derrickson and Ed Wood" in printed  # every plan searches the question as asked


def test_query_json_is_the_query_result(sample_env, capsys):
    assert main(["query", QUESTION, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["question"] == QUESTION and [s["id"] for s in result["subqueries"]] == ["s1", "s2", "s0"]


def test_a_bad_question_exits_2_naming_the_problem(sample_env, capsys):
    assert main(["query", "Who is\x00 Ed Wood?"]) == 2
    assert "control characters" in capsys.readouterr().err


def _fresh_cli(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`code` in a new interpreter after `from dagrag.cli import main`: what a fresh `dagrag` process does."""
    program = f"import sys\nfrom dagrag.cli import main\n{code}"
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_version_help_and_refused_input_load_no_workflow_or_model() -> None:
    # What makes a CLI call slow is importing LlamaIndex, the model runtimes and the store's client.
    heavy = ("print(sorted(m for m in ('llama_index.core', 'onnxruntime', 'qdrant_client', 'torch') "
             "if m in sys.modules))")
    for argv in (["--version"], ["--help"], ["query", "--help"]):
        done = _fresh_cli(f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n{heavy}")
        assert done.returncode == 0 and done.stdout.strip().splitlines()[-1] == "[]", (argv, done.stderr)
    assert _fresh_cli("main(['--version'])").stdout.startswith("dagrag ")
    refused = _fresh_cli(f"code = main(['query', '   '])\n{heavy}\nprint(code)")
    assert refused.stdout.split() == ["[]", "2"] and "the question is empty" in refused.stderr


def test_a_bad_setting_names_the_variable_and_the_value_not_the_field(capsys, monkeypatch) -> None:
    monkeypatch.setenv("DAGRAG_SUBQUERY_MAX", "0")
    assert main(["query", QUESTION]) == 2
    error = capsys.readouterr().err
    assert "DAGRAG_SUBQUERY_MAX=0: input should be greater than or equal to 1" in error
    assert "validation error for Settings" not in error


def test_a_bad_secret_setting_is_named_without_its_value() -> None:
    from pydantic import ValidationError

    from dagrag.config import Settings, settings_problems

    with pytest.raises(ValidationError) as caught:
        Settings(api_key=31337, subquery_max=0)
    problems = settings_problems(caught.value).splitlines()
    assert problems[0].startswith("DAGRAG_SUBQUERY_MAX=0: ")
    assert problems[1].startswith("DAGRAG_API_KEY=(hidden): ") and "31337" not in "\n".join(problems)


@pytest.mark.parametrize("command", [["query", QUESTION], ["serve", "--port", "0"]])
def test_an_llm_without_its_key_is_one_line_not_a_traceback(command, sample_env, capsys, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("DAGRAG_LLM", "openai:gpt-4o-mini")
    access = logging.getLogger("dagrag.server.access")
    handlers = list(access.handlers)
    assert main(command) == 2
    error = capsys.readouterr().err
    assert error.strip() == "error: DAGRAG_LLM=openai:… needs OPENAI_API_KEY (or DAGRAG_LLM_API_KEY)"
    # A refused start leaves logging as it was: no handler left writing to a stream the caller may close.
    assert access.handlers == handlers


def test_the_default_store_is_in_the_users_data_directory_whatever_the_working_folder(tmp_path, monkeypatch,
                                                                                       capsys) -> None:
    from dagrag.config import Settings

    monkeypatch.delenv("DAGRAG_QDRANT_PATH", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    assert Settings().qdrant_path == tmp_path / "data" / "dagrag" / "qdrant"
    # Nothing ingested yet: the question is refused naming the place, and no folder is left anywhere.
    assert main(["query", QUESTION]) == 2
    error = capsys.readouterr().err
    assert "nothing was ingested into" in error and str(tmp_path / "data" / "dagrag" / "qdrant") in error
    assert list(tmp_path.iterdir()) == []


def _ingested(tmp_path, monkeypatch, collection: str, name: str, page: str) -> None:
    """One Markdown page ingested with the CLI into `collection` of a store under `tmp_path`."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / name).write_text(page, encoding="utf-8")
    monkeypatch.setenv("DAGRAG_QDRANT_PATH", str(tmp_path / "qdrant"))
    monkeypatch.setenv("DAGRAG_COLLECTION", collection)
    assert main(["ingest", str(docs)]) == 0


def test_the_sources_table_says_where_each_passage_is(tmp_path, monkeypatch, capsys) -> None:
    _ingested(tmp_path, monkeypatch, "where", "install.md",
              "# Installing Quillpress\n\nIntro line.\n\n## From a wheel\n\nRun `pip install quillpress` to install "
              "the Quillpress wheel; it needs Python 3.11 or newer.\n")
    capsys.readouterr()
    assert main(["query", "Which Python version does the Quillpress wheel need?", "--no-dag"]) == 0
    printed = capsys.readouterr().out
    table = printed[printed.index("Sources"):]
    assert "where" in table and "install.md:7" in table  # the file and the line the passage starts on
    assert "Quillpress >" in table and "From a wheel" in table  # title > section, folded into its column


def test_what_a_document_says_in_brackets_reaches_the_terminal_as_text(tmp_path, monkeypatch, capsys) -> None:
    # "[report]" was swallowed as a console style tag, and a "[/...]" would have ended the command with a markup error
    _ingested(tmp_path, monkeypatch, "brackets", "config.md",
              "# Configuring Quillpress\n\n## Report section\n\nThe report section of the Quillpress config file is "
              "headed [report] and its files live under [/etc/quillpress] by default.\n")
    capsys.readouterr()
    assert main(["query", "Where does the Quillpress report section live by default?", "--no-dag"]) == 0
    printed = capsys.readouterr().out
    answer = printed[:printed.index("Plan")]
    assert "[report]" in answer and "[/etc/quillpress]" in answer
    assert "[report]" in printed[printed.index("Sources"):]


def test_no_bridge_splits_a_comparison_and_searches_any_other_question_once(tmp_path, monkeypatch, capsys) -> None:
    _ingested(tmp_path, monkeypatch, "bridge", "tools.md",
              "# Tools\n\n## Quillpress\n\nQuillpress builds wheels with Python 3.11 or newer.\n\n## Stowbuild\n\n"
              "Stowbuild builds wheels with Python 3.9 or newer.\n")

    def plan(*question: str) -> list[str]:
        capsys.readouterr()
        assert main(["query", *question, "--json"]) == 0
        return [sq["role"] for sq in json.loads(capsys.readouterr().out)["plan"]["subqueries"]]

    asked = "Which Python version does the tool that builds wheels need?"
    assert plan(asked) == ["question", "bridge"]
    assert plan(asked, "--no-bridge") == ["question"]
    assert plan("How does Quillpress differ from Stowbuild?", "--no-bridge") == ["side", "side", "question"]


def test_a_location_names_the_file_and_its_line_or_page_and_nothing_for_a_record_without_a_file() -> None:
    from dagrag.core.result import Source
    from dagrag.core.sources import source_location

    def at(**metadata: object) -> str:
        return source_location(Source(node_id="n", text="t", metadata=metadata, score=1.0, subquery_id="s1",
                                      rank_in_subquery=1, subquery_ids=["s1"]))

    assert at(source="guide/config.md", line=42) == "guide/config.md:42"
    assert at(source="manual.pdf", page=3) == "manual.pdf p. 3"
    assert at(source="notes.jsonl") == "notes.jsonl"
    assert at(title="A paragraph") == ""


def test_query_with_an_llm_prints_one_line_per_llm_call_when_it_is_done(sample_env, capsys, monkeypatch):
    with ScriptedOpenAIServer({"planner": json.dumps(GOOD_PLAN), "verifier": VERIFIER_REPLY,
                               "writer": [stalled(30, WRITER_REPLY), WRITER_REPLY]}) as server:
        for name, value in {"DAGRAG_LLM": "openai-like:scripted-model", "DAGRAG_LLM_BASE_URL": server.base_url,
                            "DAGRAG_LLM_TIMEOUT_S": "3", "DAGRAG_LLM_MAX_RETRIES": "1",
                            "DAGRAG_LLM_RETRY_BACKOFF_S": "0.01"}.items():
            monkeypatch.setenv(name, value)
        assert main(["query", QUESTION]) == 0
    printed = capsys.readouterr().err.splitlines()
    # One line a call attempt once it is done, not one a progress tick; the progress of the run around them.
    calls = [re.sub(r"\d+(\.\d+)?", "N", line) for line in printed if line.startswith("LLM ")]
    assert calls == ["LLM planner: N tokens in N s", "LLM writer: attempt N failed after N s",
                     "LLM writer: N tokens in N s", "LLM verifier: N tokens in N s"]
    assert printed.index(next(line for line in printed if line.startswith("LLM planner"))) < printed.index(
        "plan ready: 3 subqueries in 1 layer(s) (llm)")
