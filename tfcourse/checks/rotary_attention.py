"""Check for notebook 10's ``RotaryAttention``: causal attention with rotary positions and
grouped key/value heads, LLaMA's attention, assembled from the learner's parts.

The reference is ``tfcourse.MultiHeadAttention(..., rope_base=, n_kv_heads=)`` with its
attention dropout off: the learner's module drops out its output only (residual dropout,
what the capstone trains with).
"""

from __future__ import annotations

import math

import torch

from ..language import say
from ..nn.attention import MultiHeadAttention, repeat_kv
from ..nn.positional import apply_rotary, rotary_cos_sin
from ._harness import Checker, describe_call, mistake
from ._module_cases import dropout_acts, eval_dropout_case, inplace_case, module_case
from ._parameters import build, load_reference, randomize_

# (d_model, n_heads, keyword arguments, T): GQA with the defaults, then MHA with biases and
# another base, then MQA; the sequences are shorter than max_seq_len (the tables' first rows).
CASES = (
    (16, 4, dict(n_kv_heads=2), 6),
    (12, 2, dict(rope_base=500.0, bias=True), 5),
    (16, 4, dict(n_kv_heads=1), 7),
)
MAX_SEQ_LEN = 8


def _every_two(t: torch.Tensor) -> torch.Tensor:
    """Interleaved pairs (GPT-J, Meta's LLaMA code): ``(t0, t1) -> (-t1, t0)`` per pair."""
    return torch.stack([-t[..., 1::2], t[..., 0::2]], dim=-1).flatten(-2)


def _rotation(pairs: str, cos: torch.Tensor, sin: torch.Tensor):
    """``rotate(t)`` for the channels ``t (B, H, T, head_dim)``: rotate-half (``"half"``, the
    reference), or interleaved pairs ``(0, 1), (2, 3), ...``, each with its own angle
    (``"interleaved"``) or with the rotate-half tables as they are (``"interleaved_tables"``)."""
    if pairs == "half":
        return lambda t: apply_rotary(t, cos, sin)
    if pairs == "interleaved":
        half = cos.shape[-1] // 2
        cos = cos[..., :half].repeat_interleave(2, dim=-1)
        sin = sin[..., :half].repeat_interleave(2, dim=-1)
    return lambda t: t * cos + _every_two(t) * sin


