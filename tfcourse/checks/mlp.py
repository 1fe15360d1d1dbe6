"""Checks for notebooks 04 and 10: the GELU FeedForward, SwiGLU and its hidden width."""

from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F

from ..language import say
from ..nn import mlp as reference_mlp
from ._harness import Checker, describe_call, mistake
from ._module_cases import dropout_acts, eval_dropout_case, inplace_case, module_case
from ._parameters import build, load_reference, randomize_
from .cases import case_int

D = 16
P_DROP = 0.5


def _d_hidden_ignored(width) -> str:
    return say(
        f"the d_hidden argument is ignored (hidden width {width})",
        f"忽略了 d_hidden 参数（隐藏层宽度为 {width}）",
    )


# ---------------------------------------------------------------------------------------------
# FeedForward


def _feedforward_variants(ref, x):
    fc_in, fc_out = ref.fc_in, ref.fc_out
    return [
        (
            mistake("ReLU instead of the exact GELU", "用了 ReLU，而不是精确的 GELU"),
            lambda: fc_out(F.relu(fc_in(x))),
        ),
        (
            mistake(
                "the tanh approximation of GELU instead of the exact (erf) GELU; use F.gelu(x) or "
                "nn.GELU() without approximate='tanh'",
                "用了 GELU 的 tanh 近似，而不是精确（erf）GELU；请用 F.gelu(x) 或 nn.GELU()，"
                "不要加 approximate='tanh'",
            ),
            lambda: fc_out(F.gelu(fc_in(x), approximate="tanh")),
        ),
        (
            mistake("SiLU instead of GELU", "用了 SiLU，而不是 GELU"),
            lambda: fc_out(F.silu(fc_in(x))),
        ),
        (
            mistake("no activation between the two linear layers", "两个线性层之间没有激活函数"),
            lambda: fc_out(fc_in(x)),
        ),
        (
            mistake(
                "GELU after the second linear layer instead of between the two",
                "GELU 放在了第二个线性层之后，而不是两个线性层之间",
            ),
            lambda: F.gelu(fc_out(fc_in(x))),
        ),
    ]


def _feedforward_width(default_width):
    def diagnose(name, got, want):
        if name.startswith("fc_in.weight") or name.startswith("fc_out.weight"):
            width = got[0] if name.startswith("fc_in") else got[1]
            if default_width:
                return say(
                    f"the default hidden width is {width}; it should be 4 * d_model = "
                    f"{4 * D} when d_hidden is None",
                    f"默认的隐藏层宽度是 {width}；d_hidden 为 None 时应为 4 * d_model = {4 * D}",
                )
            return _d_hidden_ignored(width)
        return None

    return diagnose


def check_feedforward(cls) -> None:
    """Check a position-wise MLP class against ``tfcourse.FeedForward`` (exact GELU).

    Interface: ``cls(d_model, d_hidden=None, *, dropout=0.0, bias=True)``, an
    ``nn.Module`` with ``fc_in = Linear(d_model, d_hidden)`` and
    ``fc_out = Linear(d_hidden, d_model)`` (``d_hidden`` defaults to ``4 * d_model``;
    no biases when ``bias=False``)::

        y = dropout(fc_out(gelu(fc_in(x))))      # exact (erf) GELU; (B, T, D) -> (B, T, D)

    Dropout sits on the output only and acts only in train mode.

    Sub-checks (8): parameter layout with the default width; input not modified in
    place; (2, 5, 16) output and gradients; batch 1, T=1; d_hidden=24; bias=False;
    dropout=0.5 in eval mode (no effect); dropout=0.5 in train mode (on the output).
    """
    with Checker("FeedForward") as chk:
        gen = chk.generator(4)

        def pair(case, **kwargs):
            learner = build(chk, case, cls, D, **kwargs).eval()
            reference = randomize_(reference_mlp.FeedForward(D, activation="gelu", **kwargs), gen)
            reference = reference.to(chk.device, chk.dtype).eval()
            load_reference(
                chk,
                case,
                learner,
                reference,
                bias=kwargs.get("bias", True),
                shape_diagnosis=_feedforward_width("d_hidden" not in kwargs),
            )
            return learner, reference

        _check_mlp(chk, pair, gen, _feedforward_variants, "fc_in", _feedforward_near_misses)


