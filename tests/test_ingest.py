"""Ingest into an embedded Qdrant on disk with the real embedding model."""

from __future__ import annotations

import asyncio
import json

import pytest
from qdrant_client.http import models as rest

from dagrag import IngestError, Settings
from dagrag.agents.searcher import SearcherAgent
from dagrag.cli import main
from dagrag.ingest import ingest_nodes, read_nodes
from dagrag.store import open_qdrant, open_vector_store, recorded_names

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
    (docs / "ignored.docx").write_bytes(b"PK")
    nodes = read_nodes(docs)
    assert len(nodes) >= 3  # the long file is split into several chunks
    assert {n.metadata["title"] for n in nodes} == {"Kiss and Tell", "notes"}  # the H1, else the file name
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


# --- interrupted, malformed, mismatched ------------------------------------------------------------

class FailingEmbedder:
    """The real embedding model, except that its `fail_on`-th batch raises (a crash mid-ingest)."""

    def __init__(self, inner, fail_on: int) -> None:
        self.inner, self.fail_on, self.batches = inner, fail_on, 0

    def get_text_embedding(self, text):
        return self.inner.get_text_embedding(text)

    def get_text_embedding_batch(self, texts, **kwargs):
        self.batches += 1
        if self.batches == self.fail_on:
            raise RuntimeError("killed mid-ingest")
        return self.inner.get_text_embedding_batch(texts, **kwargs)


