"""Unit tests of tfcourse.LayerNorm and tfcourse.RMSNorm (parity with torch: test_parity.py)."""

import pytest
import torch

import tfcourse as tc
from tfcourse import LayerNorm, RMSNorm
from tfcourse.nn.norms import make_norm


@pytest.mark.parametrize("shape", [(2, 5, 8), (1, 1, 8), (3, 8), (8,)])
@pytest.mark.parametrize("cls", [LayerNorm, RMSNorm])
def test_shape_is_preserved(cls, shape):
    assert cls(8)(torch.randn(shape)).shape == shape


def test_layernorm_output_has_zero_mean_unit_biased_variance():
    x = torch.randn(4, 6, 16, dtype=torch.float64) * 3 + 5
    y = LayerNorm(16, eps=1e-12).double()(x)
    torch.testing.assert_close(y.mean(-1), torch.zeros(4, 6, dtype=torch.float64))
    # Biased variance (divide by D): the unbiased one would be D / (D - 1) = 1.067.
    torch.testing.assert_close(y.var(-1, unbiased=False), torch.ones(4, 6, dtype=torch.float64))


def test_layernorm_eps_sits_inside_the_square_root():
    # With eps = 1 on a vector of variance 1, inside the root gives 1/sqrt(2);
    # outside would give 1/(1 + 1) = 0.5.
    x = torch.tensor([[-1.0, 1.0]])
    torch.testing.assert_close(LayerNorm(2, eps=1.0)(x), x / 2**0.5)


def test_layernorm_of_constant_input_is_bias_not_nan():
    norm = LayerNorm(4)
    with torch.no_grad():
        norm.bias.copy_(torch.arange(4.0))
    torch.testing.assert_close(norm(torch.full((2, 4), 7.0)), torch.arange(4.0).expand(2, 4))


def test_rmsnorm_formula_and_scale_invariance():
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    norm = RMSNorm(8, eps=1e-12).double()
    expected = x / x.pow(2).mean(-1, keepdim=True).sqrt()
    torch.testing.assert_close(norm(x), expected)
    torch.testing.assert_close(norm(10 * x), norm(x))  # no mean subtraction, only a scale
    assert not torch.allclose(norm(x + 1), norm(x))  # ... so a shift changes the output


def test_parameters_and_bias_flag():
    assert [n for n, _ in LayerNorm(8).named_parameters()] == ["weight", "bias"]
    assert [n for n, _ in LayerNorm(8, bias=False).named_parameters()] == ["weight"]
    assert [n for n, _ in RMSNorm(8).named_parameters()] == ["weight"]
    assert torch.equal(LayerNorm(8).weight, torch.ones(8)) and torch.equal(
        LayerNorm(8).bias, torch.zeros(8)
    )


@pytest.mark.parametrize("cls", [LayerNorm, RMSNorm])
def test_tokens_are_normalized_independently(cls):
    x = torch.randn(2, 5, 8)
    changed = x.clone()
    changed[1, 3] += 4.0
    y, y_changed = cls(8)(x), cls(8)(changed)
    untouched = torch.ones(2, 5, dtype=torch.bool)
    untouched[1, 3] = False
    assert torch.equal(y[untouched], y_changed[untouched])


@pytest.mark.parametrize("cls", [LayerNorm, RMSNorm])
def test_input_is_not_modified(cls):
    x = torch.randn(2, 3, 8)
    before = x.clone()
    cls(8)(x)
    assert torch.equal(x, before)


@pytest.mark.parametrize("cls", [LayerNorm, RMSNorm])
def test_gradcheck(cls):
    norm = cls(6, 0.1).double()
    with torch.no_grad():
        for p in norm.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    x = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(norm, (x,))


def test_make_norm_defaults():
    assert (
        isinstance(make_norm("layernorm", 8), LayerNorm) and make_norm("layernorm", 8).eps == 1e-5
    )
    assert isinstance(make_norm("rmsnorm", 8), RMSNorm) and make_norm("rmsnorm", 8).eps == 1e-6
    assert make_norm("rmsnorm", 8, eps=0.1).eps == 0.1


@pytest.mark.parametrize(
    "make",
    [
        lambda fused: tc.LayerNorm(16, eps=0.1, fused=fused),
        lambda fused: tc.LayerNorm(16, bias=False, fused=fused),
        lambda fused: tc.RMSNorm(16, eps=0.1, fused=fused),
    ],
)
def test_fused_norms_compute_the_same_function(make):
    torch.manual_seed(0)
    primitive, fused = make(False), make(True)
    with torch.no_grad():
        for p in primitive.parameters():
            p.normal_()
    fused.load_state_dict(primitive.state_dict())
    x = torch.randn(2, 5, 16, requires_grad=True)
    x_fused = x.detach().clone().requires_grad_(True)
    torch.testing.assert_close(fused(x_fused), primitive(x))
    primitive(x).pow(2).sum().backward()
    fused(x_fused).pow(2).sum().backward()
    torch.testing.assert_close(x_fused.grad, x.grad)


def test_fused_norms_flag_reaches_every_norm_of_a_gpt():
    model = tc.GPT(tc.GPTConfig.preset("tiny", fused_norms=True))
    norms = [m for m in model.modules() if isinstance(m, (tc.LayerNorm, tc.RMSNorm))]
    assert norms and all(m.fused for m in norms)
