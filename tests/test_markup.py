"""Markup rendered as a reader sees it (core/markup.py), on real documentation pages and in the answers."""

from __future__ import annotations

import re

import markdownify

from dagrag.agents.writer import quoted_sentences
from dagrag.core.markup import plain

from .conftest import ROOT

CORPORA = ROOT / "experiments" / "data" / "docs_corpus"
# What no reader should see: links with their targets, roles, labels, directives, admonitions, attribute lists,
# footnote marks. (`${SKBUILD_SOABI}` is CMake in inline code, not a role.)
LEFTOVER_MARKUP = re.compile(r"\]\(|\]\[|(?<![`\w$])\{[\w:.+-]+\}`|^\([\w/.:-]+\)=|^:::|^```\{|^!!! |^=== \""
                             r"|\{: #|^\.\. [\w-]+::|<!--|^>>> |\[\^[\w-]+\]", re.MULTILINE)


def page(corpus: str, path: str) -> str:
    return (CORPORA / corpus / "docs" / path).read_text(encoding="utf-8")


def test_a_myst_page_loses_its_labels_directives_and_roles_and_keeps_its_words() -> None:
    # black's docs are MyST (Sphinx): `(labels/...)=` targets, ```{note} blocks, {doc}`...` roles, Markdown links.
    source = page("black", "usage_and_configuration/the_basics.md")
    assert "(labels/exit-code)=" in source and "```{note}" in source and "](https://github.com/psf/black" in source
    rendered = plain(source)
    assert not LEFTOVER_MARKUP.search(rendered), LEFTOVER_MARKUP.search(rendered)
    assert "Due to #4052, `--line-ranges` might format" in rendered  # the link's text, the note's content
    assert "#### `--check`" in rendered and "Don't write the files back" in rendered


def test_a_python_markdown_page_loses_reference_links_and_attribute_lists() -> None:
    source = page("markdown", "extensions/api.md")
    assert "{: #stages }" in source and "][markdown." in source
    rendered = plain(source)
    assert not LEFTOVER_MARKUP.search(rendered), LEFTOVER_MARKUP.search(rendered)
    assert "## Phases of processing\n" in rendered


def test_an_mkdocs_page_loses_its_admonition_lines_and_keeps_their_content() -> None:
    source = page("hatch", "config/context.md")
    assert "!!! tip" in source
    rendered = plain(source)
    assert not LEFTOVER_MARKUP.search(rendered)
    assert "The `parent` modifier can be chained" in rendered


def test_restructured_text_roles_links_labels_and_directives() -> None:
    # From numpy's numpy/ma/README.rst style and Sphinx's own docs: the constructs a .rst page is made of.
    source = (".. _masked-arrays:\n\nMasked arrays\n=============\n\n.. note::\n   :class: tip\n\n"
              "   Use :func:`numpy.ma.masked_where` (see `the guide <https://numpy.org/doc/>`_).\n\n"
              ".. code-block:: python\n\n   >>> import numpy.ma as ma\n   >>> ma.masked_where(x > 2, x)\n")
    rendered = plain(source)
    assert not LEFTOVER_MARKUP.search(rendered)
    assert "Use `numpy.ma.masked_where` (see the guide)." in rendered
    assert "   import numpy.ma as ma\n   ma.masked_where(x > 2, x)" in rendered and "Masked arrays" in rendered


def test_a_myst_page_with_rst_descriptions_keeps_the_names_fields_and_versions_sphinx_shows() -> None:
    # scikit-build-core's config reference: ```{eval-rst} blocks of `.. confval::` entries with field lists.
    source = page("scikit-build-core", "reference/configs.md")
    assert ".. confval:: cmake.define" in source and ":Default: false" in source and ".. versionadded::" in source
    rendered = plain(source)
    assert not LEFTOVER_MARKUP.search(rendered), LEFTOVER_MARKUP.search(rendered)
    # the entry opens with the name it documents, as Sphinx shows it (as code), its fields after
    entry = rendered[rendered.rindex("`cmake.define`\n", 0, rendered.index("A table of defines to pass to CMake")):]
    assert entry.index("A table of defines") < 300 and "Type: ``dict[str,CMakeSettingsDefine]``" in entry[:300]
    assert "Default: false" in rendered and ":Default:" not in rendered
    assert re.search(r"^ *Added in version [\d.]+\.$", rendered, re.MULTILINE)


