"""Unit tests of learned, sinusoidal and rotary position encodings."""

import math

import pytest
import torch

from tfcourse import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    apply_rotary,
    rotary_cos_sin,
    sinusoidal_encoding,
)
from tfcourse.nn.positional import rotate_half


def test_learned_table_shape_and_offset():
    emb = LearnedPositionalEmbedding(10, 8)
    assert tuple(emb.weight.shape) == (10, 8)
    assert torch.equal(emb(4), emb.weight[:4])
    assert torch.equal(emb(3, offset=5), emb.weight[5:8])
    assert 0.01 < emb.weight.std() < 0.03  # GPT-2's std 0.02


def test_sinusoidal_values():
    pe = sinusoidal_encoding(50, 8, dtype=torch.float64)
    assert pe.shape == (50, 8) and pe.dtype == torch.float64
    torch.testing.assert_close(pe[0], torch.tensor([0.0, 1.0] * 4, dtype=torch.float64))
    t = torch.arange(50, dtype=torch.float64)
    for i in range(4):
        angle = t / 10000 ** (2 * i / 8)
        torch.testing.assert_close(pe[:, 2 * i], torch.sin(angle))
        torch.testing.assert_close(pe[:, 2 * i + 1], torch.cos(angle))


def test_sinusoidal_shift_is_a_linear_map():
    """PE[t + k] is a fixed linear map of PE[t], the same for every t: sinusoids encode offsets."""
    pe = sinusoidal_encoding(40, 6, dtype=torch.float64)
    k = 3
    rotation = torch.linalg.lstsq(pe[:20], pe[k : 20 + k]).solution
    torch.testing.assert_close(pe[20 : 40 - k] @ rotation, pe[20 + k : 40])


def test_rotate_half():
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert torch.equal(rotate_half(x), torch.tensor([-3.0, -4.0, 1.0, 2.0]))


def test_rotary_cos_sin_layout_and_offset():
    cos, sin = rotary_cos_sin(6, 4, base=100.0, dtype=torch.float64)
    assert cos.shape == sin.shape == (6, 4)
    inv_freq = torch.tensor([1.0, 1 / 10.0], dtype=torch.float64)  # 100 ** (-2i/4)
    angles = torch.arange(6, dtype=torch.float64)[:, None] * inv_freq
    torch.testing.assert_close(cos, torch.cat([angles, angles], -1).cos())
    torch.testing.assert_close(sin, torch.cat([angles, angles], -1).sin())
    cos_later, _ = rotary_cos_sin(2, 4, base=100.0, offset=4, dtype=torch.float64)
    torch.testing.assert_close(cos_later, cos[4:])


def test_rotary_matches_complex_multiplication():
    """Rotate-half RoPE = multiply (x_i + i x_{i+d/2}) by exp(i * t * theta_i)."""
    x = torch.randn(2, 3, 5, 8, dtype=torch.float64)
    cos, sin = rotary_cos_sin(5, 8, dtype=torch.float64)
    z = torch.complex(x[..., :4], x[..., 4:])
    angles = torch.arange(5, dtype=torch.float64)[:, None] * 10000 ** (-torch.arange(0, 8, 2) / 8)
    rotated = z * torch.polar(torch.ones_like(angles), angles)
    torch.testing.assert_close(
        apply_rotary(x, cos, sin), torch.cat([rotated.real, rotated.imag], -1)
    )


def test_rotary_preserves_norms_and_encodes_relative_position():
    rope = RotaryEmbedding(8, 64).double()
    q = torch.randn(1, 1, 1, 8, dtype=torch.float64)
    k = torch.randn(1, 1, 1, 8, dtype=torch.float64)

    def score(i: int, j: int) -> torch.Tensor:
        qi, _ = rope(q, q, offset=i)
        _, kj = rope(k, k, offset=j)
        return (qi * kj).sum()

    qr, _ = rope(q, q, offset=7)
    torch.testing.assert_close(qr.norm(), q.norm())
    torch.testing.assert_close(score(10, 7), score(3, 0))  # only i - j matters
    torch.testing.assert_close(score(40, 30), score(12, 2))
    assert not torch.allclose(score(10, 7), score(10, 8))


def test_rotary_buffers_are_not_persistent():
    rope = RotaryEmbedding(8, 16)
    assert set(dict(rope.named_buffers())) == {"cos", "sin"}
    assert rope.state_dict() == {}


def test_rotary_angles_are_computed_in_float64():
    """At position 5000 float32 angles lose digits; the float64 default keeps the table accurate."""
    exact_cos, _ = rotary_cos_sin(1, 64, offset=5000, dtype=torch.float64)
    cos_default, _ = rotary_cos_sin(1, 64, offset=5000)
    cos_float32, _ = rotary_cos_sin(1, 64, offset=5000, compute_dtype=torch.float32)
    error_default = (cos_default.double() - exact_cos).abs().max()
    error_float32 = (cos_float32.double() - exact_cos).abs().max()
    assert error_default < 1e-6 < error_float32


def test_rotary_matches_hugging_face_llama():
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    cos, sin = rotary_cos_sin(6, 8)
    ours = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
    theirs = llama.apply_rotary_pos_emb(q, k, cos[None], sin[None])
    torch.testing.assert_close(ours[0], theirs[0])
    torch.testing.assert_close(ours[1], theirs[1])
    assert math.isclose(float(cos[0, 0]), 1.0)
