"""The learner's tokenizer: the course's ``ByteBPE`` with its encoding and decoding done by
the learner's ``bpe_encode`` and ``bpe_decode`` (notebook 12), for ``tc.yours().tokenizer``."""

from __future__ import annotations

from collections.abc import Callable

from .bpe import ByteBPE

Encode = Callable[[str, list[tuple[int, int]]], list[int]]
Decode = Callable[[list[int], list[tuple[int, int]]], str]


class YourByteBPE(ByteBPE):
    """``ByteBPE(merges)`` whose ``encode`` and ``decode`` call the learner's functions.

    ``encode`` asks ``bpe_encode`` once per distinct chunk of GPT-2's pattern and keeps the
    answer, as ``ByteBPE`` keeps its own: the capstone's 1.6 million characters hold about
    18,000 distinct chunks, so a learner's correct but slow version (every merge tried on
    every chunk) still encodes them in seconds. The ids are those of one call on the whole
    text: the pattern cuts a chunk into itself, and the learner's check holds their function
    to the reference on whole texts. ``decode`` is one call of ``bpe_decode``;
    ``token_bytes`` stays the course's table.
    """

    def __init__(self, merges: list[tuple[int, int]], encode: Encode, decode: Decode):
        super().__init__(merges)
        self._your_encode, self._your_decode = encode, decode

    def _encode_chunk(self, ids: list[int]) -> list[int]:
        chunk = bytes(ids).decode("utf-8")  # a chunk of a str: whole characters
        return [int(t) for t in self._your_encode(chunk, list(self.merges))]

    def decode(self, ids) -> str:
        return self._your_decode([int(t) for t in ids], list(self.merges))
