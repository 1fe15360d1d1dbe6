"""Validation once: entry points check their input, the layers inside them do not recheck.

A public layer called directly (the way a learner calls it) still rejects bad input with
a ``ValueError``/``TypeError``; inside ``GPT.forward`` / ``GPT.generate`` the inner layers
skip the checks the entry point already made. Also: ``GPTConfig.replace`` and the
``dataclasses`` import of ``tfcourse.nn.config``.
"""

import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import tfcourse.nn.config as config_module
from tfcourse import (
    GPT,
    FeedForward,
    GPTConfig,
    KVCache,
    LayerNorm,
    MultiHeadAttention,
    RMSNorm,
    RotaryEmbedding,
    SwiGLU,
    TransformerBlock,
    TransformerStack,
    scaled_dot_product_attention,
)
from tfcourse.nn import validate

D = 8
CONFIG = GPTConfig(vocab_size=50, max_seq_len=8, n_layers=2, n_heads=2, d_model=D)
ROPE = GPTConfig(
    vocab_size=50,
    max_seq_len=8,
    n_layers=2,
    n_heads=2,
    d_model=D,
    positional="rope",
    norm="rmsnorm",
    mlp="swiglu",
)


def block():
    return TransformerBlock(D, 2, max_seq_len=6)


# --- a directly-called public layer still rejects bad input -------------------------------------

LAYERS = {
    "TransformerBlock": block,
    "TransformerStack": lambda: TransformerStack(2, d_model=D, n_heads=2, max_seq_len=6),
    "MultiHeadAttention": lambda: MultiHeadAttention(D, 2, max_seq_len=6),
    "LayerNorm": lambda: LayerNorm(D),
    "RMSNorm": lambda: RMSNorm(D),
    "FeedForward": lambda: FeedForward(D),
    "SwiGLU": lambda: SwiGLU(D, 16),
}


@pytest.mark.parametrize("name", LAYERS)
def test_a_layer_called_directly_rejects_the_wrong_width(name):
    with pytest.raises(ValueError, match=f"{D}.*got \\(2, 3, 5\\)"):
        LAYERS[name]()(torch.randn(2, 3, 5))


@pytest.mark.parametrize("name", LAYERS)
def test_a_layer_called_directly_rejects_integer_input(name):
    with pytest.raises(TypeError, match=r"floating-point.*torch\.int64"):
        LAYERS[name]()(torch.ones(2, 3, D, dtype=torch.long))


@pytest.mark.parametrize("make", [block, lambda: MultiHeadAttention(D, 2, max_seq_len=6)])
def test_block_and_attention_reject_a_sequence_past_max_seq_len(make):
    with pytest.raises(ValueError, match="sequence length 7 exceeds max_seq_len=6"):
        make()(torch.randn(1, 7, D))


def test_block_rejects_a_bad_mask():
    with pytest.raises(TypeError, match="bool tensor"):
        block()(torch.randn(1, 3, D), torch.ones(3, 3))
    with pytest.raises(ValueError, match=r"\(3, 3\).*got \(4, 4\)"):
        block()(torch.randn(1, 3, D), torch.ones(4, 4, dtype=torch.bool))


def test_attention_function_called_directly_still_checks():
    q = torch.randn(1, 2, 3, 4)
    with pytest.raises(ValueError, match="expected q"):
        scaled_dot_product_attention(q, torch.randn(1, 2, 3, 5), q)
    with pytest.raises(ValueError, match="does not broadcast"):
        scaled_dot_product_attention(q, q, q, mask=torch.ones(2, 2, dtype=torch.bool))


def test_rotary_called_directly_still_checks_the_length():
    q = torch.randn(1, 2, 5, 4)
    with pytest.raises(ValueError, match="exceeds max_seq_len=4"):
        RotaryEmbedding(4, 4)(q, q)


# --- GPT.forward rejects bad input at the entry point --------------------------------------------


