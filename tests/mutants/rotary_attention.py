"""The wrong and the right implementations that test_mutants_rotary_attention.py runs.

See ``mutants/__init__.py``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

import tfcourse as tc
from tfcourse.nn.attention import repeat_kv


def rotate_interleaved(t, cos, sin):
    """RoPE in interleaved pairs (0, 1), (2, 3), ... (GPT-J, Meta's LLaMA code), pair j turned
    by its own angle, the tables' column j."""
    half = t.shape[-1] // 2
    c, s = cos[..., :half], sin[..., :half]
    even, odd = t[..., 0::2], t[..., 1::2]
    return torch.stack([even * c - odd * s, even * s + odd * c], dim=-1).flatten(-2)


def rotate_interleaved_with_half_tables(t, cos, sin):
    """Interleaved pairs, with the rotate-half tables used as they are."""
    swapped = torch.stack([-t[..., 1::2], t[..., 0::2]], dim=-1).flatten(-2)
    return t * cos + swapped * sin


class LearnerRotaryAttention(nn.Module):
    """Notebook 10's solution, written out; ``mistake`` switches on one error."""

    mistake = None

    def __init__(
        self,
        d_model,
        n_heads,
        *,
        max_seq_len,
        n_kv_heads=None,
        rope_base=10000.0,
        dropout=0.0,
        bias=False,
    ):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        self.kv_dim = self.n_kv_heads * self.head_dim
        self.qkv_proj = nn.Linear(d_model, d_model + 2 * self.kv_dim, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.p = dropout
        cos, sin = tc.rotary_cos_sin(max_seq_len, self.head_dim, rope_base)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("mask", tc.causal_mask(max_seq_len), persistent=False)

    def forward(self, x):
        B, T, D = x.shape
        m = self.mistake
        q, k, v = self.qkv_proj(x).split([D, self.kv_dim, self.kv_dim], dim=-1)
        q, k, v = (t.view(B, T, -1, self.head_dim).transpose(1, 2) for t in (q, k, v))
        cos, sin = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)
        rotate = {
            "interleaved": rotate_interleaved,
            "interleaved_half_tables": rotate_interleaved_with_half_tables,
        }.get(m, tc.apply_rotary)
        if m not in ("no_rotation", "k_only"):
            q = rotate(q, cos, sin)
        if m not in ("no_rotation", "q_only"):
            k = rotate(k, cos, sin)
        if m == "rotate_v":
            v = rotate(v, cos, sin)
        n_rep = self.n_heads // self.n_kv_heads
        if m == "tiled":
            k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)
        else:
            k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        scores = q @ k.transpose(-2, -1) / math.sqrt(D if m == "width_scale" else self.head_dim)
        if m != "no_mask":
            scores = scores.masked_fill(~self.mask[:T, :T], float("-inf"))
        weights = scores.softmax(dim=-1)
        if m == "weight_dropout":  # notebook 02's place for it, not this module's
            weights = F.dropout(weights, self.p, training=self.training)
        y = self.out_proj((weights @ v).transpose(1, 2).reshape(B, T, D))
        if m in ("no_dropout", "weight_dropout"):
            return y
        if m == "dropout_in_eval":  # F.dropout's default: training=True
            return F.dropout(y, self.p)
        return F.dropout(y, self.p, training=self.training)


def variant(mistake):
    return type(f"RotaryAttention_{mistake}", (LearnerRotaryAttention,), {"mistake": mistake})


class SdpaRotaryAttention(LearnerRotaryAttention):
    """Another correct way: torch's fused attention with grouped heads (enable_gqa)."""

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv_proj(x).split([D, self.kv_dim, self.kv_dim], dim=-1)
        q, k, v = (t.view(B, T, -1, self.head_dim).transpose(1, 2) for t in (q, k, v))
        cos, sin = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)
        q, k = tc.apply_rotary(q, cos, sin), tc.apply_rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        y = self.out_proj(y.transpose(1, 2).reshape(B, T, D))
        return F.dropout(y, self.p, training=self.training)


MUTANTS = [
    ("rotary-attention-no-rotation", variant("no_rotation"), "q and k are not rotated"),
    ("rotary-attention-q-only", variant("q_only"), "only q is rotated"),
    ("rotary-attention-k-only", variant("k_only"), "only k is rotated"),
    ("rotary-attention-v-rotated", variant("rotate_v"), "v is rotated too"),
    ("rotary-attention-tiled-heads", variant("tiled"), "tiled (kv.repeat) instead of grouped"),
    ("rotary-attention-width-scale", variant("width_scale"), "sqrt(d_model) instead of"),
    ("rotary-attention-no-dropout", variant("no_dropout"), "never dropped out"),
    ("rotary-attention-dropout-in-eval", variant("dropout_in_eval"), "dropout is active in eval"),
    (
        "rotary-attention-interleaved-pairs",
        variant("interleaved"),
        "rotated in interleaved pairs (0, 1), (2, 3)",
    ),
    (
        "rotary-attention-interleaved-pairs-half-tables",
        variant("interleaved_half_tables"),
        "rotated in interleaved pairs (0, 1), (2, 3)",
    ),
    ("rotary-attention-no-causal-mask", variant("no_mask"), "no causal mask"),
    (
        "rotary-attention-weight-dropout",
        variant("weight_dropout"),
        "dropout acts on the attention weights instead of the output",
    ),
]

ALTERNATIVES = [
    ("rotary-attention-learner-base", LearnerRotaryAttention),
    ("rotary-attention-sdpa-enable-gqa", SdpaRotaryAttention),
]
