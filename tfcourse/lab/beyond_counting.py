"""Where counting cannot follow: held-out tests that set a GPT against a character n-gram.

A ``CharNGram`` of order ``n`` predicts from the last ``n - 1`` characters and from counts
made on the training text; a GPT predicts from its whole context window, including text it
has never seen before. Each test below picks held-out characters where that difference
should show, scores both models on exactly those characters, and judges the paired
difference against a threshold with its noise (``paired_verdict``):

- ``position_losses`` / ``ngram_position_losses``: the loss at each position of
  non-overlapping windows. Past ``n - 1`` characters the n-gram's context stops growing;
  whatever the GPT gains after that comes from farther back.
- ``repeated_identifiers``: identifiers that never occur in the training text but occur
  twice in a held-out window. The second time, the GPT can copy from its context; the
  n-gram only knows the training counts.
- ``bracket_closers``: closing brackets and quotes whose opener lies farther back than the
  n-gram can see.
- ``sample_scores``: the same yardsticks applied to written samples.

Every loss is in nats per character and every test here works on character-level models.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..language import say
from ..nn import validate
from .language import CharNGram, real_word_fraction

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
BRACKETS = {")": "(", "]": "[", "}": "{"}


@dataclass(frozen=True)
class Verdict:
    """A paired comparison: ``margin`` is the mean difference over ``count`` cases (positive:
    the GPT is better), ``noise`` twice its standard error."""

    margin: float
    noise: float
    threshold: float
    count: int

    @property
    def word(self) -> str:
        """ "holds" when the margin clears the threshold by more than the noise, "does not
        hold" when it misses it by more than the noise, "inconclusive" otherwise."""
        if self.count < 2 or not math.isfinite(self.noise):
            return say("inconclusive (too few cases)", "无法判断（样本太少）")
        if self.margin - self.threshold > self.noise:
            return say("holds", "成立")
        if self.threshold - self.margin > self.noise:
            return say("does not hold", "不成立")
        return say("inconclusive", "无法判断")

    def __str__(self) -> str:
        return say(
            f"{self.word}: margin {self.margin:+.3f} ± {self.noise:.3f} (threshold "
            f"{self.threshold:g}, {self.count} cases)",
            f"{self.word}：差距 {self.margin:+.3f} ± {self.noise:.3f}（阈值 "
            f"{self.threshold:g}，{self.count} 个样本）",
        )


def paired_verdict(larger: torch.Tensor, smaller: torch.Tensor, threshold: float) -> Verdict:
    """Judge the claim "``larger`` exceeds ``smaller`` by at least ``threshold``" from two
    1-D tensors with one entry per case (for a loss: the n-gram's first, the GPT's second).
    The noise is twice the standard error of the mean of ``larger - smaller``."""
    if larger.shape != smaller.shape or larger.dim() != 1:
        raise ValueError(
            f"expected two 1-D tensors of one shape, got {tuple(larger.shape)} "
            f"and {tuple(smaller.shape)}"
        )
    diff = (larger - smaller).double()
    n = len(diff)
    if n < 2:
        return Verdict(float(diff.mean()) if n else math.nan, math.inf, threshold, n)
    return Verdict(float(diff.mean()), 2 * float(diff.std()) / math.sqrt(n), threshold, n)


@torch.no_grad()
def position_losses(
    model, tokens: torch.Tensor, context: int | None = None, batch_size: int = 32
) -> torch.Tensor:
    """The loss at each position of non-overlapping windows of ``tokens (N,)``:
    ``(n_windows, context)``, entry ``[w, t]`` the loss of predicting token ``t + 1`` of
    window ``w`` from its tokens ``0..t`` (so ``t + 1`` characters of context)."""
    context = model.config.max_seq_len if context is None else context
    validate.positive_int("context", context)
    n_windows = (len(tokens) - 1) // context
    if n_windows < 1:
        raise ValueError(f"tokens must hold more than context={context} ids, got {len(tokens)}")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    rows = []
    for first in range(0, n_windows, batch_size):
        starts = range(first * context, min(first + batch_size, n_windows) * context, context)
        seq = torch.stack([tokens[s : s + context + 1] for s in starts]).to(device)
        rows.append(
            F.cross_entropy(
                model(seq[:, :-1]).float().transpose(1, 2), seq[:, 1:], reduction="none"
            )
            .cpu()
            .double()
        )
    model.train(was_training)
    return torch.cat(rows)


