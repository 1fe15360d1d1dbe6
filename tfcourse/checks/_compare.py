"""How a check compares tensors: tolerances, the closeness rule, distances, and where exact
results differ.

Split from ``_harness`` (which re-exports these names): the runner decides *what* to
compare, this module *how*.
"""

from __future__ import annotations

import math

import torch


def tolerances(dtype: torch.dtype, device: torch.device) -> tuple[float, float]:
    """``(rtol, atol)`` for comparing two correct implementations.

    float32 on the CPU agrees to about 1e-6 between e.g. einsum and matmul; the
    margin covers different summation orders in the gradients. Accelerators use
    other kernels (fused attention, other reductions), hence looser bounds. Every
    mistake the checks look for changes the output by far more than either.
    """
    if dtype == torch.float64:
        return 1e-7, 1e-9
    if dtype in (torch.float16, torch.bfloat16):
        return 2e-2, 2e-2
    if device.type == "cpu":
        return 1e-4, 1e-5
    return 1e-3, 1e-4


def close(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float, equal_nan=False) -> bool:
    """``torch.testing.assert_close``'s rule, ``|a - b| <= atol + rtol * |b|`` elementwise.

    Written with ``torch.isclose`` because ``assert_close`` itself imports
    ``torch.distributed.tensor`` (and sympy) on first use: seconds in a fresh kernel.
    """
    a, b = a.detach(), b.detach().to(a.device)
    if a.shape != b.shape:
        return False
    if not (a.is_floating_point() or b.is_floating_point()):
        return torch.equal(a, b.to(a.dtype))
    dtype = torch.promote_types(a.dtype, b.dtype)
    return bool(
        torch.isclose(a.to(dtype), b.to(dtype), rtol=rtol, atol=atol, equal_nan=equal_nan).all()
    )


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest ``|a - b|`` (``nan`` if either holds NaN where the other does not)."""
    diff = (a.detach().cpu().double() - b.detach().cpu().double()).abs()
    return float("nan") if torch.isnan(diff).any() else float(diff.max()) if diff.numel() else 0.0


def differing_entries(a: torch.Tensor, b: torch.Tensor) -> tuple[int, tuple[int, ...] | None]:
    """For exact results (bool, integer) of one shape: how many entries of ``a`` differ from
    ``b``, and the index of the first that does (row-major order), or ``None`` if none does.

    A failed mask is better told by its wrong entries than by ``max |diff| = 1``.
    """
    differ = a.detach().cpu() != b.detach().cpu()
    count = int(differ.sum())
    if not count:
        return 0, None
    return count, tuple(int(i) for i in differ.nonzero()[0])


def scaled_error(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float) -> float:
    """Largest ``|a - b| / (atol + rtol * |b|)``: at most 1 exactly when ``close(a, b, ...)``
    holds with ``equal_nan=True``.

    Elements equal in both (including matching infinities and NaNs) count 0; a NaN or an
    infinity on one side only makes it ``inf``. Comparing this number across candidates
    tells which of several close ones is the closest, in the unit of the tolerance.
    """
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
    if a.shape != b.shape:
        return math.inf
    if not a.numel():
        return 0.0
    same = (a == b) | (torch.isnan(a) & torch.isnan(b))
    ratio = (a - b).abs() / (atol + rtol * b.abs())
    ratio = torch.where(same, torch.zeros_like(ratio), ratio)
    return math.inf if torch.isnan(ratio).any() else float(ratio.max())
