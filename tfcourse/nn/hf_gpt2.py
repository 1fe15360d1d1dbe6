"""Weight layout conversion from Hugging Face GPT-2 (used by ``GPT.from_hf_gpt2``).

Only reads a config object and a state dict; it does not import ``transformers``.
"""

from __future__ import annotations

from ..language import say
from .config import GPTConfig

_HF_ACTIVATIONS = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
}


def gpt2_config_to_ours(hf_config, **overrides) -> GPTConfig:
    act = hf_config.activation_function
    if act not in _HF_ACTIVATIONS:
        known = sorted(_HF_ACTIVATIONS)
        raise ValueError(
            say(
                f"unsupported GPT-2 activation {act!r}; expected one of {known}",
                f"不支持的 GPT-2 激活函数 {act!r}；应为 {known} 之一",
            )
        )
    return GPTConfig(
        vocab_size=hf_config.vocab_size,
        max_seq_len=hf_config.n_positions,
        n_layers=hf_config.n_layer,
        n_heads=hf_config.n_head,
        d_model=hf_config.n_embd,
        d_hidden=hf_config.n_inner,
        norm_eps=hf_config.layer_norm_epsilon,
        activation=_HF_ACTIVATIONS[act],
        tie_weights=bool(getattr(hf_config, "tie_word_embeddings", True)),
        **overrides,
    )


def gpt2_state_dict_to_ours(hf_state: dict, config: GPTConfig) -> dict:
    """Map ``GPT2LMHeadModel.state_dict()`` onto ``GPT``'s parameter names."""
    src = {
        k.removeprefix("transformer."): v
        for k, v in hf_state.items()
        if not k.endswith((".attn.bias", ".attn.masked_bias"))
    }
    out = {
        "tok_emb.weight": src["wte.weight"],
        "pos_emb.weight": src["wpe.weight"],
        "final_norm.weight": src["ln_f.weight"],
        "final_norm.bias": src["ln_f.bias"],
        "lm_head.weight": src.get("lm_head.weight", src["wte.weight"]),
    }
    if "lm_head.weight" in hf_state:
        out["lm_head.weight"] = hf_state["lm_head.weight"]
    conv1d = {
        "attn.c_attn": "attn.qkv_proj",
        "attn.c_proj": "attn.out_proj",
        "mlp.c_fc": "mlp.fc_in",
        "mlp.c_proj": "mlp.fc_out",
    }
    norms = {"ln_1": "norm1", "ln_2": "norm2"}
    for i in range(config.n_layers):
        for hf_name, ours in conv1d.items():
            out[f"blocks.{i}.{ours}.weight"] = src[
                f"h.{i}.{hf_name}.weight"
            ].t()  # (in,out) -> (out,in)
            out[f"blocks.{i}.{ours}.bias"] = src[f"h.{i}.{hf_name}.bias"]
        for hf_name, ours in norms.items():
            out[f"blocks.{i}.{ours}.weight"] = src[f"h.{i}.{hf_name}.weight"]
            out[f"blocks.{i}.{ours}.bias"] = src[f"h.{i}.{hf_name}.bias"]
    return out
