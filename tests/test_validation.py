"""Bad input gets a clear error: one test per case.

Each case asserts the exception type (ValueError or TypeError, never a crash deep
inside a matmul) and that the message names both what was expected and what was
received.
"""

import pytest
import torch

import tfcourse as tc
from tfcourse import (
    GPT,
    FeedForward,
    GPTConfig,
    KVCache,
    LayerNorm,
    MultiHeadAttention,
    RMSNorm,
    SwiGLU,
    TransformerBlock,
    TransformerStack,
)
from tfcourse.lab.probes import gradient_probe

TINY = GPTConfig(vocab_size=50, max_seq_len=8, n_layers=1, n_heads=2, d_model=8)


def mha():
    return MultiHeadAttention(8, 2, max_seq_len=6)


def model():
    return GPT(TINY)


def x(*shape, dtype=torch.float32):
    return torch.zeros(shape, dtype=dtype)


def token_ids(*shape):
    return torch.zeros(shape, dtype=torch.long)


def attend_with_cache():
    m, cache = mha(), KVCache()
    m(x(1, 2, 8), cache=cache)
    m(x(1, 1, 8), torch.ones(1, 1, dtype=torch.bool), cache=cache)


def generate_with_cache_past_context():
    model().generate(token_ids(1, 5), 4, use_cache=True)


