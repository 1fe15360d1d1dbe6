"""Copying a name, where counting cannot follow: the held-out test that sets a GPT against a
character n-gram on names it has never seen, and the verdicts that judge such tests.

A ``CharNGram`` of order ``n`` predicts from the last ``n - 1`` characters and from counts
made on the training text; a GPT predicts from its whole context window, including text it
has never seen before. The GPT may read characters or byte pairs. Both models are scored on
the same characters: spans of held-out text that start and end at token boundaries
(``HeldOut``), where the GPT's summed token losses and the n-gram's summed character losses
are both ``-log P(span | the text before it)``. Losses are in nats per character.

- ``Verdict``, ``mean_verdict``: a statistic against a threshold with its noise, the verdict's
  words, the test's power; ``false_holds_chance``: the chance of a false "holds" among many.
- ``repeats``: names that never occur in the training text but occur twice in a held-out
  window, each occurrence scored without its first character. The statistic is a
  difference in differences (``copy_gains``): how much more the GPT gains from the first
  occurrence to the second than the n-gram does, one value per distinct name.
- ``with_paired_names``: prose in which each paragraph has a pair of its words replaced by
  one fresh random name, which only its first occurrence predicts.
- ``copied_share``: how much of a written sample is recited from the training text.
"""

from __future__ import annotations

import bisect
import math
import random
import re
from dataclasses import dataclass

import torch

from ..language import say
from ..nn import validate

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A sample with at least this share of its characters inside 30-character runs found
# verbatim in the training text is reported as recited (memorised), not written.
RECITED = 0.25


@dataclass(frozen=True)
class Verdict:
    """A statistic judged against a threshold: ``margin`` its value (positive: the GPT is
    better), ``noise`` twice its standard error, over ``count`` cases."""

    margin: float
    noise: float
    threshold: float
    count: int

    @property
    def word(self) -> str:
        """The verdict, its words defined once: "holds" when the margin clears the threshold
        by more than the noise; "does not hold" when it falls short of the threshold by more
        than the noise (a margin below zero beyond the noise is below the threshold too);
        "inconclusive" otherwise."""
        if self.count < 2 or not math.isfinite(self.noise):
            return say("inconclusive (too few cases)", "无法判定（样本太少）")
        if self.margin - self.threshold > self.noise:
            return say("holds", "成立")
        if self.threshold - self.margin > self.noise:
            return say("does not hold", "不成立")
        return say("inconclusive", "无法判定")

    @property
    def decisive(self) -> bool:
        """Whether the test can decide: its noise is at most half its threshold."""
        return self.noise <= self.threshold / 2

    def power(self, effect: float | None = None) -> float:
        """The chance that the test reads "holds" if the true margin is ``effect`` (default:
        twice the threshold), with the standard error it measured (normal approximation)."""
        effect = 2 * self.threshold if effect is None else effect
        if not math.isfinite(self.noise):
            return 0.0  # too few cases: the test cannot read "holds" at all
        if self.noise == 0:
            return 1.0 if effect > self.threshold else 0.0
        se = self.noise / 2
        return _normal_cdf((effect - self.threshold) / se - 2)

    def __str__(self) -> str:
        return say(
            f"{self.word}: margin {self.margin:+.3f} ± {self.noise:.3f} (threshold "
            f"{self.threshold:g}, {self.count} cases)",
            f"{self.word}：差距 {self.margin:+.3f} ± {self.noise:.3f}（阈值 "
            f"{self.threshold:g}，{self.count} 个样本）",
        )


def _normal_cdf(z: float) -> float:
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


# The chance that one verdict reads "holds" when its true margin is at most its threshold:
# the observed margin then clears the threshold by two standard errors (normal approximation).
FALSE_HOLDS = _normal_cdf(-2)


def false_holds_chance(n_verdicts: int) -> float:
    """The chance, at most, that at least one of ``n_verdicts`` independent verdicts reads
    "holds" though none of their true margins reaches its threshold."""
    validate.positive_int("n_verdicts", n_verdicts)
    return 1 - (1 - FALSE_HOLDS) ** n_verdicts


