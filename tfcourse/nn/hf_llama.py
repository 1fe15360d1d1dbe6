"""Weight layout conversion from Hugging Face LLaMA (used by ``GPT.from_hf_llama``).

A LLaMA decoder layer is our pre-LN ``TransformerBlock`` with ``norm="rmsnorm"``,
``mlp="swiglu"``, ``bias=False`` and rotary positions. The differences are
names and one layout:

- Hugging Face keeps three projections ``q_proj``, ``k_proj``, ``v_proj``; ours is
  one fused ``qkv_proj`` whose rows are ``[q; k; v]``, so the three weights are
  concatenated along the output dimension. Within each, head ``h`` owns rows
  ``h*head_dim:(h+1)*head_dim`` in both layouts.
- Both apply RoPE in the "rotate half" convention (channel ``i`` pairs with
  ``i + head_dim/2``) with ``inv_freq = base**(-2i/head_dim)``, so the q/k
  weights need no permutation. (Meta's original checkpoints use interleaved
  pairs; Hugging Face permutes q/k when converting them.)
- LLaMA has no learned position table: our ``GPT`` built with
  ``positional="rope"`` has ``pos_emb = None``.

Grouped-query attention (``num_key_value_heads < num_attention_heads``, LLaMA-2-70B,
LLaMA-3, Mistral) maps to ``n_kv_heads``: k_proj and v_proj are then narrower than
q_proj, and the fused rows are ``[q (D); k (K); v (K)]`` with ``K = n_kv_heads * head_dim``.

Only reads config objects and state dicts; it does not import ``transformers``.
Scaled RoPE variants are not supported and raise ``ValueError``.
"""

from __future__ import annotations

import torch

from ..language import say
from .config import GPTConfig

_LINEARS = {
    "self_attn.o_proj": "attn.out_proj",
    "mlp.gate_proj": "mlp.gate_proj",
    "mlp.up_proj": "mlp.up_proj",
    "mlp.down_proj": "mlp.down_proj",
}
_NORMS = {"input_layernorm": "norm1", "post_attention_layernorm": "norm2"}


def llama_rope(hf_config) -> tuple[float, str]:
    """``(rope_theta, rope_type)`` of a ``LlamaConfig`` (transformers 4.x and 5.x spellings)."""
    params = dict(getattr(hf_config, "rope_parameters", None) or {})
    scaling = dict(getattr(hf_config, "rope_scaling", None) or {})
    theta = params.get("rope_theta", getattr(hf_config, "rope_theta", 10000.0))
    rope_type = params.get("rope_type", scaling.get("rope_type", scaling.get("type", "default")))
    return float(theta), str(rope_type)


def _llama_bias(hf_config) -> bool:
    attention_bias = bool(getattr(hf_config, "attention_bias", False))
    mlp_bias = bool(getattr(hf_config, "mlp_bias", False))
    if attention_bias != mlp_bias:
        got = f"attention_bias={attention_bias} and mlp_bias={mlp_bias}"
        raise ValueError(
            say(
                f"GPTConfig has one `bias` flag for every Linear; got {got}",
                "GPTConfig 只有一个 `bias` 开关，作用于所有 Linear 层；实际是 "
                f"attention_bias={attention_bias}，mlp_bias={mlp_bias}",
            )
        )
    return attention_bias