class FailingWrites:
    """A Qdrant client whose `fail_on`-th write raises (the store goes away mid-ingest)."""

    def __init__(self, inner, fail_on: int) -> None:
        self._inner, self._fail_on, self._writes = inner, fail_on, 0

    def upload_points(self, *args, **kwargs):
        self._writes += 1
        if self._writes == self._fail_on:
            raise ConnectionError("Qdrant went away")
        return self._inner.upload_points(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def stored(settings: Settings) -> dict[str, str]:
    """Point id -> stored text, reading every point (and checking no id appears twice)."""
    client = open_qdrant(settings)[0]
    points, offset = [], None
    while True:
        page, offset = client.scroll(settings.collection, limit=256, offset=offset, with_payload=True)
        points += page
        if offset is None:
            break
    ids = [str(p.id) for p in points]
    assert len(ids) == len(set(ids)) == client.count(settings.collection, exact=True).count
    return {str(p.id): json.loads(p.payload["_node_content"])["text"] for p in points}


@pytest.mark.parametrize("fault", ["embedding", "write"])
def test_an_interrupted_ingest_run_again_ends_complete_without_duplicates(tmp_path, embed_model, fault):
    nodes = read_nodes(SAMPLE)[:70]
    settings = Settings(qdrant_path=tmp_path, collection="interrupted", embed_batch_size=8)  # 9 batches
    if fault == "embedding":
        with pytest.raises(RuntimeError, match="killed mid-ingest"):
            ingest_nodes(settings, nodes, FailingEmbedder(embed_model, fail_on=5))
    else:
        client, aclient = open_qdrant(settings)
        with pytest.raises(ConnectionError, match="Qdrant went away"):
            ingest_nodes(settings, nodes, embed_model, clients=(FailingWrites(client, fail_on=4), aclient))
    before = stored(settings)
    assert 0 < len(before) < len(nodes) and len(before) % 8 == 0  # whole batches, nothing half-written

    report = ingest_nodes(settings, read_nodes(SAMPLE)[:70], embed_model)
    assert (report.already_present, report.added) == (len(before), len(nodes) - len(before))
    after = stored(settings)
    assert after == {n.node_id: n.text for n in nodes}  # every document once, with its own text
    assert ingest_nodes(settings, nodes, embed_model).added == 0


def test_a_malformed_file_writes_nothing_even_after_good_records(tmp_path, monkeypatch, capsys):
    data = tmp_path / "mixed.jsonl"
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()[:3]
    data.write_text("\n".join([*lines, '{"paragraphs": [{"title": "x", "text": 5}]}']) + "\n", encoding="utf-8")
    monkeypatch.setenv("DAGRAG_QDRANT_PATH", str(tmp_path / "q"))
    monkeypatch.setenv("DAGRAG_COLLECTION", "mixed")
    assert main(["ingest", str(data)]) == 2
    assert "mixed.jsonl:4: paragraph 0 needs a string 'title' and a non-empty string 'text'" in \
        " ".join(capsys.readouterr().err.split())
    assert not open_qdrant(Settings())[0].collection_exists("mixed")


def test_a_collection_of_another_dimension_is_refused_before_anything_is_written(tmp_path, embed_model):
    settings = Settings(qdrant_path=tmp_path, collection="foreign")
    client = open_qdrant(settings)[0]  # made elsewhere: no dagrag metadata, 768-d vectors
    client.create_collection("foreign", vectors_config={
        "text-dense": rest.VectorParams(size=768, distance=rest.Distance.COSINE)})
    with pytest.raises(IngestError, match=r"'foreign' holds 768-d vectors; 'local:all-MiniLM-L6-v2' makes 384-d"):
        ingest_nodes(settings, read_nodes(SAMPLE)[:3], embed_model)
    assert client.count("foreign").count == 0


def test_a_passage_names_its_file_as_the_reader_knows_it_not_where_it_sat_on_the_server(tmp_path):
    folder = tmp_path / "srv" / "corpora"
    (folder / "wiki").mkdir(parents=True)
    records = [{"paragraphs": [{"title": "Ed Wood", "text": "Ed Wood was an American filmmaker."}]},
               {"title": "Notes", "text": "A note with its own source.", "metadata": {"source": "https://ex.org/n"}}]
    (folder / "wiki" / "films.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    (folder / "guide.md").write_text("# Guide\n\nInstall it first.\n", encoding="utf-8")

    by_title = {n.metadata["title"]: n.metadata["source"] for n in read_nodes(folder)}
    assert by_title == {"Ed Wood": "wiki/films.jsonl:1", "Notes": "https://ex.org/n", "Guide": "guide.md"}
    [one_file] = [n.metadata["source"] for n in read_nodes(folder / "wiki" / "films.jsonl") if n.text.startswith("Ed")]
    assert one_file == "films.jsonl:1"


def test_a_folder_ingest_reads_what_it_can_and_names_every_file_it_skipped(tmp_path, monkeypatch, capsys):
    from dagrag.ingest import read_documents

    docs = tmp_path / "docs"
    (docs / ".git").mkdir(parents=True)
    (docs / "guide.md").write_text("# Guide\n\nWidgets are configured in widgets.toml.\n", encoding="utf-8")
    (docs / "notes.txt").write_bytes(b"first line\nsecond\x00line\n")
    (docs / "latin1.md").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    (docs / "setup.py").write_text("print('hi')\n", encoding="utf-8")
    (docs / "empty.md").write_text("", encoding="utf-8")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    (docs / ".git" / "config").write_text("[core]\n", encoding="utf-8")

    read = read_documents(docs)
    assert read.files_read == 1 and [n.metadata["title"] for n in read.nodes] == ["Guide"]
    reasons = {s.path.name: s.reason for s in read.skipped}
    assert reasons == {
        "setup.py": "not a type dagrag reads (.py)",
        "empty.md": "no text to index (an empty file, or a PDF without a text layer)",
        "broken.pdf": reasons["broken.pdf"],
        "latin1.md": "line 1: not UTF-8 text (byte 0xe9)",
        "notes.txt": "line 2: a NUL byte: a binary file, not text",
    }
    assert reasons["broken.pdf"].startswith("not a readable PDF")  # and no pypdf warning on the terminal

    monkeypatch.setenv("DAGRAG_QDRANT_PATH", str(tmp_path / "q"))
    assert main(["ingest", str(docs), "--strict"]) == 2  # refused: nothing written
    assert "5 file(s) would be skipped, and --strict refuses the folder" in capsys.readouterr().err
    assert not (tmp_path / "q").exists()
    assert main(["ingest", str(docs)]) == 3  # written, but the exit status says files were skipped
    err = capsys.readouterr().err
    assert "1 passages read from 1 file(s)" in err and "skipped 5 file(s):" in err
    assert f"{docs / 'notes.txt'}: line 2: a NUL byte" in err and "EOF marker" not in err and ".git" not in err
    assert f"at {tmp_path / 'q'}: 1 added" in err


def test_a_file_given_alone_must_be_readable_and_a_folder_with_nothing_readable_is_refused(tmp_path):
    from dagrag.ingest import read_documents

    lone = tmp_path / "notes.txt"
    lone.write_bytes(b"x\x00y")
    with pytest.raises(IngestError, match=r"notes\.txt:1: a NUL byte"):
        read_documents(lone)
    blank = tmp_path / "blank.md"
    blank.write_text("\n\n", encoding="utf-8")
    with pytest.raises(IngestError, match=r"blank\.md: no text to index"):
        read_documents(blank)
    folder = tmp_path / "only-code"
    folder.mkdir()
    (folder / "conf.py").write_text("project = 'x'\n", encoding="utf-8")
    with pytest.raises(IngestError, match=r"no document could be read .*conf.py: not a type dagrag reads \(.py\)"):
        read_documents(folder)


def test_html_nested_too_deeply_is_one_skipped_file_not_a_crash(tmp_path):
    from dagrag.ingest import read_documents

    docs = tmp_path / "site"
    docs.mkdir()
    (docs / "deep.html").write_text("<html><body>" + "<div>" * 3000 + "x" + "</div>" * 3000 + "</body></html>",
                                    encoding="utf-8")
    (docs / "index.html").write_text("<html><body><h1>Home</h1><p>Welcome to the widget docs.</p></body></html>",
                                     encoding="utf-8")
    read = read_documents(docs)
    assert [s.reason for s in read.skipped] == ["the HTML is nested too deeply to convert"]
    assert read.files_read == 1 and read.nodes[0].metadata["title"] == "Home"


def test_size_limits_skip_a_file_too_large_and_refuse_an_ingest_too_large_before_reading_anything(
        tmp_path, monkeypatch, capsys):
    from dagrag.ingest import SizeLimits, read_documents

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "small.md").write_text("# Small\n\nWidgets are configured in widgets.toml.\n", encoding="utf-8")
    (docs / "huge.txt").write_text("A line of a very long log.\n" * 80_000, encoding="utf-8")  # ~2.2 MB
    read = read_documents(docs, limits=SizeLimits(max_file_mb=1))
    assert [n.metadata["title"] for n in read.nodes] == ["Small"]
    assert [(s.path.name, s.reason) for s in read.skipped] == [("huge.txt", "2.2 MB, over DAGRAG_INGEST_MAX_FILE_MB=1")]
    with pytest.raises(IngestError, match=r"huge\.txt: 2\.2 MB, over DAGRAG_INGEST_MAX_FILE_MB=1"):
        read_documents(docs / "huge.txt", limits=SizeLimits(max_file_mb=1))
    with pytest.raises(IngestError, match=r"docs: 2\.2 MB of documents to read, over DAGRAG_INGEST_MAX_TOTAL_MB=2"):
        read_documents(docs, limits=SizeLimits(max_total_mb=2))
    assert len(read_documents(docs).nodes) > 1  # no limits: everything is read

    monkeypatch.setenv("DAGRAG_QDRANT_PATH", str(tmp_path / "q"))
    monkeypatch.setenv("DAGRAG_INGEST_MAX_TOTAL_MB", "2")
    assert main(["ingest", str(docs)]) == 2
    assert "over DAGRAG_INGEST_MAX_TOTAL_MB=2; ingest the folder in parts" in capsys.readouterr().err
    assert not (tmp_path / "q").exists()


def test_a_chunk_that_is_only_markup_is_not_indexed(tmp_path):
    from dagrag.ingest import read_documents

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "widgets.md").write_text(
        "# Widgets\n\nIntro to widgets.\n\n## Freezing\n\nA frozen widget uses {obj}`widgets.freeze`.\n\n"
        "## Labels only\n\n(nothing-here)=\n\n## Directive only\n\n:::{note}\n:::\n", encoding="utf-8")
    nodes = read_documents(docs).nodes
    assert [n.metadata["section"] for n in nodes] == ["", "Freezing"]
    assert nodes[1].text == "A frozen widget uses {obj}`widgets.freeze`."  # indexed as written; answers render it


