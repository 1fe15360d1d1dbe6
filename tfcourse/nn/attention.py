"""Scaled dot-product attention, the causal mask, and multi-head attention."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..language import say
from . import validate
from .positional import RotaryEmbedding

ATTN_IMPLS = ("explicit", "sdpa")


def causal_mask(T: int, device=None) -> torch.Tensor:
    """Boolean ``(T, T)`` mask, True where query ``i`` may attend to key ``j`` (``j <= i``).

    The convention (True = may attend) is the one ``F.scaled_dot_product_attention``
    uses for boolean masks. The diagonal is True: a token always sees itself.
    """
    validate.positive_int("T", T)
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def _check_qkv(q, k, v, dropout_p) -> None:
    """q ``(..., T_q, d_k)``, k ``(..., T_k, d_k)``, v ``(..., T_k, d_v)`` float tensors."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        validate.floating_tensor(name, t)
        if t.dim() < 2:
            shape = tuple(t.shape)
            raise ValueError(
                say(
                    f"{name} must have shape (..., seq, dim), got {shape}",
                    f"{name} 的形状必须是 (..., seq, dim)，实际是 {shape}",
                )
            )
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        shapes = "q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v)"
        got = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        raise ValueError(say(f"expected {shapes}; got {got}", f"形状应为 {shapes}；实际是 {got}"))
    validate.probability("dropout_p", dropout_p)


