"""The wrong and the right implementations that test_mutants.py runs.

See ``mutants/__init__.py``.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

import tfcourse as tc
from tfcourse import checks, training
from tfcourse.checks.mlp import check_swiglu


def variant(base, name, **attributes):
    """A subclass of ``base`` called ``name`` with some class attributes changed."""
    return type(name, (base,), attributes)


# ---------------------------------------------------------------------------------------------
# Causal mask and scaled dot-product attention


def mask_tril(T):
    return torch.tril(torch.ones(T, T)).bool()


def mask_not_triu(T):
    return ~torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)


def mask_diagonal_excluded(T):
    return torch.ones(T, T, dtype=torch.bool).tril(diagonal=-1)


def mask_float(T):
    return torch.tril(torch.ones(T, T))


def mask_triu(T):
    return torch.ones(T, T, dtype=torch.bool).triu()


def mask_all_true(T):
    return torch.ones(T, T, dtype=torch.bool)


def mask_blocked_true(T):
    """True where a position is blocked: the opposite of the course's convention."""
    return torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)


def make_sdpa(mistake=None):
    """Learner-style attention; ``mistake`` switches on one classic error."""

    def attention(q, k, v, mask=None):
        d_k = q.size(-1)
        if mistake == "queries_as_keys":
            k = q
        if mistake == "builds_causal":  # its own mask, whatever was passed
            mask = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
        if mistake == "inplace":
            q = q.div_(math.sqrt(d_k))
            scores = q @ k.transpose(-2, -1)
        else:
            scale = {"no_scale": 1.0, "scale_dk": d_k, "scale_dv": math.sqrt(v.size(-1))}.get(
                mistake, math.sqrt(d_k)
            )
            scores = q @ k.transpose(-2, -1) / scale
        weights_scores = scores
        if mask is not None and mistake not in ("mask_ignored", "mask_after_softmax"):
            blocked = mask if mistake == "mask_inverted" else ~mask
            if mistake == "mask_transposed":  # the upper triangle of a causal mask
                blocked = ~mask.transpose(-2, -1)
            scores = scores.masked_fill(blocked, 0.0 if mistake == "masked_zero" else float("-inf"))
            if mistake != "weights_unmasked":
                weights_scores = scores
        weights = scores.softmax(dim=-2 if mistake == "softmax_dim" else -1)
        if mask is not None and mistake == "mask_after_softmax":
            weights = weights * mask
        returned = weights_scores.softmax(dim=-1) if mistake == "weights_unmasked" else weights
        if mistake == "weights_are_scores":
            returned = scores
        return weights @ v, returned

    attention.__name__ = f"attention_{mistake}"
    return attention


def sdpa_einsum(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return torch.einsum("...qk,...kd->...qd", weights, v), weights


def sdpa_additive_mask(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    if mask is not None:
        additive = torch.zeros(mask.shape, dtype=q.dtype, device=q.device)
        scores = scores + additive.masked_fill(~mask, float("-inf"))
    weights = F.softmax(scores, dim=-1)
    return weights @ v, weights


def sdpa_manual_softmax(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(-1, -2)) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    exp = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    weights = exp / exp.sum(dim=-1, keepdim=True)
    return weights @ v, weights


def sdpa_torch_fused(q, k, v, mask=None):
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return out, scores.softmax(dim=-1)


# ---------------------------------------------------------------------------------------------
# Multi-head attention


class LearnerMHA(nn.Module):
    """Fused-QKV causal attention written the way a learner would; attributes select mistakes."""

    qkv_name = "qkv_proj"
    split = "view"  # view | no_transpose | transpose_first
    merge = "transpose"  # transpose | no_transpose | head_minor
    scale = "head_dim"  # head_dim | none | d_model | d_model_full | head_dim_full
    mask_mode = "causal"  # causal | none | diagonal | upper | inverted
    chunks = "qkv"  # the order the fused projection's output is split in
    dropout_ignored = False
    softmax_dim = -1
    weights_mode = "masked"  # masked | unmasked | after_dropout
    force_bias = None
    dropout_in_eval = False
    queries_as_keys = False
    skip_out_proj = False
    fill = "-inf"  # -inf | zero | after_softmax: what the causal mask does to blocked scores

    def __init__(self, d_model, n_heads, *, max_seq_len, dropout=0.0, bias=True):
        super().__init__()
        self.n_heads, self.head_dim, self.p = n_heads, d_model // n_heads, dropout
        bias = bias if self.force_bias is None else self.force_bias
        setattr(self, self.qkv_name, nn.Linear(d_model, 3 * d_model, bias=bias))
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.register_buffer(
            "mask", torch.ones(max_seq_len, max_seq_len, dtype=torch.bool).tril(), persistent=False
        )

    def _split(self, t):
        B, T, D = t.shape
        if self.split == "no_transpose":
            return t.reshape(B, self.n_heads, T, self.head_dim)
        if self.split == "transpose_first":
            return t.transpose(1, 2).reshape(B, self.n_heads, T, self.head_dim)
        if self.split == "interleaved":  # head h: channels h, h + H, ...
            return t.view(B, T, self.head_dim, self.n_heads).permute(0, 3, 1, 2)
        return t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)

    def _merge(self, y):
        B, H, T, hd = y.shape
        if self.merge == "no_transpose":
            return y.reshape(B, T, H * hd)
        if self.merge == "head_minor":
            return y.permute(0, 2, 3, 1).reshape(B, T, H * hd)
        return y.transpose(1, 2).reshape(B, T, H * hd)

    def forward(self, x, return_weights=False):
        B, T, D = x.shape
        parts = dict(
            zip(self.chunks, getattr(self, self.qkv_name)(x).split(D, dim=-1), strict=True)
        )
        q, k, v = (self._split(parts[name]) for name in "qkv")
        k = q if self.queries_as_keys else k
        divisor = {
            "head_dim": math.sqrt(self.head_dim),
            "none": 1.0,
            "d_model": math.sqrt(D),
            "d_model_full": D,
            "head_dim_full": self.head_dim,
        }[self.scale]
        scores = q @ k.transpose(-2, -1) / divisor
        allowed = {
            "causal": self.mask[:T, :T],
            "diagonal": self.mask[:T, :T].tril(-1),
            "upper": self.mask[:T, :T].T,
            "inverted": ~self.mask[:T, :T],
            "none": None,
        }[self.mask_mode]
        if allowed is None or self.fill == "after_softmax":
            masked = scores
        else:
            masked = scores.masked_fill(~allowed, 0.0 if self.fill == "zero" else float("-inf"))
        weights = masked.softmax(dim=self.softmax_dim)
        if allowed is not None and self.fill == "after_softmax":
            weights = weights * allowed
        training = (self.training or self.dropout_in_eval) and not self.dropout_ignored
        dropped = F.dropout(weights, self.p, training=training)
        merged = self._merge(dropped @ v)
        y = F.dropout(
            merged if self.skip_out_proj else self.out_proj(merged), self.p, training=training
        )
        if not return_weights:
            return y
        returned = {
            "masked": weights,
            "unmasked": scores.softmax(dim=-1),
            "after_dropout": dropped,
        }[self.weights_mode]
        return y, returned


class SeparateProjectionsMHA(nn.Module):
    """Separate q/k/v projections (LLaMA's layout), nn.Dropout modules, contiguous().view()."""

    def __init__(self, d_model, n_heads, *, max_seq_len, dropout=0.0, bias=True):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.attn_drop, self.resid_drop = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x, return_weights=False):
        B, T, D = x.shape
        q, k, v = (
            proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
            for proj in (self.q_proj, self.k_proj, self.v_proj)
        )
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        weights = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (self.attn_drop(weights) @ v).transpose(1, 2).contiguous().view(B, T, D)
        y = self.resid_drop(self.out_proj(y))
        return (y, weights) if return_weights else y


class FusedKernelMHA(nn.Module):
    """F.scaled_dot_product_attention(is_causal=True), einsum weights, a persistent mask buffer."""

    def __init__(self, d_model, n_heads, *, max_seq_len, dropout=0.0, bias=True):
        super().__init__()
        self.n_heads, self.p = n_heads, dropout
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.register_buffer("causal", torch.ones(max_seq_len, max_seq_len).tril().bool())

    def forward(self, x, return_weights=False):
        B, T, D = x.shape
        q, k, v = (
            t.unflatten(-1, (self.n_heads, -1)).transpose(1, 2)
            for t in self.qkv_proj(x).chunk(3, dim=-1)
        )
        p = self.p if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        y = F.dropout(self.out_proj(y.transpose(1, 2).flatten(2)), p, training=self.training)
        if not return_weights:
            return y
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
        return y, scores.masked_fill(~self.causal[:T, :T], float("-inf")).softmax(-1)


