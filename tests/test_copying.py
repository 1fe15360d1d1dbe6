"""Copy drills (``tfcourse.lab.copying``): the text that rewards copying, the losses that show a
model copy, and the induction scores of its heads."""

from __future__ import annotations

import math
import random
import string

import pytest
import torch
from torch import nn

from tfcourse.lab import copying
from tfcourse.nn.config import GPTConfig
from tfcourse.nn.model import GPT
from tfcourse.train.data import CharTokenizer

HALF = 12
TOKENIZER = CharTokenizer.from_text(string.ascii_lowercase + " \n.,")


def test_a_drill_is_a_line_of_names_a_separator_then_the_same_line():
    rng = random.Random(0)
    drills = [copying.drill(rng, HALF) for _ in range(40)]
    for text in drills:
        first, separator, copy = text[:HALF], text[HALF], text[HALF + 1 :]
        assert len(text) == 2 * HALF + 1 and first == copy
        assert set(first) <= set(string.ascii_lowercase + " ")
        assert separator in copying.SEPARATORS
    # every separator is drawn: nothing but the line itself says where a copy starts
    assert {text[HALF] for text in drills} == set(copying.SEPARATORS)
    assert (
        copying.drill(random.Random(0), HALF) == drills[0] != copying.drill(random.Random(1), HALF)
    )


def _drills_of(drilled: str, prose: str) -> list[str]:
    """The paragraphs of ``drilled`` that are drills, checking that the others are ``prose``'s,
    in order."""
    paragraphs, theirs = drilled.split("\n\n"), set(prose.split("\n\n"))
    assert [p for p in paragraphs if p in theirs] == prose.split("\n\n")
    return [p for p in paragraphs if p not in theirs]


def _line(drill: str) -> str:
    half = len(drill) // 2
    assert drill[:half] == drill[half + 1 :] and drill[half] in copying.SEPARATORS
    return drill[:half]


def test_drills_take_about_their_share_of_the_text_and_leave_it_in_order():
    prose = "\n\n".join(f"paragraph {i} " + "words " * 20 for i in range(200))
    drilled = copying.with_drills(prose, 0.3, seed=0, half=HALF)
    drills = _drills_of(drilled, prose)
    share = sum(len(d) for d in drills) / len(drilled)
    assert 0.26 < share < 0.31
    assert copying.with_drills(prose, 0.0, seed=0) == prose
    lengths = {len(_line(d)) for d in drills}  # the copy lies at varying distances
    assert min(lengths) == HALF // 3 and max(lengths) == HALF
    fixed = copying.with_drills(prose, 0.3, seed=0, half=HALF, shortest=HALF)
    assert {len(_line(d)) for d in _drills_of(fixed, prose)} == {HALF}
    with pytest.raises(ValueError, match="shortest must be at most half"):
        copying.with_drills(prose, 0.3, seed=0, half=HALF, shortest=HALF + 1)
    for bad in (1.0, -0.1, True, "0.3"):
        with pytest.raises(ValueError, match=r"share must be a number in \[0, 1\)"):
            copying.with_drills(prose, bad, seed=0)


class Copier(nn.Module):
    """Uniform over the vocabulary, except that from the separator on (if ``copies``) it puts
    almost all its probability on the character ``HALF`` positions back: a perfect copier."""

    def __init__(self, copies: bool):
        super().__init__()
        self.copies = copies
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, ids):
        logits = torch.zeros(*ids.shape, TOKENIZER.vocab_size)
        if self.copies:
            positions = torch.arange(HALF, ids.shape[1])
            # input p predicts p + 1, a copy of the line's p + 1 - (HALF + 1)
            earlier = ids[:, positions - HALF]
            logits[:, positions] = 20.0 * nn.functional.one_hot(earlier, TOKENIZER.vocab_size)
        return logits * self.scale


