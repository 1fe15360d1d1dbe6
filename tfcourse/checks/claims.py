"""Check for notebook 11 (claims tested): loading interleaved-RoPE q/k weights into rotate-half code.

Checkpoints trained with the interleaved RoPE convention (the handbook's code, Meta's original
LLaMA) pair channels ``(0, 1), (2, 3), ...`` of each head; ``tfcourse`` and Hugging Face pair
``(i, i + head_dim/2)``. Reordering the rows of the q and k projections inside every head
(even rows first, then odd rows) makes rotate-half code compute the same attention scores.
"""

from __future__ import annotations

import torch

from ._harness import Checker


def reference_permute_qk_rows(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Reorder a q or k projection from the interleaved to the rotate-half RoPE layout.

    ``weight`` is ``(n_heads * head_dim, d_in)`` (an ``nn.Linear`` weight, one block of
    ``head_dim`` rows per head). Returns a new tensor of the same shape, dtype and device in
    which, inside every head, rows ``0, 2, 4, ...`` come first and rows ``1, 3, 5, ...``
    follow, so that pair ``(2i, 2i + 1)`` lands on rows ``(i, i + head_dim/2)``.
    """
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
        raise TypeError(f"weight must be a 2-D tensor (n_heads * head_dim, d_in), got "
                        f"{type(weight).__name__} {tuple(getattr(weight, 'shape', ()))}")
    if not isinstance(n_heads, int) or n_heads < 1 or weight.shape[0] % (2 * n_heads):
        raise ValueError(f"weight's {weight.shape[0]} rows must split into n_heads={n_heads!r} "
                         f"heads of an even head_dim")
    out_features, d_in = weight.shape
    # (head, pair, member of the pair) -> (head, member, pair): evens first, then odds.
    per_head = weight.reshape(n_heads, out_features // n_heads // 2, 2, d_in)
    return per_head.transpose(1, 2).reshape(out_features, d_in).clone()


def _permute_variants(weight: torch.Tensor, n_heads: int):
    """``(description, thunk)`` pairs: the known mistakes, computed on ``weight``."""
    rows, d_in = weight.shape
    head_dim = rows // n_heads

    def odd_rows_first():
        heads = weight.reshape(n_heads, head_dim // 2, 2, d_in).flip(2)
        return heads.transpose(1, 2).reshape(rows, d_in)

    return [
        ("the weight is returned unchanged: interleaved rows loaded as they are", lambda: weight),
        (("the inverse permutation (rotate-half -> interleaved): rows i and i + head_dim/2 "
          "were made neighbours instead of neighbours being split into the two halves"),
         lambda: weight.reshape(n_heads, 2, head_dim // 2, d_in).transpose(1, 2).reshape(rows, d_in)),
        (("the whole matrix permuted as one head: n_heads was ignored, so rows moved "
          "between heads"), lambda: reference_permute_qk_rows(weight, 1)),
        ("each pair's two rows are swapped (odd rows first): the rotation runs backwards",
         odd_rows_first),
        ("the columns (input features) were permuted instead of the rows",
         lambda: reference_permute_qk_rows(weight.T, 1).T),
    ]


def check_permute_qk_rows(fn) -> None:
    """Check ``fn(weight, n_heads) -> weight``.

    Interface: ``weight`` is the ``(n_heads * head_dim, d_in)`` weight of a q or k projection
    trained with interleaved RoPE (each head's channels paired ``(0, 1), (2, 3), ...``).
    ``fn`` returns a new tensor of the same shape, dtype and device whose rows are reordered
    inside every head, even rows first and then odd rows (pair ``(2i, 2i + 1)`` moves to rows
    ``(i, i + head_dim/2)``), the layout that rotate-half RoPE expects. It must not modify
    ``weight``.
    """
    with Checker("permute_qk_rows") as chk:
        gen = chk.generator(0)
        cases = [
            ("q_proj, 2 heads of 8, d_in 16", 2, 8, 16, torch.float32),
            ("k_proj, 1 head of 8, d_in 12", 1, 8, 12, torch.float32),
            ("3 heads of 6, d_in 5", 3, 6, 5, torch.float32),
            ("4 heads of 16, d_in 64, float64", 4, 16, 64, torch.float64),
        ]
        for case, n_heads, head_dim, d_in, dtype in cases:
            weight = torch.randn(n_heads * head_dim, d_in, generator=gen, dtype=dtype).to(chk.device)
            before = weight.clone()
            got = chk.call(case, "your function", fn, weight, n_heads)
            chk.unchanged(case, "weight", before, weight)
            chk.compare(case, "the permuted weight", got, reference_permute_qk_rows(before, n_heads),
                        variants=_permute_variants(before, n_heads),
                        hint="inside each head, the first row of every pair goes to the first "
                             "half and the second row to the second half, in pair order")
            chk.ok()
