"""check_most_frequent_pair and check_merge_pair (notebook 12): correct versions pass, each
known mistake fails and is named.

The wrong versions here are written as a learner would write them, independently of the
check's own lists (``_pair_mistakes``, ``_merge_mistakes``): each entry has one here.
"""

from __future__ import annotations

import fnmatch
import itertools
from collections import Counter

import pytest

from tfcourse.checks import check_merge_pair, check_most_frequent_pair, tokenizer
from tfcourse.course import notebook_format
from tfcourse.grade import references
from tfcourse.train.bpe import ByteBPE

from conftest import fails, passes
from helpers import ROOT

# ------------------------------------------------------------------------ most_frequent_pair


def pair_with_dict(ids):
    counts = {}
    for i in range(len(ids) - 1):
        counts[ids[i], ids[i + 1]] = counts.get((ids[i], ids[i + 1]), 0) + 1
    best = max(counts.values())
    return min(p for p, n in counts.items() if n == best)


def pair_with_pairwise(ids):
    counts = Counter(itertools.pairwise(ids))
    return min(counts.items(), key=lambda item: (-item[1], item[0]))[0]


def pair_most_common(ids):
    return Counter(itertools.pairwise(ids)).most_common(1)[0][0]


def pair_max(ids):
    counts = Counter(itertools.pairwise(ids))
    return max(counts, key=lambda p: (counts[p], p))


def pair_skipping_runs(ids):
    counts, i = Counter(), 0
    while i < len(ids) - 1:
        pair = (ids[i], ids[i + 1])
        counts[pair] += 1
        i += 2 if pair[0] == pair[1] else 1
    best = max(counts.values())
    return min(p for p, n in counts.items() if n == best)


def pair_missing_last(ids):
    counts = Counter((ids[i], ids[i + 1]) for i in range(len(ids) - 2))
    best = max(counts.values())
    return min(p for p, n in counts.items() if n == best)


@pytest.mark.parametrize("fn", [pair_with_dict, pair_with_pairwise])
def test_correct_pair_counters_pass(fn, capsys):
    passes(check_most_frequent_pair, fn, capsys, "most_frequent_pair")


@pytest.mark.parametrize(
    "fn, named",
    [
        (pair_most_common, "seen first"),
        (pair_max, "larger pair"),
        (pair_skipping_runs, "a a a counts (a, a) once"),
        (pair_missing_last, "last pair"),
    ],
)
def test_each_pair_mistake_fails_and_is_named(fn, named):
    fails(check_most_frequent_pair, fn, "most_frequent_pair: ", named)


def test_every_pair_mistake_has_a_wrong_version_here():
    assert len(tokenizer._pair_mistakes()) == 4


def test_a_count_instead_of_a_pair_is_named():
    fails(check_most_frequent_pair, lambda ids: 3, "returned int", "a tuple of two ints")


# ------------------------------------------------------------------------------ merge_pair


def merge_while(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if ids[i : i + 2] == list(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def merge_with_skip_flag(ids, pair, new_id):
    out, skip = [], False
    for i, token in enumerate(ids):
        if skip:
            skip = False
            continue
        if i + 1 < len(ids) and (token, ids[i + 1]) == pair:
            out.append(new_id)
            skip = True
        else:
            out.append(token)
    return out


def merge_from_the_right(ids, pair, new_id):
    out, i = [], len(ids) - 1
    while i >= 0:
        if i > 0 and (ids[i - 1], ids[i]) == pair:
            out.insert(0, new_id)
            i -= 2
        else:
            out.insert(0, ids[i])
            i -= 1
    return out


def merge_first_only(ids, pair, new_id):
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == pair:
            return ids[:i] + [new_id] + ids[i + 2 :]
    return ids


def merge_without_skipping(ids, pair, new_id):
    out = []
    for i in range(len(ids)):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
        else:
            out.append(ids[i])
    return out


def merge_losing_the_tail(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@pytest.mark.parametrize("fn", [merge_while, merge_with_skip_flag])
def test_correct_merges_pass(fn, capsys):
    passes(check_merge_pair, fn, capsys, "merge_pair")


@pytest.mark.parametrize(
    "fn, named",
    [
        (merge_from_the_right, "merged from the right"),
        (merge_first_only, "only the first occurrence"),
        (merge_without_skipping, "second id of the pair is kept"),
        (merge_losing_the_tail, "last id is lost"),
    ],
)
def test_each_merge_mistake_fails_and_is_named(fn, named):
    fails(check_merge_pair, fn, "merge_pair: ", named)


def test_every_merge_mistake_has_a_wrong_version_here():
    assert len(tokenizer._merge_mistakes()) == 4


def test_a_tuple_of_ids_is_not_a_list():
    fails(check_merge_pair, lambda ids, pair, new_id: "x", "returned str", "a list of ints")


def test_the_checks_want_functions():
    for check in (check_merge_pair, check_most_frequent_pair):
        with pytest.raises(TypeError, match="expects a function"):
            check(3)


def test_the_two_steps_train_what_the_course_tokenizer_trains():
    """Repeated, the reference steps learn ByteBPE's merges on one chunk of text."""
    ids = list("the cat sat on the mat that the rat had".replace(" ", "").encode())
    merges = []
    for new_id in range(256, 262):
        pair = pair_with_dict(ids)
        merges.append(pair)
        ids = merge_while(ids, pair, new_id)
    assert merges == ByteBPE.train("thecatsatonthematthattheratha" + "d", 6).merges


# --------------------------------------------------------------------------- the grader's view


def test_the_course_merge_is_a_shortcut_while_merge_pair_is_graded():
    """The course's own merge does the exercise's whole job: the exercise's reference is
    sealed away and the course's tokenizer is watched for (and the solved notebook passes
    without either: tests/test_notebooks.py)."""
    solution = notebook_format.read_notebook(ROOT / "solutions" / "12_capstone.ipynb")
    assert "merge_pair" in references.reference_names(solution, "merge_pair")
    watched = references.shortcuts(solution, "merge_pair")
    for ran in ("tfcourse.train.bpe._merge", "tfcourse.train.bpe.ByteBPE.train"):
        assert any(fnmatch.fnmatchcase(ran, pattern) for pattern in watched), ran


@pytest.mark.parametrize(
    "check, wrong",
    [
        (check_most_frequent_pair, fn)
        for fn in (pair_most_common, pair_max, pair_skipping_runs, pair_missing_last)
    ]
    + [
        (check_merge_pair, fn)
        for fn in (
            merge_from_the_right,
            merge_first_only,
            merge_without_skipping,
            merge_losing_the_tail,
        )
    ],
)
def test_every_diagnosis_reads_in_chinese(check, wrong, monkeypatch):
    import re

    monkeypatch.setenv("TFCOURSE_LANG", "zh")
    message = fails(check, wrong, "可能的原因", "提示")
    assert not re.search(r"\b(?:the|is|are|of|instead|expected|looks like|hint)\b", message)