@pytest.mark.parametrize("config", [CONFIG, ROPE], ids=["learned", "rope"])
@pytest.mark.parametrize(
    "bad, error, message",
    [
        (torch.zeros(1, 4), TypeError, "integer token ids"),
        (torch.zeros(4, dtype=torch.long), ValueError, r"\(batch, seq\)"),
        (torch.full((1, 4), 50), ValueError, r"\[0, vocab_size=50\)"),
        (
            torch.zeros(1, 9, dtype=torch.long),
            ValueError,
            "sequence length 9 exceeds max_seq_len=8",
        ),
        ([[1, 2]], TypeError, "torch.Tensor"),
    ],
)
def test_gpt_forward_rejects_bad_token_ids(config, bad, error, message):
    with pytest.raises(error, match=message):
        GPT(config)(bad)


def test_gpt_forward_checks_the_mask_itself():
    # The blocks no longer check the mask inside the model, so GPT.forward must.
    model, idx = GPT(CONFIG), torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(TypeError, match="bool tensor"):
        model(idx, torch.ones(3, 3))
    with pytest.raises(ValueError, match=r"\(3, 3\) or \(2, 1, 3, 3\), got \(2, 2\)"):
        model(idx, torch.ones(2, 2, dtype=torch.bool))


def test_gpt_forward_checks_the_caches():
    model, idx = GPT(CONFIG), torch.zeros(1, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="one KVCache per block"):
        model(idx, caches=[KVCache()])
    caches = [KVCache(), KVCache()]
    model(idx, caches=caches)
    with pytest.raises(ValueError, match="attn_mask must be None once the KV cache"):
        model(idx[:, :1], torch.ones(1, 1, dtype=torch.bool), caches=caches)
    with pytest.raises(ValueError, match="sequence length 9 exceeds"):
        model(torch.zeros(1, 6, dtype=torch.long), caches=caches)


# --- inside the model the layers do not recheck -------------------------------------------------


