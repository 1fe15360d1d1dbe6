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


# --- running past the trained length: position interpolation, NTK-aware scaling, YaRN --------


def test_rotary_inv_freq_default_matches_the_tables():
    from tfcourse.nn.positional import rotary_inv_freq

    theta = rotary_inv_freq(8, 100.0)
    torch.testing.assert_close(theta, 100.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8))
    cos, _ = rotary_cos_sin(3, 8, base=100.0, dtype=torch.float64)
    torch.testing.assert_close(cos[2], torch.cat([2 * theta, 2 * theta]).cos())


def test_linear_scaling_is_position_interpolation():
    """Position t with theta_i / s turns exactly as far as position t / s did."""
    cos_scaled, sin_scaled = rotary_cos_sin(
        16, 8, scaling="linear", factor=4.0, dtype=torch.float64
    )
    cos_plain, sin_plain = rotary_cos_sin(4, 8, dtype=torch.float64)
    torch.testing.assert_close(cos_scaled[0::4], cos_plain)
    torch.testing.assert_close(sin_scaled[0::4], sin_plain)


def test_ntk_scaling_keeps_the_fastest_pair_and_divides_the_slowest():
    from tfcourse.nn.positional import rotary_inv_freq

    plain = rotary_inv_freq(64)
    ntk = rotary_inv_freq(64, scaling="ntk", factor=4.0)
    torch.testing.assert_close(ntk[0], plain[0])
    torch.testing.assert_close(ntk[-1], plain[-1] / 4.0)
    ratio = ntk / plain
    assert bool((ratio[1:] < ratio[:-1]).all())  # ever more interpolated towards slow pairs


def test_yarn_keeps_fast_pairs_and_interpolates_slow_ones():
    from tfcourse.nn.positional import rotary_inv_freq

    plain = rotary_inv_freq(128)
    yarn = rotary_inv_freq(128, scaling="yarn", factor=4.0, original_max_len=4096)
    turns = 4096 * plain / (2 * math.pi)  # turns of each pair within the trained length
    torch.testing.assert_close(yarn[turns > 32], plain[turns > 32])
    torch.testing.assert_close(yarn[turns < 1], plain[turns < 1] / 4.0)
    between = (turns >= 1) & (turns <= 32)
    assert bool(((yarn[between] <= plain[between]) & (yarn[between] >= plain[between] / 4.0)).all())


def test_scalings_with_factor_one_change_nothing():
    from tfcourse.nn.positional import rotary_inv_freq

    plain = rotary_inv_freq(32)
    for scaling in ("linear", "ntk", "yarn"):
        torch.testing.assert_close(
            rotary_inv_freq(32, scaling=scaling, factor=1.0, original_max_len=64), plain
        )


def test_scaled_rope_still_depends_on_distance_only():
    q, k = torch.randn(2, 1, 16, dtype=torch.float64)
    for scaling in ("linear", "ntk", "yarn"):
        cos, sin = rotary_cos_sin(
            200, 16, scaling=scaling, factor=2.0, original_max_len=50, dtype=torch.float64
        )

        def score(m, n, cos=cos, sin=sin):
            rotated_q = apply_rotary(q, cos[m : m + 1], sin[m : m + 1])
            return float(rotated_q @ apply_rotary(k, cos[n : n + 1], sin[n : n + 1]).T)

        assert math.isclose(score(150, 140), score(12, 2), rel_tol=1e-9)


def test_scalings_match_hugging_face():
    rope_utils = pytest.importorskip("transformers.modeling_rope_utils")
    from transformers import LlamaConfig

    from tfcourse.nn.positional import rotary_inv_freq, yarn_attention_factor

    def config(rope_parameters):
        return LlamaConfig(
            hidden_size=512,
            num_attention_heads=4,
            max_position_embeddings=4096,
            rope_parameters={"rope_theta": 10000.0, **rope_parameters},
        )

    theirs, _ = rope_utils._compute_linear_scaling_rope_parameters(
        config({"rope_type": "linear", "factor": 4.0})
    )
    torch.testing.assert_close(rotary_inv_freq(128, scaling="linear", factor=4.0).float(), theirs)
    yarn_config = config(
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}
    )
    theirs, attention_factor = rope_utils._compute_yarn_parameters(yarn_config)
    ours = rotary_inv_freq(128, scaling="yarn", factor=4.0, original_max_len=1024)
    torch.testing.assert_close(ours.float(), theirs)
    assert math.isclose(yarn_attention_factor(4.0), attention_factor)
    # Hugging Face's "dynamic" NTK at seq_len = s * max_position_embeddings with factor 1 is
    # static NTK with s.
    dynamic = config({"rope_type": "dynamic", "factor": 1.0})
    theirs, _ = rope_utils._compute_dynamic_ntk_parameters(dynamic, seq_len=4 * 4096)
    torch.testing.assert_close(rotary_inv_freq(128, scaling="ntk", factor=4.0).float(), theirs)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"scaling": "cubic", "factor": 2.0}, ValueError, "scaling must be one of"),
        ({"factor": 2.0}, ValueError, "no effect without scaling"),
        ({"scaling": "linear", "factor": 0.5}, ValueError, "factor must be a finite number >= 1"),
        ({"scaling": "linear", "factor": "2"}, TypeError, "factor must be a float"),
        ({"scaling": "yarn", "factor": 2.0}, ValueError, "needs original_max_len"),
        (
            {"scaling": "yarn", "factor": 2.0, "original_max_len": 0},
            ValueError,
            "original_max_len must be a positive int",
        ),
    ],
)
def test_rotary_scaling_options_are_validated(kwargs, error, match):
    with pytest.raises(error, match=match):
        rotary_cos_sin(4, 8, **kwargs)


