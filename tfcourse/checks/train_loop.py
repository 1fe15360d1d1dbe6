"""Check for notebook 08: the training loop the learner writes.

The learner's ``fn(model, optimizer, batches, *, max_lr, warmup_steps, max_norm)`` trains
``model`` in place with the optimizer it is given and returns the loss of every step. The
check runs the course's loop (``_loop``) on a copy of the same model, with a twin of the same
optimizer, on the same batches, and compares the losses step by step: a loss at step s
depends on every update before it, so a mistake anywhere in the loop shows in the losses
after it. When they differ, the same loop with one known mistake (``MISTAKES``) is run too,
and the one that reproduces the learner's losses is named.

The optimizer is the caller's choice, not the loop's: each case passes another one (AdamW
with decay groups, plain AdamW, SGD with momentum), so any correct loop passes whatever
optimizer it is handed, and a loop that quietly builds its own, or sets the rate of one
param group only, is caught.

Everything crosses the sealed grader's boundary as data: the model and its optimizer by
value (rebuilt in the worker, the model's mode sent back), the batches as one tensor, the
losses as numbers.
"""

from __future__ import annotations

import copy
import math

import torch

from ..language import say
from ..nn.config import GPTConfig
from ..nn.model import GPT
from ..runtime import fmt
from ..train.loop import lm_loss
from ..train.optim import configure_optimizer, lr_at
from ._harness import Checker, Mistakes, mistake, require_function
from .cases import case_int, case_seed

CONFIG = GPTConfig(vocab_size=24, max_seq_len=8, n_layers=2, n_heads=2, d_model=16)
MAX_LR, WARMUP, WEIGHT_DECAY = 1e-2, 2, 0.1


# The optimizers the cases hand the loop, one per case (named by ``_optimizer_name``).
OPTIMIZERS = (
    lambda model: configure_optimizer(model, lr=MAX_LR, weight_decay=WEIGHT_DECAY),
    lambda model: torch.optim.AdamW(model.parameters(), lr=MAX_LR),
    lambda model: torch.optim.SGD(model.parameters(), lr=MAX_LR, momentum=0.9),
)


def _optimizer_name(number: int) -> str:
    return (
        say("AdamW with decay groups", "分两组（衰减 / 不衰减）的 AdamW"),
        say("plain AdamW", "普通 AdamW"),
        say("SGD with momentum", "带动量的 SGD"),
    )[number]


# The optimizers a loop that builds its own (``"own-optimizer"``) is likeliest to build:
# ``own(model, lr)``. Its learning rate is the schedule's anyway, set at every step.
OWN_OPTIMIZERS = (
    lambda model, lr: torch.optim.AdamW(model.parameters(), lr=lr),
    lambda model, lr: torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=WEIGHT_DECAY),
    lambda model, lr: torch.optim.AdamW(
        model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=WEIGHT_DECAY
    ),
    lambda model, lr: configure_optimizer(model, lr=lr),
    lambda model, lr: torch.optim.Adam(model.parameters(), lr=lr),
)


def _loop(
    model,
    optimizer,
    batches,
    *,
    max_lr,
    warmup_steps,
    max_norm=math.inf,
    mistake: str = "",
    own=OWN_OPTIMIZERS[0],
) -> tuple[list[float], list[float]]:
    """The course's loop, or the same with one of ``MISTAKES`` (by key) made: the loss of
    every step and its gradient norm before clipping. ``own(model, lr)``: the optimizer of
    ``"own-optimizer"``."""
    steps, accum = batches.shape[:2]
    if mistake == "own-optimizer":
        optimizer = own(model, max_lr)
    model.train()

    def clip():
        if mistake == "clip-by-value":
            torch.nn.utils.clip_grad_value_(model.parameters(), max_norm)
            return
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)))

    losses, norms = [], []
    for step in range(steps):
        schedule_step = 0 if mistake == "per-epoch" else step
        lr = lr_at(
            schedule_step,
            max_lr=max_lr,
            warmup_steps=warmup_steps,
            total_steps=steps,
            min_lr=max_lr / 10,
        )
        if mistake != "no-schedule":
            groups = optimizer.param_groups
            for group in groups[:1] if mistake == "first-group-only" else groups:
                group["lr"] = lr
        if mistake not in ("no-zero-grad", "zero-grad-after-backward", "zero-grad-after-step"):
            optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for micro in batches[step]:
            if mistake == "zero-grad-per-micro-batch":
                optimizer.zero_grad(set_to_none=True)
            loss = lm_loss(model(micro[:, :-1]), micro[:, 1:])
            (loss if mistake in ("sum", "sum-backward") else loss / accum).backward()
            total += loss.item()
        if mistake == "zero-grad-after-backward":
            optimizer.zero_grad(set_to_none=True)
        if mistake != "clip-after-step":
            clip()
        optimizer.step()
        if mistake == "clip-after-step":
            clip()
        if mistake == "zero-grad-after-step":
            optimizer.zero_grad(set_to_none=True)
        losses.append(total if mistake == "sum" else total / accum)
    return losses, norms


