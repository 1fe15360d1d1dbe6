"""The Transformer block (pre-LN or post-LN) and a stack of blocks."""

from __future__ import annotations

import torch
from torch import nn

from . import validate
from .attention import KVCache, MultiHeadAttention
from .mlp import ACTIVATIONS, FeedForward, SwiGLU
from .norms import NORMS, make_norm

MLPS = ("gelu", "swiglu")


class TransformerBlock(nn.Module):
    """One decoder block: attention and an MLP, each with a residual connection.

    pre-LN (GPT-2 and later; ``pre_ln=True``)::

        x = x + attn(norm1(x))
        x = x + mlp(norm2(x))

    post-LN (the 2017 paper; ``pre_ln=False``)::

        x = norm1(x + attn(x))
        x = norm2(x + mlp(x))

    Dropout lives in exactly two places, inside the sublayers: on the attention
    weights after softmax and after each sublayer's output projection. The
    residual stream itself is never dropped: ``x + f(x)`` must stay an exact
    identity path for the gradient.

    Args:
        d_model, n_heads, max_seq_len, dropout, bias, attn_impl, causal, rope_base, n_kv_heads:
            as in ``MultiHeadAttention`` (``bias`` also applies to the MLP; norms keep theirs).
        pre_ln: True for pre-LN, False for post-LN.
        norm: ``"layernorm"`` or ``"rmsnorm"``; ``norm_eps`` its epsilon (default per kind);
            ``fused_norms`` computes them with PyTorch's fused kernels (same result).
        mlp: ``"gelu"`` (the D -> 4D -> D ``FeedForward`` with ``activation``) or ``"swiglu"``.
        d_hidden: MLP hidden width (default 4D for ``"gelu"``, LLaMA's rule for ``"swiglu"``).

    Submodules: ``norm1``, ``attn``, ``norm2``, ``mlp``.
    Shapes: ``(B, T, D) -> (B, T, D)``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        max_seq_len: int,
        pre_ln: bool = True,
        dropout: float = 0.0,
        bias: bool = True,
        activation: str = "gelu",
        norm: str = "layernorm",
        mlp: str = "gelu",
        d_hidden: int | None = None,
        norm_eps: float | None = None,
        attn_impl: str = "explicit",
        causal: bool = True,
        rope_base: float | None = None,
        fused_norms: bool = False,
        n_kv_heads: int | None = None,
    ):
        super().__init__()
        validate.choice("norm", norm, NORMS)
        validate.choice("mlp", mlp, MLPS)
        validate.choice("activation", activation, ACTIVATIONS)
        self.d_model = d_model
        self.pre_ln = bool(pre_ln)
        self.attn = MultiHeadAttention(
            d_model,
            n_heads,
            max_seq_len=max_seq_len,
            dropout=dropout,
            bias=bias,
            causal=causal,
            attn_impl=attn_impl,
            rope_base=rope_base,
            n_kv_heads=n_kv_heads,
        )
        self.norm1 = make_norm(norm, d_model, norm_eps, fused=fused_norms)
        self.norm2 = make_norm(norm, d_model, norm_eps, fused=fused_norms)
        self.mlp: SwiGLU | FeedForward
        if mlp == "swiglu":
            self.mlp = SwiGLU(d_model, d_hidden, bias=bias, dropout=dropout)
        else:
            self.mlp = FeedForward(
                d_model, d_hidden, activation=activation, dropout=dropout, bias=bias
            )

    def forward(
        self,
        x: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        *,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """``x (B, T, D) -> (B, T, D)``; ``attn_mask``/``cache`` as in ``MultiHeadAttention``."""
        if validate.needed():  # skipped inside GPT / a stack: checked there
            self.attn._check_inputs(x, attn_mask, len(cache) if cache is not None else 0)
        with validate.inputs_checked():  # norms, attention and MLP skip their checks
            if self.pre_ln:
                x = x + self.attn(self.norm1(x), attn_mask, cache=cache)
                x = x + self.mlp(self.norm2(x))
            else:
                x = self.norm1(x + self.attn(x, attn_mask, cache=cache))
                x = self.norm2(x + self.mlp(x))
        return x

    def extra_repr(self) -> str:
        return f"pre_ln={self.pre_ln}"


class TransformerStack(nn.Module):
    """``n_layers`` blocks applied in order, optionally followed by a final norm.

    Args:
        n_layers: number of blocks.
        final_norm: add a final ``norm`` after the last block (pre-LN stacks need
            one before a head; GPT always has it).
        **block_kwargs: passed to every ``TransformerBlock`` (``d_model``, ``n_heads``,
            ``max_seq_len``, ``pre_ln``, ...).

    Submodules: ``blocks`` (``nn.ModuleList``), ``final_norm`` (or None).
    Shapes: ``(B, T, D) -> (B, T, D)``.
    """

    def __init__(self, n_layers: int, *, final_norm: bool = False, **block_kwargs):
        super().__init__()
        validate.positive_int("n_layers", n_layers)
        self.blocks = nn.ModuleList(TransformerBlock(**block_kwargs) for _ in range(n_layers))
        self.final_norm = (
            make_norm(
                block_kwargs.get("norm", "layernorm"),
                block_kwargs["d_model"],
                block_kwargs.get("norm_eps"),
                fused=block_kwargs.get("fused_norms", False),
            )
            if final_norm
            else None
        )

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``x (B, T, D) -> (B, T, D)``; ``attn_mask`` as in ``MultiHeadAttention``."""
        if validate.needed():  # the first block's checks cover every block
            first: TransformerBlock = self.blocks[0]  # type: ignore[assignment]  # ModuleList
            first.attn._check_inputs(x, attn_mask, past=0)
        with validate.inputs_checked():
            for block in self.blocks:
                x = block(x, attn_mask)
            return self.final_norm(x) if self.final_norm is not None else x
