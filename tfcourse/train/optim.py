"""The optimizer and its schedule: AdamW without decay on 1-D parameters; warmup, then cosine."""

from __future__ import annotations

import math

import torch
from torch import nn

from ..language import say
from ..nn import validate


def lr_at(
    step: int, *, max_lr: float, warmup_steps: int, total_steps: int, min_lr: float = 0.0
) -> float:
    """Learning rate of optimizer step ``step`` (0-based): linear warmup, then cosine decay.

    - ``step < warmup_steps``: ``max_lr * (step + 1) / (warmup_steps + 1)``, a straight
      line that starts above 0 (a step at lr 0 would be wasted) and reaches
      ``max_lr`` at ``step == warmup_steps``.
    - ``warmup_steps <= step <= total_steps``: half a cosine from ``max_lr`` (at
      ``warmup_steps``) down to ``min_lr`` (at ``total_steps``).
    - ``step > total_steps``: ``min_lr``.

    ``warmup_steps=0`` means no warmup: the first step already uses ``max_lr``.
    """
    for name, value in (("step", step), ("warmup_steps", warmup_steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(
                say(
                    f"{name} must be an int >= 0, got {value!r}",
                    f"{name} 必须是 >= 0 的 int，实际是 {value!r}",
                )
            )
    validate.positive_int("total_steps", total_steps)
    if warmup_steps > total_steps:
        got = f"warmup_steps={warmup_steps}, total_steps={total_steps}"
        raise ValueError(
            say(
                f"warmup_steps must be <= total_steps, got {got}",
                f"warmup_steps 必须 <= total_steps，实际是 {got}",
            )
        )
    if not (0.0 <= min_lr <= max_lr):
        got = f"min_lr={min_lr}, max_lr={max_lr}"
        raise ValueError(
            say(
                f"need 0 <= min_lr <= max_lr, got {got}",
                f"要求 0 <= min_lr <= max_lr，实际是 {got}",
            )
        )
    if step < warmup_steps:
        return max_lr * (step + 1) / (warmup_steps + 1)
    if step >= total_steps:
        return min_lr
    progress = (step - warmup_steps) / (total_steps - warmup_steps)  # 0 -> 1
    return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + math.cos(math.pi * progress))


def configure_optimizer(
    model: nn.Module,
    *,
    lr: float,
    weight_decay: float = 0.1,
    betas: tuple[float, float] = (0.9, 0.95),
    eps: float = 1e-8,
):
    """AdamW with weight decay on the 2-D weights only (matrices and embeddings).

    Biases and norm gains are 1-D: decaying them pulls a LayerNorm's scale
    towards 0 and a bias towards 0 for no benefit, so they get ``weight_decay=0``.
    """
    if not isinstance(model, nn.Module):
        got = type(model).__name__
        raise TypeError(
            say(f"model must be an nn.Module, got {got}", f"model 必须是 nn.Module，实际是 {got}")
        )
    validate.positive_float("lr", lr)
    if weight_decay < 0:
        raise ValueError(
            say(
                f"weight_decay must be >= 0, got {weight_decay}",
                f"weight_decay（权重衰减）必须 >= 0，实际是 {weight_decay}",
            )
        )
    params = [p for p in model.parameters() if p.requires_grad]  # tied weights appear once
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)
