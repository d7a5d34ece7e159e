"""A section hint that is code looks up the passages its name heads, on the embedded store and on the server path,
over black's real command-line page: `-C` finds the section `-C, --skip-magic-trailing-comma` (a search for it finds
`-c, --code`), and `--exclude` finds its own section, not the `--extend-exclude` and `--force-exclude` ones that
mention it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

from dagrag import Settings
from dagrag.agents.embedded_search import read_index, top_headed
from dagrag.agents.searcher import SearcherAgent, heading_code, term_match_ratio
from dagrag.core.names import headed_by, is_code
from dagrag.core.search import SearchRequest
from dagrag.ingest import ingest_nodes, read_nodes
from dagrag.stack import build_searcher
from dagrag.store import open_qdrant, open_vector_store

ROOT = Path(__file__).resolve().parents[1]
BLACK_BASICS = ROOT / "experiments" / "data" / "docs_corpus" / "black" / "docs" / "usage_and_configuration"


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
    assert headed_by("The basics", "Usage > Command line options > -C, --skip-magic-trailing-comma", ["-C"])
    assert not headed_by("The basics", "Usage > Command line options > -c, --code", ["-C"])  # case kept
    assert not headed_by("The basics", "Usage > Command line options > --extend-exclude", ["--exclude"])
    assert not headed_by("The basics", "Usage", ["--exclude"])  # a heading, not the passage's text, must name it
    assert heading_code(SearchRequest(text="x", top_k=5, sections=("--exclude", "Installation"))) == ["--exclude"]
    # A code term counts as written; a prose term as words, whatever their case.
    assert term_match_ratio(["--exclude"], "Like `--extend-exclude`, but ...") == 0.0
    assert term_match_ratio(["--exclude", "Command line"], "see --exclude under command-line options") == 1.0


def test_the_embedded_index_holds_each_passages_place_and_finds_what_a_heading_names(basics, embed_model) -> None:
    client, _ = open_qdrant(basics)
    index = read_index(client, basics.collection, "text-dense", None)
    assert len(index.places) == len(index.ids) and ("The basics", "Usage > Command line options > --exclude") in \
        index.places
    [query] = embed_model.get_text_embedding_batch(["--exclude"])
    hits = top_headed(index, query, ["--exclude"], 5)
    assert hits and all(index.places[row][1].endswith("> --exclude") for row, _ in hits)
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


async def test_the_server_path_looks_the_heading_up_in_the_same_batch(basics, embed_model, tmp_path) -> None:
    """A server gets one more request in the layer's batch, filtered by the heading's words; the answer is the
    embedded store's. (qdrant_client's local mode stands in for the server, as in test_qdrant_server_path.py.)"""
    embedded = build_searcher(basics, embed_model=embed_model)
    request = SearchRequest(text="-C black", top_k=5, sections=("-C",))
    [expected] = await embedded.asearch_layer([request])
    copy = shutil.copytree(Path(basics.qdrant_path), tmp_path / "server")
    aclient = AsyncQdrantClient(path=str(copy))
    calls: list = []
    real = aclient.query_batch_points

    async def recorded(**kwargs):
        calls.append(kwargs)
        return await real(**kwargs)

    aclient.query_batch_points = recorded  # type: ignore[method-assign]
    try:
        clients = open_qdrant(basics)
        server = SearcherAgent(open_vector_store(basics, clients=clients), embed_model, hybrid=True, aclient=aclient)
        [found] = await server.asearch_layer([request])
    finally:
        await aclient.close()
    [batch] = calls
    assert len(batch["requests"]) == 2 and batch["requests"][1].filter is not None
    assert heading(found.candidates[0]) == "-C, --skip-magic-trailing-comma"
    assert [h.node.node_id for h in found.candidates][:1] == [h.node.node_id for h in expected.candidates][:1]
