"""Check for notebook 05: the Transformer block, pre-LN and post-LN."""

from __future__ import annotations

import copy

import torch

from ..language import say
from ..nn import block as reference_block
from ._harness import Checker, close, describe_call, mistake
from ._module_cases import dropout_acts, eval_dropout_case, inplace_case, module_case
from ._parameters import build, load_reference, randomize_
from .mlp import _feedforward_width

D, H, M = 16, 4, 8
P_DROP = 0.5


def _shared_norm() -> str:
    return say(
        "one norm module is shared by both sublayers (norm1 used twice, or norm2 = norm1): "
        "each sublayer needs its own LayerNorm with its own weights",
        "两个子层共用了同一个归一化模块（norm1 用了两次，或 norm2 = norm1）：每个子层都需要"
        "自己的层归一化（LayerNorm），各有各的权重",
    )


def _tanh_gelu() -> str:
    return say(
        "the tanh approximation of GELU (GPT-2's) in the block's MLP where the exact (erf) "
        "GELU is asked; use F.gelu(x) or nn.GELU() without approximate='tanh'",
        "块里的 MLP 用了 GELU 的 tanh 近似（GPT-2 的写法），而这里要求精确（erf）GELU；"
        "请用 F.gelu(x) 或 nn.GELU()，不要加 approximate='tanh'",
    )


def _pre(x, attn, mlp, n1, n2):
    x = x + attn(n1(x))
    return x + mlp(n2(x))


def _post(x, attn, mlp, n1, n2):
    x = n1(x + attn(x))
    return n2(x + mlp(x))


def _tanh_gelu_twin(ref):
    """The reference with GPT-2's tanh GELU in its MLP, same weights."""
    twin = copy.deepcopy(ref)
    twin.mlp.activation = "gelu_tanh"
    return twin


def _gelu_near_misses(ref, x):
    # tanh-GELU differs from GELU by < 1e-3: it can hide inside an accelerator's tolerance.
    return [(_tanh_gelu(), lambda: _tanh_gelu_twin(ref)(x))]


def _block_variants(ref, x):
    a, m, n1, n2 = ref.attn, ref.mlp, ref.norm1, ref.norm2
    shared = _pre if ref.pre_ln else _post
    common = [
        (_shared_norm(), lambda: shared(x, a, m, n1, n1)),
        (_shared_norm(), lambda: shared(x, a, m, n2, n2)),
        (_tanh_gelu(), lambda: _tanh_gelu_twin(ref)(x)),
    ]
    return _order_variants(ref, x) + common