def test_yarn_attention_factor():
    from tfcourse.nn.positional import yarn_attention_factor

    assert yarn_attention_factor(1.0) == 1.0
    assert math.isclose(yarn_attention_factor(math.e), 1.1)
    with pytest.raises(ValueError, match="factor must be a finite number > 0"):
        yarn_attention_factor(0.0)


# --- tfcourse.lab.rope: what notebook 10 measures with these tables -----------------------


def test_rotary_scores_match_rotating_each_vector():
    from tfcourse.lab.rope import rotary_scores

    q, k = torch.randn(2, 5, 8, dtype=torch.float64)
    cos, sin = rotary_cos_sin(20, 8, dtype=torch.float64)
    rows_q, rows_k = torch.tensor([3, 7, 19]), torch.tensor([0, 7, 2])
    got = rotary_scores(q, k, (cos[rows_q], sin[rows_q]), (cos[rows_k], sin[rows_k]))
    want = torch.stack(
        [
            (
                apply_rotary(q, cos[i].expand(5, 8), sin[i].expand(5, 8))
                * apply_rotary(k, cos[j].expand(5, 8), sin[j].expand(5, 8))
            ).sum(-1)
            for i, j in zip(rows_q.tolist(), rows_k.tolist(), strict=True)
        ]
    )
    torch.testing.assert_close(got, want)
    with pytest.raises(ValueError, match="q and k must both have shape"):
        rotary_scores(q, k[:, :4], (cos, sin), (cos, sin))


def test_rounded_rotary_tables_separate_the_two_roundings():
    from tfcourse.lab.rope import rounded_rotary_tables

    positions = torch.arange(2**20, 2**20 + 8)
    exact, _ = rotary_cos_sin(8, 64, offset=2**20, dtype=torch.float64)
    errors = {
        kind: (rounded_rotary_tables(positions, 64, **kw)[0].double() - exact).abs().max()
        for kind, kw in {
            "none": {},
            "theta": {"round_theta": True},
            "product": {"round_product": True},
        }.items()
    }
    both, _ = rounded_rotary_tables(positions, 64, round_theta=True, round_product=True)
    in_float32, _ = rotary_cos_sin(8, 64, offset=2**20, compute_dtype=torch.float32)
    assert errors["none"] < 1e-7  # one float32 rounding of cos at the end
    assert min(errors["theta"], errors["product"]) > 1e-3
    both_error = (both.double() - exact).abs().max()
    float32_error = (in_float32.double() - exact).abs().max()  # computing in float32 does both
    assert 0.5 < float(both_error / float32_error) < 2.0


def test_unseen_rotation_share():
    from tfcourse.lab.rope import unseen_rotation_share
    from tfcourse.nn.positional import rotary_inv_freq

    theta = rotary_inv_freq(128)
    new = torch.arange(4096, 8192)
    assert unseen_rotation_share(theta, theta, 4096, new) > 0.1  # plain RoPE beyond L
    assert unseen_rotation_share(theta / 2, theta, 4096, new) == 0.0  # interpolated
    assert unseen_rotation_share(theta, theta, 4096, new[:0]) == 0.0


def test_context_extension_measures():
    from tfcourse.lab.rope import context_extension

    q, k = torch.randn(2, 16, 64, dtype=torch.float64)
    plain = context_extension(q, k, trained_len=512, factor=2.0, scaling=None)
    interpolated = context_extension(q, k, trained_len=512, factor=2.0, scaling="linear")
    yarn = context_extension(q, k, trained_len=512, factor=2.0, scaling="yarn")
    assert plain["near_drift"] == plain["trained_drift"] == 0.0 < plain["unseen_share"]
    assert interpolated["unseen_share"] == 0.0 < interpolated["near_drift"]
    assert yarn["near_drift"] < interpolated["near_drift"]
