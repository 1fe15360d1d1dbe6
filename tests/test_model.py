"""Unit tests of GPTConfig and GPT: shapes, causality, tying, init, counts, loss, generation."""

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

from tfcourse import GPT, PRESETS, GPTConfig, TransformerBlock


def ids(config: GPTConfig, B: int = 2, T: int = 8, seed: int = 0) -> torch.Tensor:
    return torch.randint(
        0, config.vocab_size, (B, T), generator=torch.Generator().manual_seed(seed)
    )


# --- GPTConfig ---------------------------------------------------------------------------------


def test_config_defaults_are_gpt2_small():
    c = GPTConfig()
    assert (c.vocab_size, c.max_seq_len, c.n_layers, c.n_heads, c.d_model) == (
        50257,
        1024,
        12,
        12,
        768,
    )
    assert c.activation == "gelu_tanh" and c.tie_weights and c.pre_ln and c.head_dim == 64
    assert GPTConfig.preset("gpt2-small") == c


def test_config_is_frozen_and_replace_validates():
    c = GPTConfig.preset("tiny")
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.d_model = 8
    assert c.replace(n_layers=3).n_layers == 3 and c.n_layers == 2
    with pytest.raises(ValueError, match="divisible"):
        c.replace(n_heads=5)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_is_valid(name):
    config = GPTConfig.preset(name)
    assert config.to_dict()["d_model"] == config.d_model
    assert GPTConfig.preset(name, n_layers=1).n_layers == 1


def test_block_kwargs_build_a_block():
    config = GPTConfig.preset("llama-tiny")
    b = TransformerBlock(**config.block_kwargs())
    assert b.attn.rotary is not None and b.mlp.__class__.__name__ == "SwiGLU"
    assert GPTConfig.preset("tiny").block_kwargs()["rope_base"] is None


# --- forward -------------------------------------------------------------------------------------


def test_logits_shape(tiny_config):
    model = GPT(tiny_config)
    assert model(ids(tiny_config)).shape == (2, 8, tiny_config.vocab_size)
    assert model(ids(tiny_config, B=1, T=1)).shape == (1, 1, tiny_config.vocab_size)
    assert model(ids(tiny_config, T=tiny_config.max_seq_len)).shape[1] == tiny_config.max_seq_len


@pytest.mark.parametrize("preset", ["tiny", "llama-tiny"])
def test_causality(preset):
    config = GPTConfig.preset(preset, max_seq_len=16)
    model = GPT(config)
    idx = ids(config, T=10)
    logits = model(idx)
    for t in range(9):
        changed = idx.clone()
        changed[:, t + 1 :] = (changed[:, t + 1 :] + 1) % config.vocab_size
        torch.testing.assert_close(
            model(changed)[:, : t + 1], logits[:, : t + 1], rtol=1e-6, atol=1e-6
        )


def test_positions_matter_with_learned_and_rotary_positions():
    for preset in ("tiny", "llama-tiny"):
        model = GPT(GPTConfig.preset(preset))
        idx = torch.tensor([[3, 5, 3]])
        logits = model(idx)
        assert not torch.allclose(logits[0, 0], logits[0, 2])  # same token, other position


@pytest.mark.parametrize("preset", ["tiny", "llama-tiny"])
def test_explicit_and_sdpa_models_agree(preset):
    config = GPTConfig.preset(preset)
    explicit = GPT(config)
    sdpa = GPT(config.replace(attn_impl="sdpa"))
    sdpa.load_state_dict(explicit.state_dict())
    assert all(b.attn.attn_impl == "sdpa" for b in sdpa.blocks)
    idx = ids(config)
    torch.testing.assert_close(sdpa(idx), explicit(idx))


def test_dropout_is_inactive_in_eval_mode(tiny_config):
    with_dropout = GPT(tiny_config.replace(dropout=0.3))
    without = GPT(tiny_config)
    without.load_state_dict(with_dropout.state_dict())
    idx = ids(tiny_config)
    torch.testing.assert_close(with_dropout.eval()(idx), without.eval()(idx))
    assert not torch.allclose(with_dropout.train()(idx), without(idx))


def test_padding_mask_reaches_every_block(tiny_config):
    model = GPT(tiny_config)
    idx = ids(tiny_config, T=6)
    valid = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    mask = valid[:, None, None, :].expand(2, 1, 6, 6)
    changed = idx.clone()
    changed[0, :2] = (changed[0, :2] + 7) % tiny_config.vocab_size  # only the padding changes
    torch.testing.assert_close(model(changed, mask)[0, 2:], model(idx, mask)[0, 2:])


# --- weight tying, init and counts -------------------------------------------------------------


