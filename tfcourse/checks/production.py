"""Checks for notebook 09 (production): fusing q/k/v projections, and attention with a KV cache."""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn

from ..lab.production import attend_with_cache
from ..language import say
from ..nn.attention import causal_mask, scaled_dot_product_attention
from ._harness import Checker, first_line, max_abs_diff, mistake, require_function

# ----------------------------------------------------------------------------- fuse_qkv


def _random_linear(gen: torch.Generator, d_in: int, d_out: int, bias: bool, device, dtype):
    layer = nn.Linear(d_in, d_out, bias=bias)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) / math.sqrt(d_in))
    return layer.to(device=device, dtype=dtype)


def check_fuse_qkv(fn) -> None:
    """Check ``fn(q_proj, k_proj, v_proj) -> fused``.

    Interface: the three arguments are ``nn.Linear(D_in, D_out)`` with the same
    shapes (all with a bias, or all without). ``fn`` returns an ``nn.Linear(D_in,
    3 * D_out)`` (or any module with ``weight``/``bias`` and that forward) such that
    ``fused(x) == cat([q_proj(x), k_proj(x), v_proj(x)], dim=-1)``: weight rows
    ``[q; k; v]``, the layout of ``MultiHeadAttention.qkv_proj``. Without biases the
    fused layer's ``bias`` is None (or zero).

    Sub-checks (4): square projections with biases; without biases; rectangular
    projections (``D_in != D_out``); the three inputs left unchanged.
    """
    require_function("check_fuse_qkv", fn)
    with Checker("fuse_qkv") as chk:
        gen = chk.generator(0)
        cases = [
            (say("D_in=8, D_out=8, with bias", "D_in=8，D_out=8，带偏置"), 8, 8, True),
            (say("D_in=8, D_out=8, no bias", "D_in=8，D_out=8，不带偏置"), 8, 8, False),
            (say("D_in=6, D_out=4, with bias", "D_in=6，D_out=4，带偏置"), 6, 4, True),
        ]
        for case, d_in, d_out, bias in cases:
            projs = [
                _random_linear(gen, d_in, d_out, bias, chk.device, chk.dtype) for _ in range(3)
            ]
            before = [
                {n: p.detach().clone() for n, p in layer.named_parameters()} for layer in projs
            ]
            fused = chk.call(case, say("your function", "运行你的函数"), fn, *projs)
            for name, layer, saved in zip("qkv", projs, before, strict=True):
                for pname, p in layer.named_parameters():
                    chk.unchanged(case, f"{name}_proj.{pname}", saved[pname], p)
            _check_fused(chk, case, fused, projs, d_in, d_out, bias, gen)
            chk.ok()
        chk.ok()  # the inputs were compared after every case above