def _one_d(name: str, values: torch.Tensor) -> torch.Tensor:
    if not isinstance(values, torch.Tensor) or values.dim() != 1:
        got = getattr(values, "shape", values)
        raise ValueError(
            say(
                f"{name} must be a 1-D tensor, got {got!r}",
                f"{name} 必须是一维张量，实际是 {got!r}",
            )
        )
    return values.double()


def mean_verdict(values: torch.Tensor, threshold: float) -> Verdict:
    """Judge "the mean of ``values (n,)`` is at least ``threshold``"; the noise is twice the
    standard error of the mean."""
    values = _one_d("values", values)
    n = len(values)
    if n < 2:
        return Verdict(float(values.mean()) if n else math.nan, math.inf, threshold, n)
    return Verdict(float(values.mean()), 2 * float(values.std()) / math.sqrt(n), threshold, n)


# -- held-out text and its tokens ------------------------------------------------------------


@dataclass(frozen=True)
class HeldOut:
    """Held-out ``text`` and its token ``ids (N,)``; ``offsets`` (N + 1 entries): token ``i``
    spells ``text[offsets[i]:offsets[i + 1]]``. For a character tokenizer every character
    is a token."""

    text: str
    ids: torch.Tensor
    offsets: tuple[int, ...]

    @classmethod
    def encode(cls, tokenizer, text: str) -> HeldOut:
        """``text`` in ``tokenizer``'s tokens (a ``ByteBPE`` or a ``CharTokenizer``). A token
        boundary inside a character's UTF-8 bytes counts from that character's start."""
        ids = tokenizer.encode(text)
        if tokenizer.decode(ids) != text:
            raise ValueError(
                say(
                    "the tokenizer does not spell the text back exactly",
                    "分词器解码后不能原样还原这段文本",
                )
            )
        spell = getattr(tokenizer, "token_bytes", None)
        char_of_byte = [i for i, c in enumerate(text) for _ in c.encode("utf-8")] + [len(text)]
        offsets, at = [0], 0
        for t in ids:
            at += len(spell(t)) if spell else len(tokenizer.decode([t]).encode("utf-8"))
            offsets.append(char_of_byte[at])
        return cls(text, torch.tensor(ids, dtype=torch.long), tuple(offsets))

    def token_holding(self, char: int) -> int:
        """The index of the token that spells character ``char``."""
        return bisect.bisect_right(self.offsets, char) - 1

    def inner_span(self, start: int, end: int) -> tuple[int, int]:
        """The characters ``[a, b)`` of the tokens that lie wholly inside ``[start, end)``
        (``a == b`` if none does)."""
        i = bisect.bisect_left(self.offsets, start)
        j = max(bisect.bisect_right(self.offsets, end) - 1, i)
        return self.offsets[i], self.offsets[j]


def span_losses(losses: torch.Tensor, offsets, spans) -> torch.Tensor:
    """Mean loss per character over each span ``(a, b)`` of characters: ``losses (N - 1,)``
    holds the loss of unit ``i`` at ``i - 1`` (as ``held_out_losses`` and
    ``CharNGram.char_losses`` return them), unit ``i`` spelling characters
    ``offsets[i]..offsets[i + 1]``. Each span must start and end at unit boundaries, after
    the first unit. ``(n_spans,)``."""
    unit = {o: i for i, o in enumerate(offsets)}
    total = torch.cat([torch.zeros(1, dtype=torch.float64), losses.double().cumsum(0)])
    out = []
    for a, b in spans:
        if a not in unit or b not in unit or not 0 < a < b:
            raise ValueError(
                say(
                    f"span ({a}, {b}) does not start and end at token boundaries",
                    f"片段 ({a}, {b}) 的起点和终点不在词元边界上",
                )
            )
        out.append(float(total[unit[b] - 1] - total[unit[a] - 1]) / (b - a))
    return torch.tensor(out, dtype=torch.float64)


def char_offsets(text: str) -> range:
    """The offsets of ``text`` read one character a token (for the n-gram's losses)."""
    return range(len(text) + 1)


