"""The production notebook's claims that are about results, not speed: safe masked softmax,
KV-cache equality, autocast, fused QKV, the mask buffer, and the measurement helpers.

No test asserts a timing.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tfcourse as tc
from tfcourse.lab import production, timing

# ----------------------------------------------------------------------------- safe softmax


def fully_masked_first_row(T=4):
    mask = tc.causal_mask(T).clone()
    mask[0] = False  # query 0 may attend to nothing
    return mask


def test_naive_masked_softmax_gives_nan_on_a_fully_masked_row():
    scores = torch.randn(2, 3, 4, 4)
    naive = scores.masked_fill(~fully_masked_first_row(), float("-inf")).softmax(dim=-1)
    assert torch.isnan(naive[..., 0, :]).all() and not torch.isnan(naive[..., 1:, :]).any()


def test_package_attention_zeroes_fully_masked_rows():
    q, k, v = (torch.randn(2, 3, 4, 8, requires_grad=True) for _ in range(3))
    out, weights = tc.scaled_dot_product_attention(q, k, v, fully_masked_first_row())
    assert not torch.isnan(out).any() and not torch.isnan(weights).any()
    assert torch.equal(weights[..., 0, :], torch.zeros_like(weights[..., 0, :]))
    assert torch.equal(out[..., 0, :], torch.zeros_like(out[..., 0, :]))
    torch.testing.assert_close(weights[..., 1:, :].sum(-1), torch.ones(2, 3, 3))
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_large_negative_fill_overflows_in_half_precision():
    scores = torch.randn(1, 4, 4).half()
    with pytest.raises(RuntimeError):
        scores.masked_fill(~tc.causal_mask(4), -1e9)
    filled = scores.masked_fill(~tc.causal_mask(4), torch.finfo(torch.float16).min)
    assert torch.isfinite(filled.float().softmax(-1)).all()


# ----------------------------------------------------------------------------- KV cache


@pytest.mark.parametrize("preset", ["tiny", "llama-tiny"])
def test_generate_with_cache_equals_without(preset):
    torch.manual_seed(0)
    config = tc.GPTConfig.preset(
        preset, vocab_size=64, max_seq_len=48, n_layers=2, n_heads=2, d_model=32
    )
    model = tc.GPT(config).eval()
    prompt = torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(1))
    greedy = model.generate(prompt, 20, temperature=0)
    assert torch.equal(greedy, model.generate(prompt, 20, temperature=0, use_cache=True))
    sampled = model.generate(prompt, 20, top_k=8, generator=torch.Generator().manual_seed(2))
    cached = model.generate(
        prompt, 20, top_k=8, generator=torch.Generator().manual_seed(2), use_cache=True
    )
    assert torch.equal(sampled, cached)


def test_cached_logits_match_full_forward():
    torch.manual_seed(0)
    model = tc.GPT(tc.GPTConfig.preset("tiny", max_seq_len=32)).eval()
    idx = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(3))
    caches = [tc.KVCache() for _ in model.blocks]
    with torch.no_grad():
        full = model(idx)
        steps = [model(idx[:, :5], caches=caches)]
        steps += [model(idx[:, t : t + 1], caches=caches) for t in range(5, 12)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)
    assert all(len(c) == 12 for c in caches)


def test_decode_step_times_same_tokens_both_ways():
    torch.manual_seed(0)
    model = tc.GPT(tc.GPTConfig.preset("tiny", max_seq_len=32)).eval()
    prompt = torch.randint(0, 64, (1, 4), generator=torch.Generator().manual_seed(4))
    a, times_a = production.decode_step_times(model, prompt, 10, use_cache=False)
    b, times_b = production.decode_step_times(model, prompt, 10, use_cache=True)
    assert torch.equal(a, b) and torch.equal(a, model.generate(prompt, 10, temperature=0))
    assert len(times_a) == len(times_b) == 10 and min(times_a + times_b) > 0


def test_attend_with_cache_chunks_equal_full_attention():
    q, k, v = (torch.randn(2, 3, 9, 8) for _ in range(3))
    full, _ = tc.scaled_dot_product_attention(q, k, v, tc.causal_mask(9))
    past_k = past_v = None
    outs = []
    for chunk in (slice(0, 4), slice(4, 5), slice(5, 9)):
        out, past_k, past_v = production.attend_with_cache(
            q[..., chunk, :], k[..., chunk, :], v[..., chunk, :], past_k, past_v
        )
        outs.append(out)
    torch.testing.assert_close(torch.cat(outs, dim=-2), full)
    assert torch.equal(past_k, k) and torch.equal(past_v, v)
    with pytest.raises(ValueError, match="both"):
        production.attend_with_cache(q, k, v, past_k, None)


# ----------------------------------------------------------------------------- autocast


def test_autocast_bf16_on_cpu_runs_and_stays_close():
    torch.manual_seed(0)
    block = tc.TransformerBlock(32, 4, max_seq_len=16).eval()
    x = torch.randn(2, 16, 32)
    result = production.measure_autocast(block, x, dtype=torch.bfloat16, repeats=1)
    assert result["finite"] and result["rel_err"] < 0.05 and result["dtype"] == "bfloat16"
    # The residual stream stays float32: x (float32) + a bfloat16 sublayer output promotes.
    assert result["output_dtype"] == "float32"


def test_gpt_loss_under_autocast_is_finite_and_backpropagates():
    torch.manual_seed(0)
    model = tc.GPT(tc.GPTConfig.preset("tiny"))
    idx = torch.randint(0, 64, (2, 16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model.loss(idx[:, :-1], idx[:, 1:])
    loss.backward()
    assert torch.isfinite(loss) and all(torch.isfinite(p.grad).all() for p in model.parameters())
    assert production.autocast_dtype("cpu") == torch.bfloat16


# ------------------------------------------------------------------------ fused QKV, mask buffer


def test_fuse_qkv_equals_three_projections():
    q, k, v = (torch.nn.Linear(12, 12) for _ in range(3))
    fused = production.fuse_qkv(q, k, v)
    x = torch.randn(3, 5, 12)
    torch.testing.assert_close(fused(x), torch.cat([q(x), k(x), v(x)], dim=-1))
    assert fused.weight.data_ptr() != q.weight.data_ptr()
    with pytest.raises(ValueError, match="same shape"):
        production.fuse_qkv(q, k, torch.nn.Linear(12, 6))
    with pytest.raises(TypeError):
        production.fuse_qkv(q, k, "v")


def test_per_call_mask_attention_equals_buffered():
    torch.manual_seed(0)
    buffered = tc.MultiHeadAttention(16, 2, max_seq_len=12).eval()
    per_call = production.PerCallMaskAttention(16, 2, max_seq_len=12).eval()
    per_call.load_state_dict(buffered.state_dict())
    x = torch.randn(2, 12, 16)
    torch.testing.assert_close(per_call(x), buffered(x))
    cache_a, cache_b = tc.KVCache(), tc.KVCache()
    torch.testing.assert_close(per_call(x[:, :7], cache=cache_a), buffered(x[:, :7], cache=cache_b))
    torch.testing.assert_close(per_call(x[:, 7:], cache=cache_a), buffered(x[:, 7:], cache=cache_b))


# ----------------------------------------------------------------------------- measurement helpers


def test_measurements_return_consistent_results():
    fusion = production.measure_qkv_fusion(8, 16, repeats=2)
    assert fusion["max_diff"] < 1e-5 and fusion["speedup"] > 0
    mask = production.measure_mask_buffer(32, repeats=2)
    assert mask["max_diff"] < 1e-5 and mask["mask_bytes"] == 32 * 32
    assert mask["peak_buffer_bytes"] is None  # CPU: no allocator peak to read
    attention = production.measure_attention_impls(32, repeats=2)
    assert attention["max_diff_sdpa_mask"] < 1e-5 and attention["max_diff_sdpa_causal"] < 1e-5


def test_sdpa_matches_explicit_with_padding_mask_and_no_causal():
    q, k, v = (torch.randn(2, 2, 5, 8) for _ in range(3))
    keep = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    pad = keep[:, None, None, :].expand(2, 1, 5, 5)
    ours, _ = tc.scaled_dot_product_attention(q, k, v, pad)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=pad, is_causal=False)
    torch.testing.assert_close(ours, theirs)


def test_timing_helpers():
    times = timing.compare_times({"a": lambda: None, "b": lambda: sum(range(100))}, repeats=3)
    assert list(times) == ["a", "b"] and all(t >= 0 for t in times.values())
    assert timing.median_time(lambda: None, repeats=2, warmup=0) >= 0
    assert timing.format_seconds(0.0015) == "1.5 ms" and timing.format_bytes(3 * 2**20) == "3 MiB"
    assert timing.tensor_bytes(torch.zeros(4, 4, dtype=torch.bool)) == 16
    with pytest.raises(ValueError):
        timing.compare_times({})
    with pytest.raises(ValueError):
        timing.compare_times({"a": lambda: None}, warmup=-1)


@pytest.mark.slow
def test_try_compile_falls_back_gracefully():
    block = tc.TransformerBlock(16, 2, max_seq_len=8).eval()
    x = torch.randn(1, 8, 16)
    result = production.try_compile(block, x, backend="no_such_backend")
    assert not result.compiled and result.module is block and result.reason
    assert result.module(x).shape == x.shape


# ------------------------------------------------------------------------ preallocated KV cache


def test_preallocated_cache_gives_the_same_logits_as_kv_cache():
    torch.manual_seed(0)
    model = tc.GPT(tc.GPTConfig.preset("tiny", max_seq_len=32)).eval()
    idx = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(3))
    concat = [tc.KVCache() for _ in model.blocks]
    prealloc = [production.PreallocatedKVCache(32) for _ in model.blocks]
    with torch.no_grad():
        for chunk in (slice(0, 5), slice(5, 6), slice(6, 12)):
            # Same numbers up to rounding: a view of the storage may take another matmul path.
            torch.testing.assert_close(
                model(idx[:, chunk], caches=prealloc), model(idx[:, chunk], caches=concat)
            )
    assert all(len(c) == 12 for c in prealloc)
    assert torch.equal(prealloc[0].k, concat[0].k) and torch.equal(prealloc[0].v, concat[0].v)


def test_preallocated_cache_writes_in_place_and_validates():
    cache = production.PreallocatedKVCache(5)
    assert len(cache) == 0 and cache.k is None
    k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4)
    k_all, _ = cache.append(k, v)
    storage = k_all.data_ptr()
    k_all, _ = cache.append(k[:, :, :1], v[:, :, :1])
    assert k_all.shape == (1, 2, 4, 4) and k_all.data_ptr() == storage  # no new allocation
    assert torch.equal(k_all[:, :, :3], k) and torch.equal(k_all[:, :, 3:], k[:, :, :1])
    cache.truncate(2)
    assert len(cache) == 2 and torch.equal(cache.k, k[:, :, :2])
    with pytest.raises(ValueError, match="max_len=5"):
        cache.append(torch.randn(1, 2, 4, 4), torch.randn(1, 2, 4, 4))
    with pytest.raises(ValueError, match="head_dim=4"):
        cache.append(torch.randn(1, 2, 1, 8), torch.randn(1, 2, 1, 8))
    with pytest.raises(ValueError, match="same shape"):
        cache.append(torch.randn(1, 2, 1, 4), torch.randn(1, 2, 2, 4))
    with pytest.raises(ValueError, match=r"\(B, H, T_new, head_dim\)"):
        cache.append(torch.randn(2, 1, 4), torch.randn(2, 1, 4))
    with pytest.raises(ValueError, match="length"):
        cache.truncate(3)
    with pytest.raises(ValueError, match="max_len"):
        production.PreallocatedKVCache(0)


def test_measure_decode_step_compares_both_caches():
    torch.manual_seed(0)
    model = tc.GPT(tc.GPTConfig.preset("tiny", max_seq_len=64)).eval()
    rows = production.measure_decode_step(model, (4, 32), repeats=2)
    assert [row["T"] for row in rows] == [4, 32]
    assert all(
        row["max_diff"] < 1e-5 and row["concat_s"] > 0 and row["prealloc_s"] > 0 for row in rows
    )
    c = model.config
    assert rows[1]["cache_bytes"] == 2 * c.n_layers * c.n_heads * 32 * c.head_dim * 4
    with pytest.raises(ValueError, match="max_seq_len"):
        production.measure_decode_step(model, (64,), repeats=1)


# ------------------------------------------------------------ autocast policy, memory, profiler


def test_cpu_autocast_policy():
    dtypes = production.autocast_op_dtypes("cpu", torch.bfloat16)
    assert dtypes["F.linear (float32)"] == torch.bfloat16
    assert dtypes["F.softmax (bfloat16)"] == torch.bfloat16 == dtypes["F.layer_norm (bfloat16)"]
    assert dtypes["F.cross_entropy (bfloat16)"] == torch.float32 == dtypes["F.softmax (float32)"]
    with pytest.raises(TypeError, match="floating"):
        production.autocast_op_dtypes("cpu", torch.int32)


def test_peak_memory_counts_the_score_matrices():
    q, k, v = (torch.randn(1, 2, 128, 8) for _ in range(3))
    scores = 2 * 128 * 128 * 4
    explicit = timing.peak_memory_bytes(lambda: tc.scaled_dot_product_attention(q, k, v), "cpu")
    assert explicit >= 2 * scores  # scores and weights are alive together
    assert timing.peak_memory_bytes(lambda: torch.empty(1000, dtype=torch.uint8), "cpu") >= 1000
    assert timing.peak_memory_bytes(lambda: None, "cpu") == 0
    with pytest.raises(ValueError, match="'mps'"):
        timing.peak_memory_bytes(lambda: None, "mps")
    with pytest.raises(TypeError, match="callable"):
        timing.peak_memory_bytes(torch.zeros(3), "cpu")


def test_profile_ops_names_the_operators():
    x = torch.randn(16, 16)
    ops = timing.profile_ops(lambda: x @ x, repeats=2)
    assert "aten::mm" in ops and ops["aten::mm"]["calls"] == 2
    assert ops["aten::mm"]["self_s"] >= 0 and ops["aten::mm"]["self_bytes"] >= 16 * 16 * 4
    assert all(name.startswith("aten::") for name in ops)
    with pytest.raises(ValueError):
        timing.profile_ops(lambda: None, repeats=0)
    with pytest.raises(TypeError, match="callable"):
        timing.profile_ops("x @ x")
