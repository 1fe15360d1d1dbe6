"""Copying, watched: text that rewards it, the loss that shows a model doing it, the head
that does it.

A *drill* is a line of random names (lowercase letters, spaces between them), a separator (a
newline, a space, a full stop or a comma, drawn for each drill), and the same line again.
Nothing predicts a letter of the first line; every letter of the second is predictable by a
model that finds the earlier occurrence of the current letter and reads what followed it: an
*induction head* (Olsson et al., 2022). A counting model cannot follow, however near the
copy: the names are new, and it predicts from counts of its training text.

- ``drill(rng, half)``: one drill, each line ``half`` characters.
- ``with_drills(text, share, seed)``: training text with drills of varying length between its
  paragraphs, about ``share`` of its characters drills: the text that rewards copying.
- ``drilled(chars, share, seed)``: a character split whose training text has drills in it.
- ``DrillLosses``: a model's loss on the first line and on the copy, over fresh drills; the
  loss curve of the copy shows the phase change.
- ``attention_weights`` and ``induction_scores``: which head looks at the letter after the
  earlier occurrence, read from the model's own attention modules.
"""

from __future__ import annotations

import copy
import random
import string

import torch
import torch.nn.functional as F

from ..language import say
from ..nn import validate
from ..nn.attention import MultiHeadAttention

HALF = 60  # characters in a drill's line: longer than the reach of the counting models tried
# What stands between a drill's two lines, one drawn per drill. With a newline only, the head
# that formed copied only after a newline (measured on notebook 12's copying model: a drill
# with a space there cost 0.70 nats/char more on the copy than on its first line, and fresh
# names in prose were not copied); with separators that vary, nothing but what the line says
# marks where a copy starts, and the same model copied fresh names in prose (docs/capstone.md).
SEPARATORS = ("\n", " ", ".", ",")


def drill(rng: random.Random, half: int = HALF) -> str:
    """Random names of 3 to 7 lowercase letters, one space after each, cut to ``half``
    characters; a separator drawn from ``SEPARATORS``; the same ``half`` characters again.
    ``2 * half + 1`` characters."""
    validate.positive_int("half", half)
    line = ""
    while len(line) < half:
        line += "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 7)))
        line += " "
    return line[:half] + rng.choice(SEPARATORS) + line[:half]


