"""A section hint that is code looks up the passages its name heads, on the embedded store and on the server path,
over black's real command-line page: `-C` finds the section `-C, --skip-magic-trailing-comma` (a search for it finds
`-c, --code`), and `--exclude` finds its own section, not the `--extend-exclude` and `--force-exclude` ones that
mention it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

from dagrag import QueryWorkflow, Settings
from dagrag.agents.embedded_search import read_index, top_headed
from dagrag.agents.searcher import SearcherAgent, heading_code, term_match_ratio
from dagrag.core.names import Place, file_name, headed_by, is_code, opening
from dagrag.core.search import SearchRequest
from dagrag.ingest import ingest_nodes, read_nodes
from dagrag.stack import build_searcher
from dagrag.store import open_qdrant, open_vector_store

ROOT = Path(__file__).resolve().parents[1]
BLACK_BASICS = ROOT / "experiments" / "data" / "docs_corpus" / "black" / "docs" / "usage_and_configuration"
MARKDOWN_EXTENSIONS = ROOT / "experiments" / "data" / "docs_corpus" / "markdown" / "docs" / "extensions"


@pytest.fixture(scope="module")
def basics(tmp_path_factory: pytest.TempPathFactory, embed_model) -> Settings:
    folder = tmp_path_factory.mktemp("headed")
    (folder / "the_basics.md").write_bytes((BLACK_BASICS / "the_basics.md").read_bytes())
    settings = Settings(qdrant_path=folder / "qdrant", collection="basics")
    ingest_nodes(settings, read_nodes(folder), embed_model)
    return settings


def heading(hit) -> str:
    return str(hit.node.metadata.get("section", "")).split(" > ")[-1]


def test_what_counts_as_code_and_as_its_heading() -> None:
    assert is_code("--exclude") and is_code("-S") and is_code("markdown.markdown") and is_code("sane_lists")
    assert not is_code("giving options directly") and not is_code("--exclude pick")
    assert headed_by(Place("The basics", "Usage > Command line options > -C, --skip-magic-trailing-comma"), ["-C"])
    assert not headed_by(Place("The basics", "Usage > Command line options > -c, --code"), ["-C"])  # case kept
    assert not headed_by(Place("The basics", "Usage > Command line options > --extend-exclude"), ["--exclude"])
    assert not headed_by(Place("The basics", "Usage"), ["--exclude"])  # a heading, not the passage's text, must name it
    assert heading_code(SearchRequest(text="x", top_k=5, sections=("--exclude", "Installation"))) == ["--exclude"]
    # A code term counts as written; a prose term as words, whatever their case.
    assert term_match_ratio(["--exclude"], "Like `--extend-exclude`, but ...") == 0.0
    assert term_match_ratio(["--exclude", "Command line"], "see --exclude under command-line options") == 1.0


def test_a_file_names_what_its_page_documents_and_a_place_opens_with_its_first_passage() -> None:
    summary = Place("Sane Lists", "Summary", "extensions/sane_lists.md")
    assert file_name("extensions/sane_lists.md") == "sane_lists" and file_name("docs\\cli.rst") == "cli"
    assert file_name("corpus.jsonl:12") == "" and file_name("") == ""  # a JSON Lines record is not a page of its own
    assert headed_by(summary, ["sane_lists"]) and not headed_by(summary, ["sane"])
    assert not headed_by(Place("Extensions", "Included Extensions", "extensions/index.md"), ["sane_lists"])
    assert not headed_by(Place("Corpus", "", "sane_lists.jsonl:3"), ["sane_lists"])
    usage = {"title": "Sane Lists", "section": "Usage", "source": "extensions/sane_lists.md", "position": 4}
    first = {**usage, "section": "Summary", "position": 0}
    elsewhere = {**usage, "source": "extensions/index.md", "position": 0}
    assert opening([usage, elsewhere, first]) == 2  # the earliest of the first passage's file, not another file's
    assert opening([{"title": "No positions"}, {"title": "No positions"}]) == 0
    with pytest.raises(IndexError):
        opening([])


def test_the_embedded_index_holds_each_passages_place_and_finds_what_a_heading_names(basics, embed_model) -> None:
    client, _ = open_qdrant(basics)
    index = read_index(client, basics.collection, "text-dense", None)
    assert len(index.places) == len(index.ids)
    assert Place("The basics", "Usage > Command line options > --exclude", "the_basics.md") in index.places
    [query] = embed_model.get_text_embedding_batch(["--exclude"])
    hits = top_headed(index, query, ["--exclude"], 5)
    assert hits and all(index.places[row].section.endswith("> --exclude") for row, _ in hits)
    assert [score for _, score in hits] == sorted((score for _, score in hits), reverse=True)
    assert top_headed(index, query, ["--no-such-option"], 5) == []


@pytest.mark.parametrize("text, code, expected", [
    ("-C black", "-C", "-C, --skip-magic-trailing-comma"),
    ("--exclude", "--exclude", "--exclude"),
])
async def test_a_code_section_hint_brings_the_section_it_heads(basics, embed_model, text, code, expected) -> None:
    searcher = build_searcher(basics, embed_model=embed_model)
    [plain, hinted] = await searcher.asearch_layer([SearchRequest(text=text, top_k=5),
                                                    SearchRequest(text=text, top_k=5, sections=(code,))])
    assert heading(plain.candidates[0]) != expected  # the words alone rank another section first
    assert heading(hinted.candidates[0]) == expected
    assert len(hinted.candidates) == 5


async def search_on_server(settings: Settings, embed_model, request: SearchRequest, copy_to: Path):
    """`request` searched as on a Qdrant server, through the async client (qdrant_client's local mode stands in for the
    server, as in test_qdrant_server_path.py): the hits, and the batches sent."""
    copy = shutil.copytree(Path(settings.qdrant_path), copy_to)
    aclient = AsyncQdrantClient(path=str(copy))
    calls: list = []
    real = aclient.query_batch_points

    async def recorded(**kwargs):
        calls.append(kwargs)
        return await real(**kwargs)

    aclient.query_batch_points = recorded  # type: ignore[method-assign]
    try:
        clients = open_qdrant(settings)
        server = SearcherAgent(open_vector_store(settings, clients=clients), embed_model, hybrid=True, aclient=aclient)
        [found] = await server.asearch_layer([request])
    finally:
        await aclient.close()
    return found, calls


async def test_the_server_path_looks_the_heading_up_in_the_same_batch(basics, embed_model, tmp_path) -> None:
    """A server gets one more request in the layer's batch, filtered by the heading's words; the answer is the
    embedded store's."""
    embedded = build_searcher(basics, embed_model=embed_model)
    request = SearchRequest(text="-C black", top_k=5, sections=("-C",))
    [expected] = await embedded.asearch_layer([request])
    found, calls = await search_on_server(basics, embed_model, request, tmp_path / "server")
    [batch] = calls
    assert len(batch["requests"]) == 2 and batch["requests"][1].filter is not None
    assert heading(found.candidates[0]) == "-C, --skip-magic-trailing-comma"
    assert [h.node.node_id for h in found.candidates][:1] == [h.node.node_id for h in expected.candidates][:1]


