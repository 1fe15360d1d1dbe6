"""LlamaBlock (notebook 10): a learner's correct block from the course's parts, and one
mutant per mistake the check names."""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn

import tfcourse as tc
from tfcourse.nn.mlp import SwiGLU

from .rotary_attention import LearnerRotaryAttention


class LearnerLlamaBlock(nn.Module):
    mistake = None

    def __init__(
        self, d_model, n_heads, *, max_seq_len, n_kv_heads=None, rope_base=10000.0, dropout=0.0
    ):
        super().__init__()
        m = self.mistake
        norm = (lambda d: nn.LayerNorm(d, bias=False)) if m == "layer_norm" else tc.RMSNorm
        self.norm1, self.norm2 = norm(d_model), norm(d_model)
        self.attn = LearnerRotaryAttention(
            d_model,
            n_heads,
            max_seq_len=max_seq_len,
            n_kv_heads=n_kv_heads,
            rope_base=rope_base,
            dropout=0.0 if m == "no_attention_dropout" else dropout,
        )
        self.mlp = SwiGLU(d_model, dropout=0.0 if m == "no_mlp_dropout" else dropout)
        self.p = dropout

    def forward(self, x):
        m = self.mistake
        if m == "post_norm":
            x = self.norm1(x + self.attn(x))
            return self.norm2(x + self.mlp(x))
        if m == "norm_on_stream":
            x = self.norm1(x)
            x = x + self.attn(x)
            x = self.norm2(x)
            return x + self.mlp(x)
        if m == "no_attention_residual":
            x = self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))
        if m == "no_mlp_residual":
            return self.mlp(self.norm2(x + self.attn(self.norm1(x))))
        attn = self.attn(self.norm1(x))
        if m == "attention_dropped_twice":
            attn = F.dropout(attn, self.p, training=self.training)
        x = x + attn
        if m == "stream_dropout":
            x = F.dropout(x, self.p, training=self.training)
        mlp = self.mlp(self.norm2(x))
        if m == "mlp_dropped_twice":
            mlp = F.dropout(mlp, self.p, training=self.training)
        return x + mlp


def variant(mistake):
    return type(f"LlamaBlock_{mistake}", (LearnerLlamaBlock,), {"mistake": mistake})


MUTANTS = [
    ("llama-block-post-norm", variant("post_norm"), "post-LN was written where pre-LN"),
    ("llama-block-norm-on-stream", variant("norm_on_stream"), "applied to the residual stream"),
    ("llama-block-no-attention-residual", variant("no_attention_residual"), "attention residual"),
    ("llama-block-no-mlp-residual", variant("no_mlp_residual"), "MLP residual is missing"),
    ("llama-block-layer-norm", variant("layer_norm"), "LayerNorm where LLaMA's block has RMSNorm"),
    ("llama-block-stream-dropout", variant("stream_dropout"), "applied to the residual stream"),
    ("llama-block-attention-twice", variant("attention_dropped_twice"), "dropped twice"),
    ("llama-block-mlp-twice", variant("mlp_dropped_twice"), "dropped twice"),
    ("llama-block-no-mlp-dropout", variant("no_mlp_dropout"), "the MLP has no dropout"),
    (
        "llama-block-no-attention-dropout",
        variant("no_attention_dropout"),
        "the attention has no dropout",
    ),
]

ALTERNATIVES = [("llama-block-learner", LearnerLlamaBlock)]
