"""check_encode_with_special (notebook 12): correct versions pass, each known mistake fails
on the case built for it and is named.

The wrong versions here are written as a learner would write them, independently of the
check's own list (``special_tokens._mistakes``): each entry has one here.
"""

from __future__ import annotations

import re

import pytest
import regex

from tfcourse.checks import check_encode_with_special, special_tokens
from tfcourse.checks.cases import grading_cases
from tfcourse.train.bpe import ByteBPE

from conftest import fails, named_mistake, passes


def bpe_encode(text, merges):
    return ByteBPE(merges).encode(text)


def by_regex_split(text, merges, special, *, mistake=None):
    """The notebook's way: one split on a group of the special strings, longest first."""
    if not special:
        return bpe_encode(text, merges)
    strings = list(special) if mistake == "dict-order" else sorted(special, key=len, reverse=True)
    quoted = strings if mistake == "unescaped" else [regex.escape(s) for s in strings]
    ids = []
    for piece in regex.split("(" + "|".join(quoted) + ")", text):
        if piece in special and mistake != "as-text":
            ids.append(special[piece])
        elif piece:
            ids += bpe_encode(piece, merges)
    return ids


def by_scanning(text, merges, special):
    """Another correct way: walk the text, at each place try the longest special string."""
    ids, start, i = [], 0, 0
    strings = sorted(special, key=len, reverse=True)
    while i < len(text):
        found = next((s for s in strings if text.startswith(s, i)), None)
        if found is None:
            i += 1
            continue
        ids += bpe_encode(text[start:i], merges) + [special[found]]
        i = start = i + len(found)
    return ids + bpe_encode(text[start:], merges)


@pytest.mark.parametrize("fn", [by_regex_split, by_scanning])
def test_correct_versions_pass(fn, capsys):
    passes(check_encode_with_special, fn, capsys, "encode_with_special")


MISTAKES = [
    ("as-text", "the special strings were encoded as text", 1),
    ("unescaped", "went into the pattern unescaped", 1),
    ("dict-order", "the shorter special string won", 2),
]


@pytest.mark.parametrize("mistake, named, case", MISTAKES, ids=[r[0] for r in MISTAKES])
def test_each_mistake_fails_on_its_own_case_and_is_named(mistake, named, case):
    message = fails(
        check_encode_with_special,
        lambda text, merges, special: by_regex_split(text, merges, special, mistake=mistake),
        f"(check {case} of 6)",
    )
    assert named in named_mistake(message), message


def test_every_mistake_has_a_wrong_version_here():
    assert len(special_tokens._mistakes()) == len(MISTAKES)


def test_an_empty_dict_of_specials_is_a_case_of_its_own():
    """re.split on an empty group cuts between every character: a version that does not
    look at an empty dict fails, on the case without special strings."""

    def unguarded(text, merges, special):
        ids = []
        longest = sorted(special, key=len, reverse=True)
        pattern = "(" + "|".join(re.escape(s) for s in longest) + ")"
        for piece in re.split(pattern, text):
            ids += [special[piece]] if piece in special else bpe_encode(piece, merges)
        return ids

    fails(check_encode_with_special, unguarded, "(check 5 of 6)")


def test_the_check_wants_a_function():
    with pytest.raises(TypeError, match="expects a function"):
        check_encode_with_special({"<|endoftext|>": 0})


@pytest.mark.parametrize("salt", [1, 2])
def test_grading_cases_draw_other_ids_and_keep_the_mistakes_named(salt, capsys):
    with grading_cases(salt):
        assert special_tokens._cases()[0][3] != {"<|endoftext|>": 1280}
        passes(check_encode_with_special, by_regex_split, capsys, "encode_with_special")
        for mistake, named, case in MISTAKES:
            message = fails(
                check_encode_with_special,
                lambda t, m, s, mistake=mistake: by_regex_split(t, m, s, mistake=mistake),
                f"(check {case} of 6)",
            )
            assert named in named_mistake(message)
