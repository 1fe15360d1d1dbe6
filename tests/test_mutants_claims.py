"""Notebook 11's check, ``check_permute_qk_rows``: correct code passes, each mistake is named.

Follows ``tests/test_mutants.py``: every mutant is a learner-style implementation with one
mistake and must fail with an ``AssertionError`` whose first line names the cause; the
alternatives are other correct ways to write it and must pass. The catalogue is
``tests/mutants/claims.py``.
"""

from __future__ import annotations

import pytest
import torch

from tfcourse.checks import check_permute_qk_rows
from tfcourse.checks.claims import reference_permute_qk_rows

from mutants import fails_naming_its_cause, passes
from mutants.claims import ALTERNATIVES, MUTANTS, make_permute


@pytest.mark.parametrize(
    "implementation, cause", [pytest.param(*row[1:], id=row[0]) for row in MUTANTS]
)
def test_mutant_fails_naming_its_cause(implementation, cause, capsys):
    fails_naming_its_cause(check_permute_qk_rows, implementation, cause, capsys)


@pytest.mark.parametrize(
    "implementation", [pytest.param(row[1], id=row[0]) for row in ALTERNATIVES]
)
def test_alternative_correct_implementation_passes(implementation, capsys):
    passes(check_permute_qk_rows, implementation, capsys)


def test_unknown_order_gets_the_general_hint():
    with pytest.raises(AssertionError) as info:
        check_permute_qk_rows(make_permute("rows_shuffled"))
    assert "looks like" not in str(info.value)  # no diagnosis line: the general hint


def test_permutation_makes_rotate_half_scores_equal_interleaved_scores():
    """The point of the exercise: after the permutation, rotate-half RoPE gives the same scores."""
    import tfcourse as tc

    torch.manual_seed(0)
    n_heads, head_dim, d, T = 2, 8, 16, 6
    w_q, w_k, x = (
        torch.randn(d, d, dtype=torch.float64),
        torch.randn(d, d, dtype=torch.float64),
        torch.randn(T, d, dtype=torch.float64),
    )
    angles = torch.arange(T, dtype=torch.float64)[:, None] * 10000.0 ** (
        -torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    )  # (T, hd/2)

    def interleaved(t):  # (H, T, hd)
        a, b = t[..., 0::2], t[..., 1::2]
        return torch.stack(
            [a * angles.cos() - b * angles.sin(), b * angles.cos() + a * angles.sin()], -1
        ).flatten(-2)

    def heads(w):
        return (x @ w.T).view(T, n_heads, head_dim).transpose(0, 1)

    cos, sin = tc.rotary_cos_sin(T, head_dim, dtype=torch.float64)
    meta = interleaved(heads(w_q)) @ interleaved(heads(w_k)).transpose(-2, -1)
    q, k = (
        tc.apply_rotary(heads(reference_permute_qk_rows(w, n_heads))[None], cos, sin)[0]
        for w in (w_q, w_k)
    )
    torch.testing.assert_close(q @ k.transpose(-2, -1), meta)


@pytest.mark.parametrize(
    "weight, n_heads, error",
    [
        (torch.zeros(8), 1, TypeError),
        (torch.zeros(12, 4), 4, ValueError),
        (torch.zeros(8, 4), 0, ValueError),
        (torch.zeros(8, 4), 2.0, ValueError),
    ],
)
def test_reference_validates_its_input(weight, n_heads, error):
    with pytest.raises(error):
        reference_permute_qk_rows(weight, n_heads)
