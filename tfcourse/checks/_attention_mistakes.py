"""The known mistakes of the attention checks: each one computed, for diagnosis.

``check_causal_mask``, ``check_attention``, ``check_multi_head_attention`` and
``check_first_head_weights`` (in ``attention``) compare a learner's output with the
reference; when it differs, the functions here recompute the output with one deliberate
deviation at a time, and the closest one that reproduces the learner's output is named.
The tables are functions so that their descriptions are read in the language current when
a check fails (``say``), not the one at import time.
"""

from __future__ import annotations

import math

import torch

from ..language import say
from ._harness import mistake

# Descriptions several tables share.


def _softmax_over_queries() -> str:
    return say(
        "the softmax is taken over the queries axis (dim=-2) instead of the keys (dim=-1)",
        "softmax 沿查询轴（dim=-2）计算了，而不是沿键轴（dim=-1）",
    )


def _weights_unmasked() -> str:
    return say(
        "the returned weights are not masked (softmax of the unmasked scores)",
        "返回的权重没有施加掩码（是未掩码分数的 softmax）",
    )


def _wrong_triangle() -> str:
    return say(
        "the mask keeps the wrong triangle (triu instead of tril): each token attends to "
        "itself and the tokens after it instead of those before it",
        "掩码保留了错误的三角（用了 triu 而不是 tril）：每个词元关注的是它自己和它之后的"
        "词元，而不是之前的词元",
    )


def _head_dim_scales() -> list[tuple[str, str]]:
    """The wrong scalings of multi-head scores: (description, the ``scale`` option)."""
    return [
        (
            say(
                "the scores are not scaled by 1/sqrt(head_dim)",
                "注意力分数没有乘以 1/sqrt(head_dim) 进行缩放",
            ),
            "none",
        ),
        (
            say(
                "the scores are scaled by 1/sqrt(d_model) instead of 1/sqrt(head_dim)",
                "注意力分数乘的是 1/sqrt(d_model)，而不是 1/sqrt(head_dim)",
            ),
            "d_model",
        ),
        (
            say(
                "the scores are divided by d_model instead of sqrt(head_dim)",
                "注意力分数除以了 d_model，而不是 sqrt(head_dim)",
            ),
            "d_model_full",
        ),
    ]


def _mask_variants(expected: torch.Tensor):
    T = expected.shape[0]
    ones = torch.ones(T, T, dtype=torch.bool)
    return [
        (
            mistake(
                "the convention is inverted: True marks blocked positions; here True = may attend",
                "约定反了：你用 True 标记被屏蔽的位置；这里 True 表示可以关注",
            ),
            lambda: ~expected,
        ),
        (
            mistake(
                "the upper triangle (triu) instead of the lower (tril): True where the key comes "
                "after the query",
                "用了上三角（triu）而不是下三角（tril）：键在查询之后的位置为 True",
            ),
            lambda: ones.triu(),
        ),
        (
            mistake(
                "the diagonal is excluded (tril(diagonal=-1)): a token must be able to attend to "
                "itself",
                "排除了对角线（tril(diagonal=-1)）：词元必须能关注它自己",
            ),
            lambda: ones.tril(diagonal=-1),
        ),
        (mistake("nothing is masked (all True)", "什么都没有屏蔽（全为 True）"), lambda: ones),
    ]


