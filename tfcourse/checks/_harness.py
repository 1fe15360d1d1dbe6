"""The Checker: one check's runner, its comparisons and the message of a failed sub-check.

A check builds the reference, gives it random (non-trivial) weights, copies them
into the learner's module through the documented parameter names with
``load_state_dict(strict=True)`` (``_parameters``), runs both on the same seeded inputs and
compares outputs and gradients with ``torch.testing.assert_close``'s rule (the sub-checks
modules share are in ``_module_cases``).

On success a check prints exactly one line, ``"<Name>: n/n checks passed"`` (in Chinese
``"<Name>：n/n 项检查通过"``).
On failure it raises ``AssertionError`` whose message reads on one screen::

    causal_mask: mask differs from the reference (check 1 of 4)
      case: causal_mask(5)
      5 of 25 entries differ; first at [0, 0]: expected True, got False
      looks like: the diagonal is excluded (tril(diagonal=-1)): ...
      hint: ...

a short first line (the check, what differed, which of its sub-checks), then the case
(shapes, settings), by how much it differed or what the learner's code raised, the
mistake when one of the check's known-wrong variants reproduces the learner's output, and
a hint. Each line after the first is there only when there is something to say.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

import torch

from ..language import say
from ..runtime import default_device, fmt

# Re-exported: checks import these from here.
from ._compare import close, differing_entries, max_abs_diff, scaled_error, tolerances
from ._environment import _disable_tf32, _restore_rng, _restore_tf32, _save_rng
from ._torch_errors import likely_cause
from .cases import case_seed

# A known mistake: a short description and a thunk computing what it would output.
Variant = tuple[str, Callable[[], object]]

# How many sub-checks each check has, by the name it prints: a failure says which one it
# was, "check 3 of 6". The same number a passing check prints ("LayerNorm: 6/6 checks
# passed"), which grading's salted cases do not change; tests/test_checks.py holds this
# table to the checks' names and to the solutions' stored pass lines.
SUB_CHECKS = {
    "FeedForward": 8,
    "GPT": 9,
    "LayerNorm": 6,
    "LlamaBlock": 8,
    "MultiHeadAttention": 7,
    "RMSNorm": 6,
    "RotaryAttention": 8,
    "SwiGLU": 8,
    "TransformerBlock": 8,
    "apply_rotary": 5,
    "attend_with_cache": 5,
    "bias_savings": 4,
    "bpe_decode": 6,
    "bpe_encode": 8,
    "causal_mask": 4,
    "configure_optimizer": 4,
    "encode_with_special": 6,
    "estimate_loss": 3,
    "first_head_weights": 5,
    "fuse_qkv": 4,
    "generate": 5,
    "get_batch": 3,
    "gpt2_small_params": 6,
    "grad_norm_probe": 4,
    "layernorm_backward": 5,
    "lr_at": 3,
    "merge_pair": 6,
    "most_frequent_pair": 7,
    "permute_qk_rows": 4,
    "pre_split": 7,
    "repeat_kv": 7,
    "rotary_cos_sin": 4,
    "scaled_dot_product_attention": 7,
    "swiglu_hidden_dim": 6,
    "train_loop": 4,
}


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def describe_call(target, args=(), kwargs=None) -> str:
    """``"Name(16, 4, max_seq_len=8)"``: how the check called the learner's code."""
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in (kwargs or {}).items()]
    return f"{getattr(target, '__name__', type(target).__name__)}({', '.join(parts)})"


def mistake(english: str, chinese: str) -> str:
    """A known mistake, as a check names it (``looks like: ...``), in the reader's language.

    ``say`` with a purpose: every diagnosis is written with ``mistake``, so that
    ``tests/test_diagnoses.py`` can find each one and require a wrong implementation in the
    test suite that makes a check name it.
    """
    return say(english, chinese)


class Mistakes(Mapping[str, str]):
    """A check's known mistakes by key, ``{key: mistake(...)}`` as ``table()`` returns it,
    each text made when it is read: in the reader's language of that moment (a table built
    at import would keep the language the package was imported in)."""

    def __init__(self, table: Callable[[], dict[str, str]]):
        self._table = table

    def __getitem__(self, key: str) -> str:
        return self._table()[key]

    def __iter__(self):
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