def _feedforward_near_misses(ref, x):
    # tanh-GELU differs from GELU by < 1e-3: inside accelerator tolerances.
    return _feedforward_variants(ref, x)[1:2]


def _check_mlp(
    chk: Checker, pair, gen, variants, first_layer: str, near_misses=lambda ref, x: ()
) -> None:
    """The sub-checks FeedForward and SwiGLU share (8)."""
    name = chk.name
    case = say(f"parameter layout of {name}({D})", f"{name}({D}) 的参数布局")
    learner, reference = pair(case)
    chk.ok()

    inplace_case(
        chk,
        say(f"x (2, 5, {D}): input not modified in place", f"x (2, 5, {D})：输入不得被原地修改"),
        [learner],
        chk.randn(gen, 2, 5, D),
    )
    chk.ok()

    for seed, (case, shape) in enumerate(
        [
            (f"x (2, 5, {D})", (2, 5, D)),
            (say(f"x (1, 1, {D}): batch 1, T=1", f"x (1, 1, {D})：批大小 1，T=1"), (1, 1, D)),
        ]
    ):
        x = chk.randn(gen, *shape)
        module_case(
            chk,
            case,
            learner,
            reference,
            x,
            seed=seed,
            variants=lambda x=x: variants(reference, x),
            near_misses=lambda x=x: near_misses(reference, x),
        )
        chk.ok()

    other_bias = not _default_bias(name)
    for seed, kwargs in enumerate(
        [{"d_hidden": 24}, {"d_hidden": 24, "bias": other_bias}], start=2
    ):
        call = describe_call(type(reference), (D,), kwargs)
        case = say(f"x (2, 5, {D}), {call}", f"x (2, 5, {D})，{call}")
        learner2, reference2 = pair(case, **kwargs)
        x = chk.randn(gen, 2, 5, D)
        module_case(
            chk,
            case,
            learner2,
            reference2,
            x,
            seed=seed,
            variants=lambda reference2=reference2, x=x: variants(reference2, x),
        )
        chk.ok()

    case = say(
        f"x (2, 5, {D}), dropout={P_DROP}, eval mode: dropout must do nothing",
        f"x (2, 5, {D})，dropout={P_DROP}，评估模式：dropout 必须不起作用",
    )
    learner, reference = pair(case, dropout=P_DROP)
    x = chk.randn(gen, 2, 5, D)
    eval_dropout_case(
        chk,
        case,
        learner,
        reference,
        x,
        variants(reference, x),
        calling=say("calling your module", "调用你的模块"),
    )
    chk.ok()

    case = say(
        f"x (2, 5, {D}), dropout={P_DROP}, train mode: dropout acts on the output",
        f"x (2, 5, {D})，dropout={P_DROP}，训练模式：dropout 作用在输出上",
    )
    _dropout_on_output_case(chk, case, learner, x, first_layer)
    chk.ok()


def _default_bias(name: str) -> bool:
    return name != "SwiGLU"


def _dropout_on_output_case(chk: Checker, case: str, learner, x, first_layer: str) -> None:
    """In train mode each output element must be 0 or eval_output / (1 - p).

    That holds for dropout on the output whatever random mask was drawn, so the
    check needs no shared random stream with the learner's code.
    """
    with torch.no_grad():
        out_eval = learner.eval()(x)
        out_train = chk.call(
            case,
            say("calling your module in train mode", "在训练模式下调用你的模块"),
            learner.train(),
            x,
        )
        learner.eval()
    if not isinstance(out_train, torch.Tensor) or out_train.shape != out_eval.shape:
        chk.fail(
            case,
            say(
                "the train-mode output has a different shape from the eval-mode output",
                "训练模式输出的形状与评估模式输出的形状不同",
            ),
        )
    never = mistake(
        "dropout is never applied (the dropout argument is ignored, or F.dropout gets "
        "training=False)",
        "dropout 从未生效（忽略了 dropout 参数，或给 F.dropout 传了 training=False）",
    )
    dropout_acts(chk, case, out_train, out_eval, P_DROP, never)
    dropped = out_train == 0
    scaled = torch.where(dropped, torch.zeros_like(out_eval), out_eval / (1 - P_DROP))
    chk.compare(
        case,
        say("train-mode output", "训练模式下的输出"),
        out_train,
        scaled,
        variants=[
            (
                mistake(
                    f"dropout acts somewhere other than the output, e.g. on the "
                    f"hidden activations (after {first_layer})",
                    f"dropout 作用在了输出以外的地方，例如隐藏层的激活（{first_layer} 之后）",
                ),
                lambda: out_train,
            )
        ],
        hint=say(
            "apply dropout once, to the output of the last linear layer",
            "只做一次 dropout，作用在最后一个线性层的输出上",
        ),
    )


