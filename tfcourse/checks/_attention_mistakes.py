"""The known mistakes of the attention checks: each one computed, for diagnosis.

``check_causal_mask``, ``check_attention``, ``check_multi_head_attention`` and
``check_first_head_weights`` (in ``attention``) compare a learner's output with the
reference; when it differs, the functions here recompute the output with one deliberate
deviation at a time, and the closest one that reproduces the learner's output is named.
"""

from __future__ import annotations

import math

import torch


def _mask_variants(expected: torch.Tensor):
    T = expected.shape[0]
    ones = torch.ones(T, T, dtype=torch.bool)
    return [
        ("the convention is inverted: True marks blocked positions; here True = may attend",
         lambda: ~expected),
        ("the upper triangle (triu) instead of the lower (tril): True where the key comes "
         "after the query", lambda: ones.triu()),
        ("the diagonal is excluded (tril(diagonal=-1)): a token must be able to attend to "
         "itself", lambda: ones.tril(diagonal=-1)),
        ("nothing is masked (all True)", lambda: ones),
    ]


def _sdpa(q, k, v, mask=None, *, mask_mode="given", scale="sqrt_dk", dim=-1,
          weights_mode="softmax", keys="k"):
    """Attention with one deliberate deviation at a time (for diagnosis)."""
    if keys == "q":                 # the queries used as keys: q @ q^T
        k = q
    scores = q @ k.transpose(-2, -1)
    divisor = {"sqrt_dk": math.sqrt(q.shape[-1]), "none": 1.0, "dk": q.shape[-1],
               "sqrt_dv": math.sqrt(v.shape[-1])}[scale]
    scores = scores / divisor
    if mask_mode == "own_causal":
        mask = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).tril()
    masked = scores
    if mask is not None:
        if mask_mode in ("given", "own_causal"):
            masked = scores.masked_fill(~mask, float("-inf"))
        elif mask_mode == "inverted":
            masked = scores.masked_fill(mask, float("-inf"))
        elif mask_mode == "transposed":     # for a causal mask: the upper triangle
            masked = scores.masked_fill(~mask.transpose(-2, -1), float("-inf"))
        elif mask_mode == "zero_fill":
            masked = scores.masked_fill(~mask, 0.0)
    weights = masked.softmax(dim=dim)
    if mask is not None and mask_mode == "after_softmax":
        weights = weights * mask
    returned = {"softmax": weights, "scores": masked, "unmasked": scores.softmax(dim=dim)}
    return weights @ v, returned[weights_mode]


_SDPA_MISTAKES = [
    ("the mask is ignored (every query sees every key)", dict(mask_mode="ignored")),
    ("the mask is inverted: True is treated as blocked; here True = may attend "
     "(masked_fill(~mask, -inf))", dict(mask_mode="inverted")),
    ("the mask is applied on the wrong triangle (transposed, like triu instead of tril): "
     "each query sees itself and the keys after it instead of those before it",
     dict(mask_mode="transposed")),
    ("the mask is applied after the softmax (weights * mask), so rows no longer sum to 1",
     dict(mask_mode="after_softmax")),
    ("masked scores are set to 0 instead of -inf, so masked keys still get weight",
     dict(mask_mode="zero_fill")),
    ("a causal mask is built inside instead of using the mask argument",
     dict(mask_mode="own_causal")),
    ("the queries are used as keys (q @ q^T instead of q @ k^T)", dict(keys="q")),
    ("the scores are not scaled by 1/sqrt(d_k)", dict(scale="none")),
    ("the scores are divided by d_k instead of sqrt(d_k)", dict(scale="dk")),
    ("the scores are scaled by the value width v.size(-1) instead of the key width "
     "q.size(-1)", dict(scale="sqrt_dv")),
    ("the softmax is taken over the queries axis (dim=-2) instead of the keys (dim=-1)",
     dict(dim=-2)),
    ("the returned weights are the scores before the softmax", dict(weights_mode="scores")),
    ("the returned weights are not masked (softmax of the unmasked scores)",
     dict(weights_mode="unmasked")),
]


