"""Check for notebook 10's grouped-query attention: ``repeat_kv``, the key/value heads shared
by groups of query heads."""

from __future__ import annotations

import torch

from ..language import say
from ..nn.attention import MultiHeadAttention, repeat_kv, scaled_dot_product_attention
from ._harness import Checker, mistake, require_function
from ._parameters import randomize_


def _hint() -> str:
    """The hint of every failed comparison: where each key/value head must go."""
    return say(
        "key/value head g serves query heads g*n_rep .. g*n_rep + n_rep - 1: each head "
        "appears n_rep times in a row along dim 1 (insert an axis after dim 1, expand it, "
        "merge the two)",
        "键/值头 g 供查询头 g*n_rep .. g*n_rep + n_rep - 1 使用：每个头沿 dim 1 连续出现 "
        "n_rep 次（在 dim 1 之后插入一个轴，对它做 expand，再把这两个轴合并）",
    )


def _variants(kv: torch.Tensor, n_rep: int):
    """``(description, thunk)`` pairs: what a known mistake would return for ``kv``."""

    def along(dim: int, grouped: bool):
        if grouped:
            return lambda: kv.repeat_interleave(n_rep, dim=dim)
        reps = [1, 1, 1, 1]
        reps[dim] = n_rep
        return lambda: kv.repeat(*reps)

    axis = {
        0: say("the batch axis (dim 0)", "批次轴（dim 0）"),
        2: say("the sequence axis (dim 2)", "序列轴（dim 2）"),
        3: say("the head_dim axis (dim 3)", "头维度轴（dim 3）"),
    }
    wrong_axis = [
        (
            mistake(
                f"repeated along {name} instead of the head axis (dim 1)",
                f"沿{name}做了重复，而不是沿头轴（dim 1）",
            ),
            along(dim, grouped),
        )
        for dim, name in axis.items()
        for grouped in (True, False)
    ]
    return [
        (
            mistake(
                "tiled instead of grouped (kv.repeat(1, n_rep, 1, 1)): the heads come out as 0, 1, "
                ".., 0, 1, ..; LLaMA's grouping gives 0, 0, .., 1, 1, ..",
                "整体平铺而不是分组（kv.repeat(1, n_rep, 1, 1)）："
                "得到的头依次是 0, 1, .., 0, 1, ..；"
                "LLaMA 的分组应为 0, 0, .., 1, 1, ..",
            ),
            along(1, grouped=False),
        ),
        *wrong_axis,
        (
            mistake(
                "the input returned unchanged: n_rep was ignored", "原样返回了输入：忽略了 n_rep"
            ),
            lambda: kv,
        ),
    ]


def _case(chk: Checker, case: str, fn, kv: torch.Tensor, n_rep: int, *, grad: bool) -> None:
    """Compare ``fn(kv, n_rep)`` with the reference (and the input gradient when ``grad``)."""
    kv_ref = kv.detach().clone().requires_grad_(grad)
    kv_mine = kv.detach().clone().requires_grad_(grad)
    expected = repeat_kv(kv_ref, n_rep)
    shape = tuple(kv.shape)
    got = chk.call(
        case,
        say(
            f"your function(kv {shape}, n_rep={n_rep})",
            f"以 kv {shape}、n_rep={n_rep} 运行你的函数",
        ),
        fn,
        kv_mine,
        n_rep,
    )
    chk.compare(
        case,
        say("output", "输出"),
        got,
        expected,
        variants=_variants(kv.detach(), n_rep),
        hint=_hint(),
    )
    if grad:
        upstream = chk.randn(chk.generator(1000), *expected.shape)
        (expected * upstream).sum().backward()
        chk.call(
            case,
            say("backward through your output", "对你的输出做反向传播"),
            lambda: (got * upstream).sum().backward(),
        )
        chk.compare_grads(
            case,
            {"input kv": kv_mine.grad},
            {"input kv": kv_ref.grad},
            explain=lambda: chk.output_mistake(got, expected, _variants(kv.detach(), n_rep)),
        )
    chk.ok()


