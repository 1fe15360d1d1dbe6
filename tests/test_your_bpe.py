"""``YourByteBPE``: the course's tokenizer with the learner's encoding and decoding."""

from __future__ import annotations

import pytest

from tfcourse.train import capstone
from tfcourse.train.bpe import PATTERN, ByteBPE, _merge
from tfcourse.train.data import TextDataset
from tfcourse.train.your_bpe import YourByteBPE

TEXT = "def f(x):\n    return x  # 注意 🙂\n\nThe end, 2024. Isn't it?\n" * 4


def every_merge_in_order(text, merges):
    """A correct but slow encoder: every merge tried on every chunk, in the order learned."""
    ids = []
    for chunk in PATTERN.findall(text):
        chunk_ids = list(chunk.encode("utf-8"))
        for i, pair in enumerate(merges):
            chunk_ids = _merge(chunk_ids, pair, 256 + i)
        ids += chunk_ids
    return ids


def decode(ids, merges):
    return ByteBPE(merges).decode(ids)


def test_the_learners_encoding_gives_the_courses_ids_and_asks_once_per_chunk():
    course = ByteBPE.train(TEXT, 40)
    asked = []

    def counting(text, merges):
        asked.append(text)
        return every_merge_in_order(text, merges)

    theirs = YourByteBPE(course.merges, counting, decode)
    assert theirs.encode(TEXT) == course.encode(TEXT)
    assert len(asked) == len(set(PATTERN.findall(TEXT))) == len(set(asked))
    split = []
    cutting = YourByteBPE(
        course.merges, every_merge_in_order, decode, lambda t: split.append(t) or PATTERN.findall(t)
    )
    assert cutting.encode(TEXT) == course.encode(TEXT) and split == [TEXT]
    assert theirs.decode(theirs.encode(TEXT)) == TEXT
    assert theirs.vocab_size == course.vocab_size


def test_a_wrong_encoder_shows_in_the_ids():
    """Nothing hides the learner's answer: an encoder that never merges gives bytes."""
    course = ByteBPE.train(TEXT, 40)
    theirs = YourByteBPE(course.merges, lambda text, merges: list(text.encode()), decode)
    assert theirs.encode("return") == list(b"return") != course.encode("return")


def test_not_a_string_is_refused_before_the_learners_code_runs():
    theirs = YourByteBPE([], every_merge_in_order, decode)
    with pytest.raises(TypeError, match="text must be a str, got list"):
        theirs.encode([1, 2])


def test_byte_pair_text_encodes_with_the_tokenizer_it_is_given():
    chars = TextDataset(TEXT * 3, val_fraction=0.2)
    course = capstone.BytePairText(chars, 30)
    theirs = capstone.BytePairText(
        chars, 30, tokenizer=lambda merges: YourByteBPE(merges, every_merge_in_order, decode)
    )
    assert isinstance(theirs.tokenizer, YourByteBPE)
    assert theirs.tokenizer.merges == course.tokenizer.merges
    assert theirs.train.tolist() == course.train.tolist()
    assert theirs.val.tolist() == course.val.tolist()
