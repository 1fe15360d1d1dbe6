"""Wrong blocks for ``check_transformer_block``: each must fail naming its cause.

Builds on the learner-style blocks of the catalogue ``tests/mutants/core.py``
(``LearnerBlock``, ``TorchPartsBlock``), so each mutant differs from an implementation that
passes by its one mistake.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from torch import nn

import tfcourse as tc
from tfcourse import checks
from tfcourse.authoring.build import make_learner, solve
from tfcourse.course import notebook_format
from tfcourse.course.restamp import restamp

from conftest import named_mistake, verdict_lines
from helpers import grade_exercise
from mutants.core import LearnerBlock, TorchPartsBlock


class SharedNormBlock(LearnerBlock):
    """One LayerNorm object registered as both norm1 and norm2 (``self.norm2 = self.norm1``)."""

    def __init__(self, d_model, n_heads, *, max_seq_len, pre_ln=True, dropout=0.0):
        super().__init__(d_model, n_heads, max_seq_len=max_seq_len, pre_ln=pre_ln, dropout=dropout)
        self.norm2 = self.norm1


class Norm1TwiceBlock(LearnerBlock):
    """Two norms registered, but norm1 called before both sublayers."""

    def forward(self, x):
        if self.pre_ln:
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm1(x))
        x = self.norm1(x + self.attn(x))
        return self.norm1(x + self.mlp(x))


class PostNorm1TwiceBlock(Norm1TwiceBlock):
    """The same mistake, met in the post-LN sub-checks only (the pre-LN path is correct)."""

    def forward(self, x):
        if self.pre_ln:
            return LearnerBlock.forward(self, x)
        return super().forward(x)


class TanhGeluBlock(LearnerBlock):
    """The reference parts, but the MLP built with GPT-2's tanh GELU."""

    def __init__(self, d_model, n_heads, *, max_seq_len, pre_ln=True, dropout=0.0):
        super().__init__(d_model, n_heads, max_seq_len=max_seq_len, pre_ln=pre_ln, dropout=dropout)
        self.mlp = tc.FeedForward(d_model, activation="gelu_tanh", dropout=dropout)


class TanhGeluModule(nn.Module):
    """A hand-written MLP with nn.GELU(approximate='tanh') (the learner's own, not tc's)."""

    def __init__(self, d_model, *, dropout=0.0):
        super().__init__()
        self.fc_in, self.fc_out = nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model)
        self.act, self.drop = nn.GELU(approximate="tanh"), nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(self.fc_out(self.act(self.fc_in(x))))


class TorchTanhGeluBlock(TorchPartsBlock):
    def __init__(self, d_model, n_heads, *, max_seq_len, pre_ln=True, dropout=0.0):
        super().__init__(d_model, n_heads, max_seq_len=max_seq_len, pre_ln=pre_ln, dropout=dropout)
        self.mlp = TanhGeluModule(d_model, dropout=dropout)


SHARED_NORM = "one norm module is shared by both sublayers"
TANH_GELU = "the tanh approximation of GELU"

MUTANTS = [
    ("block-shared-norm-module", SharedNormBlock, SHARED_NORM),
    ("block-norm1-used-twice", Norm1TwiceBlock, SHARED_NORM),
    ("block-post-ln-norm1-used-twice", PostNorm1TwiceBlock, SHARED_NORM),
    ("block-tanh-gelu-reference-mlp", TanhGeluBlock, TANH_GELU),
    ("block-tanh-gelu-own-mlp", TorchTanhGeluBlock, TANH_GELU),
]


@pytest.mark.parametrize(
    "implementation, cause", [pytest.param(*row[1:], id=row[0]) for row in MUTANTS]
)
def test_block_mutant_fails_naming_its_cause(implementation, cause, capsys):
    with pytest.raises(AssertionError) as info:
        checks.check_transformer_block(implementation)
    assert cause in verdict_lines(str(info.value)), str(info.value)
    assert capsys.readouterr().out == ""  # no "checks passed" line


def test_exact_gelu_base_still_passes(capsys):
    checks.check_transformer_block(LearnerBlock)
    assert capsys.readouterr().out.endswith("8/8 checks passed\n")


# The same mistakes written into notebook 05's exercise cell, judged by the sealed grader
# (the check then sees the learner's block through the grader's stand-ins, not the object),
# and the dropout ones, which the check finds by their effect in train mode.
NOTEBOOK_05 = Path(__file__).resolve().parents[1] / "solutions" / "05_block.ipynb"


@pytest.mark.slow
@pytest.mark.parametrize(
    "old, new, cause",
    [
        ("self.norm2 = tc.LayerNorm(d_model)", "self.norm2 = self.norm1", SHARED_NORM),
        (
            "self.mlp = tc.FeedForward(d_model, dropout=dropout)",
            "self.mlp = tc.FeedForward(d_model, activation='gelu_tanh', dropout=dropout)",
            TANH_GELU,
        ),
        (
            "self.mlp = tc.FeedForward(d_model, dropout=dropout)",
            "self.mlp = tc.FeedForward(d_model)",
            "the MLP has no dropout",
        ),
        (
            "x = x + self.attn(self.norm1(x))",
            "x = x + F.dropout(self.attn(self.norm1(x)), self.attn.dropout, self.training)",
            "the attention's output is dropped twice",
        ),
    ],
    ids=["shared-norm", "tanh-gelu", "no-mlp-dropout", "attention-dropped-twice"],
)
@pytest.mark.sandbox
def test_the_sealed_grader_names_the_block_mistakes(old, new, cause, grading_setup):
    solution = notebook_format.read_notebook(NOTEBOOK_05)
    nb = solve(make_learner(solution, NOTEBOOK_05.stem), solution)
    cell = next(c for c in nb.cells if notebook_format.is_exercise(c))
    assert old in cell.source
    cell.source = cell.source.replace(old, new)
    stamped, _ = restamp(nb, solution)
    verdict = grade_exercise(stamped, solution, "TransformerBlock", grading_setup)
    assert verdict.status == "failed" and cause in verdict.output, verdict


@pytest.fixture
def accelerator_tolerances(monkeypatch):
    """Tolerances loose enough that tanh GELU passes the plain comparison (as it may on a GPU)."""
    from tfcourse.checks._harness import Checker

    original = Checker.__init__

    def loose(self, name):
        original(self, name)
        self.rtol, self.atol = 1e-2, 1e-3

    monkeypatch.setattr(Checker, "__init__", loose)


def test_tanh_gelu_hiding_within_tolerance_is_still_named(accelerator_tolerances, capsys):
    with pytest.raises(AssertionError) as info:
        checks.check_transformer_block(TanhGeluBlock)
    message = str(info.value)
    assert "ten times closer to a known mistake" in message.splitlines()[0]
    assert TANH_GELU in named_mistake(message), message
    checks.check_transformer_block(LearnerBlock)  # no false alarm for exact GELU
    assert capsys.readouterr().out.endswith("8/8 checks passed\n")
