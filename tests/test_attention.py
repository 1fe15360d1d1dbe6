"""Unit tests of the causal mask, scaled dot-product attention and MultiHeadAttention."""

import math

import pytest
import torch

import tfcourse as tc
from tfcourse import KVCache, MultiHeadAttention, causal_mask, scaled_dot_product_attention

D, H, T_MAX = 16, 4, 12
IMPLS = ["explicit", "sdpa"]
TORCH_2_5 = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 5)


def make_mha(**kwargs) -> MultiHeadAttention:
    kwargs = {"max_seq_len": T_MAX, **kwargs}
    mha = MultiHeadAttention(D, H, **kwargs)
    with torch.no_grad():  # non-trivial biases, so a dropped bias shows
        mha.qkv_proj.bias.normal_()
        mha.out_proj.bias.normal_()
    return mha


def twin(mha: MultiHeadAttention, **changes) -> MultiHeadAttention:
    """The same weights in a module built with other constructor arguments."""
    kwargs = dict(
        max_seq_len=mha.max_seq_len,
        dropout=mha.dropout,
        causal=mha.causal,
        attn_impl=mha.attn_impl,
        bias=mha.qkv_proj.bias is not None,
    )
    other = MultiHeadAttention(mha.d_model, mha.n_heads, **{**kwargs, **changes})
    other.to(mha.qkv_proj.weight.dtype).load_state_dict(mha.state_dict(), strict=True)
    return other


# --- causal_mask and the attention function ------------------------------------------------


def test_causal_mask_is_lower_triangle_including_diagonal():
    expected = torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=torch.bool)
    assert torch.equal(causal_mask(3), expected)
    assert causal_mask(1).dtype == torch.bool and causal_mask(1).item() is True


def test_attention_matches_the_formula():
    q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 7, 4), torch.randn(2, 3, 7, 6)
    out, weights = scaled_dot_product_attention(q, k, v)
    expected_weights = (q @ k.transpose(-2, -1) / math.sqrt(4)).softmax(-1)
    torch.testing.assert_close(weights, expected_weights)
    torch.testing.assert_close(out, expected_weights @ v)
    assert out.shape == (2, 3, 5, 6) and weights.shape == (2, 3, 5, 7)


def test_masked_weights_are_zero_and_rows_sum_to_one():
    q = k = v = torch.randn(2, 6, 4)
    _, weights = scaled_dot_product_attention(q, k, v, mask=causal_mask(6))
    assert torch.all(weights.triu(diagonal=1) == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 6))


def test_fully_masked_row_gives_zeros_not_nan():
    q = torch.randn(1, 3, 4, requires_grad=True)
    k, v = torch.randn(1, 3, 4), torch.randn(1, 3, 4)
    mask = torch.ones(3, 3, dtype=torch.bool)
    mask[1] = False  # query 1 may attend to nothing
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert torch.equal(weights[0, 1], torch.zeros(3)) and torch.equal(out[0, 1], torch.zeros(4))
    out.sum().backward()
    assert torch.isfinite(q.grad).all()


def test_attention_dropout_acts_on_the_weights():
    q = k = v = torch.randn(1, 8, 4)
    out, weights = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(1, 8))  # returned before dropout
    assert not torch.allclose(out, weights @ v)


# --- MultiHeadAttention ----------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
def test_shapes_and_returned_weights(impl):
    mha = make_mha(attn_impl=impl)
    x = torch.randn(3, 7, D)
    assert mha(x).shape == (3, 7, D)
    out, weights = mha(x, return_weights=True)
    assert out.shape == (3, 7, D) and weights.shape == (3, H, 7, 7)
    assert torch.all(weights.triu(diagonal=1) == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, H, 7))
    torch.testing.assert_close(out, mha(x))


@pytest.mark.parametrize("impl", IMPLS)
def test_single_token_and_full_context(impl):
    mha = make_mha(attn_impl=impl)
    assert mha(torch.randn(1, 1, D)).shape == (1, 1, D)
    assert mha(torch.randn(2, T_MAX, D)).shape == (2, T_MAX, D)


@pytest.mark.parametrize("impl", IMPLS)
def test_causality_future_tokens_never_change_the_past(impl):
    mha = make_mha(attn_impl=impl)
    x = torch.randn(2, 8, D)
    y = mha(x)
    for t in range(7):
        changed = x.clone()
        changed[:, t + 1 :] = torch.randn(2, 7 - t, D)
        torch.testing.assert_close(mha(changed)[:, : t + 1], y[:, : t + 1], rtol=1e-6, atol=1e-6)


def test_without_causal_mask_the_future_leaks():
    mha = make_mha(causal=False)
    x = torch.randn(1, 5, D)
    changed = x.clone()
    changed[:, -1] += 1.0
    assert not torch.allclose(mha(x)[:, 0], mha(changed)[:, 0])


