"""Notebook 10's check ``check_repeat_kv``: correct code passes, each known mistake is named.

Follows ``tests/test_mutants.py``: every mutant is a learner-style implementation with one
mistake and must fail with an ``AssertionError`` whose first line names the cause; the
alternatives are other correct ways to write it and must pass. The catalogue is
``tests/mutants/gqa.py``.
"""

from __future__ import annotations

import pytest

from tfcourse.checks import check_repeat_kv

from mutants import fails_naming_its_cause, passes
from mutants.gqa import ALTERNATIVES, MUTANTS, make_repeat_kv


@pytest.mark.parametrize(
    "implementation, cause", [pytest.param(*row[1:], id=row[0]) for row in MUTANTS]
)
def test_mutant_fails_naming_its_cause(implementation, cause, capsys):
    fails_naming_its_cause(check_repeat_kv, implementation, cause, capsys)


@pytest.mark.parametrize(
    "implementation", [pytest.param(row[1], id=row[0]) for row in ALTERNATIVES]
)
def test_alternative_correct_implementation_passes(implementation, capsys):
    passes(check_repeat_kv, implementation, capsys)


def test_unknown_order_gets_the_general_hint():
    with pytest.raises(AssertionError) as info:
        check_repeat_kv(make_repeat_kv("heads_shuffled"))
    assert "looks like" not in str(info.value)  # no diagnosis line: the general hint


def test_not_a_function_is_a_type_error():
    with pytest.raises(TypeError, match="expects a function, got int"):
        check_repeat_kv(3)


def test_the_catalogue_names_are_unique():
    names = [row[0] for row in MUTANTS + ALTERNATIVES]
    assert len(set(names)) == len(names)
