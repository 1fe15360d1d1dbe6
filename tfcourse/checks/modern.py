"""Checks for notebook 10 (the modern, LLaMA-style block): the RoPE tables and RoPE itself.

SwiGLU's check, ``check_swiglu``, lives with the other MLP checks in ``checks/mlp.py``.
"""

from __future__ import annotations

import torch

from ..language import say
from ..nn.positional import apply_rotary, rotary_cos_sin, rotate_half
from ._harness import Checker, mistake, require_function
from .cases import case_int

# ----------------------------------------------------------------------------- RoPE tables


def _tables(
    T: int,
    hd: int,
    base: float,
    *,
    positions=None,
    exponent=None,
    layout="half",
    compute_dtype=torch.float64,
    invert=False,
):
    """Reference tables with one thing changed, for naming a learner's mistake."""
    i = torch.arange(0, hd, 2, dtype=compute_dtype)
    if exponent is not None:
        i = exponent(hd).to(compute_dtype)
    inv_freq = base ** (i / hd) if invert else 1.0 / base ** (i / hd)
    t = torch.arange(T, dtype=compute_dtype) if positions is None else positions.to(compute_dtype)
    angles = torch.outer(t, inv_freq)
    angles = (
        angles.repeat_interleave(2, dim=-1)
        if layout == "interleaved"
        else torch.cat([angles, angles], dim=-1)
    )
    return angles.cos().float(), angles.sin().float()