def _order_variants(ref, x):
    a, m, n1, n2 = ref.attn, ref.mlp, ref.norm1, ref.norm2

    def missing(which, wrong, right):
        sublayer = {"attention": "注意力", "MLP": " MLP "}[which]
        return say(
            f"the {which} residual is missing: {wrong} instead of {right}",
            f"缺少{sublayer}子层的残差连接：写成了 {wrong}，应为 {right}",
        )

    both_missing = say("both residual connections are missing", "两个残差连接都缺失了")
    swapped = say("norm1 and norm2 are swapped", "norm1 和 norm2 用反了")
    mlp_first = say("the MLP runs before attention", "MLP 在注意力之前就执行了")
    if ref.pre_ln:
        return [
            (
                mistake(
                    "post-LN was written where pre-LN was asked (pre_ln=True): pre-LN normalizes "
                    "each sublayer's input, x + attn(norm1(x)), not the sum after the residual add",
                    "要求的是前置层归一化（Pre-LN，pre_ln=True），却写成了后置层归一化（Post-LN）："
                    "Pre-LN 归一化的是每个子层的输入，即 x + attn(norm1(x))，"
                    "而不是残差相加之后的和",
                ),
                lambda: _post(x, a, m, n1, n2),
            ),
            (
                missing("attention", "x = attn(norm1(x))", "x = x + attn(norm1(x))"),
                lambda: (lambda h: h + m(n2(h)))(a(n1(x))),
            ),
            (
                missing("MLP", "x = mlp(norm2(x))", "x = x + mlp(norm2(x))"),
                lambda: m(n2(x + a(n1(x)))),
            ),
            (both_missing, lambda: m(n2(a(n1(x))))),
            (
                mistake(
                    "the norm is applied to the residual stream (x = norm1(x); x = x + attn(x)) "
                    "instead of only to the sublayer's input",
                    "归一化作用在了残差流上（x = norm1(x); x = x + attn(x)），"
                    "而不是只作用于子层的输入",
                ),
                lambda: (lambda h: (lambda g: g + m(g))(n2(h + a(h))))(n1(x)),
            ),
            (swapped, lambda: _pre(x, a, m, n2, n1)),
            (mlp_first, lambda: (lambda h: h + a(n2(h)))(x + m(n1(x)))),
            (
                mistake(
                    "attention and MLP both read the block input (in parallel) instead of one "
                    "after the other",
                    "注意力和 MLP 都读取了块的输入（并行），而不是先后串联",
                ),
                lambda: x + a(n1(x)) + m(n2(x)),
            ),
        ]
    return [
        (
            mistake(
                "pre-LN was written where post-LN was asked (pre_ln=False): post-LN normalizes "
                "after the residual add, norm1(x + attn(x))",
                "要求的是后置层归一化（Post-LN，pre_ln=False），却写成了前置层归一化（Pre-LN）："
                "Post-LN 在残差相加之后才归一化，即 norm1(x + attn(x))",
            ),
            lambda: _pre(x, a, m, n1, n2),
        ),
        (
            missing("attention", "norm1(attn(x))", "norm1(x + attn(x))"),
            lambda: (lambda h: n2(h + m(h)))(n1(a(x))),
        ),
        (missing("MLP", "norm2(mlp(x))", "norm2(x + mlp(x))"), lambda: n2(m(n1(x + a(x))))),
        (both_missing, lambda: n2(m(n1(a(x))))),
        (
            mistake(
                "the sublayer output is normalized before the residual add (x + norm1(attn(x))) "
                "instead of norm1(x + attn(x))",
                "在残差相加之前就对子层输出做了归一化（x + norm1(attn(x))），"
                "应为 norm1(x + attn(x))",
            ),
            lambda: (lambda h: h + n2(m(h)))(x + n1(a(x))),
        ),
        (swapped, lambda: _post(x, a, m, n2, n1)),
        (mlp_first, lambda: (lambda h: n2(h + a(h)))(n1(x + m(x)))),
    ]


