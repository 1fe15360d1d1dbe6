"""How the learner's parts fit into each other: ``tc`` and ``training`` as the learner's code sees
them when ``tc.yours()`` runs it.

The course's exercises name their neighbours through the package: the learner's
``TransformerBlock`` (05) builds ``tc.LayerNorm``, ``tc.MultiHeadAttention`` and
``tc.FeedForward``; their ``GPT`` (07) builds ``tc.TransformerBlock(**config.block_kwargs())``
and ``tc.make_norm(...)``; their ``train_loop`` (08) asks ``training.lr_at``. ``Overlay`` is a
stand-in for such a module: every name reads through to the real one, except the names a
learner's part answers for. So the learner's code runs unchanged, and composes: their attention
inside their block inside their GPT.

One block class serves every config: ``block_factory`` builds the learner's ``LlamaBlock``
(notebook 10) where the config asks for exactly LLaMA's block, else their ``TransformerBlock``
(notebook 05) with its three slots filled for the config at hand (``Slots``): the norm the
config names (their ``LayerNorm`` or ``RMSNorm``) where the block asks for ``tc.LayerNorm``,
their ``SwiGLU`` or ``FeedForward`` where it asks for ``tc.FeedForward``, their
``RotaryAttention`` (notebook 10) where it asks for ``tc.MultiHeadAttention`` and the config
has rotary positions, with the config's width, bias and eps. A slot that no learner's part can
fill (a tanh GELU, grouped key/value heads with learned positions: options the exercises do
not have) gets the reference part, and ``Slots.used`` says so.
"""

from __future__ import annotations

import contextvars
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..language import say

# The slots of the block being built: set by ``block_factory`` while the learner's block
# class runs its ``__init__``, read by the ``Overlay`` of the block's notebook.
_building: contextvars.ContextVar[Slots | None] = contextvars.ContextVar("slots", default=None)


@dataclass
class Used:
    """What filled one slot of a composed model: the part's name, the learner's or the
    reference's, and why the reference (empty for the learner's)."""

    slot: str
    part: str
    yours: bool
    why: str = ""


class Overlay(types.ModuleType):
    """A module that reads through to ``real`` except for ``overrides`` (name -> object), and,
    while ``block_factory`` builds a block, that block's ``Slots``."""

    def __init__(self, real: types.ModuleType, overrides: dict[str, object]):
        super().__init__(real.__name__, real.__doc__)
        self._real, self._overrides = real, overrides

    def __getattr__(self, name: str):
        slots = _building.get()
        if slots is not None and name in slots.factories:
            return slots.factories[name]
        if name in self._overrides:
            return self._overrides[name]
        return getattr(self._real, name)

    def __repr__(self) -> str:
        return f"<{self._real.__name__}, with your parts: {', '.join(self._overrides) or 'none'}>"


@dataclass
class Slots:
    """The parts that fill a block's slots for one set of ``config.block_kwargs()``.

    ``pick(part)`` returns ``(class, why)``: the learner's class, or the reference's with the
    reason (the learner's part failed, or cannot express this config).
    """

    kwargs: dict
    pick: Callable[[str], tuple[object, str]]
    used: list[Used] = field(default_factory=list)

    @property
    def factories(self) -> dict[str, Callable]:
        return {
            "LayerNorm": self.norm,
            "RMSNorm": self.norm,
            "MultiHeadAttention": self.attention,
            "FeedForward": self.mlp,
        }

    def _take(self, slot: str, part: str, why_not: str = ""):
        cls, why = self.pick(part)
        if why_not:
            from ..nn import attention, mlp

            cls, why = getattr(attention if hasattr(attention, part) else mlp, part), why_not
        self.used.append(Used(slot, part, not why, why))
        return cls

    def norm(self, d_model: int, *args, **kwargs):
        kind = self.kwargs.get("norm", "layernorm")
        cls = self._take(say("norm", "归一化"), "RMSNorm" if kind == "rmsnorm" else "LayerNorm")
        eps = self.kwargs.get("norm_eps")
        return cls(d_model) if eps is None else cls(d_model, eps=eps)

    def attention(self, d_model: int, n_heads: int, *, max_seq_len: int, dropout: float = 0.0, **_):
        k = self.kwargs
        rope, n_kv, bias = k.get("rope_base"), k.get("n_kv_heads"), k.get("bias", True)
        if rope is not None:  # notebook 10's attention
            cls = self._take(say("attention", "注意力"), "RotaryAttention")
            return cls(
                d_model,
                n_heads,
                max_seq_len=max_seq_len,
                n_kv_heads=n_kv,
                rope_base=rope,
                dropout=dropout,
                bias=bias,
            )
        why_not = ""
        if n_kv not in (None, n_heads):
            why_not = say(
                "grouped key/value heads with learned positions: your MultiHeadAttention has "
                "no key/value heads of their own, your RotaryAttention always rotates",
                "分组的键/值头配可学习位置：你的 MultiHeadAttention 没有单独的键/值头，"
                "你的 RotaryAttention 总要做旋转",
            )
        cls = self._take(say("attention", "注意力"), "MultiHeadAttention", why_not)
        if why_not:
            return cls(
                d_model,
                n_heads,
                max_seq_len=max_seq_len,
                dropout=dropout,
                bias=bias,
                n_kv_heads=n_kv,
            )
        return cls(d_model, n_heads, max_seq_len=max_seq_len, dropout=dropout, bias=bias)

    def mlp(self, d_model: int, *args, dropout: float = 0.0, **_):
        k = self.kwargs
        bias, d_hidden = k.get("bias", True), k.get("d_hidden")
        if k.get("mlp", "gelu") == "swiglu":
            cls = self._take("MLP", "SwiGLU")
            return cls(d_model, d_hidden, bias=bias, dropout=dropout)
        activation = k.get("activation", "gelu")
        why_not = ""
        if activation != "gelu":
            why_not = say(
                f"your FeedForward (notebook 04) has the exact GELU; this config asks for "
                f"activation={activation!r}",
                f"你的 FeedForward（notebook 04）用的是精确的 GELU；这个配置要求 "
                f"activation={activation!r}",
            )
        cls = self._take("MLP", "FeedForward", why_not)
        if why_not:
            return cls(d_model, d_hidden, dropout=dropout, bias=bias, activation=activation)
        return cls(d_model, d_hidden, dropout=dropout, bias=bias)