def _split(t, H, mode):
    B, T, D = t.shape
    if mode == "view":
        return t.view(B, T, H, D // H).transpose(1, 2)
    if mode == "no_transpose":
        return t.reshape(B, H, T, D // H)
    if mode == "transpose_first":
        return t.transpose(1, 2).reshape(B, H, T, D // H)
    return t.reshape(B, T, D // H, H).permute(0, 3, 1, 2)               # interleaved


def _merge(y, mode):
    B, H, T, hd = y.shape
    if mode == "transpose":
        return y.transpose(1, 2).reshape(B, T, H * hd)
    if mode == "no_transpose":
        return y.reshape(B, T, H * hd)
    return y.permute(0, 2, 3, 1).reshape(B, T, H * hd)                  # head-minor


def _mha(ref, x, *, order="qkv", split="view", scale="head_dim", mask="causal", dim=-1,
         merge="transpose", weights="masked", keys="k", out_proj=True):
    """Multi-head attention from ``ref``'s weights, with one deliberate deviation at a time."""
    B, T, D = x.shape
    H = ref.n_heads
    chunks = dict(zip(order, ref.qkv_proj(x).split(D, dim=-1)))
    q, k, v = (_split(chunks[c], H, split) for c in "qkv")
    if keys == "q":                 # the queries used as keys: q @ q^T
        k = q
    divisor = {"head_dim": math.sqrt(D // H), "none": 1.0, "head_dim_full": D // H,
               "d_model": math.sqrt(D), "d_model_full": D}[scale]
    scores = q @ k.transpose(-2, -1) / divisor
    causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
    allowed = {"causal": causal, "none": None, "diagonal": causal.tril(-1),
               "inverted": ~causal, "upper": causal.T}[mask]
    masked = scores if allowed is None else scores.masked_fill(~allowed, float("-inf"))
    w = masked.softmax(dim=dim)
    merged = _merge(w @ v, merge)
    out = ref.out_proj(merged) if out_proj else merged
    return out, (w if weights == "masked" else scores.softmax(dim=dim))


_MHA_MISTAKES = [
    ("the causal mask is not applied (tokens attend to later tokens)", dict(mask="none")),
    ("the mask is off by one: the diagonal is masked too (tril(diagonal=-1)), so a token "
     "cannot attend to itself", dict(mask="diagonal")),
    ("the mask is inverted (later tokens allowed, earlier ones blocked)", dict(mask="inverted")),
    ("the mask keeps the wrong triangle (triu instead of tril): each token attends to itself "
     "and the tokens after it instead of those before it", dict(mask="upper")),
    ("the queries are used as keys (q @ q^T): the k rows of qkv_proj are never used",
     dict(keys="q")),
    ("the output projection is left out: the merged heads are returned without out_proj",
     dict(out_proj=False)),
    ("the scores are not scaled by 1/sqrt(head_dim)", dict(scale="none")),
    ("the scores are divided by head_dim instead of sqrt(head_dim)",
     dict(scale="head_dim_full")),
    ("the scores are scaled by 1/sqrt(d_model) instead of 1/sqrt(head_dim)",
     dict(scale="d_model")),
    ("the scores are divided by d_model instead of sqrt(head_dim)", dict(scale="d_model_full")),
    ("the softmax is taken over the queries axis (dim=-2) instead of the keys (dim=-1)",
     dict(dim=-2)),
    ("heads are split with view(B, H, T, head_dim) instead of view(B, T, H, head_dim)"
     ".transpose(1, 2), which mixes tokens across heads", dict(split="no_transpose")),
    ("heads are split by transposing before reshaping (x.transpose(1, 2).reshape(B, H, T, "
     "head_dim)) instead of view(B, T, H, head_dim).transpose(1, 2)",
     dict(split="transpose_first")),
    ("head h takes the interleaved channels h, h+H, ... instead of the block "
     "[h*head_dim, (h+1)*head_dim)", dict(split="interleaved")),
    ("heads are merged with reshape(B, T, D) straight from (B, H, T, head_dim), without "
     "transpose(1, 2) first", dict(merge="no_transpose")),
    ("heads are merged in the wrong order: channels come out as (head_dim, H) instead of "
     "(H, head_dim)", dict(merge="head_minor")),
    ("the returned weights are not masked (softmax of the unmasked scores)",
     dict(weights="unmasked")),
] + [(f"the output of qkv_proj is split as ({', '.join(order)}) instead of (q, k, v)",
      dict(order=order)) for order in ("kqv", "qvk", "vkq", "kvq", "vqk")]


def _head_weights(mha, x, *, head=0, split="block", keys="k", scale="head_dim", mask=True,
                  swap=False, dim=-1, mean=False):
    B, T, D = x.shape
    H = mha.n_heads
    hd = D // H
    q_all, k_all, _ = mha.qkv_proj(x).split(D, dim=-1)
    if keys == "q_next":            # keys read from the q rows that follow head 0's
        k_all = torch.cat([q_all[..., hd:], q_all[..., :hd]], dim=-1)
    elif keys == "q":               # the queries used as keys
        k_all = q_all

    def pick(t, h):
        if split == "interleaved":
            return t[..., h::H]
        return t[..., h * hd:(h + 1) * hd]

    heads = range(H) if mean else [head % H]
    maps = []
    for h in heads:
        q, k = pick(q_all, h), pick(k_all, h)
        if swap:
            q, k = k, q
        divisor = {"head_dim": math.sqrt(hd), "none": 1.0, "d_model": math.sqrt(D),
                   "d_model_full": D}[scale]
        scores = q @ k.transpose(-2, -1) / divisor
        if mask:
            allowed = mha.mask[:T, :T]
            allowed = allowed.T if mask == "upper" else allowed
            scores = scores.masked_fill(~allowed, float("-inf"))
        maps.append(scores.softmax(dim=dim))
    return torch.stack(maps).mean(0)


_HEAD_MISTAKES = [
    ("the weights of the last head (index -1) instead of the first (index 0)", dict(head=-1)),
    ("the weights of head 1 instead of head 0 (Python counts from 0)", dict(head=1)),
    ("the average over all heads instead of head 0", dict(mean=True)),
    ("head 0 taken as the interleaved channels 0, H, 2H, ... instead of the first head_dim "
     "channels", dict(split="interleaved")),
    ("the keys are read from the q rows [head_dim, 2*head_dim) instead of the k rows "
     "[D, D + head_dim)", dict(keys="q_next")),
    ("queries and keys are swapped (k @ q^T)", dict(swap=True)),
    ("the queries are used as keys (q0 @ q0^T): the keys are the rows [D, D + head_dim) "
     "of qkv_proj", dict(keys="q")),
    ("the scores are not scaled by 1/sqrt(head_dim)", dict(scale="none")),
    ("the scores are scaled by 1/sqrt(d_model) instead of 1/sqrt(head_dim)",
     dict(scale="d_model")),
    ("the scores are divided by d_model instead of sqrt(head_dim)", dict(scale="d_model_full")),
    ("the causal mask is not applied", dict(mask=False)),
    ("the mask keeps the wrong triangle (triu instead of tril): each token attends to itself "
     "and the tokens after it instead of those before it", dict(mask="upper")),
    ("the softmax is taken over the queries axis (dim=-2) instead of the keys (dim=-1)",
     dict(dim=-2)),
]
