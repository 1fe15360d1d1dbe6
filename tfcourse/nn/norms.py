"""Normalization layers written from primitives.

Both normalize each token vector on its own (over the last dimension), so they
never mix information between tokens or between sequences in a batch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..language import say
from . import validate


class LayerNorm(nn.Module):
    """Layer normalization: ``(x - mean) / sqrt(var + eps) * weight + bias``.

    The variance is the *biased* one (divide by D, not D - 1) and ``eps`` sits
    *inside* the square root, exactly as ``torch.nn.LayerNorm`` does; either
    mistake changes the output by more than float32 round-off.

    Args:
        d_model: size D of the normalized (last) dimension.
        eps: added to the variance before the square root.
        bias: learn a shift (``bias``) as well as a scale (``weight``).
        fused: compute with ``F.layer_norm`` (one kernel) instead of the primitives
            below; the same function, faster. The production path uses it.

    Shapes: ``(..., D) -> (..., D)``.
    Parameters: ``weight (D,)`` initialized to 1, ``bias (D,)`` initialized to 0.
    """

    def __init__(self, d_model: int, eps: float = 1e-5, bias: bool = True, *, fused: bool = False):
        super().__init__()
        self.fused = bool(fused)
        self.d_model = validate.positive_int("d_model", d_model)
        self.eps = validate.positive_float("eps", eps)
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if validate.needed():  # skipped inside a block or GPT: checked there
            validate.last_dim(x, self.d_model)
        if self.fused:
            return F.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
        var = (x - mean).pow(2).mean(dim=-1, keepdim=True)  # biased, (..., 1)
        x_hat = (x - mean) * torch.rsqrt(var + self.eps)  # (..., D)
        out = x_hat * self.weight
        return out + self.bias if self.bias is not None else out

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}, bias={self.bias is not None}"


class RMSNorm(nn.Module):
    """Root-mean-square normalization: ``x / sqrt(mean(x**2) + eps) * weight``.

    Unlike LayerNorm it does not subtract the mean and has no shift, which
    saves a reduction and D parameters; LLaMA-family models use it.

    Args:
        d_model: size D of the normalized (last) dimension.
        eps: added to the mean square before the square root (LLaMA uses 1e-6).
        fused: compute with ``F.rms_norm`` instead of the primitives below.

    Shapes: ``(..., D) -> (..., D)``.
    Parameters: ``weight (D,)`` initialized to 1.
    """

    def __init__(self, d_model: int, eps: float = 1e-6, *, fused: bool = False):
        super().__init__()
        self.fused = bool(fused)
        self.d_model = validate.positive_int("d_model", d_model)
        self.eps = validate.positive_float("eps", eps)
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if validate.needed():  # skipped inside a block or GPT: checked there
            validate.last_dim(x, self.d_model)
        if self.fused:
            return F.rms_norm(x, (self.d_model,), self.weight, self.eps)
        mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)
        return x * torch.rsqrt(mean_square + self.eps) * self.weight

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"


NORMS = {"layernorm": LayerNorm, "rmsnorm": RMSNorm}


def make_norm(
    kind: str, d_model: int, eps: float | None = None, bias: bool = True, fused: bool = False
) -> nn.Module:
    """Build ``LayerNorm`` or ``RMSNorm`` by name (``"layernorm"`` / ``"rmsnorm"``)."""
    validate.choice("norm", kind, NORMS)
    if kind == "layernorm":
        return LayerNorm(d_model, eps=1e-5 if eps is None else eps, bias=bias, fused=fused)
    return RMSNorm(d_model, eps=1e-6 if eps is None else eps, fused=fused)


def layernorm_backward(
    x: torch.Tensor, weight: torch.Tensor, grad_out: torch.Tensor, eps: float = 1e-5
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """LayerNorm's gradients by hand, without autograd: for
    ``y = (x - mean) / sigma * weight + bias`` per token (``sigma = sqrt(var + eps)``, ``var``
    biased) and the gradient ``grad_out = dL/dy`` arriving from above::

        g = grad_out * weight                                   # dL/dx_hat, (..., D)
        dL/dx = (g - mean(g) - x_hat * mean(g * x_hat)) / sigma  # means over the last axis
        dL/dweight = sum(grad_out * x_hat), dL/dbias = sum(grad_out)  # over all but the last

    ``mean(g)`` is the gradient through the mean, ``x_hat * mean(g * x_hat)`` the gradient
    through the variance. Shapes: ``x, grad_out (..., D)``, ``weight (D,)``; returns
    ``(grad_x (..., D), grad_weight (D,), grad_bias (D,))``.
    """
    validate.floating_tensor("weight", weight)
    if weight.dim() != 1:
        raise ValueError(
            say(
                f"weight must have shape (D,), got {tuple(weight.shape)}",
                f"weight 的形状必须是 (D,)，实际是 {tuple(weight.shape)}",
            )
        )
    validate.last_dim(x, weight.shape[0])
    validate.floating_tensor("grad_out", grad_out)
    if grad_out.shape != x.shape:
        raise ValueError(
            say(
                f"grad_out must have x's shape {tuple(x.shape)}, got {tuple(grad_out.shape)}",
                f"grad_out 的形状必须与 x 相同，即 {tuple(x.shape)}，"
                f"实际是 {tuple(grad_out.shape)}",
            )
        )
    eps = validate.positive_float("eps", eps)
    mean = x.mean(dim=-1, keepdim=True)
    sigma = torch.sqrt((x - mean).pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1)
    x_hat = (x - mean) / sigma
    g = grad_out * weight
    grad_x = (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True)) / sigma
    D = x.shape[-1]  # the weight and bias serve every token: their gradients sum over tokens
    return grad_x, (grad_out * x_hat).reshape(-1, D).sum(0), grad_out.reshape(-1, D).sum(0)