def _check_fused(chk: Checker, case: str, fused, projs, d_in: int, d_out: int, bias: bool, gen):
    if not isinstance(fused, nn.Module) or not isinstance(
        getattr(fused, "weight", None), torch.Tensor
    ):
        chk.fail(
            case,
            say(
                f"your function returned a {type(fused).__name__}, expected an nn.Linear",
                f"你的函数返回了 {type(fused).__name__}，应返回 nn.Linear",
            ),
            hint=say(
                f"build nn.Linear({d_in}, {3 * d_out}) and copy the stacked weights into it",
                f"新建 nn.Linear({d_in}, {3 * d_out})，再把拼接好的权重复制进去",
            ),
        )
    w = fused.weight
    if tuple(w.shape) != (3 * d_out, d_in):
        looks = None
        if tuple(w.shape) == (d_out, 3 * d_in):
            looks = say(
                "the weights are concatenated along dim=1 (inputs); nn.Linear stores "
                "weight as (out_features, in_features), so stacking outputs is dim=0",
                "权重沿 dim=1（输入维）拼接了；nn.Linear 的 weight 形状是 "
                "(out_features, in_features)，所以按输出堆叠应该用 dim=0",
            )
        chk.fail(
            case,
            say(
                f"fused.weight has shape {tuple(w.shape)}, expected {(3 * d_out, d_in)}",
                f"fused.weight 的形状是 {tuple(w.shape)}，应为 {(3 * d_out, d_in)}",
            ),
            looks_like=looks,
        )
    b = fused.bias
    if bias and b is None:
        chk.fail(
            case,
            say(
                "fused.bias is None although q/k/v_proj have biases",
                "q/k/v_proj 都有偏置，fused.bias 却是 None",
            ),
            hint=say(
                "concatenate the three biases too: torch.cat([q.bias, k.bias, v.bias])",
                "把三个偏置也拼接起来：torch.cat([q.bias, k.bias, v.bias])",
            ),
        )
    if not bias and b is not None and bool((b != 0).any()):
        chk.fail(
            case,
            say(
                "fused.bias is nonzero although q/k/v_proj have no bias",
                "q/k/v_proj 都没有偏置，fused.bias 却不为零",
            ),
            hint=say(
                "build the fused layer with bias=False when the inputs have none",
                "输入没有偏置时，用 bias=False 构建融合层",
            ),
        )
    x = torch.randn(3, 5, d_in, generator=gen, dtype=torch.float64).to(chk.device, chk.dtype)
    with torch.no_grad():
        expected = torch.cat([p(x) for p in projs], dim=-1)
        got = chk.call(case, say("calling the fused layer", "调用融合层"), fused, x)
        outs = {name: p(x) for name, p in zip("qkv", projs, strict=True)}

        def order(names):
            return lambda: torch.cat([outs[n] for n in names], dim=-1)

        variants = [
            (
                mistake(
                    f"the blocks are in the order {', '.join(names)}; the rows must be q, k, v",
                    f"各块的顺序是 {', '.join(names)}；行的顺序必须是 q, k, v",
                ),
                order(names),
            )
            for names in itertools.permutations("qkv")
            if names != tuple("qkv")
        ]
        if bias:
            variants.append(
                (
                    mistake("the biases are missing (weights only)", "缺少偏置（只拼接了权重）"),
                    lambda: torch.cat([x @ p.weight.t() for p in projs], dim=-1),
                )
            )
        if d_in == d_out:
            variants.append(
                (
                    mistake(
                        "each weight block is transposed (W.t() instead of W)",
                        "每个权重块都被转置了（用了 W.t() 而不是 W）",
                    ),
                    lambda: torch.cat(
                        [x @ p.weight + (p.bias if p.bias is not None else 0) for p in projs],
                        dim=-1,
                    ),
                )
            )
    chk.compare(
        case,
        say("fused(x)", "fused(x) 的输出"),
        got,
        expected,
        variants=variants,
        hint=say(
            "fused.weight = cat([q.weight, k.weight, v.weight], dim=0); same for bias",
            "fused.weight = cat([q.weight, k.weight, v.weight], dim=0)；偏置同理",
        ),
    )


# ----------------------------------------------------------------------------- attend_with_cache


def _raise(error: BaseException):
    raise error


def _call_with_cache(chk: Checker, case: str, what: str, fn, *args):
    """Call the learner's function; a shape error once a cache is passed gets a diagnosis."""
    try:
        return fn(*args)
    except NotImplementedError:
        raise
    except Exception as error:  # noqa: BLE001 - any learner error becomes a report
        if args[3] is not None and isinstance(error, (RuntimeError, ValueError)):
            chk.fail(
                case,
                say(
                    f"{what} raised {type(error).__name__}: {first_line(error)}",
                    f"{what}时抛出了 {type(error).__name__}：{first_line(error)}",
                ),
                looks_like=mistake(
                    "an error only once a cache is passed, usually a shape "
                    "mismatch: the cache must grow along the time axis, dim=-2, "
                    "to (B, H, T_past + T_new, head_dim)",
                    "只有传入缓存时才出错，通常是形状不匹配：缓存必须沿时间轴 "
                    "dim=-2 增长，变成 (B, H, T_past + T_new, head_dim)",
                ),
                hint=say(
                    "k = torch.cat([past_k, k_new], dim=-2); the same for v",
                    "k = torch.cat([past_k, k_new], dim=-2)；v 同理",
                ),
                cause=error,
            )
        return chk.call(case, what, _raise, error)


def _unpack(chk: Checker, case: str, result):
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        chk.fail(
            case,
            say(
                f"your function returned {type(result).__name__}, expected a tuple (out, k, v)",
                f"你的函数返回了 {type(result).__name__}，应返回元组 (out, k, v)",
            ),
            hint=say(
                "return out, k, v (k and v: the cache for the next call)",
                "返回 out, k, v（k 和 v 是留给下一次调用的缓存）",
            ),
        )
    return result


