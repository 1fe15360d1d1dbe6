"""Position-wise MLPs: the classic D -> 4D -> D FeedForward and LLaMA's SwiGLU.

Both act on each token vector independently: no information moves between
positions here (all token mixing happens in attention).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from . import validate

ACTIVATIONS = {
    "gelu": F.gelu,  # exact, erf-based
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's "gelu_new"
    "relu": F.relu,
}


def swiglu_hidden_dim(d_model: int, multiple_of: int = 256) -> int:
    """LLaMA's SwiGLU width: ``2/3 * 4 * d_model`` rounded up to a multiple of ``multiple_of``.

    The 2/3 keeps the parameter count of a 4D GELU MLP, because SwiGLU has three
    matrices instead of two. ``swiglu_hidden_dim(4096) == 11008``.
    """
    validate.positive_int("d_model", d_model)
    validate.positive_int("multiple_of", multiple_of)
    hidden = int(2 * 4 * d_model / 3)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


class FeedForward(nn.Module):
    """``dropout(fc_out(activation(fc_in(x))))``, applied to every token on its own.

    Args:
        d_model: model width D.
        d_hidden: hidden width (default ``4 * d_model``).
        activation: ``"gelu"`` (exact), ``"gelu_tanh"`` (GPT-2) or ``"relu"``.
        dropout: residual dropout after the second linear layer.
        bias: give both linear layers a bias.

    Parameters: ``fc_in.weight (d_hidden, D)``, ``fc_in.bias (d_hidden,)``,
    ``fc_out.weight (D, d_hidden)``, ``fc_out.bias (D,)``.
    Shapes: ``(B, T, D) -> (B, T, D)``.
    """

    def __init__(
        self,
        d_model: int,
        d_hidden: int | None = None,
        *,
        activation: str = "gelu",
        dropout: float = 0.0,
        bias: bool = True,
    ):
        super().__init__()
        self.d_model = validate.positive_int("d_model", d_model)
        self.d_hidden = validate.positive_int(
            "d_hidden", 4 * d_model if d_hidden is None else d_hidden
        )
        self.activation = validate.choice("activation", activation, ACTIVATIONS)
        self.fc_in = nn.Linear(d_model, self.d_hidden, bias=bias)
        self.fc_out = nn.Linear(self.d_hidden, d_model, bias=bias)
        self.dropout = nn.Dropout(validate.probability("dropout", dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if validate.needed():  # skipped inside a block or GPT: checked there
            validate.last_dim(x, self.d_model)
        hidden = ACTIVATIONS[self.activation](self.fc_in(x))  # (B, T, d_hidden)
        return self.dropout(self.fc_out(hidden))  # (B, T, D)

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"


class SwiGLU(nn.Module):
    """LLaMA's gated MLP: ``down_proj(silu(gate_proj(x)) * up_proj(x))``.

    Args:
        d_model: model width D.
        d_hidden: hidden width (default ``swiglu_hidden_dim(d_model)``, i.e. 2/3 * 4D
            rounded up to a multiple of 256).
        bias: LLaMA uses none.
        dropout: residual dropout after ``down_proj``.

    Parameters (Hugging Face LLaMA names): ``gate_proj.weight (d_hidden, D)``,
    ``up_proj.weight (d_hidden, D)``, ``down_proj.weight (D, d_hidden)``.
    Shapes: ``(B, T, D) -> (B, T, D)``.
    """

    def __init__(
        self, d_model: int, d_hidden: int | None = None, *, bias: bool = False, dropout: float = 0.0
    ):
        super().__init__()
        self.d_model = validate.positive_int("d_model", d_model)
        self.d_hidden = validate.positive_int(
            "d_hidden", swiglu_hidden_dim(d_model) if d_hidden is None else d_hidden
        )
        self.gate_proj = nn.Linear(d_model, self.d_hidden, bias=bias)
        self.up_proj = nn.Linear(d_model, self.d_hidden, bias=bias)
        self.down_proj = nn.Linear(self.d_hidden, d_model, bias=bias)
        self.dropout = nn.Dropout(validate.probability("dropout", dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if validate.needed():  # skipped inside a block or GPT: checked there
            validate.last_dim(x, self.d_model)
        hidden = F.silu(self.gate_proj(x)) * self.up_proj(x)  # (B, T, d_hidden)
        return self.dropout(self.down_proj(hidden))  # (B, T, D)
