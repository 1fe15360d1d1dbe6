"""What every check shares: one runner, reference weights, seeded inputs, comparisons.

A check builds the reference, gives it random (non-trivial) weights, copies them
into the learner's module through the documented parameter names with
``load_state_dict(strict=True)``, runs both on the same seeded inputs and
compares outputs and gradients with ``torch.testing.assert_close``'s rule.

On success a check prints exactly one line, ``"<Name>: n/n checks passed"`` (in Chinese
``"<Name>：n/n 项检查通过"``).
On failure it raises ``AssertionError``; the first line names the check, the
case (shapes, settings), what differed and by how much, and, when one of the
check's known-wrong variants reproduces the learner's output, what the mistake
looks like. Further lines give a hint.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

import torch
from torch import nn

from ..language import say
from ..runtime import default_device, fmt

# Re-exported: checks import these from here.
from ._compare import close, max_abs_diff, scaled_error, tolerances  # noqa: F401
from ._environment import _disable_tf32, _restore_rng, _restore_tf32, _save_rng
from ._torch_errors import likely_cause
from .cases import case_seed

# A known mistake: a short description and a thunk computing what it would output.
Variant = tuple[str, Callable[[], object]]


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def describe_call(target, args=(), kwargs=None) -> str:
    """``"Name(16, 4, max_seq_len=8)"``: how the check called the learner's code."""
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in (kwargs or {}).items()]
    return f"{getattr(target, '__name__', type(target).__name__)}({', '.join(parts)})"


