"""Unit tests of TransformerBlock (pre-LN / post-LN) and TransformerStack."""

import pytest
import torch

from tfcourse import FeedForward, LayerNorm, RMSNorm, SwiGLU, TransformerBlock, TransformerStack

D, H, T_MAX = 16, 4, 12
IMPLS = ["explicit", "sdpa"]


def randomize(module: torch.nn.Module, scale: float = 0.3) -> torch.nn.Module:
    """Non-trivial norm weights and biases, so a skipped or swapped sublayer shows."""
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * scale)
    return module


def block(**kwargs) -> TransformerBlock:
    return randomize(TransformerBlock(D, H, **{"max_seq_len": T_MAX, **kwargs}))


def twin(b: TransformerBlock, **kwargs) -> TransformerBlock:
    other = TransformerBlock(D, H, **{"max_seq_len": T_MAX, **kwargs})
    other.load_state_dict(b.state_dict(), strict=True)
    return other


@pytest.mark.parametrize("pre_ln", [True, False])
@pytest.mark.parametrize("impl", IMPLS)
def test_shape_is_preserved(pre_ln, impl):
    b = block(pre_ln=pre_ln, attn_impl=impl)
    for shape in [(2, 7, D), (1, 1, D), (3, T_MAX, D)]:
        assert b(torch.randn(shape)).shape == shape


def test_submodules_and_variants():
    b = TransformerBlock(D, H, max_seq_len=4)
    assert [n for n, _ in b.named_children()] == ["attn", "norm1", "norm2", "mlp"]
    assert isinstance(b.norm1, LayerNorm) and isinstance(b.mlp, FeedForward)
    llama = TransformerBlock(D, H, max_seq_len=4, norm="rmsnorm", mlp="swiglu", bias=False)
    assert isinstance(llama.norm2, RMSNorm) and isinstance(llama.mlp, SwiGLU)
    assert llama.norm1.eps == 1e-6 and b.norm1.eps == 1e-5
    assert TransformerBlock(D, H, max_seq_len=4, norm_eps=0.1).norm2.eps == 0.1
    assert all(p.dim() == 1 for n, p in llama.named_parameters() if "norm" in n)
    assert not any(n.endswith("bias") for n, _ in llama.named_parameters())


def test_pre_ln_order():
    b = block(pre_ln=True)
    x = torch.randn(2, 6, D)
    h = x + b.attn(b.norm1(x))
    torch.testing.assert_close(b(x), h + b.mlp(b.norm2(h)))


def test_post_ln_order():
    b = block(pre_ln=False)
    x = torch.randn(2, 6, D)
    h = b.norm1(x + b.attn(x))
    torch.testing.assert_close(b(x), b.norm2(h + b.mlp(h)))


def test_lesson_exercise_4_pre_and_post_ln_differ():
    """The lesson's sanity check: same weights, dropout 0, input (2, 16, 384), 6 heads."""
    torch.manual_seed(0)
    pre = TransformerBlock(384, 6, max_seq_len=16, pre_ln=True, dropout=0.0)
    post = TransformerBlock(384, 6, max_seq_len=16, pre_ln=False, dropout=0.0)
    post.load_state_dict(pre.state_dict(), strict=True)
    x = torch.randn(2, 16, 384)
    y_pre, y_post = pre(x), post(x)
    assert y_pre.shape == y_post.shape == x.shape
    assert not torch.allclose(y_pre, y_post)


@pytest.mark.parametrize("pre_ln", [True, False])
@pytest.mark.parametrize("impl", IMPLS)
def test_causality(pre_ln, impl):
    b = block(pre_ln=pre_ln, attn_impl=impl)
    x = torch.randn(2, 8, D)
    y = b(x)
    for t in range(7):
        changed = x.clone()
        changed[:, t + 1 :] += torch.randn(2, 7 - t, D)
        torch.testing.assert_close(b(changed)[:, : t + 1], y[:, : t + 1], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("pre_ln", [True, False])
def test_explicit_and_sdpa_blocks_agree(pre_ln):
    b = block(pre_ln=pre_ln)
    other = twin(b, pre_ln=pre_ln, attn_impl="sdpa")
    x = torch.randn(3, 9, D)
    torch.testing.assert_close(other(x), b(x))


@pytest.mark.parametrize("pre_ln", [True, False])
@pytest.mark.parametrize("mlp", ["gelu", "swiglu"])
def test_dropout_is_inactive_in_eval_mode(pre_ln, mlp):
    with_dropout = block(pre_ln=pre_ln, mlp=mlp, dropout=0.3)
    without = twin(with_dropout, pre_ln=pre_ln, mlp=mlp, dropout=0.0)
    x = torch.randn(2, 6, D)
    torch.testing.assert_close(with_dropout.eval()(x), without.eval()(x))
    assert not torch.allclose(
        with_dropout.train()(x), without.train()(x)
    )  # ... and active in training


def zero_sublayer_outputs(b: TransformerBlock) -> TransformerBlock:
    """Zero the projections that write into the residual stream (out_proj, fc_out)."""
    with torch.no_grad():
        for linear in (b.attn.out_proj, b.mlp.fc_out):
            linear.weight.zero_()
            linear.bias.zero_()
    return b


def test_residual_stream_is_never_dropped_pre_ln():
    # Both sublayers now output exactly 0, so pre-LN must return x bit for bit,
    # even in training mode with dropout 0.9: dropout may only act inside the sublayers.
    b = zero_sublayer_outputs(block(pre_ln=True, dropout=0.9)).train()
    x = torch.randn(4, 10, D)
    for _ in range(3):
        assert torch.equal(b(x), x)


def test_residual_stream_is_never_dropped_post_ln():
    b = zero_sublayer_outputs(block(pre_ln=False, dropout=0.9)).train()
    x = torch.randn(4, 10, D)
    assert torch.equal(b(x), b.norm2(b.norm1(x)))


def test_attention_mask_is_passed_through():
    b = block()
    x = torch.randn(2, 5, D)
    mask = torch.ones(2, 1, 5, 5, dtype=torch.bool)
    mask[0, ..., 0] = False
    y = b(x, mask)
    torch.testing.assert_close(y[1], b(x)[1])
    assert not torch.allclose(y[0, 1:], b(x)[0, 1:])


def test_stack_applies_blocks_in_order_then_final_norm():
    stack = randomize(TransformerStack(3, final_norm=True, d_model=D, n_heads=H, max_seq_len=T_MAX))
    assert len(stack.blocks) == 3 and isinstance(stack.final_norm, LayerNorm)
    x = torch.randn(2, 6, D)
    expected = x
    for b in stack.blocks:
        expected = b(expected)
    torch.testing.assert_close(stack(x), stack.final_norm(expected))
    assert TransformerStack(2, d_model=D, n_heads=H, max_seq_len=4).final_norm is None
    rms = TransformerStack(1, final_norm=True, d_model=D, n_heads=H, max_seq_len=4, norm="rmsnorm")
    assert isinstance(rms.final_norm, RMSNorm)


def test_stack_blocks_are_independent_modules():
    stack = TransformerStack(2, d_model=D, n_heads=H, max_seq_len=4)
    a, b = stack.blocks
    assert a.attn.qkv_proj.weight.data_ptr() != b.attn.qkv_proj.weight.data_ptr()
    assert not torch.equal(a.attn.qkv_proj.weight, b.attn.qkv_proj.weight)
