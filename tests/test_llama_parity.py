"""Our LLaMA-style block and model match Hugging Face's Llama.

The block is compared with ``LlamaDecoderLayer``, the model with ``LlamaForCausalLM``.

Models are built from small random-init ``LlamaConfig``s: nothing is downloaded.
"""

from __future__ import annotations

import pytest
import torch

import tfcourse as tc
from tfcourse.nn.hf_llama import block_from_hf_llama, llama_config_to_ours

transformers = pytest.importorskip("transformers")

# Importing and first building a transformers model takes seconds.
pytestmark = pytest.mark.slow

VOCAB, D, HEADS, LAYERS, T = 128, 64, 4, 2, 24


def llama_config(**overrides):
    settings = {
        "vocab_size": VOCAB,
        "hidden_size": D,
        "intermediate_size": tc.swiglu_hidden_dim(D, 32),
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": HEADS,
        "max_position_embeddings": 64,
        "rope_theta": 10000.0,
        "rms_norm_eps": 1e-6,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "initializer_range": 0.1,
    }
    settings.update(overrides)
    return transformers.LlamaConfig(**settings)


def hf_llama(dtype=torch.float32, seed=0, **overrides):
    """A random LlamaForCausalLM whose norm weights are not all 1 (so a swapped norm shows)."""
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(llama_config(**overrides)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.3 * torch.randn_like(p))
    return model.to(dtype)


def max_diff(a, b):
    return float((a.double() - b.double()).abs().max())


def layer_outputs(hf_layer, block, x, position_embeddings):
    with torch.no_grad():
        ours = block(x)
        theirs = hf_layer(x, attention_mask=None, position_embeddings=position_embeddings)
    return ours, theirs[0] if isinstance(theirs, tuple) else theirs


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_decoder_layer_matches(dtype):
    model = hf_llama(dtype)
    hf_layer = model.model.layers[1]
    block = block_from_hf_llama(hf_layer, model.config).eval()
    assert block.attn.rotary is not None and isinstance(block.mlp, tc.SwiGLU)
    assert block.attn.qkv_proj.bias is None and block.mlp.gate_proj.bias is None
    x = torch.randn(2, T, D, dtype=dtype, generator=torch.Generator().manual_seed(1))
    cos, sin = model.model.rotary_emb(x, torch.arange(T)[None])  # HF's own tables
    ours, theirs = layer_outputs(hf_layer, block, x, (cos, sin))
    assert max_diff(ours, theirs) <= 1e-5


def test_decoder_layer_float64_with_our_tables_is_exact_up_to_hf_rmsnorm():
    """Fed our float64 tables, only HF's RMSNorm runs in float32 (it upcasts to float32)."""
    model = hf_llama(torch.float64)
    hf_layer = model.model.layers[0]
    block = block_from_hf_llama(hf_layer, model.config).eval()
    x = torch.randn(2, T, D, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    cos, sin = tc.rotary_cos_sin(T, D // HEADS, 10000.0, dtype=torch.float64)
    ours, theirs = layer_outputs(
        hf_layer, block, x, (cos[None].expand(2, -1, -1), sin[None].expand(2, -1, -1))
    )
    assert max_diff(ours, theirs) <= 1e-5


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_whole_model_logits_match(dtype):
    model = hf_llama(dtype)
    ours = tc.GPT.from_hf_llama(model).eval()
    assert ours.pos_emb is None and ours.config.positional == "rope"
    assert next(ours.parameters()).dtype == dtype
    idx = torch.randint(0, VOCAB, (2, T), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        theirs = model(idx).logits
        mine = ours(idx)
    assert mine.shape == theirs.shape == (2, T, VOCAB)
    assert max_diff(mine, theirs) <= 1e-5


def test_parity_is_sensitive_to_a_wrong_conversion():
    """Swapping q and k rows, or the two SwiGLU branches, breaks parity by far more than 1e-5."""
    model = hf_llama()
    idx = torch.randint(0, VOCAB, (1, T), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        theirs = model(idx).logits
    for broken in ("qk", "gate_up"):
        ours = tc.GPT.from_hf_llama(model).eval()
        with torch.no_grad():
            for block in ours.blocks:
                if broken == "qk":
                    q, k, v = block.attn.qkv_proj.weight.chunk(3)
                    block.attn.qkv_proj.weight.copy_(torch.cat([k, q, v]))
                else:
                    gate = block.mlp.gate_proj.weight.clone()
                    block.mlp.gate_proj.weight.copy_(block.mlp.up_proj.weight)
                    block.mlp.up_proj.weight.copy_(gate)
            assert max_diff(ours(idx), theirs) > 1e-3, broken


def test_rope_frequencies_match_hf():
    model = hf_llama()
    hd = D // HEADS
    ours_inv_freq = 1.0 / 10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    torch.testing.assert_close(
        model.model.rotary_emb.inv_freq.double(), ours_inv_freq, rtol=1e-6, atol=0
    )
    x = torch.zeros(1, 64, D)
    cos, sin = model.model.rotary_emb(x, torch.arange(64)[None])
    our_cos, our_sin = tc.rotary_cos_sin(64, hd, 10000.0)
    assert max_diff(cos[0], our_cos) < 1e-5 and max_diff(sin[0], our_sin) < 1e-5


def test_config_conversion():
    config = llama_config_to_ours(llama_config(rope_theta=500000.0, rms_norm_eps=1e-5))
    assert (config.norm, config.mlp, config.positional, config.bias, config.tie_weights) == (
        "rmsnorm",
        "swiglu",
        "rope",
        False,
        False,
    )
    assert config.rope_base == 500000.0 and config.norm_eps == 1e-5 and config.pre_ln
    assert config.d_hidden == tc.swiglu_hidden_dim(D, 32) and config.max_seq_len == 64


def test_tied_embeddings_load():
    model = hf_llama(tie_word_embeddings=True)
    ours = tc.GPT.from_hf_llama(model).eval()
    assert ours.lm_head.weight is ours.tok_emb.weight
    idx = torch.randint(0, VOCAB, (1, 8), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        assert max_diff(ours(idx), model(idx).logits) <= 1e-5


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"num_key_value_heads": 3}, "must divide num_attention_heads"),
        ({"hidden_act": "gelu"}, "silu"),
        ({"attention_bias": True}, "one `bias` flag"),
    ],
)
def test_unsupported_configs_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        llama_config_to_ours(llama_config(**overrides))


def test_scaled_rope_is_refused():
    config = llama_config()
    config.rope_parameters = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}
    with pytest.raises(ValueError, match="rope_type"):
        llama_config_to_ours(config)


