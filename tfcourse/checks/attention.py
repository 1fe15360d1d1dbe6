"""Checks for notebook 01: the causal mask and scaled dot-product attention."""

from __future__ import annotations

import torch

from ..language import say
from ..nn import attention as reference_attention
from ._attention_mistakes import _mask_variants, _sdpa, _sdpa_mistakes
from ._harness import Checker, describe_call
from .cases import case_int

# ---------------------------------------------------------------------------------------------
# The causal mask


def check_causal_mask(fn) -> None:
    """Check a causal-mask function against ``tfcourse.causal_mask``.

    Interface: ``fn(T) -> torch.Tensor`` of dtype ``torch.bool`` and shape ``(T, T)``,
    True where query ``i`` may attend to key ``j``, i.e. ``j <= i`` (the lower
    triangle *including* the diagonal). Any device.

    Sub-checks (4): T = 5, 1, 2, 16 (in grading, 5 and 16 become two sizes up to 200 drawn
    for the learner: ``cases.case_int``).
    """
    with Checker("causal_mask") as chk:
        for T in (case_int(1, 5, 3, 200), 1, 2, case_int(2, 16, 3, 200)):
            case = f"causal_mask({T})"
            call = describe_call(fn, (T,))
            got = chk.call(case, say(f"calling your {call}", f"调用你的 {call}"), fn, T)
            expected = reference_attention.causal_mask(T)
            if not isinstance(got, torch.Tensor):
                chk.fail(
                    case,
                    say(
                        f"returned a {type(got).__name__}, expected a bool tensor ({T}, {T})",
                        f"返回了 {type(got).__name__}，应返回形状为 ({T}, {T}) 的 bool 张量",
                    ),
                )
            got = got.detach().cpu()
            if got.shape != expected.shape:
                chk.fail(
                    case,
                    say(
                        f"mask has shape {tuple(got.shape)}, expected {(T, T)}",
                        f"掩码的形状是 {tuple(got.shape)}，应为 {(T, T)}",
                    ),
                )
            if got.dtype != torch.bool:
                chk.fail(
                    case,
                    say(
                        f"mask has dtype {got.dtype}, expected torch.bool",
                        f"掩码的 dtype 是 {got.dtype}，应为 torch.bool",
                    ),
                    looks_like=_mask_dtype_diagnosis(got),
                )
            chk.compare(case, say("mask", "掩码"), got, expected, variants=_mask_variants(expected))
            chk.ok()


def _mask_dtype_diagnosis(got: torch.Tensor) -> str | None:
    if got.is_floating_point() and torch.isinf(got).any():
        return say(
            "an additive float mask (0 = allowed, -inf = blocked); this exercise asks "
            "for a bool mask, True = may attend",
            "这是加性的浮点掩码（0 表示放行，-inf 表示屏蔽）；本练习要求 bool 掩码，"
            "True 表示可以关注",
        )
    if bool(((got == 0) | (got == 1)).all()):
        return say(
            f"a 0/1 mask stored as {got.dtype}; return dtype torch.bool (e.g. .bool())",
            f"这是以 {got.dtype} 存储的 0/1 掩码；请返回 dtype 为 torch.bool 的张量"
            f"（例如 .bool()）",
        )
    return None


# ---------------------------------------------------------------------------------------------
# Scaled dot-product attention


