"""Check for notebook 08: ``estimate_loss``, the held-out loss a training run reports.

The learner's ``estimate_loss(model, batches)`` returns the mean loss of a model over fixed
batches, with the model in eval mode, without gradients, and back in its mode afterwards. The
model is an ``InferenceProbe``, which refuses training mode and gradients, each with a
message this check turns into a named mistake; the value is compared with the reference's,
and when they differ the same evaluation with one known mistake (``MISTAKES``) is tried.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..language import say
from ..nn.config import GPTConfig
from ..runtime import fmt
from ..train.inference_probe import GRADIENTS_ON, TRAINING_MODE, InferenceProbe
from ._harness import Checker, Mistakes, mistake, require_function
from .cases import case_int, case_seed

CONFIG = GPTConfig(vocab_size=16, max_seq_len=16, n_layers=1, n_heads=1, d_model=8)


def _mistakes() -> dict[str, str]:
    return {
        "sum": mistake(
            "the batches' losses are summed, not averaged: divide by the number of batches",
            "把各批次的损失加起来了，而没有取平均：要除以批次数",
        ),
        "last-batch": mistake(
            "only the last batch's loss is returned: average over all of them",
            "只返回了最后一个批次的损失：应对所有批次取平均",
        ),
        "targets-not-shifted": mistake(
            "the targets are the inputs (batch[:, :-1]): the target of position t is the next "
            "token, batch[:, 1:]",
            "目标用的是输入本身（batch[:, :-1]）：位置 t 的目标是下一个词元，即 batch[:, 1:]",
        ),
        "token-sum": mistake(
            "each batch's loss is summed over its tokens (reduction='sum'): the loss per token "
            "is the mean",
            "每个批次的损失是对词元求和（reduction='sum'）：每个词元的损失应取平均",
        ),
    }


def _refusals() -> dict[str, str]:
    """Errors the probe raises, and the mistake each one means."""
    return {
        TRAINING_MODE: mistake(
            "model.eval() is never called: the loss is measured with dropout on",
            "从未调用 model.eval()：是在 dropout 开着的情况下测的损失",
        ),
        GRADIENTS_ON: mistake(
            "no torch.no_grad(): every batch builds an autograd graph for nothing",
            "没有用 torch.no_grad()：每个批次都白白建一张自动求导的计算图",
        ),
    }


MISTAKES = Mistakes(_mistakes)
REFUSALS = Mistakes(_refusals)


def _estimate(model, batches, mistake_key="") -> float:
    """The reference evaluation, or the same with one of ``MISTAKES`` (by key) made."""
    was_training = model.training
    model.eval()
    losses = []
    with torch.no_grad():
        for batch in batches:
            inputs = batch[:, :-1]
            targets = inputs if mistake_key == "targets-not-shifted" else batch[:, 1:]
            logits = model(inputs)  # (B, T, V)
            reduction = "sum" if mistake_key == "token-sum" else "mean"
            losses.append(
                float(F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction=reduction))
            )
    model.train(was_training)
    if mistake_key == "sum":
        return sum(losses)
    if mistake_key == "last-batch":
        return losses[-1]
    return sum(losses) / len(losses)


def _hint() -> str:
    return say(
        "remember model.training, model.eval(); under torch.no_grad() the cross-entropy of "
        "model(batch[:, :-1]) against batch[:, 1:] for every batch, their mean as a float; "
        "then model.train(was_training)",
        "先记下 model.training，调用 model.eval()；在 torch.no_grad() 下对每个批次计算 "
        "model(batch[:, :-1]) 与 batch[:, 1:] 的交叉熵，返回它们的平均值（float）；"
        "最后 model.train(was_training)",
    )


def check_estimate_loss(fn) -> None:
    """Check ``fn(model, batches) -> float``.

    ``batches (n, B, T + 1)`` holds token ids. The function returns the mean over the ``n``
    batches of the mean cross-entropy of ``model(batch[:, :-1]) (B, T, V)`` against
    ``batch[:, 1:]``, as a number (a float or a 0-d tensor). The model runs in eval mode
    under ``torch.no_grad()`` and is put back in the mode it came in.

    Sub-checks (3): 3 batches with the model arriving in training mode; 1 batch with the
    model arriving in eval mode; each model back in its mode and the batches unchanged.
    Names the mistake when it is a known one (``MISTAKES``, and the probe's refusals).
    """
    require_function("check_estimate_loss", fn)
    name = getattr(fn, "__name__", "fn")
    with Checker("estimate_loss") as chk:
        gen = chk.generator(90)
        after = []
        for number, (n_batches, training) in enumerate(((3, True), (1, False))):
            batch_size, T = case_int(91 + number, 4, 2, 6), case_int(93 + number, 9, 5, 12)
            case = say(
                f"{n_batches} batch(es) of {batch_size} x {T} tokens, the model in "
                f"{'training' if training else 'eval'} mode",
                f"{n_batches} 个 {batch_size} x {T} 词元的批次，模型处于"
                f"{'训练模式' if training else ' eval 模式'}",
            )
            torch.manual_seed(case_seed(95 + number))
            model = InferenceProbe(CONFIG, purpose="evaluating").to(chk.device).train(training)
            batches = torch.randint(
                CONFIG.vocab_size, (n_batches, batch_size, T + 1), generator=gen
            )
            batches = batches.to(chk.device)
            want = _estimate(model, batches)
            seen = batches.clone()
            result = chk.call(
                case,
                say(f"calling your {name}(model, batches)", f"调用你的 {name}(model, batches)"),
                fn,
                model,
                seen,
                known=REFUSALS,
                hint=_hint(),
            )
            got = _number(chk, case, result)
            if not math.isclose(got, want, rel_tol=1e-5, abs_tol=1e-6):
                looks = next(
                    (
                        text
                        for key, text in MISTAKES.items()
                        if math.isclose(got, _estimate(model, batches, key), rel_tol=1e-5)
                    ),
                    None,
                )
                chk.fail(
                    case,
                    say(
                        f"returned {fmt(got, 6)}, expected {fmt(want, 6)}",
                        f"返回了 {fmt(got, 6)}，应为 {fmt(want, 6)}",
                    ),
                    looks_like=looks,
                    hint=_hint(),
                )
            after.append((case, model, training, batches, seen))
            chk.ok()
        for case, model, training, batches, seen in after:
            chk.kept_mode(case, model, training, hint=_hint())
            chk.unchanged(case, "batches", batches, seen)
        chk.ok()


def _number(chk: Checker, case: str, result) -> float:
    if isinstance(result, torch.Tensor) and result.numel() == 1:
        return float(result)
    if isinstance(result, (int, float)) and not isinstance(result, bool):
        return float(result)
    chk.fail(
        case,
        say(
            f"returned {type(result).__name__}, expected one number (the mean loss)",
            f"返回了 {type(result).__name__}，应返回一个数（平均损失）",
        ),
        hint=_hint(),
    )
    raise AssertionError  # unreachable: fail raises