def test_a_roles_sphinx_prefixes_go_as_the_rst_reader_drops_them() -> None:
    # structlog's MyST pages write `{func}`~structlog.get_logger``: Sphinx shows the name, never the `~`; the rST
    # reader (chunking/rst.py) already drops it, so both dialects read the same.
    from dagrag.chunking.rst import rst_blocks

    source = page("structlog", "configuration.md")
    assert "{func}`~structlog.get_logger`'s `initial_values`" in source
    rendered = plain(source)
    assert "Use `structlog.get_logger`'s `initial_values` to achieve pre-populated contexts." in rendered
    assert "`~" not in rendered and "`!" not in rendered
    assert plain("Use {class}`!Frozen` or :func:`~attrs.define`.") == "Use `Frozen` or `attrs.define`."
    assert [block.text for block in rst_blocks("Use :class:`!Frozen` or :func:`~attrs.define`.\n")[1]] == [
        "Use `Frozen` or `attrs.define`."]


def test_a_directives_argument_is_shown_where_sphinx_shows_it_and_nested_directives_render_too() -> None:
    source = (".. admonition:: Beware the dog\n   :class: tip\n\n   It bites.\n\n"
              ".. image:: dog.png\n   :alt: a dog\n\n.. py:function:: walk(dog, minutes=10)\n\n   Walks it.\n\n"
              "````{tab} pip\n```{literalinclude} ../examples/pyproject.toml\n:language: toml\n```\n````\n"
              ":::{versionchanged} 2.0\nWalks are longer.\n:::\n")
    rendered = plain(source)
    assert not LEFTOVER_MARKUP.search(rendered), LEFTOVER_MARKUP.search(rendered)
    lines = [line.strip() for line in rendered.splitlines() if line.strip()]
    assert lines == ["Beware the dog", "It bites.", "`walk(dog, minutes=10)`", "Walks it.", "pip", "```toml", "```",
                     "Changed in version 2.0.", "Walks are longer."]
    # a field list reads as its fields in prose; a docstring's fields in a code block stay as written
    code = '```python\ndef walk(dog):\n    """Walk it.\n\n    :param dog: who walks\n    """\n```\n'
    assert plain(f":Default: false\n\n{code}") == f"Default: false\n\n{code}"


def test_a_code_blocks_caption_is_shown_above_its_code_as_sphinx_shows_it() -> None:
    # Click's testing page names each example's file in a MyST code-block's `:caption:`; the test file imports the
    # other by that name. The rST reader shows it too (chunking/rst.py), so both dialects read the same.
    source = page("click", "testing.md")
    assert "```{code-block} python\n:caption: hello.py\n" in source
    rendered = plain(source)
    assert not LEFTOVER_MARKUP.search(rendered), LEFTOVER_MARKUP.search(rendered)
    assert "hello.py\n```python\n\nimport click\n" in rendered
    assert "test_hello.py\n```python\n\nfrom click.testing import CliRunner\nfrom hello import hello\n" in rendered
    assert ":caption:" not in rendered
    fragment = ".. code-block:: python\n   :caption: conf.py\n   :linenos:\n\n   x = 1\n"
    assert plain(fragment) == "conf.py\n\n   x = 1\n"
    assert plain("```{code} python\n:linenos:\na = 1\n```\n") == "```python\na = 1\n```\n"  # no caption, no line


def test_a_link_without_text_reads_as_its_targets_words() -> None:
    # MyST lets Sphinx fill in a link's text from its target: scikit-build-core's getting started page links so.
    source = page("scikit-build-core", "guide/getting_started.md")
    assert "[](./ctypes.md)" in source
    rendered = plain(source)
    assert not LEFTOVER_MARKUP.search(rendered), LEFTOVER_MARKUP.search(rendered)
    assert "see ctypes." in rendered
    assert plain("see [](../configuration/index.md#environment-variables-for-the-build)") == (
        "see environment variables for the build")


def test_inline_html_and_character_references_read_as_text_and_indented_code_stays_as_written() -> None:
    # Hatch's environment markers table puts HTML lists and line breaks in its cells; Python-Markdown's smarty table
    # shows entities; its HTML examples are indented code blocks.
    rendered = plain(page("hatch", "config/dependency.md"))
    assert "<li>" not in rendered and "<br>" not in rendered
    assert "| <ul>" not in rendered and "posix; java" in rendered
    assert plain("| `---` | &mdash; | `&mdash;` |") == "| `---` | — | `&mdash;` |"
    example = "Output:\n\n    <p>A regular paragraph of text.</p>\n"
    assert plain(example) == example and plain("<PackageName>_ROOT") == "<PackageName>_ROOT"


