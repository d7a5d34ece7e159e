"""Text helpers: sentence splitting (NLTK Punkt plus dagrag's citation and continuation rules), citations."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagrag.core.text import (
    block_lines,
    citations,
    containment,
    load_sentence_model,
    split_sentences,
    split_sentences_around_blocks,
    split_sentences_as_written,
    strip_citations,
    unexplained_words,
)

from .conftest import sample_records


@pytest.mark.parametrize(("text", "sentences"), [
    # An abbreviation before a parenthesis: the old regex cut after "Jr.".
    ("Edward Davis Wood Jr. (October 10, 1924 – December 10, 1978) was an American filmmaker. He was born in"
     " Poughkeepsie.",
     ["Edward Davis Wood Jr. (October 10, 1924 – December 10, 1978) was an American filmmaker.",
      "He was born in Poughkeepsie."]),
    ("He served in the U.S. Army during the war. Then he went home.",
     ["He served in the U.S. Army during the war.", "Then he went home."]),
    ("The Hobbit was written by J. R. R. Tolkien. It was published in 1937.",
     ["The Hobbit was written by J. R. R. Tolkien.", "It was published in 1937."]),
    # Run-together initials that Punkt does not know as an abbreviation.
    ("The Hobbit was written by J.R.R. Tolkien. It was published in 1937.",
     ["The Hobbit was written by J.R.R. Tolkien.", "It was published in 1937."]),
    ("The score is by A.R. Rahman. It won an award.", ["The score is by A.R. Rahman.", "It won an award."]),
    ("The feast of St. Anthony is in June. Dr. Nisar Wani cloned a camel.",
     ["The feast of St. Anthony is in June.", "Dr. Nisar Wani cloned a camel."]),
    # Nor inside a parenthesis, or before one after which the sentence goes on.
    ("Hanna Varis (b. 1959 in Kuusankoski) is a Finnish painter. She lives in Helsinki.",
     ["Hanna Varis (b. 1959 in Kuusankoski) is a Finnish painter.", "She lives in Helsinki."]),
    ("Rear Adm. J. Edward Snyder, USN (Ret.) (October 23, 1924 – November 4, 2007) was the captain. He retired.",
     ["Rear Adm. J. Edward Snyder, USN (Ret.) (October 23, 1924 – November 4, 2007) was the captain.",
      "He retired."]),
])
def test_abbreviations_and_initials_do_not_end_a_sentence(text, sentences):
    assert split_sentences(text) == sentences


def test_a_known_abbreviation_still_ends_a_sentence_when_the_next_one_starts():
    assert split_sentences("He moved to the U.S. He stayed there.") == ["He moved to the U.S.", "He stayed there."]


@pytest.mark.parametrize(("text", "sentences"), [
    ("Ed Wood was French. [1] He was born in 1924. [2]", ["Ed Wood was French. [1]", "He was born in 1924. [2]"]),
    ("Ed Wood was French. [1][2] He was born in 1924. [2]",
     ["Ed Wood was French. [1][2]", "He was born in 1924. [2]"]),
    ("Ed Wood was French. [1, 2] He was born in 1924. [3]",
     ["Ed Wood was French. [1, 2]", "He was born in 1924. [3]"]),
    ("Ed Wood was French [1]. He was born in 1924 [2].", ["Ed Wood was French [1].", "He was born in 1924 [2]."]),
    ("Ed Wood was French.[1] He was born in 1924.[2]", ["Ed Wood was French.[1]", "He was born in 1924.[2]"]),
    ("Ed Wood was American [1]. He made films. [2] Tim Burton directed it [1, 3].",
     ["Ed Wood was American [1].", "He made films. [2]", "Tim Burton directed it [1, 3]."]),
])
def test_a_citation_stays_with_the_sentence_it_closes(text, sentences):
    assert split_sentences(text) == sentences


def test_a_parenthesis_that_is_a_sentence_or_never_closes_still_ends_one():
    assert split_sentences("It was founded in 1901 (see below). (The hall was rebuilt.) It is big.") == [
        "It was founded in 1901 (see below).", "(The hall was rebuilt.)", "It is big."]
    assert split_sentences("A stray ( bracket. The next sentence. And more.") == [
        "A stray ( bracket.", "The next sentence.", "And more."]


def test_ordinary_prose_splits_at_every_sentence_end():
    assert split_sentences('It rained. It poured! Did it stop? "No," she said. 1924 was a leap year.') == [
        "It rained.", "It poured!", "Did it stop?", '"No," she said.', "1924 was a leap year."]


@pytest.mark.parametrize(("text", "sentences"), [
    # Punkt cuts after an abbreviation it does not know; a lower-case word shows the sentence goes on.
    ("It is the stadium of Wigan Athletic F.C. and of the rugby club. It opened in 1999.",
     ["It is the stadium of Wigan Athletic F.C. and of the rugby club.", "It opened in 1999."]),
    # ... and a sentence never starts inside a word or with a closing bracket.
    ("It shows closures (an accident, a lane closure etc.), and it has cameras. They detect problems.",
     ["It shows closures (an accident, a lane closure etc.), and it has cameras.", "They detect problems."]),
])
def test_a_sentence_goes_on_past_an_unknown_abbreviation(text, sentences):
    assert split_sentences(text) == sentences


def test_a_numbered_items_marker_opens_its_item_and_does_not_close_the_sentence_before_it():
    """Hatch's installer steps: Punkt reads "2." after a code block or a sentence as a sentence end."""
    text = ("Download the file.\n\n```\ncurl -Lo hatch.pkg https://example.org/hatch.pkg\n```\n\n"
            "2. Run the installer.\n3. Verify it.\n\nIt is 10% over 80. 4 of them were sold.")
    assert split_sentences(text) == [
        "Download the file. ``` curl -Lo hatch.pkg https://example.org/hatch.pkg ```", "2. Run the installer.",
        "3. Verify it.", "It is 10% over 80.", "4 of them were sold."]
    assert split_sentences("1. Install it.\n2. Run it") == ["1. Install it.", "2. Run it"]