class CheckArgumentError(TypeError):
    """A check was handed something it cannot check (``check_rotary(42)``): the learner's
    doing, reported as such by the grader (any other error raised by a check is the
    course's bug)."""


def require_function(check: str, fn) -> None:
    """Raise ``CheckArgumentError`` unless ``fn``, the learner's answer to ``check``, is a
    function (or another callable)."""
    if not callable(fn):
        raise CheckArgumentError(
            say(
                f"{check} expects a function, got {type(fn).__name__}",
                f"{check} 需要传入一个函数，实际得到 {type(fn).__name__}",
            )
        )


class Checker:
    """Counts the sub-checks of one ``check_*`` call and formats its failures.

    Use it as a context manager. Inside, gradients are enabled and TF32 matmuls
    are off, and the caller's random-number state is saved and restored on exit,
    so running a check does not change the notebook's next random draw. On a
    clean exit it prints ``"<Name>: n/n checks passed"``.
    """

    def __init__(self, name: str):
        self.name = name
        self.passed = 0  # sub-checks passed so far: a failure is check passed + 1
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
    def fail(
        self,
        case: str,
        problem: str,
        *,
        looks_like: str | None = None,
        hint: str | None = None,
        diff: float | None = None,
        detail: str | None = None,
        cause=None,
    ):
        """Raise the ``AssertionError`` of a failed sub-check.

        The first line is short: the check, ``problem`` (what differed) and which sub-check
        it was. Then, each on its own line and only when given: the ``case`` (shapes,
        settings), the ``detail`` (how it differed, what was raised) or ``diff`` (a largest
        absolute difference, from an exact comparison), ``looks like: <looks_like>`` (the
        mistake) and ``hint: <hint>`` (the fix, in general terms).
        """
        position = self._position()
        lines = [
            say(f"{self.name}: {problem} ({position})", f"{self.name}：{problem}（{position}）")
        ]
        if case:
            lines.append(say(f"  case: {case}", f"  用例：{case}"))
        if detail:
            lines.append(f"  {detail}")
        if diff is not None:
            lines.append(f"  {_max_diff(diff)}")
        if looks_like:
            lines.append(say(f"  looks like: {looks_like}", f"  可能的原因：{looks_like}"))
        if hint:
            lines.append(say(f"  hint: {hint}", f"  提示：{hint}"))
        raise AssertionError("\n".join(lines)) from cause

    def _position(self) -> str:
        """``"check 3 of 6"``: the failing sub-check (those before it passed) among the
        check's ``SUB_CHECKS``; ``"check 3"`` for a check the table does not know."""
        k, n = self.passed + 1, SUB_CHECKS.get(self.name)
        if n is None or k > n:
            return say(f"check {k}", f"第 {k} 项检查")
        return say(f"check {k} of {n}", f"第 {k} 项检查，共 {n} 项")

    def difference(self, got: torch.Tensor, expected: torch.Tensor) -> str:
        """How ``got`` differs from ``expected`` (same shape, same dtype), in one line.

        Exact results (bool, integer): how many entries differ and the first that does,
        ``"3 of 16 entries differ; first at [0, 1]: expected False, got True"``. Floating
        ones: the largest absolute difference and the tolerance of ``close``.
        """
        if got.is_floating_point() or expected.is_floating_point() or got.is_complex():
            diff = max_abs_diff(got, expected)
            if not math.isfinite(diff):
                return _max_diff(diff)
            rtol, atol = fmt(self.rtol), fmt(self.atol)
            return say(
                f"max |diff| = {fmt(diff)} (tolerance: {atol} + {rtol} * |reference|)",
                f"max |diff| = {fmt(diff)}（容差：{atol} + {rtol} * |参考值|）",
            )
        count, first = differing_entries(got, expected)
        if first is None:  # equal after all: close() said they differ, so not reached
            return say("no entry differs", "没有元素不同")
        want, have = expected[first].item(), got[first].item()
        if not first:  # a 0-d tensor
            return say(f"expected {want}, got {have}", f"应为 {want}，实际为 {have}")
        where, total = list(first), got.numel()
        differ = "differs" if count == 1 else "differ"
        return say(
            f"{count} of {total} entries {differ}; first at {where}: expected {want}, got {have}",
            f"{total} 个元素中有 {count} 个不同；第一个在 {where}：应为 {want}，实际为 {have}",
        )

    def call(
        self,
        case: str,
        what: str,
        fn: Callable,
        *args,
        known: dict[str, str] | None = None,
        hint: str | None = None,
        **kwargs,
    ):
        """Run learner code; turn its exceptions (except NotImplementedError) into a diagnosis.
        ``known``: words of an error message and the mistake they mean (a check's own probe
        models raise such messages), looked for before torch's own messages."""
        try:
            return fn(*args, **kwargs)
        except NotImplementedError:
            raise  # an unfinished exercise says so itself
        except Exception as error:  # noqa: BLE001 - any learner error becomes a report
            message = str(error)
            named = next((text for words, text in (known or {}).items() if words in message), None)
            kind = type(error).__name__
            self.fail(
                case,
                say(f"{what} raised {kind}", f"{what}时抛出了 {kind}"),
                detail=f"{kind}: {first_line(error)}" if message.strip() else None,
                looks_like=named or likely_cause(message),
                hint=hint,
                cause=error,
            )

    def kept_mode(self, case: str, module, training: bool, hint: str | None = None) -> None:
        """Fail unless ``module`` is back in the mode it was handed to the learner's code in
        (``training``): code that evaluates or samples must restore it."""
        if module.training == training:
            return
        mode = {True: say("training mode", "训练模式"), False: say("eval mode", "eval 模式")}
        self.fail(
            case,
            say(
                f"the model arrived in {mode[training]} and was left in {mode[module.training]}",
                f"模型传进来时处于{mode[training]}，结束时却处于{mode[module.training]}",
            ),
            looks_like=mistake(
                "the model's mode is not restored: remember model.training before "
                "model.eval() and call model.train(was_training) at the end",
                "没有恢复模型原来的模式：调用 model.eval() 之前记下 model.training，"
                "最后调用 model.train(was_training)",
            ),
            hint=hint,
        )

    # -- comparing ---------------------------------------------------------------------------
    def compare(
        self,
        case: str,
        what: str,
        got,
        expected: torch.Tensor,
        *,
        variants: Iterable[Variant] = (),
        hint: str | None = None,
        near_misses: Iterable[Variant] = (),
    ) -> None:
        """Fail unless ``got`` matches ``expected`` (shape, dtype, device, values).

        On a mismatch, each known-wrong variant is computed and the closest one that
        reproduces ``got`` is named in the message (see ``diagnose``). ``near_misses``
        are mistakes that may hide inside a device's tolerance (tanh-GELU for GELU):
        ``got`` also fails when it is ten times closer to one of them than to the reference.
        """
        if not isinstance(got, torch.Tensor):
            shape = tuple(expected.shape)
            self.fail(
                case,
                say(
                    f"{what} is a {type(got).__name__}, expected a tensor of shape {shape}",
                    f"{what}是 {type(got).__name__} 类型，应为形状 {shape} 的张量",
                ),
                hint=hint,
            )
        if got.shape != expected.shape:
            got_shape, shape = tuple(got.shape), tuple(expected.shape)
            self.fail(
                case,
                say(
                    f"{what} has shape {got_shape}, expected {shape}",
                    f"{what}的形状是 {got_shape}，应为 {shape}",
                ),
                looks_like=self.diagnose(got, variants),
                hint=hint,
            )
        if got.dtype != expected.dtype:
            self.fail(
                case,
                say(
                    f"{what} has dtype {got.dtype}, expected {expected.dtype}",
                    f"{what}的 dtype 是 {got.dtype}，应为 {expected.dtype}",
                ),
                hint=say(
                    "keep the input's dtype: build new tensors with dtype=x.dtype",
                    "保持输入的 dtype：新建张量时传入 dtype=x.dtype",
                ),
            )
        if got.device != expected.device:
            self.fail(
                case,
                say(
                    f"{what} is on {got.device}, expected {expected.device}",
                    f"{what}在 {got.device} 上，应在 {expected.device} 上",
                ),
                hint=say(
                    "build new tensors on the input's device (device=x.device), or "
                    "register constant tensors as buffers so .to(device) moves them",
                    "在输入所在的设备上新建张量（device=x.device），或把常量张量注册"
                    "为缓冲区（register_buffer），让 .to(device) 一并移动它们",
                ),
            )
        got, expected = got.detach(), expected.detach()
        if close(got, expected, self.rtol, self.atol):
            self._near_miss(case, what, got, expected, near_misses)
            return
        looks = self.diagnose(got, variants)
        if looks is None and torch.isnan(got).any() and not torch.isnan(expected).any():
            looks = say(
                "NaN in the output: e.g. a fully masked row, sqrt of a negative, or 0/0",
                "输出中有 NaN：例如某一行被完全屏蔽、对负数开平方，或 0/0",
            )
        if looks is None and variants:
            hint = hint or say(
                "no known mistake reproduces this output; compare your code with "
                "the formula in the check's docstring, one step at a time",
                "没有哪个已知错误能复现这个输出；请对照该检查 docstring 中的公式，"
                "一步一步核对你的代码",
            )
        self.fail(
            case,
            say(f"{what} differs from the reference", f"{what}与参考实现不一致"),
            detail=self.difference(got, expected),
            looks_like=looks,
            hint=hint,
        )

    def _near_miss(self, case, what, got, expected, near_misses) -> None:
        for description, compute in near_misses:
            with torch.no_grad():
                candidate = compute().detach()
            gap = max_abs_diff(expected, candidate)
            if gap > 0 and max_abs_diff(got, candidate) < 0.1 * gap:
                self.fail(
                    case,
                    say(
                        f"{what} is within tolerance of the reference but ten "
                        f"times closer to a known mistake",
                        f"{what}虽在参考实现的容差之内，但离某个已知错误还要近十倍",
                    ),
                    detail=self.difference(got, expected),
                    looks_like=description,
                )

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
        best, best_error = None, math.inf
        for description, error in self._variant_errors(got, variants):
            if error <= 1.0 and error < best_error:  # strictly: the earlier wins a tie
                best, best_error = description, error
        return best, best_error

    def _variant_errors(
        self, got: torch.Tensor, variants: Iterable[Variant]
    ) -> list[tuple[str, float]]:
        """Each variant's distance from ``got`` in units of ten times the tolerance, in table
        order; a variant that cannot run, or gives another shape, is left out."""
        got = got.detach()
        errors = []
        for description, compute in variants:
            try:
                with torch.no_grad():
                    candidate = compute()
            except Exception:  # noqa: BLE001 - a variant that cannot run cannot match
                continue
            if isinstance(candidate, torch.Tensor) and candidate.shape == got.shape:
                error = scaled_error(got, candidate.to(got.dtype), 10 * self.rtol, 10 * self.atol)
                errors.append((description, error))
        return errors

    def output_mistake(
        self, got: torch.Tensor, expected: torch.Tensor, variants: Iterable[Variant]
    ) -> str | None:
        """The known mistake closest to ``got``, an output within tolerance, if strictly
        closer than the reference: for a differing gradient, as some mistakes (eps outside
        the square root, on some inputs) move the output less than the tolerance and the
        gradient more. A correct output, the reference up to rounding, gets no name."""
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
            return None
        description, error = self._closest(got, variants)
        reference_error = scaled_error(
            got.detach(), expected.detach().to(got.dtype), 10 * self.rtol, 10 * self.atol
        )
        return description if error < reference_error else None

    def compare_grads(
        self,
        case: str,
        got: Mapping[str, torch.Tensor | None],
        expected: Mapping[str, torch.Tensor | None],
        *,
        variants: Mapping[str, Iterable[Variant]] | None = None,
        explain: Callable[[], str | None] = lambda: None,
    ) -> None:
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
                self.fail(
                    case,
                    say(f"{name} received no gradient", f"{label} 没有收到梯度"),
                    looks_like=mistake(
                        "it is not connected to the output (unused, or hidden "
                        "from autograd by .detach(), .data or torch.no_grad())",
                        "它与输出没有连接（没被用到，或被 .detach()、.data、"
                        "torch.no_grad() 挡在了 autograd 之外）",
                    ),
                )
            have, want = have.detach(), want.detach()
            if have.shape == want.shape and close(have, want, self.rtol, self.atol):
                continue
            looks = (
                self.diagnose(have, (variants or {}).get(name, ()))
                if have.shape == want.shape
                else None
            )
            looks = looks or explain()
            self.fail(
                case,
                say(
                    f"the gradient of {name} differs from the reference (the output matched)",
                    f"{label} 的梯度与参考实现不一致（输出是一致的）",
                ),
                detail=self.difference(have, want) if have.shape == want.shape else None,
                looks_like=looks
                or say(
                    "part of the computation is hidden from autograd (.detach(), .data, "
                    "torch.no_grad()) or a tensor autograd saved was changed in place",
                    "部分计算被挡在了 autograd 之外（.detach()、.data、torch.no_grad()），"
                    "或 autograd 保存的某个张量被原地修改了",
                ),
            )

    def unchanged(self, case: str, name: str, before: torch.Tensor, after: torch.Tensor):
        """Fail if ``after`` (a learner's input after the call) differs from ``before``."""
        if not torch.equal(before, after.detach()):
            self.fail(
                case,
                say(
                    f"your code modified its input {name} in place",
                    f"你的代码原地修改了它的输入 {name}",
                ),
                detail=_exact_difference(before, after.detach()),
                looks_like=mistake(
                    "an in-place operation on the input (x += ..., x -= mean, "
                    "x.mul_(...), x[...] = ...)",
                    "对输入做了原地操作（x += ...、x -= mean、x.mul_(...)、x[...] = ...）",
                ),
                hint=say(
                    "write out = x + ... instead of x += ...; the caller still needs x",
                    "写成 out = x + ...，不要写 x += ...；调用方之后还要用到 x",
                ),
            )

    # -- tensors -----------------------------------------------------------------------------
    def generator(self, seed: int) -> torch.Generator:
        """A CPU generator for the check's ``seed``, salted inside ``grading_cases``."""
        return torch.Generator().manual_seed(case_seed(seed))

    def randn(
        self, gen: torch.Generator, *shape: int, scale: float = 1.0, offset: float = 0.0
    ) -> torch.Tensor:
        """Seeded normal samples, drawn on the CPU (same numbers on every device)."""
        sample = torch.randn(*shape, generator=gen, dtype=torch.float64)
        # Cast on the CPU first: some devices (MPS) have no float64.
        return (sample * scale + offset).to(self.dtype).to(self.device)


