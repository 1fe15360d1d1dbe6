"""Input validation shared by every public module.

Each helper raises ``ValueError`` or ``TypeError`` with a message that names
what was expected and what was received, so a wrong call fails at the
boundary of the module instead of deep inside a matmul.

Validation happens once, at the entry point. A module that has checked its
arguments runs its layers inside ``with inputs_checked():``; while that is
active, ``needed()`` is False and the inner layers skip their own checks (the
tensors they get were built from inputs already checked). A layer called
directly, outside any such block, checks its input as usual.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable

import torch

from ..language import say


class _Depth(threading.local):
    """How many ``inputs_checked()`` blocks are active, per thread.

    Per thread so that one thread running a GPT does not switch off the checks
    of a learner's layer called in another thread.

    ``value`` is set in ``__init__`` (which ``threading.local`` runs again in every
    thread that touches the object), not as a class attribute: with a class default,
    the instance's ``__dict__`` lacks ``value`` until the first ``inputs_checked()``
    block writes it, and ``torch.compile``, tracing a layer before any eager call,
    guards on that absence, then finds it broken by the frame's own write ("Guard
    failed on the same frame it was created").
    """

    def __init__(self) -> None:
        self.value = 0


_depth = _Depth()


def needed() -> bool:
    """True unless an entry point that validated its inputs is running its layers."""
    return _depth.value == 0


class inputs_checked:
    """``with validate.inputs_checked(): ...``: the caller has validated its inputs, so the
    layers it calls inside the block skip theirs (``needed()`` is False there).

    A class rather than ``@contextmanager``: it is entered on every forward pass and
    ``__enter__``/``__exit__`` cost less than a generator. A fresh instance per ``with``
    (not a shared one) because ``torch.compile`` can trace that but not a global
    instance. Reentrant: nested blocks count up and down, and ``__exit__`` runs
    even when the body raises.
    """

    __slots__ = ()

    def __enter__(self):
        _depth.value += 1
        return self

    def __exit__(self, *exc_info):
        _depth.value -= 1
        return False


def positive_int(name: str, value) -> int:
    """Return ``value`` if it is an int > 0, else raise naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            say(
                f"{name} must be an int, got {type(value).__name__} ({value!r})",
                f"{name} 必须是 int，实际是 {type(value).__name__}（{value!r}）",
            )
        )
    if value <= 0:
        raise ValueError(
            say(
                f"{name} must be a positive int, got {value}",
                f"{name} 必须是正整数，实际是 {value}",
            )
        )
    return value


def probability(name: str, value) -> float:
    """Return ``value`` if it is a number in [0, 1), else raise naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            say(
                f"{name} must be a float in [0, 1), got {type(value).__name__}",
                f"{name} 必须是 [0, 1) 中的 float，实际是 {type(value).__name__}",
            )
        )
    if not 0.0 <= value < 1.0:
        raise ValueError(
            say(
                f"{name} must be in [0, 1), got {value}", f"{name} 必须在 [0, 1) 中，实际是 {value}"
            )
        )
    return float(value)


def positive_float(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            say(
                f"{name} must be a positive float, got {type(value).__name__}",
                f"{name} 必须是正的 float，实际是 {type(value).__name__}",
            )
        )
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(
            say(
                f"{name} must be a finite number > 0, got {value}",
                f"{name} 必须是大于 0 的有限数，实际是 {value}",
            )
        )
    return float(value)


def choice(name: str, value, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise listing them."""
    choices = tuple(choices)
    if value not in choices:
        listed = ", ".join(map(repr, choices))
        raise ValueError(
            say(
                f"{name} must be one of {listed}; got {value!r}",
                f"{name} 必须是 {listed} 之一；实际是 {value!r}",
            )
        )
    return value


def divisible(d_model: int, n_heads: int) -> int:
    """Return the head width ``d_model // n_heads``; raise if it does not divide."""
    positive_int("d_model", d_model)
    positive_int("n_heads", n_heads)
    if d_model % n_heads:
        got = f"d_model={d_model}, n_heads={n_heads} (d_model % n_heads = {d_model % n_heads})"
        raise ValueError(
            say(
                f"d_model must be divisible by n_heads, got {got}",
                f"d_model 必须能被 n_heads 整除，实际是 {got}",
            )
        )
    return d_model // n_heads


def floating_tensor(name: str, x) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            say(
                f"{name} must be a torch.Tensor, got {type(x).__name__}",
                f"{name} 必须是 torch.Tensor，实际是 {type(x).__name__}",
            )
        )
    if not x.is_floating_point():
        raise TypeError(
            say(
                f"{name} must be a floating-point tensor, got dtype {x.dtype}",
                f"{name} 必须是浮点张量，实际的 dtype 是 {x.dtype}",
            )
        )
    return x


def activations(x, d_model: int, name: str = "x") -> torch.Tensor:
    """Check that ``x`` is a float tensor of shape ``(batch, seq, d_model)``."""
    floating_tensor(name, x)
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(
            say(
                f"{name} must have shape (batch, seq, d_model={d_model}), got {tuple(x.shape)}",
                f"{name} 的形状必须是 (batch, seq, d_model={d_model})，实际是 {tuple(x.shape)}",
            )
        )
    return x


