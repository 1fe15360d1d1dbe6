"""Check for notebook 03's backward pass by hand: ``layernorm_backward``, compared with autograd."""

from __future__ import annotations

import torch

from ..language import say
from ..nn.norms import LayerNorm
from ._harness import Checker, mistake, require_function

D = 16


def _hint() -> str:
    return say(
        "per token, with sigma = sqrt(biased var + eps) and g = grad_out * weight: "
        "grad_x = (g - mean(g) - x_hat * mean(g * x_hat)) / sigma, the means over the last "
        "axis; grad_weight = sum of grad_out * x_hat and grad_bias = sum of grad_out over "
        "every token",
        "逐个词元计算，sigma = sqrt(有偏方差 + eps)，g = grad_out * weight："
        "grad_x = (g - mean(g) - x_hat * mean(g * x_hat)) / sigma，均值沿最后一维；"
        "grad_weight 是所有词元上 grad_out * x_hat 之和，grad_bias 是所有词元上 grad_out 之和",
    )


def _by_autograd(x, weight, bias, grad_out, eps):
    """The reference: autograd through ``tfcourse.LayerNorm`` (not the formula)."""
    norm = LayerNorm(x.shape[-1], eps=eps).to(x.device, x.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
        norm.bias.copy_(bias)
    x = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        (norm(x) * grad_out).sum().backward()
    return x.grad, norm.weight.grad, norm.bias.grad


def _variants(x, weight, grad_out, eps):
    """``{"grad_x" | "grad_weight" | "grad_bias": [(mistake, thunk)]}``: what each known mistake
    returns for these inputs."""

    def stats(dim=-1, unbiased=False, outside=False):
        mean = x.mean(dim=dim, keepdim=True)
        var = x.var(dim=dim, keepdim=True, unbiased=unbiased)
        sigma = var.sqrt() + eps if outside else (var + eps).sqrt()
        return (x - mean) / sigma, sigma

    def grad_x(
        *,
        dim=-1,
        unbiased=False,
        outside=False,
        weight_in=True,
        mean_term=True,
        var_term=True,
        reduce=torch.mean,
    ):
        x_hat, sigma = stats(dim, unbiased, outside)
        g = grad_out * weight if weight_in else grad_out
        out = g
        if mean_term:
            out = out - reduce(g, dim=dim, keepdim=True)
        if var_term:
            out = out - x_hat * reduce(g * x_hat, dim=dim, keepdim=True)
        return out / sigma

    x_hat, _ = stats()
    tokens = grad_out.reshape(-1, x.shape[-1])
    scaled = (grad_out * x_hat).reshape(-1, x.shape[-1])
    unsummed = mistake(
        "not summed over the tokens: the weight and the bias serve every token, so their "
        "gradients add up over all of them (a (D,) result)",
        "没有在所有词元上求和：weight 和 bias 被每个词元共用，它们的梯度要把所有词元的贡献加起来"
        "（结果的形状是 (D,)）",
    )
    averaged = mistake("averaged over the tokens instead of summed", "在词元上取了平均，而不是求和")
    return {
        "grad_x": [
            (
                mistake(
                    "both mean terms left out (grad_x = g / sigma): the gradients through the "
                    "mean and through the variance are missing",
                    "两个均值项都漏掉了（grad_x = g / sigma）：缺少经过均值和经过方差的梯度",
                ),
                lambda: grad_x(mean_term=False, var_term=False),
            ),
            (
                mistake(
                    "the variance's gradient dropped: the term - x_hat * mean(g * x_hat) is "
                    "missing",
                    "漏掉了经过方差的梯度：缺少 - x_hat * mean(g * x_hat) 这一项",
                ),
                lambda: grad_x(var_term=False),
            ),
            (
                mistake(
                    "the mean's gradient dropped: the term - mean(g) is missing",
                    "漏掉了经过均值的梯度：缺少 - mean(g) 这一项",
                ),
                lambda: grad_x(mean_term=False),
            ),
            (
                mistake(
                    "the means are taken over the wrong axis (dim 0, across tokens): "
                    "LayerNorm's statistics are per token, over the last axis",
                    "均值取错了轴（dim 0，跨词元取）：层归一化的统计量是逐词元的，沿最后一维",
                ),
                lambda: grad_x(dim=0),
            ),
            (
                mistake(
                    "sums where the formula has means: mean(g) is sum(g) / D",
                    "公式里的均值写成了求和：mean(g) 应为 sum(g) / D",
                ),
                lambda: grad_x(reduce=torch.sum),
            ),
            (
                mistake(
                    "the weight is left out: g = grad_out * weight is the gradient that "
                    "reaches x_hat",
                    "漏掉了 weight：到达 x_hat 的梯度是 g = grad_out * weight",
                ),
                lambda: grad_x(weight_in=False),
            ),
            (
                mistake(
                    "the variance is unbiased (divides by D - 1); LayerNorm's divides by D",
                    "用了无偏方差（除以 D - 1）；层归一化的方差除以 D",
                ),
                lambda: grad_x(unbiased=True),
            ),
            (
                mistake(
                    "eps is added outside the square root: sigma = sqrt(var + eps)",
                    "eps 加在了平方根外面：应为 sigma = sqrt(var + eps)",
                ),
                lambda: grad_x(outside=True),
            ),
        ],
        "grad_weight": [
            (unsummed, lambda: grad_out * x_hat),
            (averaged, lambda: scaled.mean(0)),
            (
                mistake(
                    "x where x_hat belongs: the weight multiplies the normalized input",
                    "该用 x_hat 的地方用了 x：weight 乘的是归一化之后的输入",
                ),
                lambda: (grad_out * x).reshape(-1, x.shape[-1]).sum(0),
            ),
            (
                mistake(
                    "x_hat left out: that sum of grad_out is the bias's gradient",
                    "漏掉了 x_hat：对 grad_out 求和得到的是 bias 的梯度",
                ),
                lambda: tokens.sum(0),
            ),
        ],
        "grad_bias": [
            (unsummed, lambda: grad_out),
            (averaged, lambda: tokens.mean(0)),
        ],
    }


def _case(chk: Checker, case: str, fn, gen, shape, *, scale=3.0, eps=1e-5) -> None:
    x = chk.randn(gen, *shape, scale=scale, offset=scale / 3)
    weight = chk.randn(gen, shape[-1], scale=0.5, offset=1.0)
    bias = chk.randn(gen, shape[-1])
    grad_out = chk.randn(gen, *shape)
    expected = _by_autograd(x, weight, bias, grad_out, eps)
    inputs = [t.clone() for t in (x, weight, grad_out)]
    with torch.no_grad():  # by hand: no graph to differentiate
        got = chk.call(
            case,
            say("your function", "运行你的函数"),
            fn,
            *inputs,
            eps,
            known={
                "does not require grad": mistake(
                    "autograd was used: this exercise computes the gradients from the formula",
                    "用了自动求导：这道练习要按公式算出梯度",
                )
            },
            hint=_hint(),
        )
    for name, before, after in zip(
        ("x", "weight", "grad_out"), (x, weight, grad_out), inputs, strict=True
    ):
        chk.unchanged(case, name, before, after)
    if not (isinstance(got, tuple | list) and len(got) == 3):
        chk.fail(
            case,
            say(
                f"your function returned {type(got).__name__}, expected a tuple of three tensors",
                f"你的函数返回了 {type(got).__name__}，应返回由三个张量组成的元组",
            ),
            detail="(grad_x, grad_weight, grad_bias)",
            hint=_hint(),
        )
    variants = _variants(x, weight, grad_out, eps)
    for what, mine, reference in zip(
        ("grad_x", "grad_weight", "grad_bias"), got, expected, strict=True
    ):
        chk.compare(case, what, mine, reference, variants=variants[what], hint=_hint())
    chk.ok()


def check_layernorm_backward(fn) -> None:
    """Check ``fn(x, weight, grad_out, eps=1e-5) -> (grad_x, grad_weight, grad_bias)``:
    LayerNorm's backward pass by hand, against autograd through ``tfcourse.LayerNorm``.

    Interface: ``x`` and ``grad_out`` (the gradient ``dL/dy`` from above) are ``(..., D)``,
    ``weight`` is ``(D,)``; per token, with ``sigma = sqrt(var + eps)`` (``var`` biased) and
    ``g = grad_out * weight``::

        grad_x = (g - mean(g) - x_hat * mean(g * x_hat)) / sigma   # means over the last axis
        grad_weight = sum(grad_out * x_hat), grad_bias = sum(grad_out)   # over every token

    The function runs under ``torch.no_grad()`` with inputs that do not require grad: it
    computes, it does not call autograd. It must not modify its inputs.

    Sub-checks (5): x (2, 5, 16); x (8, 16), tokens along dim 0; eps=0.1; batch 1, T=1;
    small inputs (0.03 scale), where eps matters. Weight and bias are random. Names the mean
    terms left out, either one dropped, the wrong axis, sums for means, the weight left out,
    an unbiased variance, eps outside the root, gradients of weight and bias not summed or
    averaged over the tokens, x for x_hat, and autograd used.
    """
    require_function("check_layernorm_backward", fn)
    with Checker("layernorm_backward") as chk:
        gen = chk.generator(0)
        _case(chk, say(f"x (2, 5, {D})", f"x (2, 5, {D})"), fn, gen, (2, 5, D))
        _case(
            chk,
            say(f"x (8, {D}): eight tokens along dim 0", f"x (8, {D})：沿 dim 0 的八个词元"),
            fn,
            gen,
            (8, D),
        )
        _case(
            chk,
            say(f"x (2, 5, {D}), eps=0.1", f"x (2, 5, {D})，eps=0.1"),
            fn,
            gen,
            (2, 5, D),
            eps=0.1,
        )
        _case(
            chk,
            say(f"x (1, 1, {D}): batch 1, T=1", f"x (1, 1, {D})：批大小 1，T=1"),
            fn,
            gen,
            (1, 1, D),
        )
        _case(
            chk,
            say(
                f"x (2, 4, {D}) at scale 0.03: eps 1e-5 matters",
                f"x (2, 4, {D})，尺度 0.03：eps 1e-5 会起作用",
            ),
            fn,
            gen,
            (2, 4, D),
            scale=0.03,
        )
