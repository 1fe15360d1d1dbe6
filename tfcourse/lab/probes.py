"""Gradient probes for the pre-LN vs post-LN experiments (the demo, notebook 06).

A probe runs one forward and backward pass of a ``GPT`` and reports gradient
norms: at the embedding output (the input of the first block) and per block.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from ..language import say
from ..nn.config import GPTConfig
from ..nn.model import GPT

LOSSES = ("lm", "sum")  # the losses notebook 06 and its widgets offer
# The output each summed loss adds up: "sum" the final norm's (notebook 06), "stack_sum" the
# last block's, before the final norm (the lesson's ``stack(x).sum()``, used by the demo).
_SUMMED = {"sum": lambda model: model.final_norm, "stack_sum": lambda model: model.blocks[-1]}


def twin_models(config: GPTConfig, seed: int = 0) -> tuple[GPT, GPT]:
    """A pre-LN and a post-LN ``GPT`` with identical initial weights.

    ``pre_ln`` changes only the order of operations, not the parameters, so the
    same seed gives the same tensors; the post-LN copy loads the pre-LN state to
    make that certain.
    """
    torch.manual_seed(seed)
    pre = GPT(config.replace(pre_ln=True))
    post = GPT(config.replace(pre_ln=False))
    post.load_state_dict(pre.state_dict(), strict=True)
    return pre, post


def block_grad_norms(model: GPT) -> list[float]:
    """L2 norm of the gradient of each block's parameters, first block first."""
    norms = []
    for block in model.blocks:
        grads = [p.grad.flatten() for p in block.parameters() if p.grad is not None]
        norms.append(float(torch.cat(grads).norm()) if grads else 0.0)
    return norms


def gradient_probe(
    model: GPT, idx: torch.Tensor, targets: torch.Tensor | None = None, loss: str = "lm"
) -> dict:
    """One forward/backward pass; returns gradient norms.

    Args:
        model: a ``GPT`` (its gradients are zeroed first).
        idx: token ids ``(B, T)``; targets ``(B, T)`` for ``loss="lm"``.
        loss: ``"lm"`` (next-token cross-entropy of the logits), ``"sum"`` (the sum
            of the final-norm output: constant whenever that output is normalized,
            so its gradient is ~0) or ``"stack_sum"`` (the lesson's probe, as in
            ``tfcourse demo --loss sum``: the sum of the last block's output, before
            the final norm and the head).

    Returns:
        ``{"loss": float, "embedding": float, "blocks": list[float], "output_shape": tuple}``
        where ``embedding`` is the norm of d loss / d (embedding output), shape (B, T, D).
    """
    if loss != "lm" and loss not in _SUMMED:
        raise ValueError(
            say(
                f"loss must be one of {LOSSES} or 'stack_sum', got {loss!r}",
                f"loss 必须是 {LOSSES} 之一或 'stack_sum'，实际是 {loss!r}",
            )
        )
    if loss == "lm" and targets is None:
        raise ValueError(
            say(
                "loss='lm' needs targets (B, T), got None",
                "loss='lm' 需要 targets (B, T)，实际是 None",
            )
        )
    model.zero_grad(set_to_none=True)
    captured = {}

    def keep_input(module, args):
        args[0].retain_grad()
        captured["x"] = args[0]

    handle = model.blocks[0].register_forward_pre_hook(keep_input)
    try:
        if loss == "lm":
            output = model(idx)
            value = F.cross_entropy(output.flatten(0, 1), targets.flatten())
        else:
            output = summed_output(model, idx, loss)
            value = output.sum()
        value.backward()
    finally:
        handle.remove()
    return {
        "loss": value.item(),
        "embedding": float(captured["x"].grad.norm()),
        "blocks": block_grad_norms(model),
        "output_shape": tuple(output.shape),
    }


def summed_output(model: GPT, idx: torch.Tensor, loss: str = "sum") -> torch.Tensor:
    """The ``(B, T, D)`` output that ``gradient_probe``'s summed ``loss`` adds up.

    ``"sum"``: the final norm's output (the model without its LM head);
    ``"stack_sum"``: the last block's output, before the final norm.
    """
    captured = {}
    handle = _SUMMED[loss](model).register_forward_hook(
        lambda m, a, out: captured.setdefault("out", out)
    )
    try:
        model(idx)
    finally:
        handle.remove()
    return captured["out"]


def roundoff_level(
    model: GPT, idx: torch.Tensor, targets: torch.Tensor | None = None, loss: str = "lm"
) -> float:
    """Largest ``|float32 - float64|`` over the norms ``gradient_probe`` reports.

    The norms are those of the embedding and of each block.

    Runs the probe on ``model`` (float32) and on a float64 copy of it with the same
    weights and tokens. Where the true gradient is 0 (``loss="sum"`` through a final
    norm) the float64 norms sit at float64's own round-off, far below float32's, so
    this is the size of the float32 round-off: a float32 norm at or below it carries
    no information. ``model``'s gradients are left as the float32 probe set them.

    Args:
        model: a float32 ``GPT`` on the CPU or CUDA (MPS has no float64); idx, targets
            ``(B, T)``; loss as in ``gradient_probe``.
    """
    if not isinstance(model, GPT):
        got = type(model).__name__
        raise TypeError(
            say(
                f"model must be a tfcourse GPT, got {got}",
                f"model 必须是 tfcourse 的 GPT，实际是 {got}",
            )
        )
    dtype = next(model.parameters()).dtype
    if dtype != torch.float32:
        raise ValueError(
            say(
                f"model must be float32 (its round-off is measured), got {dtype}",
                f"model 必须是 float32（这里测量的是它的舍入误差），实际是 {dtype}",
            )
        )
    wide = copy.deepcopy(model).double()
    probe64 = gradient_probe(wide, idx, targets, loss)
    probe32 = gradient_probe(model, idx, targets, loss)
    pairs = [
        (probe32["embedding"], probe64["embedding"]),
        *zip(probe32["blocks"], probe64["blocks"], strict=True),
    ]
    return max(abs(a - b) for a, b in pairs)
