"""Notebook 10's check ``check_rotary_attention``: correct code passes, each known mistake is
named (see ``tests/test_mutants.py``; the catalogue is ``tests/mutants/rotary_attention.py``)."""

from __future__ import annotations

import pytest

from tfcourse.checks import check_rotary_attention

from mutants import fails_naming_its_cause, passes
from mutants.rotary_attention import ALTERNATIVES, MUTANTS


@pytest.mark.parametrize(
    "implementation, cause", [pytest.param(*row[1:], id=row[0]) for row in MUTANTS]
)
def test_mutant_fails_naming_its_cause(implementation, cause, capsys):
    fails_naming_its_cause(check_rotary_attention, implementation, cause, capsys)


@pytest.mark.parametrize(
    "implementation", [pytest.param(row[1], id=row[0]) for row in ALTERNATIVES]
)
def test_alternative_correct_implementation_passes(implementation, capsys):
    passes(check_rotary_attention, implementation, capsys)
