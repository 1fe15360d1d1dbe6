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
    """The words as notebook 12 defines them: "holds" beyond the noise above the threshold,
    "does not hold" beyond the noise below it (a margin inside the noise of zero, but far
    below the threshold, included), "inconclusive" otherwise."""
    gains = torch.full((50,), 1.0) + torch.linspace(-0.01, 0.01, 50)
    assert bc.mean_verdict(gains, threshold=0.5).word == "holds"
    assert bc.mean_verdict(gains, threshold=1.5).word == "does not hold"
    noisy = gains + torch.linspace(-20, 20, 50)
    assert bc.mean_verdict(noisy, threshold=0.5).word == "inconclusive"
    near_zero = torch.linspace(-0.4, 0.4, 50)  # margin 0 +- 0.07: inside zero's noise
    assert bc.mean_verdict(near_zero, threshold=0.5).word == "does not hold"
    assert "too few" in bc.mean_verdict(gains[:1], threshold=0.5).word
    with pytest.raises(ValueError, match="1-D tensor"):
        bc.mean_verdict(gains[None], threshold=0.5)


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
    alone = bc.mean_verdict(
        bc.span_losses(ngram, bc.char_offsets(text), second)
        - bc.span_losses(knower, held.offsets, second),
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


def test_paired_names_put_one_fresh_name_twice_in_each_paragraph_within_reach():
    text = "alpha beta gamma delta\n\nnone\n\nfirstword x secondword" + " filler" * 9
    renamed, names = bc.with_paired_names(text, seed=0, within=32, min_length=4)
    paragraphs = renamed.split("\n\n")
    assert len(names) == 2 and paragraphs[1] == "none"
    assert all(len(n) == 8 and n.isalpha() and n.islower() for n in names)
    for paragraph, name in zip((paragraphs[0], paragraphs[2]), names, strict=True):
        first, second = paragraph.index(name), paragraph.rindex(name)
        assert paragraph.count(name) == 2 and second + len(name) - 1 - first <= 32
    assert bc.with_paired_names(text, seed=0, within=32, min_length=4) == (renamed, names)
    # Out of reach: the two words lie 40 characters apart.
    assert bc.with_paired_names("alpha" + " " * 40 + "omega", seed=0, within=32) == (
        "alpha" + " " * 40 + "omega",
        [],
    )
    # repeats() finds every pair, each one case.
    held = bc.HeldOut.encode(CharTokenizer.from_text(renamed), renamed)
    found = bc.repeats(held, text, min_length=8, within=32)
    assert sorted(r.name for r in found) == sorted(names)


def test_copied_share_measures_what_is_recited():
    train = "the value of the attribute is returned " * 3
    assert bc.copied_share("the value of the attribute is returned", train) == 1.0
    assert bc.copied_share("qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq", train) == 0.0
    assert math.isnan(bc.copied_share("short", train))


def test_the_ngram_samples_from_its_alphabet_reproducibly():
    ngram = CharNGram(TEXT, order=3)
    first = ngram.sample(40, seed=1)
    assert first == ngram.sample(40, seed=1) and len(first) == 40
    assert set(first) <= set(TEXT)
    with pytest.raises(ValueError):
        ngram.sample(0)


def test_a_test_that_cannot_decide_says_so_and_its_power_is_low():
    """Noise at most half the threshold: a true margin of twice the threshold reads "holds"
    with a chance of about 98 %; a noisier test has less power and is not decisive."""
    sharp = bc.Verdict(margin=1.0, noise=0.25, threshold=0.5, count=40)
    assert sharp.decisive and sharp.power() == pytest.approx(0.977, abs=0.001)
    loud = bc.Verdict(margin=1.0, noise=0.5, threshold=0.2, count=40)
    assert not loud.decisive and loud.power() < 0.5
    assert sharp.power(effect=0.5) == pytest.approx(bc.FALSE_HOLDS)  # at the threshold
    assert bc.Verdict(margin=1.0, noise=math.inf, threshold=0.5, count=1).power() == 0.0
    assert bc.false_holds_chance(1) == pytest.approx(0.0228, abs=1e-4)
    assert bc.false_holds_chance(4) == pytest.approx(1 - (1 - 0.02275) ** 4, abs=1e-4)
    with pytest.raises(ValueError, match="n_verdicts"):
        bc.false_holds_chance(0)