def first_head_manual(mha, x):
    D, hd = x.shape[-1], mha.head_dim
    q = mha.qkv_proj(x)[..., :hd]
    k = mha.qkv_proj(x)[..., D : D + hd]
    scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
    T = x.shape[1]
    return scores.masked_fill(~tc.causal_mask(T, device=x.device), float("-inf")).softmax(-1)


def make_first_head(mistake):
    """Learner-style head-0 weights; ``mistake`` switches on one error."""

    def first_head(mha, x):
        B, T, D = x.shape
        hd = mha.head_dim
        q, k, _ = mha.qkv_proj(x).split(D, dim=-1)
        q0, k0 = q[..., :hd], (q if mistake == "queries_as_keys" else k)[..., :hd]
        divisor = D if mistake == "divide_by_d_model" else math.sqrt(hd)
        allowed = mha.mask[:T, :T]
        allowed = allowed.T if mistake == "mask_upper" else allowed
        scores = q0 @ k0.transpose(-2, -1) / divisor
        if mistake == "mask_after_softmax":
            return scores.softmax(dim=-1) * allowed
        scores = scores.masked_fill(~allowed, 0.0 if mistake == "mask_zero" else float("-inf"))
        return scores.softmax(dim=-1)

    first_head.__name__ = f"first_head_{mistake}"
    return first_head


def first_head_last(mha, x):
    return mha(x, return_weights=True)[1][:, -1]


def first_head_second(mha, x):
    return mha(x, return_weights=True)[1][:, 1]


def first_head_average(mha, x):
    return mha(x, return_weights=True)[1].mean(dim=1)


def first_head_from_rows(mha, x, *, q_rows, k_rows, swapped=False):
    """Head 0's weights from the given rows of the fused projection's output."""
    out = mha.qkv_proj(x)
    q, k = out[..., q_rows], out[..., k_rows]
    if swapped:
        q, k = k, q
    T = x.shape[1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(mha.head_dim)
    return scores.masked_fill(~mha.mask[:T, :T], float("-inf")).softmax(-1)


def first_head_interleaved(mha, x):
    D, H = x.shape[-1], mha.n_heads
    return first_head_from_rows(mha, x, q_rows=slice(0, D, H), k_rows=slice(D, 2 * D, H))


def first_head_keys_from_q_rows(mha, x):
    hd = mha.head_dim
    return first_head_from_rows(mha, x, q_rows=slice(0, hd), k_rows=slice(hd, 2 * hd))


def first_head_swapped(mha, x):
    D, hd = x.shape[-1], mha.head_dim
    return first_head_from_rows(mha, x, q_rows=slice(0, hd), k_rows=slice(D, D + hd), swapped=True)


def first_head_unscaled(mha, x):
    D, hd = x.shape[-1], mha.head_dim
    q, k = mha.qkv_proj(x)[..., :hd], mha.qkv_proj(x)[..., D : D + hd]
    scores = (q @ k.transpose(-2, -1)).masked_fill(
        ~mha.mask[: x.shape[1], : x.shape[1]], float("-inf")
    )
    return scores.softmax(-1)


# ---------------------------------------------------------------------------------------------
# Norms


class LearnerLayerNorm(nn.Module):
    mistake = None

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        axes = {"sequence_axis": 1, "batch_axis": 0, "whole_sequence": (-2, -1)}
        dim = axes.get(self.mistake, -1)
        mean = x.mean(dim=dim, keepdim=True)
        var = x.var(dim=dim, keepdim=True, unbiased=self.mistake == "unbiased")
        if self.mistake in ("never_centred", "variance_about_zero"):
            var = x.pow(2).mean(dim=dim, keepdim=True)  # the spread around 0
        centred = x if self.mistake in ("no_centring", "never_centred") else x - mean
        if self.mistake == "eps_outside":
            x_hat = centred / (var.sqrt() + self.eps)
        elif self.mistake == "no_eps":
            x_hat = centred / torch.sqrt(var)
        elif self.mistake == "variance_not_rooted":
            x_hat = centred / (var + self.eps)
        else:
            x_hat = centred / torch.sqrt(var + self.eps)
        if self.mistake == "inplace":
            x.sub_(mean)
        if self.mistake == "bias_before_scale":
            return (x_hat + self.bias) * self.weight
        if self.mistake == "affine_not_applied":
            return x_hat
        if self.mistake == "no_bias":
            return x_hat * self.weight
        return x_hat * self.weight + self.bias


class LayerNormEps1e4(LearnerLayerNorm):
    """A wrong default eps (1e-4 instead of 1e-5); with eps given it is right."""

    def __init__(self, d_model, eps=1e-4):
        super().__init__(d_model, eps)


class LayerNormNoAffine(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return F.layer_norm(x, x.shape[-1:], eps=self.eps)


class LayerNormGammaBeta(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return F.layer_norm(x, x.shape[-1:], self.gamma, self.beta, self.eps)


class LayerNormFunctional(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


class LayerNormTorch(nn.LayerNorm):
    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, eps=eps)


class LearnerRMSNorm(nn.Module):
    mistake = None

    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        if self.mistake == "subtracts_mean":
            x = x - x.mean(dim=-1, keepdim=True)
        if self.mistake == "divides_by_std":  # the centred variance, x itself not centred
            var = (x - x.mean(dim=-1, keepdim=True)).pow(2).mean(dim=-1, keepdim=True)
            return x / torch.sqrt(var + self.eps) * self.weight
        if self.mistake == "mean_abs":
            return x / (x.abs().mean(dim=-1, keepdim=True) + self.eps) * self.weight
        if self.mistake == "mean_of_x":
            return x / (x.mean(dim=-1, keepdim=True) + self.eps) * self.weight
        if self.mistake == "torch_std":
            return x / (x.std(dim=-1, keepdim=True) + self.eps) * self.weight
        squares = x.pow(2)
        if self.mistake == "sum_of_squares":
            mean_square = squares.sum(dim=-1, keepdim=True)
        else:
            dim = {"sequence_axis": 1, "batch_axis": 0}.get(self.mistake, -1)
            mean_square = squares.mean(dim=dim, keepdim=True)
        if self.mistake == "eps_outside":
            return x / (mean_square.sqrt() + self.eps) * self.weight
        if self.mistake == "no_eps":
            return x / mean_square.sqrt() * self.weight
        if self.mistake == "mean_square_not_rooted":
            return x / (mean_square + self.eps) * self.weight
        if self.mistake == "weight_data":  # the right values, hidden from autograd
            return x * torch.rsqrt(mean_square + self.eps) * self.weight.data
        return x * torch.rsqrt(mean_square + self.eps) * self.weight


class RMSNormTorch(nn.RMSNorm):
    def __init__(self, d_model, eps=1e-6):
        super().__init__(d_model, eps=eps)


# ---------------------------------------------------------------------------------------------
# MLPs


class LearnerFeedForward(nn.Module):
    activation = staticmethod(F.gelu)
    default_width = 4
    ignore_d_hidden = False
    force_bias = None
    dropout_on_hidden = False
    activation_after_output = False

    def __init__(self, d_model, d_hidden=None, *, dropout=0.0, bias=True):
        super().__init__()
        if d_hidden is None or self.ignore_d_hidden:
            d_hidden = self.default_width * d_model
        bias = bias if self.force_bias is None else self.force_bias
        self.fc_in = nn.Linear(d_model, d_hidden, bias=bias)
        self.fc_out = nn.Linear(d_hidden, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        if self.activation_after_output:
            return self.drop(self.activation(self.fc_out(self.fc_in(x))))
        hidden = self.activation(self.fc_in(x))
        if self.dropout_on_hidden:
            return self.fc_out(self.drop(hidden))
        return self.drop(self.fc_out(hidden))


class FeedForwardGeluModule(nn.Module):
    """nn.GELU() as a module and functional dropout with training=self.training."""

    def __init__(self, d_model, d_hidden=None, *, dropout=0.0, bias=True):
        super().__init__()
        self.fc_in = nn.Linear(d_model, d_hidden or 4 * d_model, bias=bias)
        self.act = nn.GELU()
        self.fc_out = nn.Linear(d_hidden or 4 * d_model, d_model, bias=bias)
        self.p = dropout

    def forward(self, x):
        return F.dropout(self.fc_out(self.act(self.fc_in(x))), self.p, training=self.training)


def hidden_two_thirds(d_model):
    return 256 * math.ceil(int(2 * d_model / 3) / 256)


def hidden_unrounded(d_model):
    return int(8 * d_model / 3)


def hidden_ceil(d_model):
    return 256 * math.ceil(int(8 * d_model / 3) / 256)


class LearnerSwiGLU(nn.Module):
    swapped = False
    activation = staticmethod(F.silu)
    mistake = None

    def __init__(self, d_model, d_hidden=None, *, bias=False, dropout=0.0):
        super().__init__()
        d_hidden = d_hidden or tc.swiglu_hidden_dim(d_model)
        self.gate_proj = nn.Linear(d_model, d_hidden, bias=bias)
        self.up_proj = nn.Linear(d_model, d_hidden, bias=bias)
        self.down_proj = nn.Linear(d_hidden, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        gate, up = self.gate_proj(x), self.up_proj(x)
        if self.swapped:
            gate, up = up, gate
        if self.mistake == "no_up":
            return self.drop(self.down_proj(F.silu(gate)))
        if self.mistake == "silu_of_product":
            return self.drop(self.down_proj(F.silu(gate * up)))
        if self.mistake == "added":
            return self.drop(self.down_proj(F.silu(gate) + up))
        return self.drop(self.down_proj(self.activation(gate) * up))


# ---------------------------------------------------------------------------------------------
# The block


class LearnerBlock(nn.Module):
    """A block wired from the reference sublayers; ``mistake`` changes the wiring."""

    mistake = None

    def __init__(self, d_model, n_heads, *, max_seq_len, pre_ln=True, dropout=0.0):
        super().__init__()
        if self.mistake == "dropout_ignored":
            dropout = 0.0
        self.pre_ln = pre_ln
        self.norm1, self.norm2 = tc.LayerNorm(d_model), tc.LayerNorm(d_model)
        self.attn = tc.MultiHeadAttention(
            d_model,
            n_heads,
            max_seq_len=max_seq_len,
            dropout=0.0 if self.mistake == "no_attention_dropout" else dropout,
        )
        self.mlp = tc.FeedForward(
            d_model, dropout=0.0 if self.mistake == "no_mlp_dropout" else dropout
        )
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        pre = {"always_post": False, "always_pre": True}.get(self.mistake, self.pre_ln)
        if self.mistake == "inplace":
            x += self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))
        if self.mistake == "norm_on_stream":
            x = self.norm1(x)
            x = x + self.attn(x)
            x = self.norm2(x)
            return x + self.mlp(x)
        if self.mistake == "parallel":
            return x + self.attn(self.norm1(x)) + self.mlp(self.norm2(x))
        if self.mistake == "norm_before_add" and not pre:
            x = x + self.norm1(self.attn(x))
            return x + self.norm2(self.mlp(x))
        if pre:
            attn_out = self.attn(self.norm1(x))
            if self.mistake in ("extra_residual_dropout", "extra_attention_dropout"):
                attn_out = self.drop(attn_out)  # nanoGPT's resid_dropout, on top of tc's own
            x = attn_out if self.mistake == "no_attn_residual" else x + attn_out
            mlp_out = self.mlp(self.norm2(x))
            if self.mistake == "extra_residual_dropout":
                mlp_out = self.drop(mlp_out)
            x = x + mlp_out
            return self.drop(x) if self.mistake == "residual_dropout" else x
        x = self.norm1(x + self.attn(x))
        return self.norm2(x + self.mlp(x))


class TorchPartsBlock(nn.Module):
    """nn.LayerNorm norms, separate q/k/v projections and an nn.GELU MLP."""

    def __init__(self, d_model, n_heads, *, max_seq_len, pre_ln=True, dropout=0.0):
        super().__init__()
        self.pre_ln = pre_ln
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = SeparateProjectionsMHA(
            d_model, n_heads, max_seq_len=max_seq_len, dropout=dropout
        )
        self.mlp = FeedForwardGeluModule(d_model, dropout=dropout)

    def forward(self, x):
        if self.pre_ln:
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))
        x = self.norm1(x + self.attn(x))
        return self.norm2(x + self.mlp(x))


# ---------------------------------------------------------------------------------------------
# Gradient probe and GPT


def make_probe(mistake=None):
    def probe(model, idx, targets):
        if mistake != "no_zero_grad":
            model.zero_grad(set_to_none=True)
        seen = {}

        def keep(module, args, output):
            output.retain_grad()
            seen["x"] = output

        handle = model.drop.register_forward_hook(keep)
        logits = model(idx)
        if mistake == "loss_sum":  # the sum of the final norm's output, not the cross-entropy
            normed = {}
            hook = model.final_norm.register_forward_hook(lambda m, a, out: normed.update(h=out))
            model.zero_grad(set_to_none=True)
            model(idx)
            hook.remove()
            normed["h"].sum().backward()
        else:
            reduction = "sum" if mistake == "summed_loss" else "mean"
            F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction=reduction).backward()
        if mistake != "hook_left":
            handle.remove()
        if mistake == "weight_grad":
            embedding = model.tok_emb.weight.grad.norm().item()
        elif mistake == "activation_norm":
            embedding = seen["x"].norm().item()
        else:
            embedding = seen["x"].grad.norm().item()
        if mistake == "summed_norms":
            blocks = [
                sum(p.grad.norm().item() for p in block.parameters()) for block in model.blocks
            ]
        elif mistake == "squared":
            blocks = [
                sum(p.grad.pow(2).sum().item() for p in block.parameters())
                for block in model.blocks
            ]
        else:
            blocks = [
                torch.cat([p.grad.flatten() for p in block.parameters()]).norm().item()
                for block in model.blocks
            ]
        return embedding, blocks[::-1] if mistake == "reversed" else blocks

    probe.__name__ = f"probe_{mistake}"
    return probe


