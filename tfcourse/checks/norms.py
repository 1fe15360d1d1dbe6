"""Checks for notebook 03: LayerNorm and RMSNorm."""

from __future__ import annotations

from ..language import say
from ..nn import norms as reference_norms
from ._harness import Checker, mistake
from ._module_cases import inplace_case, module_case
from ._parameters import build, load_reference, randomize_

D = 16


def check_layernorm(cls) -> None:
    """Check a LayerNorm class against ``tfcourse.LayerNorm``.

    Interface: ``cls(d_model, eps=1e-5)`` is an ``nn.Module`` with parameters
    ``weight (D,)`` and ``bias (D,)`` (``nn.LayerNorm``'s names); ``forward(x)`` maps
    ``(..., D) -> (..., D)``, normalizing each token over its last dimension::

        y = (x - mean) / sqrt(var + eps) * weight + bias      # var: biased (divide by D)

    Sub-checks (6): parameter layout; input not modified in place; output and
    gradients for x (2, 5, 16); eps=0.1 (a misplaced eps shows); batch 1, T=1;
    small inputs (0.03 * randn), where the default eps matters.
    Weights and biases are random, not 1 and 0.
    """
    with Checker("LayerNorm") as chk:
        _check_norm(chk, cls, reference_norms.LayerNorm, 1e-5, _layernorm_variants)


def check_rmsnorm(cls) -> None:
    """Check an RMSNorm class against ``tfcourse.RMSNorm``.

    Interface: ``cls(d_model, eps=1e-6)`` is an ``nn.Module`` with one parameter
    ``weight (D,)`` (no bias); ``forward(x)`` maps ``(..., D) -> (..., D)``::

        y = x / sqrt(mean(x ** 2) + eps) * weight              # over the last dimension

    Sub-checks (6): parameter layout; input not modified in place; output and
    gradients for x (2, 5, 16); eps=0.1; batch 1, T=1; small inputs (0.03 * randn),
    where the default eps matters. The weight is random, not 1.
    """
    with Checker("RMSNorm") as chk:
        _check_norm(chk, cls, reference_norms.RMSNorm, 1e-6, _rmsnorm_variants)


def _check_norm(chk: Checker, cls, reference_cls, default_eps: float, variants) -> None:
    name = reference_cls.__name__
    gen = chk.generator(0)

    def pair(case, eps=None):
        kwargs = {} if eps is None else {"eps": eps}
        learner = build(chk, case, cls, D, **kwargs).eval()
        reference = randomize_(reference_cls(D, **kwargs), gen).to(chk.device, chk.dtype)
        load_reference(chk, case, learner, reference, bias=None)
        return learner, reference

    case = say(f"parameter layout of {name}({D})", f"{name}({D}) 的参数布局")
    learner, reference = pair(case)
    chk.ok()

    case = say(f"x (2, 5, {D}): input not modified in place", f"x (2, 5, {D})：输入不得被原地修改")
    inplace_case(chk, case, [learner], chk.randn(gen, 2, 5, D))
    chk.ok()

    cases = [
        (say(f"x (2, 5, {D}), default eps", f"x (2, 5, {D})，默认 eps"), (2, 5, D), 1.0, None),
        (say(f"x (2, 5, {D}), eps=0.1", f"x (2, 5, {D})，eps=0.1"), (2, 5, D), 1.0, 0.1),
        (
            say(f"x (1, 1, {D}): batch 1, T=1", f"x (1, 1, {D})：批大小 1，T=1"),
            (1, 1, D),
            1.0,
            None,
        ),
        (
            say(
                f"x (2, 4, {D}) = 0.03 * randn: default eps {default_eps:g} matters",
                f"x (2, 4, {D}) = 0.03 * randn：默认 eps {default_eps:g} 会起作用",
            ),
            (2, 4, D),
            0.03,
            None,
        ),
    ]
    for seed, (case, shape, scale, eps) in enumerate(cases):
        if eps is not None:
            learner, reference = pair(case, eps)
        elif reference.eps != default_eps:
            learner, reference = pair(case)
        x = chk.randn(gen, *shape, scale=scale)
        module_case(
            chk,
            case,
            learner,
            reference,
            x,
            seed=seed,
            variants=lambda reference=reference, x=x, eps=eps: variants(
                reference, x, default_eps if eps is None else None
            ),
        )
        chk.ok()