def test_ingest_records_the_names_the_collection_knows_and_the_searcher_reads_them(tmp_path, embed_model):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "environments.md").write_text(
        "# Environments\n\n## `hatch env create`\n\nCreates the environment.\n\n## Matrix\n\nEvery variant.\n")
    (docs / "build.md").write_text("# Build\n\nHatchling builds wheels.\n")
    settings = Settings(qdrant_path=tmp_path / "q", collection="n")
    ingest_nodes(settings, read_nodes(docs / "environments.md"), embed_model)
    client = open_qdrant(settings)[0]
    assert recorded_names(client, "n") == {"environments", "hatch env create", "matrix"}
    ingest_nodes(settings, read_nodes(docs), embed_model)  # a later ingest adds its names to those recorded
    assert recorded_names(client, "n") == {"environments", "hatch env create", "matrix", "build"}

    searcher = SearcherAgent(open_vector_store(settings), embed_model)
    names = asyncio.run(searcher.known_names())
    assert names.knows("`Hatch env create`") and names.knows("Matrix") and not names.knows("Hatchling")
    missing = SearcherAgent(open_vector_store(settings.model_copy(update={"collection": "nope"}), must_exist=False),
                            embed_model)
    assert not asyncio.run(missing.known_names())  # no names, no error: the search itself reports the collection