@pytest.fixture
def calls_during(monkeypatch):
    """``calls_during(fn)``: run ``fn`` and count the calls of each input check meanwhile.

    Counted only while ``fn`` runs, so the checks of the constructors do not count; a
    check that calls another (``activations`` calls ``floating_tensor``) counts both.
    """
    counts, counting = {}, [False]
    for name in (
        "token_ids",
        "activations",
        "last_dim",
        "seq_len",
        "floating_tensor",
        "attention_mask",
        "mask_with_cache",
        "probability",
    ):
        original = getattr(validate, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            if counting[0]:
                counts[_name] = counts.get(_name, 0) + 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(validate, name, counted)

    def run(fn):
        counts.clear()
        counting[0] = True
        try:
            fn()
        finally:
            counting[0] = False
        return dict(counts)

    return run


@pytest.mark.parametrize("config", [CONFIG, ROPE], ids=["learned", "rope"])
def test_gpt_forward_validates_once(config, calls_during):
    model, idx = GPT(config), torch.zeros(2, 5, dtype=torch.long)
    mask = torch.ones(5, 5, dtype=torch.bool)
    assert calls_during(lambda: model(idx, mask)) == {
        "token_ids": 1,
        "seq_len": 1,
        "mask_with_cache": 1,
        "attention_mask": 1,
    }


def test_gpt_forward_validates_once_on_the_sdpa_path(calls_during):
    model = GPT(CONFIG.replace(attn_impl="sdpa", fused_norms=True))
    idx = torch.zeros(2, 5, dtype=torch.long)
    assert calls_during(lambda: model(idx)) == {"token_ids": 1, "seq_len": 1, "mask_with_cache": 1}


def test_generate_validates_the_prompt_once(calls_during):
    model, prompt = GPT(CONFIG), torch.zeros(1, 2, dtype=torch.long)
    assert calls_during(lambda: model.generate(prompt, 4, use_cache=True)) == {"token_ids": 1}


def test_a_block_called_directly_validates_once(calls_during):
    layer, x = block(), torch.randn(1, 3, D)
    assert calls_during(lambda: layer(x)) == {
        "activations": 1,
        "floating_tensor": 1,
        "seq_len": 1,
        "mask_with_cache": 1,
    }


def test_the_checks_come_back_after_a_forward_pass_that_raised():
    model = GPT(CONFIG)
    model.blocks[1].register_forward_pre_hook(lambda module, args: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        model(torch.zeros(1, 3, dtype=torch.long))
    assert validate.needed()
    with pytest.raises(ValueError, match="got \\(2, 3, 5\\)"):
        LayerNorm(D)(torch.randn(2, 3, 5))


def test_the_checks_stay_on_in_another_thread():
    # One thread inside a model's forward pass must not switch off another thread's checks.
    inside, done, seen = threading.Event(), threading.Event(), []

    def other_thread():
        inside.wait(timeout=10)
        seen.append(validate.needed())
        done.set()

    thread = threading.Thread(target=other_thread)
    thread.start()
    with validate.inputs_checked():
        assert not validate.needed()
        inside.set()
        done.wait(timeout=10)
    thread.join(timeout=10)
    assert seen == [True] and validate.needed()


def test_inputs_checked_nests():
    with validate.inputs_checked():
        with validate.inputs_checked():
            pass
        assert not validate.needed()
    assert validate.needed()


def test_validating_once_changes_no_result():
    torch.manual_seed(0)
    model, idx = GPT(ROPE).eval(), torch.randint(0, 50, (2, 6))
    x = model.tok_emb(idx)
    by_hand = x
    for b in model.blocks:  # each block called directly: it checks everything
        by_hand = b(by_hand)
    assert torch.allclose(model(idx), model.lm_head(model.final_norm(by_hand)), atol=1e-6)


# --- GPTConfig.replace ---------------------------------------------------------------------------


def test_config_module_does_not_shadow_dataclasses_replace():
    assert not hasattr(config_module, "replace")
    assert config_module.dataclasses.replace is __import__("dataclasses").replace


def test_config_replace_returns_a_validated_copy():
    changed = CONFIG.replace(n_layers=3)
    assert (changed.n_layers, CONFIG.n_layers, changed.d_model) == (3, 2, D)
    with pytest.raises(ValueError, match="divisible"):
        CONFIG.replace(n_heads=3)


def test_a_block_still_compiles_to_one_graph():
    # torch.compile traces the inputs_checked() blocks; a graph break there would
    # split every layer into its own graph (fullgraph=True turns a break into an error).
    layer, x = block().eval(), torch.randn(1, 3, D)
    compiled = torch.compile(layer, backend="eager", fullgraph=True)
    assert torch.allclose(compiled(x), layer(x))
    assert validate.needed()


# A fresh process, so that no eager call has run an inputs_checked() block first: the
# thread-local depth then had no value of its own yet (only a class default), torch.compile
# guarded on its absence, and the first compiled call failed with Dynamo's "Guard failed
# on the same frame it was created" (notebook 09's section 4 run on its own).
COMPILE_FIRST = textwrap.dedent(
    """
    import torch
    from tfcourse import GPT, GPTConfig, TransformerBlock
    from tfcourse.nn import validate

    torch.manual_seed(0)
    layer, x = TransformerBlock(8, 2, max_seq_len=8).eval(), torch.randn(2, 5, 8)
    compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)
    out = compiled(x)
    with torch.no_grad():
        again = compiled(x)  # compiled again (no grad), the call that failed in notebook 09
    config = GPTConfig(vocab_size=50, max_seq_len=8, n_layers=2, n_heads=2, d_model=8)
    model = GPT(config).eval()
    idx = torch.randint(0, 50, (2, 5))
    logits = torch.compile(model, backend="aot_eager")(idx)
    with torch.no_grad():
        assert torch.allclose(out, layer(x), atol=1e-6) and torch.equal(out, again)
        assert torch.allclose(logits, model(idx), atol=1e-6)
    assert validate.needed()
    print("compiled before any eager call")
    """
)


@pytest.mark.slow
def test_a_model_compiles_before_any_eager_call():
    done = subprocess.run(
        [sys.executable, "-c", COMPILE_FIRST], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "compiled before any eager call" in done.stdout
