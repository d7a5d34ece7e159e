"""Text helpers: sentence splitting (NLTK Punkt plus dagrag's citation and continuation rules), citations."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagrag.core.text import citations, containment, load_sentence_model, split_sentences, unexplained_words

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
