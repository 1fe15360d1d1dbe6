"""Check for notebook 10's ``LlamaBlock``: the pre-norm block of LLaMA, wired by the learner
from their RMSNorm, RotaryAttention and SwiGLU.

The reference is ``tfcourse.TransformerBlock(norm="rmsnorm", mlp="swiglu", bias=False,
rope_base=..., n_kv_heads=...)`` with its attention dropout off: each sublayer drops out its
own output (residual dropout, what the capstone trains with), and the block adds nothing.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from ..language import say
from ..nn import block as reference_block
from ._harness import Checker, close, describe_call, mistake
from ._module_cases import eval_dropout_case, inplace_case, module_case
from ._parameters import build, load_reference, randomize_
from .block import ATTENTION_NAMES, MLP_NAMES, _dropped_twice, _not_passed_on, _order_variants

D, H, M = 16, 4, 8
P_DROP = 0.5
B_DROP = 8  # (8, M, D): 1024 outputs, so the share of dropped ones is P_DROP within a few %
# (n_kv_heads, rope_base, x shape): grouped heads, then one head per query head and another
# base, then a single token.
CASES = ((2, 10000.0, (2, 6, D)), (None, 500.0, (2, 5, D)), (1, 10000.0, (1, 1, D)))


def _layer_norm_twin(ref):
    """The reference with each RMSNorm replaced by a LayerNorm of the same scale (no shift):
    the wrong norm, everything else equal."""
    twin = copy.deepcopy(ref)
    for name in ("norm1", "norm2"):
        rms = getattr(twin, name)
        layer = nn.LayerNorm(D, eps=rms.eps, bias=False).to(rms.weight.device, rms.weight.dtype)
        with torch.no_grad():
            layer.weight.copy_(rms.weight)
        setattr(twin, name, layer)
    return twin


def _variants(ref, x):
    wrong_norm = mistake(
        "LayerNorm where LLaMA's block has RMSNorm (it subtracts the mean first); use "
        "tc.RMSNorm(d_model)",
        "LLaMA 的块用的是 RMSNorm，这里却用了 LayerNorm（它先减去均值）；请用 tc.RMSNorm(d_model)",
    )
    return _order_variants(ref, x) + [(wrong_norm, lambda: _layer_norm_twin(ref)(x))]


def _hint() -> str:
    return say(
        "norm1 = RMSNorm, attn = your RotaryAttention, norm2 = RMSNorm, mlp = your SwiGLU, "
        "each with the block's dropout; forward: x = x + attn(norm1(x)), then "
        "x = x + mlp(norm2(x))",
        "norm1 = RMSNorm，attn = 你的 RotaryAttention，norm2 = RMSNorm，mlp = 你的 SwiGLU，"
        "都传入块的 dropout；forward：先 x = x + attn(norm1(x))，再 x = x + mlp(norm2(x))",
    )


def _pair(
    chk: Checker,
    cls,
    gen: torch.Generator,
    case: str,
    *,
    n_kv_heads=2,
    rope_base=10000.0,
    dropout=0.0,
    zeroed: tuple[str, ...] = (),
):
    """``(learner, reference)`` in eval mode, the learner holding a randomized reference's
    weights; the output projections of the sublayers named in ``zeroed`` (``"attn"``,
    ``"mlp"``) are zero, so such a sublayer adds exactly 0 to the stream."""
    kwargs = dict(max_seq_len=M, n_kv_heads=n_kv_heads, rope_base=rope_base, dropout=dropout)
    learner = build(chk, case, cls, D, H, **kwargs).eval()
    reference = reference_block.TransformerBlock(
        D, H, norm="rmsnorm", mlp="swiglu", bias=False, **kwargs
    )
    reference.attn.dropout = 0.0  # the weights' dropout; resid_dropout keeps p
    reference = randomize_(reference, gen)
    projections = {"attn": reference.attn.out_proj, "mlp": reference.mlp.down_proj}
    with torch.no_grad():
        for name in zeroed:
            projections[name].weight.zero_()
    reference = reference.to(chk.device, chk.dtype).eval()
    load_reference(chk, case, learner, reference, bias=False)
    return learner, reference


def check_llama_block(cls) -> None:
    """Check a ``LlamaBlock`` class against ``tfcourse.TransformerBlock`` with RMSNorm,
    SwiGLU, rotary positions, grouped key/value heads and no biases (LLaMA's block).

    Interface: ``cls(d_model, n_heads, *, max_seq_len, n_kv_heads=None, rope_base=10000.0,
    dropout=0.0)``, an ``nn.Module`` with four submodules: ``norm1`` and ``norm2`` (two
    RMSNorms, ``weight`` only), ``attn`` (``RotaryAttention``: ``qkv_proj``, ``out_proj``)
    and ``mlp`` (``SwiGLU``: ``gate_proj``, ``up_proj``, ``down_proj``), no biases.
    ``forward(x (B, T, D)) -> (B, T, D)``::

        x = x + attn(norm1(x));  x = x + mlp(norm2(x))

    ``dropout`` goes to both sublayers, which drop out their own outputs; the residual
    stream is never dropped, and nothing is dropped twice.

    Sub-checks (8): one per config of ``CASES`` (GQA; multi-head with base 500; multi-query
    with one token: output, input and parameter gradients); input not modified in place;
    dropout 0.5 in eval mode (no effect); in train mode with both sublayer outputs zeroed
    (the stream passes untouched); in train mode one sublayer at a time (each one's output
    dropped, once).
    """
    with Checker("LlamaBlock") as chk:
        gen = chk.generator(12)
        for seed, (n_kv, base, shape) in enumerate(CASES):
            call = describe_call(cls, (D, H), dict(max_seq_len=M, n_kv_heads=n_kv, rope_base=base))
            case = say(f"{call}, x {shape}", f"{call}，x {shape}")
            learner, reference = _pair(chk, cls, gen, case, n_kv_heads=n_kv, rope_base=base)
            x = chk.randn(gen, *shape)
            module_case(
                chk,
                case,
                learner,
                reference,
                x,
                variants=lambda r=reference, x=x: _variants(r, x),
                hint=_hint(),
                seed=seed,
            )
            chk.ok()

        case = say("input not modified in place", "输入不得被原地修改")
        learner, _ = _pair(chk, cls, gen, case)
        inplace_case(chk, case, [learner], chk.randn(gen, 2, 5, D))
        chk.ok()

        case = say(
            f"dropout={P_DROP}, eval mode: dropout must do nothing",
            f"dropout={P_DROP}，评估模式：dropout 必须不起作用",
        )
        learner, reference = _pair(chk, cls, gen, case, dropout=P_DROP)
        x = chk.randn(gen, 2, 6, D)
        eval_dropout_case(
            chk,
            case,
            learner,
            reference,
            x,
            _variants(reference, x),
            calling=say("calling your block", "调用你的块"),
        )
        chk.ok()

        _residual_stream_case(chk, cls, gen)
        chk.ok()
        _dropped_once_case(chk, cls, gen, "mlp")
        chk.ok()
        _dropped_once_case(chk, cls, gen, "attn")
        chk.ok()


def _in_train_mode() -> str:
    return say("calling your block in train mode", "在训练模式下调用你的块")


def _residual_stream_case(chk: Checker, cls, gen: torch.Generator) -> None:
    """dropout=P_DROP in train mode with both sublayers' outputs zeroed: x passes untouched."""
    case = say(
        f"x (2, 6, {D}), dropout={P_DROP}, train mode, sublayer outputs zeroed: x must pass "
        f"through unchanged",
        f"x (2, 6, {D})，dropout={P_DROP}，训练模式，子层输出置零：x 必须原样通过",
    )
    learner, _ = _pair(chk, cls, gen, case, dropout=P_DROP, zeroed=("attn", "mlp"))
    x = chk.randn(gen, 2, 6, D)
    with torch.no_grad():
        got = chk.call(case, _in_train_mode(), learner.train(), x)
    learner.eval()
    chk.compare(
        case,
        say("train-mode output", "训练模式下的输出"),
        got,
        x,
        variants=[
            (
                mistake(
                    "dropout is applied to the residual stream (x itself is dropped, e.g. "
                    "dropout(x + attn(...))); only the sublayers drop out their outputs",
                    "dropout 作用在了残差流上（x 本身被随机置零，例如 dropout(x + attn(...))）；"
                    "只有子层会对自己的输出做 dropout",
                ),
                lambda: torch.where(got == 0, torch.zeros_like(x), x / (1 - P_DROP)),
            )
        ],
        hint=say(
            "the sublayers drop out their own outputs; x + sublayer(x) must keep x intact",
            "子层自己会对输出做 dropout；x + sublayer(x) 必须让 x 保持原样",
        ),
    )


def _dropped_once_case(chk: Checker, cls, gen: torch.Generator, live: str) -> None:
    """Only ``live`` (``"attn"`` or ``"mlp"``) adds to the stream: in train mode each of its
    outputs is dropped (0) or its eval-mode value / (1 - p); missing and doubled dropout are
    named. (Nothing depends on the random stream, which the learner's code draws in its own
    order and, when graded, in another process.)"""
    names = ATTENTION_NAMES if live == "attn" else MLP_NAMES
    case = say(
        f"x ({B_DROP}, {M}, {D}), dropout={P_DROP}, train mode, only the {names[0]} live: "
        f"its output must be dropped once",
        f"x ({B_DROP}, {M}, {D})，dropout={P_DROP}，训练模式，只保留{names[1]}："
        f"它的输出必须恰好被 dropout 一次",
    )
    other = "mlp" if live == "attn" else "attn"
    learner, reference = _pair(chk, cls, gen, case, dropout=P_DROP, zeroed=(other,))
    x = chk.randn(gen, B_DROP, M, D)
    with torch.no_grad():
        expected = reference.eval()(x)
        got = chk.call(case, _in_train_mode(), learner.train(), x)
    learner.eval()
    if not (isinstance(got, torch.Tensor) and got.shape == x.shape):
        chk.compare(case, say("train-mode output", "训练模式下的输出"), got, expected)
    added, added_eval = got.detach() - x, expected - x
    if close(added, added_eval, chk.rtol, chk.atol):
        chk.fail(
            case,
            _not_passed_on(names),
            looks_like=mistake(
                f"the {names[0]} has no dropout: the block's dropout is not passed on to it",
                f"{names[1]}没有 dropout：块的 dropout 参数没有传给它",
            ),
        )
    kept = added != 0
    zero = torch.zeros_like(added_eval)
    chk.compare(
        case,
        say(f"what the {names[0]} adds in train mode", f"训练模式下{names[1]}加到 x 上的量"),
        added,
        torch.where(kept, added_eval / (1 - P_DROP), zero),
        variants=[
            (_dropped_twice(names), lambda: torch.where(kept, added_eval / (1 - P_DROP) ** 2, zero))
        ],
        hint=say(
            f"in train mode each output of the sublayer is dropped (0) or scaled by "
            f"1/(1 - {P_DROP}), once",
            f"训练模式下子层的每个输出要么被置零（0），要么乘以 1/(1 - {P_DROP})，只做一次",
        ),
    )
