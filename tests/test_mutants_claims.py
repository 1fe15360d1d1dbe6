"""Notebook 11's check, ``check_permute_qk_rows``: correct code passes, each mistake is named.

Follows ``tests/test_mutants.py``: every mutant is a learner-style implementation with one
mistake and must fail with an ``AssertionError`` whose first line names the cause; the
alternatives are other correct ways to write it and must pass. The catalogue runner of
``tests/test_mutants.py`` is reused (pytest puts ``tests/`` on the path).
"""

from __future__ import annotations

import pytest
import torch
from test_mutants import test_alternative_correct_implementation_passes as alternative_passes
from test_mutants import test_mutant_fails_naming_its_cause as mutant_fails

from tfcourse.checks import check_permute_qk_rows
from tfcourse.checks.claims import reference_permute_qk_rows


def make_permute(mistake=None):
    """Learner-style ``permute_qk_rows``; ``mistake`` switches on one error."""

    def permute(weight, n_heads):
        rows, d_in = weight.shape
        head_dim = rows // n_heads
        if mistake == "unchanged":
            return weight
        if mistake == "inverse":
            return weight.view(n_heads, 2, head_dim // 2, d_in).transpose(1, 2).reshape(rows, d_in)
        if mistake == "heads_ignored":
            return weight.view(rows // 2, 2, d_in).transpose(0, 1).reshape(rows, d_in)
        if mistake == "odd_first":
            return torch.cat([torch.cat([h[1::2], h[0::2]]) for h in weight.split(head_dim)])
        if mistake == "columns":
            return weight.view(rows, d_in // 2, 2).transpose(1, 2).reshape(rows, d_in)
        if mistake == "in_place":
            return weight.copy_(make_permute()(weight.clone(), n_heads))
        if mistake == "float32":
            return make_permute()(weight, n_heads).float()
        if mistake == "rows_shuffled":  # a wrong order no known mistake explains
            return weight.flip(0)
        if mistake == "list":
            return make_permute()(weight, n_heads).tolist()
        return weight.view(n_heads, head_dim // 2, 2, d_in).transpose(1, 2).reshape(rows, d_in)

    permute.__name__ = f"permute_{mistake}"
    return permute


def permute_by_index(weight, n_heads):
    head_dim = weight.shape[0] // n_heads
    order = torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])
    rows = torch.cat([h * head_dim + order for h in range(n_heads)]).to(weight.device)
    return weight[rows]


def permute_head_by_head(weight, n_heads):
    return torch.cat([torch.cat([h[0::2], h[1::2]]) for h in weight.chunk(n_heads)])


MUTANTS = [
    ("permute-unchanged", make_permute("unchanged"), "returned unchanged"),
    ("permute-inverse", make_permute("inverse"), "the inverse permutation"),
    ("permute-heads-ignored", make_permute("heads_ignored"), "n_heads was ignored"),
    ("permute-odd-rows-first", make_permute("odd_first"), "odd rows first"),
    ("permute-columns", make_permute("columns"), "columns (input features)"),
    ("permute-in-place", make_permute("in_place"), "modified its input weight in place"),
    ("permute-float32", make_permute("float32"), "has dtype torch.float32, expected torch.float64"),
    ("permute-unknown-order", make_permute("rows_shuffled"), "differs from the reference"),
    ("permute-not-a-tensor", make_permute("list"), "is a list, expected a tensor"),
]

ALTERNATIVES = [
    ("permute-learner-base", make_permute(None)),
    ("permute-index-gather", permute_by_index),
    ("permute-head-by-head-slices", permute_head_by_head),
    ("permute-reference", reference_permute_qk_rows),
]


@pytest.mark.parametrize(
    "implementation, cause", [pytest.param(*row[1:], id=row[0]) for row in MUTANTS]
)
def test_mutant_fails_naming_its_cause(implementation, cause, capsys):
    mutant_fails(check_permute_qk_rows, implementation, cause, capsys)


@pytest.mark.parametrize(
    "implementation", [pytest.param(row[1], id=row[0]) for row in ALTERNATIVES]
)
def test_alternative_correct_implementation_passes(implementation, capsys):
    alternative_passes(check_permute_qk_rows, implementation, capsys)


def test_unknown_order_gets_the_general_hint():
    with pytest.raises(AssertionError) as info:
        check_permute_qk_rows(make_permute("rows_shuffled"))
    assert "looks like" not in str(info.value).splitlines()[0]


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