def test_head_weights_depend_only_on_their_own_slices():
    mha = make_mha()
    x = torch.randn(2, 6, D)
    _, weights = mha(x, return_weights=True)
    hd = D // H
    for h in range(H):
        rows = torch.zeros(3 * D, dtype=torch.bool)  # q and k rows of every other head,
        for block in (0, D):  # and all value rows
            rows[block : block + D] = True
            rows[block + h * hd : block + (h + 1) * hd] = False
        rows[2 * D :] = True
        other = twin(mha)
        with torch.no_grad():
            other.qkv_proj.weight[rows] += torch.randn(int(rows.sum()), D)
            other.qkv_proj.bias[rows] += 1.0
        _, other_weights = other(x, return_weights=True)
        torch.testing.assert_close(other_weights[:, h], weights[:, h])
        others = [g for g in range(H) if g != h]
        assert not torch.allclose(other_weights[:, others], weights[:, others])


def test_heads_are_merged_in_order():
    """Head h's values reach out_proj through input columns [h*hd, (h+1)*hd) only."""
    mha = make_mha()
    hd = D // H
    x = torch.randn(2, 5, D)
    with torch.no_grad():
        mha.out_proj.weight[:, hd:] = 0  # keep only head 0's columns
    other = twin(mha)
    with torch.no_grad():
        other.qkv_proj.weight[2 * D + hd :] += 1.0  # change the values of heads 1..H-1
    torch.testing.assert_close(other(x), mha(x))


@pytest.mark.parametrize("impl", IMPLS)
def test_mask_is_a_buffer_not_in_state_dict(impl):
    mha = make_mha(attn_impl=impl)
    assert "mask" in dict(mha.named_buffers())
    assert "mask" not in mha.state_dict()
    assert sorted(mha.state_dict()) == [
        "out_proj.bias",
        "out_proj.weight",
        "qkv_proj.bias",
        "qkv_proj.weight",
    ]
    assert torch.equal(mha.mask, causal_mask(T_MAX))
    # A checkpoint does not depend on max_seq_len, and .double() leaves the bool mask alone.
    longer = MultiHeadAttention(D, H, max_seq_len=2 * T_MAX)
    longer.load_state_dict(mha.state_dict(), strict=True)
    assert mha.double().mask.dtype == torch.bool


@pytest.mark.parametrize("bias", [True, False])
def test_parameter_layout(bias):
    mha = MultiHeadAttention(D, H, max_seq_len=4, bias=bias)
    shapes = {n: tuple(p.shape) for n, p in mha.named_parameters()}
    expected = {"qkv_proj.weight": (3 * D, D), "out_proj.weight": (D, D)}
    if bias:
        expected |= {"qkv_proj.bias": (3 * D,), "out_proj.bias": (D,)}
    assert shapes == expected
    assert mha.head_dim == D // H


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_explicit_and_sdpa_paths_agree(causal, dtype):
    explicit = make_mha(causal=causal).to(dtype)
    sdpa = twin(explicit, attn_impl="sdpa")
    x = torch.randn(3, 9, D, dtype=dtype, requires_grad=True)
    y_explicit = explicit(x)
    (grad_explicit,) = torch.autograd.grad(y_explicit.square().sum(), x)
    y_sdpa = sdpa(x)
    (grad_sdpa,) = torch.autograd.grad(y_sdpa.square().sum(), x)
    torch.testing.assert_close(y_sdpa, y_explicit)
    torch.testing.assert_close(grad_sdpa, grad_explicit)


def test_explicit_and_sdpa_paths_agree_with_masks():
    explicit = make_mha()
    sdpa = twin(explicit, attn_impl="sdpa")
    B, T = 3, 7
    x = torch.randn(B, T, D)
    square = torch.rand(T, T) > 0.3
    square.fill_diagonal_(True)  # every query keeps a key
    lengths = torch.tensor([7, 4, 2])  # right padding: key j valid if j < length
    padding = (torch.arange(T) < lengths[:, None])[:, None, None, :].expand(B, 1, T, T)
    for mask in (square, padding, square[None, None]):
        torch.testing.assert_close(sdpa(x, mask), explicit(x, mask))
        assert not torch.allclose(explicit(x, mask), explicit(x))


@pytest.mark.parametrize("impl", IMPLS)
def test_padding_mask_hides_padded_keys(impl):
    mha = make_mha(attn_impl=impl, causal=False)
    x = torch.randn(2, 6, D)
    valid = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    mask = valid[:, None, None, :].expand(2, 1, 6, 6)
    changed = x.clone()
    changed[0, 4:] = torch.randn(2, D)  # only padded positions change
    torch.testing.assert_close(mha(changed, mask)[0, :4], mha(x, mask)[0, :4])


