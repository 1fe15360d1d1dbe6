"""Gradient probes for the pre-LN vs post-LN experiments (the demo, notebook 06).

A probe runs one forward and backward pass of a ``GPT`` and reports gradient
norms: at the embedding output (the input of the first block) and per block.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .config import GPTConfig
from .model import GPT

LOSSES = ("lm", "sum")


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


def gradient_probe(model: GPT, idx: torch.Tensor, targets: torch.Tensor | None = None,
                   loss: str = "lm") -> dict:
    """One forward/backward pass; returns gradient norms.

    Args:
        model: a ``GPT`` (its gradients are zeroed first).
        idx: token ids ``(B, T)``; targets ``(B, T)`` for ``loss="lm"``.
        loss: ``"lm"`` (next-token cross-entropy of the logits) or ``"sum"``
            (the sum of the final-norm output, as in the lesson's demo: constant
            whenever that output is normalized, so its gradient is ~0).

    Returns:
        ``{"loss": float, "embedding": float, "blocks": list[float], "output_shape": tuple}``
        where ``embedding`` is the norm of d loss / d (embedding output), shape (B, T, D).
    """
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    if loss == "lm" and targets is None:
        raise ValueError("loss='lm' needs targets (B, T), got None")
    model.zero_grad(set_to_none=True)
    captured = {}

    def keep_input(module, args):
        args[0].retain_grad()
        captured["x"] = args[0]

    handle = model.blocks[0].register_forward_pre_hook(keep_input)
    try:
        if loss == "lm":
            logits = model(idx)
            output_shape = tuple(logits.shape)
            value = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        else:
            hidden = _final_hidden(model, idx)
            output_shape = tuple(hidden.shape)
            value = hidden.sum()
        value.backward()
    finally:
        handle.remove()
    return {"loss": value.item(), "embedding": float(captured["x"].grad.norm()),
            "blocks": block_grad_norms(model), "output_shape": output_shape}


def _final_hidden(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    """The final norm's output ``(B, T, D)``: the model without its LM head."""
    captured = {}
    handle = model.final_norm.register_forward_hook(lambda m, a, out: captured.setdefault("h", out))
    try:
        model(idx)
    finally:
        handle.remove()
    return captured["h"]