def check_attention(fn) -> None:
    """Check scaled dot-product attention against ``tfcourse.scaled_dot_product_attention``.

    Interface: ``fn(q, k, v, mask=None) -> (output, weights)`` with q ``(..., T_q, d_k)``,
    k ``(..., T_k, d_k)``, v ``(..., T_k, d_v)``, and ``mask`` a bool tensor broadcastable
    to ``(..., T_q, T_k)``, True = may attend (no row is fully masked here)::

        weights = softmax(q @ k^T / sqrt(d_k), masked to -inf where mask is False)   # over keys
        output = weights @ v                     # (..., T_q, d_v); weights (..., T_q, T_k)

    Sub-checks (7): inputs not modified in place; (2, 5, 8) without a mask; with a causal
    mask; 4-D inputs (2, 3, 6, 4) (batch, heads) with a (6, 6) mask; batch 1, T=1;
    T_q != T_k and d_v != d_k; a random (2, 5, 5) mask. Outputs, weights and the
    gradients of q, k, v are compared.
    """
    with Checker("scaled_dot_product_attention") as chk:
        gen = chk.generator(1)
        causal = reference_attention.causal_mask

        q, k, v = (chk.randn(gen, 2, 5, 8) for _ in range(3))
        mask = causal(5, device=chk.device)
        case = say(
            "q, k, v (2, 5, 8), causal mask: inputs not modified in place",
            "q, k, v (2, 5, 8)，因果掩码：输入不得被原地修改",
        )
        seen = [t.clone() for t in (q, k, v, mask)]
        with torch.no_grad():
            chk.call(
                case,
                say("calling your fn(q, k, v, mask=mask)", "调用你的 fn(q, k, v, mask=mask)"),
                fn,
                *seen[:3],
                mask=seen[3],
            )
        for name, before, after in zip(("q", "k", "v", "mask"), (q, k, v, mask), seen, strict=True):
            chk.unchanged(case, name, before, after)
        chk.ok()

        random_mask = torch.rand(2, 5, 5, generator=gen) < 0.5
        random_mask |= torch.eye(5, dtype=torch.bool)  # no fully masked row
        cases = [
            (
                say("q, k, v (2, 5, 8), no mask", "q, k, v (2, 5, 8)，无掩码"),
                (2, 5, 8),
                (2, 5, 8),
                (2, 5, 8),
                None,
            ),
            (
                say("q, k, v (2, 5, 8), causal mask (5, 5)", "q, k, v (2, 5, 8)，因果掩码 (5, 5)"),
                (2, 5, 8),
                (2, 5, 8),
                (2, 5, 8),
                causal(5),
            ),
            (
                say(
                    "q, k, v (2, 3, 6, 4) (batch, heads), causal mask (6, 6)",
                    "q, k, v (2, 3, 6, 4)（批次、头），因果掩码 (6, 6)",
                ),
                (2, 3, 6, 4),
                (2, 3, 6, 4),
                (2, 3, 6, 4),
                causal(6),
            ),
            (
                say(
                    "q, k, v (1, 1, 8): batch 1, T=1, causal mask (1, 1)",
                    "q, k, v (1, 1, 8)：批大小 1，T=1，因果掩码 (1, 1)",
                ),
                (1, 1, 8),
                (1, 1, 8),
                (1, 1, 8),
                causal(1),
            ),
            (
                say(
                    "q (2, 3, 8), k (2, 6, 8), v (2, 6, 5): T_q != T_k, d_v != d_k, no mask",
                    "q (2, 3, 8)，k (2, 6, 8)，v (2, 6, 5)：T_q != T_k，d_v != d_k，无掩码",
                ),
                (2, 3, 8),
                (2, 6, 8),
                (2, 6, 5),
                None,
            ),
            (
                say(
                    "q, k, v (2, 5, 8), random mask (2, 5, 5)",
                    "q, k, v (2, 5, 8)，随机掩码 (2, 5, 5)",
                ),
                (2, 5, 8),
                (2, 5, 8),
                (2, 5, 8),
                random_mask,
            ),
        ]
        for seed, (case, q_shape, k_shape, v_shape, mask) in enumerate(cases):
            tensors = [chk.randn(gen, *shape) for shape in (q_shape, k_shape, v_shape)]
            mask = None if mask is None else mask.to(chk.device)
            _attention_case(chk, case, fn, tensors, mask, seed)
            chk.ok()


def _attention_case(chk: Checker, case: str, fn, tensors, mask, seed: int) -> None:
    ref_inputs = [t.clone().requires_grad_(True) for t in tensors]
    my_inputs = [t.clone().requires_grad_(True) for t in tensors]
    out_ref, w_ref = reference_attention.scaled_dot_product_attention(*ref_inputs, mask=mask)
    kwargs = {} if mask is None else {"mask": mask}
    call = "fn(q, k, v)" if mask is None else "fn(q, k, v, mask=mask)"
    result = chk.call(
        case, say(f"calling your {call}", f"调用你的 {call}"), fn, *my_inputs, **kwargs
    )
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        chk.fail(
            case,
            say(
                f"{call} returned a {type(result).__name__}, expected a tuple (output, weights)",
                f"{call} 返回了 {type(result).__name__}，应返回元组 (output, weights)",
            ),
        )
    out, weights = result
    q, k, v = tensors

    def variants(index):
        # The weights are compared after the output matched, so mistakes that touch only
        # the returned weights are the likelier explanation: try those first.
        table = (
            _sdpa_mistakes()
            if index == 0
            else sorted(_sdpa_mistakes(), key=lambda row: "weights_mode" not in row[1])
        )
        return [
            (label, lambda o=options: _sdpa(q, k, v, mask, **o)[index]) for label, options in table
        ]

    chk.compare(case, say("output", "输出"), out, out_ref, variants=variants(0))
    chk.compare(
        case,
        say("weights tensor", "权重张量"),
        weights,
        w_ref,
        variants=variants(1),
        hint=say(
            "return the weights after softmax and masking, shape (..., T_q, T_k)",
            "返回经过掩码和 softmax 之后的权重，形状为 (..., T_q, T_k)",
        ),
    )
    upstream = chk.randn(chk.generator(seed + 100), *out_ref.shape)
    (out_ref * upstream).sum().backward()
    chk.call(
        case,
        say("backward through your output", "对你的输出做反向传播"),
        lambda: (out * upstream).sum().backward(),
    )
    names = ("q", "k", "v")
    chk.compare_grads(
        case,
        {f"input {n}": t.grad for n, t in zip(names, my_inputs, strict=True)},
        {f"input {n}": t.grad for n, t in zip(names, ref_inputs, strict=True)},
        explain=lambda: chk.output_mistake(out, out_ref, variants(0)),
    )
