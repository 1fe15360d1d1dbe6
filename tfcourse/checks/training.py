"""Check for notebook 08: the learning-rate schedule (linear warmup, then cosine decay)."""

from __future__ import annotations

import math

import torch

from ..runtime import fmt
from ..train.optim import lr_at
from ._harness import Checker

# (case name, keyword arguments, steps to evaluate). Warmup with a nonzero
# min_lr, no warmup, and the default min_lr; each runs past total_steps.
_CASES = (
    ("warmup 10, total 100, min_lr 1e-4", dict(max_lr=1e-3, warmup_steps=10, total_steps=100,
                                               min_lr=1e-4), range(111)),
    ("no warmup, total 20, min_lr 0.05", dict(max_lr=0.5, warmup_steps=0, total_steps=20,
                                              min_lr=0.05), range(26)),
    ("warmup 4, total 12, min_lr not passed", dict(max_lr=3e-4, warmup_steps=4, total_steps=12),
     range(16)),
)


def _cosine(step, max_lr, warmup, total, min_lr, *, start=None, span=None, clamp=True):
    start = warmup if start is None else start
    span = total - warmup if span is None else span
    if clamp and step >= total:
        return min_lr
    progress = (step - start) / span if span else 1.0
    return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * progress))


def _reference_with(warmup_fn=None, decay_fn=None):
    """The reference schedule with its warmup and/or decay part replaced."""
    def schedule(step, max_lr, warmup, total, min_lr):
        if step < warmup:
            return warmup_fn(step, max_lr, warmup) if warmup_fn else max_lr * (step + 1) / (warmup + 1)
        if decay_fn:
            return decay_fn(step, max_lr, warmup, total, min_lr)
        return _cosine(step, max_lr, warmup, total, min_lr)
    return schedule


def _linear_decay(step, max_lr, warmup, total, min_lr):
    if step >= total:
        return min_lr
    return min_lr + (max_lr - min_lr) * (1 - (step - warmup) / (total - warmup))


# Known mistakes: (description, schedule(step, max_lr, warmup, total, min_lr)).
_VARIANTS = (
    ("no warmup: the rate starts at max_lr instead of ramping up over warmup_steps",
     _reference_with(warmup_fn=lambda s, m, w: m)),
    ("no warmup: a cosine over all steps starting at max_lr at step 0",
     lambda s, m, w, t, lo: _cosine(s, m, w, t, lo, start=0, span=t)),
    (("warmup off by one: max_lr * step / warmup_steps gives lr 0 at step 0 (a wasted "
      "update); the reference ramps as max_lr * (step + 1) / (warmup_steps + 1)"),
     _reference_with(warmup_fn=lambda s, m, w: m * s / w)),
    (("warmup off by one: max_lr * (step + 1) / warmup_steps reaches max_lr one step early "
      "(at warmup_steps - 1); the reference ramps as max_lr * (step + 1) / (warmup_steps + 1)"),
     _reference_with(warmup_fn=lambda s, m, w: m * (s + 1) / w)),
    ("cosine does not reach min_lr: it decays to 0 (min_lr ignored)",
     _reference_with(decay_fn=lambda s, m, w, t, lo: _cosine(s, m, w, t, 0.0))),
    (("cosine does not reach min_lr at total_steps: the decay is spread over total_steps "
      "instead of total_steps - warmup_steps"),
     _reference_with(decay_fn=lambda s, m, w, t, lo: _cosine(s, m, w, t, lo, span=t))),
    ("cosine does not stay at min_lr after total_steps: it rises again (clamp the step)",
     _reference_with(decay_fn=lambda s, m, w, t, lo: _cosine(s, m, w, t, lo, clamp=False))),
    ("linear decay instead of cosine: the rate falls on a straight line from max_lr to min_lr",
     _reference_with(decay_fn=_linear_decay)),
)

_HINT = ("warmup: max_lr * (step + 1) / (warmup_steps + 1) for step < warmup_steps; then "
         "min_lr + 0.5 * (max_lr - min_lr) * (1 + cos(pi * progress)) with progress = "
         "(step - warmup_steps) / (total_steps - warmup_steps); min_lr from total_steps on")


def _as_float(chk: Checker, case: str, step: int, value) -> float:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        chk.fail(case, f"at step {step} your function returned a {type(value).__name__}, "
                 f"expected a float", hint="return a Python number, e.g. float(...)")
    value = float(value)
    if not math.isfinite(value):
        chk.fail(case, f"at step {step} your function returned {value}",
                 looks_like="a division by zero or an overflow", hint=_HINT)
    return value


def _matches(got: list[float], want: list[float]) -> bool:
    return all(math.isclose(g, w, rel_tol=1e-6, abs_tol=1e-12) for g, w in zip(got, want))


def check_lr_schedule(fn) -> None:
    """Check ``fn(step, *, max_lr, warmup_steps, total_steps, min_lr=0.0) -> float``.

    The reference is ``tfcourse.train.optim.lr_at``: for ``step < warmup_steps`` the rate
    is ``max_lr * (step + 1) / (warmup_steps + 1)``; from ``warmup_steps`` to
    ``total_steps`` a half cosine from ``max_lr`` to ``min_lr``; after that ``min_lr``.
    Compared at every step of three settings (with and without warmup, nonzero and
    default ``min_lr``, steps past ``total_steps``). Names the mistake when it is a
    known one (no warmup, warmup off by one, cosine not reaching ``min_lr``, linear
    decay instead of cosine).
    """
    if not callable(fn):
        raise TypeError(f"check_lr_schedule expects a function, got {type(fn).__name__}")
    with Checker("lr_at") as chk:
        for case, kwargs, steps in _CASES:
            got = []
            for step in steps:
                value = chk.call(case, f"your function at step {step}", fn, step, **kwargs)
                got.append(_as_float(chk, case, step, value))
            full = {"min_lr": 0.0, **kwargs}
            want = [lr_at(step, **full) for step in steps]
            if not _matches(got, want):
                args = (full["max_lr"], full["warmup_steps"], full["total_steps"], full["min_lr"])
                looks = next((description for description, variant in _VARIANTS
                              if _matches(got, [variant(s, *args) for s in steps])), None)
                if looks is None and "min_lr" not in kwargs:
                    fallback = [lr_at(s, **{**full, "min_lr": full["max_lr"] / 10}) for s in steps]
                    if _matches(got, fallback):
                        looks = "min_lr does not default to 0.0"
                first = next(i for i, (g, w) in enumerate(zip(got, want))
                             if not math.isclose(g, w, rel_tol=1e-6, abs_tol=1e-12))
                step = list(steps)[first]
                chk.fail(case, f"at step {step} your rate is {fmt(got[first], 6)}, expected "
                         f"{fmt(want[first], 6)}", looks_like=looks, hint=_HINT)
            chk.ok()
