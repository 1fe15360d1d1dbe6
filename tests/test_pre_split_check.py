"""check_pre_split (notebook 12): correct versions pass, each known mistake fails on the case
built for it and is named.

The wrong versions here are written as a learner would write them, independently of the
check's own list (``pre_split._mistakes``): each entry has one here.
"""

from __future__ import annotations

import re

import pytest
import regex

from tfcourse.checks import check_pre_split, pre_split
from tfcourse.checks.cases import grading_cases

from conftest import fails, named_mistake, passes

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def split_like_gpt2(text):
    return regex.findall(GPT2, text)


def split_with_a_compiled_pattern(text):
    """Another correct way: the alternatives listed one by one, compiled once."""
    contractions = "|".join(("'s", "'t", "'re", "'ve", "'m", "'ll", "'d"))
    runs = r" ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"
    return regex.compile(rf"{contractions}|{runs}|\s+(?!\S)|\s+").findall(text)


@pytest.mark.parametrize("fn", [split_like_gpt2, split_with_a_compiled_pattern])
def test_correct_splitters_pass(fn, capsys):
    passes(check_pre_split, fn, capsys, "pre_split")


MISTAKES = [
    ("split", lambda text: text.split(), "the spaces are dropped", 1),
    (
        "space-after",
        lambda text: regex.findall(
            r"'s|'t|'re|'ve|'m|'ll|'d|\p{L}+ ?|\p{N}+ ?|[^\s\p{L}\p{N}]+ ?|\s+(?!\S)|\s+", text
        ),
        "the space goes after the word",
        1,
    ),
    (
        "word-chars",
        lambda text: regex.findall(r"'s|'t|'re|'ve|'m|'ll|'d| ?\w+| ?[^\s\w]+|\s+(?!\S)|\s+", text),
        "letters and digits share a chunk",
        2,
    ),
    (
        "no-contractions",
        lambda text: regex.findall(r" ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+", text),
        "contractions are split",
        3,
    ),
    (
        "whole-space-runs",
        lambda text: regex.findall(
            r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+", text
        ),
        "a run of spaces before a word is one chunk",
        4,
    ),
    (
        "ascii-re",  # Python's re knows no \p{L}: letters written as [a-zA-Z]
        lambda text: re.findall(
            r"'s|'t|'re|'ve|'m|'ll|'d| ?[a-zA-Z]+| ?[0-9]+| ?[^\sa-zA-Z0-9]+|\s+(?!\S)|\s+", text
        ),
        "letters are only a-z and A-Z",
        5,
    ),
]


@pytest.mark.parametrize(
    "fn, named, case", [row[1:] for row in MISTAKES], ids=[r[0] for r in MISTAKES]
)
def test_each_mistake_fails_on_its_own_case_and_is_named(fn, named, case):
    message = fails(check_pre_split, fn, f"(check {case} of 7)")
    assert named in named_mistake(message), message


def test_every_mistake_has_a_wrong_version_here():
    assert len(pre_split._mistakes()) == len(MISTAKES)


def test_a_failure_shows_the_first_chunk_that_differs():
    message = fails(check_pre_split, lambda text: text.split(), "pre_split: chunk 1 is 'cat'")
    assert "expected ' cat'" in message


def test_a_string_instead_of_chunks_is_told_what_to_return():
    fails(check_pre_split, lambda text: text, "returned str", "a list of strings")


def test_the_check_wants_a_function():
    with pytest.raises(TypeError, match="expects a function"):
        check_pre_split("'s|'t")


@pytest.mark.parametrize("salt", [1, 2])
def test_grading_cases_draw_other_random_text_and_keep_the_mistakes_named(salt, capsys):
    public = pre_split._random_text(31)
    with grading_cases(salt):
        assert pre_split._random_text(31) != public
        passes(check_pre_split, split_like_gpt2, capsys, "pre_split")
        for _, fn, named, case in MISTAKES:
            message = fails(check_pre_split, fn, f"(check {case} of 7)")
            assert named in named_mistake(message)