# (id, call, exception type, fragments the message must contain: expected and received)
CASES = [
    # sizes and divisibility
    (
        "mha-d_model-not-divisible",
        lambda: MultiHeadAttention(10, 3, max_seq_len=4),
        ValueError,
        ["divisible by n_heads", "d_model=10", "n_heads=3"],
    ),
    (
        "config-d_model-not-divisible",
        lambda: GPTConfig(d_model=100, n_heads=12),
        ValueError,
        ["divisible by n_heads", "d_model=100", "n_heads=12"],
    ),
    (
        "block-d_model-not-divisible",
        lambda: TransformerBlock(30, 4, max_seq_len=4),
        ValueError,
        ["divisible by n_heads", "d_model=30", "n_heads=4"],
    ),
    (
        "layernorm-zero-width",
        lambda: LayerNorm(0),
        ValueError,
        ["d_model must be a positive int", "got 0"],
    ),
    ("rmsnorm-negative-width", lambda: RMSNorm(-3), ValueError, ["positive int", "got -3"]),
    (
        "mha-zero-heads",
        lambda: MultiHeadAttention(8, 0, max_seq_len=4),
        ValueError,
        ["n_heads must be a positive int", "got 0"],
    ),
    (
        "mha-zero-max_seq_len",
        lambda: MultiHeadAttention(8, 2, max_seq_len=0),
        ValueError,
        ["max_seq_len must be a positive int", "got 0"],
    ),
    (
        "feedforward-negative-hidden",
        lambda: FeedForward(8, -1),
        ValueError,
        ["d_hidden must be a positive int", "got -1"],
    ),
    (
        "swiglu-zero-hidden",
        lambda: SwiGLU(8, 0),
        ValueError,
        ["d_hidden must be a positive int", "got 0"],
    ),
    (
        "stack-zero-layers",
        lambda: TransformerStack(0, d_model=8, n_heads=2, max_seq_len=4),
        ValueError,
        ["n_layers must be a positive int", "got 0"],
    ),
    (
        "config-zero-layers",
        lambda: GPTConfig(n_layers=0),
        ValueError,
        ["n_layers must be a positive int", "got 0"],
    ),
    (
        "config-zero-vocab",
        lambda: GPTConfig(vocab_size=0),
        ValueError,
        ["vocab_size must be a positive int", "got 0"],
    ),
    (
        "config-negative-d_hidden",
        lambda: GPTConfig(d_hidden=-4),
        ValueError,
        ["d_hidden", "got -4"],
    ),
    (
        "config-float-size",
        lambda: GPTConfig(d_model=768.0),
        TypeError,
        ["d_model must be an int", "float"],
    ),
    (
        "config-bool-size",
        lambda: GPTConfig(n_layers=True),
        TypeError,
        ["n_layers must be an int", "bool"],
    ),
    (
        "causal-mask-zero",
        lambda: tc.causal_mask(0),
        ValueError,
        ["T must be a positive int", "got 0"],
    ),
    (
        "swiglu-hidden-dim-zero",
        lambda: tc.swiglu_hidden_dim(0),
        ValueError,
        ["d_model must be a positive int", "got 0"],
    ),
    # probabilities and epsilons
    (
        "mha-dropout-one",
        lambda: MultiHeadAttention(8, 2, max_seq_len=4, dropout=1.0),
        ValueError,
        ["dropout must be in [0, 1)", "got 1.0"],
    ),
    (
        "config-negative-dropout",
        lambda: GPTConfig(dropout=-0.1),
        ValueError,
        ["[0, 1)", "got -0.1"],
    ),
    (
        "feedforward-dropout-string",
        lambda: FeedForward(8, dropout="0.1"),
        TypeError,
        ["float in [0, 1)", "str"],
    ),
    (
        "layernorm-zero-eps",
        lambda: LayerNorm(8, eps=0),
        ValueError,
        ["eps must be a finite number > 0", "got 0"],
    ),
    (
        "config-negative-norm-eps",
        lambda: GPTConfig(norm_eps=-1e-5),
        ValueError,
        ["norm_eps must be a finite number > 0", "-1e-05"],
    ),
    # unknown names
    (
        "feedforward-unknown-activation",
        lambda: FeedForward(8, activation="swish"),
        ValueError,
        ["'gelu', 'gelu_tanh', 'relu'", "'swish'"],
    ),
    (
        "block-unknown-activation",
        lambda: TransformerBlock(8, 2, max_seq_len=4, activation="tanh"),
        ValueError,
        ["activation must be one of", "'tanh'"],
    ),
    (
        "block-unknown-norm",
        lambda: TransformerBlock(8, 2, max_seq_len=4, norm="batchnorm"),
        ValueError,
        ["'layernorm', 'rmsnorm'", "'batchnorm'"],
    ),
    (
        "block-unknown-mlp",
        lambda: TransformerBlock(8, 2, max_seq_len=4, mlp="moe"),
        ValueError,
        ["'gelu', 'swiglu'", "'moe'"],
    ),
    (
        "mha-unknown-attn-impl",
        lambda: MultiHeadAttention(8, 2, max_seq_len=4, attn_impl="flash"),
        ValueError,
        ["'explicit', 'sdpa'", "'flash'"],
    ),
    (
        "config-unknown-norm",
        lambda: GPTConfig(norm="LayerNorm"),
        ValueError,
        ["'layernorm', 'rmsnorm'", "'LayerNorm'"],
    ),
    (
        "config-unknown-positional",
        lambda: GPTConfig(positional="alibi"),
        ValueError,
        ["'learned', 'rope'", "'alibi'"],
    ),
    (
        "config-unknown-preset",
        lambda: GPTConfig.preset("gpt5"),
        ValueError,
        ["'gpt2-small'", "'gpt5'"],
    ),
    (
        "config-rope-odd-head-dim",
        lambda: GPTConfig(positional="rope", d_model=12, n_heads=4),
        ValueError,
        ["even head_dim", "got 3"],
    ),
    ("sinusoidal-odd-width", lambda: tc.sinusoidal_encoding(4, 5), ValueError, ["even", "got 5"]),
    ("gpt-config-not-a-config", lambda: GPT({"d_model": 8}), TypeError, ["GPTConfig", "got dict"]),
    (
        "probe-unknown-loss",
        lambda: gradient_probe(model(), token_ids(1, 4), loss="mse"),
        ValueError,
        ["('lm', 'sum')", "'mse'"],
    ),
    (
        "probe-lm-without-targets",
        lambda: gradient_probe(model(), token_ids(1, 4), loss="lm"),
        ValueError,
        ["needs targets (B, T)", "None"],
    ),
    # activations: type, rank, width, length
    (
        "layernorm-integer-input",
        lambda: LayerNorm(8)(torch.ones(2, 8, dtype=torch.long)),
        TypeError,
        ["floating-point tensor", "torch.int64"],
    ),
    (
        "rmsnorm-integer-input",
        lambda: RMSNorm(8)(torch.ones(2, 8, dtype=torch.int32)),
        TypeError,
        ["floating-point tensor", "torch.int32"],
    ),
    (
        "layernorm-list-input",
        lambda: LayerNorm(2)([1.0, 2.0]),
        TypeError,
        ["torch.Tensor", "got list"],
    ),
    (
        "layernorm-wrong-last-dim",
        lambda: LayerNorm(8)(x(2, 5, 7)),
        ValueError,
        ["(..., 8)", "(2, 5, 7)"],
    ),
    (
        "rmsnorm-scalar-input",
        lambda: RMSNorm(8)(torch.tensor(1.0)),
        ValueError,
        ["(..., 8)", "got ()"],
    ),
    (
        "feedforward-wrong-last-dim",
        lambda: FeedForward(8)(x(2, 3, 16)),
        ValueError,
        ["(..., 8)", "(2, 3, 16)"],
    ),
    (
        "swiglu-wrong-last-dim",
        lambda: SwiGLU(8, 16)(x(2, 3, 4)),
        ValueError,
        ["(..., 8)", "(2, 3, 4)"],
    ),
    ("mha-rank-2-input", lambda: mha()(x(5, 8)), ValueError, ["(batch, seq, d_model=8)", "(5, 8)"]),
    (
        "mha-rank-4-input",
        lambda: mha()(x(1, 2, 5, 8)),
        ValueError,
        ["(batch, seq, d_model=8)", "(1, 2, 5, 8)"],
    ),
    ("mha-wrong-last-dim", lambda: mha()(x(2, 5, 6)), ValueError, ["d_model=8", "(2, 5, 6)"]),
    (
        "mha-integer-input",
        lambda: mha()(torch.ones(2, 5, 8, dtype=torch.long)),
        TypeError,
        ["floating-point", "torch.int64"],
    ),
    (
        "block-wrong-last-dim",
        lambda: TransformerBlock(8, 2, max_seq_len=4)(x(1, 3, 4)),
        ValueError,
        ["d_model=8", "(1, 3, 4)"],
    ),
    (
        "mha-sequence-too-long",
        lambda: mha()(x(1, 7, 8)),
        ValueError,
        ["sequence length 7", "max_seq_len=6"],
    ),
    (
        "block-sequence-too-long",
        lambda: TransformerBlock(8, 2, max_seq_len=4)(x(1, 5, 8)),
        ValueError,
        ["sequence length 5", "max_seq_len=4"],
    ),
    (
        "mha-cache-past-max-seq-len",
        lambda: [mha()(x(1, 4, 8), cache=c) for c in [KVCache()] for _ in range(2)],
        ValueError,
        ["sequence length 8", "max_seq_len=6"],
    ),
    # attention masks
    (
        "mha-mask-wrong-shape",
        lambda: mha()(x(2, 5, 8), torch.ones(5, 4, dtype=torch.bool)),
        ValueError,
        ["(5, 5) or (2, 1, 5, 5)", "(5, 4)"],
    ),
    (
        "mha-mask-missing-head-axis",
        lambda: mha()(x(2, 5, 8), torch.ones(2, 5, 5, dtype=torch.bool)),
        ValueError,
        ["(2, 1, 5, 5)", "(2, 5, 5)"],
    ),
    (
        "mha-mask-float",
        lambda: mha()(x(2, 5, 8), torch.ones(5, 5)),
        TypeError,
        ["bool tensor", "torch.float32"],
    ),
    (
        "mha-mask-not-a-tensor",
        lambda: mha()(x(2, 5, 8), [[True] * 5] * 5),
        TypeError,
        ["torch.Tensor", "got list"],
    ),
    (
        "mha-cache-batch-mismatch",
        lambda: [mha()(x(b, 2, 8), cache=c) for c in [KVCache()] for b in (2, 1)],
        ValueError,
        ["(batch=2, heads=2, T, head_dim=4)", "got (1, 2, 2, 4)"],
    ),
    ("mha-mask-with-cache", attend_with_cache, ValueError, ["attn_mask must be None", "holds 2"]),
    (
        "sdpa-mask-float",
        lambda: tc.scaled_dot_product_attention(
            x(1, 3, 4), x(1, 3, 4), x(1, 3, 4), mask=torch.ones(3, 3)
        ),
        TypeError,
        ["bool tensor", "torch.float32"],
    ),
    (
        "sdpa-mask-not-a-tensor",
        lambda: tc.scaled_dot_product_attention(x(1, 3, 4), x(1, 3, 4), x(1, 3, 4), mask=[[True]]),
        TypeError,
        ["bool tensor", "got list"],
    ),
    (
        "sdpa-mask-not-broadcastable",
        lambda: tc.scaled_dot_product_attention(
            x(1, 3, 4), x(1, 3, 4), x(1, 3, 4), mask=torch.ones(2, 3, dtype=torch.bool)
        ),
        ValueError,
        ["(2, 3)", "(1, 3, 3)"],
    ),
    (
        "sdpa-qk-width-mismatch",
        lambda: tc.scaled_dot_product_attention(x(1, 3, 4), x(1, 3, 5), x(1, 3, 4)),
        ValueError,
        ["q (..., T_q, d_k), k (..., T_k, d_k)", "k (1, 3, 5)"],
    ),
    (
        "sdpa-integer-query",
        lambda: tc.scaled_dot_product_attention(
            torch.ones(1, 3, 4, dtype=torch.long), x(1, 3, 4), x(1, 3, 4)
        ),
        TypeError,
        ["floating-point", "torch.int64"],
    ),
    (
        "sdpa-dropout-above-one",
        lambda: tc.scaled_dot_product_attention(x(1, 3, 4), x(1, 3, 4), x(1, 3, 4), dropout_p=2.0),
        ValueError,
        ["[0, 1)", "got 2.0"],
    ),
    (
        "rotary-shape-mismatch",
        lambda: tc.apply_rotary(x(1, 2, 3, 4), x(3, 6), x(3, 6)),
        ValueError,
        ["cos/sin (T, head_dim)", "cos (3, 6)"],
    ),
    # token ids
    (
        "gpt-float-token-ids",
        lambda: model()(torch.zeros(1, 4)),
        TypeError,
        ["integer token ids (torch.long)", "torch.float32"],
    ),
    (
        "gpt-bool-token-ids",
        lambda: model()(torch.zeros(1, 4, dtype=torch.bool)),
        TypeError,
        ["integer token ids", "torch.bool"],
    ),
    (
        "gpt-token-id-too-large",
        lambda: model()(torch.tensor([[1, 50]])),
        ValueError,
        ["[0, vocab_size=50)", "[1, 50]"],
    ),
    (
        "gpt-negative-token-id",
        lambda: model()(torch.tensor([[-1, 3]])),
        ValueError,
        ["[0, vocab_size=50)", "[-1, 3]"],
    ),
    ("gpt-token-ids-rank-1", lambda: model()(token_ids(4)), ValueError, ["(batch, seq)", "(4,)"]),
    (
        "gpt-token-ids-rank-3",
        lambda: model()(token_ids(1, 2, 3)),
        ValueError,
        ["(batch, seq)", "(1, 2, 3)"],
    ),
    (
        "gpt-token-ids-not-a-tensor",
        lambda: model()([[1, 2]]),
        TypeError,
        ["torch.Tensor of token ids", "got list"],
    ),
    (
        "gpt-sequence-too-long",
        lambda: model()(token_ids(1, 9)),
        ValueError,
        ["sequence length 9", "max_seq_len=8"],
    ),
    (
        "gpt-caches-wrong-count",
        lambda: model()(token_ids(1, 2), caches=[KVCache(), KVCache()]),
        ValueError,
        ["one KVCache per block (1)", "got 2"],
    ),
    (
        "loss-targets-wrong-shape",
        lambda: model().loss(token_ids(2, 4), token_ids(2, 3)),
        ValueError,
        ["shape of idx (2, 4)", "(2, 3)"],
    ),
    (
        "loss-float-targets",
        lambda: model().loss(token_ids(2, 4), torch.zeros(2, 4)),
        TypeError,
        ["targets must hold integer token ids", "torch.float32"],
    ),
    (
        "loss-targets-out-of-range",
        lambda: model().loss(token_ids(1, 2), torch.tensor([[0, 99]])),
        ValueError,
        ["targets must be in [0, vocab_size=50)", "[0, 99]"],
    ),
    # generate
    (
        "generate-negative-temperature",
        lambda: model().generate(token_ids(1, 2), 1, temperature=-1.0),
        ValueError,
        ["temperature must be >= 0", "got -1.0"],
    ),
    (
        "generate-zero-top-k",
        lambda: model().generate(token_ids(1, 2), 1, top_k=0),
        ValueError,
        ["top_k must be a positive int", "got 0"],
    ),
    (
        "generate-negative-new-tokens",
        lambda: model().generate(token_ids(1, 2), -1),
        ValueError,
        ["max_new_tokens must be an int >= 0", "got -1"],
    ),
    (
        "generate-float-prompt",
        lambda: model().generate(torch.zeros(1, 2), 1),
        TypeError,
        ["integer token ids", "torch.float32"],
    ),
    (
        "generate-cache-past-context",
        generate_with_cache_past_context,
        ValueError,
        ["<= max_seq_len=8", "got 9"],
    ),
]