def test_weight_tying_shares_one_tensor(tiny_config):
    model = GPT(tiny_config)
    assert model.lm_head.weight is model.tok_emb.weight
    assert model.lm_head.weight.data_ptr() == model.tok_emb.weight.data_ptr()
    model.loss(ids(tiny_config), ids(tiny_config, seed=1)).backward()
    assert model.tok_emb.weight.grad is model.lm_head.weight.grad
    # Loading a checkpoint keeps the two names on one tensor.
    fresh = GPT(tiny_config)
    fresh.load_state_dict(model.state_dict())
    assert fresh.lm_head.weight.data_ptr() == fresh.tok_emb.weight.data_ptr()
    assert torch.equal(fresh.lm_head.weight, model.tok_emb.weight)


def test_untied_head_is_a_separate_tensor(tiny_config):
    model = GPT(tiny_config.replace(tie_weights=False))
    assert model.lm_head.weight.data_ptr() != model.tok_emb.weight.data_ptr()
    assert (
        model.num_params()
        == GPT(tiny_config).num_params() + tiny_config.vocab_size * tiny_config.d_model
    )


def test_gpt2_style_init():
    config = GPTConfig(vocab_size=1024, max_seq_len=256, n_layers=4, n_heads=4, d_model=128)
    model = GPT(config)
    residual_std = 0.02 / math.sqrt(2 * config.n_layers)
    for name, p in model.named_parameters():
        if name.endswith(("out_proj.weight", "fc_out.weight")):
            expected = residual_std
        elif p.dim() == 2:
            expected = 0.02  # embeddings, qkv_proj, fc_in
        elif "norm" in name and name.endswith("weight"):
            assert torch.equal(p, torch.ones_like(p)), name
            continue
        else:
            assert torch.equal(p, torch.zeros_like(p)), name  # every bias
            continue
        assert abs(p.std().item() - expected) < 0.05 * expected, (name, p.std().item(), expected)
        assert abs(p.mean().item()) < 0.1 * expected, name


def test_swiglu_down_proj_gets_the_residual_init():
    config = GPTConfig.preset("llama-tiny")
    down = GPT(config).blocks[0].mlp.down_proj.weight
    assert abs(down.std().item() - 0.02 / math.sqrt(2 * config.n_layers)) < 0.0005


@pytest.mark.parametrize("tie", [True, False])
@pytest.mark.parametrize("preset", ["tiny", "llama-tiny"])
def test_num_params(preset, tie):
    config = GPTConfig.preset(preset, tie_weights=tie)
    model = GPT(config)
    distinct = {p.data_ptr(): p.numel() for p in model.parameters()}
    assert model.num_params() == sum(distinct.values())
    embeddings = config.vocab_size * config.d_model
    if config.positional == "learned":
        embeddings += config.max_seq_len * config.d_model
    else:
        assert model.pos_emb is None
    assert model.num_params(non_embedding=True) == model.num_params() - embeddings
    blocks = sum(p.numel() for p in model.blocks.parameters())
    head = 0 if tie else config.vocab_size * config.d_model
    final_norm = sum(p.numel() for p in model.final_norm.parameters())
    assert model.num_params(non_embedding=True) == blocks + final_norm + head


# --- loss --------------------------------------------------------------------------------------


def test_loss_is_cross_entropy_and_near_log_vocab_at_init(tiny_config):
    model = GPT(tiny_config)
    idx, targets = ids(tiny_config), ids(tiny_config, seed=1)
    loss = model.loss(idx, targets)
    expected = F.cross_entropy(model(idx).reshape(-1, tiny_config.vocab_size), targets.reshape(-1))
    torch.testing.assert_close(loss, expected)
    assert abs(loss.item() - math.log(tiny_config.vocab_size)) < 0.1


# --- generate ----------------------------------------------------------------------------------


def greedy_by_hand(model: GPT, idx: torch.Tensor, n: int) -> torch.Tensor:
    for _ in range(n):
        next_id = model(idx[:, -model.config.max_seq_len :])[:, -1].argmax(-1, keepdim=True)
        idx = torch.cat([idx, next_id], dim=1)
    return idx


def test_generate_greedy(tiny_config):
    model = GPT(tiny_config).eval()
    prompt = ids(tiny_config, T=3)
    out = model.generate(prompt, 5, temperature=0)
    assert out.shape == (2, 8) and torch.equal(out[:, :3], prompt)
    assert torch.equal(out, greedy_by_hand(model, prompt, 5))
    assert torch.equal(model.generate(prompt, 0), prompt)


def test_generate_top_k_1_is_greedy(tiny_config):
    model = GPT(tiny_config)
    prompt = ids(tiny_config, T=3)
    assert torch.equal(model.generate(prompt, 4, top_k=1), model.generate(prompt, 4, temperature=0))


