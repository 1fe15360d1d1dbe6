"""Parity with independent implementations, weights copied.

max |diff| <= 1e-5 in float32 and <= 1e-10 in float64.

References: torch's nn.LayerNorm, nn.RMSNorm, F.scaled_dot_product_attention,
nn.MultiheadAttention, nn.TransformerEncoderLayer, and Hugging Face's GPT2Block and
GPT2LMHeadModel built offline from random-init configs.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tfcourse import (
    GPT,
    LayerNorm,
    MultiHeadAttention,
    RMSNorm,
    TransformerBlock,
    scaled_dot_product_attention,
)

DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: 1e-5, torch.float64: 1e-10}


def assert_max_diff(ours: torch.Tensor, theirs: torch.Tensor, dtype: torch.dtype) -> None:
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    diff = (ours - theirs).abs().max().item()
    assert diff <= TOL[dtype], f"max |diff| = {diff:.3g} > {TOL[dtype]:g} ({dtype})"


def perturb(module: nn.Module, scale: float = 0.05) -> nn.Module:
    """Move every parameter off its init (LayerNorm weight 1, biases 0), so each one matters."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn_like(p) * scale)
    return module


# --- norms ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("eps", [1e-5, 0.1])
@pytest.mark.parametrize("bias", [True, False])
def test_layernorm_matches_torch(dtype, eps, bias):
    ours = perturb(LayerNorm(24, eps=eps, bias=bias)).to(dtype)
    theirs = nn.LayerNorm(24, eps=eps, bias=bias).to(dtype)
    theirs.load_state_dict(ours.state_dict(), strict=True)
    for shape in [(3, 7, 24), (1, 1, 24), (5, 24)]:
        x = torch.randn(shape, dtype=dtype) * 2 + 0.5
        assert_max_diff(ours(x), theirs(x), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("eps", [1e-6, 0.1])
def test_rmsnorm_matches_torch(dtype, eps):
    ours = perturb(RMSNorm(24, eps=eps)).to(dtype)
    theirs = nn.RMSNorm(24, eps=eps).to(dtype)
    theirs.load_state_dict(ours.state_dict(), strict=True)
    x = torch.randn(3, 7, 24, dtype=dtype)
    assert_max_diff(ours(x), theirs(x), dtype)


# --- attention -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_function_matches_torch_sdpa(dtype):
    q = torch.randn(2, 3, 6, 8, dtype=dtype)
    k = torch.randn(2, 3, 9, 8, dtype=dtype)
    v = torch.randn(2, 3, 9, 5, dtype=dtype)
    random_mask = torch.rand(6, 9) > 0.4
    random_mask[:, 0] = True  # every query keeps a key
    assert_max_diff(
        scaled_dot_product_attention(q, k, v)[0], F.scaled_dot_product_attention(q, k, v), dtype
    )
    assert_max_diff(
        scaled_dot_product_attention(q, k, v, mask=random_mask)[0],
        F.scaled_dot_product_attention(q, k, v, attn_mask=random_mask),
        dtype,
    )
    square_q, square_k, square_v = q, k[..., :6, :], v[..., :6, :]
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    assert_max_diff(
        scaled_dot_product_attention(square_q, square_k, square_v, mask=causal)[0],
        F.scaled_dot_product_attention(square_q, square_k, square_v, is_causal=True),
        dtype,
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_multi_head_attention_matches_torch(dtype):
    D, H, T = 24, 4, 7
    ours = perturb(MultiHeadAttention(D, H, max_seq_len=T)).to(dtype)
    theirs = nn.MultiheadAttention(D, H, batch_first=True, dtype=dtype)
    # Same layout: in_proj_weight stacks [W_q; W_k; W_v], heads contiguous inside each.
    theirs.load_state_dict(
        {
            "in_proj_weight": ours.qkv_proj.weight,
            "in_proj_bias": ours.qkv_proj.bias,
            "out_proj.weight": ours.out_proj.weight,
            "out_proj.bias": ours.out_proj.bias,
        }
    )
    x = torch.randn(2, T, D, dtype=dtype)
    blocked = ~torch.ones(T, T, dtype=torch.bool).tril()  # torch: True = may NOT attend
    their_out, their_weights = theirs(
        x, x, x, attn_mask=blocked, need_weights=True, average_attn_weights=False
    )
    our_out, our_weights = ours(x, return_weights=True)
    assert_max_diff(our_out, their_out, dtype)
    assert_max_diff(our_weights, their_weights, dtype)


# --- nn.TransformerEncoderLayer -------------------------------------------------------------------


def encoder_layer_from(block: TransformerBlock, pre_ln: bool, dtype) -> nn.TransformerEncoderLayer:
    D = block.d_model
    layer = nn.TransformerEncoderLayer(
        D,
        block.attn.n_heads,
        dim_feedforward=block.mlp.d_hidden,
        dropout=0.0,
        activation="gelu",
        batch_first=True,
        norm_first=pre_ln,
        dtype=dtype,
    )
    mapping = {
        "self_attn.in_proj_weight": "attn.qkv_proj.weight",
        "self_attn.in_proj_bias": "attn.qkv_proj.bias",
        "self_attn.out_proj.weight": "attn.out_proj.weight",
        "self_attn.out_proj.bias": "attn.out_proj.bias",
        "linear1.weight": "mlp.fc_in.weight",
        "linear1.bias": "mlp.fc_in.bias",
        "linear2.weight": "mlp.fc_out.weight",
        "linear2.bias": "mlp.fc_out.bias",
        "norm1.weight": "norm1.weight",
        "norm1.bias": "norm1.bias",
        "norm2.weight": "norm2.weight",
        "norm2.bias": "norm2.bias",
    }
    ours = block.state_dict()
    layer.load_state_dict({theirs: ours[name] for theirs, name in mapping.items()}, strict=True)
    return layer.eval()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pre_ln", [True, False])
@pytest.mark.parametrize("attn_impl", ["explicit", "sdpa"])
def test_block_matches_transformer_encoder_layer(pre_ln, dtype, attn_impl):
    D, H, T = 32, 4, 9
    block = (
        perturb(
            TransformerBlock(
                D, H, max_seq_len=T, pre_ln=pre_ln, activation="gelu", attn_impl=attn_impl
            )
        )
        .to(dtype)
        .eval()
    )
    layer = encoder_layer_from(block, pre_ln, dtype)
    mask = nn.Transformer.generate_square_subsequent_mask(T, dtype=dtype)
    x = torch.randn(3, T, D, dtype=dtype, requires_grad=True)
    ours = block(x)
    theirs = layer(x, src_mask=mask, is_causal=True)
    assert_max_diff(ours, theirs, dtype)
    (our_grad,) = torch.autograd.grad(ours.square().sum(), x)
    (their_grad,) = torch.autograd.grad(theirs.square().sum(), x)
    assert_max_diff(our_grad / our_grad.abs().max(), their_grad / our_grad.abs().max(), dtype)
    with torch.no_grad():  # torch's inference fast path, if it takes it
        assert_max_diff(block(x), layer(x, src_mask=mask, is_causal=True), dtype)


# --- Hugging Face GPT-2 ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hf_gpt2():
    return pytest.importorskip("transformers.models.gpt2.modeling_gpt2")


def gpt2_config(**kwargs):
    from transformers import GPT2Config

    defaults = dict(
        vocab_size=100,
        n_positions=32,
        n_embd=32,
        n_layer=2,
        n_head=4,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        attn_implementation="eager",
    )
    return GPT2Config(**{**defaults, **kwargs})


def first(output):
    return output[0] if isinstance(output, tuple) else output


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_inner", [None, 80])
@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_block_matches_gpt2_block(hf_gpt2, dtype, n_inner, attn_implementation):
    config = gpt2_config(n_inner=n_inner, attn_implementation=attn_implementation)
    theirs = perturb(hf_gpt2.GPT2Block(config, layer_idx=0), scale=0.2).to(dtype).eval()
    D, T = config.n_embd, 10
    ours = TransformerBlock(
        D,
        config.n_head,
        max_seq_len=T,
        activation="gelu_tanh",
        d_hidden=n_inner,
        norm_eps=config.layer_norm_epsilon,
    ).to(dtype)
    hf = theirs.state_dict()
    state = {}
    for their_name, our_name in [
        ("attn.c_attn", "attn.qkv_proj"),
        ("attn.c_proj", "attn.out_proj"),
        ("mlp.c_fc", "mlp.fc_in"),
        ("mlp.c_proj", "mlp.fc_out"),
    ]:
        state[f"{our_name}.weight"] = hf[f"{their_name}.weight"].T  # Conv1D stores (in, out)
        state[f"{our_name}.bias"] = hf[f"{their_name}.bias"]
    for their_name, our_name in [("ln_1", "norm1"), ("ln_2", "norm2")]:
        state[f"{our_name}.weight"] = hf[f"{their_name}.weight"]
        state[f"{our_name}.bias"] = hf[f"{their_name}.bias"]
    ours.load_state_dict(state, strict=True)
    x = torch.randn(2, T, D, dtype=dtype)
    if attn_implementation == "eager":  # eager attention takes an additive mask
        mask = torch.full((T, T), torch.finfo(dtype).min, dtype=dtype).triu(1)[None, None]
        their_out = first(theirs(x, attention_mask=mask))
    else:  # SDPA is causal when no mask is given
        their_out = first(theirs(x))
    assert_max_diff(ours(x), their_out, dtype)


GPT2_SIZES = {
    "2x32-tied": dict(),
    "3x48-n_inner-untied": dict(
        n_layer=3, n_embd=48, n_head=3, n_inner=96, tie_word_embeddings=False
    ),
    "1x64-exact-gelu-eps": dict(
        n_layer=1,
        n_embd=64,
        n_head=8,
        activation_function="gelu",
        layer_norm_epsilon=1e-6,
        vocab_size=300,
        n_positions=64,
    ),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", sorted(GPT2_SIZES))
def test_gpt_matches_gpt2_lm_head_model(hf_gpt2, size, dtype):
    config = gpt2_config(**GPT2_SIZES[size])
    hf_model = perturb(hf_gpt2.GPT2LMHeadModel(config), scale=0.05).to(dtype).eval()
    ours = GPT.from_hf_gpt2(hf_model).eval()
    assert ours.config.n_layers == config.n_layer and ours.config.d_model == config.n_embd
    assert ours.config.tie_weights == config.tie_word_embeddings
    assert (
        ours.lm_head.weight.data_ptr() == ours.tok_emb.weight.data_ptr()
    ) == config.tie_word_embeddings
    assert ours.num_params() == sum(p.numel() for p in hf_model.parameters())
    assert next(ours.parameters()).dtype == dtype
    idx = torch.randint(0, config.vocab_size, (2, 12))
    with torch.no_grad():
        assert_max_diff(ours(idx), hf_model(idx).logits, dtype)


def test_gpt_matches_gpt2_with_left_padding(hf_gpt2):
    hf_model = perturb(hf_gpt2.GPT2LMHeadModel(gpt2_config()), scale=0.02).double().eval()
    ours = GPT.from_hf_gpt2(hf_model).eval()
    idx = torch.randint(0, 100, (2, 8))
    valid = torch.ones(2, 8, dtype=torch.long)
    valid[0, :3] = 0  # sequence 0: three pad tokens on the left
    mask = valid.bool()[:, None, None, :].expand(2, 1, 8, 8)
    with torch.no_grad():
        theirs = hf_model(idx, attention_mask=valid).logits
        mine = ours(idx, mask)
    assert_max_diff(
        mine[0, 3:], theirs[0, 3:], torch.float64
    )  # padded queries are undefined in both
    assert_max_diff(mine[1], theirs[1], torch.float64)


@pytest.mark.slow
def test_gpt_matches_full_size_gpt2_small(hf_gpt2):
    from transformers import GPT2Config

    hf_model = hf_gpt2.GPT2LMHeadModel(GPT2Config(attn_implementation="eager")).eval()
    ours = GPT.from_hf_gpt2(hf_model).eval()
    assert ours.num_params() == 124_439_808
    idx = torch.randint(0, 50257, (1, 16))
    with torch.no_grad():
        assert_max_diff(ours(idx), hf_model(idx).logits, torch.float32)