@pytest.mark.parametrize("impl", IMPLS)
def test_fully_masked_query_rows_give_zeros_not_nan(impl):
    if impl == "sdpa" and not TORCH_2_5:
        pytest.skip(
            "F.scaled_dot_product_attention returns NaN for fully masked rows before torch 2.5"
        )
    mha = make_mha(attn_impl=impl)
    x = torch.randn(2, 5, D, requires_grad=True)
    valid = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=torch.bool)  # left padding
    mask = valid[:, None, None, :].expand(2, 1, 5, 5)
    out = mha(x, mask)
    # Queries 0 and 1 of sequence 0 see no key (causal + padding): attention gives 0,
    # so the output is out_proj's bias.
    torch.testing.assert_close(out[0, :2], mha.out_proj.bias.expand(2, D))
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(x.grad).all()


@pytest.mark.parametrize("rope_base", [None, 10000.0])
@pytest.mark.parametrize("impl", IMPLS)
def test_kv_cache_matches_full_forward(impl, rope_base):
    mha = make_mha(attn_impl=impl, rope_base=rope_base).eval()
    x = torch.randn(2, 9, D)
    full = mha(x)
    cache = KVCache()
    pieces = [mha(x[:, :3], cache=cache)]  # prompt
    pieces += [mha(x[:, t : t + 1], cache=cache) for t in range(3, 6)]  # one token at a time
    pieces.append(mha(x[:, 6:], cache=cache))  # several new tokens after a cache
    assert len(cache) == 9 and cache.k.shape == (2, H, 9, D // H)
    torch.testing.assert_close(torch.cat(pieces, dim=1), full)


@pytest.mark.parametrize("impl", IMPLS)
def test_dropout_is_inactive_in_eval_mode(impl):
    with_dropout = make_mha(attn_impl=impl, dropout=0.5)
    without = twin(with_dropout, dropout=0.0)
    x = torch.randn(2, 6, D)
    torch.testing.assert_close(with_dropout.eval()(x), without.eval()(x))
    assert not torch.allclose(with_dropout.train()(x), without(x))


def test_dropout_sits_after_softmax_and_after_out_proj():
    mha = make_mha(dropout=0.5).train()
    assert mha.resid_dropout.p == 0.5
    x = torch.randn(2, 6, D)
    _, weights = mha(x, return_weights=True)
    # Weights are returned before attention dropout: still rows summing to 1.
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, H, 6))
    # With out_proj zeroed, residual dropout has nothing to drop: the output is exactly 0.
    with torch.no_grad():
        mha.out_proj.weight.zero_()
        mha.out_proj.bias.zero_()
    assert torch.equal(mha(x), torch.zeros(2, 6, D))


# --- grouped-query attention ------------------------------------------------------------------


@pytest.mark.parametrize("impl", ["explicit", "sdpa"])
@pytest.mark.parametrize("n_kv_heads", [2, 1])
def test_grouped_query_attention_equals_mha_with_shared_kv_weights(impl, n_kv_heads):
    """GQA with H_kv kv heads is plain MHA whose k/v rows are copied to each head of a group."""
    D, H, hd = 32, 4, 8
    torch.manual_seed(0)
    gqa = tc.MultiHeadAttention(D, H, max_seq_len=16, n_kv_heads=n_kv_heads, attn_impl=impl).eval()
    mha = tc.MultiHeadAttention(D, H, max_seq_len=16, attn_impl=impl).eval()
    K = n_kv_heads * hd
    with torch.no_grad():
        w, b = gqa.qkv_proj.weight, gqa.qkv_proj.bias
        q_w, k_w, v_w = w.split([D, K, K])
        q_b, k_b, v_b = b.split([D, K, K])
        rep = H // n_kv_heads

        def widen(t):  # (H_kv*hd, ...) -> (H*hd, ...), grouped
            return (
                t.reshape(n_kv_heads, 1, hd, *t.shape[1:])
                .expand(n_kv_heads, rep, hd, *t.shape[1:])
                .reshape(H * hd, *t.shape[1:])
            )

        mha.qkv_proj.weight.copy_(torch.cat([q_w, widen(k_w), widen(v_w)]))
        mha.qkv_proj.bias.copy_(torch.cat([q_b, widen(k_b), widen(v_b)]))
        mha.out_proj.load_state_dict(gqa.out_proj.state_dict())
    x = torch.randn(2, 7, D)
    torch.testing.assert_close(gqa(x), mha(x), rtol=1e-5, atol=1e-6)
    assert gqa.qkv_proj.weight.shape == (D + 2 * K, D)


@pytest.mark.parametrize("n_kv_heads, message", [(3, "must divide n_heads=4"), (0, "n_kv_heads")])
def test_bad_kv_head_counts_are_refused(n_kv_heads, message):
    with pytest.raises(ValueError, match=message):
        tc.MultiHeadAttention(32, 4, max_seq_len=8, n_kv_heads=n_kv_heads)
    with pytest.raises(ValueError, match=message):
        tc.GPTConfig(n_heads=4, d_model=32, n_kv_heads=n_kv_heads)