def with_drills(
    text: str, share: float, *, seed: int, half: int = HALF, shortest: int | None = None
) -> str:
    """``text`` with a drill after a paragraph (blank-line separated) wherever that keeps the
    drills' share of the characters below ``share``; each drill on its own paragraph, its
    lines of a length drawn from ``shortest`` (default a third of ``half``) to ``half``.

    Why the lengths vary: with one length, the copy always lies the same distance back, and
    a head that looks that far back by position alone would do; with lengths that vary, the
    model must find the earlier occurrence by what it says, as copying a name in prose does."""
    shortest = (
        max(1, half // 3) if shortest is None else validate.positive_int("shortest", shortest)
    )
    if shortest > half:
        raise ValueError(
            say(
                f"shortest must be at most half ({half}), got {shortest}",
                f"shortest 不能大于 half（{half}），实际是 {shortest}",
            )
        )
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share < 1:
        raise ValueError(
            say(
                f"share must be a number in [0, 1), got {share!r}",
                f"share 必须是 [0, 1) 中的数，实际是 {share!r}",
            )
        )
    rng = random.Random(seed)
    pieces, drilled, total = [], 0, 0
    for paragraph in text.split("\n\n"):
        pieces.append(paragraph)
        total += len(paragraph) + 2
        while drilled < share * total:
            length = rng.randint(shortest, half)
            pieces.append(drill(rng, length))
            drilled += 2 * length + 3
            total += 2 * length + 3
    return "\n\n".join(pieces)


def drilled(chars, share: float, *, seed: int, half: int = HALF):
    """A copy of ``chars`` (a character-level ``TextDataset``) whose training split is
    ``with_drills(its training text, share, seed=seed)``; the held-out split is unchanged."""
    text = with_drills(chars.tokenizer.decode(chars.train), share, seed=seed, half=half)
    data = copy.copy(chars)
    data.train = torch.tensor(chars.tokenizer.encode(text), dtype=torch.long)
    return data


class DrillLosses:
    """A model's mean loss per character on ``n`` fresh drills (seed ``seed``): on the first
    line (``first``, nothing to copy) and on the copy (``copy``), both in nats per character.
    Calling it on ``(step, model)`` appends a point to ``curve``: ``(step, first, copy)``.

    ``tokenizer`` encodes each character as one token (the character tokenizer)."""

    def __init__(self, tokenizer, *, n: int = 32, seed: int = 1234, half: int = HALF):
        rng = random.Random(seed)
        self.texts = [drill(rng, half) for _ in range(n)]
        ids = [tokenizer.encode(t) for t in self.texts]
        if any(len(row) != 2 * half + 1 for row in ids):
            raise ValueError(
                say(
                    "DrillLosses needs a tokenizer with one token per character",
                    "DrillLosses 需要每个字符一个词元的分词器",
                )
            )
        self.ids = torch.tensor(ids)  # (n, 2 * half + 1)
        self.half = half
        self.curve: list[tuple[int, float, float]] = []

    @torch.no_grad()
    def losses(self, model) -> torch.Tensor:
        """``(n, 2 * half)``: the loss of each character given the ones before it."""
        was_training = model.training
        model.eval()
        try:
            ids = self.ids.to(next(model.parameters()).device)
            logits = model(ids[:, :-1]).float()
            return F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none").cpu()
        finally:
            model.train(was_training)

    def first_and_copy(self, losses: torch.Tensor) -> tuple[float, float]:
        """Mean loss on the first line (its first letter excluded: no context) and on the
        copy (every character after the separator)."""
        return float(losses[:, : self.half - 1].mean()), float(losses[:, self.half :].mean())

    def gains(self, model) -> torch.Tensor:
        """``(n,)``: per drill, the loss on the first line minus the loss on the copy (nats
        per character; positive when the model copies)."""
        losses = self.losses(model)
        return (
            losses[:, : self.half - 1].mean(dim=1) - losses[:, self.half :].mean(dim=1)
        ).double()

    def __call__(self, step: int, model) -> None:
        self.curve.append((step, *self.first_and_copy(self.losses(model))))

    def phase_change(self, gap: float = 1.0) -> int | None:
        """The first step of ``curve`` at which the copy costs at least ``gap`` nats per
        character less than the first line (None if none does)."""
        return next((step for step, first, copy in self.curve if first - copy >= gap), None)


def _attention_modules(model) -> list[torch.nn.Module]:
    found = [m for m in model.modules() if hasattr(m, "qkv_proj") and hasattr(m, "out_proj")]
    if not found:
        raise ValueError(
            say(
                "found no attention module (one with qkv_proj and out_proj) in the model",
                "模型中没有找到注意力模块（含 qkv_proj 和 out_proj 的模块）",
            )
        )
    return found


@torch.no_grad()
def attention_weights(model, ids: torch.Tensor) -> torch.Tensor:
    """The attention weights of every head of every layer of ``model`` (a GPT of the course's
    parameter layout) on ``ids (T,)``: ``(layers, heads, T, T)``.

    A module that returns only its output does not show its weights, so each attention
    module's input is caught on the way in, and the weights are computed from that input
    and the module's own projections by the reference formula (``MultiHeadAttention``
    with ``return_weights=True``), which a module that passed its check computes too."""
    modules = _attention_modules(model)
    config = model.config
    inputs: list[torch.Tensor] = []
    hooks = [m.register_forward_pre_hook(lambda _, args: inputs.append(args[0])) for m in modules]
    was_training = model.training
    model.eval()
    try:
        model(ids[None].to(next(model.parameters()).device))
    finally:
        model.train(was_training)
        for hook in hooks:
            hook.remove()
    layers = []
    for module, x in zip(modules, inputs, strict=True):
        reference = MultiHeadAttention(
            config.d_model,
            config.n_heads,
            max_seq_len=config.max_seq_len,
            bias=config.bias,
            rope_base=config.rope_base if config.positional == "rope" else None,
            n_kv_heads=config.n_kv_heads,
        ).to(x.device)
        own = module.state_dict()
        reference.load_state_dict({k: own[k] for k in reference.state_dict()}, strict=True)
        layers.append(reference(x, return_weights=True)[1][0].float().cpu())
    return torch.stack(layers)


def induction_scores(weights: torch.Tensor, half: int = HALF) -> torch.Tensor:
    """Per head, ``(layers, heads)``: the mean attention that each character of a drill's
    copy pays to the character after its earlier occurrence (``half`` positions back; 1
    for a perfect induction head), from ``weights (layers, heads, T, T)`` on one drill."""
    queries = torch.arange(half + 1, 2 * half)  # the copy's characters, not its last
    return weights[:, :, queries, queries - half].mean(dim=-1)