def _variants_chunk(q, k_all, v_all):
    """Known mistakes for new queries q (T_new) over all keys k_all (T_all)."""
    T_new, T_all = q.shape[-2], k_all.shape[-2]
    past = T_all - T_new
    ones = torch.ones(T_new, T_all, dtype=torch.bool, device=q.device)
    variants = [
        (
            mistake(
                "no causal mask among the new tokens: with one new token none is needed, but a "
                "chunk of several new tokens must not see its own future",
                "新词元之间没有因果掩码：只有一个新词元时不需要，但一次输入多个新词元时，"
                "它们不能看到自己之后的词元",
            ),
            lambda: scaled_dot_product_attention(q, k_all, v_all)[0],
        ),
        (
            mistake(
                "the causal mask is not shifted by the cache length: new query i sits at position "
                "T_past + i, so it may see keys 0..T_past + i (tril(diagonal=T_past)); "
                "tril() from the top-left corner hides most of the cache",
                "因果掩码没有按缓存长度平移：第 i 个新查询位于位置 T_past + i，可以看到键 "
                "0..T_past + i（tril(diagonal=T_past)）；从左上角开始的 tril() 会挡住大部分缓存",
            ),
            lambda: scaled_dot_product_attention(q, k_all, v_all, ones.tril())[0],
        ),
        (
            mistake(
                "the new queries attend only to the new keys: the cached keys/values are ignored",
                "新查询只关注了新的键：忽略了缓存里的键/值",
            ),
            lambda: scaled_dot_product_attention(
                q, k_all[..., past:, :], v_all[..., past:, :], causal_mask(T_new, device=q.device)
            )[0],
        ),
        (
            mistake(
                "the scores are not divided by sqrt(head_dim)", "注意力分数没有除以 sqrt(head_dim)"
            ),
            lambda: scaled_dot_product_attention(
                q * math.sqrt(q.shape[-1]), k_all, v_all, ones.tril(diagonal=past)
            )[0],
        ),
    ]
    return variants


def check_kv_cache_attention(fn) -> None:
    """Check ``fn(q, k_new, v_new, past_k=None, past_v=None) -> (out, k, v)``.

    Interface: ``q``, ``k_new``, ``v_new`` are ``(B, H, T_new, head_dim)`` for the newest
    ``T_new`` tokens; ``past_k``/``past_v`` are ``(B, H, T_past, head_dim)`` (or None: no
    cache yet). ``k``/``v`` are the cache for the next call, ``(B, H, T_past + T_new,
    head_dim)`` (the past, then the new ones, along the time axis ``dim=-2``), and
    ``out (B, H, T_new, head_dim)`` is causal attention of the new queries over all
    keys: new query ``i`` is at position ``T_past + i`` and sees keys ``0..T_past + i``.
    The reference is ``tfcourse.production.attend_with_cache``.

    Sub-checks (5): no cache (equals causal attention); decoding token by token, every
    step against full attention over the whole sequence; a chunk of 3 new tokens after
    a cache of 4 (the mask must be shifted by the cache length); T=1 with batch 1;
    inputs not modified in place.
    """
    require_function("check_kv_cache_attention", fn)
    with Checker("attend_with_cache") as chk:
        gen = chk.generator(0)
        B, H, T, hd = 2, 3, 7, 8
        q, k, v = (chk.randn(gen, B, H, T, hd) for _ in range(3))
        full, _ = scaled_dot_product_attention(q, k, v, causal_mask(T, device=chk.device))

        your_function, out_name = (
            say("your function", "运行你的函数"),
            say("out", "返回的 out 张量"),
        )
        case = say(
            f"no cache: q, k, v {(B, H, T, hd)}, past_k=past_v=None",
            f"无缓存：q, k, v {(B, H, T, hd)}，past_k=past_v=None",
        )
        out, k_c, v_c = _unpack(chk, case, chk.call(case, your_function, fn, q, k, v, None, None))
        _compare_cache(chk, case, k_c, v_c, k, v)
        chk.compare(
            case,
            out_name,
            out,
            full,
            variants=_variants_chunk(q, k, v),
            hint=say(
                "without a cache this is plain causal attention",
                "没有缓存时，这就是普通的因果注意力",
            ),
        )
        chk.ok()

        case = say(f"decoding one token at a time, T=1..{T}", f"逐个词元解码，T=1..{T}")
        past_k = past_v = None
        for t in range(T):
            step = slice(t, t + 1)
            result = _call_with_cache(
                chk,
                case,
                say(f"your function at step {t}", f"第 {t} 步运行你的函数"),
                fn,
                q[..., step, :],
                k[..., step, :],
                v[..., step, :],
                past_k,
                past_v,
            )
            out, past_k, past_v = _unpack(chk, case, result)
            at_step = say(f"{case}, step {t}", f"{case}，第 {t} 步")
            _compare_cache(chk, at_step, past_k, past_v, k[..., : t + 1, :], v[..., : t + 1, :])
            chk.compare(
                at_step,
                out_name,
                out,
                full[..., step, :],
                variants=_variants_chunk(q[..., step, :], k[..., : t + 1, :], v[..., : t + 1, :]),
                hint=say(
                    "the new token attends to every cached key and to itself",
                    "新词元要关注缓存里的每一个键，以及它自己",
                ),
            )
        chk.ok()

        case = say(
            "a chunk of 3 new tokens after a cache of 4",
            "在 4 个已缓存的词元之后一次输入 3 个新词元",
        )
        new = slice(4, 7)
        result = _call_with_cache(
            chk,
            case,
            your_function,
            fn,
            q[..., new, :],
            k[..., new, :],
            v[..., new, :],
            k[..., :4, :],
            v[..., :4, :],
        )
        out, k_c, v_c = _unpack(chk, case, result)
        _compare_cache(chk, case, k_c, v_c, k, v)
        chk.compare(
            case,
            out_name,
            out,
            full[..., new, :],
            variants=_variants_chunk(q[..., new, :], k, v),
            hint=say(
                "mask = torch.ones(T_new, T_all, dtype=torch.bool).tril(diagonal=T_all - T_new)",
                "掩码应为 mask = torch.ones(T_new, T_all, "
                "dtype=torch.bool).tril(diagonal=T_all - T_new)",
            ),
        )
        chk.ok()

        case = say("batch 1, one head, T_past=2, T_new=1", "批大小 1，单个头，T_past=2，T_new=1")
        q1, k1, v1 = (chk.randn(gen, 1, 1, 3, 4) for _ in range(3))
        want, _, _ = attend_with_cache(
            q1[..., 2:, :], k1[..., 2:, :], v1[..., 2:, :], k1[..., :2, :], v1[..., :2, :]
        )
        result = _call_with_cache(
            chk,
            case,
            your_function,
            fn,
            q1[..., 2:, :],
            k1[..., 2:, :],
            v1[..., 2:, :],
            k1[..., :2, :],
            v1[..., :2, :],
        )
        out, k_c, v_c = _unpack(chk, case, result)
        _compare_cache(chk, case, k_c, v_c, k1, v1)
        chk.compare(case, out_name, out, want, variants=_variants_chunk(q1[..., 2:, :], k1, v1))
        chk.ok()

        case = say("inputs not modified in place", "输入不得被原地修改")
        originals = [t.clone() for t in (q, k, v)]
        chk.call(
            case,
            your_function,
            fn,
            q[..., 5:, :],
            k[..., 5:, :],
            v[..., 5:, :],
            k[..., :5, :],
            v[..., :5, :],
        )
        for name, before, after in zip("qkv", originals, (q, k, v), strict=True):
            chk.unchanged(case, name, before, after)
        chk.ok()