def _mistakes() -> dict[str, str]:
    return {
        "no-zero-grad": mistake(
            "no optimizer.zero_grad(): each step adds its gradient to all the "
            "earlier ones (and to the stale gradient the model came with)",
            "没有调用 optimizer.zero_grad()：每一步的梯度都叠加在之前所有步的梯度上"
            "（还有模型带进来的旧梯度）",
        ),
        "zero-grad-per-micro-batch": mistake(
            "optimizer.zero_grad() inside the loop over micro-batches: only the last "
            "micro-batch's gradient is left for the step",
            "在遍历微批次的循环里调用了 optimizer.zero_grad()："
            "一步结束时只剩下最后一个微批次的梯度",
        ),
        "zero-grad-after-backward": mistake(
            "optimizer.zero_grad() between backward() and optimizer.step(): the step sees no "
            "gradient",
            "在 backward() 和 optimizer.step() 之间调用了 optimizer.zero_grad()："
            "更新时已经没有梯度了",
        ),
        "zero-grad-after-step": mistake(
            "optimizer.zero_grad() after optimizer.step() instead of before the step's backward "
            "passes: the first step adds the stale gradient the model came with to its own",
            "optimizer.zero_grad() 放在了 optimizer.step() 之后，而不是这一步的反向传播之前："
            "第一步把模型带进来的旧梯度也加到了自己的梯度上",
        ),
        "clip-after-step": mistake(
            "the gradient is clipped after optimizer.step() (or not at all): "
            "the step used the unclipped gradient",
            "梯度裁剪放在了 optimizer.step() 之后（或者根本没有裁剪）：这一步用的是未裁剪的梯度",
        ),
        "clip-by-value": mistake(
            "the gradient is clipped by value (clip_grad_value_: each entry to at most max_norm) "
            "instead of by its global norm (clip_grad_norm_(model.parameters(), max_norm), "
            "which scales the whole gradient down)",
            "梯度是按值裁剪的（clip_grad_value_：每个元素限制在 max_norm 以内），而不是按整体"
            "范数裁剪（clip_grad_norm_(model.parameters(), max_norm)，它把整个梯度按比例缩小）",
        ),
        "per-epoch": mistake(
            "the learning rate is set once, not at every step (the schedule is "
            "stepped per epoch): every step uses the rate of step 0",
            "学习率只设置了一次，而不是每一步都设置（学习率调度按 epoch 而不是按步推进）："
            "每一步用的都是第 0 步的学习率",
        ),
        "no-schedule": mistake(
            "the learning rate is never set: every step uses max_lr, with no warmup and no decay",
            "从未设置学习率：每一步都用 max_lr，既没有预热也没有衰减",
        ),
        "sum": mistake(
            "the micro-batch losses are summed, not averaged over the accumulation steps "
            "(each backward() should get loss / number of micro-batches, and the step's "
            "loss is their mean)",
            "微批次的损失是求和而不是在累积步上取平均（每次 backward() 应该用 "
            "loss / 微批次个数，这一步报告的损失是它们的平均值）",
        ),
        "sum-backward": mistake(
            "each micro-batch's whole loss is backpropagated (loss.backward(), not "
            "(loss / n_micro).backward()) while the mean is reported: the gradient is the sum's, "
            "n_micro times the mean's",
            "每个微批次反向传播的是它的整个损失（loss.backward()，而不是 "
            "(loss / n_micro).backward()），报告的却是平均值：梯度成了总和的梯度，"
            "是平均值梯度的 n_micro 倍",
        ),
        "first-group-only": mistake(
            "the learning rate is set in optimizer.param_groups[0] only: the other groups (here "
            "the parameters without weight decay) keep the rate the optimizer was built with",
            "学习率只写进了 optimizer.param_groups[0]：其余参数组（这里是不做权重衰减的参数）"
            "一直用优化器创建时的学习率",
        ),
        "own-optimizer": mistake(
            "the loop builds its own AdamW (or Adam) instead of using the optimizer it was given "
            "(the caller chooses the optimizer: its groups, betas and weight decay)",
            "循环自己新建了一个 AdamW（或 Adam），而没有用传进来的优化器（优化器由调用者决定："
            "参数分组、betas 和权重衰减都由它定）",
        ),
    }


MISTAKES = Mistakes(_mistakes)