def last_dim(x, d_model: int, name: str = "x") -> torch.Tensor:
    """Check that ``x`` is a float tensor of shape ``(..., d_model)``."""
    floating_tensor(name, x)
    if x.dim() == 0 or x.shape[-1] != d_model:
        raise ValueError(
            say(
                f"{name} must have shape (..., {d_model}), got {tuple(x.shape)}",
                f"{name} 的形状必须是 (..., {d_model})，实际是 {tuple(x.shape)}",
            )
        )
    return x


def seq_len(T: int, max_seq_len: int) -> int:
    if max_seq_len < T:
        raise ValueError(
            say(
                f"sequence length {T} exceeds max_seq_len={max_seq_len}; "
                f"crop the input or build the module with a larger max_seq_len",
                f"序列长度 {T} 超过了 max_seq_len={max_seq_len}；"
                f"请截短输入，或用更大的 max_seq_len 构建模块",
            )
        )
    return T


def attention_mask(mask, batch: int, T: int, name: str = "attn_mask") -> torch.Tensor:
    """Check a boolean mask of shape ``(T, T)`` or ``(batch, 1, T, T)``; True = may attend."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(
            say(
                f"{name} must be a torch.Tensor, got {type(mask).__name__}",
                f"{name} 必须是 torch.Tensor，实际是 {type(mask).__name__}",
            )
        )
    if mask.dtype != torch.bool:
        raise TypeError(
            say(
                f"{name} must be a bool tensor (True = may attend), got dtype {mask.dtype}",
                f"{name} 必须是 bool 张量（True 表示可以关注），实际的 dtype 是 {mask.dtype}",
            )
        )
    if tuple(mask.shape) not in {(T, T), (batch, 1, T, T), (1, 1, T, T)}:
        shapes, got = f"({T}, {T}) or ({batch}, 1, {T}, {T})", tuple(mask.shape)
        raise ValueError(
            say(
                f"{name} must have shape {shapes}, got {got}",
                f"{name} 的形状必须是 {shapes.replace(' or ', ' 或 ')}，实际是 {got}",
            )
        )
    return mask


def mask_with_cache(mask, batch: int, T: int, past: int, name: str = "attn_mask"):
    """Check an optional ``attn_mask`` for ``T`` new tokens after ``past`` cached ones."""
    if mask is None:
        return None
    if past:
        # A (T, T) mask cannot describe the past keys; padding must be handled before caching.
        raise ValueError(
            say(
                f"{name} must be None once the KV cache holds past tokens "
                f"(it holds {past}); got an {name}",
                f"KV 缓存里已有之前的词元（{past} 个）时，{name} 必须是 None；实际给了 {name}",
            )
        )
    return attention_mask(mask, batch, T, name)


def token_ids(idx, vocab_size: int, max_seq_len: int | None = None, name: str = "idx"):
    """Check integer token ids of shape ``(batch, seq)`` in ``[0, vocab_size)``.

    On the CPU the range is checked at once, with the values in the message. On an
    accelerator, reading ``idx.min()`` back would stall the host until the device
    catches up, on every forward pass; there the check is queued on the device
    (``torch._assert_async``) and an out-of-range id raises at the next synchronisation.
    """
    if not isinstance(idx, torch.Tensor):
        raise TypeError(
            say(
                f"{name} must be a torch.Tensor of token ids, got {type(idx).__name__}",
                f"{name} 必须是存放词元 id 的 torch.Tensor，实际是 {type(idx).__name__}",
            )
        )
    if idx.is_floating_point() or idx.is_complex() or idx.dtype == torch.bool:
        raise TypeError(
            say(
                f"{name} must hold integer token ids (torch.long), got dtype {idx.dtype}",
                f"{name} 必须存放整数词元 id（torch.long），实际的 dtype 是 {idx.dtype}",
            )
        )
    if idx.dim() != 2:
        raise ValueError(
            say(
                f"{name} must have shape (batch, seq), got {tuple(idx.shape)}",
                f"{name} 的形状必须是 (batch, seq)，实际是 {tuple(idx.shape)}",
            )
        )
    if idx.numel() and idx.device.type != "cpu":
        torch._assert_async(
            ((idx >= 0) & (idx < vocab_size)).all(),
            f"{name} must be in [0, vocab_size={vocab_size})",
        )
    elif idx.numel():
        low, high = int(idx.min()), int(idx.max())
        if low < 0 or high >= vocab_size:
            bounds, got = f"[0, vocab_size={vocab_size})", f"[{low}, {high}]"
            raise ValueError(
                say(
                    f"{name} must be in {bounds}, got values in {got}",
                    f"{name} 必须在 {bounds} 中，实际取值范围是 {got}",
                )
            )
    if max_seq_len is not None:
        seq_len(idx.shape[1], max_seq_len)
    return idx
