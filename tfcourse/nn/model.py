"""The GPT assembly: embeddings, a stack of blocks, a final norm and the LM head."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..language import say
from . import validate
from .attention import KVCache
from .block import TransformerBlock
from .config import GPTConfig
from .norms import make_norm
from .positional import LearnedPositionalEmbedding


def init_weights(model: nn.Module, n_layers: int) -> None:
    """GPT-2's initialization, in place: every ``Linear`` and ``Embedding`` weight from
    N(0, 0.02), biases zero, and the projections that write into the residual stream
    (``attn.out_proj``, ``mlp.fc_out``, ``mlp.down_proj``) from N(0, 0.02 / sqrt(2 * n_layers)),
    so the stream's variance does not grow with depth. Norms keep their ones and zeros. Goes by
    module type and parameter name, so it initializes any model with ``tc.GPT``'s names (a
    learner's, notebook 12)."""
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
    for name, param in model.named_parameters():
        if name.endswith(("attn.out_proj.weight", "mlp.fc_out.weight", "mlp.down_proj.weight")):
            nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * n_layers))


class GPT(nn.Module):
    """A decoder-only Transformer language model.

    ``logits = lm_head(final_norm(blocks(tok_emb(idx) + pos_emb(positions))))``

    Submodules: ``tok_emb`` (``Embedding(V, D)``), ``pos_emb`` (learned table, absent
    with rotary positions), ``drop`` (embedding dropout), ``blocks`` (``ModuleList`` of
    ``TransformerBlock``), ``final_norm``, ``lm_head`` (``Linear(D, V, bias=False)``).
    With ``tie_weights`` the head's weight *is* the embedding matrix (one tensor).

    Shapes: ``forward(idx (B, T) long) -> logits (B, T, V)``.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        if not isinstance(config, GPTConfig):
            got = type(config).__name__
            raise TypeError(
                say(
                    f"config must be a GPTConfig, got {got}",
                    f"config 必须是 GPTConfig，实际是 {got}",
                )
            )
        self.config = config
        D = config.d_model
        self.tok_emb = nn.Embedding(config.vocab_size, D)
        self.pos_emb = (
            LearnedPositionalEmbedding(config.max_seq_len, D)
            if config.positional == "learned"
            else None
        )
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(**config.block_kwargs()) for _ in range(config.n_layers)
        )
        self.final_norm = make_norm(config.norm, D, config.norm_eps, fused=config.fused_norms)
        self.lm_head = nn.Linear(D, config.vocab_size, bias=False)
        if config.tie_weights:
            self.lm_head.weight = self.tok_emb.weight  # shared Parameter, not a copy
        init_weights(self, config.n_layers)

    def num_params(self, non_embedding: bool = False) -> int:
        """Number of distinct parameters (a tied matrix counts once).

        ``non_embedding=True`` leaves out the token and position embedding tables
        (an untied LM head is still counted).
        """
        total = sum(p.numel() for p in self.parameters())  # parameters() yields shared ones once
        if non_embedding:
            total -= self.tok_emb.weight.numel()
            if self.pos_emb is not None:
                total -= self.pos_emb.weight.numel()
        return total

    def forward(
        self,
        idx: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        *,
        caches: list[KVCache] | None = None,
    ) -> torch.Tensor:
        """Logits ``(B, T, V)`` for token ids ``idx (B, T)``.

        ``attn_mask``: optional bool mask ``(T, T)`` or ``(B, 1, T, T)``, True = may attend.
        ``caches``: one ``KVCache`` per block for incremental decoding; ``idx`` then
        holds only the new tokens.
        """
        if validate.needed():  # skipped inside generate(): checked there
            self._check_inputs(idx, attn_mask, caches)
        past = len(caches[0]) if caches else 0
        with validate.inputs_checked():  # the layers below skip their own checks
            x = self.tok_emb(idx)  # (B, T, D)
            if self.pos_emb is not None:
                x = x + self.pos_emb(idx.shape[1], offset=past)  # (T, D) broadcasts
            x = self.drop(x)
            for i, block in enumerate(self.blocks):
                x = block(x, attn_mask, cache=caches[i] if caches else None)
            return self.lm_head(self.final_norm(x))  # (B, T, V)

    def _check_inputs(self, idx, attn_mask, caches) -> None:
        """Everything the layers would check, once: ``idx (B, T)``, the mask, the caches."""
        if caches is not None and len(caches) != len(self.blocks):
            blocks, got = len(self.blocks), len(caches)
            raise ValueError(
                say(
                    f"caches must hold one KVCache per block ({blocks}), got {got}",
                    f"caches 必须为每个块各存一个 KVCache（共 {blocks} 个），实际是 {got} 个",
                )
            )
        past = len(caches[0]) if caches else 0
        validate.token_ids(idx, self.config.vocab_size)
        B, T = idx.shape
        validate.seq_len(past + T, self.config.max_seq_len)
        validate.mask_with_cache(attn_mask, B, T, past)

    def loss(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy; ``targets (B, T)`` are ``idx`` shifted by one."""
        validate.token_ids(targets, self.config.vocab_size, name="targets")
        if targets.shape != idx.shape:
            want, got = tuple(idx.shape), tuple(targets.shape)
            raise ValueError(
                say(
                    f"targets must have the shape of idx {want}, got {got}",
                    f"targets 的形状必须与 idx 相同，即 {want}，实际是 {got}",
                )
            )
        logits = self(idx)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        *,
        generator: torch.Generator | None = None,
        use_cache: bool = False,
    ) -> torch.Tensor:
        """Append ``max_new_tokens`` sampled tokens to ``idx (B, T)``; returns ``(B, T + new)``.

        ``temperature=0`` picks the most likely token (greedy). ``top_k`` keeps only
        the k most likely tokens before sampling. The context is cropped to the
        last ``max_seq_len`` tokens. ``use_cache`` reuses past keys/values (a KV
        cache) instead of recomputing the whole prefix each step; it needs the
        whole output to fit in ``max_seq_len``. The model runs in eval mode and
        is put back in the mode it was in, also when sampling raises.
        """
        self._check_generate_args(idx, max_new_tokens, temperature, top_k, use_cache)
        was_training = self.training
        self.eval()
        try:
            # The prompt is checked and sampled ids lie in [0, V): forward need not recheck.
            with validate.inputs_checked():
                return self._sample(idx, max_new_tokens, temperature, top_k, generator, use_cache)
        finally:
            self.train(was_training)  # a failed call must not leave dropout off

    def _check_generate_args(self, idx, max_new_tokens, temperature, top_k, use_cache) -> None:
        """The prompt ``idx (B, T)`` and the sampling options, before the model changes mode."""
        validate.token_ids(idx, self.config.vocab_size)
        if (
            isinstance(max_new_tokens, bool)
            or not isinstance(max_new_tokens, int)
            or max_new_tokens < 0
        ):
            raise ValueError(
                say(
                    f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}",
                    f"max_new_tokens 必须是 >= 0 的 int，实际是 {max_new_tokens!r}",
                )
            )
        if temperature < 0:
            raise ValueError(
                say(
                    f"temperature must be >= 0, got {temperature}",
                    f"temperature（温度）必须 >= 0，实际是 {temperature}",
                )
            )
        if top_k is not None:
            validate.positive_int("top_k", top_k)
        if use_cache and idx.shape[1] + max_new_tokens > self.config.max_seq_len:
            limit, got = f"max_seq_len={self.config.max_seq_len}", idx.shape[1] + max_new_tokens
            raise ValueError(
                say(
                    f"use_cache needs prompt + new tokens <= {limit}, got {got}",
                    f"use_cache 要求提示词的词元数加上新生成的词元数 <= {limit}，实际是 {got}",
                )
            )

    def _sample(self, idx, max_new_tokens, temperature, top_k, generator, use_cache):
        """The decoding loop of ``generate``: ``idx (B, T) -> (B, T + max_new_tokens)``."""
        caches = [KVCache() for _ in self.blocks] if use_cache else None
        step_input = idx
        for _ in range(max_new_tokens):
            context = step_input if use_cache else idx[:, -self.config.max_seq_len :]
            logits = self(context, caches=caches)[:, -1, :]  # (B, V)
            next_id = self._next_token(logits, temperature, top_k, generator)  # (B, 1)
            idx = torch.cat([idx, next_id], dim=1)
            step_input = next_id
        return idx

    @staticmethod
    def _next_token(logits, temperature, top_k, generator) -> torch.Tensor:
        """One token id per row of ``logits (B, V)``, shape ``(B, 1)``."""
        if temperature == 0:
            return logits.argmax(dim=-1, keepdim=True)
        logits = logits / temperature
        if top_k is not None:
            kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = logits.softmax(dim=-1)
        if generator is not None and generator.device != probs.device:
            # torch.multinomial needs the generator on the tensor's device.
            return torch.multinomial(probs.cpu(), 1, generator=generator).to(probs.device)
        return torch.multinomial(probs, 1, generator=generator)

    @classmethod
    def from_hf_gpt2(cls, hf_model, **overrides) -> "GPT":
        """Build a ``GPT`` with the weights of a ``transformers`` ``GPT2LMHeadModel``.

        GPT-2 stores its projections as ``Conv1D`` with weights ``(in, out)``; ours
        are ``nn.Linear`` with ``(out, in)``, so those are transposed. GPT-2's
        ``gelu_new`` is the tanh approximation. Works for any GPT-2 size, including
        random-init models built from a ``GPT2Config``.
        """
        from .hf_gpt2 import gpt2_config_to_ours, gpt2_state_dict_to_ours

        config = gpt2_config_to_ours(hf_model.config, **overrides)
        model = cls(config)
        model.load_state_dict(gpt2_state_dict_to_ours(hf_model.state_dict(), config), strict=True)
        return model.to(next(hf_model.parameters()).dtype)

    @classmethod
    def from_hf_llama(cls, hf_model, **overrides) -> "GPT":
        """Build a ``GPT`` with the weights of a ``transformers`` ``LlamaForCausalLM``.

        The config becomes pre-LN, RMSNorm, SwiGLU, no biases, rotary positions
        (``pos_emb`` is None). LLaMA's separate ``q_proj``/``k_proj``/``v_proj`` are
        concatenated into our fused ``qkv_proj``; both use the rotate-half RoPE
        convention. The model comes back on ``hf_model``'s device, in its dtype.
        Grouped-query attention is not supported (see ``tfcourse.nn.hf_llama``).
        """
        from .hf_llama import llama_config_to_ours, llama_state_dict_to_ours

        config = llama_config_to_ours(hf_model.config, **overrides)
        model = cls(config)
        model.load_state_dict(llama_state_dict_to_ours(hf_model.state_dict(), config), strict=True)
        reference = next(hf_model.parameters())
        return model.to(device=reference.device, dtype=reference.dtype)