def _max_diff(diff: float) -> str:
    """``"max |diff| = 0.223"``, saying why when it is not a number."""
    if math.isnan(diff):
        return say(
            "max |diff| = nan: NaN where the reference has numbers",
            "max |diff| = nan：参考实现是正常数值的位置出现了 NaN",
        )
    if math.isinf(diff):
        return say(
            "max |diff| = inf: an infinity on one side only",
            "max |diff| = inf：只有一方在该位置出现了无穷大",
        )
    return f"max |diff| = {fmt(diff)}"


def _exact_difference(before: torch.Tensor, after: torch.Tensor) -> str:
    """How ``after`` differs from ``before`` where they must be equal: the entries for a
    bool or integer tensor (a mask), else the largest absolute difference."""
    if before.is_floating_point() or before.is_complex() or before.shape != after.shape:
        return _max_diff(max_abs_diff(before, after))
    count, first = differing_entries(after, before)
    if first is None:
        return _max_diff(max_abs_diff(before, after))
    was, now = before[first].item(), after[first].item()
    if not first:  # a 0-d tensor
        return say(f"{was} became {now}", f"{was} 变成了 {now}")
    where, total = list(first), before.numel()
    return say(
        f"{count} of {total} entries changed; first at {where}: {was} became {now}",
        f"{total} 个元素中有 {count} 个被改动；第一个在 {where}：{was} 变成了 {now}",
    )


def _grad_label(name: str) -> str:
    """How a gradient's key (``"input x"``, ``"parameter fc_in.weight"``) reads in Chinese."""
    kind, _, rest = name.partition(" ")
    kinds = {"input": "输入", "parameter": "参数"}
    return say(name, f"{kinds.get(kind, kind)} {rest}")
