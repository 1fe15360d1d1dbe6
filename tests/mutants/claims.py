"""The wrong and the right implementations that test_mutants_claims.py runs.

See ``mutants/__init__.py``.
"""

from __future__ import annotations

import torch

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