# -- copying a name ----------------------------------------------------------------------


@dataclass(frozen=True)
class Repeat:
    """A name and the two spans that score its occurrences (each without its first
    character, at token boundaries)."""

    name: str
    first: tuple[int, int]
    second: tuple[int, int]


def repeats(
    held: HeldOut, train_text: str, *, min_length: int = 6, within: int = 64
) -> list[Repeat]:
    """Names (identifiers of ``min_length`` characters or more) that never occur in
    ``train_text`` and occur again in ``held`` with the whole first occurrence among the
    ``within`` tokens before the second one's last token: consecutive occurrences, each
    scored over the tokens that lie inside it after its first character. ``within``: half
    the GPT's context, the least context ``held_out_losses`` gives a token."""
    known = set(_IDENTIFIER.findall(train_text))
    last: dict[str, int] = {}
    found = []
    for match in _IDENTIFIER.finditer(held.text):
        name, start = match.group(), match.start()
        if len(name) < min_length or name in known:
            continue
        if name in last:
            first = held.inner_span(last[name] + 1, last[name] + len(name))
            second = held.inner_span(start + 1, start + len(name))
            if (
                first[0] < first[1]
                and second[0] < second[1]
                and held.token_holding(second[1] - 1) - held.token_holding(last[name]) <= within
            ):
                found.append(Repeat(name, first, second))
        last[name] = start
    return found


def copy_gains(
    found: list[Repeat], gpt_losses: torch.Tensor, ngram_losses: torch.Tensor, held: HeldOut
) -> torch.Tensor:
    """Per distinct name: how much more the GPT's loss falls from the first occurrence to
    the second than the n-gram's does (nats per character, averaged over the name's
    repeats): positive when the GPT copies. ``gpt_losses`` per token of ``held``,
    ``ngram_losses`` per character (each as ``span_losses`` takes them)."""

    def fall(losses, offsets):
        return span_losses(losses, offsets, [r.first for r in found]) - span_losses(
            losses, offsets, [r.second for r in found]
        )

    gains = fall(gpt_losses, held.offsets) - fall(ngram_losses, char_offsets(held.text))
    by_name: dict[str, list[float]] = {}
    for r, gain in zip(found, gains.tolist(), strict=True):
        by_name.setdefault(r.name, []).append(gain)
    return torch.tensor([sum(v) / len(v) for v in by_name.values()], dtype=torch.float64)


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def with_paired_names(
    text: str, *, seed: int, within: int = 32, min_length: int = 5, name_length: int = 8
) -> tuple[str, list[str]]:
    """``text`` with, in each paragraph (blank-line separated) that has one, a pair of words of
    ``min_length`` letters or more, picked at random, both replaced by one fresh random name
    of ``name_length`` lowercase letters, the second no more than ``within`` characters from
    the start of the first once renamed (``repeats`` finds each pair at that ``within``).
    Returns the text and the names, one per paragraph that has a pair, in order. Only the
    first occurrence predicts the second: a fresh name copied inside ordinary prose."""
    validate.positive_int("within", within)
    rng = random.Random(seed)
    word = re.compile(rf"\b[A-Za-z]{{{min_length},}}\b")
    paragraphs, names = [], []
    for paragraph in text.split("\n\n"):
        words = list(word.finditer(paragraph))
        # Renamed, the pair spans the first name, the gap between the words, the second name.
        pairs = [
            (a, b)
            for i, a in enumerate(words)
            for b in words[i + 1 :]
            if b.start() - a.end() + 2 * name_length <= within
        ]
        if pairs:
            a, b = rng.choice(pairs)
            name = "".join(rng.choice(_LETTERS) for _ in range(name_length))
            paragraph = (
                paragraph[: a.start()]
                + name
                + paragraph[a.end() : b.start()]
                + name
                + paragraph[b.end() :]
            )
            names.append(name)
        paragraphs.append(paragraph)
    return "\n\n".join(paragraphs), names


# -- samples ------------------------------------------------------------------------------


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
