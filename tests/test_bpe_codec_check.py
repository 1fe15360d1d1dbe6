"""check_bpe_encode and check_bpe_decode (notebook 12): correct versions pass, each known
mistake fails on the case built for it and is named.

The wrong versions here are written as a learner would write them, independently of the
check's own lists (``_encode_mistakes``, ``_decode_mistakes``): each entry has one here.
"""

from __future__ import annotations

import itertools

import pytest

from tfcourse.checks import bpe_codec, check_bpe_decode, check_bpe_encode
from tfcourse.checks.cases import grading_cases
from tfcourse.train.bpe import PATTERN, ByteBPE

from conftest import fails, named_mistake, passes

# ------------------------------------------------------------------------------ encoding


def merge(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def encode_by_rank(text, merges, *, mistake=None):
    """The notebook's way: per chunk, merge the present pair of lowest rank until none is
    left. ``mistake`` switches on one error."""
    rank = {pair: i for i, pair in enumerate(merges)}
    result = []
    chunks = [text] if mistake == "no-chunks" else PATTERN.findall(text)
    for chunk in chunks:
        ids = [ord(c) for c in chunk] if mistake == "ord" else list(chunk.encode("utf-8"))
        while len(ids) >= 2:
            pairs = list(itertools.pairwise(ids))
            learned = [p for p in pairs if p in rank]
            if not learned:
                break
            if mistake == "frequency":
                pair = max(learned, key=lambda p: (pairs.count(p), -rank[p]))
            elif mistake == "smallest":
                pair = min(learned)
            else:
                pair = min(learned, key=lambda p: rank[p])
            ids = merge(ids, pair, rank[pair] + (0 if mistake == "id-is-rank" else 256))
            if mistake == "once":
                break
        result.extend(ids)
    return result


def encode_in_merge_order(text, merges, *, mistake=None):
    """Another correct way: every merge in the order learned, once, over each chunk."""
    result = []
    for chunk in PATTERN.findall(text):
        ids = list(chunk.encode("utf-8"))
        order = list(enumerate(merges))
        for i, pair in reversed(order) if mistake == "reversed" else order:
            ids = merge(ids, pair, 256 + i)
        result += ids
    return result


def encode_with_the_course_class(text, merges):
    return ByteBPE(merges).encode(text)


@pytest.mark.parametrize("fn", [encode_by_rank, encode_in_merge_order])
def test_correct_encoders_pass(fn, capsys):
    passes(check_bpe_encode, fn, capsys, "bpe_encode")


ENCODE_MISTAKES = [
    ("once", encode_by_rank, "only one merge is made in each chunk", 1),
    ("id-is-rank", encode_by_rank, "merge i becomes id i", 1),
    ("reversed", encode_in_merge_order, "latest first", 2),
    ("frequency", encode_by_rank, "the most frequent one in the chunk", 3),
    ("smallest", encode_by_rank, "the smallest pair of ids", 4),
    ("no-chunks", encode_by_rank, "merges cross chunk boundaries", 5),
    ("ord", encode_by_rank, "its code point (ord)", 6),
]


@pytest.mark.parametrize(
    "mistake, base, named, case", ENCODE_MISTAKES, ids=[row[0] for row in ENCODE_MISTAKES]
)
def test_each_encode_mistake_fails_on_its_own_case_and_is_named(mistake, base, named, case):
    message = fails(
        check_bpe_encode,
        lambda text, merges: base(text, merges, mistake=mistake),
        f"(check {case} of 8)",
    )
    assert named in named_mistake(message), message


def test_every_encode_mistake_has_a_wrong_version_here():
    assert len(bpe_codec._encode_mistakes()) == len(ENCODE_MISTAKES)


def test_an_encoder_that_returns_text_is_told_what_to_return():
    fails(check_bpe_encode, lambda text, merges: text, "returned str", "a list of ints")


# ------------------------------------------------------------------------------ decoding


def decode_by_table(ids, merges, *, mistake=None):
    table = [bytes([i]) for i in range(256)]
    for a, b in merges:
        if mistake == "bytes-of-ids":
            table.append(bytes([a, b]))
        else:
            table.append(table[b] + table[a] if mistake == "swapped" else table[a] + table[b])
    if mistake == "per-token":
        return "".join(table[t].decode("utf-8", errors="replace") for t in ids)
    joined = b"".join(table[t] for t in ids)
    if mistake == "latin-1":
        return "".join(chr(byte) for byte in joined)
    if mistake == "strict":
        return joined.decode("utf-8")
    return joined.decode("utf-8", errors="ignore" if mistake == "ignore" else "replace")


def decode_recursively(ids, merges):
    """Another correct way: expand each merge into its halves, down to bytes."""

    def expand(token):
        if token < 256:
            return bytes([token])
        a, b = merges[token - 256]
        return expand(a) + expand(b)

    return b"".join(expand(t) for t in ids).decode("utf-8", "replace")


@pytest.mark.parametrize("fn", [decode_by_table, decode_recursively])
def test_correct_decoders_pass(fn, capsys):
    passes(check_bpe_decode, fn, capsys, "bpe_decode")


DECODE_MISTAKES = [
    ("swapped", "the other way round", 1),
    ("bytes-of-ids", "bytes([a, b])", 2),
    ("per-token", "each token is decoded on its own", 3),
    ("latin-1", "each byte became a character", 3),
    ("strict", "strict decoding raised", 4),
    ("ignore", "an incomplete character is dropped", 4),
]


@pytest.mark.parametrize(
    "mistake, named, case", DECODE_MISTAKES, ids=[r[0] for r in DECODE_MISTAKES]
)
def test_each_decode_mistake_fails_on_its_own_case_and_is_named(mistake, named, case):
    message = fails(
        check_bpe_decode,
        lambda ids, merges: decode_by_table(ids, merges, mistake=mistake),
        f"(check {case} of 6)",
    )
    assert named in named_mistake(message), message


def test_every_decode_mistake_has_a_wrong_version_here():
    listed = len(bpe_codec._decode_mistakes()) + len(bpe_codec._decode_known())
    assert listed == len(DECODE_MISTAKES)


def test_a_decoder_that_returns_bytes_is_told_what_to_return():
    fails(check_bpe_decode, lambda ids, merges: b"", "returned bytes", "expected a str")


# ------------------------------------------------------------------------------ both


def test_the_checks_want_functions():
    for check in (check_bpe_encode, check_bpe_decode):
        with pytest.raises(TypeError, match="expects a function"):
            check(3)


def test_the_course_class_is_the_reference_the_checks_hold_to(capsys):
    passes(check_bpe_encode, encode_with_the_course_class, capsys, "bpe_encode")


@pytest.mark.parametrize("salt", [1, 2, 3])
def test_grading_cases_draw_other_letters_and_keep_every_mistake_named(salt, capsys):
    """Salted cases: other letters and other random text, the same sub-checks; the mistakes
    still fail on their own cases."""
    with grading_cases(salt):
        assert bpe_codec._letters() != ("a", "b", "c", "d")
        assert sorted(bpe_codec._letters()) == list(bpe_codec._letters())
        passes(check_bpe_encode, encode_by_rank, capsys, "bpe_encode")
        passes(check_bpe_decode, decode_by_table, capsys, "bpe_decode")
        for mistake, base, named, case in ENCODE_MISTAKES:
            message = fails(
                check_bpe_encode,
                lambda text, merges, base=base, mistake=mistake: base(
                    text, merges, mistake=mistake
                ),
                f"(check {case} of 8)",
            )
            assert named in named_mistake(message), (mistake, message)