def check_transformer_block(cls) -> None:
    """Check a decoder block class against ``tfcourse.TransformerBlock``, pre-LN and post-LN.

    Interface: ``cls(d_model, n_heads, *, max_seq_len, pre_ln=True, dropout=0.0)``, an
    ``nn.Module`` with four submodules in the tfcourse layouts:

    - ``norm1``, ``norm2``: two separate LayerNorms (``weight``, ``bias``; eps 1e-5),
    - ``attn``: causal multi-head attention as ``tfcourse.MultiHeadAttention``
      (``qkv_proj``/``out_proj``, or ``q_proj``/``k_proj``/``v_proj``/``out_proj``),
    - ``mlp``: ``tfcourse.FeedForward`` (``fc_in`` to 4 * d_model, exact GELU, ``fc_out``).

    Diagnosed besides wrong orders and missing residuals: one norm module shared by both
    sublayers, and GPT-2's tanh GELU in the MLP (also when it hides within tolerance).

    ``forward(x (B, T, D)) -> (B, T, D)``::

        pre-LN:  x = x + attn(norm1(x));  x = x + mlp(norm2(x))
        post-LN: x = norm1(x + attn(x));  x = norm2(x + mlp(x))

    ``dropout`` goes to the sublayers (attention weights, sublayer outputs) and acts
    only in train mode; the residual stream ``x`` itself is never dropped.

    Sub-checks (8): parameter layout; input not modified in place (pre and post);
    pre-LN (2, 6, 16) output and gradients; pre-LN batch 1, T=1; post-LN (2, 6, 16);
    post-LN batch 1, T=1; dropout=0.5 in eval mode (no effect); dropout=0.5 in train
    mode with the sublayers' output projections zeroed (the residual stream must pass
    untouched), not zeroed (dropout must act), and one at a time (each sublayer's
    output is dropped, and only once: no missing and no extra residual dropout).
    """
    with Checker("TransformerBlock") as chk:
        gen = chk.generator(6)
        call = describe_call(cls, (D, H), {"max_seq_len": M})
        case = say(f"parameter layout of {call}", f"{call} 的参数布局")
        pre, pre_ref = _pair(chk, cls, gen, case)
        chk.ok()

        case = say(
            f"x (2, 6, {D}): input not modified in place", f"x (2, 6, {D})：输入不得被原地修改"
        )
        post, post_ref = _pair(chk, cls, gen, case, pre_ln=False)
        inplace_case(chk, case, [pre, post], chk.randn(gen, 2, 6, D))
        chk.ok()

        batch_1 = say(": batch 1, T=1", "：批大小 1，T=1")
        cases = [
            (say(f"pre-LN, x (2, 6, {D})", f"pre-LN，x (2, 6, {D})"), pre, pre_ref, (2, 6, D)),
            (
                say(f"pre-LN, x (1, 1, {D})", f"pre-LN，x (1, 1, {D})") + batch_1,
                pre,
                pre_ref,
                (1, 1, D),
            ),
            (say(f"post-LN, x (2, 6, {D})", f"post-LN，x (2, 6, {D})"), post, post_ref, (2, 6, D)),
            (
                say(f"post-LN, x (1, 1, {D})", f"post-LN，x (1, 1, {D})") + batch_1,
                post,
                post_ref,
                (1, 1, D),
            ),
        ]
        for seed, (case, learner, reference, shape) in enumerate(cases):
            _forward_case(chk, case, learner, reference, chk.randn(gen, *shape), seed)
            chk.ok()

        x = chk.randn(gen, 2, 6, D)
        for pre_ln in (True, False):
            _dropout_eval_case(chk, cls, gen, x, pre_ln)
        chk.ok()

        for pre_ln in (True, False):
            _residual_stream_case(chk, cls, gen, x, pre_ln)
            if pre_ln:
                _dropout_acts_case(chk, cls, gen, x)
                _mlp_dropout_case(chk, cls, gen)
                _attention_dropout_case(chk, cls, gen)
        chk.ok()


def _pair(
    chk: Checker, cls, gen: torch.Generator, case: str, zeroed: tuple[str, ...] = (), **kwargs
):
    """``(learner, reference)`` in eval mode: ``cls(D, H, max_seq_len=M, **kwargs)`` holding
    the weights of a randomized ``tfcourse.TransformerBlock`` (exact GELU). The output
    projections of the sublayers named in ``zeroed`` (``"attn"``, ``"mlp"``) are zero: such a
    sublayer adds exactly 0 to the stream, in train mode too."""
    learner = build(chk, case, cls, D, H, max_seq_len=M, **kwargs).eval()
    _no_shared_norm(chk, case, learner)
    reference = randomize_(
        reference_block.TransformerBlock(D, H, max_seq_len=M, activation="gelu", **kwargs), gen
    )
    projections = {"attn": reference.attn.out_proj, "mlp": reference.mlp.fc_out}
    with torch.no_grad():
        for name in zeroed:
            projections[name].weight.zero_()
            projections[name].bias.zero_()
    reference = reference.to(chk.device, chk.dtype).eval()
    load_reference(chk, case, learner, reference, bias=True, shape_diagnosis=_block_width)
    return learner, reference


