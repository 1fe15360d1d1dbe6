"""Notebook 10's check ``check_llama_block``: correct code passes, each known mistake is named
(see ``tests/test_mutants.py``; the catalogue is ``tests/mutants/llama_block.py``)."""

from __future__ import annotations

import pytest

from tfcourse.checks import check_llama_block

from mutants import fails_naming_its_cause, passes
from mutants.llama_block import ALTERNATIVES, MUTANTS


@pytest.mark.parametrize(
    "implementation, cause", [pytest.param(*row[1:], id=row[0]) for row in MUTANTS]
)
def test_mutant_fails_naming_its_cause(implementation, cause, capsys):
    fails_naming_its_cause(check_llama_block, implementation, cause, capsys)


@pytest.mark.parametrize(
    "implementation", [pytest.param(row[1], id=row[0]) for row in ALTERNATIVES]
)
def test_alternative_correct_implementation_passes(implementation, capsys):
    passes(check_llama_block, implementation, capsys)