def _sdpa(
    q,
    k,
    v,
    mask=None,
    *,
    mask_mode="given",
    scale="sqrt_dk",
    dim=-1,
    weights_mode="softmax",
    keys="k",
):
    """Attention with one deliberate deviation at a time (for diagnosis)."""
    if keys == "q":  # the queries used as keys: q @ q^T
        k = q
    scores = q @ k.transpose(-2, -1)
    divisor = {
        "sqrt_dk": math.sqrt(q.shape[-1]),
        "none": 1.0,
        "dk": q.shape[-1],
        "sqrt_dv": math.sqrt(v.shape[-1]),
    }[scale]
    scores = scores / divisor
    if mask_mode == "own_causal":
        mask = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).tril()
    masked = scores
    if mask is not None:
        if mask_mode in ("given", "own_causal"):
            masked = scores.masked_fill(~mask, float("-inf"))
        elif mask_mode == "inverted":
            masked = scores.masked_fill(mask, float("-inf"))
        elif mask_mode == "transposed":  # for a causal mask: the upper triangle
            masked = scores.masked_fill(~mask.transpose(-2, -1), float("-inf"))
        elif mask_mode == "zero_fill":
            masked = scores.masked_fill(~mask, 0.0)
    weights = masked.softmax(dim=dim)
    if mask is not None and mask_mode == "after_softmax":
        weights = weights * mask
    returned = {"softmax": weights, "scores": masked, "unmasked": scores.softmax(dim=dim)}
    return weights @ v, returned[weights_mode]


def _sdpa_mistakes():
    return [
        (
            mistake(
                "the mask is ignored (every query sees every key)",
                "忽略了掩码（每个查询都能看到所有键）",
            ),
            dict(mask_mode="ignored"),
        ),
        (
            mistake(
                "the mask is inverted: True is treated as blocked; here True = may attend "
                "(masked_fill(~mask, -inf))",
                "掩码用反了：把 True 当成了屏蔽；"
                "这里 True 表示可以关注（masked_fill(~mask, -inf)）",
            ),
            dict(mask_mode="inverted"),
        ),
        (
            mistake(
                "the mask is applied on the wrong triangle (transposed, like triu instead of "
                "tril): each query sees itself and the keys after it instead of those before it",
                "掩码作用在了错误的三角上（被转置了，相当于用 triu 代替 tril）：每个查询看到的是"
                "它自己和它之后的键，而不是之前的键",
            ),
            dict(mask_mode="transposed"),
        ),
        (
            mistake(
                "the mask is applied after the softmax (weights * mask), so rows no longer sum "
                "to 1",
                "掩码在 softmax 之后才施加（weights * mask），所以每行之和不再是 1",
            ),
            dict(mask_mode="after_softmax"),
        ),
        (
            mistake(
                "masked scores are set to 0 instead of -inf, so masked keys still get weight",
                "被屏蔽的分数设成了 0 而不是 -inf，所以被屏蔽的键仍然分到了权重",
            ),
            dict(mask_mode="zero_fill"),
        ),
        (
            mistake(
                "a causal mask is built inside instead of using the mask argument",
                "在函数内部自己构造了因果掩码，而没有使用 mask 参数",
            ),
            dict(mask_mode="own_causal"),
        ),
        (
            mistake(
                "the queries are used as keys (q @ q^T instead of q @ k^T)",
                "把查询当成了键（用了 q @ q^T 而不是 q @ k^T）",
            ),
            dict(keys="q"),
        ),
        (
            mistake(
                "the scores are not scaled by 1/sqrt(d_k)",
                "注意力分数没有乘以 1/sqrt(d_k) 进行缩放",
            ),
            dict(scale="none"),
        ),
        (
            mistake(
                "the scores are divided by d_k instead of sqrt(d_k)",
                "注意力分数除以了 d_k，而不是 sqrt(d_k)",
            ),
            dict(scale="dk"),
        ),
        (
            mistake(
                "the scores are scaled by the value width v.size(-1) instead of the key width "
                "q.size(-1)",
                "注意力分数按值的宽度 v.size(-1) 缩放了，而不是按键的宽度 q.size(-1)",
            ),
            dict(scale="sqrt_dv"),
        ),
        (_softmax_over_queries(), dict(dim=-2)),
        (
            mistake(
                "the returned weights are the scores before the softmax",
                "返回的权重是 softmax 之前的分数",
            ),
            dict(weights_mode="scores"),
        ),
        (_weights_unmasked(), dict(weights_mode="unmasked")),
    ]


