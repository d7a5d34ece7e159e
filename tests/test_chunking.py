"""Structure-aware ingestion: chunks follow headings, paragraphs, list items, table rows and code blocks,
carry title / section / position / neighbours, and keep them through Qdrant. Real parsers, real models."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from llama_index.core.schema import MetadataMode, NodeRelationship
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from dagrag import IngestError, Settings
from dagrag.agents.searcher import SearcherAgent
from dagrag.chunking import HARD_CAP_FACTOR, chunk_html, chunk_markdown, chunk_pdf, chunk_plain_text, count_tokens
from dagrag.chunking.plain_text import plain_text_blocks
from dagrag.core.result import Source
from dagrag.core.search import SearchRequest
from dagrag.core.sources import source_title
from dagrag.ingest import ingest_nodes, read_documents, read_nodes
from dagrag.store import open_qdrant, open_vector_store

GUIDE = """\
# Service Guide

An intro before any section.

## Configuration

Settings are read from the environment.

### Critical: Keeping Settings in Sync

Both processes must read the same `.env` file.

## Usage

Run `service start`.
"""


def rows_table(count: int) -> str:
    lines = ["| setting | default | meaning |", "|---|---|---|"]
    lines += [f"| SETTING_{i} | {i} | what setting number {i} controls in the service |" for i in range(count)]
    return "\n".join(lines)


# --- Markdown ----------------------------------------------------------------------------------------

def test_headings_become_section_paths_below_the_title():
    document = chunk_markdown(GUIDE, chunk_tokens=256)
    assert document.title == "Service Guide"
    assert [(c.section, c.text) for c in document.chunks] == [
        ((), "An intro before any section."),
        (("Configuration",), "Settings are read from the environment."),
        (("Configuration", "Critical: Keeping Settings in Sync"), "Both processes must read the same `.env` file."),
        (("Usage",), "Run `service start`."),
    ]
    assert [c.line for c in document.chunks] == [3, 7, 11, 15]


def test_small_pieces_of_one_section_merge_but_never_across_a_heading():
    text = "# T\n\n## A\n\none.\n\ntwo.\n\n- three\n- four\n\n## B\n\nfive.\n"
    chunks = chunk_markdown(text, chunk_tokens=256).chunks
    assert [c.text for c in chunks] == ["one.\n\ntwo.\n\n- three\n- four", "five."]


def test_setext_headings_count_and_a_hash_line_in_a_tilde_fence_does_not():
    text = "Title\n=====\n\nIntro.\n\nSetup\n-----\n\n~~~bash\n# install it\npip install x\n~~~\n\nDone.\n"
    document = chunk_markdown(text, chunk_tokens=256)
    assert document.title == "Title"
    assert [c.section for c in document.chunks] == [(), ("Setup",)]
    assert "# install it" in document.chunks[1].text and "Done." in document.chunks[1].text


def test_a_headings_attribute_list_and_closing_hashes_are_not_part_of_its_name():
    text = ("# Guide {: #top }\n\n## Locking\n\n### Locker plugin ### {: #locker }\n\nPick one.\n\n"
            "## Usage {#usage .wide}\n\nRun it.\n\n## Sets like {x}\n\nBraces stay.\n")
    document = chunk_markdown(text, chunk_tokens=256)
    assert document.title == "Guide"
    assert [c.section for c in document.chunks] == [("Locking", "Locker plugin"), ("Usage",), ("Sets like {x}",)]


def test_without_an_h1_the_front_matter_title_is_taken_and_headings_are_sections():
    document = chunk_markdown("---\ntitle: 'Notes'\ntags: [a]\n---\n## Part\n\nBody.\n", chunk_tokens=256)
    assert document.title == "Notes"
    assert [(c.section, c.text) for c in document.chunks] == [(("Part",), "Body.")]


def test_a_long_table_is_split_on_rows_and_every_piece_repeats_the_header():
    table = rows_table(40)
    budget = 96
    chunks = chunk_markdown(f"# T\n\n## Settings\n\nThe settings:\n\n{table}\n", chunk_tokens=budget).chunks
    header, delimiter, *rows = table.split("\n")
    pieces = [c for c in chunks if "SETTING_" in c.text]
    assert len(pieces) > 3
    for piece in pieces:
        lines = piece.text.split("\n")
        at = lines.index(header)
        assert lines[at + 1] == delimiter
        assert all(line in rows for line in lines[at + 2:])   # nothing but whole rows under the header
        assert count_tokens(piece.text) <= budget
    found = [line for piece in pieces for line in piece.text.split("\n") if line.startswith("| SETTING_")]
    assert found == rows   # every row once, whole, in order


def test_a_table_that_fits_a_chunk_is_not_split_after_a_long_paragraph():
    paragraph = "This paragraph takes most of the budget on its own, word after word. " * 4
    chunks = chunk_markdown(f"{paragraph}\n\n{rows_table(3)}\n", chunk_tokens=96).chunks
    assert [c.text.count("| SETTING_") for c in chunks] == [0, 3]


def test_a_sentence_introducing_a_table_or_code_moves_on_with_it_when_a_chunk_closes():
    paragraph = "This paragraph takes most of the budget on its own, word after word. " * 4
    table = rows_table(3)
    chunks = chunk_markdown(f"{paragraph}\n\nThe settings are these:\n\n{table}\n", chunk_tokens=96).chunks
    assert [c.text.count("| SETTING_") for c in chunks] == [0, 3]
    assert chunks[0].text == paragraph.strip()
    assert chunks[1].text.startswith("The settings are these:\n\n| setting |")
    code = "\n".join(f"value_{i} = compute(value_{i - 1}, factor={i})" for i in range(1, 8))
    text = f"{paragraph}\n\nTo cut a release, run:\n\n```python\n{code}\n```\n\nAfter."
    chunks = chunk_markdown(text, chunk_tokens=96).chunks
    introduced = f"To cut a release, run:\n\n```python\n{code}\n```"
    assert [c.text for c in chunks] == [paragraph.strip(), introduced, "After."]
    # a sentence ending in a colon that shares a chunk with what it introduces stays where it is
    chunks = chunk_markdown(f"Short.\n\nRun:\n\n```python\n{code}\n```\n", chunk_tokens=256).chunks
    assert len(chunks) == 1


def test_a_code_block_over_the_budget_stays_whole():
    code = "\n".join(f"    value_{i} = compute(value_{i - 1}, factor={i})" for i in range(1, 13))
    text = f"# T\n\nBefore.\n\n```python\ndef build():\n{code}\n```\n\nAfter.\n"
    budget = 64
    chunks = chunk_markdown(text, chunk_tokens=budget).chunks
    assert budget < count_tokens(code) < budget * HARD_CAP_FACTOR
    holding = [c for c in chunks if "value_1 =" in c.text]
    assert len(holding) == 1 and "value_12 =" in holding[0].text and holding[0].text.startswith("```python")
    assert [c.text for c in chunks] == ["Before.", holding[0].text, "After."]


def test_a_code_block_over_the_hard_cap_is_cut_between_lines_and_each_piece_is_fenced():
    lines = [f"result_{i} = transform(result_{i - 1}, step={i})  # line {i}" for i in range(1, 200)]
    budget = 64
    assert count_tokens("\n".join(lines)) > budget * HARD_CAP_FACTOR
    chunks = chunk_markdown("```python\n" + "\n".join(lines) + "\n```\n", chunk_tokens=budget).chunks
    assert len(chunks) > 1
    body: list[str] = []
    for chunk in chunks:
        piece = chunk.text.split("\n")
        assert piece[0] == "```python" and piece[-1] == "```"
        assert count_tokens(chunk.text) <= budget
        body += piece[1:-1]
    assert body == lines   # cut on line boundaries only: every line whole, once, in order


def test_list_items_stay_whole():
    items = [f"- Item {i}: " + " ".join(f"word{i}x{j}" for j in range(12)) for i in range(12)]
    chunks = chunk_markdown("# T\n\n" + "\n".join(items) + "\n", chunk_tokens=64).chunks
    assert len(chunks) > 2
    for item in items:
        assert sum(item in chunk.text for chunk in chunks) == 1


def test_a_paragraph_over_the_budget_is_cut_between_sentences():
    sentences = [f"Sentence number {i} tells one fact about the subject." for i in range(40)]
    chunks = chunk_markdown(" ".join(sentences), chunk_tokens=64).chunks
    assert len(chunks) > 3 and all(count_tokens(c.text) <= 64 for c in chunks)
    assert all(sum(s in c.text for c in chunks) == 1 for s in sentences)


# --- plain text, HTML, PDF -----------------------------------------------------------------------------

def test_plain_text_is_paragraphs_with_only_underlined_headings():
    text = (
        "Field Notes\n===========\n\nFirst paragraph,\nwrapped.\n\nSecond paragraph.\n\n"
        "Methods\n-------\nWe counted birds.\n\n"
        "Name    Value\n-----   -----\nalpha   1\n\n"          # a text table: its rule has spaces
        "A long line that is not a heading at all\n---\n\n"   # a short rule under a long line
        "RESULTS IN CAPITALS\n\nThe end.\n"
    )
    title, blocks = plain_text_blocks(text)
    assert title == "Field Notes"
    assert [(b.section, b.text, b.line) for b in blocks] == [
        ((), "First paragraph,\nwrapped.", 4),
        ((), "Second paragraph.", 7),
        (("Methods",), "We counted birds.", 11),
        (("Methods",), "Name    Value\n-----   -----\nalpha   1", 13),
        (("Methods",), "A long line that is not a heading at all\n---", 17),
        (("Methods",), "RESULTS IN CAPITALS", 20),
        (("Methods",), "The end.", 22),
    ]
    assert chunk_plain_text(text, chunk_tokens=256).chunks[0].text == \
        "First paragraph,\nwrapped.\n\nSecond paragraph."


def test_plain_text_without_a_heading_first_has_no_title_and_rest_style_levels():
    text = "Intro text.\n\nPart One\n========\n\nA.\n\nDetail\n------\n\nB.\n\nPart Two\n========\n\nC.\n"
    document = chunk_plain_text(text, chunk_tokens=256)
    assert document.title is None
    assert [c.section for c in document.chunks] == [(), ("Part One",), ("Part One", "Detail"), ("Part Two",)]


def test_html_is_chunked_as_markdown_with_headings_tables_and_code():
    page = b"""<html><head><title>Page Title</title><script>var hidden = 1;</script></head><body>
    <h1>Service_Guide</h1><p>Intro with <b>bold</b> text.</p>
    <h2>Settings</h2><table><tr><th>name</th><th>default</th></tr>
    <tr><td>PORT</td><td>8080</td></tr><tr><td>HOST</td><td>0.0.0.0</td></tr></table>
    <h3>Example</h3><pre><code>port = 8080
