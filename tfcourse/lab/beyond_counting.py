"""Where counting cannot follow: held-out tests that set a GPT against a character n-gram.

A ``CharNGram`` of order ``n`` predicts from the last ``n - 1`` characters and from counts
made on the training text; a GPT predicts from its whole context window, including text it
has never seen before. The GPT may read characters or byte pairs. Every test scores both
models on the same characters: spans of held-out text that start and end at token
boundaries (``HeldOut``), where the GPT's summed token losses and the n-gram's summed
character losses are both ``-log P(span | the text before it)``. Losses are in nats per
character. Each test judges its statistic against a threshold with its noise (``Verdict``):

- ``WindowLosses``: the loss at each position of non-overlapping windows. Past ``n - 1``
  characters the n-gram's context stops growing; whatever the GPT gains after that comes
  from farther back (``context_fall``).
- ``repeats``: names that never occur in the training text but occur twice in a held-out
  window, each occurrence scored without its first character. The statistic is a
  difference in differences (``copy_gains``): how much more the GPT gains from the first
  occurrence to the second than the n-gram does, one value per distinct name.
- ``closer_spans``: closing brackets and quotes; those whose opener lies beyond the
  n-gram's sight against those within it (``difference_verdict``).
- ``with_recurring_names``: text in which a share of paragraphs renames one repeated word
  to a random name, the data that rewards copying.
- ``sample_scores``: yardsticks applied to written samples.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import re
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..language import say
from ..nn import validate
from .language import CharNGram, real_word_fraction

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
BRACKETS = {")": "(", "]": "[", "}": "{"}
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
        """ "holds" when the margin clears the threshold by more than the noise, "does not
        hold" when it misses it by more than the noise, "inconclusive" otherwise."""
        if self.count < 2 or not math.isfinite(self.noise):
            return say("inconclusive (too few cases)", "无法判定（样本太少）")
        if self.margin - self.threshold > self.noise:
            return say("holds", "成立")
        if self.threshold - self.margin > self.noise:
            return say("does not hold", "不成立")
        return say("inconclusive", "无法判定")

    def __str__(self) -> str:
        return say(
            f"{self.word}: margin {self.margin:+.3f} ± {self.noise:.3f} (threshold "
            f"{self.threshold:g}, {self.count} cases)",
            f"{self.word}：差距 {self.margin:+.3f} ± {self.noise:.3f}（阈值 "
            f"{self.threshold:g}，{self.count} 个样本）",
        )


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


def paired_verdict(larger: torch.Tensor, smaller: torch.Tensor, threshold: float) -> Verdict:
    """Judge "``larger`` exceeds ``smaller`` by at least ``threshold``" from two 1-D tensors
    with one entry per case (for a loss: the n-gram's first, the GPT's second)."""
    if larger.shape != smaller.shape or larger.dim() != 1:
        first, second = tuple(larger.shape), tuple(smaller.shape)
        raise ValueError(
            say(
                f"expected two 1-D tensors of one shape, got {first} and {second}",
                f"应为两个形状相同的一维张量，实际是 {first} 和 {second}",
            )
        )
    return mean_verdict(larger.double() - smaller.double(), threshold)


def difference_verdict(cases: torch.Tensor, control: torch.Tensor, threshold: float) -> Verdict:
    """Judge "the mean of ``cases`` exceeds the mean of ``control`` by at least
    ``threshold``" for two independent sets of cases; the noise is twice the standard error
    of the difference of the means."""
    cases, control = _one_d("cases", cases), _one_d("control", control)
    count = len(cases) + len(control)
    if min(len(cases), len(control)) < 2:
        return Verdict(math.nan, math.inf, threshold, count)
    se = math.sqrt(cases.var() / len(cases) + control.var() / len(control))
    return Verdict(float(cases.mean() - control.mean()), 2 * se, threshold, count)


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


# -- context beyond the n-gram's reach ----------------------------------------------------


@dataclass(frozen=True)
class WindowLosses:
    """Non-overlapping windows of ``context`` tokens of held-out text, each read from its own
    start. Entry ``[w, t]`` is about token ``t + 1`` of window ``w``: ``loss`` its loss (summed
    over its characters), ``chars`` its characters, ``before`` the characters of the window
    before it. Each ``(windows, context)``."""

    loss: torch.Tensor
    chars: torch.Tensor
    before: torch.Tensor

    @classmethod
    def layout(cls, held: HeldOut, context: int, loss: torch.Tensor) -> WindowLosses:
        validate.positive_int("context", context)
        offsets = torch.tensor(held.offsets)
        n_windows = (len(held.ids) - 1) // context
        first = torch.arange(n_windows)[:, None] * context  # each window's first token
        target = first + torch.arange(1, context + 1)  # the tokens each window predicts
        return cls(
            loss.double(), offsets[target + 1] - offsets[target], offsets[target] - offsets[first]
        )

    def per_char(self, where: torch.Tensor) -> torch.Tensor:
        """Each window's loss per character over the tokens ``where (windows, context)``
        marks (NaN for a window with none)."""
        return (self.loss * where).sum(1) / (self.chars * where).sum(1)

    def curve(self, width: int) -> tuple[list[float], list[float]]:
        """Loss per character against characters of context, in bins of ``width``
        characters (each bin's midpoint), over all windows."""
        xs, ys = [], []
        top = int(self.before.max()) + 1
        for low in range(0, top, width):
            inside = (self.before >= low) & (self.before < low + width)
            if inside.any():
                xs.append(low + width / 2)
                ys.append(float((self.loss * inside).sum() / (self.chars * inside).sum()))
        return xs, ys


