"""Checks for notebook 02: causal multi-head attention, and the weights of one of its heads."""

from __future__ import annotations

import torch

from ..language import say
from ..nn import attention as reference_attention
from ._attention_mistakes import _head_mistakes, _head_weights, _mha, _mha_mistakes
from ._harness import Checker, describe_call, mistake
from ._module_cases import backward_case, dropout_acts
from ._parameters import build, load_reference, randomize_

# d_model 24, 4 heads: sqrt(d_model), head_dim and sqrt(head_dim) all differ, so each wrong
# scaling is told apart. M is the max_seq_len every module is built with.
D, H, M = 24, 4, 8

MHA_LAYOUT = (
    "qkv_proj.weight (3D, D) [rows: q, k, v; head h = rows h*head_dim:(h+1)*head_dim "
    "of each], qkv_proj.bias (3D,), out_proj.weight (D, D), out_proj.bias (D,)"
)

# ---------------------------------------------------------------------------------------------
# Multi-head attention


def check_multi_head_attention(cls) -> None:
    """Check a causal multi-head self-attention class against ``tfcourse.MultiHeadAttention``.

    Interface: ``cls(d_model, n_heads, *, max_seq_len, dropout=0.0, bias=True)``, an
    ``nn.Module`` with parameters either fused::

        qkv_proj.weight (3D, D), qkv_proj.bias (3D,)   # rows [0, D) make q, [D, 2D) k, [2D, 3D) v
        out_proj.weight (D, D),  out_proj.bias (D,)

    or separate ``q_proj``, ``k_proj``, ``v_proj`` (each ``Linear(D, D)``) and ``out_proj``.
    Head ``h`` owns channels ``[h * head_dim, (h + 1) * head_dim)`` of q, k and v.
    No biases when ``bias=False``. ``forward(x (B, T, D), return_weights=False)``
    returns ``out (B, T, D)``, or ``(out, weights (B, H, T, T))`` with
    ``return_weights=True``: the causal, masked softmax weights *before* dropout.
    Dropout (p=dropout) acts only in train mode, on the weights and/or the output.

    Sub-checks (7): parameter layout; input not modified in place; (2, 5, 24) with 4
    heads (output, weights, gradients); batch 1, T=1; d_model 12 with 3 heads and
    bias=False; dropout=0.5 in eval mode (no effect); dropout=0.5 in train mode
    (returned weights are taken before dropout, and dropout does act).
    """
    with Checker("MultiHeadAttention") as chk:
        gen = chk.generator(2)
        call = describe_call(cls, (D, H), {"max_seq_len": M})
        case = say(f"parameter layout of {call}", f"{call} 的参数布局")
        learner, reference = _pair(chk, cls, gen, case, D, H)
        chk.ok()
        _input_unchanged_case(chk, learner, gen)
        chk.ok()
        _mha_case(
            chk,
            say(f"x (2, 5, {D}), {H} heads", f"x (2, 5, {D})，{H} 个头"),
            learner,
            reference,
            chk.randn(gen, 2, 5, D),
            0,
        )
        chk.ok()
        _mha_case(
            chk,
            say(f"x (1, 1, {D}): batch 1, T=1", f"x (1, 1, {D})：批大小 1，T=1"),
            learner,
            reference,
            chk.randn(gen, 1, 1, D),
            1,
        )
        chk.ok()
        case = say("x (3, 7, 12), 3 heads, bias=False", "x (3, 7, 12)，3 个头，bias=False")
        learner, reference = _pair(chk, cls, gen, case, 12, 3, bias=False)
        _mha_case(chk, case, learner, reference, chk.randn(gen, 3, 7, 12), 2)
        chk.ok()
        learner, reference, x = _dropout_eval_case(chk, cls, gen)
        chk.ok()
        _dropout_train_case(chk, learner, reference, x)
        chk.ok()


def _pair(chk: Checker, cls, gen: torch.Generator, case: str, d_model: int, n_heads: int, **kwargs):
    """``(learner, reference)`` in eval mode: ``cls(d_model, n_heads, max_seq_len=M, **kwargs)``
    holding the weights of a randomized ``tfcourse.MultiHeadAttention``."""
    learner = build(chk, case, cls, d_model, n_heads, max_seq_len=M, **kwargs).eval()
    reference = (
        randomize_(
            reference_attention.MultiHeadAttention(d_model, n_heads, max_seq_len=M, **kwargs), gen
        )
        .to(chk.device, chk.dtype)
        .eval()
    )
    load_reference(chk, case, learner, reference, bias=kwargs.get("bias", True))
    return learner, reference


def _input_unchanged_case(chk: Checker, learner, gen: torch.Generator) -> None:
    """Fail if a forward pass on x (2, 5, D) modifies x."""
    case = say(f"x (2, 5, {D}): input not modified in place", f"x (2, 5, {D})：输入不得被原地修改")
    x = chk.randn(gen, 2, 5, D)
    x_seen = x.clone()
    with torch.no_grad():
        chk.call(case, say("calling your forward(x)", "调用你的 forward(x)"), learner, x_seen)
    chk.unchanged(case, "x", x, x_seen)