def test_ingest_records_the_words_the_passages_hold_so_a_hop_can_tell_a_word_no_page_has(tmp_path, embed_model,
                                                                                          monkeypatch):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "environments.md").write_text("# Environments\n\n## Matrix\n\nEvery variant is created lazily.\n")
    (docs / "build.md").write_text("# Build\n\nHatchling builds wheels.\n")
    settings = Settings(qdrant_path=tmp_path / "q", collection="w")
    ingest_nodes(settings, read_nodes(docs / "environments.md"), embed_model)
    searcher = SearcherAgent(open_vector_store(settings), embed_model, names_ttl_s=0)
    known = asyncio.run(searcher.known_names())
    # A word counts by its first five letters (as a page explains a question's word), titles and headings too.
    assert known.held(["environment", "matrices", "variants", "lazy", "wheels", "quickest"]) == [
        "environment", "matrices", "variants"]
    ingest_nodes(settings, read_nodes(docs / "build.md"), embed_model)  # a later ingest adds its words
    assert asyncio.run(searcher.known_names()).held(["wheels", "hatchling", "variant"]) == [
        "wheels", "hatchling", "variant"]
    assert open_qdrant(settings)[0].get_collection("w").config.metadata["dagrag_embed_model"] == settings.embed_model


def test_a_collection_that_recorded_no_words_has_every_stored_passage_read_once_and_too_many_are_unlisted(
        tmp_path, embed_model, monkeypatch):
    import dagrag.ingest as ingest
    import dagrag.store as store

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Gadgets\n\nGadgets frobnicate quietly.\n")
    (docs / "b.md").write_text("# Widgets\n\nWidgets spin.\n")
    settings = Settings(qdrant_path=tmp_path / "q", collection="old")
    monkeypatch.setattr(ingest, "record_words", lambda *args, **kwargs: None)  # a collection made before words
    ingest_nodes(settings, read_nodes(docs / "a.md"), embed_model)
    client = open_qdrant(settings)[0]
    assert "dagrag_words" not in client.get_collection("old").config.metadata
    monkeypatch.undo()
    ingest_nodes(settings, read_nodes(docs / "b.md"), embed_model)
    words = set(client.get_collection("old").config.metadata["dagrag_words"])
    assert {"frobn", "quiet", "gadge", "widge", "spin"} <= words  # a.md's words were read from the store

    monkeypatch.setattr(store, "MAX_RECORDED_WORDS", 5)
    (docs / "c.md").write_text("# Sprockets\n\nSprockets mesh with cogs.\n")
    ingest_nodes(settings, read_nodes(docs / "c.md"), embed_model)
    assert client.get_collection("old").config.metadata["dagrag_words"] == store.WORDS_UNLISTED
    searcher = SearcherAgent(open_vector_store(settings), embed_model)
    assert asyncio.run(searcher.known_names()).held(["quickest", "sprockets"]) == ["quickest", "sprockets"]


