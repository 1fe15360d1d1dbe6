"""The notebook-10 checks (RoPE tables, RoPE) pass correct code and name wrong code."""

from __future__ import annotations

import pytest
import torch

import tfcourse as tc
from tfcourse.checks.modern import check_rotary, check_rotary_tables

from conftest import fails, passes

# ----------------------------------------------------------------------------- tables


def _tables(
    T,
    head_dim,
    base=10000.0,
    *,
    dtype=torch.float64,
    start=0,
    layout="half",
    exponent="2i",
    out_dtype=torch.float32,
    inverted=False,
):
    i = (
        torch.arange(0, head_dim, 2, dtype=dtype)
        if exponent == "2i"
        else torch.arange(head_dim // 2, dtype=dtype)
    )
    inv_freq = base ** (i / head_dim) if inverted else 1.0 / base ** (i / head_dim)
    angles = torch.outer(torch.arange(start, start + T, dtype=dtype), inv_freq)
    angles = (
        torch.cat([angles, angles], -1) if layout == "half" else angles.repeat_interleave(2, -1)
    )
    return angles.cos().to(out_dtype), angles.sin().to(out_dtype)


def test_rotary_tables_reference_and_alternatives_pass(capsys):
    passes(check_rotary_tables, tc.rotary_cos_sin, capsys, "rotary_cos_sin")
    passes(check_rotary_tables, _tables, capsys, "rotary_cos_sin")

    def via_exp(T, head_dim, base=10000.0):
        inv_freq = torch.exp(
            -torch.arange(0, head_dim, 2, dtype=torch.float64)
            / head_dim
            * torch.log(torch.tensor(base, dtype=torch.float64))
        )
        angles = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq
        return torch.cat([angles, angles], -1).cos().float(), torch.cat(
            [angles, angles], -1
        ).sin().float()

    passes(check_rotary_tables, via_exp, capsys, "rotary_cos_sin")


@pytest.mark.parametrize(
    "wrong, cause",
    [
        (lambda T, d, b=10000.0: _tables(T, d, b, start=1), "positions start at 1"),
        (lambda T, d, b=10000.0: _tables(T, d, b, layout="interleaved"), "interleaved layout"),
        (lambda T, d, b=10000.0: _tables(T, d, b, exponent="i"), "2i / head_dim"),
        (lambda T, d, b=10000.0: _tables(T, d, b, dtype=torch.float32), "computed in float32"),
        (lambda T, d, b=10000.0: _tables(T, d, b)[::-1], "cos and sin are swapped"),
        (lambda T, d, b=10000.0: _tables(T, d, b, inverted=True), "the frequencies are inverted"),
        (lambda T, d, b=10000.0: _tables(T, d, b, out_dtype=torch.float64), "dtype float64"),
        (lambda T, d, b=10000.0: _tables(T, d)[0], "expected a tuple"),
    ],
)
def test_rotary_tables_wrong_ones_fail_with_their_cause(wrong, cause):
    fails(check_rotary_tables, wrong, cause)


def test_rotary_tables_ignoring_basefails():
    fails(check_rotary_tables, lambda T, d, b=10000.0: _tables(T, d), "base=500", "differs")


def test_rotary_tables_half_width_named():
    def half(T, d, b=10000.0):
        inv = 1.0 / b ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        a = torch.outer(torch.arange(T, dtype=torch.float64), inv)
        return a.cos().float(), a.sin().float()

    fails(check_rotary_tables, half, "one angle per pair")


# ----------------------------------------------------------------------------- apply_rotary


def _rotate_every_two(x):
    return torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)


def test_rotary_reference_and_alternatives_pass(capsys):
    passes(check_rotary, tc.apply_rotary, capsys, "apply_rotary")

    def by_halves(x, cos, sin):  # the rotation written out on the two halves
        h = x.shape[-1] // 2
        x1, x2, c, s = x[..., :h], x[..., h:], cos[..., :h], sin[..., :h]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)

    passes(check_rotary, by_halves, capsys, "apply_rotary")


@pytest.mark.parametrize(
    "wrong, cause",
    [
        (
            lambda x, c, s: (
                x * c[..., : x.shape[-1] // 2].repeat_interleave(2, -1)
                + _rotate_every_two(x) * s[..., : x.shape[-1] // 2].repeat_interleave(2, -1)
            ),
            "interleaved-pairs convention",
        ),
        (lambda x, c, s: x * c + _rotate_every_two(x) * s, "interleaved pairs"),
        (lambda x, c, s: x * c - tc.nn.positional.rotate_half(x) * s, "sign error"),
        (lambda x, c, s: x * c + torch.cat(x.chunk(2, -1)[::-1], -1) * s, "without the minus sign"),
        (lambda x, c, s: x * c, "rotate_half(x) * sin term is missing"),
        (
            lambda x, c, s: tc.apply_rotary(
                x,
                *tc.rotary_cos_sin(
                    x.shape[-2], x.shape[-1], offset=1, dtype=x.dtype, device=x.device
                ),
            ),
            "positions off by one",
        ),
    ],
)
def test_rotary_wrong_ones_fail_with_their_cause(wrong, cause):
    fails(check_rotary, wrong, cause)


def test_rotary_in_place_and_detached_fail():
    def in_place(x, cos, sin):
        out = tc.apply_rotary(x, cos, sin)
        with torch.no_grad():
            x.mul_(1.0).add_(1.0)
        return out

    fails(check_rotary, in_place, "modified its input")
    fails(check_rotary, lambda x, c, s: tc.apply_rotary(x, c, s).detach(), "cut off from autograd")
