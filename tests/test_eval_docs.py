"""The docs benchmark: its questions against its corpus, the docs record format, evidence recall, and a tiny
real eval run over a few of its documents (offline stack)."""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections import Counter

import pytest

from .conftest import ROOT, SAMPLE

sys.path.insert(0, str(ROOT / "experiments"))

import eval as eval_script
from evalkit.data import DOCS_TYPES, DataFormatError, Example, load_examples, load_own_code
from evalkit.docs import docs_corpus_folder, evidence_problems
from evalkit.metrics import evidence_recall, squash

from dagrag.ingest import read_nodes

DATA = ROOT / "experiments" / "data"
QUESTIONS = DATA / "docs_questions.jsonl"
PROJECT = DATA / "docs_corpus" / "hatch"
CORPUS = PROJECT / "docs"
MAX_EVIDENCE_CHARS = 300  # short enough that any sensible chunker keeps a quote in one chunk
MINIMUM_PER_TYPE = {"fact": 6, "table": 6, "code": 6}
TWO_PIECE_TYPES = ("two-section", "two-document")


@pytest.fixture(scope="module")
def questions() -> list[Example]:
    return load_examples(QUESTIONS)


# --- the data set ---------------------------------------------------------------------------------

def test_every_evidence_quote_is_verbatim_in_its_document_exactly_once_and_nowhere_else(questions):
    assert evidence_problems(questions, CORPUS, unique=True) == []


def test_the_question_set_meets_its_size_and_type_minimums(questions):
    counts = Counter(q.type for q in questions)
    assert len(questions) >= 48 and set(counts) <= set(DOCS_TYPES)
    for kind, minimum in MINIMUM_PER_TYPE.items():
        assert counts[kind] >= minimum, f"{counts[kind]} {kind} questions, need {minimum}"
    assert sum(counts[t] for t in TWO_PIECE_TYPES) * 4 >= len(questions)  # at least a quarter need two pieces
    assert len({q.id for q in questions}) == len(questions)


def test_each_question_type_has_the_evidence_its_name_promises(questions):
    for question in questions:
        assert all(len(quote) < MAX_EVIDENCE_CHARS and quote == quote.strip() for quote in question.evidence)
        assert question.answers[0].strip(), question.id
        documents = set(question.documents)
        if question.type == "two-section":
            assert len(question.evidence) >= 2 and len(documents) == 1, question.id
        elif question.type == "two-document":
            assert len(documents) >= 2, question.id
        else:
            assert len(question.evidence) == 1, question.id


def test_the_corpus_names_its_source_and_licence():
    source = (PROJECT / "SOURCE.md").read_text(encoding="utf-8")
    assert "hatch==1.18.2" in source and "MIT" in source
    assert (PROJECT / "LICENSE.txt").read_text(encoding="utf-8").startswith("MIT License")
    script = (DATA / "corpora" / "hatch.sh").read_text(encoding="utf-8")
    listed = {line.strip() for line in script.split("DOCS=(", 1)[1].split(")", 1)[0].splitlines() if line.strip()}
    assert listed == {str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*") if p.is_file()}


# --- the record format and the metric -------------------------------------------------------------

def _docs_record(**changes) -> dict:
    record = {"id": "q1", "question": "Which operator?", "answer": "exclude", "type": "fact",
              "evidence": ["with `exclude` taking precedence"], "documents": ["config/build.md"]}
    return {**record, **changes}


def test_a_record_with_evidence_and_no_paragraphs_loads_as_a_docs_question(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps(_docs_record()) + "\n", encoding="utf-8")
    [example] = load_examples(path)
    assert example.is_docs and example.paragraphs == [] and example.type == "fact"
    assert example.evidence == ["with `exclude` taking precedence"] and example.supporting_titles == ["config/build.md"]
    assert not load_examples(SAMPLE)[0].is_docs  # the shared format is untouched


@pytest.mark.parametrize(("changes", "message"), [
    ({"documents": []}, "one document"),
    ({"evidence": [""]}, "non-empty strings"),
    ({"type": "trivia"}, "not one of fact, table"),
    ({"answer": None}, "field 'answer'"),
])
def test_a_malformed_docs_record_names_file_line_and_problem(tmp_path, changes, message):
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps(_docs_record()) + "\n" + json.dumps(_docs_record(**changes)) + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=rf"docs\.jsonl:2: .*{message}"):
        load_examples(path)


def test_an_own_code_file_holds_own_code_questions_only(tmp_path):
    path = tmp_path / "own.jsonl"
    record = {"id": "x-own-01", "set": "x", "question": "q?", "answer": "a", "evidence": ["e"], "documents": ["d.md"]}
    path.write_text(json.dumps(record | {"type": "fact"}) + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=re.escape("own.jsonl:1: type must be 'own-code'")):
        load_own_code(path)
    path.write_text(json.dumps(record | {"type": "own-code"}) + "\n", encoding="utf-8")
    assert [e.id for e in load_own_code(path)] == ["x-own-01"] and load_own_code(path, set_name="y") == []