def _forward_case(chk: Checker, case: str, learner, reference, x: torch.Tensor, seed: int) -> None:
    """Output and gradients on x (B, T, D), wrong orders and tanh GELU named."""
    module_case(
        chk,
        case,
        learner,
        reference,
        x,
        seed=seed,
        variants=lambda: _block_variants(reference, x),
        near_misses=lambda: _gelu_near_misses(reference, x),
    )


def _dropout_eval_case(
    chk: Checker, cls, gen: torch.Generator, x: torch.Tensor, pre_ln: bool
) -> None:
    """dropout=P_DROP in eval mode: two calls agree and match the reference."""
    kind = "pre" if pre_ln else "post"
    case = say(
        f"{kind}-LN, x (2, 6, {D}), dropout={P_DROP}, eval mode: dropout must do nothing",
        f"{kind}-LN，x (2, 6, {D})，dropout={P_DROP}，评估模式：dropout 必须不起作用",
    )
    learner, reference = _pair(chk, cls, gen, case, pre_ln=pre_ln, dropout=P_DROP)
    eval_dropout_case(
        chk,
        case,
        learner,
        reference,
        x,
        _block_variants(reference, x),
        calling=say("calling your block", "调用你的块"),
    )


def _in_train_mode() -> str:
    return say("calling your block in train mode", "在训练模式下调用你的块")


def _residual_stream_case(
    chk: Checker, cls, gen: torch.Generator, x: torch.Tensor, pre_ln: bool
) -> None:
    """dropout=P_DROP in train mode with the sublayers' outputs zeroed: the residual stream
    passes untouched (pre-LN: x itself; post-LN: norm2(norm1(x)))."""
    kind = "pre" if pre_ln else "post"
    case = say(
        f"{kind}-LN, x (2, 6, {D}), dropout={P_DROP}, train mode, sublayer "
        f"outputs zeroed: x must pass through "
        f"{'unchanged' if pre_ln else 'as norm2(norm1(x))'}",
        f"{kind}-LN，x (2, 6, {D})，dropout={P_DROP}，训练模式，子层输出置零：x 必须"
        f"{'原样通过' if pre_ln else '以 norm2(norm1(x)) 的形式通过'}",
    )
    learner, reference = _pair(
        chk, cls, gen, case, zeroed=("attn", "mlp"), pre_ln=pre_ln, dropout=P_DROP
    )
    with torch.no_grad():
        expected = reference.train()(x)  # deterministic: the sublayers give 0
        got = chk.call(case, _in_train_mode(), learner.train(), x)
    chk.compare(
        case,
        say("train-mode output", "训练模式下的输出"),
        got,
        expected,
        variants=[
            (
                mistake(
                    "dropout is applied to the residual stream (x itself is dropped, e.g. "
                    "dropout(x + attn(...))); only the sublayer outputs may be dropped",
                    "dropout 作用在了残差流上（x 本身被随机置零，例如 dropout(x + attn(...))）；"
                    "只能对子层的输出做 dropout",
                ),
                lambda: torch.where(got == 0, torch.zeros_like(expected), expected / (1 - P_DROP)),
            )
        ],
        hint=say(
            "dropout belongs inside the sublayers; x + sublayer(x) must keep x intact",
            "dropout 应放在子层内部；x + sublayer(x) 必须让 x 保持原样",
        ),
    )


def _dropout_acts_case(chk: Checker, cls, gen: torch.Generator, x: torch.Tensor) -> None:
    """Pre-LN, dropout=P_DROP: the train-mode output differs from the eval-mode one."""
    case = say(
        f"pre-LN, x (2, 6, {D}), dropout={P_DROP}, train mode: dropout must act",
        f"pre-LN，x (2, 6, {D})，dropout={P_DROP}，训练模式：dropout 必须起作用",
    )
    learner, reference = _pair(chk, cls, gen, case, pre_ln=True, dropout=P_DROP)
    with torch.no_grad():
        out_eval = learner.eval()(x)
        out_train = chk.call(case, _in_train_mode(), learner.train(), x)
    not_passed_on = mistake(
        "dropout is never applied (the dropout argument is not passed on to the attention and "
        "the MLP)",
        "dropout 从未生效（dropout 参数没有传给注意力和 MLP）",
    )
    dropout_acts(chk, case, out_train, out_eval, P_DROP, not_passed_on)


