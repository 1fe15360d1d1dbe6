"""The notebook-09 checks (fuse_qkv, attend_with_cache) pass correct code and name wrong code."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import tfcourse as tc
from tfcourse.checks.production import check_fuse_qkv, check_kv_cache_attention
from tfcourse.lab.production import attend_with_cache, fuse_qkv

from conftest import fails, passes

# ----------------------------------------------------------------------------- fuse_qkv


def _fuse(order=(0, 1, 2), dim=0, bias=True, transpose=False, copy_bias=True):
    def fn(q, k, v):
        layers = [(q, k, v)[i] for i in order]
        weights = [layer.weight.t() if transpose else layer.weight for layer in layers]
        d_out, d_in = q.weight.shape
        fused = nn.Linear(d_in, 3 * d_out, bias=bias and q.bias is not None, device=q.weight.device)
        with torch.no_grad():
            w = torch.cat(weights, dim=dim)
            if dim == 1:
                fused.weight = nn.Parameter(w)
            else:
                fused.weight.copy_(w)
            if fused.bias is not None:
                biases = torch.cat([layer.bias for layer in layers])
                fused.bias.copy_(biases if copy_bias else torch.zeros_like(biases))
        return fused

    return fn


def test_fuse_qkv_reference_and_alternative_pass(capsys):
    passes(check_fuse_qkv, fuse_qkv, capsys, "fuse_qkv")
    passes(check_fuse_qkv, _fuse(), capsys, "fuse_qkv")

    def zero_bias(q, k, v):  # bias kept as zeros when the inputs have none: allowed
        device = q.weight.device
        fused = nn.Linear(q.in_features, 3 * q.out_features, device=device)
        with torch.no_grad():
            fused.weight.copy_(torch.cat([q.weight, k.weight, v.weight]))
            fused.bias.copy_(
                torch.cat(
                    [
                        layer.bias
                        if layer.bias is not None
                        else torch.zeros(q.out_features, device=device)
                        for layer in (q, k, v)
                    ]
                )
            )
        return fused

    passes(check_fuse_qkv, zero_bias, capsys, "fuse_qkv")


@pytest.mark.parametrize(
    "wrong, cause",
    [
        (_fuse(order=(1, 0, 2)), "order k, q, v"),
        (_fuse(order=(2, 1, 0)), "order v, k, q"),
        (_fuse(bias=False), "fused.bias is None"),
        (_fuse(copy_bias=False), "the biases are missing (weights only)"),
        (_fuse(transpose=True), "transposed"),
        (_fuse(dim=1), "concatenated along dim=1"),
        (lambda q, k, v: torch.cat([q.weight, k.weight, v.weight]), "expected an nn.Linear"),
    ],
)
def test_fuse_qkv_wrong_ones_fail_with_their_cause(wrong, cause):
    fails(check_fuse_qkv, wrong, cause)


def test_fuse_qkv_modifying_an_inputfails():
    def clobber(q, k, v):
        fused = fuse_qkv(q, k, v)
        with torch.no_grad():
            q.weight.zero_()
        return fused

    fails(check_fuse_qkv, clobber, "modified its input q_proj.weight")


# ----------------------------------------------------------------------------- attend_with_cache


def _cached(mask="shifted", dim=-2, new_first=False, use_past=True, scale=True):
    def fn(q, k_new, v_new, past_k=None, past_v=None):
        k_att, v_att = k_new, v_new
        if past_k is not None:
            pair_k, pair_v = (
                ([k_new, past_k], [v_new, past_v])
                if new_first
                else ([past_k, k_new], [past_v, v_new])
            )
            k_new, v_new = torch.cat(pair_k, dim=dim), torch.cat(pair_v, dim=dim)
            if use_past:
                k_att, v_att = k_new, v_new
        T_new, T_all = q.shape[-2], k_att.shape[-2]
        ones = torch.ones(T_new, T_all, dtype=torch.bool, device=q.device)
        m = {"shifted": ones.tril(diagonal=T_all - T_new), "top-left": ones.tril(), "none": None}[
            mask
        ]
        qs = q if scale else q * math.sqrt(q.shape[-1])
        out, _ = tc.scaled_dot_product_attention(qs, k_att, v_att, m)
        return out, k_new, v_new

    return fn


def test_kv_cache_reference_and_alternatives_pass(capsys):
    passes(check_kv_cache_attention, attend_with_cache, capsys, "attend_with_cache")
    passes(check_kv_cache_attention, _cached(), capsys, "attend_with_cache")

    def with_sdpa(q, k_new, v_new, past_k=None, past_v=None):  # PyTorch's fused attention
        if past_k is not None:
            k_new, v_new = torch.cat([past_k, k_new], -2), torch.cat([past_v, v_new], -2)
        T_new, T_all = q.shape[-2], k_new.shape[-2]
        mask = torch.ones(T_new, T_all, dtype=torch.bool, device=q.device).tril(T_all - T_new)
        return (
            torch.nn.functional.scaled_dot_product_attention(q, k_new, v_new, attn_mask=mask),
            k_new,
            v_new,
        )

    passes(check_kv_cache_attention, with_sdpa, capsys, "attend_with_cache")


@pytest.mark.parametrize(
    "wrong, cause",
    [
        (_cached(mask="top-left"), "not shifted by the cache length"),
        (_cached(mask="none"), "no causal mask among the new tokens"),
        (_cached(use_past=False), "cached keys/values are ignored"),
        (_cached(scale=False), "sqrt(head_dim)"),
        (_cached(dim=-1), "along the time axis, dim=-2"),
        (_cached(dim=0), "along the time axis, dim=-2"),
        (_cached(new_first=True), "time order"),
        (
            lambda q, k, v, pk=None, pv=None: tc.scaled_dot_product_attention(q, k, v)[0],
            "expected a tuple",
        ),
    ],
)
def test_kv_cache_wrong_ones_fail_with_their_cause(wrong, cause):
    fails(check_kv_cache_attention, wrong, cause)


def test_kv_cache_returning_only_new_keysfails():
    def forgetful(q, k_new, v_new, past_k=None, past_v=None):
        out, _, _ = attend_with_cache(q, k_new, v_new, past_k, past_v)
        return out, k_new, v_new

    fails(check_kv_cache_attention, forgetful, "only the new tokens")
