"""Notebook 03's check ``check_layernorm_backward``: correct code passes, each known mistake is
named. The catalogue is ``tests/mutants/norm_backward.py`` (see ``tests/test_mutants_gqa.py``)."""

from __future__ import annotations

import pytest

from tfcourse.checks import check_layernorm_backward

from mutants import fails_naming_its_cause, passes
from mutants.norm_backward import ALTERNATIVES, MUTANTS


@pytest.mark.parametrize(
    "implementation, cause", [pytest.param(*row[1:], id=row[0]) for row in MUTANTS]
)
def test_mutant_fails_naming_its_cause(implementation, cause, capsys):
    fails_naming_its_cause(check_layernorm_backward, implementation, cause, capsys)


@pytest.mark.parametrize(
    "implementation", [pytest.param(row[1], id=row[0]) for row in ALTERNATIVES]
)
def test_alternative_correct_implementation_passes(implementation, capsys):
    passes(check_layernorm_backward, implementation, capsys)


def test_not_a_function_is_a_type_error():
    with pytest.raises(TypeError, match="expects a function, got int"):
        check_layernorm_backward(3)


def test_the_catalogue_names_are_unique():
    names = [row[0] for row in MUTANTS + ALTERNATIVES]
    assert len(set(names)) == len(names)