def ngram_position_losses(ngram: CharNGram, text: str, context: int) -> torch.Tensor:
    """``position_losses`` for the n-gram on the same windows of ``text``: its context is
    cut at the window's start too."""
    validate.positive_int("context", context)
    n_windows = (len(text) - 1) // context
    rows = []
    for w in range(n_windows):
        window = text[w * context : (w + 1) * context + 1]
        rows.append(ngram.char_losses(window))
    return torch.tensor(rows, dtype=torch.float64).reshape(n_windows, context)


def repeated_identifiers(
    text: str, train_text: str, *, min_length: int = 6, max_span: int = 128
) -> list[tuple[int, int, int]]:
    """Identifiers of ``text`` never seen in ``train_text`` that occur again within
    ``max_span`` characters: ``(first, second, length)`` start positions, each repeat once
    (consecutive occurrences)."""
    known = set(_IDENTIFIER.findall(train_text))
    last: dict[str, int] = {}
    found = []
    for match in _IDENTIFIER.finditer(text):
        name, start = match.group(), match.start()
        if len(name) < min_length or name in known:
            continue
        if name in last and start + len(name) - last[name] <= max_span:
            found.append((last[name], start, len(name)))
        last[name] = start
    return found


@torch.no_grad()
def span_losses(model, tokens: torch.Tensor, spans, context: int | None = None) -> torch.Tensor:
    """The GPT's mean loss on the characters ``[start + 1, start + length)`` of each span
    (the first character left out: nothing announces that a name comes back), each scored in
    the window of ``context`` tokens that ends with the span. ``(n_spans,)``."""
    context = model.config.max_seq_len if context is None else context
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out = []
    for start, length in spans:
        end = start + length  # one past the span's last char
        w = max(0, end - 1 - context)
        seq = tokens[w:end].to(device)[None]
        losses = F.cross_entropy(
            model(seq[:, :-1]).float().transpose(1, 2), seq[:, 1:], reduction="none"
        )[0]  # target k sits at k - w - 1
        out.append(float(losses[start + 1 - w - 1 : end - w - 1].double().mean()))
    model.train(was_training)
    return torch.tensor(out, dtype=torch.float64)


def ngram_span_losses(ngram: CharNGram, text: str, spans) -> torch.Tensor:
    """``span_losses`` for the n-gram, each character with its full n-gram context."""
    n = ngram.order - 1
    out = []
    for start, length in spans:
        chars = range(start + 1, start + length)
        out.append(
            sum(-math.log(ngram.probability(text[max(0, k - n) : k], text[k])) for k in chars)
            / len(chars)
        )
    return torch.tensor(out, dtype=torch.float64)


def bracket_closers(text: str, *, quotes: bool = False) -> list[tuple[int, int]]:
    """``(opener, closer)`` positions of matched brackets ``()[]{}`` (or, with ``quotes``,
    of double quotes paired in order) within each paragraph of ``text``; a mismatched
    closer empties the stack rather than guessing."""
    pairs = []
    offset = 0
    for paragraph in text.split("\n\n"):
        stack: list[tuple[str, int]] = []
        for i, char in enumerate(paragraph):
            if quotes:
                if char == '"':
                    if stack:
                        pairs.append((stack.pop()[1] + offset, i + offset))
                    else:
                        stack.append((char, i))
            elif char in "([{":
                stack.append((char, i))
            elif char in BRACKETS:
                if stack and stack[-1][0] == BRACKETS[char]:
                    pairs.append((stack.pop()[1] + offset, i + offset))
                else:
                    stack.clear()
        offset += len(paragraph) + 2
    return sorted(pairs)


def unmatched_share(sample: str) -> float:
    """Share of the brackets of ``sample`` that do not pair up within their paragraph
    (NaN if it has none): 0 for code whose every bracket closes."""
    total = sum(sample.count(c) for c in "()[]{}")
    if not total:
        return math.nan
    return 1 - 2 * len(bracket_closers(sample)) / total


def copied_share(sample: str, train_text: str, span: int = 30) -> float:
    """Share of ``sample``'s characters that lie inside a run of ``span`` characters found
    verbatim in ``train_text``: how much of the sample is recited rather than written."""
    validate.positive_int("span", span)
    if len(sample) < span:
        return math.nan
    covered = [False] * len(sample)
    for i in range(len(sample) - span + 1):
        if sample[i : i + span] in train_text:
            covered[i : i + span] = [True] * span
    return sum(covered) / len(sample)


def sample_scores(sample: str, train_text: str, known: set[str]) -> dict[str, float]:
    """The three yardsticks of a sample: real words, unmatched brackets, recited text."""
    return {
        "real words": real_word_fraction(sample, known),
        "unmatched brackets": unmatched_share(sample),
        "copied from training": copied_share(sample, train_text),
    }