# Dropout located by its effect, one sublayer at a time: the other sublayer's output
# projection is zero, so the block's output minus x is what the live sublayer added, in train
# mode and (from the reference) in eval mode. Nothing depends on the random stream, which the
# learner's code may draw from in any order (and, when graded, in another process).
B_DROP = 8  # (8, M, D): 1024 outputs, so the share of dropped ones is P_DROP within a few %
MLP_NAMES = ("MLP", "MLP ")  # (English, Chinese) in the messages
ATTENTION_NAMES = ("attention", "注意力")


def _sublayer_added(chk: Checker, cls, gen: torch.Generator, case: str, live: str):
    """``(train, eval)``: what the ``live`` sublayer adds to x in train mode (the learner's
    block) and in eval mode (the reference), pre-LN, dropout=P_DROP, the other one zeroed."""
    zeroed = ("mlp",) if live == "attn" else ("attn",)
    learner, reference = _pair(chk, cls, gen, case, zeroed=zeroed, pre_ln=True, dropout=P_DROP)
    x = chk.randn(gen, B_DROP, M, D)
    with torch.no_grad():
        expected = reference.eval()(x)
        got = chk.call(case, _in_train_mode(), learner.train(), x)
    learner.eval()
    if not (isinstance(got, torch.Tensor) and got.shape == x.shape):
        chk.compare(case, say("train-mode output", "训练模式下的输出"), got, expected)
    return got.detach() - x, expected - x


def _not_passed_on(sublayer: tuple[str, str]) -> str:
    """The first line for a sublayer (English, Chinese) whose train-mode output equals its
    eval-mode one (the mistake, named on its own line, says which argument was lost)."""
    return say(
        f"in train mode (dropout={P_DROP}) nothing of what the {sublayer[0]} adds is dropped",
        f"训练模式下（dropout={P_DROP}），{sublayer[1]}加到 x 上的量没有被 dropout",
    )


def _dropped_twice(sublayer: tuple[str, str]) -> str:
    return mistake(
        f"the {sublayer[0]}'s output is dropped twice: a residual dropout in the block "
        f"(x + drop(sublayer(...)), as in nanoGPT) on top of the one the sublayer applies "
        f"itself; tc's sublayers end with their own dropout, so add their output as it is",
        f"{sublayer[1]}的输出被 dropout 了两次：块里又加了一层残差 dropout"
        f"（x + drop(sublayer(...))，nanoGPT 的写法），而子层自己已经做过一次；"
        f"tc 的子层最后已有 dropout，直接加上它的输出即可",
    )