class LearnerGPT(nn.Module):
    mistake = None

    def __init__(self, config):
        super().__init__()
        D = config.d_model
        self.tok_emb = nn.Embedding(config.vocab_size, D)
        table = config.positional == "learned" or self.mistake == "table_with_rope"
        self.pos_emb = tc.LearnedPositionalEmbedding(config.max_seq_len, D) if table else None
        self.blocks = nn.ModuleList(
            tc.TransformerBlock(**config.block_kwargs()) for _ in range(config.n_layers)
        )
        self.drop = nn.Dropout(config.dropout)
        self.final_norm = tc.LayerNorm(D)
        self.lm_head = nn.Linear(D, config.vocab_size, bias=False)
        if self.mistake != "untied":
            self.lm_head.weight = self.tok_emb.weight
        if self.mistake not in ("default_init", "embedding_only_init"):  # GPT-2's, as tc.GPT's
            tc.nn.model.init_weights(self, config.n_layers)
        linears = [m for m in self.modules() if isinstance(m, nn.Linear)]
        if self.mistake == "unscaled_residual":  # N(0, 0.02) everywhere, out_proj/fc_out too
            for m in linears:
                nn.init.normal_(m.weight, std=0.02)
        if self.mistake == "embedding_only_init":
            nn.init.normal_(self.tok_emb.weight, std=0.02)
        if self.mistake == "random_bias":
            for m in linears:
                if m.bias is not None:
                    nn.init.uniform_(m.bias, -0.1, 0.1)

    def forward(self, idx):
        x = self.tok_emb(idx)
        if self.mistake == "scaled_embeddings":
            x = x * math.sqrt(x.shape[-1])
        if self.mistake == "positions_from_1":  # pos_emb(T, offset=1): rows 1 to T
            x = x + self.pos_emb(idx.shape[1], offset=1)
        elif self.mistake != "no_positions" and self.pos_emb is not None:
            x = x + self.pos_emb(idx.shape[1])
        if self.mistake != "no_embedding_dropout":
            x = self.drop(x)
        blocks = list(self.blocks)
        if self.mistake == "reversed_blocks":
            blocks.reverse()
        if self.mistake == "first_block_only":
            blocks = blocks[:1]
        for block in blocks:
            x = block(x)
        if self.mistake != "no_final_norm":
            x = self.final_norm(x)
        logits = self.lm_head(x)
        if self.mistake == "softmax":
            return logits.softmax(-1)
        if self.mistake == "log_softmax":
            return logits.log_softmax(-1)
        return logits


# ---------------------------------------------------------------------------------------------
# Counting parameters: the exercises' functions, with one mistake each


def linear_bias_count(module, mistake=None):
    """The Linear biases inside ``module`` (notebook 07's solution), or a mistake."""
    if mistake == "norms-too":
        return sum(p.numel() for name, p in module.named_parameters() if name.endswith("bias"))
    if mistake == "no-none-check":
        return sum(m.bias.numel() for m in module.modules() if isinstance(m, nn.Linear))
    if mistake == "children-only":
        return sum(
            m.bias.numel()
            for m in module.children()
            if isinstance(m, nn.Linear) and m.bias is not None
        )
    linears = [m for m in module.modules() if isinstance(m, nn.Linear) and m.bias is not None]
    if mistake == "layers":
        return len(linears)
    if mistake == "weights-too":
        return sum(m.bias.numel() + m.weight.numel() for m in linears)
    if mistake == "every-parameter":
        return sum(p.numel() for p in module.parameters())
    return sum(m.bias.numel() for m in linears)


