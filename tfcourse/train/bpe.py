"""Byte-level byte-pair encoding (BPE), from scratch: the tokenizer family GPT-2 started.

Any text becomes its UTF-8 bytes, so every string has an encoding (Chinese, emoji, code)
and there is no unknown token: the first 256 ids are the bytes themselves. Training learns
**merges**: it counts every pair of neighbouring ids in a corpus, makes the most frequent
pair a new id (256, 257, ...), rewrites the corpus with it, and repeats. Encoding applies
the learned merges to new text, always the earliest-learned pair first.

Like GPT-2, the text is first cut into **chunks** by a pattern (``PATTERN``: a word with
its leading space, a number, a run of punctuation, whitespace), and merges never cross a
chunk boundary, so " the" becomes one token but "the." never does. Training counts each
distinct chunk once, weighted by how often it occurs, which keeps it fast on a corpus of
a million characters; ties between equally frequent pairs go to the smaller pair, so a
corpus always gives the same merges.

``ByteBPE.train(text, n_merges)`` learns a tokenizer; ``encode``/``decode`` convert;
``merges`` is the whole of what was learned (``ByteBPE(merges)`` rebuilds it), and
``tests/test_bpe.py`` loads the same merges into Hugging Face ``tokenizers`` and requires
the same ids.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict

import regex

from ..language import say

# GPT-2's pre-tokenization pattern (Radford et al., 2019): contractions, letters with an
# optional leading space, numbers likewise, other symbols likewise, then whitespace (a run
# of spaces before a word leaves its last space to the word).
PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)
N_BYTES = 256


class ByteBPE:
    """A byte-level BPE tokenizer given by its merges.

    ``merges[i] = (a, b)``: the pair of ids that id ``256 + i`` stands for, each an id
    below ``256 + i``. ``vocab_size`` is ``256 + len(merges)``.
    """

    def __init__(self, merges: list[tuple[int, int]]):
        self.merges: list[tuple[int, int]] = []
        self._bytes = [bytes([b]) for b in range(N_BYTES)]
        for i, pair in enumerate(merges):
            if not (
                isinstance(pair, (tuple, list))
                and len(pair) == 2
                and all(
                    isinstance(t, int) and not isinstance(t, bool) and 0 <= t < N_BYTES + i
                    for t in pair
                )
            ):
                raise ValueError(
                    say(
                        f"merges[{i}] must be a pair of ids below {N_BYTES + i}, got {pair!r}",
                        f"merges[{i}] 必须是一对小于 {N_BYTES + i} 的 id，实际是 {pair!r}",
                    )
                )
            self.merges.append((pair[0], pair[1]))
            self._bytes.append(self._bytes[pair[0]] + self._bytes[pair[1]])
        self._rank = {pair: i for i, pair in enumerate(self.merges)}
        self._cache: dict[str, list[int]] = {}

    @property
    def vocab_size(self) -> int:
        return N_BYTES + len(self.merges)

    def __repr__(self) -> str:
        return f"ByteBPE(vocab_size={self.vocab_size}, merges={len(self.merges)})"

    # -- training ---------------------------------------------------------------------------

    @classmethod
    def train(cls, text: str, n_merges: int) -> ByteBPE:
        """Learn ``n_merges`` merges from ``text`` (fewer if no pair is left to merge)."""
        if not isinstance(text, str):
            got = type(text).__name__
            raise TypeError(say(f"text must be a str, got {got}", f"text 必须是 str，实际是 {got}"))
        if isinstance(n_merges, bool) or not isinstance(n_merges, int) or n_merges < 0:
            raise ValueError(
                say(
                    f"n_merges must be an int >= 0, got {n_merges!r}",
                    f"n_merges 必须是 >= 0 的 int，实际是 {n_merges!r}",
                )
            )
        chunks = Counter(PATTERN.findall(text))
        words = [list(chunk.encode("utf-8")) for chunk in chunks]
        weights = list(chunks.values())
        counts: Counter = Counter()  # pair -> occurrences, weighted by the chunk's
        where: defaultdict = defaultdict(set)  # pair -> the words that hold it
        for index, word in enumerate(words):
            for pair in itertools.pairwise(word):
                counts[pair] += weights[index]
                where[pair].add(index)
        merges = []
        for new_id in range(N_BYTES, N_BYTES + n_merges):
            if not counts:
                break
            best = min(counts, key=lambda pair: (-counts[pair], pair))
            merges.append(best)
            for index in where.pop(best):
                word, weight = words[index], weights[index]
                for pair in itertools.pairwise(word):  # forget the word's old pairs
                    counts[pair] -= weight
                    if counts[pair] <= 0:
                        del counts[pair]
                words[index] = word = _merge(word, best, new_id)
                for pair in itertools.pairwise(word):  # and count its new ones
                    counts[pair] += weight
                    where[pair].add(index)
        return cls(merges)

    # -- encoding and decoding --------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``: its chunks' bytes, merged by the learned merges."""
        if not isinstance(text, str):
            got = type(text).__name__
            raise TypeError(say(f"text must be a str, got {got}", f"text 必须是 str，实际是 {got}"))
        ids: list[int] = []
        for chunk in PATTERN.findall(text):
            if chunk not in self._cache:
                self._cache[chunk] = self._encode_chunk(list(chunk.encode("utf-8")))
            ids += self._cache[chunk]
        return ids

    def _encode_chunk(self, ids: list[int]) -> list[int]:
        while len(ids) > 1:
            # The pair learned first among those present: merges apply in training order.
            pair = min(itertools.pairwise(ids), key=lambda p: self._rank.get(p, len(self._rank)))
            if pair not in self._rank:
                break
            ids = _merge(ids, pair, N_BYTES + self._rank[pair])
        return ids

    def token_bytes(self, token: int) -> bytes:
        """The bytes id ``token`` stands for."""
        if (
            isinstance(token, bool)
            or not isinstance(token, int)
            or not 0 <= token < self.vocab_size
        ):
            raise ValueError(
                say(
                    f"token must be an id in [0, {self.vocab_size}), got {token!r}",
                    f"token 必须是 [0, {self.vocab_size}) 中的 id，实际是 {token!r}",
                )
            )
        return self._bytes[token]

    def decode(self, ids) -> str:
        """The text of ``ids``. Every encoding decodes back to its text exactly; a sequence
        cut inside a character's bytes shows U+FFFD there."""
        return b"".join(self.token_bytes(int(t)) for t in ids).decode("utf-8", errors="replace")


def _merge(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """``ids`` with every occurrence of ``pair``, left to right, replaced by ``new_id``."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out