class Checker:
    """Counts the sub-checks of one ``check_*`` call and formats its failures.

    Use it as a context manager. Inside, gradients are enabled and TF32 matmuls
    are off, and the caller's random-number state is saved and restored on exit,
    so running a check does not change the notebook's next random draw. On a
    clean exit it prints ``"<Name>: n/n checks passed"``.
    """

    def __init__(self, name: str):
        self.name = name
        self.passed = 0
        self.device = default_device()
        self.dtype = torch.get_default_dtype()
        self.rtol, self.atol = tolerances(self.dtype, self.device)

    # -- context ---------------------------------------------------------------------------
    def __enter__(self) -> "Checker":
        self._rng = _save_rng(self.device)
        self._precision = _disable_tf32()
        self._grad_enabled = torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        torch.set_grad_enabled(self._grad_enabled)
        _restore_tf32(self._precision)
        _restore_rng(self._rng)
        if exc_type is None:
            n = self.passed
            print(say(f"{self.name}: {n}/{n} checks passed", f"{self.name}：{n}/{n} 项检查通过"))
        return False

    def ok(self) -> None:
        """Record one passed sub-check."""
        self.passed += 1

    # -- failing -----------------------------------------------------------------------------
    def fail(self, case: str, problem: str, *, looks_like: str | None = None,
             hint: str | None = None, diff: float | None = None, cause=None):
        """Raise the ``AssertionError`` of a failed sub-check.

        The first line carries everything a report needs: check, case, problem,
        max |diff| and the diagnosis. ``hint`` (the fix, in general terms) goes
        on the next line.
        """
        line = say(f"{self.name} [{case}]: {problem}", f"{self.name} [{case}]：{problem}")
        if diff is not None:
            line += (say(f" (max |diff| = {fmt(diff)})", f"（max |diff| = {fmt(diff)}）")
                     if math.isfinite(diff) else
                     say(" (max |diff| = nan: NaN where the reference has numbers)",
                         "（max |diff| = nan：参考实现是正常数值的位置出现了 NaN）"))
        if looks_like:
            line += say(f"; looks like: {looks_like}", f"；很可能的原因：{looks_like}")
        lines = [line]
        if hint:
            lines.append(say(f"  hint: {hint}", f"  提示：{hint}"))
        lines.append(say(f"  ({self.passed} earlier check(s) of {self.name} passed)",
                         f"  （{self.name} 此前已有 {self.passed} 项检查通过）") if self.passed
                     else say(f"  (the first check of {self.name})",
                              f"  （这是 {self.name} 的第一项检查）"))
        raise AssertionError("\n".join(lines)) from cause

    def call(self, case: str, what: str, fn: Callable, *args, **kwargs):
        """Run learner code; turn its exceptions (except NotImplementedError) into a diagnosis."""
        try:
            return fn(*args, **kwargs)
        except NotImplementedError:
            raise                       # an unfinished exercise says so itself
        except Exception as error:      # noqa: BLE001 - any learner error becomes a report
            self.fail(case, say(f"{what} raised {type(error).__name__}: {first_line(error)}",
                                f"{what}时抛出了 {type(error).__name__}：{first_line(error)}"),
                      looks_like=likely_cause(str(error)), cause=error)

    # -- comparing ---------------------------------------------------------------------------
    def compare(self, case: str, what: str, got, expected: torch.Tensor, *,
                variants: Iterable[Variant] = (), hint: str | None = None,
                near_misses: Iterable[Variant] = ()) -> None:
        """Fail unless ``got`` matches ``expected`` (shape, dtype, device, values).

        On a mismatch, each known-wrong variant is computed and the closest one that
        reproduces ``got`` is named in the message (see ``diagnose``). ``near_misses``
        are mistakes that may hide inside a device's tolerance (tanh-GELU for GELU):
        ``got`` also fails when it is ten times closer to one of them than to the reference.
        """
        if not isinstance(got, torch.Tensor):
            shape = tuple(expected.shape)
            self.fail(case, say(f"{what} is a {type(got).__name__}, expected a tensor of shape "
                                f"{shape}",
                                f"{what}是 {type(got).__name__} 类型，应为形状 {shape} 的张量"),
                      hint=hint)
        if got.shape != expected.shape:
            got_shape, shape = tuple(got.shape), tuple(expected.shape)
            self.fail(case, say(f"{what} has shape {got_shape}, expected {shape}",
                                f"{what}的形状是 {got_shape}，应为 {shape}"),
                      looks_like=self.diagnose(got, variants), hint=hint)
        if got.dtype != expected.dtype:
            self.fail(case, say(f"{what} has dtype {got.dtype}, expected {expected.dtype}",
                                f"{what}的 dtype 是 {got.dtype}，应为 {expected.dtype}"),
                      hint=say("keep the input's dtype: build new tensors with dtype=x.dtype",
                               "保持输入的 dtype：新建张量时传入 dtype=x.dtype"))
        if got.device != expected.device:
            self.fail(case, say(f"{what} is on {got.device}, expected {expected.device}",
                                f"{what}在 {got.device} 上，应在 {expected.device} 上"),
                      hint=say("build new tensors on the input's device (device=x.device), or "
                               "register constant tensors as buffers so .to(device) moves them",
                               "在输入所在的设备上新建张量（device=x.device），或把常量张量注册"
                               "为缓冲区（register_buffer），让 .to(device) 一并移动它们"))
        got, expected = got.detach(), expected.detach()
        if close(got, expected, self.rtol, self.atol):
            self._near_miss(case, what, got, expected, near_misses)
            return
        looks = self.diagnose(got, variants)
        if looks is None and torch.isnan(got).any() and not torch.isnan(expected).any():
            looks = say("NaN in the output: e.g. a fully masked row, sqrt of a negative, or 0/0",
                        "输出中有 NaN：例如某一行被完全屏蔽、对负数开平方，或 0/0")
        if looks is None and variants:
            hint = hint or say("no known mistake reproduces this output; compare your code with "
                               "the formula in the check's docstring, one step at a time",
                               "没有哪个已知错误能复现这个输出；请对照该检查 docstring 中的公式，"
                               "一步一步核对你的代码")
        self.fail(case, say(f"{what} differs from the reference", f"{what}与参考实现不一致"),
                  diff=max_abs_diff(got, expected), looks_like=looks, hint=hint)

    def _near_miss(self, case, what, got, expected, near_misses) -> None:
        for description, compute in near_misses:
            with torch.no_grad():
                candidate = compute().detach()
            gap = max_abs_diff(expected, candidate)
            if gap > 0 and max_abs_diff(got, candidate) < 0.1 * gap:
                self.fail(case, say(f"{what} is within tolerance of the reference but ten "
                                    f"times closer to a known mistake",
                                    f"{what}虽在参考实现的容差之内，但离某个已知错误还要近十倍"),
                          diff=max_abs_diff(got, expected), looks_like=description)

    def diagnose(self, got: torch.Tensor, variants: Iterable[Variant]) -> str | None:
        """Description of the variant closest to ``got`` among those that reproduce it, else None.

        A variant reproduces ``got`` within ten times the comparison tolerance. Several
        can (on an accelerator's looser tolerance a wrong default eps is also within reach
        of "eps outside the square root"), so each one's distance is measured in units of
        that tolerance and the smallest wins; on a tie the earlier in the table wins.
        """
        return self._closest(got, variants)[0]

    def _closest(self, got: torch.Tensor, variants: Iterable[Variant]) -> tuple[str | None, float]:
        """``diagnose``'s search: ``(variant, distance in 10x tolerances)``, or ``(None, inf)``."""
        got = got.detach()
        best, best_error = None, math.inf
        for description, compute in variants:
            try:
                with torch.no_grad():
                    candidate = compute()
            except Exception:           # noqa: BLE001 - a variant that cannot run cannot match
                continue
            if not (isinstance(candidate, torch.Tensor) and candidate.shape == got.shape):
                continue
            error = scaled_error(got, candidate.to(got.dtype), 10 * self.rtol, 10 * self.atol)
            if error <= 1.0 and error < best_error:
                best, best_error = description, error
                if error == 0.0:        # exact: nothing can be closer
                    break
        return best, best_error

    def output_mistake(self, got: torch.Tensor, expected: torch.Tensor,
                       variants: Iterable[Variant]) -> str | None:
        """The known mistake closest to ``got``, an output within tolerance, if strictly
        closer than the reference: for a differing gradient, as some mistakes (eps outside
        the square root, on some inputs) move the output less than the tolerance and the
        gradient more. A correct output, the reference up to rounding, gets no name."""
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
            return None
        description, error = self._closest(got, variants)
        reference_error = scaled_error(got.detach(), expected.detach().to(got.dtype),
                                       10 * self.rtol, 10 * self.atol)
        return description if error < reference_error else None

    def compare_grads(self, case: str, got: Mapping[str, torch.Tensor | None],
                      expected: Mapping[str, torch.Tensor | None], *,
                      variants: Mapping[str, Iterable[Variant]] | None = None,
                      explain: Callable[[], str | None] = lambda: None) -> None:
        """Compare named gradients (input and parameters) after both backward passes.

        ``explain`` names a mistake from the output when no gradient variant reproduces
        a differing gradient (see ``output_mistake``); it runs only on a failure.
        """
        for name, want in expected.items():
            have = got.get(name)
            if want is None:
                continue
            label = _grad_label(name)
            if have is None:
                self.fail(case, say(f"{name} received no gradient", f"{label} 没有收到梯度"),
                          looks_like=say("it is not connected to the output (unused, or hidden "
                                         "from autograd by .detach(), .data or torch.no_grad())",
                                         "它与输出没有连接（没被用到，或被 .detach()、.data、"
                                         "torch.no_grad() 挡在了 autograd 之外）"))
            have, want = have.detach(), want.detach()
            if have.shape == want.shape and close(have, want, self.rtol, self.atol):
                continue
            looks = self.diagnose(have, (variants or {}).get(name, ())) if have.shape == \
                want.shape else None
            looks = looks or explain()
            self.fail(case, say(f"the gradient of {name} differs from the reference "
                                f"(the output matched)",
                                f"{label} 的梯度与参考实现不一致（输出是一致的）"),
                      diff=max_abs_diff(have, want) if have.shape == want.shape else None,
                      looks_like=looks or say(
                          "part of the computation is hidden from autograd (.detach(), .data, "
                          "torch.no_grad()) or a tensor autograd saved was changed in place",
                          "部分计算被挡在了 autograd 之外（.detach()、.data、torch.no_grad()），"
                          "或 autograd 保存的某个张量被原地修改了"))

    def unchanged(self, case: str, name: str, before: torch.Tensor, after: torch.Tensor):
        """Fail if ``after`` (a learner's input after the call) differs from ``before``."""
        if not torch.equal(before, after.detach()):
            self.fail(case, say(f"your code modified its input {name} in place",
                                f"你的代码原地修改了它的输入 {name}"),
                      diff=max_abs_diff(before, after),
                      looks_like=say("an in-place operation on the input (x += ..., x -= mean, "
                                     "x.mul_(...), x[...] = ...)",
                                     "对输入做了原地操作（x += ...、x -= mean、x.mul_(...)、"
                                     "x[...] = ...）"),
                      hint=say("write out = x + ... instead of x += ...; the caller still needs x",
                               "写成 out = x + ...，不要写 x += ...；调用方之后还要用到 x"))

    # -- tensors -----------------------------------------------------------------------------
    def generator(self, seed: int) -> torch.Generator:
        """A CPU generator for the check's ``seed``, salted inside ``grading_cases``."""
        return torch.Generator().manual_seed(case_seed(seed))

    def randn(self, gen: torch.Generator, *shape: int, scale: float = 1.0,
              offset: float = 0.0) -> torch.Tensor:
        """Seeded normal samples, drawn on the CPU (same numbers on every device)."""
        sample = torch.randn(*shape, generator=gen, dtype=torch.float64)
        # Cast on the CPU first: some devices (MPS) have no float64.
        return (sample * scale + offset).to(self.dtype).to(self.device)