def linear_bias_count_by_name(module):
    """A correct variant: biases found by name, kept when their owner is a Linear."""
    return sum(
        p.numel()
        for name, p in module.named_parameters()
        if name.endswith(".bias")
        and isinstance(module.get_submodule(name.rsplit(".", 1)[0]), nn.Linear)
    )


def gpt_num_params(config, mistake=None):
    """Parameters of tc.GPT(config) by formula (notebook 07's solution), or a mistake."""
    V, T, D, L = config.vocab_size, config.max_seq_len, config.d_model, config.n_layers
    H = config.d_hidden or 4 * D
    if mistake == "width-4d":
        H = 4 * D
    bias = {"no-biases": False, "always-biases": True}.get(mistake, config.bias)
    if mistake == "padded-vocabulary":
        V = 50_304
    attention = 4 * D * D + bias * 4 * D
    mlp = 2 * D * H + bias * (H + D)
    blocks = (L - (mistake == "block-missing")) * (attention + mlp + 4 * D)
    embeddings = {"no-embeddings": 0, "no-token": T * D, "no-positions": V * D}.get(
        mistake, V * D + T * D
    )
    head = 0 if config.tie_weights else V * D
    if mistake == "head-always":
        head = V * D
    if mistake == "head-never":
        head = 0
    head += V if mistake == "head-bias" else 0
    final_norm = 0 if mistake == "no-final-norm" else 2 * D
    return embeddings + blocks + final_norm + head


def gpt_num_params_by_layers(config):
    """A correct variant: every layer counted as in_features * out_features (+ out)."""

    def linear(n_in, n_out, bias):
        return n_in * n_out + (n_out if bias else 0)

    D, H = config.d_model, config.d_hidden or 4 * config.d_model
    block = (
        linear(D, 3 * D, config.bias)
        + linear(D, D, config.bias)
        + linear(D, H, config.bias)
        + linear(H, D, config.bias)
        + 2 * (2 * D)
    )
    tables = (config.vocab_size + config.max_seq_len) * D
    head = 0 if config.tie_weights else linear(D, config.vocab_size, False)
    return tables + config.n_layers * block + 2 * D + head


# ---------------------------------------------------------------------------------------------
# Notebook 08: the schedule, the training loop, batches, the loss estimate and the sampler,
# written as a learner would; each keyword makes one mistake (the defaults are right)


def lr_schedule(step, *, max_lr, warmup_steps, total_steps, min_lr=0.0, shift=0):
    """Notebook 08's lr_at; ``shift``: the rate of step ``step + shift`` (one step off)."""
    step = step + shift
    if step < warmup_steps:
        return max_lr * (step + 1) / (warmup_steps + 1)
    if step >= total_steps:
        return min_lr
    progress = (step - warmup_steps) / (total_steps - warmup_steps)
    return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * progress))


def lr_of_the_step_before(step, **setting):
    """The course's schedule asked for ``step - 1`` (steps counted from 1): at step 0 it
    refuses step -1."""
    return training.lr_at(step - 1, **setting)


def make_train_loop(*, zero_grad="before", clip="norm", backward="share", own_optimizer=None):
    """Notebook 08's train_loop. ``zero_grad="after step"``: the gradients cleared after the
    step; ``clip="value"``: ``clip_grad_value_``; ``backward="whole"``: each micro-batch's
    whole loss backpropagated, the mean still reported; ``own_optimizer(model, lr)``: an
    optimizer of the loop's own instead of the one it is given."""

    def train_loop(model, optimizer, batches, *, max_lr, warmup_steps, max_norm=1.0):
        steps, n_micro = batches.shape[:2]
        if own_optimizer is not None:
            optimizer = own_optimizer(model, max_lr)
        model.train()
        losses = []
        for step in range(steps):
            lr = training.lr_at(
                step,
                max_lr=max_lr,
                warmup_steps=warmup_steps,
                total_steps=steps,
                min_lr=max_lr / 10,
            )
            for group in optimizer.param_groups:
                group["lr"] = lr
            if zero_grad == "before":
                optimizer.zero_grad(set_to_none=True)
            total = 0.0
            for micro in batches[step]:
                logits = model(micro[:, :-1])
                loss = F.cross_entropy(logits.flatten(0, 1), micro[:, 1:].flatten())
                (loss if backward == "whole" else loss / n_micro).backward()
                total += loss.item()
            if clip == "value":
                torch.nn.utils.clip_grad_value_(model.parameters(), max_norm)
            else:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            if zero_grad == "after step":
                optimizer.zero_grad(set_to_none=True)
            losses.append(total / n_micro)
        return losses

    return train_loop


def make_get_batch(bound=lambda n, seq_len: n - seq_len):
    """Notebook 08's get_batch, windows sliced one by one and stacked; ``bound(len(data),
    seq_len)``: the exclusive upper bound of the starts."""

    def get_batch(data, batch_size, seq_len, *, generator=None):
        high = bound(len(data), seq_len)
        starts = torch.randint(0, high, (batch_size,), generator=generator, device=data.device)
        x = torch.stack([data[s : s + seq_len] for s in starts.tolist()])
        y = torch.stack([data[s + 1 : s + seq_len + 1] for s in starts.tolist()])
        return x, y

    return get_batch


def make_estimate_loss(*, eval_mode=True, no_grad=True):
    """Notebook 08's estimate_loss; ``eval_mode=False``, ``no_grad=False`` each leave one out."""

    def estimate_loss(model, batches):
        was_training = model.training
        if eval_mode:
            model.eval()
        total = 0.0
        with torch.no_grad() if no_grad else torch.enable_grad():
            for batch in batches:
                logits = model(batch[:, :-1])
                total += F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten()).item()
        model.train(was_training)
        return total / len(batches)

    return estimate_loss


def make_sampler(*, draw_from="probabilities"):
    """Notebook 08's generate; ``draw_from="logits"``: torch.multinomial on the logits."""

    def generate(
        model, idx, max_new_tokens, *, temperature=1.0, top_k=None, top_p=None, generator=None
    ):
        was_training = model.training
        model.eval()
        with torch.no_grad():
            for _ in range(max_new_tokens):
                logits = model(idx[:, -model.config.max_seq_len :])[:, -1, :] / temperature
                if top_k is not None:
                    kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                if top_p is not None:  # the mass strictly before each sorted token: < p stays
                    probs, order = logits.softmax(dim=-1).sort(dim=-1, descending=True)
                    before = torch.cat(
                        [torch.zeros_like(probs[:, :1]), probs.cumsum(-1)[:, :-1]], 1
                    )
                    cut = torch.empty_like(before, dtype=torch.bool).scatter_(
                        1, order, before >= top_p
                    )
                    logits = logits.masked_fill(cut, float("-inf"))
                weights = logits if draw_from == "logits" else logits.softmax(dim=-1)
                idx = torch.cat([idx, torch.multinomial(weights, 1, generator=generator)], dim=1)
        model.train(was_training)
        return idx

    return generate


# ---------------------------------------------------------------------------------------------
# The catalogue