def test_generate_top_k_samples_only_the_k_most_likely(tiny_config):
    model = GPT(tiny_config).eval()
    prompt = ids(tiny_config, B=1, T=4).expand(400, 4)
    with torch.no_grad():
        top3 = set(model(prompt[:1])[0, -1].topk(3).indices.tolist())
    sampled = model.generate(
        prompt, 1, top_k=3, temperature=5.0, generator=torch.Generator().manual_seed(0)
    )[:, -1]
    assert set(sampled.tolist()) == top3


def test_generate_temperature_controls_spread(tiny_config):
    model = GPT(tiny_config)
    prompt = ids(tiny_config, B=1, T=4).expand(400, 4)
    g = torch.Generator().manual_seed(0)
    cold = model.generate(prompt, 1, temperature=1e-4, generator=g)[:, -1]
    hot = model.generate(prompt, 1, temperature=100.0, generator=g)[:, -1]
    greedy = model.generate(prompt[:1], 1, temperature=0)[0, -1]
    assert torch.all(cold == greedy)
    assert len(set(hot.tolist())) > 25  # near-uniform over 50 tokens


def test_generate_is_reproducible_with_a_generator(tiny_config):
    model = GPT(tiny_config)
    prompt = ids(tiny_config, T=2)
    a = model.generate(prompt, 8, generator=torch.Generator().manual_seed(1))
    b = model.generate(prompt, 8, generator=torch.Generator().manual_seed(1))
    c = model.generate(prompt, 8, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("preset", ["tiny", "llama-tiny"])
@pytest.mark.parametrize("attn_impl", ["explicit", "sdpa"])
def test_kv_cache_generation_equals_no_cache(preset, attn_impl):
    model = GPT(GPTConfig.preset(preset, max_seq_len=24, attn_impl=attn_impl))
    prompt = ids(model.config, T=5)
    greedy = model.generate(prompt, 12, temperature=0, use_cache=True)
    assert torch.equal(greedy, model.generate(prompt, 12, temperature=0))
    sampled = model.generate(
        prompt, 12, top_k=10, use_cache=True, generator=torch.Generator().manual_seed(3)
    )
    assert torch.equal(
        sampled, model.generate(prompt, 12, top_k=10, generator=torch.Generator().manual_seed(3))
    )


def test_generate_crops_the_context_and_restores_training_mode(tiny_config):
    model = GPT(tiny_config).train()
    prompt = ids(tiny_config, T=tiny_config.max_seq_len - 2)
    out = model.generate(prompt, 6, temperature=0)  # grows past max_seq_len
    assert out.shape == (2, tiny_config.max_seq_len + 4)
    assert torch.equal(out, greedy_by_hand(model.eval(), prompt, 6))
    model.train()
    model.generate(prompt[:, :2], 1)
    assert model.training


@pytest.mark.parametrize("was_training", [True, False])
def test_generate_puts_back_the_mode_it_found(tiny_config, was_training):
    model = GPT(tiny_config).train(was_training)
    model.generate(ids(tiny_config, T=3), 2, generator=torch.Generator().manual_seed(0))
    assert model.training is was_training


def test_generate_restores_training_mode_when_it_raises(tiny_config):
    # A generator that is not a torch.Generator fails only at the first sampling
    # step, after generate() has switched the model to eval mode.
    model = GPT(tiny_config).train()
    with pytest.raises((TypeError, AttributeError)):
        model.generate(ids(tiny_config, T=3), 2, generator="not a generator")
    assert model.training
    assert all(m.training for m in model.modules())


def test_generate_restores_training_mode_when_the_forward_pass_raises(tiny_config):
    model = GPT(tiny_config).train()

    def fail(module, args):
        raise RuntimeError("boom inside the forward pass")

    model.blocks[0].register_forward_pre_hook(fail)
    with pytest.raises(RuntimeError, match="boom"):
        model.generate(ids(tiny_config, T=3), 2)
    assert model.training


def test_init_weights_gives_a_learners_gpt_the_reference_start():
    """PyTorch's default initialization starts a learner's GPT far above ln V;
    tfcourse.nn.model.init_weights brings it to about ln V, as tc.GPT starts."""
    from tfcourse.nn.model import init_weights

    from mutants.core import LearnerGPT

    config = GPTConfig.preset("tiny")
    idx = torch.randint(config.vocab_size, (4, 33), generator=torch.Generator().manual_seed(0))

    def first_loss(model):
        logits = model(idx[:, :-1])
        return F.cross_entropy(logits.flatten(0, 1), idx[:, 1:].flatten()).item()

    class DefaultInitGPT(LearnerGPT):
        mistake = "default_init"  # PyTorch's own initialization, as nn.Module leaves it

    torch.manual_seed(0)
    model = DefaultInitGPT(config)
    default = first_loss(model)
    init_weights(model, config.n_layers)
    assert default > math.log(config.vocab_size) + 1
    assert abs(first_loss(model) - math.log(config.vocab_size)) < 0.1