def test_a_fence_indented_in_a_list_item_is_shown_as_code_moved_left():
    """Python-Markdown's toc page: an option's list item whose example sits four spaces in."""
    text = ("* **`baselevel`**:\n    Base level for headers. The following will accomplish that:\n\n"
            "    ``` pycon\n    >>> print(html)\n      <h3>Some Header</h3>\n    ```\n\n    Done.")
    assert [shown for _, shown in split_sentences_as_written(text)] == [
        "* **`baselevel`**: Base level for headers.",
        "The following will accomplish that:\n\n``` pycon\n>>> print(html)\n  <h3>Some Header</h3>\n```\n\nDone."]


def test_whitespace_is_normalised_and_empty_text_has_no_sentences():
    assert split_sentences("  Ed   Wood\nwas French.\n\n\tHe was\u00a0born in 1924.  ") == [
        "Ed Wood was French.", "He was born in 1924."]
    assert split_sentences("") == []
    assert split_sentences(" \n\t ") == []


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("aAJ. 1[],!?\"()\n")) | st.characters(), max_size=120))
def test_sentences_are_the_text_cut_at_spaces_and_nothing_is_lost(text):
    sentences = split_sentences(text)
    assert " ".join(sentences) == " ".join(text.split())
    assert all(s and s == s.strip() for s in sentences)


def test_splitting_from_many_threads_gives_the_same_sentences_and_leaves_the_model_unchanged():
    paragraphs = [p["text"] for r in sample_records() for p in r["paragraphs"]]
    ortho = load_sentence_model().punkt._params.ortho_context
    size = len(ortho)
    expected = [split_sentences(p) for p in paragraphs]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(3):
            assert list(pool.map(split_sentences, paragraphs)) == expected
    assert split_sentences("Zyxwvut qrstuv. Wvutsr zyxw.") == ["Zyxwvut qrstuv.", "Wvutsr zyxw."]
    assert len(ortho) == size  # unseen words are looked up, not stored in the shared model


def test_citations_and_containment():
    assert citations("a [2] b [1, 2][3]") == [2, 1, 3]
    assert containment("Ed Wood was American", "Edward Wood Jr was an American filmmaker") == 2 / 3


def test_unexplained_words_read_inflections_as_the_same_word_unless_asked_for_exact_words():
    passages = ["Hatch creates environments on demand.", "Enabling a hook"]
    question = "Which environment does Hatch create when a hook is enabled?"
    assert unexplained_words(question, passages) == []  # environment~environments, create~creates, enabled~enabling
    assert unexplained_words(question, passages, matching_letters=None) == ["environment", "create", "enabled"]
    assert unexplained_words("Which var holds it?", passages) == ["var", "holds"]  # short words match exactly


CODE_AND_TABLE = """Defining slots by hand is tedious; with attrs it is just:

```python
@define
class Coordinates:
    x: int
```

It sets `slots=True` by default. The options are:

Option | Default
------ | -------
`a`    | `True`

That is all."""


def test_a_code_block_or_table_in_a_sentence_keeps_its_lines_and_stands_apart() -> None:
    written = split_sentences_as_written(CODE_AND_TABLE)
    assert [sentence for sentence, _ in written] == split_sentences(CODE_AND_TABLE)
    assert [shown for _, shown in written] == [
        "Defining slots by hand is tedious; with attrs it is just:\n\n"
        "```python\n@define\nclass Coordinates:\n    x: int\n```\n\nIt sets `slots=True` by default.",
        "The options are:\n\nOption | Default\n------ | -------\n`a`    | `True`\n\nThat is all."]


