"""Notebook 08's check ``check_configure_optimizer``: correct code passes, each known mistake
is named. The catalogue is ``tests/mutants/optimizer.py`` (see ``tests/test_mutants_gqa.py``)."""

from __future__ import annotations

import pytest
import torch

from tfcourse.checks import check_configure_optimizer

from mutants import fails_naming_its_cause, passes
from mutants.optimizer import ALTERNATIVES, MUTANTS, make_configure_optimizer


@pytest.mark.parametrize(
    "implementation, cause", [pytest.param(*row[1:], id=row[0]) for row in MUTANTS]
)
def test_mutant_fails_naming_its_cause(implementation, cause, capsys):
    fails_naming_its_cause(check_configure_optimizer, implementation, cause, capsys)


@pytest.mark.parametrize(
    "implementation", [pytest.param(row[1], id=row[0]) for row in ALTERNATIVES]
)
def test_alternative_correct_implementation_passes(implementation, capsys):
    passes(check_configure_optimizer, implementation, capsys)


def test_not_a_function_is_a_type_error():
    with pytest.raises(TypeError, match="expects a function, got int"):
        check_configure_optimizer(3)


def test_the_catalogue_names_are_unique():
    names = [row[0] for row in MUTANTS + ALTERNATIVES]
    assert len(set(names)) == len(names)


def test_an_answer_that_is_no_optimizer_says_what_it_is(capsys):
    """A list of param groups, the optimizer not built: named by its type."""

    def groups_only(model, *, lr, weight_decay=0.1, betas=(0.9, 0.95), eps=1e-8):
        return [{"params": list(model.parameters()), "weight_decay": weight_decay}]

    with pytest.raises(AssertionError, match=r"returned a list, expected a torch\.optim\.AdamW"):
        check_configure_optimizer(groups_only)


def test_sgd_is_refused_without_naming_adam():
    def sgd(model, *, lr, weight_decay=0.1, betas=(0.9, 0.95), eps=1e-8):
        return torch.optim.SGD(model.parameters(), lr=lr, weight_decay=weight_decay)

    with pytest.raises(AssertionError) as info:
        check_configure_optimizer(sgd)
    assert "the optimizer's class is SGD, expected AdamW" in str(info.value)
    assert "looks like" not in str(info.value)


def test_the_first_failing_case_is_the_tied_gpt():
    """The mistakes of the split show on the course's own GPT, the first case."""
    with pytest.raises(AssertionError) as info:
        check_configure_optimizer(make_configure_optimizer("bias-by-name"))
    assert "(check 1 of 4)" in str(info.value).splitlines()[0]
    assert "blocks.0.norm1.weight" in str(info.value)