@pytest.fixture(scope="module")
def sane_lists(tmp_path_factory: pytest.TempPathFactory, embed_model) -> Settings:
    """Python-Markdown's real pages for three extensions and the index that lists every extension; the `sane_lists`
    page is titled "Sane Lists" and names `sane_lists` only in its Usage section."""
    folder = tmp_path_factory.mktemp("file-named") / "extensions"
    folder.mkdir()
    for page in ("sane_lists.md", "legacy_em.md", "nl2br.md", "index.md"):
        (folder / page).write_bytes((MARKDOWN_EXTENSIONS / page).read_bytes())
    settings = Settings(qdrant_path=folder.parent / "qdrant", collection="extensions")
    ingest_nodes(settings, read_nodes(folder.parent), embed_model)
    return settings


async def test_a_page_named_after_the_code_leads_with_its_opening_passage(sane_lists, embed_model) -> None:
    searcher = build_searcher(sane_lists, embed_model=embed_model)
    text = "sane_lists change"
    [plain, hinted] = await searcher.asearch_layer([SearchRequest(text=text, top_k=5, must_include=("sane_lists",)),
                                                    SearchRequest(text=text, top_k=5, must_include=("sane_lists",),
                                                                  sections=("sane_lists",))])
    summary = "The Sane Lists extension alters the behavior"
    assert summary not in plain.candidates[0].node.get_content()  # the passages that name `sane_lists` come first
    assert summary in hinted.candidates[0].node.get_content()
    assert hinted.candidates[0].node.metadata["source"] == "extensions/sane_lists.md"


async def test_the_server_path_finds_a_page_by_its_file_name(sane_lists, embed_model, tmp_path) -> None:
    request = SearchRequest(text="sane_lists change", top_k=5, must_include=("sane_lists",), sections=("sane_lists",))
    [expected] = await build_searcher(sane_lists, embed_model=embed_model).asearch_layer([request])
    found, _ = await search_on_server(sane_lists, embed_model, request, tmp_path / "server")
    assert "The Sane Lists extension alters the behavior" in found.candidates[0].node.get_content()
    assert found.candidates[0].node.node_id == expected.candidates[0].node.node_id


@pytest.mark.parametrize("budget", [4, 2])
async def test_a_comparison_of_extensions_reads_each_page_from_its_opening(sane_lists, embed_model, reranker,
                                                                           budget) -> None:
    """Each side's evidence is its page's Summary; at budget 2, three sides cannot all be shown, and the two answered
    sides that fill it are an answer, not a reason to abstain."""
    workflow = QueryWorkflow.from_settings(sane_lists.model_copy(update={"context_budget": budget}),
                                           embed_model=embed_model, reranker=reranker)
    result = await workflow.run(query="Compare nl2br, sane_lists and legacy_em: what does each one change?")
    openings = ["The New-Line-to-Break (`nl2br`) Extension will cause", "The Sane Lists extension alters",
                "The Legacy EM extension restores"]
    shown = [o for o in openings if any(o in " ".join(source.text.split()) for source in result.sources)]
    assert not result.abstained, result.abstain_reason
    assert len(shown) == min(budget, 3), shown