def test_no_sentence_starts_inside_a_code_block() -> None:
    cut = "Run this:\n\n```\nmake all. Then make install\n```\n\nIt takes a minute. Then run it."
    assert split_sentences(cut)[:2] == ["Run this: ``` make all.", "Then make install ``` It takes a minute."]
    assert split_sentences_as_written(cut) == [
        ("Run this: ``` make all. Then make install ``` It takes a minute.",
         "Run this:\n\n```\nmake all. Then make install\n```\n\nIt takes a minute."),
        ("Then run it.", "Then run it.")]


def test_prose_and_block_lines_are_cleaned_each_their_own_way() -> None:
    written = split_sentences_as_written(CODE_AND_TABLE, prose=str.upper, block_line=lambda line: line.strip())
    assert written[0][1].startswith("DEFINING SLOTS BY HAND IS TEDIOUS; WITH ATTRS IT IS JUST:\n\n```python\n@define")
    assert "\nx: int\n" in written[0][1]  # the block's lines, stripped by `block_line`, not upper-cased


def test_no_sentence_starts_inside_a_table_and_an_unclosed_fence_is_shown_as_split() -> None:
    cut = "See the table.\n\nName | Value\n--|--\nAda wrote it. Then | 1\n\nNext [2]. Done."
    assert len(split_sentences(cut)) == 4  # Punkt ends a sentence inside the table's row
    assert split_sentences_as_written(cut) == [
        ("See the table.", "See the table."),
        ("Name | Value --|-- Ada wrote it. Then | 1 Next [2].",
         "Name | Value\n--|--\nAda wrote it. Then | 1\n\nNext [2]."),
        ("Done.", "Done.")]
    assert split_sentences_around_blocks(cut) == [sentence for sentence, _ in split_sentences_as_written(cut)]
    assert block_lines("Text.\n```python\nno closing fence") is None
    assert split_sentences_as_written("Text.\n```python\nx = 1. Y") == [
        (s, s) for s in split_sentences("Text.\n```python\nx = 1. Y")]


def test_an_answers_sentence_ends_at_the_citation_after_a_quoted_block() -> None:
    # The writer cites a quoted table or code block on the line after it; the next quote follows with no full stop
    # between, and read as one sentence with it, three sources' quotes were checked as one (and found unsupported).
    answer = ("Prefix matching ignores trailing segments:\n\n| Clause | Allowed |\n| --- | --- |\n| `==1.*` | `>=1.0` |"
              "\n\n[2]\n\nCompatible release: it is approximately:\n\n```\n>= V.N, == V.*\n```\n\n[3, 4]\n\n"
              "Feature groups can extend others. [1]")
    assert split_sentences_around_blocks(answer) == [
        "Prefix matching ignores trailing segments: | Clause | Allowed | | --- | --- | | `==1.*` | `>=1.0` | [2]",
        "Compatible release: it is approximately: ``` >= V.N, == V.* ``` [3, 4]",
        "Feature groups can extend others. [1]"]
    # A source's text is cut as before: a `[2]` after its table is not the writer's citation.
    assert len(split_sentences_as_written(answer)) == 1
    # A block's citation that ends the answer, and one inside a sentence's prose, end nothing more.
    assert split_sentences_around_blocks("Run:\n\n```\nmake\n```\n\n[1]") == ["Run: ``` make ``` [1]"]
    assert split_sentences_around_blocks("It reads [1] and writes. [2]") == ["It reads [1] and writes. [2]"]


def test_block_lines_marks_fences_and_tables_only() -> None:
    assert block_lines("a | b\nplain\n~~~\ncode\n~~~\nx | y\n--|--\n1 | 2\nafter") == [
        False, False, True, True, True, True, True, True, False]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["Word.", "next", "```", "```python", "a | b", "--- | ---", "\n", "\n\n", "  ",
                                 "x = 1.", "Then", "[3]"]), max_size=30))
def test_as_written_differs_from_the_split_sentence_only_in_whitespace(parts: list[str]) -> None:
    text = " ".join(parts)
    written = split_sentences_as_written(text)
    assert " ".join(sentence for sentence, _ in written) == " ".join(split_sentences(text))  # the same words, in order
    assert all(" ".join(shown.split()) == sentence for sentence, shown in written)


def test_a_bracketed_number_in_code_is_code_not_a_citation() -> None:
    sentence = "Index with `customer[2]`, as in ```python j = [1, 2, 3][0] ``` and ``blocks[0]``. [4][2]"
    assert citations(sentence) == [4, 2]
    assert strip_citations(sentence) == sentence.removesuffix(" [4][2]")
    # A backtick that opens no span (a sentence cut inside code) leaves the marks read as before.
    assert citations("unclosed `x[1] [2]") == [1, 2] and strip_citations("unclosed `x[1] [2]") == "unclosed `x"
    assert strip_citations("Ed Wood was French. [1] He [2, 3] was born.") == "Ed Wood was French. He was born."
