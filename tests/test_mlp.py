"""Unit tests of FeedForward, SwiGLU and swiglu_hidden_dim."""

import pytest
import torch
import torch.nn.functional as F

from tfcourse import FeedForward, SwiGLU, swiglu_hidden_dim

D = 16


def test_feedforward_shapes_and_default_width():
    mlp = FeedForward(D)
    assert mlp.d_hidden == 4 * D
    shapes = {n: tuple(p.shape) for n, p in mlp.named_parameters()}
    assert shapes == {
        "fc_in.weight": (4 * D, D),
        "fc_in.bias": (4 * D,),
        "fc_out.weight": (D, 4 * D),
        "fc_out.bias": (D,),
    }
    for shape in [(2, 5, D), (1, 1, D), (3, D)]:
        assert mlp(torch.randn(shape)).shape == shape
    assert FeedForward(D, 24).fc_in.out_features == 24


@pytest.mark.parametrize(
    "activation, fn",
    [
        ("gelu", F.gelu),
        (
            "gelu_tanh",
            lambda h: 0.5 * h * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (h + 0.044715 * h**3))),
        ),
        ("relu", torch.relu),
    ],
)
def test_feedforward_formula(activation, fn):
    mlp = FeedForward(D, activation=activation).double()
    x = torch.randn(2, 3, D, dtype=torch.float64)
    expected = fn(x @ mlp.fc_in.weight.T + mlp.fc_in.bias) @ mlp.fc_out.weight.T + mlp.fc_out.bias
    torch.testing.assert_close(mlp(x), expected)


def test_exact_and_tanh_gelu_differ():
    exact = FeedForward(D, activation="gelu")
    approx = FeedForward(D, activation="gelu_tanh")
    approx.load_state_dict(exact.state_dict())
    x = torch.randn(4, 8, D) * 3
    assert not torch.equal(exact(x), approx(x))
    torch.testing.assert_close(exact(x), approx(x), atol=1e-2, rtol=0)


@pytest.mark.parametrize("make", [lambda: FeedForward(D), lambda: SwiGLU(D, 24)])
def test_tokens_are_processed_independently(make):
    mlp = make()
    x = torch.randn(2, 5, D)
    changed = x.clone()
    changed[0, 2] += 1.0
    y, y_changed = mlp(x), mlp(changed)
    keep = torch.ones(2, 5, dtype=torch.bool)
    keep[0, 2] = False
    assert torch.equal(y[keep], y_changed[keep])
    assert not torch.allclose(y[0, 2], y_changed[0, 2])


@pytest.mark.parametrize("cls", [FeedForward, SwiGLU])
def test_bias_flag(cls):
    with_bias = {n for n, _ in cls(D, 32, bias=True).named_parameters()}
    without = {n for n, _ in cls(D, 32, bias=False).named_parameters()}
    assert without == {n for n in with_bias if n.endswith("weight")}
    assert with_bias != without


def test_swiglu_formula_layout_and_default_width():
    mlp = SwiGLU(D, 24).double()
    shapes = {n: tuple(p.shape) for n, p in mlp.named_parameters()}
    assert shapes == {
        "gate_proj.weight": (24, D),
        "up_proj.weight": (24, D),
        "down_proj.weight": (D, 24),
    }
    x = torch.randn(2, 3, D, dtype=torch.float64)
    expected = (
        F.silu(x @ mlp.gate_proj.weight.T) * (x @ mlp.up_proj.weight.T)
    ) @ mlp.down_proj.weight.T
    torch.testing.assert_close(mlp(x), expected)
    assert SwiGLU(D).d_hidden == swiglu_hidden_dim(D) == 256


@pytest.mark.parametrize(
    "d_model, hidden", [(4096, 11008), (768, 2048), (512, 1536), (128, 512), (1, 256)]
)
def test_swiglu_hidden_dim(d_model, hidden):
    assert swiglu_hidden_dim(d_model) == hidden
    assert hidden % 256 == 0 and hidden >= 8 * d_model / 3


def test_swiglu_hidden_dim_multiple_of():
    assert swiglu_hidden_dim(4096, multiple_of=1) == 10922
    assert swiglu_hidden_dim(768, multiple_of=64) == 2048


@pytest.mark.parametrize("cls", [FeedForward, SwiGLU])
def test_dropout_after_the_output_projection_only(cls):
    mlp = cls(D, 32, dropout=0.5)
    reference = cls(D, 32, dropout=0.0)
    reference.load_state_dict(mlp.state_dict())
    x = torch.randn(4, 6, D)
    torch.testing.assert_close(mlp.eval()(x), reference.eval()(x))
    y = mlp.train()(x)
    # Residual dropout zeroes whole output entries and scales the rest by 1 / (1 - p).
    kept = y != 0
    assert 0.2 < kept.float().mean() < 0.8
    torch.testing.assert_close(y[kept], 2 * reference(x)[kept])