def _dropout_eval_case(chk: Checker, cls, gen: torch.Generator):
    """dropout=0.5 in eval mode: two calls agree and match the reference on x (2, 6, D).

    Returns the dropout module pair and x, which the train-mode sub-check uses next.
    """
    case = say(
        f"x (2, 6, {D}), dropout=0.5, eval mode: dropout must do nothing",
        f"x (2, 6, {D})，dropout=0.5，评估模式：dropout 必须不起作用",
    )
    learner, reference = _pair(chk, cls, gen, case, D, H, dropout=0.5)
    x = chk.randn(gen, 2, 6, D)
    first = chk.call(case, say("calling your forward(x)", "调用你的 forward(x)"), learner, x)
    second = chk.call(case, say("calling your forward(x)", "调用你的 forward(x)"), learner, x)
    if not torch.equal(first, second):
        chk.fail(
            case,
            say("two eval-mode calls gave different outputs", "评估模式下两次调用给出了不同的输出"),
            looks_like=_dropout_in_eval(),
        )
    chk.compare(
        case,
        say("output", "输出"),
        first,
        reference(x),
        variants=[(label, lambda o=o: _mha(reference, x, **o)[0]) for label, o in _mha_mistakes()],
    )
    return learner, reference, x


def _dropout_train_case(chk: Checker, learner, reference, x: torch.Tensor) -> None:
    """dropout=0.5 in train mode: the returned weights are those before dropout, and the
    output differs from the eval-mode one (dropout acts)."""
    case = say(f"x (2, 6, {D}), dropout=0.5, train mode", f"x (2, 6, {D})，dropout=0.5，训练模式")
    with torch.no_grad():
        out_eval, w_ref = reference(x, return_weights=True)
        learner.train()
        result = chk.call(
            case,
            say(
                "calling your forward(x, return_weights=True)",
                "调用你的 forward(x, return_weights=True)",
            ),
            learner,
            x,
            return_weights=True,
        )
        learner.eval()
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        chk.fail(
            case,
            say(
                "forward(x, return_weights=True) must return (out, weights)",
                "forward(x, return_weights=True) 必须返回 (out, weights)",
            ),
        )
    out_train, w_train = result
    chk.compare(
        case,
        say("attention-weights tensor in train mode", "训练模式下的注意力权重张量"),
        w_train,
        w_ref,
        variants=[
            (
                mistake(
                    "the weights are returned after dropout; return them before dropout (dropout "
                    "only changes what is multiplied with v)",
                    "返回的是 dropout 之后的权重；应返回 dropout 之前的权重（dropout 只影响与 v "
                    "相乘的那一份）",
                ),
                lambda: torch.where(w_train == 0, torch.zeros_like(w_ref), w_ref / 0.5),
            )
        ],
    )
    never = mistake(
        "dropout is never applied (the dropout argument is ignored, or F.dropout gets "
        "training=False)",
        "dropout 从未生效（忽略了 dropout 参数，或给 F.dropout 传了 training=False）",
    )
    dropout_acts(chk, case, out_train, out_eval, 0.5, never)


def _dropout_in_eval() -> str:
    return say(
        "dropout is active in eval mode: F.dropout(x, p) defaults to training=True; use "
        "nn.Dropout, or F.dropout(x, p, training=self.training)",
        "评估模式下 dropout 仍在起作用：F.dropout(x, p) 默认 training=True；"
        "请改用 nn.Dropout，或 F.dropout(x, p, training=self.training)",
    )