def _split(t, H, mode):
    B, T, D = t.shape
    if mode == "view":
        return t.view(B, T, H, D // H).transpose(1, 2)
    if mode == "no_transpose":
        return t.reshape(B, H, T, D // H)
    if mode == "transpose_first":
        return t.transpose(1, 2).reshape(B, H, T, D // H)
    return t.reshape(B, T, D // H, H).permute(0, 3, 1, 2)  # interleaved


def _merge(y, mode):
    B, H, T, hd = y.shape
    if mode == "transpose":
        return y.transpose(1, 2).reshape(B, T, H * hd)
    if mode == "no_transpose":
        return y.reshape(B, T, H * hd)
    return y.permute(0, 2, 3, 1).reshape(B, T, H * hd)  # head-minor


def _mha(
    ref,
    x,
    *,
    order="qkv",
    split="view",
    scale="head_dim",
    mask="causal",
    dim=-1,
    merge="transpose",
    weights="masked",
    keys="k",
    out_proj=True,
    fill="-inf",
):
    """Multi-head attention from ``ref``'s weights, with one deliberate deviation at a time.

    ``fill``: what the blocked scores become, ``"-inf"``, ``"zero"`` (0, so they still get
    weight), or ``"after_softmax"`` (the softmax of the unmasked scores, times the mask).
    """
    B, T, D = x.shape
    H = ref.n_heads
    chunks = dict(zip(order, ref.qkv_proj(x).split(D, dim=-1), strict=True))
    q, k, v = (_split(chunks[c], H, split) for c in "qkv")
    if keys == "q":  # the queries used as keys: q @ q^T
        k = q
    divisor = {
        "head_dim": math.sqrt(D // H),
        "none": 1.0,
        "head_dim_full": D // H,
        "d_model": math.sqrt(D),
        "d_model_full": D,
    }[scale]
    scores = q @ k.transpose(-2, -1) / divisor
    causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
    allowed = {
        "causal": causal,
        "none": None,
        "diagonal": causal.tril(-1),
        "inverted": ~causal,
        "upper": causal.T,
    }[mask]
    if allowed is None or fill == "after_softmax":
        masked = scores
    else:
        masked = scores.masked_fill(~allowed, 0.0 if fill == "zero" else float("-inf"))
    w = masked.softmax(dim=dim)
    if allowed is not None and fill == "after_softmax":
        w = w * allowed
    merged = _merge(w @ v, merge)
    out = ref.out_proj(merged) if out_proj else merged
    return out, (w if weights == "masked" else scores.softmax(dim=dim))


def _mha_mistakes():
    scaled = {scale: description for description, scale in _head_dim_scales()}
    return [
        (
            mistake(
                "the causal mask is not applied (tokens attend to later tokens)",
                "没有施加因果掩码（词元关注到了它后面的词元）",
            ),
            dict(mask="none"),
        ),
        (
            mistake(
                "the mask is off by one: the diagonal is masked too (tril(diagonal=-1)), so a "
                "token cannot attend to itself",
                "掩码差了一位：对角线也被屏蔽了（tril(diagonal=-1)），词元无法关注它自己",
            ),
            dict(mask="diagonal"),
        ),
        (
            mistake(
                "the mask is inverted (later tokens allowed, earlier ones blocked)",
                "掩码用反了（放行了后面的词元，屏蔽了前面的词元）",
            ),
            dict(mask="inverted"),
        ),
        (_wrong_triangle(), dict(mask="upper")),
        (
            mistake(
                "the causal mask fills the blocked scores with 0 instead of -inf, so later "
                "tokens still get weight (exp(0) = 1); use masked_fill(~mask, float('-inf'))",
                "因果掩码把被屏蔽的分数填成了 0 而不是 -inf，所以后面的词元仍然分到了权重"
                "（exp(0) = 1）；请用 masked_fill(~mask, float('-inf'))",
            ),
            dict(fill="zero"),
        ),
        (
            mistake(
                "the causal mask is applied after the softmax (weights * mask): the softmax "
                "already gave later tokens weight, and the rows no longer sum to 1; mask the "
                "scores with -inf before the softmax",
                "因果掩码在 softmax 之后才施加（weights * mask）：softmax 已经给后面的词元分了"
                "权重，每行之和也不再是 1；应在 softmax 之前用 -inf 屏蔽分数",
            ),
            dict(fill="after_softmax"),
        ),
        (
            mistake(
                "the queries are used as keys (q @ q^T): the k rows of qkv_proj are never used",
                "把查询当成了键（q @ q^T）：qkv_proj 中属于 k 的那些行从未被用到",
            ),
            dict(keys="q"),
        ),
        (
            mistake(
                "the output projection is left out: the merged heads are returned without out_proj",
                "漏掉了输出投影：各头合并之后没有经过 out_proj 就直接返回了",
            ),
            dict(out_proj=False),
        ),
        (scaled["none"], dict(scale="none")),
        (
            mistake(
                "the scores are divided by head_dim instead of sqrt(head_dim)",
                "注意力分数除以了 head_dim，而不是 sqrt(head_dim)",
            ),
            dict(scale="head_dim_full"),
        ),
        (scaled["d_model"], dict(scale="d_model")),
        (scaled["d_model_full"], dict(scale="d_model_full")),
        (_softmax_over_queries(), dict(dim=-2)),
        (
            mistake(
                "heads are split with view(B, H, T, head_dim) instead of view(B, T, H, head_dim)"
                ".transpose(1, 2), which mixes tokens across heads",
                "拆分多头时用了 view(B, H, T, head_dim)，而不是 view(B, T, H, head_dim)"
                ".transpose(1, 2)，这会把不同词元的数据混进同一个头",
            ),
            dict(split="no_transpose"),
        ),
        (
            mistake(
                "heads are split by transposing before reshaping (x.transpose(1, 2).reshape(B, H, "
                "T, head_dim)) instead of view(B, T, H, head_dim).transpose(1, 2)",
                "拆分多头时先转置再 reshape（x.transpose(1, 2).reshape(B, H, T, head_dim)），"
                "而不是 view(B, T, H, head_dim).transpose(1, 2)",
            ),
            dict(split="transpose_first"),
        ),
        (
            mistake(
                "head h takes the interleaved channels h, h+H, ... instead of the block "
                "[h*head_dim, (h+1)*head_dim)",
                "第 h 个头取的是交错的通道 h, h+H, ...，"
                "而不是连续的一段 [h*head_dim, (h+1)*head_dim)",
            ),
            dict(split="interleaved"),
        ),
        (
            mistake(
                "heads are merged with reshape(B, T, D) straight from (B, H, T, head_dim), without "
                "transpose(1, 2) first",
                "合并多头时直接把 (B, H, T, head_dim) reshape 成 (B, T, D)，没有先 transpose(1, 2)",
            ),
            dict(merge="no_transpose"),
        ),
        (
            mistake(
                "heads are merged in the wrong order: channels come out as (head_dim, H) instead "
                "of (H, head_dim)",
                "多头合并的顺序错了：通道排成了 (head_dim, H)，而不是 (H, head_dim)",
            ),
            dict(merge="head_minor"),
        ),
        (_weights_unmasked(), dict(weights="unmasked")),
    ] + [
        (
            mistake(
                f"the output of qkv_proj is split as ({', '.join(order)}) instead of (q, k, v)",
                f"qkv_proj 的输出被拆成了 ({', '.join(order)})，而不是 (q, k, v)",
            ),
            dict(order=order),
        )
        for order in ("kqv", "qvk", "vkq", "kvq", "vqk")
    ]


def _head_weights(
    mha,
    x,
    *,
    head=0,
    split="block",
    keys="k",
    scale="head_dim",
    mask=True,
    swap=False,
    dim=-1,
    mean=False,
    fill="-inf",
):
    B, T, D = x.shape
    H = mha.n_heads
    hd = D // H
    q_all, k_all, _ = mha.qkv_proj(x).split(D, dim=-1)
    if keys == "q_next":  # keys read from the q rows that follow head 0's
        k_all = torch.cat([q_all[..., hd:], q_all[..., :hd]], dim=-1)
    elif keys == "q":  # the queries used as keys
        k_all = q_all

    def pick(t, h):
        if split == "interleaved":
            return t[..., h::H]
        return t[..., h * hd : (h + 1) * hd]

    heads = range(H) if mean else [head % H]
    maps = []
    for h in heads:
        q, k = pick(q_all, h), pick(k_all, h)
        if swap:
            q, k = k, q
        divisor = {
            "head_dim": math.sqrt(hd),
            "none": 1.0,
            "d_model": math.sqrt(D),
            "d_model_full": D,
        }[scale]
        scores = q @ k.transpose(-2, -1) / divisor
        allowed = mha.mask[:T, :T]
        allowed = allowed.T if mask == "upper" else allowed
        if mask and fill != "after_softmax":
            scores = scores.masked_fill(~allowed, 0.0 if fill == "zero" else float("-inf"))
        weights = scores.softmax(dim=dim)
        maps.append(weights * allowed if mask and fill == "after_softmax" else weights)
    return torch.stack(maps).mean(0)


def _head_mistakes():
    return [
        (
            mistake(
                "the weights of the last head (index -1) instead of the first (index 0)",
                "取的是最后一个头（索引 -1）的权重，而不是第一个头（索引 0）的",
            ),
            dict(head=-1),
        ),
        (
            mistake(
                "the weights of head 1 instead of head 0 (Python counts from 0)",
                "取的是头 1 的权重，而不是头 0 的（Python 从 0 开始计数）",
            ),
            dict(head=1),
        ),
        (
            mistake(
                "the average over all heads instead of head 0", "取的是所有头的平均，而不是头 0"
            ),
            dict(mean=True),
        ),
        (
            mistake(
                "head 0 taken as the interleaved channels 0, H, 2H, ... instead of the first "
                "head_dim channels",
                "头 0 取成了交错的通道 0, H, 2H, ...，而不是前 head_dim 个通道",
            ),
            dict(split="interleaved"),
        ),
        (
            mistake(
                "the keys are read from the q rows [head_dim, 2*head_dim) instead of the k rows "
                "[D, D + head_dim)",
                "键取自 q 的行 [head_dim, 2*head_dim)，而不是 k 的行 [D, D + head_dim)",
            ),
            dict(keys="q_next"),
        ),
        (
            mistake("queries and keys are swapped (k @ q^T)", "查询和键弄反了（k @ q^T）"),
            dict(swap=True),
        ),
        (
            mistake(
                "the queries are used as keys (q0 @ q0^T): the keys are the rows [D, D + head_dim) "
                "of qkv_proj",
                "把查询当成了键（q0 @ q0^T）：键是 qkv_proj 的行 [D, D + head_dim)",
            ),
            dict(keys="q"),
        ),
        *((description, dict(scale=scale)) for description, scale in _head_dim_scales()),
        (mistake("the causal mask is not applied", "没有施加因果掩码"), dict(mask=False)),
        (_wrong_triangle(), dict(mask="upper")),
        (
            mistake(
                "the blocked scores are set to 0 instead of -inf, so later tokens still get weight",
                "被屏蔽的分数设成了 0 而不是 -inf，所以后面的词元仍然分到了权重",
            ),
            dict(fill="zero"),
        ),
        (
            mistake(
                "the causal mask multiplies the weights after the softmax, so the rows no longer "
                "sum to 1; mask the scores with -inf before it",
                "因果掩码在 softmax 之后才乘到权重上，所以每行之和不再是 1；应在 softmax 之前"
                "用 -inf 屏蔽分数",
            ),
            dict(fill="after_softmax"),
        ),
        (_softmax_over_queries(), dict(dim=-2)),
    ]
