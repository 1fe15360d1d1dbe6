"""Position information: learned tables, sinusoids, and rotary embeddings (RoPE).

Attention by itself is permutation-equivariant: shuffle the tokens and the
outputs shuffle with them. Positions have to be added (learned, sinusoidal) or
rotated into the queries and keys (rotary).
"""

from __future__ import annotations

import torch
from torch import nn

from . import validate


class LearnedPositionalEmbedding(nn.Module):
    """A learned table of ``max_seq_len`` position vectors (GPT-2's ``wpe``).

    Shapes: ``forward(T) -> (T, D)``, to be added to token embeddings ``(B, T, D)``.
    Parameters: ``weight (max_seq_len, D)``.
    """

    def __init__(self, max_seq_len: int, d_model: int):
        super().__init__()
        self.max_seq_len = validate.positive_int("max_seq_len", max_seq_len)
        self.weight = nn.Parameter(torch.zeros(max_seq_len, validate.positive_int("d_model", d_model)))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, T: int, offset: int = 0) -> torch.Tensor:
        validate.seq_len(offset + T, self.max_seq_len)
        return self.weight[offset : offset + T]


def sinusoidal_encoding(T: int, d_model: int, base: float = 10000.0,
                        dtype: torch.dtype = torch.float32, device=None) -> torch.Tensor:
    """The fixed encoding of "Attention Is All You Need", shape ``(T, d_model)``.

    ``PE[t, 2i] = sin(t / base**(2i/D))`` and ``PE[t, 2i+1] = cos(t / base**(2i/D))``.
    Computed in float64 and cast, so large positions keep their precision.
    """
    validate.positive_int("T", T)
    validate.positive_int("d_model", d_model)
    if d_model % 2:
        raise ValueError(f"d_model must be even for sinusoidal encodings, got {d_model}")
    position = torch.arange(T, dtype=torch.float64, device=device)[:, None]        # (T, 1)
    inv_freq = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64, device=device) / d_model)
    angles = position * inv_freq                                                    # (T, D/2)
    pe = torch.empty(T, d_model, dtype=torch.float64, device=device)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.to(dtype)


def rotary_cos_sin(T: int, head_dim: int, base: float = 10000.0, *, offset: int = 0,
                   dtype: torch.dtype = torch.float32, device=None, compute_dtype=torch.float64):
    """Cosines and sines for rotary embeddings, each of shape ``(T, head_dim)``.

    Uses the "rotate half" layout of LLaMA / Hugging Face: channel ``i`` is paired
    with channel ``i + head_dim/2`` and both rotate by ``t * base**(-2i/head_dim)``.
    The angles are computed in ``compute_dtype`` (float64 by default): in float32,
    ``t * inv_freq`` loses digits once ``t`` reaches the thousands.
    """
    validate.positive_int("head_dim", head_dim)
    if head_dim % 2:
        raise ValueError(f"head_dim must be even for rotary embeddings, got {head_dim}")
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=compute_dtype, device=device) / head_dim))
    t = torch.arange(offset, offset + T, dtype=compute_dtype, device=device)
    angles = torch.outer(t, inv_freq)                         # (T, head_dim/2)
    angles = torch.cat([angles, angles], dim=-1)              # (T, head_dim)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``(x1, x2) -> (-x2, x1)`` on the two halves of the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate queries or keys ``(B, H, T, head_dim)`` by position; ``cos``/``sin`` are ``(T, head_dim)``."""
    if x.shape[-2:] != cos.shape or cos.shape != sin.shape:
        raise ValueError(
            f"apply_rotary expects x (..., T, head_dim) and cos/sin (T, head_dim); "
            f"got x {tuple(x.shape)}, cos {tuple(cos.shape)}, sin {tuple(sin.shape)}"
        )
    return x * cos + rotate_half(x) * sin


class RotaryEmbedding(nn.Module):
    """Rotary position embedding for ``head_dim`` channels, tables cached up to ``max_seq_len``.

    The cos/sin tables are non-persistent buffers: they are a function of the
    configuration, so they do not belong in a checkpoint.
    Shapes: ``forward(q, k, offset)`` with q, k ``(B, H, T, head_dim)`` -> rotated q, k.
    """

    def __init__(self, head_dim: int, max_seq_len: int, base: float = 10000.0):
        super().__init__()
        self.head_dim = validate.positive_int("head_dim", head_dim)
        self.max_seq_len = validate.positive_int("max_seq_len", max_seq_len)
        self.base = validate.positive_float("rope_base", base)
        cos, sin = rotary_cos_sin(max_seq_len, head_dim, base)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor, offset: int = 0):
        T = q.shape[-2]
        validate.seq_len(offset + T, self.max_seq_len)
        cos = self.cos[offset : offset + T].to(q.dtype)
        sin = self.sin[offset : offset + T].to(q.dtype)
        return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