def _attention_case(chk: Checker, fn, gen: torch.Generator) -> None:
    """Causal attention built with ``fn`` gives ``MultiHeadAttention(n_kv_heads=2)``'s output."""
    case = say(
        "inside attention: D=32, 8 query heads, 2 key/value heads, T=6",
        "在注意力中使用：D=32，8 个查询头，2 个键/值头，T=6",
    )
    D, H, H_kv, T = 32, 8, 2, 6
    module = MultiHeadAttention(D, H, max_seq_len=T, n_kv_heads=H_kv).to(chk.device, chk.dtype)
    randomize_(module, gen)
    x = chk.randn(gen, 2, T, D)
    with torch.no_grad():
        expected = module(x)
        q, k, v = module.qkv_proj(x).split([D, module.kv_dim, module.kv_dim], dim=-1)
        q, k, v = (t.view(2, T, -1, module.head_dim).transpose(1, 2) for t in (q, k, v))
        n_rep = H // H_kv
        k_mine = chk.call(
            case, say("your function on the keys", "对键运行你的函数"), fn, k.clone(), n_rep
        )
        v_mine = chk.call(
            case, say("your function on the values", "对值运行你的函数"), fn, v.clone(), n_rep
        )
        chk.compare(
            case,
            say("repeated keys", "重复后的键"),
            k_mine,
            repeat_kv(k, n_rep),
            variants=_variants(k, n_rep),
            hint=_hint(),
        )
        chk.compare(
            case,
            say("repeated values", "重复后的值"),
            v_mine,
            repeat_kv(v, n_rep),
            variants=_variants(v, n_rep),
            hint=_hint(),
        )
        mask = torch.ones(T, T, dtype=torch.bool, device=chk.device).tril()
        y, _ = scaled_dot_product_attention(q, k_mine, v_mine, mask=mask)
        got = module.out_proj(y.transpose(1, 2).reshape(2, T, D))
    chk.compare(
        case,
        say(
            "attention output with your repeated keys and values",
            "用你重复后的键和值算出的注意力输出",
        ),
        got,
        expected,
        hint=_hint(),
    )
    chk.ok()


def _inplace_case(chk: Checker, fn, gen: torch.Generator) -> None:
    case = say("input not modified in place", "输入不得被原地修改")
    kv = chk.randn(gen, 2, 2, 4, 8)
    before = kv.clone()
    with torch.no_grad():
        chk.call(case, say("your function", "运行你的函数"), fn, kv, 3)
    chk.unchanged(case, "kv", before, kv)
    chk.ok()


def check_repeat_kv(fn) -> None:
    """Check ``fn(kv, n_rep) -> repeated``: key/value heads for grouped-query attention.

    Interface: ``kv`` is ``(B, H_kv, T, head_dim)`` (the keys or the values of ``H_kv``
    heads), ``n_rep`` a positive int; the result is ``(B, H_kv * n_rep, T, head_dim)``
    where key/value head ``g`` appears at heads ``g*n_rep .. g*n_rep + n_rep - 1``
    (grouped, LLaMA's layout: query head ``h`` reads key/value head ``h // n_rep``).
    ``n_rep=1`` returns a tensor equal to ``kv``; returning a view that shares memory with
    ``kv`` is fine. The reference is ``tfcourse.nn.attention.repeat_kv``.

    Sub-checks (7): (2, 2, 5, 4) with n_rep=3 (output and input gradient); MQA, one
    key/value head, batch 1; T=1; n_rep=1; a non-contiguous (transposed) input; inside
    causal attention, equal to ``MultiHeadAttention(32, 8, n_kv_heads=2)``; input not
    modified in place. Names tiling instead of grouping, repeating along the wrong axis
    and ignoring ``n_rep``.
    """
    require_function("check_repeat_kv", fn)
    with Checker("repeat_kv") as chk:
        gen = chk.generator(0)
        cases = [
            (
                say(
                    "kv (2, 2, 5, 4), n_rep=3: 2 key/value heads for 6 query heads",
                    "kv (2, 2, 5, 4)，n_rep=3：2 个键/值头供 6 个查询头使用",
                ),
                (2, 2, 5, 4),
                3,
            ),
            (
                say(
                    "kv (1, 1, 3, 8), n_rep=4: multi-query, batch 1",
                    "kv (1, 1, 3, 8)，n_rep=4：多查询注意力（MQA），批大小 1",
                ),
                (1, 1, 3, 8),
                4,
            ),
            (
                say("kv (2, 4, 1, 6), n_rep=2: T=1", "kv (2, 4, 1, 6)，n_rep=2：T=1"),
                (2, 4, 1, 6),
                2,
            ),
            (
                say(
                    "kv (2, 3, 4, 4), n_rep=1: returns kv's values",
                    "kv (2, 3, 4, 4)，n_rep=1：返回与 kv 相同的值",
                ),
                (2, 3, 4, 4),
                1,
            ),
        ]
        for i, (case, shape, n_rep) in enumerate(cases):
            _case(chk, case, fn, chk.randn(gen, *shape), n_rep, grad=i == 0)
        # A transposed tensor: .view() on it fails where .reshape() copies.
        kv = chk.randn(gen, 2, 5, 2, 4).transpose(1, 2)
        _case(
            chk,
            say(
                "kv (2, 2, 5, 4) non-contiguous (a transpose), n_rep=2",
                "kv (2, 2, 5, 4) 不连续（由转置得到），n_rep=2",
            ),
            fn,
            kv,
            2,
            grad=False,
        )
        _attention_case(chk, fn, gen)
        _inplace_case(chk, fn, gen)
