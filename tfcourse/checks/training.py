"""Check for notebook 08: the learning-rate schedule (linear warmup, then cosine decay)."""

from __future__ import annotations

import math

import torch

from ..language import LANGUAGES, say, speaking
from ..runtime import fmt
from ..train.optim import lr_at
from ._harness import Checker, mistake, require_function
from .cases import case_int


def _cases():
    """(case name, keyword arguments, steps to evaluate). Warmup with a nonzero
    min_lr, no warmup, and the default min_lr; each runs past total_steps. In grading the
    step counts are drawn for the learner (``cases.case_int``); the kinds stay."""
    warmup, total = case_int(1, 10, 2, 30), case_int(2, 100, 40, 150)
    no_warmup_total = case_int(3, 20, 5, 60)
    short_warmup = case_int(4, 4, 1, 8)
    short_total = short_warmup + case_int(5, 8, 2, 20)
    return (
        (
            say(
                f"warmup {warmup}, total {total}, min_lr 1e-4",
                f"预热 {warmup} 步，共 {total} 步，min_lr 1e-4",
            ),
            dict(max_lr=1e-3, warmup_steps=warmup, total_steps=total, min_lr=1e-4),
            range(total + 11),
        ),
        (
            say(
                f"no warmup, total {no_warmup_total}, min_lr 0.05",
                f"无预热，共 {no_warmup_total} 步，min_lr 0.05",
            ),
            dict(max_lr=0.5, warmup_steps=0, total_steps=no_warmup_total, min_lr=0.05),
            range(no_warmup_total + 6),
        ),
        (
            say(
                f"warmup {short_warmup}, total {short_total}, min_lr not passed",
                f"预热 {short_warmup} 步，共 {short_total} 步，不传 min_lr",
            ),
            dict(max_lr=3e-4, warmup_steps=short_warmup, total_steps=short_total),
            range(short_total + 4),
        ),
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
            return (
                warmup_fn(step, max_lr, warmup) if warmup_fn else max_lr * (step + 1) / (warmup + 1)
            )
        if decay_fn:
            return decay_fn(step, max_lr, warmup, total, min_lr)
        return _cosine(step, max_lr, warmup, total, min_lr)

    return schedule


def _linear_decay(step, max_lr, warmup, total, min_lr):
    if step >= total:
        return min_lr
    return min_lr + (max_lr - min_lr) * (1 - (step - warmup) / (total - warmup))


def _shifted(offset: int):
    """The reference schedule ``offset`` steps off: the rate of ``step + offset`` at ``step``
    (the formulas carried on below step 0, as a learner's own code does)."""
    reference = _reference_with()
    return lambda s, m, w, t, lo: reference(s + offset, m, w, t, lo)


def _one_step_late() -> str:
    return mistake(
        "off by one step: step s gets the rate of step s - 1 (the steps count from 0: the "
        "first optimizer step is step 0, not step 1)",
        "差了一步：第 s 步用的是第 s - 1 步的学习率（步数从 0 开始数：优化器的第一步是"
        "第 0 步，而不是第 1 步）",
    )


def _negative_step() -> dict[str, str]:
    """``lr_at``'s refusal of step -1 (in either language, as a sealed worker may speak
    the other), and the mistake it means: a schedule asked for ``step - 1`` at step 0."""
    refusals = []
    for language in LANGUAGES:
        with speaking(language):
            try:
                lr_at(-1, max_lr=1.0, warmup_steps=0, total_steps=1)
            except ValueError as error:
                refusals.append(str(error))
    return dict.fromkeys(refusals, _one_step_late())


def _variants():
    """Known mistakes: (description, schedule(step, max_lr, warmup, total, min_lr))."""
    ramp = say(
        "the reference ramps as max_lr * (step + 1) / (warmup_steps + 1)",
        "参考实现按 max_lr * (step + 1) / (warmup_steps + 1) 升高",
    )
    return (
        (
            mistake(
                "no warmup: the rate starts at max_lr instead of ramping up over warmup_steps",
                "没有预热：学习率一开始就是 max_lr，而不是在 warmup_steps 步内逐渐升高",
            ),
            _reference_with(warmup_fn=lambda s, m, w: m),
        ),
        (
            mistake(
                "no warmup: a cosine over all steps starting at max_lr at step 0",
                "没有预热：从第 0 步的 max_lr 开始，对全部步数做余弦退火",
            ),
            lambda s, m, w, t, lo: _cosine(s, m, w, t, lo, start=0, span=t),
        ),
        (
            mistake(
                f"warmup off by one: max_lr * step / warmup_steps gives lr 0 at step 0 (a wasted "
                f"update); {ramp}",
                f"预热差了一步：max_lr * step / warmup_steps 在第 0 步给出"
                f"学习率 0（白白浪费一次更新）；{ramp}",
            ),
            _reference_with(warmup_fn=lambda s, m, w: m * s / w),
        ),
        (
            mistake(
                f"warmup off by one: max_lr * (step + 1) / warmup_steps reaches max_lr one step "
                f"early (at warmup_steps - 1); {ramp}",
                f"预热差了一步：max_lr * (step + 1) / "
                f"warmup_steps 提前一步（在 warmup_steps - 1 处）就到达了 max_lr；{ramp}",
            ),
            _reference_with(warmup_fn=lambda s, m, w: m * (s + 1) / w),
        ),
        (
            mistake(
                "cosine does not reach min_lr: it decays to 0 (min_lr ignored)",
                "余弦退火没有停在 min_lr：它衰减到了 0（忽略了 min_lr）",
            ),
            _reference_with(decay_fn=lambda s, m, w, t, lo: _cosine(s, m, w, t, 0.0)),
        ),
        (
            mistake(
                "cosine does not reach min_lr at total_steps: the decay is spread over "
                "total_steps instead of total_steps - warmup_steps",
                "余弦退火在 total_steps 时没有到达 min_lr：衰减分摊到了 total_steps 步上，"
                "而不是 total_steps - warmup_steps 步",
            ),
            _reference_with(decay_fn=lambda s, m, w, t, lo: _cosine(s, m, w, t, lo, span=t)),
        ),
        (
            mistake(
                "cosine does not stay at min_lr after total_steps: it rises again (clamp the step)",
                "total_steps 之后学习率没有停在 min_lr：它又升上去了（请对 step 做截断）",
            ),
            _reference_with(decay_fn=lambda s, m, w, t, lo: _cosine(s, m, w, t, lo, clamp=False)),
        ),
        (
            mistake(
                "linear decay instead of cosine: the rate falls on a straight line from max_lr to "
                "min_lr",
                "用了线性衰减而不是余弦退火：学习率从 max_lr 沿直线降到 min_lr",
            ),
            _reference_with(decay_fn=_linear_decay),
        ),
        (_one_step_late(), _shifted(-1)),
        (
            mistake(
                "off by one step: step s gets the rate of step s + 1 (the schedule runs one "
                "step ahead; the steps count from 0)",
                "差了一步：第 s 步用的是第 s + 1 步的学习率（调度提前了一步；步数从 0 开始数）",
            ),
            _shifted(1),
        ),
    )


def _hint() -> str:
    return say(
        "warmup: max_lr * (step + 1) / (warmup_steps + 1) for step < warmup_steps; then "
        "min_lr + 0.5 * (max_lr - min_lr) * (1 + cos(pi * progress)) with progress = "
        "(step - warmup_steps) / (total_steps - warmup_steps); min_lr from total_steps on",
        "预热：step < warmup_steps 时为 max_lr * (step + 1) / (warmup_steps + 1)；之后为 "
        "min_lr + 0.5 * (max_lr - min_lr) * (1 + cos(pi * progress))，其中 progress = "
        "(step - warmup_steps) / (total_steps - warmup_steps)；从 total_steps 起保持 min_lr",
    )


def _as_float(chk: Checker, case: str, step: int, value) -> float:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or (
        not isinstance(value, (int, float)) and not hasattr(value, "__float__")
    ):
        chk.fail(
            case,
            say(
                f"at step {step} your function returned a {type(value).__name__}, expected a float",
                f"第 {step} 步时你的函数返回了 {type(value).__name__}，应返回 float",
            ),
            hint=say(
                "return a Python number, e.g. float(...)", "返回一个 Python 数值，例如 float(...)"
            ),
        )
    value = float(value)
    if not math.isfinite(value):
        chk.fail(
            case,
            say(
                f"at step {step} your function returned {value}",
                f"第 {step} 步时你的函数返回了 {value}",
            ),
            looks_like=mistake("a division by zero or an overflow", "除以了零，或数值溢出"),
            hint=_hint(),
        )
    return value


def _matches(got: list[float], want: list[float]) -> bool:
    return all(
        math.isclose(g, w, rel_tol=1e-6, abs_tol=1e-12) for g, w in zip(got, want, strict=True)
    )


def check_lr_schedule(fn) -> None:
    """Check ``fn(step, *, max_lr, warmup_steps, total_steps, min_lr=0.0) -> float``.

    The reference is ``tfcourse.train.optim.lr_at``: for ``step < warmup_steps`` the rate
    is ``max_lr * (step + 1) / (warmup_steps + 1)``; from ``warmup_steps`` to
    ``total_steps`` a half cosine from ``max_lr`` to ``min_lr``; after that ``min_lr``.
    Compared at every step of three settings (with and without warmup, nonzero and
    default ``min_lr``, steps past ``total_steps``). Names the mistake when it is a
    known one (no warmup, warmup off by one, the whole schedule one step off, as
    ``step - 1`` or ``step + 1``, cosine not reaching ``min_lr``, linear decay instead of
    cosine).
    """
    require_function("check_lr_schedule", fn)
    with Checker("lr_at") as chk:
        negative_step = _negative_step()
        for case, kwargs, steps in _cases():
            got = []
            for step in steps:
                value = chk.call(
                    case,
                    say(f"your function at step {step}", f"第 {step} 步运行你的函数"),
                    fn,
                    step,
                    known=negative_step,
                    **kwargs,
                )
                got.append(_as_float(chk, case, step, value))
            full = {"min_lr": 0.0, **kwargs}
            want = [lr_at(step, **full) for step in steps]
            if not _matches(got, want):
                args = (full["max_lr"], full["warmup_steps"], full["total_steps"], full["min_lr"])
                looks = next(
                    (
                        description
                        for description, variant in _variants()
                        if _matches(got, [variant(s, *args) for s in steps])
                    ),
                    None,
                )
                if looks is None and "min_lr" not in kwargs:
                    fallback = [lr_at(s, **{**full, "min_lr": full["max_lr"] / 10}) for s in steps]
                    if _matches(got, fallback):
                        looks = say("min_lr does not default to 0.0", "min_lr 的默认值不是 0.0")
                first = next(
                    i
                    for i, (g, w) in enumerate(zip(got, want, strict=True))
                    if not math.isclose(g, w, rel_tol=1e-6, abs_tol=1e-12)
                )
                step = list(steps)[first]
                rate, wanted = fmt(got[first], 6), fmt(want[first], 6)
                chk.fail(
                    case,
                    say(
                        f"at step {step} your rate is {rate}, expected {wanted}",
                        f"第 {step} 步时你的学习率是 {rate}，应为 {wanted}",
                    ),
                    looks_like=looks,
                    hint=_hint(),
                )
            chk.ok()
