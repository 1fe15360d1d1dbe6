"""``GPTConfig``: every size and choice of a GPT, validated once, in one place."""

from __future__ import annotations

import dataclasses

from ..language import say
from . import validate
from .attention import ATTN_IMPLS
from .block import MLPS
from .mlp import ACTIVATIONS
from .norms import NORMS
from .presets import PRESETS

POSITIONAL = ("learned", "rope")


@dataclasses.dataclass(frozen=True)
class GPTConfig:
    """Sizes and choices of a decoder-only Transformer.

    Defaults are GPT-2 small's. ``GPTConfig.preset(name, **overrides)`` builds a
    named configuration (see ``PRESETS``); ``replace(**changes)`` returns a
    validated copy with some fields changed.
    """

    vocab_size: int = 50257
    max_seq_len: int = 1024
    n_layers: int = 12
    n_heads: int = 12
    d_model: int = 768
    n_kv_heads: int | None = None  # key/value heads; None = n_heads, fewer = GQA, 1 = MQA
    d_hidden: int | None = None  # MLP width; None = 4 * d_model (gelu) / LLaMA rule (swiglu)
    dropout: float = 0.0
    bias: bool = True  # biases of every Linear (norms keep theirs)
    pre_ln: bool = True
    norm: str = "layernorm"
    norm_eps: float | None = None  # None = 1e-5 for LayerNorm, 1e-6 for RMSNorm
    mlp: str = "gelu"
    activation: str = "gelu_tanh"  # GPT-2's "gelu_new"
    positional: str = "learned"  # "learned" table or "rope" (rotary, in attention)
    rope_base: float = 10000.0
    tie_weights: bool = True  # LM head shares the token-embedding matrix
    attn_impl: str = "explicit"
    fused_norms: bool = False  # norms via F.layer_norm / F.rms_norm (same result, faster)

    def __post_init__(self):
        for name in ("vocab_size", "max_seq_len", "n_layers", "n_heads", "d_model"):
            validate.positive_int(name, getattr(self, name))
        validate.divisible(self.d_model, self.n_heads)
        if self.n_kv_heads is not None:
            validate.positive_int("n_kv_heads", self.n_kv_heads)
            if self.n_heads % self.n_kv_heads:
                kv, heads = f"n_kv_heads={self.n_kv_heads}", f"n_heads={self.n_heads}"
                raise ValueError(say(f"{kv} must divide {heads}", f"{kv} 必须能整除 {heads}"))
        if self.d_hidden is not None:
            validate.positive_int("d_hidden", self.d_hidden)
        validate.probability("dropout", self.dropout)
        if self.norm_eps is not None:
            validate.positive_float("norm_eps", self.norm_eps)
        validate.positive_float("rope_base", self.rope_base)
        validate.choice("norm", self.norm, NORMS)
        validate.choice("mlp", self.mlp, MLPS)
        validate.choice("activation", self.activation, ACTIVATIONS)
        validate.choice("positional", self.positional, POSITIONAL)
        validate.choice("attn_impl", self.attn_impl, ATTN_IMPLS)
        if self.positional == "rope" and (self.d_model // self.n_heads) % 2:
            head_dim = self.d_model // self.n_heads
            raise ValueError(
                say(
                    f"rotary embeddings need an even head_dim, got {head_dim}",
                    f"旋转位置编码（RoPE）要求头维度 head_dim 为偶数，实际是 {head_dim}",
                )
            )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def block_kwargs(self) -> dict:
        """Keyword arguments for ``TransformerBlock`` / ``TransformerStack``."""
        return dict(
            d_model=self.d_model,
            n_heads=self.n_heads,
            max_seq_len=self.max_seq_len,
            pre_ln=self.pre_ln,
            dropout=self.dropout,
            bias=self.bias,
            activation=self.activation,
            norm=self.norm,
            mlp=self.mlp,
            d_hidden=self.d_hidden,
            norm_eps=self.norm_eps,
            attn_impl=self.attn_impl,
            fused_norms=self.fused_norms,
            n_kv_heads=self.n_kv_heads,
            rope_base=self.rope_base if self.positional == "rope" else None,
        )

    def replace(self, **changes) -> "GPTConfig":
        """A copy with ``changes`` applied, validated again by ``__post_init__``."""
        # dataclasses.replace by its module name: this method is called replace too.
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def preset(cls, name: str, **overrides) -> "GPTConfig":
        validate.choice("preset", name, PRESETS)
        return cls(**{**PRESETS[name], **overrides})
