"""Check for notebook 11 (claims tested): the key-padding mask that fixes "all-zero attention"."""

from __future__ import annotations

import torch

from ._harness import Checker


def reference_padding_mask(is_token: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` bool (True = real token) -> ``(B, 1, T, T)`` bool, True = query may attend to key."""
    B, T = is_token.shape
    return is_token[:, None, None, :].expand(B, 1, T, T)


def check_padding_mask(fn) -> None:
    """Check ``fn(is_token) -> mask``.

    Interface: ``is_token`` is a ``(B, T)`` bool tensor, True for real tokens and
    False for padding. ``fn`` returns a ``(B, 1, T, T)`` bool tensor (the shape
    ``MultiHeadAttention``'s ``attn_mask`` takes) where ``mask[b, 0, i, j]`` is True
    when query ``i`` may attend to key ``j``: exactly when key ``j`` is a real token.
    Padding hides *keys* (columns); every query row keeps its real keys, so no row
    is fully masked.
    """
    with Checker("padding_mask") as chk:
        cases = [
            ("right padding, B=2, T=5", torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])),
            ("left padding, B=2, T=4", torch.tensor([[0, 1, 1, 1], [0, 0, 1, 1]])),
            ("B=1, T=1", torch.tensor([[1]])),
            ("B=3, T=6 mixed", torch.tensor([[1, 0, 1, 1, 0, 1], [1] * 6, [0, 0, 0, 1, 1, 1]])),
        ]
        for case, pattern in cases:
            is_token = pattern.bool().to(chk.device)
            before = is_token.clone()
            got = chk.call(case, "your function", fn, is_token)
            chk.unchanged(case, "is_token", before, is_token)
            expected = reference_padding_mask(is_token)
            B, T = is_token.shape
            if isinstance(got, torch.Tensor) and got.dtype != torch.bool:
                chk.fail(case, f"the mask has dtype {got.dtype}, expected torch.bool",
                         hint="True = may attend; compare or index a bool tensor, don't convert")
            variants = [
                ("the padding hides queries (rows) instead of keys (columns): "
                 "is_token[:, None, :, None] instead of is_token[:, None, None, :]",
                 lambda: is_token[:, None, :, None].expand(B, 1, T, T)),
                ("True and False are swapped: the mask marks padding instead of real tokens",
                 lambda: (~is_token)[:, None, None, :].expand(B, 1, T, T)),
                ("rows and columns both masked (is_token_i & is_token_j): padded queries get "
                 "fully masked rows", lambda: (is_token[:, None, :, None] & is_token[:, None, None, :])),
            ]
            chk.compare(case, "the mask", got, expected, variants=variants,
                        hint="mask[b, 0, i, j] depends only on key j: index is_token with "
                             "[:, None, None, :] and expand to (B, 1, T, T)")
            chk.ok()
