"""The capstone's yardsticks: the character n-gram baseline and the real-word fraction."""

import math

import pytest

from tfcourse.lab.language import CharNGram, real_word_fraction, vocabulary, words
from tfcourse.train.corpus import CORPUS_LICENCE, capstone_text, reference_topics


def test_words_and_the_real_word_fraction():
    assert words("The cat's 2 hats!") == ["the", "cat", "s", "hats"]
    known = {"the", "cat", "s"}
    assert real_word_fraction("The cat's hats", known) == pytest.approx(2 / 3)  # "s": too short
    assert real_word_fraction("The cat's hats", known, min_length=1) == pytest.approx(3 / 4)
    assert math.isnan(real_word_fraction("12 34 ! a", known))
    assert vocabulary("the cat, the hat; a cat", min_count=2) == {"the", "cat"}


@pytest.mark.parametrize("context", ["", "a", "ab", "zz", "cab"])
def test_ngram_probabilities_sum_to_one_with_the_unseen_character(context):
    model = CharNGram("abracadabra, abc cab", order=3)
    total = sum(model.probability(context, c) for c in model.alphabet)
    assert total + model.probability(context, "\0") == pytest.approx(1.0, abs=1e-12)


def test_ngram_learns_a_pattern_only_with_enough_context():
    text = "abc" * 400
    assert CharNGram(text, order=3).nats_per_char("abc" * 20) < 0.05
    # A unigram model knows the three letters are equally common, nothing more.
    assert CharNGram(text, order=1).nats_per_char("abc" * 20) == pytest.approx(
        math.log(3), abs=0.01
    )


def test_bad_ngram_arguments_are_refused():
    with pytest.raises(ValueError, match="order"):
        CharNGram("abc", order=0)
    with pytest.raises(ValueError, match="discount"):
        CharNGram("abc", discount=1.0)
    with pytest.raises(ValueError, match="non-empty"):
        CharNGram("")


@pytest.mark.slow
def test_the_capstone_corpus_is_offline_english_and_deterministic():
    text = capstone_text()
    assert text == capstone_text() and text.isascii()
    assert text.startswith(reference_topics()[:1000])
    assert len(text) > 500_000 and "PSF" in CORPUS_LICENCE
    assert real_word_fraction(text[:5000], set(words(text))) == 1.0
    assert real_word_fraction(text[:5000], vocabulary(text)) > 0.95
