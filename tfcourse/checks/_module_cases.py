"""Sub-checks the module checks share: output and gradients vs. the reference, input untouched.

``module_case`` compares a forward pass and, through ``backward_case``, the gradients of the
input and of every parameter (under the learner's layout, see ``_parameters.adapt_layout``);
``inplace_case`` fails a module that modifies its input; ``eval_dropout_case`` one whose
dropout still acts in eval mode.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import torch
from torch import nn

from ..language import say
from ._harness import Checker, Variant, mistake
from ._parameters import adapt_layout, parameter_names


def input_grads_and_params(module: nn.Module, inputs: Mapping[str, torch.Tensor]) -> dict:
    """``{name: grad}`` for the inputs and every parameter of ``module``."""
    grads = {f"input {name}": t.grad for name, t in inputs.items()}
    grads.update({f"parameter {name}": p.grad for name, p in parameter_names(module).items()})
    return grads


def reference_grads(
    reference: nn.Module, learner: nn.Module, inputs: Mapping[str, torch.Tensor]
) -> dict:
    """Like ``input_grads_and_params`` for the reference, renamed to the learner's layout."""
    grads = {f"input {name}": t.grad for name, t in inputs.items()}
    params = adapt_layout(
        {n: p.grad for n, p in parameter_names(reference).items()}, parameter_names(learner)
    )
    grads.update({f"parameter {name}": g for name, g in params.items()})
    return grads


def module_case(
    chk: Checker,
    case: str,
    learner: nn.Module,
    reference: nn.Module,
    x: torch.Tensor,
    *,
    variants: Callable[[], Iterable[Variant]] = lambda: (),
    call: Callable = lambda module, t: module(t),
    hint: str | None = None,
    seed: int = 0,
    near_misses: Callable[[], Iterable[Variant]] = lambda: (),
) -> None:
    """Compare output, input gradient and parameter gradients of ``call(module, x)``.

    The backward pass uses a seeded random upstream gradient (not ``sum()``, whose
    gradient through a normalization is zero and would hide mistakes).
    """
    x_ref = x.detach().clone().requires_grad_(True)
    x_mine = x.detach().clone().requires_grad_(True)
    expected = call(reference, x_ref)
    got = chk.call(case, say("calling your module", "调用你的模块"), call, learner, x_mine)
    chk.compare(
        case,
        say("output", "输出"),
        got,
        expected,
        variants=variants(),
        hint=hint,
        near_misses=near_misses(),
    )
    backward_case(
        chk,
        case,
        reference,
        learner,
        expected,
        got,
        seed=seed + 1000,
        inputs={"x": (x_ref, x_mine)},
        variants=variants,
    )


def backward_case(
    chk: Checker,
    case: str,
    reference: nn.Module,
    learner: nn.Module,
    expected: torch.Tensor,
    got: torch.Tensor,
    *,
    seed: int,
    inputs: Mapping[str, tuple[torch.Tensor, torch.Tensor]] | None = None,
    what: str = "output",
    variants: Callable[[], Iterable[Variant]] = lambda: (),
) -> None:
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
    shown = {"output": "输出"}.get(what, f" {what} ")  # the Chinese of what is named
    chk.call(
        case,
        say(f"backward through your {what}", f"对你的{shown}做反向传播"),
        lambda: (got * upstream).sum().backward(),
    )
    chk.compare_grads(
        case,
        input_grads_and_params(learner, {n: m for n, (_, m) in inputs.items()}),
        reference_grads(reference, learner, {n: r for n, (r, _) in inputs.items()}),
        explain=lambda: chk.output_mistake(got, expected, variants()),
    )


def inplace_case(chk: Checker, case: str, modules: Iterable[nn.Module], x: torch.Tensor) -> None:
    """Fail if any of ``modules`` modifies its input during a forward pass."""
    for module in modules:
        x_seen = x.clone()
        with torch.no_grad():
            chk.call(case, say("calling your module", "调用你的模块"), module, x_seen)
        chk.unchanged(case, "x", x, x_seen)


def eval_dropout_case(
    chk: Checker,
    case: str,
    learner: nn.Module,
    reference: nn.Module,
    x: torch.Tensor,
    variants: Iterable[Variant],
    *,
    calling: str,
) -> None:
    """A module built with dropout, in eval mode: two calls on ``x`` agree (dropout does
    nothing) and match the reference. ``calling``: what the message calls the learner's
    call ("calling your block")."""
    with torch.no_grad():
        first = chk.call(case, calling, learner, x)
        second = chk.call(case, calling, learner, x)
        if isinstance(first, torch.Tensor) and not torch.equal(first, second):
            chk.fail(
                case,
                say(
                    "two eval-mode calls gave different outputs",
                    "评估模式下两次调用给出了不同的输出",
                ),
                looks_like=mistake(
                    "dropout is active in eval mode: F.dropout(x, p) defaults to "
                    "training=True; use nn.Dropout, or F.dropout(x, p, "
                    "training=self.training)",
                    "评估模式下 dropout 仍在起作用：F.dropout(x, p) 默认 "
                    "training=True；请改用 nn.Dropout，或 F.dropout(x, p, "
                    "training=self.training)",
                ),
            )
        chk.compare(case, say("output", "输出"), first, reference(x), variants=variants)


def dropout_acts(chk: Checker, case: str, out_train, out_eval, p: float, looks_like: str) -> None:
    """Fail, naming ``looks_like``, if the train-mode output equals the eval-mode one under
    dropout ``p`` (outputs of another shape are left to the comparisons)."""
    same_shape = isinstance(out_train, torch.Tensor) and out_train.shape == out_eval.shape
    if same_shape and torch.allclose(out_train, out_eval):
        chk.fail(
            case,
            say(
                f"with dropout={p} the train-mode output equals the eval-mode output",
                f"dropout={p} 时，训练模式的输出与评估模式的输出相同",
            ),
            looks_like=looks_like,
        )
