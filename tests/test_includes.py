"""Sphinx's `literalinclude`: a page shows the example file it names, read only from inside the ingested folder."""

from __future__ import annotations

from pathlib import Path

from dagrag.chunking.includes import expand_myst_includes, included_text
from dagrag.chunking.markdown import chunk_markdown
from dagrag.core.markup import plain
from dagrag.ingest import read_nodes

ANYIO = Path(__file__).parent / "data" / "anyio"  # anyio 4.16.0's threads page and its example files (MIT)


def test_a_real_sphinx_page_shows_its_example_files_as_code_where_it_names_them() -> None:
    # "To run a (synchronous) callable in a worker thread:" and then nothing: the example was a file of its own.
    nodes = read_nodes(ANYIO / "docs")
    texts = [node.text for node in nodes]
    run_sync = next(text for text in texts if "To run a (synchronous) callable in a worker thread:" in text)
    assert "```\nimport time\n\nfrom anyio import run, to_thread\n" in run_sync
    assert "await to_thread.run_sync(time.sleep, 5)" in run_sync
    # one page ingested alone reads its examples from its own folder
    alone = [node.text for node in read_nodes(ANYIO / "docs" / "threads.rst")]
    assert alone == texts


def test_nothing_outside_the_ingested_folder_is_shown(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "snippets").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("SECRET_TOKEN = 'do not index me'\n", encoding="utf-8")
    (docs / "snippets" / "example.py").write_text("print('shown')\n", encoding="utf-8")
    (docs / "snippets" / "link.py").symlink_to(tmp_path / "secret.txt")
    (docs / "snippets" / "data.bin").write_bytes(b"BINARY\x00\xff")
    (docs / "page.rst").write_text(
        "Page\n====\n\nOutside:\n\n.. literalinclude:: ../secret.txt\n\nLinked out:\n\n"
        ".. literalinclude:: snippets/link.py\n\nFrom the root:\n\n.. literalinclude:: /snippets/example.py\n\n"
        "Missing:\n\n.. literalinclude:: snippets/nothing.py\n\nBinary:\n\n.. literalinclude:: snippets/data.bin\n",
        encoding="utf-8")
    text = "\n".join(node.text for node in read_nodes(docs))
    assert "SECRET_TOKEN" not in text and "BINARY" not in text and "print('shown')" in text
    # the same page ingested from the folder above may show the file, which is then inside what is ingested
    assert "SECRET_TOKEN" in "\n".join(node.text for node in read_nodes(tmp_path))


def test_the_lines_a_literalinclude_selects_are_the_lines_sphinx_shows() -> None:
    code = "import a\n# start\nx = 1\ny = 2\nz = 3\n# end\nprint(x)\n\n"
    files = {"ex.py": code}
    assert included_text(files.get, "ex.py", {}) == code.rstrip("\n")
    assert included_text(files.get, "ex.py", {"start-after": "# start", "end-before": "# end"}) == "x = 1\ny = 2\nz = 3"
    assert included_text(files.get, "ex.py", {"start-at": "# start", "end-at": "# end"}) == "\n".join(
        code.splitlines()[1:6])
    picked = included_text(files.get, "ex.py", {"start-after": "# start", "lines": "1,3-"})
    assert picked == "x = 1\nz = 3\n# end\nprint(x)"
    assert included_text(files.get, "missing.py", {}) is None
    assert included_text({"blank.py": "\n\n"}.get, "blank.py", {}) is None


def test_a_myst_literalinclude_carries_its_code_in_a_fence_that_holds_it() -> None:
    files = {"snippet.md": "Use it so:\n\n```python\nrun()\n```\n", "pyproject.toml": "[tool.x]\nkey = 1\n"}
    page = ("# Guide\n\nThe settings:\n\n```{literalinclude} pyproject.toml\n:language: toml\n```\n\n"
            "A page of its own:\n\n```{literalinclude} snippet.md\n```\n\nGone:\n\n```{literalinclude} gone.py\n```\n")
    expanded = expand_myst_includes(page, files.get)
    assert "```{literalinclude} pyproject.toml\n:language: toml\n[tool.x]\nkey = 1\n```" in expanded
    assert "````{literalinclude} snippet.md\nUse it so:\n\n```python\nrun()\n```\n````" in expanded  # a longer fence
    assert "```{literalinclude} gone.py\n```" in expanded  # cannot be read: as written
    text = "\n".join(chunk.text for chunk in chunk_markdown(page, chunk_tokens=256, read_include=files.get).chunks)
    assert "```toml\n[tool.x]\nkey = 1\n```" in plain(text)
