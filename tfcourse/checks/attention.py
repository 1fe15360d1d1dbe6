"""Checks for notebooks 01 and 02: the causal mask, attention, multi-head attention."""

from __future__ import annotations

import torch

from ..language import say
from ..nn import attention as reference_attention
from ._attention_mistakes import (
    _head_mistakes,
    _head_weights,
    _mask_variants,
    _mha,
    _mha_mistakes,
    _sdpa,
    _sdpa_mistakes,
)
from .cases import case_int
from ._harness import Checker, backward_case, build, describe_call, load_reference, randomize_

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
                chk.fail(case, say(f"returned a {type(got).__name__}, expected a bool tensor "
                                   f"({T}, {T})", f"返回了 {type(got).__name__}，应返回形状为 "
                                   f"({T}, {T}) 的 bool 张量"))
            got = got.detach().cpu()
            if got.shape != expected.shape:
                chk.fail(case, say(f"mask has shape {tuple(got.shape)}, expected {(T, T)}",
                                   f"掩码的形状是 {tuple(got.shape)}，应为 {(T, T)}"))
            if got.dtype != torch.bool:
                chk.fail(case, say(f"mask has dtype {got.dtype}, expected torch.bool",
                                   f"掩码的 dtype 是 {got.dtype}，应为 torch.bool"),
                         looks_like=_mask_dtype_diagnosis(got))
            chk.compare(case, say("mask", "掩码"), got, expected,
                        variants=_mask_variants(expected))
            chk.ok()