def _hint() -> str:
    return say(
        "with the optimizer you are given, per step: set every param group's lr to "
        "lr_at(step, ...), zero_grad(), for each "
        "micro-batch (loss / n_micro).backward(), clip_grad_norm_(model.parameters(), "
        "max_norm), optimizer.step(); call model.train() once before the loop",
        "用传进来的优化器，每一步：把每个参数组的 lr 设为 lr_at(step, ...)，zero_grad()，"
        "对每个微批次执行 "
        "(loss / 微批次个数).backward()，clip_grad_norm_(model.parameters(), max_norm)，"
        "optimizer.step()；循环开始前调用一次 model.train()",
    )


def _models(seed: int, device, dtype):
    """``fresh()``: a new copy of one GPT in eval mode, with a stale gradient on every
    parameter (both are the learner's to deal with). Every copy has the same weights: they
    are drawn once, and copied, never drawn again from the process-wide generator, which
    another thread (another learner's check in a class run) may draw from meanwhile."""
    torch.manual_seed(seed)
    weights = GPT(CONFIG).to(device, dtype).eval()

    def fresh() -> GPT:
        model = copy.deepcopy(weights)
        gen = torch.Generator().manual_seed(seed)
        for parameter in model.parameters():
            parameter.grad = torch.randn(parameter.shape, generator=gen).to(device, dtype)
        return model

    return fresh


def _losses(chk: Checker, case: str, result, steps: int) -> list[float]:
    if isinstance(result, torch.Tensor):
        result = result.tolist()
    if not isinstance(result, (list, tuple)) or len(result) != steps:
        chk.fail(
            case,
            say(
                f"returned {type(result).__name__}"
                + (f" of length {len(result)}" if hasattr(result, "__len__") else "")
                + f", expected a list of {steps} losses, one per step",
                f"返回了 {type(result).__name__}"
                + (f"（长度 {len(result)}）" if hasattr(result, "__len__") else "")
                + f"，应返回一个列表，每步一个损失，共 {steps} 个",
            ),
            hint=say(
                "append loss.item() (the step's mean) to a list and return it",
                "把 loss.item()（这一步的平均损失）追加到列表里并返回",
            ),
        )
    try:
        return [float(value) for value in result]
    except (TypeError, ValueError, RuntimeError):
        chk.fail(
            case,
            say(
                "the losses must be numbers (floats or 0-d tensors)",
                "损失必须是数值（float 或 0 维张量）",
            ),
        )


def _calling(name: str, max_norm: float | None = None) -> str:
    """What the check does when it calls the learner's loop (``max_norm``: once more, to tell
    two mistakes apart)."""
    if max_norm is None:
        return say(
            f"calling your {name}(model, optimizer, batches, ...)",
            f"调用你的 {name}(model, optimizer, batches, ...)",
        )
    return say(
        f"calling your {name}(model, optimizer, batches, ...) again with max_norm={fmt(max_norm)}",
        f"再次调用你的 {name}(model, optimizer, batches, ...)，max_norm={fmt(max_norm)}",
    )


# Clipping by value (to max_norm) usually bites at no step of the cases: no single entry of
# a gradient comes near the norm they clip to, so it gives the losses of no clipping at all.
CLIPPING = ("clip-by-value", "clip-after-step")


def _known_mistake(got: list[float], setting: dict, smallest_norm: float, run, learner):
    """The key of the known mistake (``MISTAKES``) that reproduces the learner's losses
    ``got``, or None. ``run(setting, key, own)`` replays a mistake; where both of
    ``CLIPPING`` reproduce ``got``, ``learner(setting, again=True)`` runs the learner's loop
    once more with ``max_norm`` a hundredth of the smallest gradient norm, where every step
    clips, by value and by norm alike, and the two part."""

    def reproduces(key: str, setting: dict = setting, losses: list[float] = got) -> bool:
        if key == "own-optimizer":
            return any(_close(losses, run(setting, key, own)[0]) for own in OWN_OPTIMIZERS)
        return _close(losses, run(setting, key)[0])

    found = next((key for key in MISTAKES if reproduces(key)), None)
    if found in CLIPPING and all(reproduces(key) for key in CLIPPING):
        tight = {**setting, "max_norm": smallest_norm / 100}
        again = learner(tight, again=True)[2]
        found = next((key for key in CLIPPING if reproduces(key, tight, again)), found)
    return found


def _close(got: list[float], want: list[float]) -> bool:
    return all(
        math.isclose(g, w, rel_tol=1e-6, abs_tol=1e-9) for g, w in zip(got, want, strict=True)
    )