def test_evidence_recall_ignores_case_and_whitespace_and_needs_the_whole_quote():
    passages = ["| `b`<br>`beta`   | `1.0.0b0` |\n| `dev` | `1.0.0.dev0` |", "Setting the version\nis supported."]
    assert squash("  A\n\tB  c ") == "a b c"
    both = ["| `B`<br>`beta` | `1.0.0b0` |", "setting the version is supported."]
    assert evidence_recall(passages, both) == (1.0, 1.0)
    one_of_two = ["| `dev` | `1.0.0.dev0` |", "Setting the version is not supported."]
    assert evidence_recall(passages, one_of_two) == (0.5, 0.0)
    assert evidence_recall([], ["anything"]) == (0.0, 0.0) and evidence_recall(passages, []) == (0.0, 0.0)


def test_a_quote_copied_from_a_restructuredtext_page_is_found_in_the_passage_its_reader_makes():
    # The rST reader gives ``only`` as `only`: a quote as the page is written must still count as found.
    page = ROOT / "experiments/data/docs_corpus/marshmallow/docs/quickstart.rst"
    quote = "You can specify which fields to output with the ``only`` parameter."
    assert quote in page.read_text(encoding="utf-8")  # what eval.py's corpus check asks of a quote
    passages = [node.text for node in read_nodes(page)]  # the page as ingest reads it
    assert evidence_recall(passages, [quote]) == (1.0, 1.0)
    assert evidence_recall(passages, [quote.replace("only", "exclude")]) == (0.0, 0.0)


def test_the_corpus_flag_must_fit_the_questions(tmp_path, questions):
    with pytest.raises(DataFormatError, match="name the folder of those documents with --corpus"):
        docs_corpus_folder(questions, None)
    with pytest.raises(DataFormatError, match="30 of these 30 questions bring their own paragraphs"):
        docs_corpus_folder(load_examples(SAMPLE), str(CORPUS))
    assert docs_corpus_folder(load_examples(SAMPLE), None) is None
    # Another folder: the run is refused before anything is indexed, naming what is missing.
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "build.md").write_text("# Build configuration\n\nNothing here.\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"does not hold the questions' evidence: hatch-01 evidence 1: not found "
                                              r"verbatim in config/build\.md.*hatch-03 evidence 1: config/environment/"
                                              r"overview\.md is not a file.*more\)"):
        docs_corpus_folder(questions, str(tmp_path))


# --- a tiny real run: three questions over the three documents they quote ----------------------------

