"""The learner's module in a check: building it, and loading the reference's weights into it.

``build`` constructs the learner's class on the check's device and dtype, ``randomize_`` gives
the reference non-trivial weights, and ``load_reference`` copies them into the learner's
module through the documented parameter names (``load_state_dict(strict=True)``), naming
what is missing, unexpected or misnamed when the layouts differ.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import torch
from torch import nn

from ..language import say
from ._harness import Checker, describe_call, first_line


def build(chk: Checker, case: str, cls, *args, **kwargs) -> nn.Module:
    """``cls(*args, **kwargs)`` moved to the check's device and dtype, or a clear failure."""
    call = describe_call(cls, args, kwargs)
    module = chk.call(
        case,
        say(f"building your module as {call}", f"以 {call} 构建你的模块"),
        cls,
        *args,
        **kwargs,
    )
    if not isinstance(module, nn.Module):
        chk.fail(
            case,
            say(
                f"{call} returned a {type(module).__name__}, expected an nn.Module",
                f"{call} 返回了 {type(module).__name__}，应返回 nn.Module",
            ),
            hint=say(
                "subclass torch.nn.Module and call super().__init__() first",
                "继承 torch.nn.Module，并在 __init__ 里先调用 super().__init__()",
            ),
        )
    return module.to(device=chk.device, dtype=chk.dtype)


def randomize_(module: nn.Module, gen: torch.Generator) -> nn.Module:
    """Give every parameter non-trivial values (in place) so no mistake hides behind init.

    Vectors named ``*bias`` get N(0, 0.5^2); other vectors (norm scales) 1 + N(0, 0.5^2);
    matrices N(0, 1/fan_in), which keeps activations of order one.
    """
    with torch.no_grad():
        for name, param in module.named_parameters():
            sample = torch.randn(param.shape, generator=gen, dtype=torch.float64)
            if param.dim() == 1:
                sample = 0.5 * sample if name.endswith("bias") else 1.0 + 0.5 * sample
            else:
                sample = sample / math.sqrt(param.shape[-1])
            param.copy_(sample.to(param.dtype).to(param.device))
    return module


def parameter_names(module: nn.Module) -> dict[str, torch.Tensor]:
    """``{state_dict name: parameter}``, tied parameters listed under every name."""
    return dict(module.named_parameters(remove_duplicate=False))


def adapt_layout(tensors: Mapping[str, torch.Tensor], learner_names) -> dict[str, torch.Tensor]:
    """Rename reference tensors to the learner's layout where the checks allow a choice.

    The one choice allowed: a fused ``P.qkv_proj`` (rows q, k, v) may be written as
    three projections ``P.q_proj``, ``P.k_proj``, ``P.v_proj``.
    """
    learner_names = set(learner_names)
    out = {}
    for name, tensor in tensors.items():
        prefix, _, leaf = name.rpartition("qkv_proj.")
        split = (
            name not in learner_names
            and "qkv_proj." in name
            and f"{prefix}q_proj.{leaf}" in learner_names
        )
        if split and tensor is not None:
            for part, chunk in zip("qkv", tensor.chunk(3, dim=0), strict=True):
                out[f"{prefix}{part}_proj.{leaf}"] = chunk
        elif split:
            for part in "qkv":
                out[f"{prefix}{part}_proj.{leaf}"] = None
        else:
            out[name] = tensor
    return out