def test_no_markdown_page_of_any_docs_corpus_shows_markup_outside_code() -> None:
    # Hatch (mkdocs), black (MyST), Python-Markdown (its own extensions), scikit-build-core (MyST with rST inside):
    # as the writer reads them, nothing a reader would not see is left in prose. Code blocks, code spans and lines
    # indented as code are quoted as written, so they are left out of the check.
    from dagrag.core.markup import _CODE

    markup = re.compile(LEFTOVER_MARKUP.pattern + r"|</?(?:ul|ol|li|br|code|p|b|strong|em|span|kbd)\b[^<>\n]*>",
                        re.MULTILINE)
    pages = sorted(CORPORA.glob("*/docs/**/*.md"))
    assert len({path.relative_to(CORPORA).parts[0] for path in pages}) >= 4
    for path in pages:
        prose = _CODE.sub("", plain(path.read_text(encoding="utf-8")))
        prose = "\n".join(line for line in prose.split("\n")
                          if not line.startswith(("    ", "\t")) or line.lstrip().startswith("|"))
        found = markup.search(prose)
        assert found is None, f"{path.relative_to(CORPORA)}: {prose[max(0, found.start() - 60):found.end() + 20]!r}"


def test_a_footnote_mark_goes_and_its_definition_reads_as_its_note() -> None:
    # Hatch (mkdocs) and scikit-build-core (MyST) write Markdown footnotes; Python-Markdown's page on them shows
    # footnotes as an example in a code block, which stays as written.
    build = plain(page("hatch", "config/build.md"))
    assert "Hatchling is a standards-compliant build backend" in build
    assert "\nSupport for PEP 517 and PEP 660 guarantees interoperability" in build
    faqs = plain(page("scikit-build-core", "guide/faqs.md"))
    assert "cannot be uploaded to PyPI. You have to run" in faqs and "[^" not in faqs
    example = plain(page("markdown", "extensions/footnotes.md"))
    assert "a reference[^1], and a definition[^word]." in example and "[^1]: This is a footnote definition." in example
    # A line indented as code is code: a character class is no footnote mark.
    assert plain("Text[^1] here.\n\n    pattern = r'[^*]+'\n\n[^1]: The note.") == (
        "Text here.\n\n    pattern = r'[^*]+'\n\nThe note.")


def test_a_link_whose_target_ends_its_line_keeps_its_text() -> None:
    # CommonMark allows a line end between the target and ")": structlog's best-practices page has one.
    assert plain("log to [standard out](https://en.wikipedia.org/wiki/Standard_out#x\n) and let tools") == (
        "log to standard out and let tools")
    assert plain("[a](x)\n\n) b") == "a\n\n) b"  # not across a paragraph


def test_the_version_phrases_are_the_rst_readers() -> None:
    from dagrag.chunking import rst
    from dagrag.core.markup import CODE_DIRECTIVES, HIDDEN_DIRECTIVES, VERSION_PHRASES

    assert rst.VERSION_PHRASES == VERSION_PHRASES  # two homes only because chunking imports no other part
    assert (rst.CODE_DIRECTIVES, rst.HIDDEN_DIRECTIVES) == (CODE_DIRECTIVES, HIDDEN_DIRECTIVES)


def test_doctest_setup_is_not_text_in_either_reader() -> None:
    # Sphinx runs a testsetup block and never shows it; structlog's pages open examples with one
    from dagrag.chunking.rst import rst_blocks

    myst = "Intro.\n\n```{testsetup} *\nimport structlog\n```\n\n```{doctest}\n>>> 1 + 1\n2\n```\n"
    assert "import structlog" not in plain(myst) and "1 + 1" in plain(myst)
    rst = "T\n=\n\nIntro.\n\n.. testsetup:: *\n\n   import structlog\n\n.. testcode::\n\n   x = 1\n"
    assert [block.text for block in rst_blocks(rst)[1]] == ["Intro.", "```\nx = 1\n```"]


def test_a_toctree_is_navigation_not_text_in_either_reader() -> None:
    # nox's index page: ".. toctree:: :hidden:" then file names, read as the sentence "tutorial config usage
    # cookbook CONTRIBUTING CHANGELOG `nox` is a command-line tool …"; black's MyST pages likewise
    from dagrag.chunking.rst import rst_blocks

    rst = "Welcome\n=======\n\n.. toctree::\n   :hidden:\n\n   tutorial\n   config\n\n`nox` is a tool.\n"
    assert [block.text for block in rst_blocks(rst)[1]] == ["`nox` is a tool."]
    myst = "# Welcome\n\n```{toctree}\n---\nhidden:\n---\n\nthe_basics\nCurrent style <current_style>\n```\n\nText.\n"
    assert plain(myst).split() == ["#", "Welcome", "Text."]