def check_train_loop(fn) -> None:
    """Check ``fn(model, optimizer, batches, *, max_lr, warmup_steps, max_norm) -> list[float]``.

    ``batches (steps, n_micro, B, T + 1)`` holds token ids: step s trains on the
    micro-batches ``batches[s]``, each split into inputs ``[:, :-1]`` and targets
    ``[:, 1:]``. The function trains ``model`` (a ``tfcourse.GPT``) in place with
    ``optimizer`` (built by the caller over the model's parameters): at step s the learning
    rate ``lr_at(s, max_lr=max_lr, warmup_steps=warmup_steps, total_steps=steps,
    min_lr=max_lr / 10)`` in every param group; one ``backward()`` per micro-batch of its
    loss divided by the number of micro-batches; the gradient norm clipped to
    ``max_norm``; one optimizer step. It returns each step's loss (the mean over its
    micro-batches, before the update). The model arrives in eval mode and with stale
    gradients.

    Sub-checks (4): 2 micro-batches per step with AdamW in two param groups (decay and no
    decay); 1 micro-batch per step with a plain AdamW; 2 micro-batches with SGD and
    momentum; the model left in train mode and the batches unchanged. ``max_norm`` is set
    between the gradient norms the steps see, so that clipping matters at some steps and
    not at others. Names the mistake when it is a known one (``MISTAKES``). Where the
    losses are those of no clipping, the function is called once more with ``max_norm`` a
    hundredth of the smallest gradient norm: clipping by value (``clip_grad_value_``)
    bites there, and is told from no clipping (or clipping after the step).
    """
    require_function("check_train_loop", fn)
    name = getattr(fn, "__name__", "fn")
    with Checker("train_loop") as chk:
        dtype = torch.float64  # the losses compared to the last digits
        gen = chk.generator(11)
        calls = []
        for number, (accum, make_optimizer) in enumerate(zip((2, 1, 2), OPTIMIZERS, strict=True)):
            steps = case_int(20 + number, 6, 4, 9)
            case = say(
                f"{steps} steps of {accum} micro-batch(es) of 2 x 8 tokens, "
                f"{_optimizer_name(number)}",
                f"{steps} 步，每步 {accum} 个 2 x 8 词元的微批次，{_optimizer_name(number)}",
            )
            batches = torch.randint(CONFIG.vocab_size, (steps, accum, 2, 9), generator=gen)
            batches = batches.to(chk.device)
            seed = case_seed(30 + number)

            fresh = _models(seed, chk.device, dtype)

            def run(
                setting,
                mistake="",
                own=OWN_OPTIMIZERS[0],
                make_optimizer=make_optimizer,
                batches=batches,
                fresh=fresh,
            ):
                model = fresh()
                optimizer = make_optimizer(model)
                return _loop(model, optimizer, batches, **setting, mistake=mistake, own=own)

            def learner(
                setting,
                again=False,
                make_optimizer=make_optimizer,
                batches=batches,
                fresh=fresh,
                case=case,
                steps=steps,
            ):
                """``(model, batches, losses)`` of the learner's loop on a fresh copy."""
                model, seen = fresh(), batches.clone()
                calling = _calling(name, setting["max_norm"] if again else None)
                result = chk.call(case, calling, fn, model, make_optimizer(model), seen, **setting)
                return model, seen, _losses(chk, case, result, steps)

            setting = {"max_lr": MAX_LR, "warmup_steps": WARMUP}
            # max_norm between the gradient norms of the steps: clipping bites at some only.
            norms = run(setting)[1]
            setting["max_norm"] = sorted(norms)[len(norms) // 2]
            want = run(setting)[0]
            model, seen, got = learner(setting)
            if not _close(got, want):
                key = _known_mistake(got, setting, min(norms), run, learner)
                looks = MISTAKES[key] if key else None
                first = next(
                    i
                    for i, (g, w) in enumerate(zip(got, want, strict=True))
                    if not math.isclose(g, w, rel_tol=1e-6, abs_tol=1e-9)
                )
                # enough digits to show the difference (at least 6, at most float64's 17)
                digits = next(
                    (n for n in range(6, 17) if fmt(got[first], n) != fmt(want[first], n)), 17
                )
                have, wanted = fmt(got[first], digits), fmt(want[first], digits)
                chk.fail(
                    case,
                    say(
                        f"the loss of step {first} is {have}, expected {wanted}",
                        f"第 {first} 步的损失是 {have}，应为 {wanted}",
                    ),
                    looks_like=looks,
                    hint=_hint(),
                )
            calls.append((case, model, batches, seen))
            chk.ok()
        for case, model, batches, seen in calls:
            if not model.training:
                chk.fail(
                    case,
                    say(
                        "the model is still in eval mode after training",
                        "训练结束后模型仍处于 eval 模式",
                    ),
                    looks_like=mistake(
                        "model.train() is never called: in eval mode dropout is "
                        "off, so a model with dropout would train without it",
                        "从未调用 model.train()：eval 模式下 dropout 是关闭的，"
                        "带 dropout 的模型就会在没有 dropout 的情况下训练",
                    ),
                    hint=say(
                        "call model.train() before the loop", "在循环开始前调用 model.train()"
                    ),
                )
            chk.unchanged(case, "batches", batches, seen)
        chk.ok()