def llama_config_to_ours(hf_config, **overrides) -> GPTConfig:
    """The ``GPTConfig`` of a ``transformers`` ``LlamaConfig`` (pre-LN, RMSNorm, SwiGLU, RoPE)."""
    n_heads = hf_config.num_attention_heads
    kv_heads = getattr(hf_config, "num_key_value_heads", None) or n_heads
    if n_heads % kv_heads:
        kv, heads = f"num_key_value_heads={kv_heads}", f"num_attention_heads={n_heads}"
        raise ValueError(say(f"{kv} must divide {heads}", f"{kv} 必须能整除 {heads}"))
    head_dim = getattr(hf_config, "head_dim", None) or hf_config.hidden_size // n_heads
    if head_dim * n_heads != hf_config.hidden_size:
        got = f"{head_dim} * {n_heads} != {hf_config.hidden_size}"
        raise ValueError(
            say(
                f"head_dim * num_attention_heads must equal hidden_size, got {got}",
                f"head_dim * num_attention_heads 必须等于 hidden_size，实际是 {got}",
            )
        )
    if hf_config.hidden_act != "silu":
        act = hf_config.hidden_act
        raise ValueError(
            say(
                f"SwiGLU needs hidden_act='silu', got {act!r}",
                f"SwiGLU 要求 hidden_act='silu'，实际是 {act!r}",
            )
        )
    theta, rope_type = llama_rope(hf_config)
    if rope_type != "default":
        raise ValueError(
            say(
                f"only plain RoPE (rope_type='default') is supported, got {rope_type!r}",
                f"只支持普通的 RoPE（rope_type='default'），实际是 {rope_type!r}",
            )
        )
    return GPTConfig(
        vocab_size=hf_config.vocab_size,
        max_seq_len=hf_config.max_position_embeddings,
        n_layers=hf_config.num_hidden_layers,
        n_heads=n_heads,
        d_model=hf_config.hidden_size,
        d_hidden=hf_config.intermediate_size,
        bias=_llama_bias(hf_config),
        pre_ln=True,
        norm="rmsnorm",
        norm_eps=hf_config.rms_norm_eps,
        mlp="swiglu",
        positional="rope",
        rope_base=theta,
        tie_weights=bool(getattr(hf_config, "tie_word_embeddings", False)),
        n_kv_heads=None if kv_heads == n_heads else kv_heads,
        **overrides,
    )


def llama_block_state_dict_to_ours(hf_layer_state: dict, prefix: str = "") -> dict:
    """Map one ``LlamaDecoderLayer``'s state dict onto ``TransformerBlock`` names.

    ``prefix`` is prepended to every output key (``"blocks.3."`` for a whole model).
    """
    out = {}
    for suffix in ("weight", "bias"):
        found = [hf_layer_state.get(f"self_attn.{p}_proj.{suffix}") for p in "qkv"]
        qkv = [t for t in found if t is not None]
        if len(qkv) == 3:
            out[f"{prefix}attn.qkv_proj.{suffix}"] = torch.cat(qkv, dim=0)  # rows [q; k; v]
        elif qkv:
            raise KeyError(
                say(
                    f"LLaMA layer has only some of q/k/v_proj.{suffix}",
                    f"LLaMA 层只有 q/k/v_proj.{suffix} 中的一部分",
                )
            )
        for hf_name, ours in _LINEARS.items():
            if f"{hf_name}.{suffix}" in hf_layer_state:
                out[f"{prefix}{ours}.{suffix}"] = hf_layer_state[f"{hf_name}.{suffix}"]
    for hf_name, ours in _NORMS.items():
        out[f"{prefix}{ours}.weight"] = hf_layer_state[f"{hf_name}.weight"]
    return out


def llama_state_dict_to_ours(hf_state: dict, config: GPTConfig) -> dict:
    """Map ``LlamaForCausalLM.state_dict()`` onto ``GPT``'s parameter names."""
    src = {
        k.removeprefix("model."): v
        for k, v in hf_state.items()
        if not k.endswith("rotary_emb.inv_freq")
    }
    out = {
        "tok_emb.weight": src["embed_tokens.weight"],
        "final_norm.weight": src["norm.weight"],
        "lm_head.weight": src.get("lm_head.weight", src["embed_tokens.weight"]),
    }
    for i in range(config.n_layers):
        layer = {
            k.removeprefix(f"layers.{i}."): v
            for k, v in src.items()
            if k.startswith(f"layers.{i}.")
        }
        out.update(llama_block_state_dict_to_ours(layer, prefix=f"blocks.{i}."))
    return out


def block_from_hf_llama(hf_layer, hf_config):
    """A ``TransformerBlock`` holding the weights of one ``LlamaDecoderLayer``.

    Same dtype and device as ``hf_layer``; loaded with ``strict=True``, so a missing
    or misnamed weight is an error.
    """
    from .block import TransformerBlock

    config = llama_config_to_ours(hf_config)
    block = TransformerBlock(**config.block_kwargs())
    block.load_state_dict(llama_block_state_dict_to_ours(hf_layer.state_dict()), strict=True)
    reference = next(hf_layer.parameters())
    return block.to(device=reference.device, dtype=reference.dtype)
