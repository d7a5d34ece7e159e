"""Ingest into an embedded Qdrant on disk with the real embedding model."""

from __future__ import annotations

import json

import pytest

from dagrag import IngestError, Settings
from dagrag.cli import main
from dagrag.ingest import ingest_nodes, read_nodes
from dagrag.stack import open_qdrant

from .conftest import SAMPLE


def count(settings: Settings) -> int:
    return open_qdrant(settings)[0].count(settings.collection).count


def test_jsonl_paragraphs_become_titled_documents_and_reingest_adds_nothing(tmp_path, embed_model):
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()[:2]
    data = tmp_path / "two.jsonl"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    paragraphs = {(p["title"], p["text"].strip()) for line in lines for p in json.loads(line)["paragraphs"]}
    settings = Settings(qdrant_path=tmp_path / "q", collection="t")

    first = ingest_nodes(settings, read_nodes(data), embed_model)
    assert first.added == len(paragraphs) == count(settings)
    again = ingest_nodes(settings, read_nodes(data), embed_model)
    assert (again.added, again.already_present) == (0, len(paragraphs)) and count(settings) == len(paragraphs)

    points, _ = open_qdrant(settings)[0].scroll("t", limit=100, with_payload=True)
    titles = {json.loads(p.payload["_node_content"])["metadata"]["title"] for p in points}
    assert titles == {title for title, _ in paragraphs}


def test_a_folder_of_text_files_is_chunked_and_ingested(tmp_path, embed_model):
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "kiss_and_tell.md").write_text("# Kiss and Tell\n\n" + "Shirley Temple played Corliss Archer. " * 80)
    (docs / "sub" / "notes.txt").write_text("Ed Wood was an American filmmaker.")
    (docs / "ignored.pdf").write_bytes(b"%PDF")
    nodes = read_nodes(docs)
    assert len(nodes) >= 3  # the long file is split into several chunks
    assert {n.metadata["title"] for n in nodes} == {"kiss and tell", "notes"}
    report = ingest_nodes(Settings(qdrant_path=tmp_path / "q", collection="d"), nodes, embed_model)
    assert report.added == len(nodes)


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "not valid JSON"),
    ('["a list"]', "expected a JSON object"),
    ('{"paragraphs": [{"title": "x"}]}', "paragraph 0 needs"),
    ('{"id": 1}', "a record needs 'paragraphs'"),
])
def test_a_malformed_record_names_file_and_line_and_writes_nothing(tmp_path, embed_model, line, message):
    data = tmp_path / "bad.jsonl"
    good = SAMPLE.read_text(encoding="utf-8").splitlines()[0]
    data.write_text(f"{good}\n\n{line}\n", encoding="utf-8")
    with pytest.raises(IngestError, match=rf"bad\.jsonl:3: {message}"):
        read_nodes(data)


def test_a_collection_built_with_another_embedding_model_is_refused(tmp_path, embed_model):
    nodes = read_nodes(SAMPLE)[:3]
    ingest_nodes(Settings(qdrant_path=tmp_path, collection="c"), nodes, embed_model)
    other = Settings(qdrant_path=tmp_path, collection="c", embed_model="sentence-transformers:some/other-model")
    with pytest.raises(IngestError, match="built with embedding model 'local:all-MiniLM-L6-v2'"):
        ingest_nodes(other, nodes, embed_model)


def test_cli_ingest_reports_errors_without_a_traceback(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["ingest", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl: no such file or folder" in capsys.readouterr().err
