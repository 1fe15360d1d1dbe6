"""Position information: learned tables, sinusoids, and rotary embeddings (RoPE).

Attention by itself is permutation-equivariant: shuffle the tokens and the
outputs shuffle with them. Positions have to be added (learned, sinusoidal) or
rotated into the queries and keys (rotary). The rotary tables can also be
rescaled to run past the length a model was trained on (position
interpolation, NTK-aware scaling, YaRN's frequencies).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..language import say
from . import validate


class LearnedPositionalEmbedding(nn.Module):
    """A learned table of ``max_seq_len`` position vectors (GPT-2's ``wpe``).

    Shapes: ``forward(T) -> (T, D)``, to be added to token embeddings ``(B, T, D)``.
    Parameters: ``weight (max_seq_len, D)``.
    """

    def __init__(self, max_seq_len: int, d_model: int):
        super().__init__()
        self.max_seq_len = validate.positive_int("max_seq_len", max_seq_len)
        self.weight = nn.Parameter(
            torch.zeros(max_seq_len, validate.positive_int("d_model", d_model))
        )
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, T: int, offset: int = 0) -> torch.Tensor:
        if validate.needed():  # skipped inside GPT.forward: checked there
            validate.seq_len(offset + T, self.max_seq_len)
        return self.weight[offset : offset + T]


def sinusoidal_encoding(
    T: int, d_model: int, base: float = 10000.0, dtype: torch.dtype = torch.float32, device=None
) -> torch.Tensor:
    """The fixed encoding of "Attention Is All You Need", shape ``(T, d_model)``.

    ``PE[t, 2i] = sin(t / base**(2i/D))`` and ``PE[t, 2i+1] = cos(t / base**(2i/D))``.
    Computed in float64 and cast, so large positions keep their precision.
    """
    validate.positive_int("T", T)
    validate.positive_int("d_model", d_model)
    if d_model % 2:
        raise ValueError(
            say(
                f"d_model must be even for sinusoidal encodings, got {d_model}",
                f"正弦位置编码要求 d_model 为偶数，实际是 {d_model}",
            )
        )
    position = torch.arange(T, dtype=torch.float64, device=device)[:, None]  # (T, 1)
    inv_freq = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64, device=device) / d_model)
    angles = position * inv_freq  # (T, D/2)
    pe = torch.empty(T, d_model, dtype=torch.float64, device=device)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.to(dtype)


ROPE_SCALINGS = ("linear", "ntk", "yarn")


def _yarn_ramp(
    head_dim: int,
    base: float,
    original_max_len: int,
    beta_fast: float,
    beta_slow: float,
    dtype,
    device,
) -> torch.Tensor:
    """YaRN's blend per pair, shape ``(head_dim/2,)``: 0 keeps a pair's frequency, 1 divides it.

    A pair that turns ``beta_fast`` times or more within ``original_max_len`` positions keeps
    its frequency; one that turns ``beta_slow`` times or fewer is interpolated; the pairs in
    between blend linearly. Pair indices are floored/ceiled as in YaRN's reference code and
    Hugging Face's ``rope_type="yarn"``.
    """

    def pair_turning(turns: float) -> float:  # the pair index that turns `turns` times
        return head_dim * math.log(original_max_len / (turns * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(pair_turning(beta_fast)), 0)
    high: float = min(math.ceil(pair_turning(beta_slow)), head_dim - 1)
    if high == low:
        high += 0.001  # a step instead of a division by zero
    pair = torch.arange(head_dim // 2, dtype=dtype, device=device)
    return ((pair - low) / (high - low)).clamp(0.0, 1.0)


def _check_scaling(
    scaling, factor, original_max_len, head_dim, base, beta_fast, beta_slow
) -> float:
    """Validate the context-extension options of ``rotary_inv_freq``; return ``factor``."""
    if isinstance(factor, bool) or not isinstance(factor, (int, float)):
        got = f"{type(factor).__name__} ({factor!r})"
        got_zh = f"{type(factor).__name__}（{factor!r}）"
        raise TypeError(
            say(
                f"factor must be a float >= 1, got {got}",
                f"factor 必须是 >= 1 的 float，实际是 {got_zh}",
            )
        )
    factor = float(factor)
    if scaling is None:
        if factor != 1.0:
            raise ValueError(
                say(
                    f"factor={factor} has no effect without scaling; "
                    f"choose scaling from {ROPE_SCALINGS} or leave factor at 1.0",
                    f"不设 scaling 时 factor={factor} 不起作用；"
                    f"请从 {ROPE_SCALINGS} 中选一种 scaling，或让 factor 保持 1.0",
                )
            )
        return factor
    validate.choice("scaling", scaling, ROPE_SCALINGS)
    if not (math.isfinite(factor) and factor >= 1.0):
        raise ValueError(
            say(
                f"factor must be a finite number >= 1 (how many times longer), got {factor}",
                f"factor 必须是 >= 1 的有限数（上下文延长的倍数），实际是 {factor}",
            )
        )
    if scaling == "ntk" and head_dim < 4:
        raise ValueError(
            say(
                f"scaling='ntk' needs head_dim >= 4, got {head_dim}",
                f"scaling='ntk' 要求头维度 head_dim >= 4，实际是 {head_dim}",
            )
        )
    if scaling == "yarn":
        if original_max_len is None:
            raise ValueError(
                say(
                    "scaling='yarn' needs original_max_len, the length the model was trained on",
                    "scaling='yarn' 需要 original_max_len，即模型训练时的序列长度",
                )
            )
        validate.positive_int("original_max_len", original_max_len)
        if base <= 1.0:
            raise ValueError(
                say(
                    f"scaling='yarn' needs base > 1, got {base}",
                    f"scaling='yarn' 要求 base > 1，实际是 {base}",
                )
            )
        validate.positive_float("beta_slow", beta_slow)
        if not (isinstance(beta_fast, (int, float)) and beta_fast > beta_slow):
            raise ValueError(
                say(
                    f"beta_fast must be a number > beta_slow={beta_slow}, got {beta_fast!r}",
                    f"beta_fast 必须是 > beta_slow={beta_slow} 的数，实际是 {beta_fast!r}",
                )
            )
    return factor


def rotary_inv_freq(
    head_dim: int,
    base: float = 10000.0,
    *,
    scaling: str | None = None,
    factor: float = 1.0,
    original_max_len: int | None = None,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    dtype: torch.dtype = torch.float64,
    device=None,
) -> torch.Tensor:
    """The rotation frequencies ``theta_i`` of the ``head_dim/2`` pairs, shape ``(head_dim/2,)``.

    ``scaling=None``: ``theta_i = base**(-2i/head_dim)``. To run a model ``factor`` times past
    the length it was trained on (each used with a short fine-tune at the new length):

    - ``"linear"``, position interpolation (Chen et al., 2023): ``theta_i / factor``; position
      ``t`` turns as far as position ``t / factor`` did, so every angle stays in the trained range.
    - ``"ntk"``, NTK-aware scaling (bloc97, 2023): ``base * factor**(head_dim/(head_dim-2))``
      instead of ``base``; the fastest pair keeps its frequency, the slowest is divided by
      ``factor``.
    - ``"yarn"``, YaRN's frequencies (Peng et al., 2023): pairs that turn ``beta_fast`` times or
      more within ``original_max_len`` keep theirs, pairs that turn ``beta_slow`` times or fewer
      are divided by ``factor``, a linear blend in between. YaRN also multiplies the cos/sin
      tables by ``yarn_attention_factor(factor)``; this function returns frequencies only.
    """
    validate.positive_int("head_dim", head_dim)
    if head_dim % 2:
        raise ValueError(
            say(
                f"head_dim must be even for rotary embeddings, got {head_dim}",
                f"旋转位置编码（RoPE）要求头维度 head_dim 为偶数，实际是 {head_dim}",
            )
        )
    base = validate.positive_float("base", base)
    factor = _check_scaling(scaling, factor, original_max_len, head_dim, base, beta_fast, beta_slow)
    if scaling == "ntk":
        base = base * factor ** (head_dim / (head_dim - 2))
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=dtype, device=device) / head_dim))
    if scaling == "linear":
        inv_freq = inv_freq / factor
    elif scaling == "yarn":
        assert original_max_len is not None  # _check_scaling requires it for YaRN
        blend = _yarn_ramp(head_dim, base, original_max_len, beta_fast, beta_slow, dtype, device)
        inv_freq = inv_freq / factor * blend + inv_freq * (1 - blend)
    return inv_freq


def yarn_attention_factor(factor: float) -> float:
    """YaRN's multiplier of the cos/sin tables, ``0.1 * ln(factor) + 1`` (1 for ``factor <= 1``).

    Scaling both q and k by it multiplies every attention score by its square: a lower
    softmax temperature, which YaRN found to offset the flatter attention over longer contexts.
    """
    factor = validate.positive_float("factor", factor)
    return 1.0 if factor <= 1.0 else 0.1 * math.log(factor) + 1.0


def rotary_cos_sin(
    T: int,
    head_dim: int,
    base: float = 10000.0,
    *,
    offset: int = 0,
    dtype: torch.dtype = torch.float32,
    device=None,
    compute_dtype=torch.float64,
    scaling: str | None = None,
    factor: float = 1.0,
    original_max_len: int | None = None,
):
    """Cosines and sines for rotary embeddings, each of shape ``(T, head_dim)``.

    Uses the "rotate half" layout of LLaMA / Hugging Face: channel ``i`` is paired
    with channel ``i + head_dim/2`` and both rotate by ``t * base**(-2i/head_dim)``.
    The angles are computed in ``compute_dtype`` (float64 by default): in float32, both
    ``inv_freq`` and ``t * inv_freq`` are rounded, and the angles lose digits once ``t``
    reaches the thousands. ``scaling``, ``factor`` and ``original_max_len`` rescale the
    frequencies to run past the trained length (see ``rotary_inv_freq``; the defaults leave
    them unchanged).
    """
    inv_freq = rotary_inv_freq(
        head_dim,
        base,
        scaling=scaling,
        factor=factor,
        original_max_len=original_max_len,
        dtype=compute_dtype,
        device=device,
    )
    t = torch.arange(offset, offset + T, dtype=compute_dtype, device=device)
    angles = torch.outer(t, inv_freq)  # (T, head_dim/2)
    angles = torch.cat([angles, angles], dim=-1)  # (T, head_dim)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``(x1, x2) -> (-x2, x1)`` on the two halves of the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate queries or keys ``(B, H, T, head_dim)`` by position.

    ``cos`` and ``sin`` are ``(T, head_dim)``.
    """
    if x.shape[-2:] != cos.shape or cos.shape != sin.shape:
        shapes = "x (..., T, head_dim) and cos/sin (T, head_dim)"
        got = f"x {tuple(x.shape)}, cos {tuple(cos.shape)}, sin {tuple(sin.shape)}"
        raise ValueError(
            say(
                f"apply_rotary expects {shapes}; got {got}",
                "apply_rotary 要求 x 的形状为 (..., T, head_dim)，cos/sin 的形状为 "
                f"(T, head_dim)；实际是 {got}",
            )
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
        self.cos: torch.Tensor  # (max_seq_len, head_dim), as are the sines
        self.sin: torch.Tensor
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor, offset: int = 0):
        T = q.shape[-2]
        if validate.needed():  # skipped inside attention: checked there
            validate.seq_len(offset + T, self.max_seq_len)
        cos = self.cos[offset : offset + T].to(q.dtype)
        sin = self.sin[offset : offset + T].to(q.dtype)
        return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
