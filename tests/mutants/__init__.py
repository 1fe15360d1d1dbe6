"""The catalogue of deliberately wrong implementations the check tests share.

A check that cannot fail is a defect: each check meets the classic mistakes and must name
them. Each module holds a ``MUTANTS`` list, wrong implementations with one mistake each,
every one of which must fail its check with an ``AssertionError`` that names the cause in
its verdict (the first line, what was raised, or "looks like: ...":
``conftest.verdict_lines``), and an ``ALTERNATIVES`` list, other correct ways to write the
same thing (einsum, additive masks, separate projections, torch's own layers), every one of
which must pass. The learner-style bases the mutants derive from are among the
alternatives, so each mutant differs from a passing implementation by its one mistake.

- ``core``: notebooks 01 to 08 (``tests/test_mutants.py``);
- ``gqa``: ``check_repeat_kv`` of notebook 10 (``tests/test_mutants_gqa.py``);
- ``claims``: ``check_permute_qk_rows`` of notebook 11 (``tests/test_mutants_claims.py``);
- ``optimizer``: ``check_configure_optimizer`` of notebook 08 (``tests/test_mutants_optimizer.py``).

The Chinese-edition and grading-case tests run the same catalogue.
"""

from __future__ import annotations

import pytest

from tfcourse.language import text_width

from conftest import verdict_lines

FIRST_LINE_COLUMNS = 110


def fails_naming_its_cause(check, implementation, cause: str, capsys) -> None:
    """``check(implementation)`` fails, its verdict names ``cause``, nothing is printed."""
    with pytest.raises(AssertionError) as info:
        check(implementation)
    assert cause in verdict_lines(str(info.value)), str(info.value)
    # The first line fits a notebook's output area; the details follow on lines of their own.
    first = str(info.value).splitlines()[0]
    assert text_width(first) <= FIRST_LINE_COLUMNS, first
    assert capsys.readouterr().out == ""  # no "checks passed" line


def passes(check, implementation, capsys) -> None:
    """``check(implementation)`` passes and prints its one success line."""
    check(implementation)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.endswith("checks passed\n")