# -- modules ---------------------------------------------------------------------------------

def build(chk: Checker, case: str, cls, *args, **kwargs) -> nn.Module:
    """``cls(*args, **kwargs)`` moved to the check's device and dtype, or a clear failure."""
    call = describe_call(cls, args, kwargs)
    module = chk.call(case, say(f"building your module as {call}", f"以 {call} 构建你的模块"),
                      cls, *args, **kwargs)
    if not isinstance(module, nn.Module):
        chk.fail(case, say(f"{call} returned a {type(module).__name__}, expected an nn.Module",
                           f"{call} 返回了 {type(module).__name__}，应返回 nn.Module"),
                 hint=say("subclass torch.nn.Module and call super().__init__() first",
                          "继承 torch.nn.Module，并在 __init__ 里先调用 super().__init__()"))
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
        split = (name not in learner_names and "qkv_proj." in name
                 and f"{prefix}q_proj.{leaf}" in learner_names)
        if split and tensor is not None:
            for part, chunk in zip("qkv", tensor.chunk(3, dim=0)):
                out[f"{prefix}{part}_proj.{leaf}"] = chunk
        elif split:
            for part in "qkv":
                out[f"{prefix}{part}_proj.{leaf}"] = None
        else:
            out[name] = tensor
    return out


def load_reference(chk: Checker, case: str, learner: nn.Module, reference: nn.Module, *,
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
        found = say("; ", "；").join(part for part in (
            say(f"missing from your module: {missing}", f"你的模块中缺少 {missing}")
            if missing else "",
            say(f"not expected: {extra}", f"多出了 {extra}") if extra else "") if part)
        chk.fail(case, say(f"parameter names do not match the expected layout ({found})",
                           f"参数名与要求的布局不一致（{found}）"),
                 looks_like=looks,
                 hint=say("name the submodules and parameters as the check's docstring lists them",
                          "按检查的 docstring 中列出的名字给子模块和参数命名"))
    for name, tensor in wanted.items():
        if mine[name].shape != tensor.shape:
            got, want = tuple(mine[name].shape), tuple(tensor.shape)
            looks = shape_diagnosis(name, got, want) if shape_diagnosis else None
            chk.fail(case, say(f"parameter {name} has shape {got}, expected {want}",
                               f"参数 {name} 的形状是 {got}，应为 {want}"), looks_like=looks)
    state = learner.state_dict()
    state.update(wanted)
    try:
        learner.load_state_dict(state, strict=True)
    except RuntimeError as error:
        chk.fail(case, say(f"load_state_dict(strict=True) failed: {first_line(error)}",
                           f"load_state_dict(strict=True) 失败：{first_line(error)}"), cause=error)


def _diagnose_names(missing, extra, wanted, mine, bias) -> str | None:
    if bias is False and extra and all(n.endswith("bias") for n in extra):
        return say(f"bias=False was ignored: your module has bias parameters {extra}; pass "
                   "bias=bias to nn.Linear",
                   f"忽略了 bias=False：你的模块有偏置参数 {extra}；请把 bias=bias 传给 nn.Linear")
    if not mine:
        return say("your module registers no parameters (no learnable weights, e.g. no learnable "
                   "affine): create them as nn.Parameter or nn.Linear attributes in __init__",
                   "你的模块没有注册任何参数（没有可学习的权重，例如缺少可学习的仿射变换）："
                   "请在 __init__ 中把它们创建为 nn.Parameter 或 nn.Linear 属性")
    if missing and not extra and all(n.endswith("bias") for n in missing):
        return say(f"the bias parameter(s) {missing} are missing", f"缺少偏置参数 {missing}") + (
            say(" although bias=True was asked", "，而要求的是 bias=True") if bias else "")
    if missing and len(missing) == len(extra):
        pairs = []
        for want in missing:
            same_shape = [n for n in extra if tuple(mine[n].shape) == tuple(wanted[want].shape)]
            leaf = want.rpartition(".")[2]
            for same_leaf in (lambda n: n.rpartition(".")[2] == leaf,
                              lambda n: _SYNONYMS.get(n.rpartition(".")[2]) == leaf):
                if len(same_shape) > 1:  # several fit: prefer the same leaf name, then a synonym
                    same_shape = [n for n in same_shape if same_leaf(n)] or same_shape
            if len(same_shape) != 1:
                if sorted(tuple(mine[n].shape) for n in extra) == \
                        sorted(tuple(wanted[n].shape) for n in missing):
                    return say(f"misnamed parameter(s): expected {missing}, found {extra}",
                               f"参数名写错了：应为 {missing}，实际是 {extra}")
                return None
            pairs.append(say(f"your {same_shape[0]!r} should be called {want!r}",
                             f"你的 {same_shape[0]!r} 应命名为 {want!r}"))
        return say("misnamed parameter(s): ", "参数名写错了：") + say("; ", "；").join(pairs)
    return None


# Names a learner might use for a norm's affine parameters (for the misnamed diagnosis).
_SYNONYMS = {"gamma": "weight", "g": "weight", "scale": "weight", "beta": "bias", "b": "bias",
             "shift": "bias"}


def _grad_label(name: str) -> str:
    """How a gradient's key (``"input x"``, ``"parameter fc_in.weight"``) reads in Chinese."""
    kind, _, rest = name.partition(" ")
    kinds = {"input": "输入", "parameter": "参数"}
    return say(name, f"{kinds.get(kind, kind)} {rest}")


def input_grads_and_params(module: nn.Module, inputs: Mapping[str, torch.Tensor]) -> dict:
    """``{name: grad}`` for the inputs and every parameter of ``module``."""
    grads = {f"input {name}": t.grad for name, t in inputs.items()}
    grads.update({f"parameter {name}": p.grad for name, p in parameter_names(module).items()})
    return grads


def reference_grads(reference: nn.Module, learner: nn.Module,
                    inputs: Mapping[str, torch.Tensor]) -> dict:
    """Like ``input_grads_and_params`` for the reference, renamed to the learner's layout."""
    grads = {f"input {name}": t.grad for name, t in inputs.items()}
    params = adapt_layout({n: p.grad for n, p in parameter_names(reference).items()},
                          parameter_names(learner))
    grads.update({f"parameter {name}": g for name, g in params.items()})
    return grads


def module_case(chk: Checker, case: str, learner: nn.Module, reference: nn.Module,
                x: torch.Tensor, *, variants: Callable[[], Iterable[Variant]] = lambda: (),
                call: Callable = lambda module, t: module(t), hint: str | None = None,
                seed: int = 0, near_misses: Callable[[], Iterable[Variant]] = lambda: ()
                ) -> None:
    """Compare output, input gradient and parameter gradients of ``call(module, x)``.

    The backward pass uses a seeded random upstream gradient (not ``sum()``, whose
    gradient through a normalization is zero and would hide mistakes).
    """
    x_ref = x.detach().clone().requires_grad_(True)
    x_mine = x.detach().clone().requires_grad_(True)
    expected = call(reference, x_ref)
    got = chk.call(case, say("calling your module", "调用你的模块"), call, learner, x_mine)
    chk.compare(case, say("output", "输出"), got, expected, variants=variants(), hint=hint,
                near_misses=near_misses())
    backward_case(chk, case, reference, learner, expected, got, seed=seed + 1000,
                  inputs={"x": (x_ref, x_mine)}, variants=variants)


def backward_case(chk: Checker, case: str, reference: nn.Module, learner: nn.Module,
                  expected: torch.Tensor, got: torch.Tensor, *, seed: int,
                  inputs: Mapping[str, tuple[torch.Tensor, torch.Tensor]] | None = None,
                  what: str = "output",
                  variants: Callable[[], Iterable[Variant]] = lambda: ()) -> None:
    """Backpropagate one seeded upstream gradient through both outputs and compare gradients.

    ``inputs`` maps a name to the (reference, learner) leaf tensors whose gradients are
    compared, besides every parameter's. ``variants`` (the output's known mistakes) name
    the mistake when a gradient differs although the output matched.
    """
    inputs = inputs or {}
    upstream = chk.randn(chk.generator(seed), *expected.shape)
    reference.zero_grad(set_to_none=True)
    learner.zero_grad(set_to_none=True)
    (expected * upstream).sum().backward()
    shown = {"output": "输出"}.get(what, f" {what} ")     # the Chinese of what is named
    chk.call(case, say(f"backward through your {what}", f"对你的{shown}做反向传播"),
             lambda: (got * upstream).sum().backward())
    chk.compare_grads(case,
                      input_grads_and_params(learner, {n: m for n, (_, m) in inputs.items()}),
                      reference_grads(reference, learner, {n: r for n, (r, _) in inputs.items()}),
                      explain=lambda: chk.output_mistake(got, expected, variants()))


def inplace_case(chk: Checker, case: str, modules: Iterable[nn.Module], x: torch.Tensor) -> None:
    """Fail if any of ``modules`` modifies its input during a forward pass."""
    for module in modules:
        x_seen = x.clone()
        with torch.no_grad():
            chk.call(case, say("calling your module", "调用你的模块"), module, x_seen)
        chk.unchanged(case, "x", x, x_seen)