def test_the_copy_is_cheap_only_for_a_model_that_copies():
    losses = copying.DrillLosses(TOKENIZER, n=8, half=HALF)
    uniform = math.log(TOKENIZER.vocab_size)
    first, copy = losses.first_and_copy(losses.losses(Copier(copies=False)))
    assert first == pytest.approx(uniform) and copy == pytest.approx(uniform)
    first, copy = losses.first_and_copy(losses.losses(Copier(copies=True)))
    assert first == pytest.approx(uniform) and copy < 0.01
    gains = losses.gains(Copier(copies=True))  # one case per drill, for a verdict
    assert gains.shape == (8,) and torch.allclose(
        gains, torch.full((8,), uniform, dtype=torch.float64), atol=0.01
    )
    assert torch.allclose(
        losses.gains(Copier(copies=False)), torch.zeros(8, dtype=torch.float64), atol=1e-5
    )


def test_the_phase_change_is_the_first_step_with_the_gap():
    losses = copying.DrillLosses(TOKENIZER, n=4, half=HALF)
    for step, copies in ((100, False), (200, False), (300, True), (400, True)):
        losses(step, Copier(copies))
    assert [step for step, _, _ in losses.curve] == [100, 200, 300, 400]
    assert losses.phase_change() == 300
    assert losses.phase_change(gap=10.0) is None


def test_a_tokenizer_that_merges_characters_is_refused():
    class Pairs:
        def encode(self, text):
            return list(range(len(text) // 2))

    with pytest.raises(ValueError, match="one token per character"):
        copying.DrillLosses(Pairs(), half=HALF)


def test_induction_scores_find_the_head_that_looks_after_the_earlier_occurrence():
    T = 2 * HALF + 1
    weights = torch.zeros(2, 3, T, T)
    weights[:, :, torch.arange(T), torch.arange(T)] = 1.0  # every head: the current token
    induction = torch.zeros(T, T)
    induction[torch.arange(T), torch.arange(T)] = 1.0
    queries = torch.arange(HALF + 1, 2 * HALF)
    induction[queries] = 0.0
    induction[queries, queries - HALF] = 1.0
    weights[1, 2] = induction
    previous = torch.zeros(T, T)
    previous[queries, queries - HALF - 1] = 1.0  # the earlier occurrence itself: not induction
    weights[0, 1] = previous
    scores = copying.induction_scores(weights, HALF)
    assert scores.shape == (2, 3)
    assert scores[1, 2] == 1.0 and scores.sum() == 1.0


def test_attention_weights_are_each_layers_causal_distributions():
    config = GPTConfig.preset(
        "capstone",
        vocab_size=TOKENIZER.vocab_size,
        n_layers=2,
        d_model=32,
        n_heads=4,
        max_seq_len=2 * HALF + 1,
    )
    torch.manual_seed(0)
    model = GPT(config)
    ids = torch.tensor(TOKENIZER.encode(copying.drill(random.Random(0), HALF)))[:-1]
    weights = copying.attention_weights(model, ids)
    T = len(ids)
    assert weights.shape == (2, 4, T, T)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, T))
    assert weights.triu(1).abs().max() == 0
    # the first layer's input is the embedding: its weights are the reference formula's on it
    attention = model.blocks[0].attn
    x = model.blocks[0].norm1(model.tok_emb(ids[None]))
    torch.testing.assert_close(weights[0], attention(x, return_weights=True)[1][0])
    assert model.training  # left as it was found
    with pytest.raises(ValueError, match="no attention module"):
        copying.attention_weights(nn.Linear(2, 2), ids)


def test_drilled_data_puts_drills_in_the_training_split_only():
    from tfcourse.train.data import TextDataset

    prose = "\n\n".join(f"paragraph {i} of some words, and more." for i in range(400))
    chars = TextDataset(prose + " " + string.ascii_lowercase, max_chars=None, val_block=200)
    data = copying.drilled(chars, 0.5, seed=0, half=HALF)
    assert torch.equal(data.val, chars.val) and data.tokenizer is chars.tokenizer
    train = data.tokenizer.decode(data.train.tolist())
    assert train.replace("\n\n", "").count("\n") > 10  # drills: a line, a newline, its copy
    assert len(data.train) > 1.8 * len(chars.train) and len(chars.train) == len(
        copying.drilled(chars, 0.0, seed=0, half=HALF).train
    )