def _attend(ref, x, *, rotate="qk", tiled=False, width_scale=False, pairs="half", causal=True):
    """``ref``'s output on ``x (B, T, D)`` with one deliberate deviation (for diagnosis)."""
    B, T, D = x.shape
    hd = ref.head_dim
    q, k, v = ref.qkv_proj(x).split([D, ref.kv_dim, ref.kv_dim], dim=-1)
    q, k, v = (t.view(B, T, -1, hd).transpose(1, 2) for t in (q, k, v))
    cos, sin = rotary_cos_sin(MAX_SEQ_LEN, hd, ref.rotary.base)
    # (Rows from another offset would give the same scores: rotary positions are relative.)
    cos, sin = cos[:T].to(x.device, x.dtype), sin[:T].to(x.device, x.dtype)
    rotated = _rotation(pairs, cos, sin)
    q = rotated(q) if "q" in rotate else q
    k = rotated(k) if "k" in rotate else k
    v = rotated(v) if "v" in rotate else v
    n_rep = ref.n_heads // ref.n_kv_heads
    k, v = ((t.repeat(1, n_rep, 1, 1) if tiled else repeat_kv(t, n_rep)) for t in (k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(D if width_scale else hd)
    if causal:
        scores = scores.masked_fill(~ref.mask[:T, :T], float("-inf"))
    y = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, D)
    return ref.resid_dropout(ref.out_proj(y))


def _mistakes():
    interleaved = mistake(
        "q and k are rotated in interleaved pairs (0, 1), (2, 3), ... (GPT-J's layout): this "
        "module uses rotate-half, channel i paired with i + head_dim/2 (apply_rotary)",
        "q 和 k 是按交错的维度对 (0, 1), (2, 3), ... 旋转的（GPT-J 的布局）：这个模块用的是 "
        "rotate-half，通道 i 与 i + head_dim/2 配对（apply_rotary）",
    )
    return [
        (
            mistake(
                "q and k are not rotated (no rotary positions)",
                "q 和 k 都没有旋转（没有旋转位置编码）",
            ),
            dict(rotate=""),
        ),
        (mistake("only q is rotated, not k", "只旋转了 q，没有旋转 k"), dict(rotate="q")),
        (mistake("only k is rotated, not q", "只旋转了 k，没有旋转 q"), dict(rotate="k")),
        (
            mistake(
                "v is rotated too (positions enter q and k only)",
                "连 v 也旋转了（位置只作用于 q 和 k）",
            ),
            dict(rotate="qkv"),
        ),
        (
            mistake(
                "the key/value heads are tiled (kv.repeat) instead of grouped: query head h "
                "must read key/value head h // n_rep",
                "键/值头被平铺了（kv.repeat），而不是分组：查询头 h 应当读取键/值头 h // n_rep",
            ),
            dict(tiled=True),
        ),
        (
            mistake(
                "the scores are divided by sqrt(d_model) instead of sqrt(head_dim)",
                "分数除以的是 sqrt(d_model)，而不是 sqrt(head_dim)",
            ),
            dict(width_scale=True),
        ),
        (interleaved, dict(pairs="interleaved")),
        (interleaved, dict(pairs="interleaved_tables")),
        (
            mistake(
                "no causal mask: a token attends to the tokens after it (set the scores above "
                "the diagonal to -inf before the softmax)",
                "没有施加因果掩码：词元关注到了它后面的词元（softmax 之前把对角线以上的分数"
                "设为 -inf）",
            ),
            dict(causal=False),
        ),
    ]


def _hint() -> str:
    return say(
        "split qkv_proj's output into q (D channels), k and v (n_kv_heads * head_dim each), give "
        "each a head axis; rotate q and k with the first T rows of your cos/sin tables; "
        "repeat_kv k and v to n_heads heads; causal attention scaled by sqrt(head_dim); merge the "
        "heads, out_proj, then the output dropout",
        "把 qkv_proj 的输出切成 q（D 个通道）、k 和 v（各 n_kv_heads * head_dim 个通道），"
        "各自拆出头轴；"
        "用 cos/sin 表的前 T 行旋转 q 和 k；用 repeat_kv 把 k、v 扩展到 n_heads 个头；"
        "按 sqrt(head_dim) 缩放的因果注意力；合并各头，经过 out_proj，最后做输出 dropout",
    )


def _pair(chk: Checker, case: str, cls, gen: torch.Generator, d_model, n_heads, **kwargs):
    """``(learner, reference)`` in eval mode, the learner holding the reference's weights."""
    options = {"rope_base": 10000.0, "bias": False, **kwargs}
    learner = build(chk, case, cls, d_model, n_heads, max_seq_len=MAX_SEQ_LEN, **kwargs).eval()
    reference = MultiHeadAttention(d_model, n_heads, max_seq_len=MAX_SEQ_LEN, **options)
    reference.dropout = 0.0  # residual dropout only (resid_dropout keeps its p)
    reference = randomize_(reference, gen).to(chk.device, chk.dtype).eval()
    load_reference(chk, case, learner, reference, bias=options["bias"])
    return learner, reference


def check_rotary_attention(cls) -> None:
    """Check a ``RotaryAttention`` class against ``tfcourse.MultiHeadAttention`` with
    rotary positions and grouped key/value heads.

    Interface: ``cls(d_model, n_heads, *, max_seq_len, n_kv_heads=None, rope_base=10000.0,
    dropout=0.0, bias=False)``, an ``nn.Module`` with ``qkv_proj`` (``Linear(D, D + 2K)``,
    ``K = n_kv_heads * head_dim``; rows q, then k, then v) and ``out_proj`` (``Linear(D,
    D)``); ``forward(x (B, T, D)) -> (B, T, D)``, causal, q and k rotated (rotate-half
    layout) for positions 0..T-1, dropout on the output only.

    Sub-checks (8): one per config of ``CASES`` (GQA, MHA with biases and base 500, MQA:
    output, input and parameter gradients); T=1; T = max_seq_len; dropout 0.5 in eval mode;
    in train mode, an output that differs from the eval-mode one, about half of it zeroed (the
    output dropped out, not the attention weights); input not modified in place.
    """
    with Checker("RotaryAttention") as chk:
        gen = chk.generator(10)
        for seed, (d_model, n_heads, kwargs, T) in enumerate(CASES):
            call = describe_call(cls, (d_model, n_heads), dict(max_seq_len=MAX_SEQ_LEN, **kwargs))
            case = say(f"{call}, x (2, {T}, {d_model})", f"{call}，x (2, {T}, {d_model})")
            learner, reference = _pair(chk, case, cls, gen, d_model, n_heads, **kwargs)
            x = chk.randn(gen, 2, T, d_model)
            module_case(
                chk,
                case,
                learner,
                reference,
                x,
                variants=lambda r=reference, x=x: [
                    (label, lambda o=o: _attend(r, x, **o)) for label, o in _mistakes()
                ],
                hint=_hint(),
                seed=seed,
            )
            chk.ok()

        learner, reference = _pair(chk, "T=1", cls, gen, 16, 4, n_kv_heads=2)
        for T in (1, MAX_SEQ_LEN):
            case = say(f"x (3, {T}, 16), n_kv_heads=2", f"x (3, {T}, 16)，n_kv_heads=2")
            x = chk.randn(gen, 3, T, 16)
            module_case(
                chk,
                case,
                learner,
                reference,
                x,
                variants=lambda x=x: [
                    (label, lambda o=o: _attend(reference, x, **o)) for label, o in _mistakes()
                ],
                hint=_hint(),
                seed=10 + T,
            )
            chk.ok()

        case = say(
            "dropout=0.5, eval mode: dropout must do nothing",
            "dropout=0.5，评估模式：dropout 必须不起作用",
        )
        learner, reference = _pair(chk, case, cls, gen, 16, 4, n_kv_heads=2, dropout=0.5)
        x = chk.randn(gen, 2, 6, 16)
        variants = [(label, lambda o=o: _attend(reference, x, **o)) for label, o in _mistakes()]
        eval_dropout_case(
            chk,
            case,
            learner,
            reference,
            x,
            variants,
            calling=say("calling your module", "调用你的模块"),
        )
        chk.ok()

        _train_case(chk, learner, reference, x)

        case = say("input not modified in place", "输入不得被原地修改")
        inplace_case(chk, case, [learner], chk.randn(gen, 2, 5, 16))
        chk.ok()


def _train_case(chk: Checker, learner, reference, x: torch.Tensor) -> None:
    """dropout=0.5 in train mode: the output is not the eval-mode one (dropout acts), and
    about half of its entries are exactly 0, as dropout on the output makes them. (The
    random numbers cannot be compared: a sealed worker draws its own.) Dropout on the
    attention weights leaves no zero: the weights are mixed by ``out_proj`` after it."""
    case = say("dropout=0.5, train mode", "dropout=0.5，训练模式")
    with torch.no_grad():
        expected = reference(x)
        learner.train()
        try:
            got = chk.call(case, say("calling your module", "调用你的模块"), learner, x)
        finally:
            learner.eval()
    ignored = mistake(
        "the output is never dropped out in train mode (dropout ignored)",
        "训练模式下输出没有做 dropout（dropout 参数被忽略了）",
    )
    dropout_acts(chk, case, got, expected, 0.5, ignored)
    if isinstance(got, torch.Tensor) and got.shape == expected.shape:
        zeros = (got == 0).double().mean().item()
        if zeros < 0.25:  # 192 entries: an output dropout of 0.5 leaves fewer with chance < 1e-12
            chk.fail(
                case,
                say(
                    f"{zeros:.0%} of the output is 0; output dropout zeroes about half",
                    f"输出中只有 {zeros:.0%} 为 0；对输出做 dropout 会把约一半置零",
                ),
                looks_like=mistake(
                    "dropout acts on the attention weights instead of the output (this module "
                    "drops out its output only, after out_proj)",
                    "dropout 作用在了注意力权重上，而不是输出上（这个模块只对输出做 dropout，"
                    "放在 out_proj 之后）",
                ),
            )
    chk.ok()