def _check_scores_mask(mask, scores_shape: torch.Size) -> None:
    """``mask`` must be a bool tensor that broadcasts to the scores ``(..., T_q, T_k)``."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = f"dtype {mask.dtype}" if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(
            say(
                f"mask must be a bool tensor (True = may attend), got {got}",
                f"mask 必须是 bool 张量（True 表示可以关注），实际是 {got}",
            )
        )
    # Checked by hand: torch.broadcast_shapes imports sympy on first use (about 1 s).
    # A mask may have fewer dimensions than the scores: its trailing ones are compared.
    trailing = list(zip(reversed(mask.shape), reversed(scores_shape), strict=False))
    if mask.dim() > len(scores_shape) or any(m not in (1, s) for m, s in trailing):
        shape, scores = tuple(mask.shape), tuple(scores_shape)
        raise ValueError(
            say(
                f"mask of shape {shape} does not broadcast to the scores {scores}",
                f"形状为 {shape} 的 mask 无法广播到注意力分数的形状 {scores}",
            )
        )


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
):
    """``softmax(q k^T / sqrt(d_k)) v``, written out step by step.

    Args:
        q: queries ``(..., T_q, d_k)``; k: keys ``(..., T_k, d_k)``; v: values ``(..., T_k, d_v)``.
        mask: optional bool tensor broadcastable to ``(..., T_q, T_k)``; True = may attend.
            A query row with no allowed key gets all-zero weights (not NaN).
        dropout_p: dropout on the attention weights (pass 0.0 in eval mode).

    Returns:
        ``(output, weights)``: output ``(..., T_q, d_v)`` and the attention weights
        ``(..., T_q, T_k)`` after softmax and masking, before dropout (each allowed
        row sums to 1).
    """
    check = validate.needed()  # False when MultiHeadAttention passes the q, k, v it built
    if check:
        _check_qkv(q, k, v, dropout_p)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)
    if mask is not None:
        if check:
            _check_scores_mask(mask, scores.shape)
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        # A row with every key masked is softmax(-inf, ..., -inf) = NaN; such a
        # query attends to nothing, so its weights are zero (as in PyTorch's SDPA).
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    attended = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return attended @ v, weights


class KVCache:
    """Keys and values of the tokens seen so far, one per attention layer.

    ``k`` and ``v`` have shape ``(B, H_kv, T_past, head_dim)``, ``H_kv`` the layer's
    key/value heads (fewer than its query heads under grouped-query attention: the
    cache is what GQA shrinks); ``append`` returns the concatenation with the new
    step's keys and values and stores it.
    """

    def __init__(self):
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[-2]

    def append(self, k: torch.Tensor, v: torch.Tensor):
        if self.k is not None and self.v is not None:
            if k.shape[:2] != self.k.shape[:2] or k.shape[-1] != self.k.shape[-1]:
                B, H, _, hd = self.k.shape
                want, got = f"(batch={B}, heads={H}, T, head_dim={hd})", tuple(k.shape)
                raise ValueError(
                    say(
                        f"new keys must have shape {want} like the cached ones, got {got}",
                        f"新的键必须与缓存中的键形状一致，即 {want}，实际是 {got}",
                    )
                )
            k = torch.cat([self.k, k], dim=-2)
            v = torch.cat([self.v, v], dim=-2)
        self.k, self.v = k, v
        return k, v


def repeat_kv(t: torch.Tensor, n_rep: int) -> torch.Tensor:
    """``(B, H_kv, T, hd) -> (B, H_kv * n_rep, T, hd)``: key/value head ``g`` serves query
    heads ``g*n_rep .. g*n_rep + n_rep - 1`` (the grouping LLaMA-2/3 and Mistral use)."""
    if n_rep == 1:
        return t
    B, H_kv, T, hd = t.shape
    return t[:, :, None].expand(B, H_kv, n_rep, T, hd).reshape(B, H_kv * n_rep, T, hd)


class MultiHeadAttention(nn.Module):
    """Multi-head (causal) self-attention with a fused QKV projection.

    Args:
        d_model: model width D; must be divisible by ``n_heads``.
        n_heads: number of heads H; each head has ``head_dim = D // H`` channels.
        max_seq_len: longest sequence the causal-mask buffer covers.
        dropout: probability for attention dropout (after softmax) and residual
            dropout (after the output projection).
        bias: give the two projections a bias.
        causal: apply the causal mask (False for an encoder).
        attn_impl: ``"explicit"`` (step by step, the teaching path) or ``"sdpa"``
            (``F.scaled_dot_product_attention``, fused kernels); same result.
        rope_base: if given, apply rotary position embeddings with this base to q and k.
        n_kv_heads: key/value heads (default ``n_heads``); fewer gives grouped-query
            attention (GQA), 1 gives multi-query attention (MQA). Must divide ``n_heads``;
            each key/value head serves ``n_heads // n_kv_heads`` query heads.

    Parameter layout (what ``tfcourse.checks`` copies into a learner's module), with
    ``K = n_kv_heads * head_dim`` (``= D`` without GQA):
        ``qkv_proj.weight (D + 2K, D)``: rows ``[0, D)`` make q, ``[D, D+K)`` k,
        ``[D+K, D+2K)`` v; within each, head ``h`` owns rows ``[h*head_dim, (h+1)*head_dim)``.
        ``qkv_proj.bias (D + 2K,)``, ``out_proj.weight (D, D)``, ``out_proj.bias (D,)``.

    Shapes: ``forward(x (B, T, D)) -> (B, T, D)``, or with ``return_weights=True``
    ``((B, T, D), (B, H, T, T))``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        max_seq_len: int,
        dropout: float = 0.0,
        bias: bool = True,
        causal: bool = True,
        attn_impl: str = "explicit",
        rope_base: float | None = None,
        n_kv_heads: int | None = None,
    ):
        super().__init__()
        self.head_dim = validate.divisible(d_model, n_heads)
        self.d_model, self.n_heads = d_model, n_heads
        self.n_kv_heads = (
            n_heads if n_kv_heads is None else validate.positive_int("n_kv_heads", n_kv_heads)
        )
        if n_heads % self.n_kv_heads:
            kv = f"n_kv_heads={self.n_kv_heads}"
            raise ValueError(
                say(
                    f"{kv} must divide n_heads={n_heads}",
                    f"{kv} 必须能整除 n_heads={n_heads}",
                )
            )
        self.kv_dim = self.n_kv_heads * self.head_dim
        self.max_seq_len = validate.positive_int("max_seq_len", max_seq_len)
        self.dropout = validate.probability("dropout", dropout)
        self.causal = bool(causal)
        self.attn_impl = validate.choice("attn_impl", attn_impl, ATTN_IMPLS)
        # One (D -> 3D) matmul instead of three (D -> D): one kernel launch, and
        # the same layout as GPT-2's c_attn.
        self.qkv_proj = nn.Linear(d_model, d_model + 2 * self.kv_dim, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        # Attention dropout (on the weights after softmax) is applied inside the
        # attention call with p=self.dropout; residual dropout sits after out_proj.
        # Neither touches the residual stream itself.
        self.resid_dropout = nn.Dropout(dropout)
        # Built once for the longest sequence and sliced per call. A buffer moves
        # with .to(device) but is not a parameter; persistent=False keeps it out
        # of state_dict because it is a function of max_seq_len, not learned.
        self.mask: torch.Tensor  # (max_seq_len, max_seq_len) bool, True where allowed
        self.register_buffer("mask", causal_mask(max_seq_len), persistent=False)
        self.rotary = RotaryEmbedding(self.head_dim, max_seq_len, rope_base) if rope_base else None

    def _split_heads(self, t: torch.Tensor) -> torch.Tensor:
        B, T, width = t.shape
        return t.view(B, T, width // self.head_dim, self.head_dim).transpose(1, 2)  # (B, h, T, hd)

    def _combined_mask(self, attn_mask, B: int, T: int, past: int):
        """Bool mask broadcastable to (B, H, T, past + T), or None for "attend everywhere"."""
        if not self.causal:
            return attn_mask
        causal = self.mask[past : past + T, : past + T]
        return causal if attn_mask is None else causal & attn_mask

    def forward(
        self,
        x: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        *,
        return_weights: bool = False,
        cache: KVCache | None = None,
    ):
        """Attend ``x (B, T, D)``.

        Args:
            attn_mask: optional bool mask, True = may attend: ``(T, T)`` or
                ``(B, 1, T, T)`` (e.g. padding). Combined with the causal mask.
            return_weights: also return the attention weights ``(B, H, T, T)``
                (computed with the explicit path whatever ``attn_impl`` is).
            cache: a ``KVCache`` for incremental decoding; ``x`` holds the new tokens.
        """
        past = len(cache) if cache is not None else 0
        if validate.needed():  # skipped inside a block or GPT: checked there
            self._check_inputs(x, attn_mask, past)
        with validate.inputs_checked():  # rotary and the attention function skip theirs
            y, weights = self._attend(x, attn_mask, past, return_weights, cache)
        return (y, weights) if return_weights else y

    def _check_inputs(self, x, attn_mask, past: int) -> None:
        """``x (B, T, D)`` float, ``past + T <= max_seq_len``, ``attn_mask`` as in ``forward``."""
        validate.activations(x, self.d_model)
        B, T, _ = x.shape
        validate.seq_len(past + T, self.max_seq_len)
        validate.mask_with_cache(attn_mask, B, T, past)

    def _attend(self, x, attn_mask, past: int, return_weights: bool, cache):
        """The attention on checked inputs: ``(y (B, T, D), weights (B, H, T, T) or None)``."""
        B, T, D = x.shape
        q, k, v = self.qkv_proj(x).split([D, self.kv_dim, self.kv_dim], dim=-1)
        q, k, v = self._split_heads(q), self._split_heads(k), self._split_heads(v)
        if self.rotary is not None:
            q, k = self.rotary(q, k, offset=past)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, H_kv, past+T, hd)
        # Each key/value head serves a group of query heads (a view + copy; the cache
        # above keeps only the H_kv heads).
        k, v = (repeat_kv(t, self.n_heads // self.n_kv_heads) for t in (k, v))  # (B, H, ., hd)
        mask = self._combined_mask(attn_mask, B, T, past)
        p = self.dropout if self.training else 0.0

        if self.attn_impl == "sdpa" and not return_weights:
            weights = None
            if self.causal and attn_mask is None and (past == 0 or T == 1):
                # Pure causal attention: say so with is_causal instead of passing
                # the mask, which lets SDPA pick its fused causal kernels (flash
                # attention on GPU needs this). is_causal aligns the triangle
                # top-left, right only without a cache offset; one new token
                # after a cache may attend to every key, so it needs no mask.
                y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=past == 0)
            else:
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        else:
            y, weights = scaled_dot_product_attention(q, k, v, mask=mask, dropout_p=p)
        y = y.transpose(1, 2).reshape(B, T, D)  # merge heads
        return self.resid_dropout(self.out_proj(y)), weights

    def extra_repr(self) -> str:
        kv = f", n_kv_heads={self.n_kv_heads}" if self.n_kv_heads != self.n_heads else ""
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}{kv}, head_dim={self.head_dim}, "
            f"causal={self.causal}, attn_impl={self.attn_impl!r}"
        )