# ---------------------------------------------------------------------------------------------
# SwiGLU


def check_swiglu_hidden_dim(fn) -> None:
    """Check LLaMA's SwiGLU width rule against ``tfcourse.swiglu_hidden_dim``.

    Interface: ``fn(d_model) -> int``: ``2/3 * 4 * d_model`` (truncated to an int),
    rounded *up* to a multiple of 256. ``fn(4096) == 11008`` (LLaMA-7B).

    Sub-checks (6): d_model = 64, 128, 512, 768, 4096, 5120 (in grading, 128, 512 and 768
    become widths drawn for the learner: ``cases.case_int``).
    """
    with Checker("swiglu_hidden_dim") as chk:
        drawn = [
            case_int(seed, public, 65, 4095) for seed, public in ((1, 128), (2, 512), (3, 768))
        ]
        for d_model in (64, *drawn, 4096, 5120):
            case = f"d_model={d_model}"
            call = describe_call(fn, (d_model,))
            got = chk.call(case, say(f"calling your {call}", f"调用你的 {call}"), fn, d_model)
            want = reference_mlp.swiglu_hidden_dim(d_model)
            if isinstance(got, torch.Tensor) and got.numel() == 1 and not got.is_floating_point():
                got = got.item()
            if isinstance(got, bool) or not isinstance(got, numbers.Integral):
                chk.fail(
                    case,
                    say(
                        f"returned {got!r} ({type(got).__name__}), expected the int {want}",
                        f"返回了 {got!r}（{type(got).__name__}），应为 int {want}",
                    ),
                    hint=say(
                        "use integer arithmetic (//) or int(...)", "用整数运算（//）或 int(...)"
                    ),
                )
            if got != want:
                chk.fail(
                    case,
                    say(f"returned {got}, expected {want}", f"返回了 {got}，应为 {want}"),
                    looks_like=_width_diagnosis(d_model, got),
                )
            chk.ok()


