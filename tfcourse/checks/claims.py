"""Check for notebook 11 (claims tested): interleaved-RoPE q/k weights in rotate-half code.

Checkpoints trained with the interleaved RoPE convention (the handbook's code, Meta's original
LLaMA) pair channels ``(0, 1), (2, 3), ...`` of each head; ``tfcourse`` and Hugging Face pair
``(i, i + head_dim/2)``. Reordering the rows of the q and k projections inside every head
(even rows first, then odd rows) makes rotate-half code compute the same attention scores.
"""

from __future__ import annotations

import torch

from ..language import say
from ._harness import Checker, mistake


def reference_permute_qk_rows(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Reorder a q or k projection from the interleaved to the rotate-half RoPE layout.

    ``weight`` is ``(n_heads * head_dim, d_in)`` (an ``nn.Linear`` weight, one block of
    ``head_dim`` rows per head). Returns a new tensor of the same shape, dtype and device in
    which, inside every head, rows ``0, 2, 4, ...`` come first and rows ``1, 3, 5, ...``
    follow, so that pair ``(2i, 2i + 1)`` lands on rows ``(i, i + head_dim/2)``.
    """
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
        got = f"{type(weight).__name__} {tuple(getattr(weight, 'shape', ()))}"
        raise TypeError(
            say(
                f"weight must be a 2-D tensor (n_heads * head_dim, d_in), got {got}",
                f"weight 必须是形状为 (n_heads * head_dim, d_in) 的二维张量，实际得到 {got}",
            )
        )
    if not isinstance(n_heads, int) or n_heads < 1 or weight.shape[0] % (2 * n_heads):
        rows = weight.shape[0]
        raise ValueError(
            say(
                f"weight's {rows} rows must split into n_heads={n_heads!r} heads of "
                f"an even head_dim",
                f"weight 的 {rows} 行必须能分成 n_heads={n_heads!r} 个头，"
                f"且每个头的 head_dim 为偶数",
            )
        )
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
        (
            mistake(
                "the weight is returned unchanged: interleaved rows loaded as they are",
                "权重原样返回了：交错排列的行被原封不动地加载",
            ),
            lambda: weight,
        ),
        (
            mistake(
                "the inverse permutation (rotate-half -> interleaved): rows i and i + head_dim/2 "
                "were made neighbours instead of neighbours being split into the two halves",
                "用了逆排列（rotate-half -> 交错）：把第 i 行和第 i + head_dim/2 行排到了一起，"
                "而应当把相邻的两行拆到前后两半",
            ),
            lambda: (
                weight.reshape(n_heads, 2, head_dim // 2, d_in).transpose(1, 2).reshape(rows, d_in)
            ),
        ),
        (
            mistake(
                "the whole matrix permuted as one head: n_heads was ignored, so rows moved "
                "between heads",
                "把整个矩阵当作一个头来重排：忽略了 n_heads，行被挪到了别的头里",
            ),
            lambda: reference_permute_qk_rows(weight, 1),
        ),
        (
            mistake(
                "each pair's two rows are swapped (odd rows first): the rotation runs backwards",
                "每一对中的两行顺序反了（奇数行在前）：旋转方向反了",
            ),
            odd_rows_first,
        ),
        (
            mistake(
                "the columns (input features) were permuted instead of the rows",
                "重排的是列（输入特征），而不是行",
            ),
            lambda: reference_permute_qk_rows(weight.T, 1).T,
        ),
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
            (
                say("q_proj, 2 heads of 8, d_in 16", "q_proj，2 个头，每头 8 行，d_in 16"),
                2,
                8,
                16,
                torch.float32,
            ),
            (
                say("k_proj, 1 head of 8, d_in 12", "k_proj，1 个头，每头 8 行，d_in 12"),
                1,
                8,
                12,
                torch.float32,
            ),
            (say("3 heads of 6, d_in 5", "3 个头，每头 6 行，d_in 5"), 3, 6, 5, torch.float32),
            (
                say("4 heads of 16, d_in 64, float64", "4 个头，每头 16 行，d_in 64，float64"),
                4,
                16,
                64,
                torch.float64,
            ),
        ]
        for case, n_heads, head_dim, d_in, dtype in cases:
            weight = torch.randn(n_heads * head_dim, d_in, generator=gen, dtype=dtype).to(
                chk.device
            )
            before = weight.clone()
            got = chk.call(case, say("your function", "运行你的函数"), fn, weight, n_heads)
            chk.unchanged(case, "weight", before, weight)
            chk.compare(
                case,
                say("the permuted weight", "重排后的权重"),
                got,
                reference_permute_qk_rows(before, n_heads),
                variants=_permute_variants(before, n_heads),
                hint=say(
                    "inside each head, the first row of every pair goes to the first "
                    "half and the second row to the second half, in pair order",
                    "在每个头内部，按对的先后顺序，把每一对的第一行放进前半部分，"
                    "第二行放进后半部分",
                ),
            )
            chk.ok()