def _layernorm_variants(ref, x, default_eps):
    w, b, eps = ref.weight, ref.bias, ref.eps

    def ln(
        x,
        eps=eps,
        unbiased=False,
        outside=False,
        sqrt=True,
        center=True,
        dim=-1,
        weight=True,
        bias=True,
        bias_first=False,
        about_zero=False,
    ):
        mean = x.mean(dim=dim, keepdim=True)
        var = x.var(dim=dim, keepdim=True, unbiased=unbiased)
        if about_zero:  # the "variance" mean(x**2): the spread around 0, not around the mean
            var = x.pow(2).mean(dim=dim, keepdim=True)
        centered = x - mean if center else x
        if not sqrt:
            y = centered / (var + eps)
        elif outside:
            y = centered / (var.sqrt() + eps)
        else:
            y = centered / (var + eps).sqrt()
        if bias_first:
            return (y + b) * w
        return y * (w if weight else 1) + (b if bias else 0)

    table = [
        (
            mistake(
                "the variance is unbiased (divides by D - 1); LayerNorm divides by D "
                "(unbiased=False)",
                "方差用了无偏估计（除以 D - 1）；层归一化（LayerNorm）除以 D（unbiased=False）",
            ),
            lambda: ln(x, unbiased=True),
        ),
        (
            mistake(
                "eps is added outside the square root: (x - mean) / (sqrt(var) + eps) instead of "
                "(x - mean) / sqrt(var + eps)",
                "eps 加在了平方根外面：写成了 (x - mean) / "
                "(sqrt(var) + eps)，应为 (x - mean) / sqrt(var + eps)",
            ),
            lambda: ln(x, outside=True),
        ),
        (
            mistake(
                "eps is left out: (x - mean) / sqrt(var)", "漏掉了 eps：(x - mean) / sqrt(var)"
            ),
            lambda: ln(x, eps=0.0),
        ),
        (
            mistake(
                "no learnable affine: weight and bias are not applied",
                "没有可学习的仿射变换：weight 和 bias 都没有用上",
            ),
            lambda: ln(x, weight=False, bias=False),
        ),
        (mistake("the bias is not added", "没有加上 bias"), lambda: ln(x, bias=False)),
        (_scale_not_applied(), lambda: ln(x, weight=False)),
        (
            mistake(
                "the mean is not subtracted: x / sqrt(var + eps), although the variance is the "
                "centred one; normalize x - mean",
                "没有减去均值：写成了 x / sqrt(var + eps)，而方差是按减去均值之后的数据算的；"
                "应当归一化的是 x - mean",
            ),
            lambda: ln(x, center=False),
        ),
        (
            mistake(
                "the mean is never subtracted: x / sqrt(mean(x**2) + eps) * weight + bias is "
                "RMSNorm plus a bias; LayerNorm normalizes x - mean by sqrt(var + eps), "
                "var = mean((x - mean)**2)",
                "完全没有减去均值：x / sqrt(mean(x**2) + eps) * weight + bias 是均方根归一化"
                "（RMSNorm）再加一个 bias；层归一化（LayerNorm）是用 sqrt(var + eps) 去归一化 "
                "x - mean，其中 var = mean((x - mean)**2)",
            ),
            lambda: ln(x, center=False, about_zero=True),
        ),
        (
            mistake(
                "the variance is mean(x**2), the spread around 0, instead of the spread around "
                "the mean, mean((x - mean)**2)",
                "方差写成了 mean(x**2)，即围绕 0 的离散程度，而不是围绕均值的 mean((x - mean)**2)",
            ),
            lambda: ln(x, about_zero=True),
        ),
        (
            mistake(
                "the bias is added before the scale: (x_hat + bias) * weight instead of "
                "x_hat * weight + bias",
                "bias 加在了缩放之前：写成了 (x_hat + bias) * weight，应为 x_hat * weight + bias",
            ),
            lambda: ln(x, bias_first=True),
        ),
        (
            mistake(
                "divides by the variance instead of its square root",
                "除以的是方差，而不是它的平方根",
            ),
            lambda: ln(x, sqrt=False),
        ),
        (
            mistake(
                "mean and variance are taken over the sequence axis (dim=1) instead of the "
                "features (dim=-1)",
                "均值和方差是沿序列轴（dim=1）计算的，而不是沿特征维（dim=-1）",
            ),
            lambda: ln(x, dim=1),
        ),
        (
            mistake(
                "mean and variance are taken over the batch axis (dim=0), as BatchNorm does, "
                "instead of the features (dim=-1)",
                "均值和方差是沿批次轴（dim=0）计算的，这是批归一化（BatchNorm）的做法，"
                "而不是沿特征维（dim=-1）",
            ),
            lambda: ln(x, dim=0),
        ),
        (
            mistake(
                "mean and variance are taken over the whole sequence and its features "
                "(dim=(-2, -1)) instead of each token's features (dim=-1)",
                "均值和方差是在整个序列及其特征上（dim=(-2, -1)）一起计算的，"
                "而不是对每个词元的特征（dim=-1）",
            ),
            lambda: ln(x, dim=(-2, -1)),
        ),
    ]
    if default_eps is not None:
        table += [
            (_wrong_default_eps(e, default_eps), lambda e=e: ln(x, eps=e))
            for e in (1e-6, 1e-8, 1e-12, 1e-3, 1e-4)
        ]
    return table