MUTANTS = [
    # causal mask
    (
        "mask-diagonal-excluded",
        checks.check_causal_mask,
        mask_diagonal_excluded,
        "the diagonal is excluded",
    ),
    ("mask-float", checks.check_causal_mask, mask_float, "expected torch.bool"),
    ("mask-upper-triangle", checks.check_causal_mask, mask_triu, "the upper triangle (triu)"),
    # scaled dot-product attention
    ("sdpa-mask-ignored", checks.check_attention, make_sdpa("mask_ignored"), "mask is ignored"),
    ("mask-all-true", checks.check_causal_mask, mask_all_true, "nothing is masked (all True)"),
    (
        "mask-true-marks-blocked",
        checks.check_causal_mask,
        mask_blocked_true,
        "True marks blocked positions",
    ),
    (
        "sdpa-builds-its-own-causal-mask",
        checks.check_attention,
        make_sdpa("builds_causal"),
        "a causal mask is built inside",
    ),
    (
        "sdpa-scaled-by-value-width",
        checks.check_attention,
        make_sdpa("scale_dv"),
        "scaled by the value width",
    ),
    (
        "sdpa-masked-scores-zero",
        checks.check_attention,
        make_sdpa("masked_zero"),
        "masked scores are set to 0 instead of -inf",
    ),
    (
        "sdpa-weights-are-the-scores",
        checks.check_attention,
        make_sdpa("weights_are_scores"),
        "the returned weights are the scores before the softmax",
    ),
    (
        "sdpa-mask-inverted",
        checks.check_attention,
        make_sdpa("mask_inverted"),
        "the mask is inverted",
    ),
    (
        "sdpa-mask-after-softmax",
        checks.check_attention,
        make_sdpa("mask_after_softmax"),
        "applied after the softmax",
    ),
    ("sdpa-no-scaling", checks.check_attention, make_sdpa("no_scale"), "not scaled by 1/sqrt(d_k)"),
    (
        "sdpa-scale-by-dk",
        checks.check_attention,
        make_sdpa("scale_dk"),
        "divided by d_k instead of sqrt(d_k)",
    ),
    (
        "sdpa-softmax-over-queries",
        checks.check_attention,
        make_sdpa("softmax_dim"),
        "softmax is taken over the queries axis (dim=-2)",
    ),
    (
        "sdpa-weights-unmasked",
        checks.check_attention,
        make_sdpa("weights_unmasked"),
        "returned weights are not masked",
    ),
    (
        "sdpa-inplace-input",
        checks.check_attention,
        make_sdpa("inplace"),
        "modified its input q in place",
    ),
    (
        "sdpa-mask-wrong-triangle",
        checks.check_attention,
        make_sdpa("mask_transposed"),
        "the mask is applied on the wrong triangle",
    ),
    (
        "sdpa-queries-as-keys",
        checks.check_attention,
        make_sdpa("queries_as_keys"),
        "the queries are used as keys",
    ),
    # multi-head attention
    (
        "mha-mask-inverted",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "InvertedMaskMHA", mask_mode="inverted"),
        "the mask is inverted (later tokens allowed",
    ),
    (
        "mha-divided-by-head-dim",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "HeadDimMHA", scale="head_dim_full"),
        "the scores are divided by head_dim instead of sqrt(head_dim)",
    ),
    (
        "mha-interleaved-heads",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "InterleavedMHA", split="interleaved"),
        "head h takes the interleaved channels",
    ),
    (
        "mha-split-k-q-v",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "KQVSplitMHA", chunks="kqv"),
        "split as (k, q, v) instead of (q, k, v)",
    ),
    (
        "mha-dropout-ignored",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "NoDropoutMHA", dropout_ignored=True),
        "dropout is never applied",
    ),
    (
        "mha-no-causal-mask",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "NoMaskMHA", mask_mode="none"),
        "causal mask is not applied",
    ),
    (
        "mha-diagonal-masked",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "OffByOneMHA", mask_mode="diagonal"),
        "the mask is off by one",
    ),
    (
        "mha-no-scaling",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "UnscaledMHA", scale="none"),
        "not scaled by 1/sqrt(head_dim)",
    ),
    (
        "mha-scale-by-d-model",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "DModelScaleMHA", scale="d_model"),
        "scaled by 1/sqrt(d_model) instead of 1/sqrt(head_dim)",
    ),
    (
        "mha-divide-by-d-model",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "DModelDivisorMHA", scale="d_model_full"),
        "divided by d_model instead of sqrt(head_dim)",
    ),
    (
        "mha-mask-wrong-triangle",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "UpperMaskMHA", mask_mode="upper"),
        "the mask keeps the wrong triangle (triu instead of tril)",
    ),
    (
        "mha-mask-fills-zero",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "ZeroFilledMaskMHA", fill="zero"),
        "fills the blocked scores with 0 instead of -inf",
    ),
    (
        "mha-mask-after-softmax",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "MaskAfterSoftmaxMHA", fill="after_softmax"),
        "the causal mask is applied after the softmax",
    ),
    (
        "mha-queries-as-keys",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "QueriesAsKeysMHA", queries_as_keys=True),
        "the queries are used as keys",
    ),
    (
        "mha-no-output-projection",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "NoOutProjMHA", skip_out_proj=True),
        "the output projection is left out",
    ),
    (
        "mha-softmax-over-queries",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "WrongAxisMHA", softmax_dim=-2),
        "queries axis (dim=-2)",
    ),
    (
        "mha-split-view-without-transpose",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "SplitViewMHA", split="no_transpose"),
        "heads are split with view(B, H, T, head_dim)",
    ),
    (
        "mha-split-transpose-instead-of-reshape",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "SplitTransposeMHA", split="transpose_first"),
        "transposing before reshaping",
    ),
    (
        "mha-merge-without-transpose",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "MergeNoTransposeMHA", merge="no_transpose"),
        "without transpose(1, 2) first",
    ),
    (
        "mha-merge-wrong-order",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "MergeOrderMHA", merge="head_minor"),
        "heads are merged in the wrong order",
    ),
    (
        "mha-weights-unmasked",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "UnmaskedWeightsMHA", weights_mode="unmasked"),
        "returned weights are not masked",
    ),
    (
        "mha-weights-after-dropout",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "DroppedWeightsMHA", weights_mode="after_dropout"),
        "weights are returned after dropout",
    ),
    (
        "mha-dropout-in-eval",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "EvalDropoutMHA", dropout_in_eval=True),
        "dropout is active in eval mode",
    ),
    (
        "mha-bias-when-bias-false",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "AlwaysBiasMHA", force_bias=True),
        "bias=False was ignored",
    ),
    (
        "mha-misnamed-parameter",
        checks.check_multi_head_attention,
        variant(LearnerMHA, "MisnamedMHA", qkv_name="c_attn"),
        "your 'c_attn.weight' should be called 'qkv_proj.weight'",
    ),
    (
        "head-weights-last-head",
        checks.check_first_head_weights,
        first_head_last,
        "the weights of the last head",
    ),
    (
        "head-weights-second-head",
        checks.check_first_head_weights,
        first_head_second,
        "the weights of head 1 instead of head 0",
    ),
    (
        "head-weights-average-over-heads",
        checks.check_first_head_weights,
        first_head_average,
        "the average over all heads",
    ),
    (
        "head-weights-interleaved-channels",
        checks.check_first_head_weights,
        first_head_interleaved,
        "interleaved channels 0, H, 2H",
    ),
    (
        "head-weights-keys-from-q-rows",
        checks.check_first_head_weights,
        first_head_keys_from_q_rows,
        "the keys are read from the q rows",
    ),
    (
        "head-weights-queries-and-keys-swapped",
        checks.check_first_head_weights,
        first_head_swapped,
        "queries and keys are swapped",
    ),
    (
        "head-weights-unscaled",
        checks.check_first_head_weights,
        first_head_unscaled,
        "not scaled by 1/sqrt(head_dim)",
    ),
    (
        "head-weights-queries-as-keys",
        checks.check_first_head_weights,
        make_first_head("queries_as_keys"),
        "the queries are used as keys",
    ),
    (
        "head-weights-divide-by-d-model",
        checks.check_first_head_weights,
        make_first_head("divide_by_d_model"),
        "divided by d_model instead of sqrt(head_dim)",
    ),
    (
        "head-weights-mask-fills-zero",
        checks.check_first_head_weights,
        make_first_head("mask_zero"),
        "the blocked scores are set to 0 instead of -inf",
    ),
    (
        "head-weights-mask-after-softmax",
        checks.check_first_head_weights,
        make_first_head("mask_after_softmax"),
        "the causal mask multiplies the weights after the softmax",
    ),
    (
        "head-weights-mask-wrong-triangle",
        checks.check_first_head_weights,
        make_first_head("mask_upper"),
        "the mask keeps the wrong triangle",
    ),
    # norms
    (
        "layernorm-unbiased-variance",
        checks.check_layernorm,
        variant(LearnerLayerNorm, "UnbiasedLayerNorm", mistake="unbiased"),
        "the variance is unbiased",
    ),
    (
        "layernorm-eps-outside-sqrt",
        checks.check_layernorm,
        variant(LearnerLayerNorm, "EpsOutsideLayerNorm", mistake="eps_outside"),
        "eps is added outside the square root",
    ),
    ("layernorm-no-affine", checks.check_layernorm, LayerNormNoAffine, "no learnable affine"),
    (
        "layernorm-mean-not-subtracted",
        checks.check_layernorm,
        variant(LearnerLayerNorm, "UncentredLayerNorm", mistake="no_centring"),
        "the mean is not subtracted",
    ),
    (
        "layernorm-never-centred",
        checks.check_layernorm,
        variant(LearnerLayerNorm, "RmsWithBiasLayerNorm", mistake="never_centred"),
        "the mean is never subtracted",
    ),
    (
        "layernorm-variance-about-zero",
        checks.check_layernorm,
        variant(LearnerLayerNorm, "UncentredVarianceLayerNorm", mistake="variance_about_zero"),
        "the variance is mean(x**2)",
    ),
    (
        "layernorm-bias-before-scale",
        checks.check_layernorm,
        variant(LearnerLayerNorm, "BiasFirstLayerNorm", mistake="bias_before_scale"),
        "the bias is added before the scale",
    ),
    (
        "layernorm-default-eps-1e-4",
        checks.check_layernorm,
        LayerNormEps1e4,
        "the default eps is 0.0001, expected 1e-05",
    ),
    (
        "layernorm-misnamed-gamma-beta",
        checks.check_layernorm,
        LayerNormGammaBeta,
        "your 'gamma' should be called 'weight'",
    ),
    (
        "layernorm-inplace-input",
        checks.check_layernorm,
        variant(LearnerLayerNorm, "InplaceLayerNorm", mistake="inplace"),
        "modified its input x in place",
    ),
    (
        "rmsnorm-subtracts-mean",
        checks.check_rmsnorm,
        variant(LearnerRMSNorm, "CenteredRMSNorm", mistake="subtracts_mean"),
        "the mean is subtracted",
    ),
    (
        "rmsnorm-eps-outside-sqrt",
        checks.check_rmsnorm,
        variant(LearnerRMSNorm, "EpsOutsideRMSNorm", mistake="eps_outside"),
        "eps is added outside the square root",
    ),
    (
        "rmsnorm-divides-by-std",
        checks.check_rmsnorm,
        variant(LearnerRMSNorm, "StdRMSNorm", mistake="divides_by_std"),
        "divided by its standard deviation",
    ),
    (
        "rmsnorm-mean-abs-instead-of-rms",
        checks.check_rmsnorm,
        variant(LearnerRMSNorm, "MeanAbsRMSNorm", mistake="mean_abs"),
        "the mean of |x|",
    ),
    (
        "layernorm-no-eps",
        checks.check_layernorm,
        variant(LearnerLayerNorm, "NoEpsLayerNorm", mistake="no_eps"),
        "eps is left out",
    ),
    (
        "layernorm-divides-by-variance",
        checks.check_layernorm,
        variant(LearnerLayerNorm, "VarianceLayerNorm", mistake="variance_not_rooted"),
        "divides by the variance instead of its square root",
    ),
    (
        "layernorm-affine-not-applied",
        checks.check_layernorm,
        variant(LearnerLayerNorm, "UnscaledLayerNorm", mistake="affine_not_applied"),
        "weight and bias are not applied",
    ),
    (
        "layernorm-no-bias",
        checks.check_layernorm,
        variant(LearnerLayerNorm, "NoBiasLayerNorm", mistake="no_bias"),
        "the bias is not added",
    ),
    (
        "layernorm-sequence-axis",
        checks.check_layernorm,
        variant(LearnerLayerNorm, "SequenceAxisLayerNorm", mistake="sequence_axis"),
        "taken over the sequence axis (dim=1)",
    ),
    (
        "layernorm-batch-axis",
        checks.check_layernorm,
        variant(LearnerLayerNorm, "BatchAxisLayerNorm", mistake="batch_axis"),
        "taken over the batch axis (dim=0), as BatchNorm does",
    ),
    (
        "layernorm-whole-sequence",
        checks.check_layernorm,
        variant(LearnerLayerNorm, "WholeSequenceLayerNorm", mistake="whole_sequence"),
        "taken over the whole sequence and its features",
    ),
    (
        "rmsnorm-no-eps",
        checks.check_rmsnorm,
        variant(LearnerRMSNorm, "NoEpsRMSNorm", mistake="no_eps"),
        "eps is left out",
    ),
    (
        "rmsnorm-divides-by-mean-square",
        checks.check_rmsnorm,
        variant(LearnerRMSNorm, "MeanSquareRMSNorm", mistake="mean_square_not_rooted"),
        "divides by the mean square instead of its square root",
    ),
    (
        "rmsnorm-mean-of-x",
        checks.check_rmsnorm,
        variant(LearnerRMSNorm, "MeanRMSNorm", mistake="mean_of_x"),
        "divides by the mean of x instead",
    ),
    (
        "rmsnorm-sum-of-squares",
        checks.check_rmsnorm,
        variant(LearnerRMSNorm, "SumRMSNorm", mistake="sum_of_squares"),
        "uses the sum of squares instead of their mean",
    ),
    (
        "rmsnorm-torch-std",
        checks.check_rmsnorm,
        variant(LearnerRMSNorm, "TorchStdRMSNorm", mistake="torch_std"),
        "the standard deviation (x.std())",
    ),
    (
        "rmsnorm-sequence-axis",
        checks.check_rmsnorm,
        variant(LearnerRMSNorm, "SequenceAxisRMSNorm", mistake="sequence_axis"),
        "taken over the sequence axis (dim=1)",
    ),
    (
        "rmsnorm-batch-axis",
        checks.check_rmsnorm,
        variant(LearnerRMSNorm, "BatchAxisRMSNorm", mistake="batch_axis"),
        "taken over the batch axis (dim=0)",
    ),
    (
        "rmsnorm-weight-through-data",
        checks.check_rmsnorm,
        variant(LearnerRMSNorm, "DataWeightRMSNorm", mistake="weight_data"),
        "it is not connected to the output",
    ),
    # MLPs
    (
        "feedforward-relu",
        checks.check_feedforward,
        variant(LearnerFeedForward, "ReluFeedForward", activation=staticmethod(F.relu)),
        "ReLU instead of the exact GELU",
    ),
    (
        "feedforward-tanh-gelu",
        checks.check_feedforward,
        variant(
            LearnerFeedForward,
            "TanhFeedForward",
            activation=staticmethod(lambda t: F.gelu(t, approximate="tanh")),
        ),
        "the tanh approximation of GELU",
    ),
    (
        "feedforward-hidden-width",
        checks.check_feedforward,
        variant(LearnerFeedForward, "NarrowFeedForward", default_width=2),
        "the default hidden width is 32",
    ),
    (
        "feedforward-d-hidden-ignored",
        checks.check_feedforward,
        variant(LearnerFeedForward, "FixedWidthFeedForward", ignore_d_hidden=True),
        "the d_hidden argument is ignored",
    ),
    (
        "feedforward-bias-when-bias-false",
        checks.check_feedforward,
        variant(LearnerFeedForward, "AlwaysBiasFeedForward", force_bias=True),
        "bias=False was ignored",
    ),
    (
        "feedforward-dropout-on-hidden",
        checks.check_feedforward,
        variant(LearnerFeedForward, "HiddenDropoutFeedForward", dropout_on_hidden=True),
        "dropout acts somewhere other than the output",
    ),
    (
        "swiglu-width-two-thirds-d",
        checks.check_swiglu_hidden_dim,
        hidden_two_thirds,
        "2/3 * d_model",
    ),
    (
        "swiglu-width-not-rounded",
        checks.check_swiglu_hidden_dim,
        hidden_unrounded,
        "without rounding up to a multiple of 256",
    ),
    (
        "swiglu-gate-up-swapped",
        check_swiglu,
        variant(LearnerSwiGLU, "SwappedSwiGLU", swapped=True),
        "gate and up swapped",
    ),
    (
        "feedforward-silu",
        checks.check_feedforward,
        variant(LearnerFeedForward, "SiluFeedForward", activation=staticmethod(F.silu)),
        "SiLU instead of GELU",
    ),
    (
        "feedforward-no-activation",
        checks.check_feedforward,
        variant(LearnerFeedForward, "LinearFeedForward", activation=staticmethod(lambda t: t)),
        "no activation between the two linear layers",
    ),
    (
        "feedforward-gelu-after-output",
        checks.check_feedforward,
        variant(LearnerFeedForward, "LateGeluFeedForward", activation_after_output=True),
        "GELU after the second linear layer",
    ),
    (
        "swiglu-gelu",
        check_swiglu,
        variant(LearnerSwiGLU, "GeluSwiGLU", activation=staticmethod(F.gelu)),
        "GELU instead of SiLU",
    ),
    (
        "swiglu-sigmoid-gate",
        check_swiglu,
        variant(LearnerSwiGLU, "SigmoidSwiGLU", activation=staticmethod(torch.sigmoid)),
        "a sigmoid gate (GLU) instead of SiLU",
    ),
    (
        "swiglu-relu",
        check_swiglu,
        variant(LearnerSwiGLU, "ReluSwiGLU", activation=staticmethod(F.relu)),
        "ReLU instead of SiLU",
    ),
    (
        "swiglu-no-up-projection",
        check_swiglu,
        variant(LearnerSwiGLU, "UngatedSwiGLU", mistake="no_up"),
        "no gate: down_proj(silu(gate_proj(x)))",
    ),
    (
        "swiglu-silu-of-the-product",
        check_swiglu,
        variant(LearnerSwiGLU, "ProductSwiGLU", mistake="silu_of_product"),
        "SiLU is applied to the product",
    ),
    (
        "swiglu-branches-added",
        check_swiglu,
        variant(LearnerSwiGLU, "AddedSwiGLU", mistake="added"),
        "the branches are added instead of multiplied",
    ),
    (
        "probe-norm-of-the-activation",
        checks.check_grad_norm_probe,
        make_probe("activation_norm"),
        "the norm of the embedding output itself",
    ),
    (
        "probe-parameter-norms-summed",
        checks.check_grad_norm_probe,
        make_probe("summed_norms"),
        "each parameter's norm is summed",
    ),
    (
        "probe-squared-norms",
        checks.check_grad_norm_probe,
        make_probe("squared"),
        "the squared norms (sum of squares) without the square root",
    ),
    (
        "block-sublayers-in-parallel",
        checks.check_transformer_block,
        variant(LearnerBlock, "ParallelBlock", mistake="parallel"),
        "attention and MLP both read the block input (in parallel)",
    ),
    (
        "block-post-ln-norm-before-the-add",
        checks.check_transformer_block,
        variant(LearnerBlock, "NormBeforeAddBlock", mistake="norm_before_add"),
        "the sublayer output is normalized before the residual add",
    ),
    (
        "block-dropout-not-passed-on",
        checks.check_transformer_block,
        variant(LearnerBlock, "NoDropoutBlock", mistake="dropout_ignored"),
        "dropout is never applied (the dropout argument is not passed on",
    ),
    (
        "probe-loss-is-the-sum-of-the-output",
        checks.check_grad_norm_probe,
        make_probe("loss_sum"),
        "the loss is the sum of the final hidden states",
    ),
    (
        "probe-cross-entropy-summed",
        checks.check_grad_norm_probe,
        make_probe("summed_loss"),
        "the cross-entropy is summed over tokens",
    ),
    # the block
    (
        "block-post-ln-written-as-pre",
        checks.check_transformer_block,
        variant(LearnerBlock, "AlwaysPostBlock", mistake="always_post"),
        "post-LN was written where pre-LN was asked",
    ),
    (
        "block-pre-ln-written-as-post",
        checks.check_transformer_block,
        variant(LearnerBlock, "AlwaysPreBlock", mistake="always_pre"),
        "pre-LN was written where post-LN was asked",
    ),
    (
        "block-attention-residual-missing",
        checks.check_transformer_block,
        variant(LearnerBlock, "NoResidualBlock", mistake="no_attn_residual"),
        "the attention residual is missing",
    ),
    (
        "block-norm-on-residual-stream",
        checks.check_transformer_block,
        variant(LearnerBlock, "NormStreamBlock", mistake="norm_on_stream"),
        "the norm is applied to the residual stream",
    ),
    (
        "block-dropout-on-residual-stream",
        checks.check_transformer_block,
        variant(LearnerBlock, "ResidualDropoutBlock", mistake="residual_dropout"),
        "dropout is applied to the residual stream",
    ),
    (
        "block-residual-dropout-twice",
        checks.check_transformer_block,
        variant(LearnerBlock, "DoubleDropoutBlock", mistake="extra_residual_dropout"),
        "the MLP's output is dropped twice",
    ),
    (
        "block-attention-output-dropped-twice",
        checks.check_transformer_block,
        variant(LearnerBlock, "DoubleAttentionDropoutBlock", mistake="extra_attention_dropout"),
        "the attention's output is dropped twice",
    ),
    (
        "block-no-mlp-dropout",
        checks.check_transformer_block,
        variant(LearnerBlock, "NoMlpDropoutBlock", mistake="no_mlp_dropout"),
        "the MLP has no dropout",
    ),
    (
        "block-no-attention-dropout",
        checks.check_transformer_block,
        variant(LearnerBlock, "NoAttentionDropoutBlock", mistake="no_attention_dropout"),
        "the attention has no dropout",
    ),
    (
        "block-inplace-residual-add",
        checks.check_transformer_block,
        variant(LearnerBlock, "InplaceBlock", mistake="inplace"),
        "modified its input x in place",
    ),
    # gradient probe
    (
        "probe-embedding-weight-grad",
        checks.check_grad_norm_probe,
        make_probe("weight_grad"),
        "tok_emb.weight.grad",
    ),
    (
        "probe-no-zero-grad",
        checks.check_grad_norm_probe,
        make_probe("no_zero_grad"),
        "the old gradients were not cleared",
    ),
    (
        "probe-blocks-reversed",
        checks.check_grad_norm_probe,
        make_probe("reversed"),
        "the blocks are listed last first",
    ),
    (
        "probe-hook-left-behind",
        checks.check_grad_norm_probe,
        make_probe("hook_left"),
        "a hook is still registered on model.drop",
    ),
    # GPT and counts
    (
        "gpt-no-position-embeddings",
        checks.check_gpt,
        variant(LearnerGPT, "NoPositionsGPT", mistake="no_positions"),
        "no position embeddings are added",
    ),
    (
        "gpt-head-not-tied",
        checks.check_gpt,
        variant(LearnerGPT, "UntiedGPT", mistake="untied"),
        "the weights are not tied",
    ),
    (
        "gpt-positions-from-1",
        checks.check_gpt,
        variant(LearnerGPT, "PositionOneGPT", mistake="positions_from_1"),
        "position ids start at 1 instead of 0",
    ),
    (
        "gpt-no-final-norm",
        checks.check_gpt,
        variant(LearnerGPT, "NoFinalNormGPT", mistake="no_final_norm"),
        "the final norm is not applied",
    ),
    (
        "gpt-scaled-embeddings",
        checks.check_gpt,
        variant(LearnerGPT, "ScaledEmbeddingGPT", mistake="scaled_embeddings"),
        "scaled by sqrt(d_model)",
    ),
    (
        "gpt-blocks-reversed",
        checks.check_gpt,
        variant(LearnerGPT, "ReversedGPT", mistake="reversed_blocks"),
        "the blocks run in reverse order",
    ),
    (
        "gpt-first-block-only",
        checks.check_gpt,
        variant(LearnerGPT, "OneBlockGPT", mistake="first_block_only"),
        "only the first block is applied",
    ),
    (
        "gpt-position-table-with-rope",
        checks.check_gpt,
        variant(LearnerGPT, "TableWithRopeGPT", mistake="table_with_rope"),
        "a learned position table is built although config.positional is 'rope'",
    ),
    (
        "gpt-no-embedding-dropout",
        checks.check_gpt,
        variant(LearnerGPT, "NoEmbeddingDropoutGPT", mistake="no_embedding_dropout"),
        "the embeddings are not dropped",
    ),
    (
        "gpt-default-init",
        checks.check_gpt,
        variant(LearnerGPT, "DefaultInitGPT", mistake="default_init"),
        "the weights keep PyTorch's default initialization",
    ),
    (
        "gpt-residual-projections-unscaled",
        checks.check_gpt,
        variant(LearnerGPT, "UnscaledResidualGPT", mistake="unscaled_residual"),
        "the projections that write into the residual stream (out_proj, fc_out) are not scaled",
    ),
    (
        "gpt-only-embeddings-initialized",
        checks.check_gpt,
        variant(LearnerGPT, "EmbeddingOnlyInitGPT", mistake="embedding_only_init"),
        "only the embeddings are initialized",
    ),
    (
        "gpt-random-biases",
        checks.check_gpt,
        variant(LearnerGPT, "RandomBiasGPT", mistake="random_bias"),
        "the biases keep PyTorch's default (random) initialization",
    ),
    (
        "gpt-returns-probabilities",
        checks.check_gpt,
        variant(LearnerGPT, "SoftmaxGPT", mistake="softmax"),
        "forward returns probabilities (softmax)",
    ),
    (
        "gpt-returns-log-probabilities",
        checks.check_gpt,
        variant(LearnerGPT, "LogSoftmaxGPT", mistake="log_softmax"),
        "forward returns log-probabilities",
    ),
    (
        "bias-savings-norms-too",
        checks.check_bias_savings,
        functools.partial(linear_bias_count, mistake="norms-too"),
        "the LayerNorm biases are counted too",
    ),
    (
        "bias-savings-no-none-check",
        checks.check_bias_savings,
        functools.partial(linear_bias_count, mistake="no-none-check"),
        "bias=None, e.g. the LM head",
    ),
    (
        "bias-savings-children-only",
        checks.check_bias_savings,
        functools.partial(linear_bias_count, mistake="children-only"),
        "only the module's direct children",
    ),
    (
        "bias-savings-layers",
        checks.check_bias_savings,
        functools.partial(linear_bias_count, mistake="layers"),
        "not their bias entries",
    ),
    (
        "bias-savings-weights-too",
        checks.check_bias_savings,
        functools.partial(linear_bias_count, mistake="weights-too"),
        "weights are counted too",
    ),
    (
        "bias-savings-every-parameter",
        checks.check_bias_savings,
        functools.partial(linear_bias_count, mistake="every-parameter"),
        "every parameter of the model",
    ),
    (
        "bias-savings-typed-in",
        checks.check_bias_savings,
        lambda module: 82_944,
        "the same number as for a different model",
    ),
    (
        "bias-savings-float",
        checks.check_bias_savings,
        lambda module: float(linear_bias_count(module)),
        "expected an int",
    ),
    (
        "gpt2-params-width-4d",
        checks.check_gpt2_small_params,
        functools.partial(gpt_num_params, mistake="width-4d"),
        "config.d_hidden sets it",
    ),
    (
        "gpt2-params-no-biases",
        checks.check_gpt2_small_params,
        functools.partial(gpt_num_params, mistake="no-biases"),
        "the Linear biases are left out",
    ),
    (
        "gpt2-params-always-biases",
        checks.check_gpt2_small_params,
        functools.partial(gpt_num_params, mistake="always-biases"),
        "although config.bias is False",
    ),
    (
        "gpt2-params-padded-vocabulary",
        checks.check_gpt2_small_params,
        functools.partial(gpt_num_params, mistake="padded-vocabulary"),
        "padded to 50304",
    ),
    (
        "gpt2-params-block-missing",
        checks.check_gpt2_small_params,
        functools.partial(gpt_num_params, mistake="block-missing"),
        "one block is missing",
    ),
    (
        "gpt2-params-no-embeddings",
        checks.check_gpt2_small_params,
        functools.partial(gpt_num_params, mistake="no-embeddings"),
        "the embedding tables are left out",
    ),
    (
        "gpt2-params-no-token",
        checks.check_gpt2_small_params,
        functools.partial(gpt_num_params, mistake="no-token"),
        "the token embedding is left out",
    ),
    (
        "gpt2-params-no-positions",
        checks.check_gpt2_small_params,
        functools.partial(gpt_num_params, mistake="no-positions"),
        "the position embedding table",
    ),
    (
        "gpt2-params-head-always",
        checks.check_gpt2_small_params,
        functools.partial(gpt_num_params, mistake="head-always"),
        "counted as its own matrix",
    ),
    (
        "gpt2-params-head-never",
        checks.check_gpt2_small_params,
        functools.partial(gpt_num_params, mistake="head-never"),
        "with tie_weights=False it is its own",
    ),
    (
        "gpt2-params-head-bias",
        checks.check_gpt2_small_params,
        functools.partial(gpt_num_params, mistake="head-bias"),
        "the LM head has a bias",
    ),
    (
        "gpt2-params-no-final-norm",
        checks.check_gpt2_small_params,
        functools.partial(gpt_num_params, mistake="no-final-norm"),
        "the final LayerNorm is left out",
    ),
    (
        "gpt2-params-typed-in",
        checks.check_gpt2_small_params,
        lambda config: 124_439_808,
        "a hard-coded count (124,439,808 for every config)",
    ),
    (
        "gpt2-params-float",
        checks.check_gpt2_small_params,
        lambda config: float(gpt_num_params(config)),
        "expected an int",
    ),
    # notebook 08
    (
        "lr-schedule-one-step-late",
        checks.check_lr_schedule,
        functools.partial(lr_schedule, shift=-1),
        "step s gets the rate of step s - 1",
    ),
    (
        "lr-schedule-one-step-early",
        checks.check_lr_schedule,
        functools.partial(lr_schedule, shift=1),
        "step s gets the rate of step s + 1",
    ),
    (
        "lr-schedule-asks-for-step-minus-one",
        checks.check_lr_schedule,
        lr_of_the_step_before,
        "step s gets the rate of step s - 1",
    ),
    (
        "train-loop-whole-loss-backpropagated",
        checks.check_train_loop,
        make_train_loop(backward="whole"),
        "each micro-batch's whole loss is backpropagated",
    ),
    (
        "train-loop-own-adamw-with-decay",
        checks.check_train_loop,
        make_train_loop(
            own_optimizer=lambda model, lr: torch.optim.AdamW(
                model.parameters(), lr=lr, weight_decay=0.1
            )
        ),
        "builds its own AdamW",
    ),
    (
        "train-loop-own-course-optimizer",
        checks.check_train_loop,
        make_train_loop(own_optimizer=lambda model, lr: training.configure_optimizer(model, lr=lr)),
        "builds its own AdamW",
    ),
    (
        "train-loop-zero-grad-after-step",
        checks.check_train_loop,
        make_train_loop(zero_grad="after step"),
        "optimizer.zero_grad() after optimizer.step()",
    ),
    (
        "train-loop-clip-by-value",
        checks.check_train_loop,
        make_train_loop(clip="value"),
        "clipped by value (clip_grad_value_",
    ),
    (
        "get-batch-start-past-the-end",
        checks.check_get_batch,
        make_get_batch(lambda n, seq_len: n - seq_len + 1),
        "the starts can run past the end of the data",
    ),
    (
        "get-batch-start-anywhere",
        checks.check_get_batch,
        make_get_batch(lambda n, seq_len: n),
        "the starts can run past the end of the data",
    ),
    (
        "generate-draws-from-logits",
        checks.check_generate,
        make_sampler(draw_from="logits"),
        "torch.multinomial is given the logits instead of the probabilities",
    ),
    (
        "estimate-loss-no-eval-mode",
        checks.check_estimate_loss,
        make_estimate_loss(eval_mode=False),
        "call model.eval() before evaluating the loss",
    ),
    (
        "estimate-loss-no-no-grad",
        checks.check_estimate_loss,
        make_estimate_loss(no_grad=False),
        "evaluate the loss under torch.no_grad()",
    ),
]