def fits_llama_block(pre_ln: bool, kwargs: dict) -> bool:
    """Whether ``config.block_kwargs()`` (``pre_ln`` and the rest) ask for exactly the block the
    learner's ``LlamaBlock`` (notebook 10) builds: pre-norm, RMSNorm with its own epsilon,
    rotary attention, SwiGLU of LLaMA's width, no biases."""
    return bool(
        pre_ln
        and kwargs.get("norm") == "rmsnorm"
        and kwargs.get("mlp") == "swiglu"
        and kwargs.get("rope_base") is not None
        and not kwargs.get("bias", True)
        and kwargs.get("d_hidden") is None
        and kwargs.get("norm_eps") is None
    )


def block_factory(pick: Callable[[str], tuple[Any, str]], used: list[Used]):
    """``tc.TransformerBlock`` as the learner's ``GPT`` sees it. ``factory(**block_kwargs)``
    builds the learner's ``LlamaBlock`` where it passed its check and fits the kwargs
    (``fits_llama_block``), else the learner's ``TransformerBlock`` with its slots filled for
    those kwargs (``Slots``), else the reference's; what filled the block and its slots is
    appended to ``used``."""

    def factory(d_model, n_heads, *, max_seq_len, pre_ln=True, dropout=0.0, **kwargs):
        block_slot = say("block", "块")
        llama, why = pick("LlamaBlock")
        if not why and fits_llama_block(pre_ln, kwargs):
            block = llama(
                d_model,
                n_heads,
                max_seq_len=max_seq_len,
                n_kv_heads=kwargs.get("n_kv_heads"),
                rope_base=kwargs["rope_base"],
                dropout=dropout,
            )
            # Its sublayers are whatever notebook 10's namespace holds: the learner's parts,
            # or the reference's where theirs failed.
            used.append(Used(block_slot, "LlamaBlock", True))
            for slot, part in (
                (say("norm", "归一化"), "RMSNorm"),
                (say("attention", "注意力"), "RotaryAttention"),
                ("MLP", "SwiGLU"),
            ):
                part_why = pick(part)[1]
                used.append(Used(slot, part, not part_why, part_why))
            return block
        block_cls, why = pick("TransformerBlock")
        used.append(Used(block_slot, "TransformerBlock", not why, why))
        if why:
            return block_cls(
                d_model, n_heads, max_seq_len=max_seq_len, pre_ln=pre_ln, dropout=dropout, **kwargs
            )
        slots = Slots(dict(kwargs), pick)
        token = _building.set(slots)
        try:
            block = block_cls(
                d_model, n_heads, max_seq_len=max_seq_len, pre_ln=pre_ln, dropout=dropout
            )
        finally:
            _building.reset(token)
        used.extend(slots.used)
        return block

    factory.__name__ = "TransformerBlock"
    return factory


def norm_factory(pick: Callable[[str], tuple[object, str]], used: list[Used]):
    """``tc.make_norm(kind, d_model, eps=None, ...)`` as the learner's ``GPT`` sees it: the
    learner's ``LayerNorm`` or ``RMSNorm``."""

    def make_norm(kind: str, d_model: int, eps: float | None = None, **_):
        slots = Slots({"norm": kind, "norm_eps": eps}, pick)
        norm = slots.norm(d_model)
        used.extend(
            Used(say("final norm", "最终归一化"), u.part, u.yours, u.why) for u in slots.used
        )
        return norm

    return make_norm