def _table_variants(T: int, hd: int, base: float, which: int):
    """``(description, thunk)`` pairs: the ``which``-th table (0 cos, 1 sin) of known mistakes."""

    def pick(**kw):
        return lambda: _tables(T, hd, base, **kw)[which]

    return [
        (
            mistake(
                "positions start at 1; the first token is position 0 (torch.arange(T))",
                "位置从 1 开始了；第一个词元的位置是 0（torch.arange(T)）",
            ),
            pick(positions=torch.arange(1, T + 1)),
        ),
        (
            mistake(
                "the interleaved layout: each angle repeated twice in a row (repeat_interleave); "
                "the rotate-half layout used here concatenates two copies: "
                "cat([angles, angles], -1)",
                "用了交错布局：每个角度连着重复两次（repeat_interleave）；这里用的 rotate-half 布局"
                "是把两份拼接起来：cat([angles, angles], -1)",
            ),
            pick(layout="interleaved"),
        ),
        (
            mistake(
                "the exponent uses i / head_dim for i = 0, 1, 2, ...; it should be 2i / head_dim, "
                "i.e. torch.arange(0, head_dim, 2) / head_dim",
                "指数用的是 i / head_dim（i = 0, 1, 2, ...）；应为 2i / head_dim，即 "
                "torch.arange(0, head_dim, 2) / head_dim",
            ),
            pick(exponent=lambda d: torch.arange(d // 2)),
        ),
        (
            mistake(
                "the frequencies are inverted: base ** (2i/d) instead of 1 / base ** (2i/d)",
                "频率取了倒数：用了 base ** (2i/d)，而不是 1 / base ** (2i/d)",
            ),
            pick(invert=True),
        ),
        (
            mistake(
                "the angles were computed in float32: t * inv_freq loses digits once t is large; "
                "compute them in float64 and cast the cos/sin to float32 at the end",
                "角度是用 float32 算的：t 一大，t * inv_freq 就会丢失有效数字；请用 float64 计算，"
                "最后再把 cos/sin 转成 float32",
            ),
            pick(compute_dtype=torch.float32),
        ),
        (
            mistake("cos and sin are swapped", "cos 和 sin 弄反了"),
            lambda: _tables(T, hd, base)[1 - which],
        ),
    ]


def check_rotary_tables(fn) -> None:
    """Check ``fn(T, head_dim, base=10000.0) -> (cos, sin)``.

    Interface: returns two float32 tensors of shape ``(T, head_dim)`` for positions
    ``t = 0 .. T-1`` in the rotate-half layout::

        inv_freq = 1 / base ** (arange(0, head_dim, 2) / head_dim)    # (head_dim/2,)
        angles   = outer(t, inv_freq)                                  # (T, head_dim/2)
        cos, sin = cat([angles, angles], -1).cos(), ....sin()          # (T, head_dim)

    with the angles computed in float64 (float32 loses digits at large positions).
    The reference is ``tfcourse.rotary_cos_sin``.

    Sub-checks (4): T=6, head_dim=8, default base; T=5, head_dim=16, base=500; T=1;
    positions up to 16383 (float32 angles are off by about 1e-3 there). In grading the
    sizes and the base are drawn for the learner (``cases.case_int``).
    """
    require_function("check_rotary_tables", fn)
    with Checker("rotary_cos_sin") as chk:
        # The tables are built on the CPU whatever the device; a correct float64
        # computation cast to float32 is within one float32 rounding (6e-8) of the
        # reference, while float32 angles are off by about 1e-4 at position 16383.
        chk.rtol, chk.atol = 0.0, 1e-6
        # In grading, every size and the base are drawn for the learner (cases.case_int).
        sizes = [
            (case_int(1, 6, 2, 64), 2 * case_int(2, 4, 2, 32), None),
            (case_int(3, 5, 2, 64), 2 * case_int(4, 8, 2, 32), float(case_int(5, 500, 50, 50000))),
            (1, 2 * case_int(6, 2, 1, 16), None),
            (case_int(7, 16384, 12000, 16384), 2 * case_int(8, 4, 2, 8), None),
        ]
        for T, hd, base in sizes:
            case = say(
                f"T={T}, head_dim={hd}, " + ("default base" if base is None else f"base={base:g}"),
                f"T={T}，head_dim={hd}，" + ("默认 base" if base is None else f"base={base:g}"),
            )
            if T > 10000:
                case += say(": large positions", "：位置很大")
            args = (T, hd) if base is None else (T, hd, base)
            result = chk.call(
                case, say(f"your function{args}", f"以参数 {args} 运行你的函数"), fn, *args
            )
            if not isinstance(result, (tuple, list)) or len(result) != 2:
                chk.fail(
                    case,
                    say(
                        f"your function returned {type(result).__name__}, expected a "
                        f"tuple (cos, sin)",
                        f"你的函数返回了 {type(result).__name__}，应返回元组 (cos, sin)",
                    ),
                )
            base = 10000.0 if base is None else base
            want = rotary_cos_sin(T, hd, base)
            for which, (name, got, expected) in enumerate(
                zip(("cos", "sin"), result, want, strict=True)
            ):
                if isinstance(got, torch.Tensor):
                    if got.shape == (T, hd // 2):
                        chk.fail(
                            case,
                            say(
                                f"{name} has shape {tuple(got.shape)}, expected {(T, hd)}",
                                f"{name} 的形状是 {tuple(got.shape)}，应为 {(T, hd)}",
                            ),
                            looks_like=mistake(
                                "one angle per pair (head_dim/2) only",
                                "每对通道只给了一个角度（只有 head_dim/2 列）",
                            ),
                            hint=say(
                                "rotate-half pairs channel i with i + head_dim/2: "
                                "repeat the angles, cat([angles, angles], dim=-1)",
                                "rotate-half 把通道 i 与 i + head_dim/2 配成一对：把角度"
                                "重复一份，cat([angles, angles], dim=-1)",
                            ),
                        )
                    if got.dtype == torch.float64:
                        chk.fail(
                            case,
                            say(
                                f"{name} has dtype float64, expected float32",
                                f"{name} 的 dtype 是 float64，应为 float32",
                            ),
                            hint=say(
                                "compute the angles in float64, then return .float() tables",
                                "用 float64 计算角度，然后返回 .float() 之后的表",
                            ),
                        )
                    got = got.cpu()
                hint = (
                    say(
                        "large positions: compute inv_freq and t * inv_freq in float64, cast "
                        "the tables to float32 at the end",
                        "位置很大：用 float64 计算 inv_freq 和 t * inv_freq，最后再把表转成 "
                        "float32",
                    )
                    if T > 1000
                    else say(
                        "inv_freq = 1 / base ** (torch.arange(0, head_dim, 2, "
                        "dtype=torch.float64) / head_dim)",
                        "应这样计算：inv_freq = 1 / base ** (torch.arange(0, head_dim, 2, "
                        "dtype=torch.float64) / head_dim)",
                    )
                )
                chk.compare(
                    case,
                    say(name, f"{name} 表"),
                    got,
                    expected,
                    variants=_table_variants(T, hd, base, which),
                    hint=hint,
                )
            chk.ok()


# ----------------------------------------------------------------------------- apply_rotary


def _rotate_every_two(x: torch.Tensor) -> torch.Tensor:
    """Interleaved pairs (GPT-J, RoFormer, the handbook): (x0, x1) -> (-x1, x0) per pair."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([-x2, x1], dim=-1).flatten(-2)


def _rotary_variants(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, T: int, hd: int, base: float
):
    half = hd // 2
    cos_i = cos[..., :half].repeat_interleave(2, dim=-1)
    sin_i = sin[..., :half].repeat_interleave(2, dim=-1)

    def shifted(offset):
        c, s = rotary_cos_sin(T, hd, base, offset=offset, dtype=x.dtype, device=x.device)
        return lambda: apply_rotary(x, c, s)

    off_by_one = say(
        "positions off by one: row t of cos/sin is position t, starting at 0",
        "位置差了一位：cos/sin 的第 t 行对应位置 t，从 0 开始",
    )
    return [
        (
            mistake(
                "the interleaved-pairs convention (pairs (0,1), (2,3), ...: GPT-J / the handbook); "
                "these tables use rotate-half: channel i pairs with i + head_dim/2",
                "用了交错配对的约定（配对 (0,1), (2,3), ...：GPT-J / 手册的写法）；这些表用的是 "
                "rotate-half：通道 i 与 i + head_dim/2 配对",
            ),
            lambda: x * cos_i + _rotate_every_two(x) * sin_i,
        ),
        (
            mistake(
                "interleaved pairs (x[..., 0::2], x[..., 1::2]) with rotate-half tables; pair "
                "channel i with i + head_dim/2 instead",
                "用 rotate-half 的表做了交错配对（x[..., 0::2], x[..., 1::2]）；应把通道 i 与 "
                "i + head_dim/2 配对",
            ),
            lambda: x * cos + _rotate_every_two(x) * sin,
        ),
        (
            mistake(
                "a sign error: this rotates by -angle (x * cos - rotate_half(x) * sin, or "
                "rotate_half returning (x2, -x1) instead of (-x2, x1))",
                "符号错误：这相当于旋转了 -angle（x * cos - rotate_half(x) * sin，或 rotate_half "
                "返回了 (x2, -x1) 而不是 (-x2, x1)）",
            ),
            lambda: x * cos - rotate_half(x) * sin,
        ),
        (
            mistake(
                "the halves are swapped without the minus sign: rotate_half(x) must be "
                "cat([-x2, x1])",
                "交换了前后两半，却漏了负号：rotate_half(x) 必须是 cat([-x2, x1])",
            ),
            lambda: x * cos + torch.cat([x[..., half:], x[..., :half]], dim=-1) * sin,
        ),
        (off_by_one, shifted(1)),
        (off_by_one, shifted(-1)),
        (
            mistake(
                "only x * cos: the rotate_half(x) * sin term is missing",
                "只算了 x * cos：缺少 rotate_half(x) * sin 这一项",
            ),
            lambda: x * cos,
        ),
    ]


def check_rotary(fn) -> None:
    """Check ``fn(x, cos, sin) -> rotated``: rotary position embedding (rotate-half convention).

    Interface: ``x`` is ``(B, H, T, head_dim)`` (queries or keys), ``cos``/``sin`` are
    ``(T, head_dim)`` from ``rotary_cos_sin``; the result has ``x``'s shape and is::

        x * cos + rotate_half(x) * sin,   rotate_half(x) = cat([-x2, x1], -1)

    where ``x1, x2`` are the first and second halves of the last dimension. The
    reference is ``tfcourse.apply_rotary`` (LLaMA / Hugging Face convention).

    Sub-checks (5): output and gradient for x (2, 3, 5, 8); head_dim=16, base=500;
    T=1 at position 0 (the identity); a long table (T=64); input not modified in place.
    Names the interleaved-pairs convention, a sign error, and positions off by one.
    """
    require_function("check_rotary", fn)
    with Checker("apply_rotary") as chk:
        gen = chk.generator(0)
        cases = [
            (
                say("x (2, 3, 5, 8), base 10000", "x (2, 3, 5, 8)，base 10000"),
                (2, 3, 5, 8),
                10000.0,
            ),
            (say("x (1, 2, 4, 16), base 500", "x (1, 2, 4, 16)，base 500"), (1, 2, 4, 16), 500.0),
            (
                say(
                    "x (2, 1, 1, 8): T=1 is position 0, the identity",
                    "x (2, 1, 1, 8)：T=1 即位置 0，旋转是恒等变换",
                ),
                (2, 1, 1, 8),
                10000.0,
            ),
            (
                say("x (1, 2, 64, 8): 64 positions", "x (1, 2, 64, 8)：64 个位置"),
                (1, 2, 64, 8),
                10000.0,
            ),
        ]
        for seed, (case, shape, base) in enumerate(cases):
            T, hd = shape[-2], shape[-1]
            cos, sin = rotary_cos_sin(T, hd, base, dtype=chk.dtype, device=chk.device)
            x = chk.randn(gen, *shape)
            x_ref = x.clone().requires_grad_(True)
            x_mine = x.clone().requires_grad_(True)
            expected = apply_rotary(x_ref, cos, sin)
            got = chk.call(case, say("your function", "运行你的函数"), fn, x_mine, cos, sin)
            variants = _rotary_variants(x, cos, sin, T, hd, base)
            chk.compare(
                case,
                say("output", "输出"),
                got,
                expected,
                variants=variants,
                hint=say(
                    "split the last dimension into halves x1, x2; each pair "
                    "(x1[i], x2[i]) turns by its angle: x1 cos - x2 sin, x1 sin + "
                    "x2 cos (the halves layout: help(check_rotary))",
                    "把最后一维分成两半 x1、x2；每一对 (x1[i], x2[i]) 按各自的角度旋转："
                    "x1 cos - x2 sin，x1 sin + x2 cos（对半拆分的布局，见 help(check_rotary)）",
                ),
            )
            upstream = chk.randn(chk.generator(100 + seed), *shape)
            (expected * upstream).sum().backward()
            chk.call(
                case,
                say("backward through your output", "对你的输出做反向传播"),
                lambda got=got, upstream=upstream: (got * upstream).sum().backward(),
            )
            chk.compare_grads(
                case,
                {"input x": x_mine.grad},
                {"input x": x_ref.grad},
                explain=lambda got=got, expected=expected, variants=variants: chk.output_mistake(
                    got, expected, variants
                ),
            )
            chk.ok()

        case = say("input not modified in place", "输入不得被原地修改")
        x = chk.randn(gen, 2, 2, 5, 8)
        before = x.clone()
        cos, sin = rotary_cos_sin(5, 8, dtype=chk.dtype, device=chk.device)
        with torch.no_grad():
            chk.call(case, say("your function", "运行你的函数"), fn, x, cos, sin)
        chk.unchanged(case, "x", before, x)
        chk.ok()