def load_reference(
    chk: Checker,
    case: str,
    learner: nn.Module,
    reference: nn.Module,
    *,
    bias: bool | None = None,
    shape_diagnosis: Callable[[str, tuple, tuple], str | None] | None = None,
) -> None:
    """Copy the reference's parameters into ``learner`` with ``load_state_dict(strict=True)``.

    Parameters are matched by name (see ``adapt_layout``). Buffers the learner keeps
    and the reference does not (e.g. a persistent causal-mask buffer) keep the
    learner's values. Fails naming missing, unexpected or wrongly shaped parameters.
    """
    ref_params = {name: p.detach() for name, p in parameter_names(reference).items()}
    mine = parameter_names(learner)
    wanted = adapt_layout(ref_params, mine)
    missing = sorted(set(wanted) - set(mine))
    extra = sorted(set(mine) - set(wanted))
    if missing or extra:
        looks = _diagnose_names(missing, extra, wanted, mine, bias)
        found = "\n  ".join(
            part
            for part in (
                say(f"missing from your module: {missing}", f"你的模块中缺少 {missing}")
                if missing
                else "",
                say(f"not expected: {extra}", f"多出了 {extra}") if extra else "",
            )
            if part
        )
        chk.fail(
            case,
            say(
                "parameter names do not match the expected layout",
                "参数名与要求的布局不一致",
            ),
            detail=found,  # the names on lines of their own: the first line stays short
            looks_like=looks,
            hint=say(
                "name the submodules and parameters as the check's docstring lists them",
                "按检查的 docstring 中列出的名字给子模块和参数命名",
            ),
        )
    for name, tensor in wanted.items():
        if mine[name].shape != tensor.shape:
            got, want = tuple(mine[name].shape), tuple(tensor.shape)
            looks = shape_diagnosis(name, got, want) if shape_diagnosis else None
            chk.fail(
                case,
                say(
                    f"parameter {name} has shape {got}, expected {want}",
                    f"参数 {name} 的形状是 {got}，应为 {want}",
                ),
                looks_like=looks,
            )
    state = learner.state_dict()
    state.update(wanted)
    try:
        learner.load_state_dict(state, strict=True)
    except RuntimeError as error:
        chk.fail(
            case,
            say(
                f"load_state_dict(strict=True) failed: {first_line(error)}",
                f"load_state_dict(strict=True) 失败：{first_line(error)}",
            ),
            cause=error,
        )


def _diagnose_names(missing, extra, wanted, mine, bias) -> str | None:
    if bias is False and extra and all(n.endswith("bias") for n in extra):
        return say(
            f"bias=False was ignored: your module has bias parameters {extra}; pass "
            "bias=bias to nn.Linear",
            f"忽略了 bias=False：你的模块有偏置参数 {extra}；请把 bias=bias 传给 nn.Linear",
        )
    if not mine:
        return say(
            "your module registers no parameters (no learnable weights, e.g. no learnable "
            "affine): create them as nn.Parameter or nn.Linear attributes in __init__",
            "你的模块没有注册任何参数（没有可学习的权重，例如缺少可学习的仿射变换）："
            "请在 __init__ 中把它们创建为 nn.Parameter 或 nn.Linear 属性",
        )
    if missing and not extra and all(n.endswith("bias") for n in missing):
        return say(f"the bias parameter(s) {missing} are missing", f"缺少偏置参数 {missing}") + (
            say(" although bias=True was asked", "，而要求的是 bias=True") if bias else ""
        )
    if missing and len(missing) == len(extra):
        pairs = []
        for want in missing:
            same_shape = [n for n in extra if tuple(mine[n].shape) == tuple(wanted[want].shape)]
            leaf = want.rpartition(".")[2]
            for same_leaf in (
                lambda n, leaf=leaf: n.rpartition(".")[2] == leaf,
                lambda n, leaf=leaf: _SYNONYMS.get(n.rpartition(".")[2]) == leaf,
            ):
                if len(same_shape) > 1:  # several fit: prefer the same leaf name, then a synonym
                    same_shape = [n for n in same_shape if same_leaf(n)] or same_shape
            if len(same_shape) != 1:
                if sorted(tuple(mine[n].shape) for n in extra) == sorted(
                    tuple(wanted[n].shape) for n in missing
                ):
                    return say(
                        f"misnamed parameter(s): expected {missing}, found {extra}",
                        f"参数名写错了：应为 {missing}，实际是 {extra}",
                    )
                return None
            pairs.append(
                say(
                    f"your {same_shape[0]!r} should be called {want!r}",
                    f"你的 {same_shape[0]!r} 应命名为 {want!r}",
                )
            )
        return say("misnamed parameter(s): ", "参数名写错了：") + say("; ", "；").join(pairs)
    return None


# Names a learner might use for a norm's affine parameters (for the misnamed diagnosis).
_SYNONYMS = {
    "gamma": "weight",
    "g": "weight",
    "scale": "weight",
    "beta": "bias",
    "b": "bias",
    "shift": "bias",
}