# --- an edited document, ingested again ------------------------------------------------------------

def texts_of(settings: Settings) -> set[str]:
    points, _ = open_qdrant(settings)[0].scroll(settings.collection, limit=1000, with_payload=True)
    return {json.loads(p.payload["_node_content"])["text"] for p in points}


def test_replace_removes_the_chunks_an_edited_document_no_longer_holds_and_leaves_other_files(tmp_path, embed_model):
    docs = tmp_path / "docs"
    docs.mkdir()
    guide = docs / "guide.md"
    guide.write_text("# Guide\n\n## Ports\n\nThe server listens on port 8080.\n\n"
                     "## Logs\n\nLogs are written to /var/log/widget.\n", encoding="utf-8")
    (docs / "faq.md").write_text("# FAQ\n\nWidgets run on Linux and macOS.\n", encoding="utf-8")
    settings = Settings(qdrant_path=tmp_path / "q", collection="edited")
    first = ingest_nodes(settings, read_nodes(docs), embed_model, replace=True)
    assert first.removed == 0 and count(settings) == first.added

    guide.write_text("# Guide\n\n## Ports\n\nThe server listens on port 9090.\n\n"
                     "## Logs\n\nLogs are written to /var/log/widget.\n", encoding="utf-8")
    edited = read_nodes(docs)
    again = ingest_nodes(settings, edited, embed_model, replace=True)
    assert (again.added, again.removed) == (1, 1)  # the Ports chunk changed; Logs and the FAQ did not
    held = texts_of(settings)
    assert not any("8080" in text for text in held) and any("9090" in text for text in held)
    assert any("Linux and macOS" in text for text in held) and count(settings) == len(edited)

    # Without replace, ingest only adds: the old sentence stays beside the new one.
    guide.write_text("# Guide\n\n## Ports\n\nThe server listens on port 7070.\n", encoding="utf-8")
    ingest_nodes(settings, read_nodes(docs), embed_model)
    assert {"9090", "7070"} <= {port for text in texts_of(settings) for port in ("9090", "7070") if port in text}


def test_replace_refuses_json_lines_records_before_writing_anything(tmp_path, embed_model):
    data = tmp_path / "two.jsonl"
    data.write_text("\n".join(SAMPLE.read_text(encoding="utf-8").splitlines()[:2]) + "\n", encoding="utf-8")
    settings = Settings(qdrant_path=tmp_path / "q", collection="records")
    with pytest.raises(IngestError, match=r"two\.jsonl:1: --replace reads documents"):
        ingest_nodes(settings, read_nodes(data), embed_model, replace=True)
    assert not open_qdrant(settings)[0].collection_exists("records")


def test_cli_ingest_replace_says_how_many_chunks_it_removed(tmp_path, monkeypatch, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    page = docs / "page.md"
    page.write_text("# Page\n\nThe default timeout is 30 seconds.\n", encoding="utf-8")
    monkeypatch.setenv("DAGRAG_QDRANT_PATH", str(tmp_path / "q"))
    monkeypatch.setenv("DAGRAG_COLLECTION", "cli_replace")
    assert main(["ingest", str(docs), "--replace"]) == 0
    page.write_text("# Page\n\nThe default timeout is 60 seconds.\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["ingest", str(docs), "--replace"]) == 0
    assert "1 added, 0 already present, 1 replaced chunks removed" in " ".join(capsys.readouterr().err.split())
    assert count(Settings()) == 1