ALTERNATIVES = [
    ("lr-schedule-learner-base", checks.check_lr_schedule, lr_schedule),
    ("train-loop-learner-base", checks.check_train_loop, make_train_loop()),
    ("get-batch-learner-base", checks.check_get_batch, make_get_batch()),
    ("estimate-loss-learner-base", checks.check_estimate_loss, make_estimate_loss()),
    ("generate-learner-base", checks.check_generate, make_sampler()),
    ("bias-savings-solution", checks.check_bias_savings, linear_bias_count),
    ("bias-savings-by-name", checks.check_bias_savings, linear_bias_count_by_name),
    ("gpt2-params-solution", checks.check_gpt2_small_params, gpt_num_params),
    ("gpt2-params-by-layers", checks.check_gpt2_small_params, gpt_num_params_by_layers),
    ("mask-tril-of-ones", checks.check_causal_mask, mask_tril),
    ("mask-not-strict-upper", checks.check_causal_mask, mask_not_triu),
    ("sdpa-learner-base", checks.check_attention, make_sdpa(None)),
    ("sdpa-einsum", checks.check_attention, sdpa_einsum),
    ("sdpa-additive-minus-inf-mask", checks.check_attention, sdpa_additive_mask),
    ("sdpa-manual-exp-sum-softmax", checks.check_attention, sdpa_manual_softmax),
    ("sdpa-torch-fused-kernel", checks.check_attention, sdpa_torch_fused),
    ("mha-learner-base", checks.check_multi_head_attention, LearnerMHA),
    ("mha-separate-qkv-projections", checks.check_multi_head_attention, SeparateProjectionsMHA),
    ("mha-fused-kernel-persistent-buffer", checks.check_multi_head_attention, FusedKernelMHA),
    ("head-weights-from-qkv-proj", checks.check_first_head_weights, first_head_manual),
    ("layernorm-learner-base-torch-var", checks.check_layernorm, LearnerLayerNorm),
    ("layernorm-functional", checks.check_layernorm, LayerNormFunctional),
    ("layernorm-nn-layernorm", checks.check_layernorm, LayerNormTorch),
    ("rmsnorm-learner-base", checks.check_rmsnorm, LearnerRMSNorm),
    ("rmsnorm-nn-rmsnorm", checks.check_rmsnorm, RMSNormTorch),
    ("feedforward-learner-base", checks.check_feedforward, LearnerFeedForward),
    ("feedforward-gelu-module", checks.check_feedforward, FeedForwardGeluModule),
    ("swiglu-width-ceil", checks.check_swiglu_hidden_dim, hidden_ceil),
    ("swiglu-learner-base", check_swiglu, LearnerSwiGLU),
    ("block-learner-base", checks.check_transformer_block, LearnerBlock),
    ("block-torch-parts-separate-qkv", checks.check_transformer_block, TorchPartsBlock),
    ("probe-forward-hook", checks.check_grad_norm_probe, make_probe(None)),
    ("gpt-learner-base", checks.check_gpt, LearnerGPT),
]
