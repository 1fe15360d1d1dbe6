"""Yardsticks for a character-level language model: an n-gram baseline and real words.

- ``CharNGram``: counts of every context of up to ``order - 1`` characters in the
  training text, smoothed by interpolated Kneser-Ney (each order gives back a fixed
  discount to the order below, down to the uniform distribution).
  ``nats_per_char(text)`` is its cross-entropy on other text: the loss a
  Transformer has to beat on the same split.
- ``real_word_fraction(sample, known)``: the share of a sample's alphabetic words
  (two letters or more) that occur in ``known`` (``vocabulary(training text)``: its
  words seen at least twice, lower-cased): a measurable stand-in for "does it write
  words?".
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter, defaultdict

from ..language import say
from ..nn import validate

_WORD = re.compile(r"[A-Za-z]+")


def words(text: str) -> list[str]:
    """The alphabetic words of ``text``, lower-cased, in order."""
    if not isinstance(text, str):
        got = type(text).__name__
        raise TypeError(say(f"text must be a str, got {got}", f"text 必须是 str，实际是 {got}"))
    return [w.lower() for w in _WORD.findall(text)]


def vocabulary(text: str, min_count: int = 2) -> set[str]:
    """The lower-cased words that occur at least ``min_count`` times in ``text`` (a word
    seen once in a corpus of code documentation is as often a typo or an identifier)."""
    validate.positive_int("min_count", min_count)
    counts = Counter(words(text))
    return {w for w, n in counts.items() if n >= min_count}


def real_word_fraction(sample: str, known: set[str], min_length: int = 2) -> float:
    """Share of ``sample``'s alphabetic words of at least ``min_length`` letters that are
    in ``known`` (NaN if it has none). Single letters are left out by default: "a", "i"
    and "e" are in any vocabulary, so random letters would score well on them."""
    validate.positive_int("min_length", min_length)
    found = [w for w in words(sample) if len(w) >= min_length]
    if not found:
        return float("nan")
    return sum(w in known for w in found) / len(found)


class CharNGram:
    """A character n-gram model with interpolated Kneser-Ney smoothing.

    Args:
        text: the training text.
        order: n (contexts of up to n - 1 characters); 1 is the unigram model.
        discount: the absolute discount ``d`` in (0, 1) taken from every seen count.

    ``P(c | h) = max(N(h, c) - d, 0) / N(h) + d * U(h) / N(h) * P(c | h')``, with
    ``N`` counts (continuation counts below the highest order), ``U(h)`` the number of
    distinct characters seen after ``h``, ``h'`` the context one character shorter,
    and the uniform ``1 / (V + 1)`` below order 1.
    """

    def __init__(self, text: str, order: int = 5, discount: float = 0.75):
        if not isinstance(text, str) or not text:
            raise ValueError(say("text must be a non-empty str", "text 必须是非空的 str"))
        self.order = validate.positive_int("order", order)
        if not 0 < discount < 1:
            raise ValueError(
                say(
                    f"discount must be in (0, 1), got {discount}",
                    f"discount 必须在 (0, 1) 中，实际是 {discount}",
                )
            )
        self.discount = float(discount)
        self.alphabet = sorted(set(text))
        # counts[k][context of length k][char]: raw counts at the highest order; below
        # it Kneser-Ney's continuation counts (in how many distinct contexts one
        # character longer the pair was seen), which is what a backed-off
        # estimate should measure: how readily "c" follows "h" in new company.
        top = order - 1
        raw: dict[str, Counter] = defaultdict(Counter)
        for i in range(top, len(text)):
            raw[text[i - top : i]][text[i]] += 1
        self.counts: list[dict[str, Counter]] = [defaultdict(Counter) for _ in range(order)]
        self.counts[top] = raw
        for k in range(top - 1, -1, -1):
            for longer, following in self.counts[k + 1].items():
                shorter = longer[1:]
                for char in following:
                    self.counts[k][shorter][char] += 1
        self.totals = [{h: sum(c.values()) for h, c in table.items()} for table in self.counts]

    def probability(self, context: str, char: str) -> float:
        """``P(char | context)``, using at most the last ``order - 1`` characters."""
        p = 1.0 / (len(self.alphabet) + 1)  # +1: room for an unseen character
        for k in range(self.order):
            if k > len(context):
                break
            h = context[len(context) - k :] if k else ""
            seen = self.counts[k].get(h)
            if not seen:
                continue
            total = self.totals[k][h]
            p = (
                max(seen.get(char, 0) - self.discount, 0.0) + self.discount * len(seen) * p
            ) / total
        return p

    def char_losses(self, text: str) -> list[float]:
        """``-log P(text[i] | the characters before it)`` for every ``i >= 1``: a list of
        ``len(text) - 1`` losses, each with up to ``order - 1`` characters of context."""
        if not isinstance(text, str) or len(text) < 2:
            raise ValueError(
                say(
                    "text must be a str of at least 2 characters",
                    "text 必须是至少有 2 个字符的 str",
                )
            )
        n = self.order - 1
        return [
            -math.log(self.probability(text[max(0, i - n) : i], text[i]))
            for i in range(1, len(text))
        ]

    def nats_per_char(self, text: str) -> float:
        """Mean ``-log P`` of each character of ``text`` given the ones before it."""
        losses = self.char_losses(text)
        return sum(losses) / len(losses)

    def sample(
        self, n_chars: int, *, temperature: float = 0.8, seed: int = 0, prompt: str = "\n"
    ) -> str:
        """``n_chars`` characters drawn one at a time after ``prompt`` (not repeated in the
        result), each from ``P(c | context) ** (1 / temperature)``, renormalised."""
        validate.positive_int("n_chars", n_chars)
        validate.positive_float("temperature", temperature)
        rng = random.Random(seed)
        text = prompt
        for _ in range(n_chars):
            context = text[len(text) - (self.order - 1) :] if self.order > 1 else ""
            weights = [self.probability(context, c) ** (1 / temperature) for c in self.alphabet]
            text += rng.choices(self.alphabet, weights=weights)[0]
        return text[len(prompt) :]