def _mha_case(chk: Checker, case: str, learner, reference, x, seed: int) -> None:
    """One sub-check on x (B, T, D): the output, the weights (B, H, T, T) of
    ``return_weights=True`` and the gradients, against the reference."""
    x_ref = x.clone().requires_grad_(True)
    x_mine = x.clone().requires_grad_(True)
    out_ref, w_ref = reference(x_ref, return_weights=True)
    out = chk.call(case, say("calling your forward(x)", "调用你的 forward(x)"), learner, x_mine)
    if isinstance(out, (tuple, list)):
        chk.fail(
            case,
            say(
                f"forward(x) returned a {type(out).__name__}; with "
                "return_weights=False (the default) return only the output (B, T, D)",
                f"forward(x) 返回了 {type(out).__name__}；return_weights=False（默认）"
                "时只返回输出 (B, T, D)",
            ),
        )
    table = _mha_mistakes()
    variants = [(label, lambda o=o: _mha(reference, x, **o)) for label, o in table]
    outputs = [(label, lambda f=f: f()[0]) for label, f in variants]
    chk.compare(case, say("output", "输出"), out, out_ref, variants=outputs)
    # The output matched: mistakes that touch only the returned weights come first
    # (a stable sort on the option, whatever the language of the descriptions).
    variants = [
        variants[i] for i in sorted(range(len(table)), key=lambda i: "weights" not in table[i][1])
    ]
    result = chk.call(
        case,
        say(
            "calling your forward(x, return_weights=True)",
            "调用你的 forward(x, return_weights=True)",
        ),
        learner,
        x.clone(),
        return_weights=True,
    )
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        chk.fail(
            case,
            say(
                f"forward(x, return_weights=True) returned a "
                f"{type(result).__name__}, expected a tuple (out, weights)",
                f"forward(x, return_weights=True) 返回了 {type(result).__name__}，"
                f"应返回元组 (out, weights)",
            ),
        )
    chk.compare(
        case,
        say("attention-weights tensor", "注意力权重张量"),
        result[1],
        w_ref,
        variants=[(label, lambda f=f: f()[1]) for label, f in variants],
        hint=say(
            "return one (T, T) map per head, shape (B, H, T, T): the masked "
            "softmax, before dropout",
            "每个头返回一张 (T, T) 的权重图，形状为 (B, H, T, T)：即掩码之后的 "
            "softmax，取在 dropout 之前",
        ),
    )
    backward_case(
        chk,
        case,
        reference,
        learner,
        out_ref,
        out,
        seed=seed + 200,
        inputs={"x": (x_ref, x_mine)},
        variants=lambda: outputs,
    )


# ---------------------------------------------------------------------------------------------
# The weights of one head (lesson exercise 3)


def check_first_head_weights(fn) -> None:
    """Check a function that extracts the attention weights of head 0.

    Interface: ``fn(mha, x) -> weights (B, T, T)`` where ``mha`` is a causal
    ``tfcourse.MultiHeadAttention`` and ``x`` is ``(B, T, D)``: the softmax weights of
    head 0, computed from ``mha``'s parameters (``mha.qkv_proj``: rows ``[0, head_dim)``
    are head 0's queries, ``[D, D + head_dim)`` its keys; scale ``1/sqrt(head_dim)``;
    causal mask). It must equal ``mha(x, return_weights=True)[1][:, 0]``.

    Sub-checks (5): (2, 5, 24) with 4 heads; batch 1, T=1; (3, 6, 12) with 3 heads and
    no biases; mha's parameters unchanged; x not modified in place.
    """
    with Checker("first_head_weights") as chk:
        gen = chk.generator(3)
        runs = []
        for shape, H, bias in (
            ((2, 5, 24), 4, True),
            ((1, 1, 24), 4, True),
            ((3, 6, 12), 3, False),
        ):
            B, T, D = shape
            case = (
                say(f"x {shape}, {H} heads", f"x {shape}，{H} 个头")
                + ("" if bias else say(", bias=False", "，bias=False"))
                + (say(": batch 1, T=1", "：批大小 1，T=1") if B == 1 else "")
            )
            mha = (
                randomize_(
                    reference_attention.MultiHeadAttention(D, H, max_seq_len=8, bias=bias), gen
                )
                .to(chk.device, chk.dtype)
                .eval()
            )
            x = chk.randn(gen, *shape)
            state = {name: t.clone() for name, t in mha.state_dict().items()}
            x_seen = x.clone()
            with torch.no_grad():
                expected = mha(x, return_weights=True)[1][:, 0]
            got = chk.call(
                case, say("calling your fn(mha, x)", "调用你的 fn(mha, x)"), fn, mha, x_seen
            )
            if isinstance(got, torch.Tensor):
                got = got.detach()
            chk.compare(
                case,
                say("head-0 weights tensor", "头 0 的权重张量"),
                got,
                expected,
                variants=[
                    (label, lambda o=o, mha=mha, x=x: _head_weights(mha, x, **o))
                    for label, o in _head_mistakes()
                ],
                hint=say(
                    "return a (B, T, T) tensor: index the head axis, e.g. [:, 0]",
                    "返回形状为 (B, T, T) 的张量：在头这一维上取索引，例如 [:, 0]",
                ),
            )
            runs.append((case, mha, state, x, x_seen))
            chk.ok()
        for case, mha, state, _, _ in runs:
            for name, tensor in mha.state_dict().items():
                if not torch.equal(tensor, state[name]):
                    chk.fail(
                        say(f"{case}: mha unchanged", f"{case}：mha 应保持不变"),
                        say(f"your function changed mha.{name}", f"你的函数修改了 mha.{name}"),
                        hint=say(
                            "only read the module's parameters; compute under "
                            "torch.no_grad() if you like",
                            "只读取模块的参数；愿意的话可以在 torch.no_grad() 下计算",
                        ),
                    )
        chk.ok()
        for case, _, _, x, x_seen in runs:
            chk.unchanged(say(f"{case}: x unchanged", f"{case}：x 应保持不变"), "x", x, x_seen)
        chk.ok()