def _mask_dtype_diagnosis(got: torch.Tensor) -> str | None:
    if got.is_floating_point() and torch.isinf(got).any():
        return say("an additive float mask (0 = allowed, -inf = blocked); this exercise asks "
                   "for a bool mask, True = may attend",
                   "这是加性的浮点掩码（0 表示放行，-inf 表示屏蔽）；本练习要求 bool 掩码，"
                   "True 表示可以关注")
    if bool(((got == 0) | (got == 1)).all()):
        return say(f"a 0/1 mask stored as {got.dtype}; return dtype torch.bool (e.g. .bool())",
                   f"这是以 {got.dtype} 存储的 0/1 掩码；请返回 dtype 为 torch.bool 的张量"
                   f"（例如 .bool()）")
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
        case = say("q, k, v (2, 5, 8), causal mask: inputs not modified in place",
                   "q, k, v (2, 5, 8)，因果掩码：输入不得被原地修改")
        seen = [t.clone() for t in (q, k, v, mask)]
        with torch.no_grad():
            chk.call(case, say("calling your fn(q, k, v, mask=mask)",
                               "调用你的 fn(q, k, v, mask=mask)"), fn, *seen[:3], mask=seen[3])
        for name, before, after in zip(("q", "k", "v", "mask"), (q, k, v, mask), seen):
            chk.unchanged(case, name, before, after)
        chk.ok()

        random_mask = torch.rand(2, 5, 5, generator=gen) < 0.5
        random_mask |= torch.eye(5, dtype=torch.bool)         # no fully masked row
        cases = [
            (say("q, k, v (2, 5, 8), no mask", "q, k, v (2, 5, 8)，无掩码"), (2, 5, 8),
             (2, 5, 8), (2, 5, 8), None),
            (say("q, k, v (2, 5, 8), causal mask (5, 5)", "q, k, v (2, 5, 8)，因果掩码 (5, 5)"),
             (2, 5, 8), (2, 5, 8), (2, 5, 8), causal(5)),
            (say("q, k, v (2, 3, 6, 4) (batch, heads), causal mask (6, 6)",
                 "q, k, v (2, 3, 6, 4)（批次、头），因果掩码 (6, 6)"), (2, 3, 6, 4),
             (2, 3, 6, 4), (2, 3, 6, 4), causal(6)),
            (say("q, k, v (1, 1, 8): batch 1, T=1, causal mask (1, 1)",
                 "q, k, v (1, 1, 8)：批大小 1，T=1，因果掩码 (1, 1)"), (1, 1, 8), (1, 1, 8),
             (1, 1, 8), causal(1)),
            (say("q (2, 3, 8), k (2, 6, 8), v (2, 6, 5): T_q != T_k, d_v != d_k, no mask",
                 "q (2, 3, 8)，k (2, 6, 8)，v (2, 6, 5)：T_q != T_k，d_v != d_k，无掩码"),
             (2, 3, 8), (2, 6, 8), (2, 6, 5), None),
            (say("q, k, v (2, 5, 8), random mask (2, 5, 5)",
                 "q, k, v (2, 5, 8)，随机掩码 (2, 5, 5)"), (2, 5, 8), (2, 5, 8), (2, 5, 8),
             random_mask),
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
    result = chk.call(case, say(f"calling your {call}", f"调用你的 {call}"), fn, *my_inputs,
                      **kwargs)
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        chk.fail(case, say(f"{call} returned a {type(result).__name__}, expected a tuple "
                           "(output, weights)",
                           f"{call} 返回了 {type(result).__name__}，应返回元组 (output, weights)"))
    out, weights = result
    q, k, v = tensors

    def variants(index):
        # The weights are compared after the output matched, so mistakes that touch only
        # the returned weights are the likelier explanation: try those first.
        table = _sdpa_mistakes() if index == 0 else sorted(
            _sdpa_mistakes(), key=lambda row: "weights_mode" not in row[1])
        return [(label, lambda o=options: _sdpa(q, k, v, mask, **o)[index])
                for label, options in table]

    chk.compare(case, say("output", "输出"), out, out_ref, variants=variants(0))
    chk.compare(case, say("weights tensor", "权重张量"), weights, w_ref, variants=variants(1),
                hint=say("return the weights after softmax and masking, shape (..., T_q, T_k)",
                         "返回经过掩码和 softmax 之后的权重，形状为 (..., T_q, T_k)"))
    upstream = chk.randn(chk.generator(seed + 100), *out_ref.shape)
    (out_ref * upstream).sum().backward()
    chk.call(case, say("backward through your output", "对你的输出做反向传播"),
             lambda: (out * upstream).sum().backward())
    names = ("q", "k", "v")
    chk.compare_grads(case, {f"input {n}": t.grad for n, t in zip(names, my_inputs)},
                      {f"input {n}": t.grad for n, t in zip(names, ref_inputs)},
                      explain=lambda: chk.output_mistake(out, out_ref, variants(0)))


# ---------------------------------------------------------------------------------------------
# Multi-head attention


MHA_LAYOUT = ("qkv_proj.weight (3D, D) [rows: q, k, v; head h = rows h*head_dim:(h+1)*head_dim "
              "of each], qkv_proj.bias (3D,), out_proj.weight (D, D), out_proj.bias (D,)")


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
        M = 8

        def pair(case, D, H, **kwargs):
            learner = build(chk, case, cls, D, H, max_seq_len=M, **kwargs).eval()
            reference = randomize_(reference_attention.MultiHeadAttention(
                D, H, max_seq_len=M, **kwargs), gen).to(chk.device, chk.dtype).eval()
            load_reference(chk, case, learner, reference, bias=kwargs.get("bias", True))
            return learner, reference

        # d_model 24, 4 heads: sqrt(d_model), head_dim and sqrt(head_dim) all differ, so
        # each wrong scaling is told apart.
        D, H = 24, 4
        call = describe_call(cls, (D, H), {'max_seq_len': M})
        case = say(f"parameter layout of {call}", f"{call} 的参数布局")
        learner, reference = pair(case, D, H)
        chk.ok()

        case = say(f"x (2, 5, {D}): input not modified in place",
                   f"x (2, 5, {D})：输入不得被原地修改")
        x = chk.randn(gen, 2, 5, D)
        x_seen = x.clone()
        with torch.no_grad():
            chk.call(case, say("calling your forward(x)", "调用你的 forward(x)"), learner, x_seen)
        chk.unchanged(case, "x", x, x_seen)
        chk.ok()

        _mha_case(chk, say(f"x (2, 5, {D}), {H} heads", f"x (2, 5, {D})，{H} 个头"), learner,
                  reference, chk.randn(gen, 2, 5, D), 0)
        chk.ok()
        _mha_case(chk, say(f"x (1, 1, {D}): batch 1, T=1", f"x (1, 1, {D})：批大小 1，T=1"),
                  learner, reference, chk.randn(gen, 1, 1, D), 1)
        chk.ok()

        case = say("x (3, 7, 12), 3 heads, bias=False", "x (3, 7, 12)，3 个头，bias=False")
        learner, reference = pair(case, 12, 3, bias=False)
        _mha_case(chk, case, learner, reference, chk.randn(gen, 3, 7, 12), 2)
        chk.ok()

        case = say(f"x (2, 6, {D}), dropout=0.5, eval mode: dropout must do nothing",
                   f"x (2, 6, {D})，dropout=0.5，评估模式：dropout 必须不起作用")
        learner, reference = pair(case, D, H, dropout=0.5)
        x = chk.randn(gen, 2, 6, D)
        first = chk.call(case, say("calling your forward(x)", "调用你的 forward(x)"), learner, x)
        second = chk.call(case, say("calling your forward(x)", "调用你的 forward(x)"), learner, x)
        if not torch.equal(first, second):
            chk.fail(case, say("two eval-mode calls gave different outputs",
                               "评估模式下两次调用给出了不同的输出"),
                     looks_like=_dropout_in_eval())
        chk.compare(case, say("output", "输出"), first, reference(x),
                    variants=[(label, lambda o=o: _mha(reference, x, **o)[0])
                              for label, o in _mha_mistakes()])
        chk.ok()

        case = say(f"x (2, 6, {D}), dropout=0.5, train mode", f"x (2, 6, {D})，dropout=0.5，训练模式")
        with torch.no_grad():
            out_eval, w_ref = reference(x, return_weights=True)
            learner.train()
            result = chk.call(case, say("calling your forward(x, return_weights=True)",
                                        "调用你的 forward(x, return_weights=True)"), learner, x,
                              return_weights=True)
            learner.eval()
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            chk.fail(case, say("forward(x, return_weights=True) must return (out, weights)",
                               "forward(x, return_weights=True) 必须返回 (out, weights)"))
        out_train, w_train = result
        chk.compare(case, say("attention-weights tensor in train mode", "训练模式下的注意力权重张量"),
                    w_train, w_ref, variants=[
            (say("the weights are returned after dropout; return them before dropout (dropout "
                 "only changes what is multiplied with v)",
                 "返回的是 dropout 之后的权重；应返回 dropout 之前的权重（dropout 只影响与 v "
                 "相乘的那一份）"),
             lambda: torch.where(w_train == 0, torch.zeros_like(w_ref), w_ref / 0.5))])
        if out_train.shape == out_eval.shape and torch.allclose(out_train, out_eval):
            chk.fail(case, say("with dropout=0.5 the train-mode output equals the eval-mode "
                               "output", "dropout=0.5 时，训练模式的输出与评估模式的输出相同"),
                     looks_like=say("dropout is never applied (the dropout argument is ignored, "
                                    "or F.dropout gets training=False)",
                                    "随机失活（dropout）从未生效（忽略了 dropout 参数，或给 "
                                    "F.dropout 传了 training=False）"))
        chk.ok()


def _dropout_in_eval() -> str:
    return say("dropout is active in eval mode: F.dropout(x, p) defaults to training=True; use "
               "nn.Dropout, or F.dropout(x, p, training=self.training)",
               "评估模式下随机失活（dropout）仍在起作用：F.dropout(x, p) 默认 training=True；"
               "请改用 nn.Dropout，或 F.dropout(x, p, training=self.training)")


def _mha_case(chk: Checker, case: str, learner, reference, x, seed: int) -> None:
    x_ref = x.clone().requires_grad_(True)
    x_mine = x.clone().requires_grad_(True)
    out_ref, w_ref = reference(x_ref, return_weights=True)
    out = chk.call(case, say("calling your forward(x)", "调用你的 forward(x)"), learner, x_mine)
    if isinstance(out, (tuple, list)):
        chk.fail(case, say(f"forward(x) returned a {type(out).__name__}; with "
                           "return_weights=False (the default) return only the output (B, T, D)",
                           f"forward(x) 返回了 {type(out).__name__}；return_weights=False（默认）"
                           "时只返回输出 (B, T, D)"))
    table = _mha_mistakes()
    variants = [(label, lambda o=o: _mha(reference, x, **o)) for label, o in table]
    outputs = [(label, lambda f=f: f()[0]) for label, f in variants]
    chk.compare(case, say("output", "输出"), out, out_ref, variants=outputs)
    # The output matched: mistakes that touch only the returned weights come first
    # (a stable sort on the option, whatever the language of the descriptions).
    variants = [variants[i] for i in sorted(range(len(table)),
                                            key=lambda i: "weights" not in table[i][1])]
    result = chk.call(case, say("calling your forward(x, return_weights=True)",
                                "调用你的 forward(x, return_weights=True)"), learner,
                      x.clone(), return_weights=True)
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        chk.fail(case, say(f"forward(x, return_weights=True) returned a "
                           f"{type(result).__name__}, expected a tuple (out, weights)",
                           f"forward(x, return_weights=True) 返回了 {type(result).__name__}，"
                           f"应返回元组 (out, weights)"))
    chk.compare(case, say("attention-weights tensor", "注意力权重张量"), result[1], w_ref,
                variants=[(label, lambda f=f: f()[1]) for label, f in variants],
                hint=say("return one (T, T) map per head, shape (B, H, T, T): the masked "
                         "softmax, before dropout",
                         "每个头返回一张 (T, T) 的权重图，形状为 (B, H, T, T)：即掩码之后的 "
                         "softmax，取在 dropout 之前"))
    backward_case(chk, case, reference, learner, out_ref, out, seed=seed + 200,
                  inputs={"x": (x_ref, x_mine)}, variants=lambda: outputs)


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
        for shape, H, bias in (((2, 5, 24), 4, True), ((1, 1, 24), 4, True),
                               ((3, 6, 12), 3, False)):
            B, T, D = shape
            case = say(f"x {shape}, {H} heads", f"x {shape}，{H} 个头") + \
                ("" if bias else say(", bias=False", "，bias=False")) + \
                (say(": batch 1, T=1", "：批大小 1，T=1") if B == 1 else "")
            mha = randomize_(reference_attention.MultiHeadAttention(
                D, H, max_seq_len=8, bias=bias), gen).to(chk.device, chk.dtype).eval()
            x = chk.randn(gen, *shape)
            state = {name: t.clone() for name, t in mha.state_dict().items()}
            x_seen = x.clone()
            with torch.no_grad():
                expected = mha(x, return_weights=True)[1][:, 0]
            got = chk.call(case, say("calling your fn(mha, x)", "调用你的 fn(mha, x)"), fn, mha,
                           x_seen)
            if isinstance(got, torch.Tensor):
                got = got.detach()
            chk.compare(case, say("head-0 weights tensor", "头 0 的权重张量"), got, expected,
                        variants=[(label, lambda o=o: _head_weights(mha, x, **o))
                                  for label, o in _head_mistakes()],
                        hint=say("return a (B, T, T) tensor: index the head axis, e.g. [:, 0]",
                                 "返回形状为 (B, T, T) 的张量：在头这一维上取索引，例如 [:, 0]"))
            runs.append((case, mha, state, x, x_seen))
            chk.ok()
        for case, mha, state, _, _ in runs:
            for name, tensor in mha.state_dict().items():
                if not torch.equal(tensor, state[name]):
                    chk.fail(say(f"{case}: mha unchanged", f"{case}：mha 应保持不变"),
                             say(f"your function changed mha.{name}", f"你的函数修改了 mha.{name}"),
                             hint=say("only read the module's parameters; compute under "
                                      "torch.no_grad() if you like",
                                      "只读取模块的参数；愿意的话可以在 torch.no_grad() 下计算"))
        chk.ok()
        for case, _, _, x, x_seen in runs:
            chk.unchanged(say(f"{case}: x unchanged", f"{case}：x 应保持不变"), "x", x, x_seen)
        chk.ok()