def _scale_not_applied() -> str:
    return say("the weight (scale) is not applied", "没有乘上 weight（缩放系数）")


def _wrong_default_eps(eps: float, default_eps: float) -> str:
    return say(
        f"the default eps is {eps:g}, expected {default_eps:g}",
        f"默认的 eps 是 {eps:g}，应为 {default_eps:g}",
    )


def _rmsnorm_variants(ref, x, default_eps):
    w, eps = ref.weight, ref.eps
    mean_square = x.pow(2).mean(dim=-1, keepdim=True)
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    subtracted = say(
        "the mean is subtracted (that is LayerNorm); RMSNorm divides x itself by "
        "its root mean square",
        "减去了均值（那是层归一化 LayerNorm 的做法）；均方根归一化（RMSNorm）是把 x "
        "直接除以它自身的均方根",
    )
    table = [
        (subtracted, lambda: (x - mean) / (var + eps).sqrt() * w),
        (subtracted, lambda: (x - mean) / (mean_square + eps).sqrt() * w),
        (
            mistake(
                "eps is added outside the square root: x / (sqrt(mean(x**2)) + eps) instead of "
                "x / sqrt(mean(x**2) + eps)",
                "eps 加在了平方根外面：写成了 x / (sqrt(mean(x**2)) "
                "+ eps)，应为 x / sqrt(mean(x**2) + eps)",
            ),
            lambda: x / (mean_square.sqrt() + eps) * w,
        ),
        (
            mistake("eps is left out: x / sqrt(mean(x**2))", "漏掉了 eps：x / sqrt(mean(x**2))"),
            lambda: x / mean_square.sqrt() * w,
        ),
        (
            mistake(
                "divides by the mean square instead of its square root",
                "除以的是均方，而不是它的平方根",
            ),
            lambda: x / (mean_square + eps) * w,
        ),
        (
            mistake(
                "divides by the mean of |x| instead of the root mean square",
                "除以的是 |x| 的均值，而不是均方根",
            ),
            lambda: x / (x.abs().mean(dim=-1, keepdim=True) + eps) * w,
        ),
        (
            mistake(
                "divides by the mean of x instead of the root mean square",
                "除以的是 x 的均值，而不是均方根",
            ),
            lambda: x / (mean + eps) * w,
        ),
        (
            mistake(
                "uses the sum of squares instead of their mean", "用的是平方和，而不是平方的均值"
            ),
            lambda: x / (x.pow(2).sum(dim=-1, keepdim=True) + eps).sqrt() * w,
        ),
        (
            mistake(
                "x is divided by its standard deviation sqrt(var + eps) (the centred variance) "
                "without subtracting the mean; RMSNorm divides by the root mean square of x itself",
                "x 被除以了它的标准差 sqrt(var + eps)（中心化的方差），却没有减去均值；均方根归一化"
                "（RMSNorm）除以的是 x 本身的均方根",
            ),
            lambda: x / (var + eps).sqrt() * w,
        ),
        (
            mistake(
                "divides by the standard deviation (x.std()) instead of the root mean square",
                "除以的是标准差（x.std()），而不是均方根",
            ),
            lambda: x / (x.std(dim=-1, keepdim=True) + eps) * w,
        ),
        (_scale_not_applied(), lambda: x / (mean_square + eps).sqrt()),
        (
            mistake(
                "the mean square is taken over the sequence axis (dim=1) instead of the features "
                "(dim=-1)",
                "均方是沿序列轴（dim=1）计算的，而不是沿特征维（dim=-1）",
            ),
            lambda: x / (x.pow(2).mean(dim=1, keepdim=True) + eps).sqrt() * w,
        ),
        (
            mistake(
                "the mean square is taken over the batch axis (dim=0) instead of the features "
                "(dim=-1)",
                "均方是沿批次轴（dim=0）计算的，而不是沿特征维（dim=-1）",
            ),
            lambda: x / (x.pow(2).mean(dim=0, keepdim=True) + eps).sqrt() * w,
        ),
    ]
    if default_eps is not None:
        table += [
            (_wrong_default_eps(e, default_eps), lambda e=e: x / (mean_square + e).sqrt() * w)
            for e in (1e-5, 1e-8, 1e-12, 0.0)
        ]
    return table
