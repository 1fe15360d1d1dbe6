"""tfcourse.lab.beyond_counting: the held-out tests of notebook 12, on tiny texts and models
whose answers are known (an oracle that knows the next character, a uniform guesser)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from tfcourse.lab import beyond_counting as bc
from tfcourse.lab.language import CharNGram

TEXT = (
    "def load(path, encoding):\n    Open path with the given encoding (see encodings).\n\n"
    "The zorblaxian value is read; zorblaxian means nothing here. A blorpity waits, "
    "the blorpity ends."
)


class Oracle(nn.Module):
    """Logits that put nearly all mass on the true next id of ``tokens`` (found by
    position), or a uniform guess with ``uniform=True``."""

    def __init__(self, tokens: torch.Tensor, vocab: int, context: int, uniform=False):
        super().__init__()
        self.tokens, self.vocab, self.uniform = tokens, vocab, uniform
        self.config = SimpleNamespace(max_seq_len=context)
        self.weight = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        logits = torch.zeros(*x.shape, self.vocab)
        if self.uniform:
            return logits
        n = len(self.tokens)
        for b, row in enumerate(x):
            start = next(
                s
                for s in range(n - len(row) + 1)
                if torch.equal(self.tokens[s : s + len(row)], row)
            )
            for t in range(len(row)):
                if start + t + 1 < n:
                    logits[b, t, self.tokens[start + t + 1]] = 30.0
        return logits


def tokens_of(text):
    chars = sorted(set(text))
    return torch.tensor([chars.index(c) for c in text]), len(chars)


def test_verdict_words_follow_margin_threshold_and_noise():
    big = torch.full((50,), 2.0) + torch.linspace(-0.01, 0.01, 50)
    small = torch.ones(50)
    assert bc.paired_verdict(big, small, threshold=0.5).word == "holds"
    assert bc.paired_verdict(big, small, threshold=1.5).word == "does not hold"
    noisy = small + torch.linspace(-20, 20, 50)
    assert bc.paired_verdict(noisy, small, threshold=0.5).word == "inconclusive"
    assert "too few" in bc.paired_verdict(big[:1], small[:1], threshold=0.5).word
    with pytest.raises(ValueError, match="1-D tensors of one shape"):
        bc.paired_verdict(big, small[:3], threshold=0.5)


def test_repeated_identifiers_are_unseen_and_within_the_span():
    found = bc.repeated_identifiers(TEXT, "Open path with encoding", min_length=6, max_span=128)
    names = [TEXT[second : second + length] for _, second, length in found]
    assert names == ["zorblaxian", "blorpity"]  # encoding is known, path too short
    first, second, length = found[0]
    assert TEXT[first : first + length] == "zorblaxian" and second > first
    assert bc.repeated_identifiers(TEXT, "", min_length=6, max_span=20) == []


def test_brackets_pair_within_paragraphs_and_quotes_pair_in_order():
    text = 'f(a[1], {b}) )x(\n\nsay "hi" and "bye"'
    pairs = bc.bracket_closers(text)
    assert [(text[o], text[c]) for o, c in pairs] == [("(", ")"), ("[", "]"), ("{", "}")]
    quotes = bc.bracket_closers(text, quotes=True)
    assert [text[o : c + 1] for o, c in quotes] == ['"hi"', '"bye"']
    assert bc.unmatched_share("(a)(b") == pytest.approx(1 / 3)
    assert math.isnan(bc.unmatched_share("no brackets"))


def test_position_losses_of_an_oracle_vanish_and_of_a_guesser_are_log_v():
    tokens, vocab = tokens_of(TEXT)
    oracle = bc.position_losses(Oracle(tokens, vocab, 16), tokens)
    assert oracle.shape == ((len(tokens) - 1) // 16, 16) and float(oracle.max()) < 1e-6
    guess = bc.position_losses(Oracle(tokens, vocab, 16, uniform=True), tokens)
    assert torch.allclose(guess, torch.full_like(guess, math.log(vocab)))


def test_ngram_position_losses_cut_the_context_at_the_window():
    ngram = CharNGram(TEXT, order=3)
    rows = bc.ngram_position_losses(ngram, TEXT, 16)
    assert rows.shape == ((len(TEXT) - 1) // 16, 16)
    window = TEXT[16:33]
    assert rows[1].tolist() == pytest.approx(ngram.char_losses(window))


def test_the_copy_test_tells_a_copier_from_a_guesser():
    tokens, vocab = tokens_of(TEXT)
    spans = [
        (second, length)
        for _, second, length in bc.repeated_identifiers(TEXT, "", min_length=6, max_span=64)
    ]
    ngram = CharNGram(TEXT[:40], order=3)
    by_ngram = bc.ngram_span_losses(ngram, TEXT, spans)
    copier = bc.span_losses(Oracle(tokens, vocab, 64), tokens, spans)
    guesser = bc.span_losses(Oracle(tokens, vocab, 64, uniform=True), tokens, spans)
    assert float(copier.max()) < 1e-6
    assert torch.allclose(guesser, torch.full_like(guesser, math.log(vocab)))
    assert bc.paired_verdict(by_ngram, copier, threshold=0.5).word == "holds"
    assert bc.paired_verdict(by_ngram, guesser, threshold=0.5).word != "holds"


def test_sample_scores_measure_copying_and_words():
    train = "the value of the attribute is returned " * 3
    scores = bc.sample_scores("the value of the attribute is returned", train, {"the", "value"})
    assert scores["copied from training"] == 1.0
    assert bc.copied_share("qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq", train) == 0.0
    assert scores["real words"] == pytest.approx(3 / 7)  # the, value, the of 7


def test_the_ngram_samples_from_its_alphabet_reproducibly():
    ngram = CharNGram(TEXT, order=3)
    first = ngram.sample(40, seed=1)
    assert first == ngram.sample(40, seed=1) and len(first) == 40
    assert set(first) <= set(TEXT)
    with pytest.raises(ValueError):
        ngram.sample(0)
