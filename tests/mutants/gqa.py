"""The wrong and the right implementations that test_mutants_gqa.py runs.

See ``mutants/__init__.py``.
"""

from __future__ import annotations

import torch

from tfcourse.nn.attention import repeat_kv


def make_repeat_kv(mistake=None):
    """Learner-style ``repeat_kv`` (expand + reshape); ``mistake`` switches on one error."""

    def repeat(kv, n_rep):
        B, H_kv, T, hd = kv.shape
        if mistake == "tiled":
            return kv.repeat(1, n_rep, 1, 1)
        if mistake == "tiled_expand":  # the new axis before the heads: tiles too
            return kv[:, None].expand(B, n_rep, H_kv, T, hd).reshape(B, H_kv * n_rep, T, hd)
        if mistake == "seq_axis":
            return kv.repeat_interleave(n_rep, dim=2)
        if mistake == "seq_axis_tiled":
            return kv.repeat(1, 1, n_rep, 1)
        if mistake == "head_dim_axis":
            return kv.repeat_interleave(n_rep, dim=3)
        if mistake == "batch_axis":
            return kv.repeat_interleave(n_rep, dim=0)
        if mistake == "ignored":
            return kv
        if mistake == "unsqueeze_in_place":
            return kv.unsqueeze_(2).expand(B, H_kv, n_rep, T, hd).reshape(B, H_kv * n_rep, T, hd)
        if mistake == "written_into_input":  # "saves memory" by reusing the input
            out = kv[:, :, None].expand(B, H_kv, n_rep, T, hd).reshape(B, H_kv * n_rep, T, hd)
            out = out.clone()
            with torch.no_grad():
                kv.mul_(0.5)
            return out
        if mistake == "view":  # .view cannot merge a transposed input's axes
            return (
                kv.view(B * H_kv, 1, T, hd)
                .expand(B * H_kv, n_rep, T, hd)
                .reshape(B, H_kv * n_rep, T, hd)
            )
        if mistake == "detached":
            return make_repeat_kv()(kv.detach(), n_rep)
        if mistake == "float64":
            return make_repeat_kv()(kv, n_rep).double()
        if mistake == "heads_shuffled":  # a wrong order no known mistake explains
            return make_repeat_kv()(kv, n_rep).flip(1)
        return kv[:, :, None].expand(B, H_kv, n_rep, T, hd).reshape(B, H_kv * n_rep, T, hd)

    repeat.__name__ = f"repeat_kv_{mistake}"
    return repeat


def repeat_interleave_heads(kv, n_rep):
    return kv.repeat_interleave(n_rep, dim=1)


def index_heads(kv, n_rep):
    heads = torch.arange(kv.shape[1] * n_rep, device=kv.device) // n_rep  # h -> h // n_rep
    return kv[:, heads]


MUTANTS = [
    ("repeat-kv-tiled", make_repeat_kv("tiled"), "tiled instead of grouped"),
    ("repeat-kv-tiled-by-expand", make_repeat_kv("tiled_expand"), "tiled instead of grouped"),
    ("repeat-kv-sequence-axis", make_repeat_kv("seq_axis"), "the sequence axis (dim 2)"),
    (
        "repeat-kv-sequence-axis-tiled",
        make_repeat_kv("seq_axis_tiled"),
        "the sequence axis (dim 2)",
    ),
    ("repeat-kv-head-dim-axis", make_repeat_kv("head_dim_axis"), "the head_dim axis (dim 3)"),
    ("repeat-kv-batch-axis", make_repeat_kv("batch_axis"), "the batch axis (dim 0)"),
    ("repeat-kv-n-rep-ignored", make_repeat_kv("ignored"), "n_rep was ignored"),
    ("repeat-kv-unsqueeze-in-place", make_repeat_kv("unsqueeze_in_place"), "an in-place operation"),
    (
        "repeat-kv-written-into-input",
        make_repeat_kv("written_into_input"),
        "modified its input kv in place",
    ),
    (
        "repeat-kv-view-on-transposed",
        make_repeat_kv("view"),
        "a .view() of a tensor that is not contiguous",
    ),
    ("repeat-kv-detached", make_repeat_kv("detached"), "cut off from autograd"),
    ("repeat-kv-float64", make_repeat_kv("float64"), "has dtype torch.float64"),
    ("repeat-kv-unknown-order", make_repeat_kv("heads_shuffled"), "differs from the reference"),
]

ALTERNATIVES = [
    ("repeat-kv-learner-base", make_repeat_kv(None)),
    ("repeat-kv-repeat-interleave-dim-1", repeat_interleave_heads),
    ("repeat-kv-index-heads", index_heads),
    ("repeat-kv-reference", repeat_kv),
]