def _round_up(n: int, multiple: int = 256) -> int:
    return multiple * ((n + multiple - 1) // multiple)


def _width_diagnosis(d_model: int, got: int) -> str | None:
    eight_thirds = int(8 * d_model / 3)
    table = [
        (
            say(
                "2/3 * d_model: the width is 2/3 of the GELU MLP's 4 * d_model, i.e. "
                "8 * d_model / 3",
                "算成了 2/3 * d_model：宽度应是 GELU MLP 宽度 4 * d_model 的 "
                "2/3，即 8 * d_model / 3",
            ),
            (int(2 * d_model / 3), _round_up(int(2 * d_model / 3))),
        ),
        (
            say(
                "8 * d_model / 3 without rounding up to a multiple of 256",
                "8 * d_model / 3 没有向上取整到 256 的倍数",
            ),
            (eight_thirds,),
        ),
        (
            say(
                "rounded down instead of up to a multiple of 256",
                "向下取整到了 256 的倍数，应向上取整",
            ),
            (256 * (eight_thirds // 256),),
        ),
        (
            say(
                "rounded to the nearest multiple of 256 instead of up",
                "取整到了最接近的 256 的倍数，应向上取整",
            ),
            (256 * round(eight_thirds / 256),),
        ),
        (
            say("4 * d_model (the GELU MLP's width)", "用了 4 * d_model（GELU MLP 的宽度）"),
            (4 * d_model,),
        ),
    ]
    for description, values in table:
        if got in values:
            return description
    return None


def _swiglu_variants(ref, x):
    gate, up, down = ref.gate_proj, ref.up_proj, ref.down_proj
    return [
        (
            mistake(
                "SiLU is applied to up_proj instead of gate_proj (gate and up swapped)",
                "SiLU 作用在了 up_proj 上，而不是 gate_proj（gate 和 up 弄反了）",
            ),
            lambda: down(gate(x) * F.silu(up(x))),
        ),
        (
            mistake("GELU instead of SiLU", "用了 GELU，而不是 SiLU"),
            lambda: down(F.gelu(gate(x)) * up(x)),
        ),
        (
            mistake(
                "a sigmoid gate (GLU) instead of SiLU", "用了 sigmoid 门控（GLU），而不是 SiLU"
            ),
            lambda: down(torch.sigmoid(gate(x)) * up(x)),
        ),
        (
            mistake("ReLU instead of SiLU", "用了 ReLU，而不是 SiLU"),
            lambda: down(F.relu(gate(x)) * up(x)),
        ),
        (
            mistake(
                "no gate: down_proj(silu(gate_proj(x))) without the up_proj product",
                "没有门控：只算了 down_proj(silu(gate_proj(x)))，缺少与 up_proj 的乘积",
            ),
            lambda: down(F.silu(gate(x))),
        ),
        (
            mistake(
                "SiLU is applied to the product: silu(gate_proj(x) * up_proj(x))",
                "SiLU 作用在了乘积上：silu(gate_proj(x) * up_proj(x))",
            ),
            lambda: down(F.silu(gate(x) * up(x))),
        ),
        (
            mistake("the branches are added instead of multiplied", "两个分支相加了，而不是相乘"),
            lambda: down(F.silu(gate(x)) + up(x)),
        ),
    ]


def _swiglu_width(default_width):
    def diagnose(name, got, want):
        width = got[1] if name.startswith("down_proj") else got[0]
        if not default_width:
            return _d_hidden_ignored(width)
        want = reference_mlp.swiglu_hidden_dim(D)
        return _width_diagnosis(D, width) or say(
            f"the default hidden width is {width}; it should be swiglu_hidden_dim(d_model) = "
            f"{want}",
            f"默认的隐藏层宽度是 {width}；应为 swiglu_hidden_dim(d_model) = {want}",
        )

    return diagnose


def check_swiglu(cls) -> None:
    """Check a SwiGLU MLP class against ``tfcourse.SwiGLU``.

    Interface: ``cls(d_model, d_hidden=None, *, bias=False, dropout=0.0)``, an
    ``nn.Module`` with ``gate_proj``, ``up_proj`` (``Linear(d_model, d_hidden)``) and
    ``down_proj`` (``Linear(d_hidden, d_model)``), Hugging Face LLaMA names; no biases
    unless ``bias=True``; ``d_hidden`` defaults to ``swiglu_hidden_dim(d_model)``::

        y = dropout(down_proj(silu(gate_proj(x)) * up_proj(x)))     # (B, T, D) -> (B, T, D)

    Sub-checks (8): parameter layout with the default width; input not modified in
    place; (2, 5, 16) output and gradients; batch 1, T=1; d_hidden=24; bias=True;
    dropout=0.5 in eval mode (no effect); dropout=0.5 in train mode (on the output).
    """
    with Checker("SwiGLU") as chk:
        gen = chk.generator(5)

        def pair(case, **kwargs):
            learner = build(chk, case, cls, D, **kwargs).eval()
            reference = randomize_(reference_mlp.SwiGLU(D, **kwargs), gen)
            reference = reference.to(chk.device, chk.dtype).eval()
            load_reference(
                chk,
                case,
                learner,
                reference,
                bias=kwargs.get("bias", False),
                shape_diagnosis=_swiglu_width("d_hidden" not in kwargs),
            )
            return learner, reference

        _check_mlp(chk, pair, gen, _swiglu_variants, "gate_proj/up_proj")