@torch.no_grad()
def gpt_windows(model, held: HeldOut, context: int | None = None, batch_size: int = 32):
    """``WindowLosses`` of ``model`` on ``held`` (windows of ``model.config.max_seq_len``
    tokens unless ``context`` is given)."""
    context = model.config.max_seq_len if context is None else context
    validate.positive_int("context", context)
    n_windows = (len(held.ids) - 1) // context
    if n_windows < 1:
        got = len(held.ids)
        raise ValueError(
            say(
                f"held-out text must hold more than {context} tokens, got {got}",
                f"留出文本必须多于 {context} 个词元，实际是 {got} 个",
            )
        )
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    rows = []
    for first in range(0, n_windows, batch_size):
        starts = range(first * context, min(first + batch_size, n_windows) * context, context)
        seq = torch.stack([held.ids[s : s + context + 1] for s in starts]).to(device)
        logits = model(seq[:, :-1]).float()
        rows.append(F.cross_entropy(logits.transpose(1, 2), seq[:, 1:], reduction="none").cpu())
    model.train(was_training)
    return WindowLosses.layout(held, context, torch.cat(rows))


def ngram_windows(ngram: CharNGram, held: HeldOut, context: int) -> WindowLosses:
    """``WindowLosses`` of the n-gram on the GPT's windows of ``held``: each token's
    characters scored with the n-gram's context cut at the window's start."""
    validate.positive_int("context", context)
    n_windows = (len(held.ids) - 1) // context
    rows = []
    for w in range(n_windows):
        first = held.offsets[w * context]
        window = held.text[first : held.offsets[(w + 1) * context + 1]]
        total = [0.0, *itertools.accumulate(ngram.char_losses(window))]
        rows.append(
            [
                total[held.offsets[t + 1] - first - 1] - total[held.offsets[t] - first - 1]
                for t in range(w * context + 1, (w + 1) * context + 1)
            ]
        )
    return WindowLosses.layout(held, context, torch.tensor(rows, dtype=torch.float64))


def context_fall(windows: WindowLosses, reach: int, band: int = 16) -> torch.Tensor:
    """Per window: the loss per character of the tokens just past ``reach`` characters of
    context (``band`` characters of them) minus that of the window's last quarter of
    tokens. ``(windows,)``, NaN where a window has no token in either part."""
    context = windows.loss.shape[1]
    near = (windows.before >= reach) & (windows.before < reach + band)
    far = torch.zeros_like(near)
    far[:, 3 * context // 4 :] = True
    return windows.per_char(near) - windows.per_char(far)


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


def with_recurring_names(
    text: str, share: float, *, seed: int, min_length: int = 5, name_length: int = 8
) -> tuple[str, list[str]]:
    """``text`` with, in a ``share`` of its paragraphs (blank-line separated), one word of
    ``min_length`` letters or more that occurs there at least twice renamed everywhere in
    the paragraph to a random name of ``name_length`` lowercase letters. Returns the text
    and the names, in order. Nothing predicts such a name but an earlier occurrence."""
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
        raise ValueError(
            say(
                f"share must be a number in [0, 1], got {share!r}",
                f"share 必须是 [0, 1] 中的数，实际是 {share!r}",
            )
        )
    rng = random.Random(seed)
    word = re.compile(rf"\b[A-Za-z]{{{min_length},}}\b")
    paragraphs, names = [], []
    for paragraph in text.split("\n\n"):
        if rng.random() < share:
            seen = word.findall(paragraph)
            twice = sorted({w for w in seen if seen.count(w) >= 2})
            if twice:
                old = rng.choice(twice)
                name = "".join(rng.choice(_LETTERS) for _ in range(name_length))
                paragraph = re.sub(rf"\b{old}\b", name, paragraph)
                names.append(name)
        paragraphs.append(paragraph)
    return "\n\n".join(paragraphs), names


# -- brackets ------------------------------------------------------------------------------


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


def closer_spans(held: HeldOut, closers: list[int]) -> list[tuple[int, int]]:
    """For each closing character, the characters of the token that spells it (itself, for
    a character model); closers in the first token are left out."""
    spans = []
    for k in closers:
        i = held.token_holding(k)
        if i > 0:
            spans.append((held.offsets[i], held.offsets[i + 1]))
    return spans


# -- samples ------------------------------------------------------------------------------


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


SAMPLE_TESTS_ZH = {
    "real words": "真实单词",
    "unmatched brackets": "未配对的括号",
    "copied from training": "照抄训练文本",
}


def label(test: str) -> str:
    """The name of one of ``sample_scores``' yardsticks, in the reader's language."""
    return say(test, SAMPLE_TESTS_ZH.get(test, test))


def sample_scores(sample: str, train_text: str, known: set[str]) -> dict[str, float]:
    """The three yardsticks of a sample: real words, unmatched brackets, recited text."""
    return {
        "real words": real_word_fraction(sample, known),
        "unmatched brackets": unmatched_share(sample),
        "copied from training": copied_share(sample, train_text),
    }


def separates(mine: list[float], theirs: list[float]) -> bool | None:
    """Whether two models' scores on a yardstick do not overlap; ``None`` when a score is
    NaN (a sample the yardstick cannot measure), so the answer never depends on order."""
    if any(math.isnan(v) for v in (*mine, *theirs)):
        return None
    return max(mine) < min(theirs) or max(theirs) < min(mine)