@pytest.mark.parametrize(
    "call, error, fragments", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_is_rejected_with_a_clear_message(call, error, fragments):
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} missing from the message: {message}"


def test_default_device_rejects_an_unknown_device(monkeypatch):
    monkeypatch.setenv("TFCOURSE_DEVICE", "banana")
    with pytest.raises(ValueError, match=r"TFCOURSE_DEVICE='banana' is not a torch device"):
        tc.default_device()


def test_valid_edge_values_are_accepted():
    """The validation must not reject what is legal: T = max_seq_len, dropout 0, one head, T = 1."""
    MultiHeadAttention(8, 1, max_seq_len=6, dropout=0.0)(x(1, 6, 8))
    model()(token_ids(1, 8))
    model()(torch.tensor([[49]], dtype=torch.int32))
    LayerNorm(8)(x(1, 1, 8, dtype=torch.float64).float())
    mha()(x(2, 5, 8), torch.ones(1, 1, 5, 5, dtype=torch.bool))


def test_token_ids_are_not_read_back_from_an_accelerator():
    """Off the CPU the range check is queued on the device, never read back to the host
    (which would synchronise on every forward pass). A meta tensor has no values to read:
    any read-back would raise here."""
    idx = torch.zeros(2, 3, dtype=torch.long, device="meta")
    with pytest.raises(RuntimeError):
        int(idx.min())  # what a read-back would do
    assert tc.nn.validate.token_ids(idx, 10) is idx