def test_greedy_generation_matches_hf_generate():
    model = hf_llama()
    ours = tc.GPT.from_hf_llama(model).eval()
    prompt = torch.randint(0, VOCAB, (1, 5), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        theirs = model.generate(
            prompt,
            max_new_tokens=12,
            do_sample=False,
            pad_token_id=0,
            attention_mask=torch.ones_like(prompt),
        )
    mine = ours.generate(prompt, 12, temperature=0, use_cache=True)
    assert torch.equal(mine, theirs)


# --- grouped-query (2 kv heads for 4 query heads) and multi-query (1) attention ---------------


@pytest.mark.parametrize("kv_heads", [2, 1])
def test_grouped_query_attention_matches_hf(kv_heads):
    model = hf_llama(num_key_value_heads=kv_heads, seed=kv_heads)
    ours = tc.GPT.from_hf_llama(model).eval()
    assert ours.config.n_kv_heads == kv_heads
    assert ours.blocks[0].attn.qkv_proj.weight.shape == (D + 2 * kv_heads * (D // HEADS), D)
    assert ours.num_params() == sum(p.numel() for p in model.parameters())
    idx = torch.randint(0, VOCAB, (2, T), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        assert max_diff(ours(idx), model(idx).logits) <= 1e-5
    prompt = idx[:1, :5]
    with torch.no_grad():
        theirs = model.generate(
            prompt,
            max_new_tokens=12,
            do_sample=False,
            pad_token_id=0,
            attention_mask=torch.ones_like(prompt),
        )
    for use_cache in (False, True):
        assert torch.equal(ours.generate(prompt, 12, temperature=0, use_cache=use_cache), theirs)


def test_the_kv_cache_holds_only_the_kv_heads():
    model = tc.GPT(
        tc.GPTConfig(
            vocab_size=VOCAB,
            max_seq_len=32,
            n_layers=1,
            n_heads=4,
            d_model=D,
            n_kv_heads=1,
            positional="rope",
            norm="rmsnorm",
            mlp="swiglu",
            bias=False,
        )
    ).eval()
    caches = [tc.KVCache() for _ in model.blocks]
    with torch.no_grad():
        model(torch.zeros(2, 5, dtype=torch.long), caches=caches)
    assert caches[0].k.shape == (2, 1, 5, D // 4)  # (B, H_kv, T, head_dim)


def test_grouped_query_parity_is_sensitive_to_the_head_grouping():
    """Pairing query head h with kv head h % H_kv (tiled) instead of h // n_rep (grouped)
    breaks parity: the test can tell the two layouts apart."""
    model = hf_llama(num_key_value_heads=2)
    ours = tc.GPT.from_hf_llama(model).eval()
    idx = torch.randint(0, VOCAB, (1, T), generator=torch.Generator().manual_seed(8))
    import tfcourse.nn.attention as attention

    grouped = attention.repeat_kv
    attention.repeat_kv = lambda t, n_rep: t.repeat(1, n_rep, 1, 1)  # tiled: wrong
    try:
        with torch.no_grad():
            assert max_diff(ours(idx), model(idx).logits) > 1e-3
    finally:
        attention.repeat_kv = grouped
