"""Checks for notebook 10 (the modern, LLaMA-style block): the RoPE tables and RoPE itself.

SwiGLU's check, ``check_swiglu``, lives with the other MLP checks in ``checks/mlp.py``.
"""

from __future__ import annotations

import torch

from ..nn.positional import apply_rotary, rotary_cos_sin, rotate_half
from ._harness import Checker

# ----------------------------------------------------------------------------- RoPE tables

def _tables(T: int, hd: int, base: float, *, positions=None, exponent=None, layout="half",
            compute_dtype=torch.float64, invert=False):
    """Reference tables with one thing changed, for naming a learner's mistake."""
    i = torch.arange(0, hd, 2, dtype=compute_dtype)
    if exponent is not None:
        i = exponent(hd).to(compute_dtype)
    inv_freq = base ** (i / hd) if invert else 1.0 / base ** (i / hd)
    t = (torch.arange(T, dtype=compute_dtype) if positions is None else positions.to(compute_dtype))
    angles = torch.outer(t, inv_freq)
    angles = (angles.repeat_interleave(2, dim=-1) if layout == "interleaved"
              else torch.cat([angles, angles], dim=-1))
    return angles.cos().float(), angles.sin().float()


def _table_variants(T: int, hd: int, base: float, which: int):
    """``(description, thunk)`` pairs: the ``which``-th table (0 cos, 1 sin) of known mistakes."""
    def pick(**kw):
        return lambda: _tables(T, hd, base, **kw)[which]

    return [
        ("positions start at 1; the first token is position 0 (torch.arange(T))",
         pick(positions=torch.arange(1, T + 1))),
        (("the interleaved layout: each angle repeated twice in a row (repeat_interleave); the "
         "rotate-half layout used here concatenates two copies: cat([angles, angles], -1)"),
         pick(layout="interleaved")),
        (("the exponent uses i / head_dim for i = 0, 1, 2, ...; it should be 2i / head_dim, i.e. "
         "torch.arange(0, head_dim, 2) / head_dim"), pick(exponent=lambda d: torch.arange(d // 2))),
        ("the frequencies are inverted: base ** (2i/d) instead of 1 / base ** (2i/d)",
         pick(invert=True)),
        (("the angles were computed in float32: t * inv_freq loses digits once t is large; "
         "compute them in float64 and cast the cos/sin to float32 at the end"),
         pick(compute_dtype=torch.float32)),
        ("cos and sin are swapped", lambda: _tables(T, hd, base)[1 - which]),
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
    positions up to 16383 (float32 angles are off by about 1e-3 there).
    """
    if not callable(fn):
        raise TypeError(f"check_rotary_tables expects a function, got {type(fn).__name__}")
    with Checker("rotary_cos_sin") as chk:
        # The tables are built on the CPU whatever the device; a correct float64
        # computation cast to float32 is within one float32 rounding (6e-8) of the
        # reference, while float32 angles are off by about 1e-4 at position 16383.
        chk.rtol, chk.atol = 0.0, 1e-6
        cases = [("T=6, head_dim=8, default base", 6, 8, None),
                 ("T=5, head_dim=16, base=500", 5, 16, 500.0),
                 ("T=1, head_dim=4, default base", 1, 4, None),
                 ("T=16384, head_dim=8, default base: large positions", 16384, 8, None)]
        for case, T, hd, base in cases:
            args = (T, hd) if base is None else (T, hd, base)
            result = chk.call(case, f"your function{args}", fn, *args)
            if not isinstance(result, (tuple, list)) or len(result) != 2:
                chk.fail(case, f"your function returned {type(result).__name__}, expected a "
                         f"tuple (cos, sin)")
            base = 10000.0 if base is None else base
            want = rotary_cos_sin(T, hd, base)
            for which, (name, got, expected) in enumerate(zip(("cos", "sin"), result, want)):
                if isinstance(got, torch.Tensor):
                    if got.shape == (T, hd // 2):
                        chk.fail(case, f"{name} has shape {tuple(got.shape)}, expected "
                                 f"{(T, hd)}", looks_like="one angle per pair (head_dim/2) only",
                                 hint="rotate-half pairs channel i with i + head_dim/2: repeat "
                                      "the angles, cat([angles, angles], dim=-1)")
                    if got.dtype == torch.float64:
                        chk.fail(case, f"{name} has dtype float64, expected float32",
                                 hint="compute the angles in float64, then return .float() tables")
                    got = got.cpu()
                hint = ("large positions: compute inv_freq and t * inv_freq in float64, cast the "
                        "tables to float32 at the end" if T > 1000 else
                        "inv_freq = 1 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) "
                        "/ head_dim)")
                chk.compare(case, name, got, expected, variants=_table_variants(T, hd, base, which),
                            hint=hint)
            chk.ok()


# ----------------------------------------------------------------------------- apply_rotary

def _rotate_every_two(x: torch.Tensor) -> torch.Tensor:
    """Interleaved pairs (GPT-J, RoFormer, the handbook): (x0, x1) -> (-x1, x0) per adjacent pair."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([-x2, x1], dim=-1).flatten(-2)


def _rotary_variants(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, T: int, hd: int,
                     base: float):
    half = hd // 2
    cos_i = cos[..., :half].repeat_interleave(2, dim=-1)
    sin_i = sin[..., :half].repeat_interleave(2, dim=-1)

    def shifted(offset):
        c, s = rotary_cos_sin(T, hd, base, offset=offset, dtype=x.dtype, device=x.device)
        return lambda: apply_rotary(x, c, s)

    return [
        (("the interleaved-pairs convention (pairs (0,1), (2,3), ...: GPT-J / the handbook); "
         "these tables use rotate-half: channel i pairs with i + head_dim/2"),
         lambda: x * cos_i + _rotate_every_two(x) * sin_i),
        (("interleaved pairs (x[..., 0::2], x[..., 1::2]) with rotate-half tables; pair channel i "
         "with i + head_dim/2 instead"), lambda: x * cos + _rotate_every_two(x) * sin),
        (("a sign error: this rotates by -angle (x * cos - rotate_half(x) * sin, or rotate_half "
         "returning (x2, -x1) instead of (-x2, x1))"), lambda: x * cos - rotate_half(x) * sin),
        ("the halves are swapped without the minus sign: rotate_half(x) must be cat([-x2, x1])",
         lambda: x * cos + torch.cat([x[..., half:], x[..., :half]], dim=-1) * sin),
        ("positions off by one: row t of cos/sin is position t, starting at 0", shifted(1)),
        ("positions off by one: row t of cos/sin is position t, starting at 0", shifted(-1)),
        ("only x * cos: the rotate_half(x) * sin term is missing", lambda: x * cos),
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
    if not callable(fn):
        raise TypeError(f"check_rotary expects a function, got {type(fn).__name__}")
    with Checker("apply_rotary") as chk:
        gen = chk.generator(0)
        cases = [("x (2, 3, 5, 8), base 10000", (2, 3, 5, 8), 10000.0),
                 ("x (1, 2, 4, 16), base 500", (1, 2, 4, 16), 500.0),
                 ("x (2, 1, 1, 8): T=1 is position 0, the identity", (2, 1, 1, 8), 10000.0),
                 ("x (1, 2, 64, 8): 64 positions", (1, 2, 64, 8), 10000.0)]
        for seed, (case, shape, base) in enumerate(cases):
            T, hd = shape[-2], shape[-1]
            cos, sin = rotary_cos_sin(T, hd, base, dtype=chk.dtype, device=chk.device)
            x = chk.randn(gen, *shape)
            x_ref = x.clone().requires_grad_(True)
            x_mine = x.clone().requires_grad_(True)
            expected = apply_rotary(x_ref, cos, sin)
            got = chk.call(case, "your function", fn, x_mine, cos, sin)
            chk.compare(case, "output", got, expected,
                        variants=_rotary_variants(x, cos, sin, T, hd, base),
                        hint="x1, x2 = x.chunk(2, dim=-1); return x * cos + torch.cat([-x2, x1], "
                             "dim=-1) * sin")
            upstream = chk.randn(chk.generator(100 + seed), *shape)
            (expected * upstream).sum().backward()
            chk.call(case, "backward through your output",
                     lambda got=got, upstream=upstream: (got * upstream).sum().backward())
            chk.compare_grads(case, {"input x": x_mine.grad}, {"input x": x_ref.grad})
            chk.ok()

        case = "input not modified in place"
        x = chk.randn(gen, 2, 2, 5, 8)
        before = x.clone()
        cos, sin = rotary_cos_sin(5, 8, dtype=chk.dtype, device=chk.device)
        with torch.no_grad():
            chk.call(case, "your function", fn, x, cos, sin)
        chk.unchanged(case, "x", before, x)
        chk.ok()
