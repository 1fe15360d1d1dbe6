"""tfcourse.lab.beyond_counting: the held-out tests of notebook 12, on tiny texts and models
whose answers are known (an oracle that knows the next token, a uniform guesser, a copier that
only knows what it has read), in characters and in byte pairs."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from tfcourse.lab import beyond_counting as bc
from tfcourse.lab.language import CharNGram
from tfcourse.train.bpe import ByteBPE
from tfcourse.train.data import CharTokenizer

TEXT = (
    "def load(path, encoding):\n    Open path with the given encoding (see encodings).\n\n"
    "The zorblaxian value is read; zorblaxian means nothing here. A blorpity waits, "
    "the blorpity ends."
)


class Copier(nn.Module):
    """Induction by hand: where the last two tokens occurred before in its input, most of the
    mass on the token that followed them there; a uniform guess elsewhere."""

    def __init__(self, vocab: int, context: int):
        super().__init__()
        self.vocab = vocab
        self.config = SimpleNamespace(max_seq_len=context)
        self.weight = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        logits = torch.zeros(*x.shape, self.vocab)
        for b, row in enumerate(x.tolist()):
            for t in range(1, len(row)):
                earlier = [s for s in range(1, t) if row[s - 1 : s + 1] == row[t - 1 : t + 1]]
                if earlier:
                    logits[b, t, row[earlier[-1] + 1]] = 10.0
        return logits


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


def test_a_difference_of_means_counts_the_noise_of_both_sets():
    cases = torch.full((40,), 1.0) + torch.linspace(-0.1, 0.1, 40)
    control = torch.full((30,), 0.5) + torch.linspace(-0.1, 0.1, 30)
    verdict = bc.difference_verdict(cases, control, threshold=0.2)
    assert verdict.word == "holds" and verdict.margin == pytest.approx(0.5)
    assert verdict.count == 70
    # the same margin beyond the threshold, but a control too noisy to tell
    loud = torch.full((30,), 0.5) + torch.linspace(-5, 5, 30)
    assert bc.difference_verdict(cases, loud, threshold=0.2).word == "inconclusive"
    # equally better near and far: no effect of distance
    assert bc.difference_verdict(cases, cases + 0.0, threshold=0.1).word == "does not hold"
    assert "too few" in bc.difference_verdict(cases, control[:1], threshold=0.2).word


def bpe_of(text, merges=40):
    return ByteBPE.train(text, merges)


@pytest.mark.parametrize("kind", ["chars", "bpe"])
def test_held_out_offsets_spell_the_tokens(kind):
    text = TEXT + " ünïcödé (done)"
    tokenizer = CharTokenizer.from_text(text) if kind == "chars" else bpe_of(text)
    held = bc.HeldOut.encode(tokenizer, text)
    assert len(held.offsets) == len(held.ids) + 1 and held.offsets[-1] == len(text)
    pieces = [text[a:b] for a, b in itertools.pairwise(held.offsets)]
    assert "".join(pieces) == text
    whole = [tokenizer.decode([t]) for t in held.ids.tolist()]
    # a token cut inside a character's bytes counts from that character's start
    assert [w for w in whole if "\ufffd" not in w] == [
        p for p, w in zip(pieces, whole, strict=True) if "\ufffd" not in w
    ]
    k = text.index("zorblaxian")
    i = held.token_holding(k)
    assert held.offsets[i] <= k < held.offsets[i + 1]
    a, b = held.inner_span(k + 1, k + len("zorblaxian"))
    assert k + 1 <= a <= b <= k + len("zorblaxian") and a in held.offsets and b in held.offsets


def test_span_losses_add_up_units_and_refuse_spans_off_the_boundaries():
    text = "abcdef"
    losses = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])  # of characters 1..5
    assert bc.span_losses(losses, bc.char_offsets(text), [(1, 3), (2, 6)]).tolist() == [
        1.5,
        3.5,
    ]
    offsets = (0, 2, 5, 6)  # tokens ab, cde, f: losses of tokens 1 and 2
    assert bc.span_losses(torch.tensor([6.0, 1.0]), offsets, [(2, 6)]).tolist() == [7 / 4]
    with pytest.raises(ValueError, match="token boundaries"):
        bc.span_losses(torch.tensor([6.0, 1.0]), offsets, [(3, 6)])
    with pytest.raises(ValueError, match="token boundaries"):
        bc.span_losses(torch.tensor([6.0, 1.0]), offsets, [(0, 2)])  # the first has no loss


@pytest.mark.parametrize("kind", ["chars", "bpe"])
def test_window_losses_of_an_oracle_vanish_and_of_a_guesser_are_log_v(kind):
    tokenizer = CharTokenizer.from_text(TEXT) if kind == "chars" else bpe_of(TEXT)
    held = bc.HeldOut.encode(tokenizer, TEXT)
    vocab = tokenizer.vocab_size
    oracle = bc.gpt_windows(Oracle(held.ids, vocab, 16), held)
    assert oracle.loss.shape == ((len(held.ids) - 1) // 16, 16)
    assert float(oracle.loss.max()) < 1e-6
    guess = bc.gpt_windows(Oracle(held.ids, vocab, 16, uniform=True), held)
    assert torch.allclose(guess.loss, torch.full_like(guess.loss, math.log(vocab)))
    # the characters before each token, counted from its window's start
    assert guess.before[1, 0].item() == held.offsets[17] - held.offsets[16]
    assert guess.chars[1, 0].item() == held.offsets[18] - held.offsets[17]


@pytest.mark.parametrize("kind", ["chars", "bpe"])
def test_ngram_windows_score_the_tokens_characters_from_the_window_start(kind):
    tokenizer = CharTokenizer.from_text(TEXT) if kind == "chars" else bpe_of(TEXT)
    held = bc.HeldOut.encode(tokenizer, TEXT)
    ngram = CharNGram(TEXT, order=3)
    windows = bc.ngram_windows(ngram, held, 8)
    window = TEXT[held.offsets[8] : held.offsets[17]]  # window 1 predicts tokens 9..16
    after_first_token = ngram.char_losses(window)[held.offsets[9] - held.offsets[8] - 1 :]
    assert float(windows.loss[1].sum()) == pytest.approx(sum(after_first_token))
    if kind == "chars":
        assert windows.loss[1].tolist() == pytest.approx(ngram.char_losses(window))


def test_context_fall_compares_past_the_reach_with_the_last_quarter():
    before = torch.arange(1, 17.0).repeat(3, 1)
    loss = torch.where(before < 8, 2.0, 1.0).double()  # falls once 8 characters are read
    windows = bc.WindowLosses(loss, torch.ones_like(loss), before)
    assert bc.context_fall(windows, reach=4, band=4).tolist() == [1.0, 1.0, 1.0]
    assert bc.context_fall(windows, reach=8, band=4).tolist() == [0.0, 0.0, 0.0]
    xs, ys = windows.curve(8)
    assert xs == [4.0, 12.0, 20.0] and ys == [2.0, 1.0, 1.0]


@pytest.mark.parametrize("kind", ["chars", "bpe"])
def test_the_copy_gain_tells_a_copier_from_a_model_that_is_only_better(kind):
    text = (
        "the zorblaxian value; zorblaxian again. a blorpity waits, a blorpity ends. "
        "then quaffling and quaffling. so wumpuses, wumpuses. "
    )
    tokenizer = CharTokenizer.from_text(text) if kind == "chars" else bpe_of(text, 20)
    held = bc.HeldOut.encode(tokenizer, text)
    found = bc.repeats(held, "the value", min_length=6, within=64)
    assert {r.name for r in found} == {"zorblaxian", "blorpity", "quaffling", "wumpuses"}
    for r in found:  # each span lies inside its occurrence, after its first character
        for a, b in (r.first, r.second):
            assert r.name[1:].startswith(text[a:b]) or text[a:b] in r.name[1:]
    ngram = torch.tensor(CharNGram("the value", order=3).char_losses(text))
    vocab = tokenizer.vocab_size
    copier = Copier(vocab, 64)
    copied = bc.copy_gains(found, capstone_losses(copier, held), ngram, held)
    assert len(copied) == 4, copied  # one per distinct name
    assert bc.mean_verdict(copied, threshold=0.5).word == "holds"
    # better than the n-gram everywhere, by the same amount at both occurrences: no gain
    knower = capstone_losses(Oracle(held.ids, vocab, 64), held)
    oracle = bc.copy_gains(found, knower, ngram, held)
    # judged on the second occurrences alone, the oracle would pass for a copier
    second = [r.second for r in found]
    alone = bc.paired_verdict(
        bc.span_losses(ngram, bc.char_offsets(text), second),
        bc.span_losses(knower, held.offsets, second),
        threshold=0.5,
    )
    assert alone.word == "holds"
    guesser = bc.copy_gains(
        found, capstone_losses(Oracle(held.ids, vocab, 64, uniform=True), held), ngram, held
    )
    for gains in (oracle, guesser):
        assert bc.mean_verdict(gains, threshold=0.5).word != "holds"


def capstone_losses(model, held):
    from tfcourse.train.loop import held_out_losses

    return held_out_losses(model, held.ids)


def test_recurring_names_rename_one_repeated_word_per_chosen_paragraph():
    text = "alpha beta gamma beta\n\nnothing repeats here\n\ndelta delta epsilon"
    renamed, names = bc.with_recurring_names(text, 1.0, seed=0, min_length=4)
    paragraphs = renamed.split("\n\n")
    assert len(names) == 2 and paragraphs[1] == "nothing repeats here"
    assert paragraphs[0] == f"alpha {names[0]} gamma {names[0]}"
    assert paragraphs[2] == f"{names[1]} {names[1]} epsilon"
    assert all(len(n) == 8 and n.isalpha() and n.islower() for n in names)
    assert bc.with_recurring_names(text, 1.0, seed=0, min_length=4) == (renamed, names)
    assert bc.with_recurring_names(text, 0.0, seed=0) == (text, [])


def test_brackets_pair_within_paragraphs_and_quotes_pair_in_order():
    text = 'f(a[1], {b}) )x(\n\nsay "hi" and "bye"'
    pairs = bc.bracket_closers(text)
    assert [(text[o], text[c]) for o, c in pairs] == [("(", ")"), ("[", "]"), ("{", "}")]
    quotes = bc.bracket_closers(text, quotes=True)
    assert [text[o : c + 1] for o, c in quotes] == ['"hi"', '"bye"']
    assert bc.unmatched_share("(a)(b") == pytest.approx(1 / 3)
    assert math.isnan(bc.unmatched_share("no brackets"))


def test_closer_spans_are_the_tokens_that_spell_the_closers():
    text = "call(a, b)) and (x):\n" * 6
    held = bc.HeldOut.encode(bpe_of(text, 30), text)
    closers = [c for _, c in bc.bracket_closers(text)]
    spans = bc.closer_spans(held, closers)
    assert len(spans) == len(closers)
    for k, (a, b) in zip(closers, spans, strict=True):
        assert a <= k < b and ")" in text[a:b]
    chars = bc.HeldOut.encode(CharTokenizer.from_text(text), text)
    assert bc.closer_spans(chars, closers) == [(k, k + 1) for k in closers]


def test_sample_scores_measure_copying_and_words():
    train = "the value of the attribute is returned " * 3
    scores = bc.sample_scores("the value of the attribute is returned", train, {"the", "value"})
    assert scores["copied from training"] == 1.0
    assert bc.copied_share("qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq", train) == 0.0
    assert scores["real words"] == pytest.approx(3 / 7)  # the, value, the of 7


def test_separates_says_nothing_when_a_sample_cannot_be_measured():
    assert bc.separates([0.1, 0.2], [0.5, 0.6]) is True
    assert bc.separates([0.1, 0.6], [0.5, 0.7]) is False
    assert bc.separates([math.nan, 0.2], [0.5, 0.6]) is None
    assert bc.separates([0.2, math.nan], [0.5, 0.6]) is None  # whatever the order


def test_the_ngram_samples_from_its_alphabet_reproducibly():
    ngram = CharNGram(TEXT, order=3)
    first = ngram.sample(40, seed=1)
    assert first == ngram.sample(40, seed=1) and len(first) == 40
    assert set(first) <= set(TEXT)
    with pytest.raises(ValueError):
        ngram.sample(0)