def _mlp_dropout_case(chk: Checker, cls, gen: torch.Generator) -> None:
    """Only the MLP live: in train mode each of its outputs is either dropped (0) or its
    eval-mode value / (1 - p); both missing and doubled dropout are named."""
    case = say(
        f"pre-LN, x ({B_DROP}, {M}, {D}), dropout={P_DROP}, train mode, attention output "
        f"zeroed: the MLP's output must be dropped once",
        f"pre-LN，x ({B_DROP}, {M}, {D})，dropout={P_DROP}，训练模式，注意力输出置零："
        f"MLP 的输出必须恰好被 dropout 一次",
    )
    added, added_eval = _sublayer_added(chk, cls, gen, case, "mlp")
    if close(added, added_eval, chk.rtol, chk.atol):
        chk.fail(
            case,
            _not_passed_on(MLP_NAMES),
            looks_like=mistake(
                "the MLP has no dropout: the block's dropout is not passed on to "
                "tc.FeedForward(d_model, dropout=dropout)",
                "MLP 没有 dropout：块的 dropout 参数没有传给 tc.FeedForward(d_model, "
                "dropout=dropout)",
            ),
        )
    kept = added != 0
    zero = torch.zeros_like(added_eval)
    once = torch.where(kept, added_eval / (1 - P_DROP), zero)
    twice = torch.where(kept, added_eval / (1 - P_DROP) ** 2, zero)
    chk.compare(
        case,
        say("what the MLP adds in train mode", "训练模式下 MLP 加到 x 上的量"),
        added,
        once,
        variants=[(_dropped_twice(MLP_NAMES), lambda: twice)],
        hint=say(
            f"in train mode each output of the MLP is dropped (0) or scaled by "
            f"1/(1 - {P_DROP}), once",
            f"训练模式下 MLP 的每个输出要么被置零（0），要么乘以 1/(1 - {P_DROP})，只做一次",
        ),
    )


def _attention_dropout_case(chk: Checker, cls, gen: torch.Generator) -> None:
    """Only the attention live: in train mode its output differs from the eval-mode one,
    and about a share p of it is dropped (0), not 1 - (1 - p)**2 (dropped twice). Dropout
    on the attention weights zeroes no output, so it may come on top or not."""
    case = say(
        f"pre-LN, x ({B_DROP}, {M}, {D}), dropout={P_DROP}, train mode, MLP output zeroed: "
        f"the attention's output must be dropped once",
        f"pre-LN，x ({B_DROP}, {M}, {D})，dropout={P_DROP}，训练模式，MLP 输出置零："
        f"注意力的输出必须恰好被 dropout 一次",
    )
    added, added_eval = _sublayer_added(chk, cls, gen, case, "attn")
    if close(added, added_eval, chk.rtol, chk.atol):
        chk.fail(
            case,
            _not_passed_on(ATTENTION_NAMES),
            looks_like=mistake(
                "the attention has no dropout: the block's dropout is not passed on to "
                "tc.MultiHeadAttention(..., dropout=dropout)",
                "注意力没有 dropout：块的 dropout 参数没有传给 tc.MultiHeadAttention(..., "
                "dropout=dropout)",
            ),
        )
    dropped = float((added == 0).double().mean())
    twice = 1 - (1 - P_DROP) ** 2
    if dropped > (P_DROP + twice) / 2:
        chk.fail(
            case,
            say(
                f"{dropped:.0%} of what the attention adds is zero, expected about {P_DROP:.0%}",
                f"注意力加到 x 上的量有 {dropped:.0%} 为零，应约为 {P_DROP:.0%}",
            ),
            detail=say(
                f"one dropout with p={P_DROP} zeroes about {P_DROP:.0%}, two about {twice:.0%}",
                f"p={P_DROP} 的一次 dropout 约置零 {P_DROP:.0%}，两次约 {twice:.0%}",
            ),
            looks_like=_dropped_twice(ATTENTION_NAMES),
        )


def _no_shared_norm(chk, case, learner) -> None:
    """Fail if norm1 and norm2 are one module, or share a parameter tensor."""
    norm1, norm2 = getattr(learner, "norm1", None), getattr(learner, "norm2", None)
    if norm1 is None or norm2 is None:
        return  # the layout sub-check names what is missing
    shared = norm1 is norm2 or any(p is q for p in norm1.parameters() for q in norm2.parameters())
    if shared:
        chk.fail(
            case,
            say(
                "norm1 and norm2 are the same module (or share their parameters)",
                "norm1 和 norm2 是同一个模块（或共用了参数）",
            ),
            looks_like=_shared_norm(),
        )


def _block_width(name, got, want):
    if name.startswith("mlp."):
        return _feedforward_width(True)(name[len("mlp.") :], got, want)
    return None