def test_a_version_directive_reads_as_sphinx_shows_it_with_its_explanation() -> None:
    # MyST and reStructuredText read by `plain`; the hyphenated names too (coverage.py's docs write them)
    assert plain(":::{versionadded} 2.5 The *x* parameter.\n:::\n") == "Added in version 2.5: The x parameter.\n"
    assert plain(".. version-changed:: 7.6\n\nText.\n") == "Changed in version 7.6.\n\nText.\n"


def test_an_html_page_as_ingest_reads_it_is_quoted_without_urls() -> None:
    html = ('<h2 id="install">Install</h2><p>Run <code>pip install dagrag</code>, then read the '
            '<a href="https://example.org/guide#start">getting started guide</a>.</p><!-- build: 42 -->')
    sentences = quoted_sentences(markdownify.markdownify(html, heading_style="ATX"))
    assert sentences == ["## Install Run `pip install dagrag`, then read the getting started guide."]


def test_what_is_not_markup_stays() -> None:
    text = "A dict like {'a': 1}, a call f(x), a time {hh:mm}, [1] and a list [a, b] stay."
    assert plain(text) == text


def test_the_offline_answer_quotes_no_markup(reranker) -> None:
    import asyncio

    from dagrag.agents.writer import WriterAgent
    from dagrag.core.plan import ExecutedPlan, PlanOrigin, SubQuery
    from dagrag.core.result import RunLedger, Source

    question = "How do I make Black check files without writing them back?"
    text = page("black", "usage_and_configuration/the_basics.md")
    start = text.index("(labels/exit-code)=")
    source = Source(node_id="n1", text=text[start:start + 700], metadata={"title": "The basics"}, score=0.9,
                    subquery_id="s1", rank_in_subquery=1, subquery_ids=["s1"])
    plan = ExecutedPlan(query=question, subqueries=[SubQuery(id="s1", text=question)], origin=PlanOrigin.GIVEN,
                        layers=[["s1"]])
    answer = asyncio.run(WriterAgent(reranker).awrite(question, plan, [source], RunLedger()))
    assert "Don't write the files back" in answer.text and not LEFTOVER_MARKUP.search(answer.text)


def test_emphasis_is_rendered_outside_code_and_ends_a_sentence_again() -> None:
    assert plain("**We aim to release `main` every month.** This keeps it small.") == (
        "We aim to release `main` every month. This keeps it small.")
    assert plain("_Black_ is *not* configurable, **`--fast`** skips a check.") == (
        "Black is not configurable, `--fast` skips a check.")
    # Not emphasis: code, Python names, snake_case, arithmetic, globs, list items, version patterns.
    kept = ["Use `**kwargs` and `f(*args)`.", "```python\nx = a * b * c\nprint(**kw)\n```\n", "call __init__()",
            "snake_case_name and my_var", "2 * 3 * 4 = 24", "*.py and *.pyi", "* a list item", "'26.*.*'"]
    for text in kept:
        assert plain(text) == text


def test_a_sentence_that_ends_inside_bold_is_its_own_sentence() -> None:
    sentences = quoted_sentences("**We aim to release every 1-2 months.** This keeps the workload predictable.")
    assert sentences == ["We aim to release every 1-2 months.", "This keeps the workload predictable."]


def test_a_comment_marker_in_a_directives_options_hides_nothing_after_the_fence() -> None:
    # cattrs' why.md includes part of its README, marked by an unclosed "<!-- end-example" in the fence's options;
    # read as a comment running to the chunk's end, it hid the `:::{important}` note after it.
    page = (CORPORA / "cattrs" / "docs" / "why.md").read_text(encoding="utf-8")
    start = page.index("```{include} ../README.md")
    shown = plain(page[start:page.index("We think that's the wrong approach.")])
    assert "<!--" not in shown and "{include}" not in shown
    assert "Note how the structuring and unstructuring details do not pollute your class" in shown
    assert plain("Kept <!-- hidden --> text.") == "Kept  text."


def test_code_keeps_its_subscripts_and_ellipses_while_a_doctest_loses_its_prompts() -> None:
    # structlog's console-output page: `get_config()["processors"][:-1]` read as a link and lost its brackets; in
    # Python `...` alone on a line is the Ellipsis, not a doctest prompt, unless the block is a doctest.
    source = page("structlog", "console-output.md")
    assert 'structlog.get_config()["processors"][:-1]' in source
    assert 'structlog.get_config()["processors"][:-1]' in plain(source)
    code = ("```python\nsend, receive = create_memory_object_stream[str]()\ntry:\n    ...\nexcept OSError:\n"
            "    pass\n```")
    assert plain(f"See [the guide](guide.md):\n\n{code}\n") == f"See the guide:\n\n{code}\n"
    assert plain("```pycon\n>>> add(1,\n...     2)\n3\n```\n") == "```pycon\nadd(1,\n    2)\n3\n```\n"