def _compare_cache(chk: Checker, case: str, k_got, v_got, k_want, v_want) -> None:
    for name, got, want in (("k", k_got, k_want), ("v", v_got, v_want)):
        if not isinstance(got, torch.Tensor):
            shape = tuple(want.shape)
            chk.fail(
                case,
                say(
                    f"the returned cache {name} is a {type(got).__name__}, expected a "
                    f"tensor of shape {shape}",
                    f"返回的缓存 {name} 是 {type(got).__name__}，应为形状 {shape} 的张量",
                ),
                hint=say(f"return the concatenated {name}", f"返回拼接之后的 {name}"),
            )
        if got.shape != want.shape:
            B, _, T, hd = want.shape
            looks = None
            if got.dim() == 4 and got.shape[-1] != hd and got.shape[-2] != T:
                looks = say(
                    "concatenated along the channel axis (dim=-1); time is dim=-2",
                    "沿通道轴（dim=-1）拼接了；时间轴是 dim=-2",
                )
            elif got.dim() == 4 and got.shape[0] != B:
                looks = say(
                    "concatenated along the batch axis (dim=0); time is dim=-2",
                    "沿批次轴（dim=0）拼接了；时间轴是 dim=-2",
                )
            elif got.dim() == 4 and got.shape[-2] < T:
                looks = say(
                    "the returned cache holds only the new tokens: concatenate the past first",
                    "返回的缓存里只有新词元：要先拼上过去的部分",
                )
            cat = f"{name} = torch.cat([past_{name}, {name}_new], dim=-2)"
            chk.fail(
                case,
                say(
                    f"the returned cache {name} has shape {tuple(got.shape)}, expected "
                    f"{tuple(want.shape)}",
                    f"返回的缓存 {name} 的形状是 {tuple(got.shape)}，应为 {tuple(want.shape)}",
                ),
                looks_like=looks,
                hint=say(cat, f"应写成 {cat}"),
            )
        if not torch.equal(got.detach(), want):
            looks = None
            if torch.equal(got.detach().flip(-2), want) or (
                got.shape[-2] > 1 and not torch.equal(got[..., -1:, :].detach(), want[..., -1:, :])
            ):
                looks = say(
                    "the new keys/values come first; the cache must keep time order "
                    "(past, then new)",
                    "新的键/值排在了前面；缓存必须保持时间顺序（先过去的，再新的）",
                )
            cat = f"cat([past_{name}, {name}_new], dim=-2)"
            chk.fail(
                case,
                say(
                    f"the returned cache {name} differs from {cat}",
                    f"返回的缓存 {name} 与 {cat} 不一致",
                ),
                diff=max_abs_diff(got, want),
                looks_like=looks,
            )
