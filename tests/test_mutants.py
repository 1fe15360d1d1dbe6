"""Notebooks 01 to 08's checks meet the catalogue of ``mutants.core``: every mutant fails
naming its cause, every alternative passes (see ``tests/mutants/__init__.py``)."""

from __future__ import annotations

import pytest
import torch.nn.functional as F
from torch import nn

from tfcourse import checks

from conftest import named_mistake
from mutants import fails_naming_its_cause, passes
from mutants.core import ALTERNATIVES, MUTANTS


@pytest.mark.parametrize(
    "check, implementation, cause", [pytest.param(*row[1:], id=row[0]) for row in MUTANTS]
)
def test_mutant_fails_naming_its_cause(check, implementation, cause, capsys):
    fails_naming_its_cause(check, implementation, cause, capsys)


@pytest.mark.parametrize(
    "check, implementation", [pytest.param(*row[1:], id=row[0]) for row in ALTERNATIVES]
)
def test_alternative_correct_implementation_passes(check, implementation, capsys):
    passes(check, implementation, capsys)


def test_the_catalogue_is_large_enough():
    assert len(MUTANTS) >= 20 and len(ALTERNATIVES) >= 5
    assert len({row[0] for row in MUTANTS + ALTERNATIVES}) == len(MUTANTS) + len(ALTERNATIVES)


class _HeadsSplitByView(nn.Module):
    """Heads split with .view(B, H, T, hd) on a slice of the fused projection: the view
    cannot run (the slice is not contiguous), and would scramble positions if it did."""

    def __init__(self, d_model, n_heads, dropout=0.0, max_seq_len=None, bias=True):
        super().__init__()
        self.n_heads = n_heads
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, attn_mask=None):
        B, T, D = x.shape
        q, k, v = (
            t.view(B, self.n_heads, T, D // self.n_heads) for t in self.qkv_proj(x).split(D, dim=-1)
        )
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, D))


def test_a_view_that_cannot_run_is_named_as_the_head_split():
    with pytest.raises(AssertionError) as info:
        checks.check_multi_head_attention(_HeadsSplitByView)
    message = str(info.value)
    lines, diagnosis = message.splitlines(), named_mistake(message)
    assert "raised RuntimeError" in lines[0], message
    assert lines[2].startswith("  RuntimeError: view size is not compatible"), message
    assert diagnosis.startswith("a .view() of a tensor that is not contiguous"), message
    assert "(B, T, H, head_dim)" in diagnosis, message