# a comment
</code></pre></body></html>"""
    document = chunk_html(page, chunk_tokens=256)
    assert document.title == "Service_Guide"
    by_section = {c.section: c.text for c in document.chunks}
    assert by_section[()] == "Intro with **bold** text."
    assert by_section[("Settings",)].split("\n")[:2] == ["| name | default |", "| --- | --- |"]
    assert "| PORT | 8080 |" in by_section[("Settings",)]
    assert "# a comment" in by_section[("Settings", "Example")]
    assert not any("hidden" in c.text for c in document.chunks)
    assert chunk_html(b"<title>Only a title</title><p>Text.</p>", chunk_tokens=256).title == "Only a title"


def make_pdf(pages: list[list[str]], outline: list[tuple[str, int, str | None]], title: str | None = None) -> bytes:
    """A real PDF with a text layer (Helvetica, one line per string) and an outline of (title, page, parent)."""
    writer = PdfWriter()
    font = writer._add_object(DictionaryObject({
        NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
        NameObject("/BaseFont"): NameObject("/Helvetica")}))
    for lines in pages:
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
        stream = DecodedStreamObject()
        stream.set_data("\n".join(["BT /F1 11 Tf 72 740 Td 16 TL", *(f"({line}) Tj T*" for line in lines), "ET"])
                        .encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
    items: dict[str, object] = {}
    for name, page_index, parent in outline:
        items[name] = writer.add_outline_item(title=name, page_number=page_index, parent=items.get(parent))
    if title:
        writer.add_metadata({"/Title": title})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_pdf_text_is_chunked_under_its_outline_with_pages():
    data = make_pdf(
        [["Introduction", "The study measured rainfall in Lisbon."],
         ["2 Results", "Rainfall was 700 mm in 2020.", "Methods detail", "We used rain gauges."]],
        [("Introduction", 0, None), ("Results", 1, None), ("Methods detail", 1, "Results")], title="Rain Study")
    document = chunk_pdf(data, chunk_tokens=256)
    assert document.title == "Rain Study"
    assert [(c.section, c.text, c.page) for c in document.chunks] == [
        (("Introduction",), "The study measured rainfall in Lisbon.", 1),
        (("Results",), "Rainfall was 700 mm in 2020.", 2),
        (("Results", "Methods detail"), "We used rain gauges.", 2),
    ]


# --- ingest: nodes, metadata, neighbours, Qdrant -------------------------------------------------------

@pytest.fixture
def docs(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "guide.md").write_text(GUIDE, encoding="utf-8")
    (folder / "release_notes.md").write_text("## 1.0\n\nFirst release.\n", encoding="utf-8")
    (folder / "notes.txt").write_text("Plain paragraph one.\n\nPlain paragraph two.\n", encoding="utf-8")
    return folder


def test_nodes_carry_title_section_source_position_and_hide_where_they_sit_from_models(docs):
    nodes = [n for n in read_nodes(docs) if n.metadata["source"] == "guide.md"]
    assert [n.metadata["position"] for n in nodes] == [0, 1, 2, 3]
    second = nodes[2]
    assert second.metadata == {"title": "Service Guide",
                               "section": "Configuration > Critical: Keeping Settings in Sync",
                               "source": "guide.md", "line": 11, "position": 2}
    for mode in (MetadataMode.EMBED, MetadataMode.LLM):
        shown = second.get_content(metadata_mode=mode)
        assert shown.startswith("title: Service Guide\nsection: Configuration > Critical: Keeping Settings in Sync\n")
        assert "guide.md" not in shown and "position" not in shown and "line:" not in shown
        assert "section:" not in nodes[0].get_content(metadata_mode=mode)   # no section, no empty line for it
    titles = {n.metadata["source"]: n.metadata["title"] for n in read_nodes(docs)}
    assert titles == {"guide.md": "Service Guide", "release_notes.md": "release notes", "notes.txt": "notes"}


async def test_neighbours_link_up_and_survive_qdrant_and_reingesting_adds_nothing(docs, tmp_path, embed_model):
    nodes = [n for n in read_nodes(docs) if n.metadata["source"] == "guide.md"]
    ids = [n.node_id for n in nodes]
    settings = Settings(qdrant_path=tmp_path / "q", collection="docs")
    first = ingest_nodes(settings, read_nodes(docs), embed_model)
    assert first.added == len(read_nodes(docs)) == 6
    again = ingest_nodes(settings, read_nodes(docs), embed_model)
    assert (again.added, again.already_present) == (0, 6)

    client = open_qdrant(settings)[0]
    stored = {str(p.id): json.loads(p.payload["_node_content"]) for p in client.retrieve("docs", ids=ids)}
    for position, node_id in enumerate(ids):
        links = stored[node_id]["relationships"]
        previous, following = ids[position - 1] if position else None, ids[position + 1] if position < 3 else None
        assert links.get(NodeRelationship.PREVIOUS.value, {}).get("node_id") == previous
        assert links.get(NodeRelationship.NEXT.value, {}).get("node_id") == following

    # What the searcher hands on (parsed back from Qdrant's payload) still knows its neighbours and section.
    searcher = SearcherAgent(open_vector_store(settings), embed_model, hybrid=True)
    [hits] = await searcher.asearch_layer([SearchRequest(text="same .env file for both processes", top_k=3)])
    best = hits.candidates[0].node
    assert best.node_id == ids[2] and best.metadata["section"] == "Configuration > Critical: Keeping Settings in Sync"
    assert (best.prev_node.node_id, best.next_node.node_id) == (ids[1], ids[3])


async def test_a_section_hint_now_matches_document_sections(docs, tmp_path, embed_model):
    settings = Settings(qdrant_path=tmp_path / "q", collection="hint")
    ingest_nodes(settings, read_nodes(docs), embed_model)
    store = open_vector_store(settings)
    request = SearchRequest(text="how to run the service", top_k=6)
    hinted = SearchRequest(text=request.text, top_k=6, sections=("Critical: Keeping Settings in Sync",))
    plain = SearcherAgent(store, embed_model, section_boost_weight=0.2, hybrid=True)
    [without], [with_hint] = await plain.asearch_layer([request]), await plain.asearch_layer([hinted])
    score = {h.node.metadata.get("section"): h.score for h in without.candidates}
    lifted = {h.node.metadata.get("section"): h.score for h in with_hint.candidates}
    target = "Configuration > Critical: Keeping Settings in Sync"
    assert lifted[target] == pytest.approx(score[target] + 0.2)
    assert lifted["Usage"] == pytest.approx(score["Usage"])


def test_source_titles_show_the_section_and_plain_titles_stay_as_they_were():
    def source(metadata: dict[str, object]) -> Source:
        return Source(node_id="abcdef1234", text="t", metadata=metadata, score=1.0, subquery_id="s1",
                      rank_in_subquery=1)

    assert source_title(source({"title": "Service Guide", "section": "Configuration > Critical"})) == \
        "Service Guide > Configuration > Critical"
    assert source_title(source({"title": "Service Guide", "section": ""})) == "Service Guide"
    assert source_title(source({"title": "Ed Wood"})) == "Ed Wood"   # HotpotQA: no section
    # a heading's attribute list or label is markup, not what a reader sees
    assert source_title(source({"title": "Writing Extensions", "section": "Phases {: #stages } > Block Processors"})) \
        == "Writing Extensions > Phases > Block Processors"


def test_identical_paragraphs_under_two_headings_are_two_chunks(tmp_path):
    path = tmp_path / "faq.md"
    path.write_text("# FAQ\n\n## Linux\n\nSee the manual.\n\n## Windows\n\nSee the manual.\n", encoding="utf-8")
    nodes = read_nodes(path)
    assert [n.metadata["section"] for n in nodes] == ["Linux", "Windows"] and len({n.node_id for n in nodes}) == 2


def test_bad_files_are_refused_naming_file_and_line(tmp_path):
    text = tmp_path / "broken.md"
    text.write_bytes(b"# Fine\n\nfine\n\xff\xfe bad bytes\n")
    with pytest.raises(IngestError, match=re.escape(f"{text}:4: not UTF-8 text (byte 0xff)")):
        read_nodes(text)
    pdf = tmp_path / "broken.pdf"
    pdf.write_bytes(b"%PDF-1.4 this is no PDF")
    with pytest.raises(IngestError, match=re.escape(f"{pdf}: not a readable PDF")):
        read_nodes(pdf)


SPHINX_HTML = Path(__file__).parent / "data" / "html" / "flask-uwsgi.html"  # Sphinx 9 + Alabaster output (BSD-3)
MKDOCS_HTML = Path(__file__).parent / "data" / "html" / "hatch-version.html"  # MkDocs + Material output (MIT)


def test_a_published_sphinx_page_is_read_without_its_sites_chrome_or_permalink_marks():
    document = chunk_html(SPHINX_HTML.read_bytes(), chunk_tokens=400)
    assert document.title == "uWSGI"  # not "uWSGI¶"
    assert [chunk.section for chunk in document.chunks] == [
        (), ("Installing",), ("Running",), ("Binding Externally",), ("Async with gevent",)]
    text = "\n".join(chunk.text for chunk in document.chunks)
    for chrome in ("¶", "Powered by", "Related Topics", "Navigation", "Quick search", "Documentation overview"):
        assert chrome not in text, chrome
    assert "from hello import create_app" in text and "$ uwsgi --http 127.0.0.1:8000" in text


def test_a_published_mkdocs_material_page_is_read_without_its_sidebars_search_or_permalinks():
    document = chunk_html(MKDOCS_HTML.read_bytes(), chunk_tokens=400)
    assert document.title == "Versioning"
    assert [chunk.section for chunk in document.chunks] == [
        ("Configuration",), ("Display",), ("Updating",), ("Updating", "Supported segments")]
    text = "\n".join(chunk.text for chunk in document.chunks)
    for chrome in ("¶", "Skip to content", "Initializing search", "Table of contents", "Made with"):
        assert chrome not in text, chrome
    assert "$ hatch version \"0.1.0\"" in text and "| `release` | `1.0.0` |" in text


def test_a_page_without_a_main_element_drops_its_menus_and_footer():
    page = (b"<html><body><header><a href='/'>Site</a> <nav><a href='/a'>A</a></nav></header><h1>Guide"
            b"<a class='headerlink' href='#guide'>#</a></h1><p>Read me.</p><aside>Ads</aside>"
            b"<footer>Copyright</footer></body></html>")
    document = chunk_html(page, chunk_tokens=256)
    assert document.title == "Guide" and [chunk.text for chunk in document.chunks] == ["Read me."]


# --- reStructuredText (docutils) ------------------------------------------------------------------------------

RST_PAGE = Path(__file__).parent / "data" / "rst" / "attrs-api.rst"  # attrs 26.1.0's docs/api.rst (MIT)


def test_a_real_sphinx_page_is_read_with_its_sections_lines_and_sphinx_constructs():
    from dagrag.chunking.rst import rst_blocks

    text = RST_PAGE.read_text(encoding="utf-8")
    title, blocks = rst_blocks(text)
    assert title == "API Reference"
    lines = text.split("\n")
    underlined = [(lines[i],) for i in range(len(lines) - 1)
                  if lines[i].strip() and set(lines[i + 1]) == {"-"} and len(lines[i + 1]) >= len(lines[i])]
    assert [s for s in dict.fromkeys(block.section for block in blocks) if s] == underlined
    by_text = {block.text: block for block in blocks}
    # an autodoc directive keeps the object's name, a versionadded its version, and each block its source line
    assert lines[by_text["attrs.define"].line - 1] == ".. autofunction:: attrs.define"
    assert "Added in version 20.1.0." in by_text
    see = next(block for block in blocks if block.text.startswith("See `attrs.asdict`"))  # :func:`attrs.asdict`
    assert lines[see.line - 1].startswith("See :func:`attrs.asdict`")
    # the doctest is a code block; a reference link keeps its text, not its URL
    assert any(block.kind == "code" and ">>> import attrs" in block.text for block in blocks)
    assert any("TL;DR" in block.text for block in blocks)
    joined = "\n".join(block.text for block in blocks)
    for markup in ("autofunction::", ":func:", "wikipedia.org", ".. _", "versionadded"):
        assert markup not in joined, markup


def test_unknown_directives_and_roles_keep_their_words_and_nothing_is_included_or_run(tmp_path):
    from dagrag.chunking.rst import rst_blocks

    secret = tmp_path / "secret.txt"
    secret.write_text("do not read me", encoding="utf-8")
    title, blocks = rst_blocks(
        "Widgets\n=======\n\nParts\n-----\n\nFrames\n~~~~~~\n\n"
        ".. frobnicate:: gadget\n   :colour: blue\n\n   Inside the *frobnicated* part.\n\n"
        f"See :widget:`Big Widget <big-widget>` and :widget:`~pkg.small`.\n\n.. include:: {secret}\n\n"
        ".. raw:: html\n\n   <script>alert(1)</script>\n\n.. code-block:: python\n\n   x = 1\n")
    texts = [block.text for block in blocks]
    assert title == "Widgets" and {block.section for block in blocks} == {("Parts", "Frames")}
    assert texts[:3] == ["gadget", "Inside the frobnicated part.", "See `Big Widget` and `pkg.small`."]
    assert "```\nx = 1\n```" in texts
    assert not any("do not read me" in t or "alert" in t for t in texts)


TABS_PAGE = Path(__file__).parent / "data" / "rst" / "coverage-excluding.rst"  # coverage 7.17.5 (Apache-2.0)


def test_sphinx_tabs_code_and_setup_directives_are_read_as_a_reader_sees_them():
    from dagrag.chunking.rst import rst_blocks

    title, blocks = rst_blocks(TABS_PAGE.read_text(encoding="utf-8"))
    texts = [block.text for block in blocks]
    assert title == "Excluding code from coverage.py"
    # a code-tab is code: its regexes keep their backslashes and lines (they were read as prose: `A(?s:...)Z`)
    assert any(block.kind == "code" and "'\\A(?s:.*# pragma: exclude file.*)\\Z'," in block.text
               and "[tool.coverage.report]\n" in block.text for block in blocks)
    assert not any("A(?s:.*# pragma: exclude file.*)Z" in text for text in texts if "\\A" not in text)
    # a tab's caption is what a reader sees above it; its language and `.. highlight:: python` are not
    assert "pyproject.toml" in texts and ".coveragerc" in texts
    assert not {"python", "toml", "ini"} & set(texts)
    assert "Added in version 7.6.0." in texts  # `.. version-added::`, Sphinx's newer spelling
    joined = "\n".join(texts)
    for markup in ("code-tab", "tabs::", "show_configs", "[[[cog", "version-added", ":caption:"):
        assert markup not in joined, markup


def test_a_code_block_with_sphinx_options_keeps_its_code_and_shows_its_caption():
    # docutils' own code-block refuses `:caption:`, and the block, code and all, was dropped (Flask's deploying pages)
    from dagrag.chunking.rst import rst_blocks

    uwsgi = Path(__file__).parents[1] / "experiments" / "data" / "docs_corpus" / "flask" / "docs" / "deploying"
    uwsgi = uwsgi / "uwsgi.rst"
    texts = [block.text for block in rst_blocks(uwsgi.read_text(encoding="utf-8"))[1]]
    at = texts.index("`wsgi.py`")
    assert texts[at + 1] == "```\nfrom hello import create_app\n\napp = create_app()\n```"
    _, blocks = rst_blocks("T\n=\n\n.. code-block:: python\n   :linenos:\n   :emphasize-lines: 2\n\n"
                           "   a = 1\n   b = 2\n\n.. versionchanged:: 2.5 The *x* argument.\n")
    assert [block.text for block in blocks] == ["```\na = 1\nb = 2\n```", "Changed in version 2.5: The x argument."]


def test_a_pages_metadata_fields_are_not_text_and_do_not_hide_its_title():
    # Sphinx reads a field list before anything else as the page's metadata: coverage.py's whatsnew5x.rst opens
    # with `:orphan:`, which was indexed as the word "orphan" and left the page without its title
    from dagrag.chunking.rst import rst_blocks

    title, blocks = rst_blocks(":orphan:\n:tocdepth: 2\n\nMajor changes\n=============\n\nText.\n\n:Default: false\n")
    assert title == "Major changes"
    assert [block.text for block in blocks] == ["Text.", "Default: false"]  # a field list in the page stays


def test_a_domains_module_directive_shows_nothing_and_does_not_hide_the_title():
    # Jinja's templates.rst opens with `.. py:currentmodule:: jinja2`: read as a paragraph "jinja2", it left the page
    # two top-level parts, so its title was the file's name and every section sat under "Template Designer ..."
    from dagrag.chunking.rst import rst_blocks

    title, blocks = rst_blocks(".. py:currentmodule:: jinja2\n.. highlight:: html+jinja\n\n"
                               "Template Designer Documentation\n===============================\n\n"
                               "This document describes the syntax.\n\n.. js:module:: widgets\n\nSynopsis\n"
                               "--------\n\nA template is a text file.\n")
    assert title == "Template Designer Documentation"
    assert [(block.text, block.section) for block in blocks] == [
        ("This document describes the syntax.", ()), ("A template is a text file.", ("Synopsis",))]


def test_ingest_reads_a_folder_of_rst_with_the_markdown(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "api.rst").write_bytes(RST_PAGE.read_bytes())
    (docs / "guide.md").write_text("# Guide\n\nInstall it first.\n", encoding="utf-8")
    read = read_documents(docs)
    assert not read.skipped and read.files_read == 2
    titles = {n.metadata["title"] for n in read.nodes}
    assert titles == {"API Reference", "Guide"}
    node = next(n for n in read.nodes if "attrs.define" in n.text and n.metadata["section"] == "Core")
    assert node.metadata["source"] == "api.rst" and node.metadata["line"] >= 1


def test_a_huge_paragraph_reaches_the_sentence_splitter_in_bounded_spans_and_loses_no_text(monkeypatch):
    # NLTK runs Punkt under a 5-second wall-clock limit per call: a 2 MB paragraph (a log without blank lines) failed
    # the ingest on a busy CPU. Each call now reads at most SPLITTER_SPAN_CHARS, cut after a line break.
    from llama_index.core.node_parser import SentenceSplitter

    from dagrag.chunking import blocks

    read: list[int] = []
    split_text = SentenceSplitter.split_text

    def recording(self, text):
        read.append(len(text))
        return split_text(self, text)

    monkeypatch.setattr(SentenceSplitter, "split_text", recording)
    lines = [f"Entry {n} of the service log was written." for n in range(3000)]  # ~126k characters, one paragraph
    pieces = blocks._fit(blocks.Block(kind="paragraph", text="\n".join(lines)), 256, blocks.count_tokens)
    assert len(read) > 1 and max(read) <= blocks.SPLITTER_SPAN_CHARS
    assert " ".join(" ".join(p.text for p in pieces).split()) == " ".join(lines)
