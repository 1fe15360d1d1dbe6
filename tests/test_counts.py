"""Parameter-count oracles.

The fast tests build the models on the ``meta`` device (shapes only, no memory,
no init); the slow one builds GPT-2 small for real.
"""

import pytest
import torch

from tfcourse import GPT, GPTConfig, TransformerStack, swiglu_hidden_dim

GPT2_SMALL_TIED = 124_439_808
GPT2_SMALL_UNTIED = 163_037_184
STACK_WITH_BIAS = 85_054_464
STACK_WITHOUT_BIAS = 84_971_520


def count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def stack(bias: bool) -> TransformerStack:
    with torch.device("meta"):
        return TransformerStack(
            12, d_model=768, n_heads=12, max_seq_len=1024, activation="gelu", bias=bias
        )


def gpt2_small(**overrides) -> GPT:
    with torch.device("meta"):
        return GPT(GPTConfig.preset("gpt2-small", **overrides))


def test_gpt2_small_tied():
    assert gpt2_small().num_params() == GPT2_SMALL_TIED


def test_gpt2_small_untied():
    assert gpt2_small(tie_weights=False).num_params() == GPT2_SMALL_UNTIED
    assert GPT2_SMALL_UNTIED - GPT2_SMALL_TIED == 50257 * 768  # one more V x D matrix


def test_gpt2_small_non_embedding():
    model = gpt2_small()
    embeddings = 50257 * 768 + 1024 * 768
    assert model.num_params(non_embedding=True) == GPT2_SMALL_TIED - embeddings == 85_056_000
    # = the block stack + the final LayerNorm (2 x 768)
    assert model.num_params(non_embedding=True) == STACK_WITH_BIAS + 2 * 768


def test_block_stack_with_biases():
    assert count(stack(bias=True)) == STACK_WITH_BIAS


def test_block_stack_without_linear_biases_keeps_layernorm_biases():
    without = stack(bias=False)
    assert count(without) == STACK_WITHOUT_BIAS
    assert STACK_WITH_BIAS - STACK_WITHOUT_BIAS == 82_944 == 12 * (3 * 768 + 768 + 4 * 768 + 768)
    norm_biases = [n for n, _ in without.named_parameters() if n.endswith("bias")]
    assert len(norm_biases) == 24 and all(".norm" in n for n in norm_biases)


def test_swiglu_hidden_dim_llama_7b():
    assert swiglu_hidden_dim(4096) == 11008


@pytest.mark.slow
def test_gpt2_small_instantiated_for_real():
    model = GPT(GPTConfig.preset("gpt2-small"))
    assert model.num_params() == GPT2_SMALL_TIED
    assert count(model) == GPT2_SMALL_TIED  # parameters() yields the tied matrix once
    assert model.lm_head.weight.data_ptr() == model.tok_emb.weight.data_ptr()
    del model
    assert GPT(GPTConfig.preset("gpt2-small", tie_weights=False)).num_params() == GPT2_SMALL_UNTIED