def test_a_docs_run_scores_evidence_recall_from_what_retrieval_returned(tmp_path, questions, monkeypatch,
                                                                       embed_model, reranker, capsys):
    chosen = {"table": "What does `hatch version b` turn version 1.0.0 into?",
              "code": "Which option of the code version source makes absolute imports from the src directory work?",
              "two-document": "Which of Hatch's regex and code version sources lets hatch version write a new version?"}
    subset = [q for q in questions if q.question in chosen.values()]
    assert [q.type for q in subset] == ["table", "code", "two-document"]
    corpus = tmp_path / "corpus"
    for document in {d for q in subset for d in q.documents}:
        (corpus / document).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(CORPUS / document, corpus / document)
    data = tmp_path / "docs.jsonl"
    lines = [line for line in QUESTIONS.read_text(encoding="utf-8").splitlines()
             if json.loads(line)["question"] in chosen.values()]
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    scored: dict[tuple[str, ...], tuple[list[str], tuple[float, float]]] = {}

    def spy(passages: list[str], evidence: list[str]) -> tuple[float, float]:
        result = evidence_recall(passages, evidence)
        scored[tuple(evidence)] = (list(passages), result)
        return result

    monkeypatch.setattr(eval_script, "evidence_recall", spy)
    # The session's models (conftest), not a second copy loaded by the run.
    monkeypatch.setattr(eval_script, "build_embed_model", lambda *args, **kwargs: embed_model)
    monkeypatch.setattr(eval_script, "build_reranker", lambda *args, **kwargs: reranker)
    # A question naming the asker's own code, from the same pages, is asked beside them and counted apart; one of
    # another set is not asked.
    code = next(q for q in subset if q.type == "code")
    own = tmp_path / "own.jsonl"
    own.write_text("".join(json.dumps({
        "id": f"{name}-own-01", "set": name, "type": "own-code", "answer": code.answers[0],
        "question": "my_pkg_internal lives under src/. Which option of the code version source fixes its imports?",
        "evidence": code.evidence, "documents": code.documents}) + "\n" for name in ("hatch", "other")))
    out = tmp_path / "out"
    # One passage per question: the two-document question cannot have both of its quotes, whatever retrieval does.
    assert eval_script.main(["--data", str(data), "--corpus", str(corpus), "--systems", "single", "--budget", "1",
                             "--own-code", str(own), "--own-code-set", "hatch",
                             "--index-dir", str(tmp_path / "index"), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["corpus"] == str(corpus) and summary["config"]["corpus_paragraphs"] > 3
    single = summary["systems"]["single"]
    assert single["n"] == 3 and set(single["by_type"]) == {"table", "code", "two-document", "own-code"}
    assert single["by_type"]["own-code"]["n"] == 1 and "recall" in single["by_type"]["own-code"]

    # Each question was scored on the one passage retrieval handed the writer: a chunk dagrag made of the corpus.
    chunks = {node.text for node in read_nodes(corpus)}
    rows = {r["type"]: r for r in map(json.loads, (out / "per_question.jsonl").read_text().splitlines())}
    assert rows["own-code"]["id"] == "hatch-own-01"
    for question in subset:
        passages, (recall, joint) = scored[tuple(question.evidence)]
        assert len(passages) == 1 and passages[0] in chunks
        metrics = rows[question.type]["metrics"]
        assert metrics["recall"] == recall and metrics["joint_recall"] == joint
    assert rows["code"]["metrics"]["joint_recall"] == 1.0  # search-paths = ["src"]: found
    assert rows["two-document"]["metrics"]["recall"] <= 0.5 and rows["two-document"]["metrics"]["joint_recall"] == 0
    assert rows["two-document"]["supporting"] == ["plugins/version-source/regex.md", "plugins/version-source/code.md"]

    # Rows made from the corpus before a page changed would be counted as this corpus's: refused, nothing run.
    (corpus / "snippet.py").write_text("print('an example a page shows')\n", encoding="utf-8")
    before = (out / "per_question.jsonl").read_text()
    assert eval_script.main(["--data", str(data), "--corpus", str(corpus), "--systems", "single", "--budget", "1",
                             "--own-code", str(own), "--own-code-set", "hatch",
                             "--index-dir", str(tmp_path / "index"), "--out", str(out)]) == 2
    assert "corpus: " in capsys.readouterr().err and (out / "per_question.jsonl").read_text() == before


def test_a_docs_answer_matches_when_it_quotes_every_evidence_passage():
    class NoTokens:
        def count(self, texts: list[str]) -> int:
            return 0

    example = Example(id="d1", question="Which Python do I need?", answers=["Python 3.10 or newer"], type="fact",
                      paragraphs=[], evidence=["It requires Python 3.10+ to", "run"], documents=["a.md", "a.md"])
    quoted = "Getting started: It requires  Python 3.10+ to run. [1]"
    assert eval_script.score(example, quoted, [], [], NoTokens(), {})["match"] == 1.0
    assert eval_script.score(example, "It requires Python 3.11. [1]", [], [], NoTokens(), {})["match"] == 0.0
    assert eval_script.score(example, "You need Python 3.10 or newer.", [], [], NoTokens(), {})["match"] == 1.0
    # Both sides as a reader sees them: the answer need not repeat a link's target or a doctest prompt.
    linked = Example(id="d2", question="q", answers=["-"], type="code", paragraphs=[], documents=["a.md"],
                     evidence=[">>> md.convert(text)  # see [the API](api.md#convert)"])
    said = "Writing extensions: md.convert(text)  # see the API [1]"
    assert eval_script.score(linked, said, [], [], NoTokens(), {})["match"] == 1.0
    # A quote that runs over two sentences is quoted when both are, each with its own citation mark.
    spanning = Example(id="d3", question="q", answers=["-"], type="fact", paragraphs=[], documents=["a.md"],
                       evidence=["defaults to 88 characters. This number was found to produce"])
    said = "Line length: Black defaults to 88 characters. [1] This number was found to produce shorter files. [1]"
    assert eval_script.score(spanning, said, [], [], NoTokens(), {})["match"] == 1.0
    assert eval_script.score(spanning, "Line length: Black defaults to 88 characters. [1]", [], [], NoTokens(),
                             {})["match"] == 0.0


def test_a_quote_from_a_code_block_is_found_with_the_markup_it_has_there():
    # In a fence the page keeps `**Markdown**`; the quote alone would read as prose and lose its asterisks.
    page = 'Pipe it:\n\n```bash\necho "Some **Markdown** text." | python -m markdown\n```\n'
    assert evidence_recall([page], ['echo "Some **Markdown** text." | python -m markdown']) == (1.0, 1.0)
    assert evidence_recall(["Some **Markdown** text in prose."], ["Some Markdown text"]) == (1.0, 1.0)
    assert evidence_recall([page], ["Some Markdown text. | python -m rst"]) == (0.0, 0.0)
