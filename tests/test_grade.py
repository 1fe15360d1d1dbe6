"""``tfcourse grade``: restamping, reports, JSON/CSV, exit codes.

Fast tests use in-memory notebooks (and ``grade`` with the sealed verdicts stood in for);
the slow ones grade the fixture notebook (tests/fixtures/solutions/99_fixture.ipynb) in
sealed workers: a folder of three submissions (solved with tampered checks; wrong +
hanging; stub + a cell that ends its process). The attacks on the grader's own ground
(answer keys, symlinks, flags, output files, --unsealed) are in test_grade_class_run.py.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output

from tfcourse import cli
from tfcourse.authoring.build import make_learner, solve
from tfcourse.course import notebook_format
from tfcourse.course.restamp import restamp
from tfcourse.grade.notebook import find_solution
from tfcourse.grade.records import ExerciseResult, NotebookGrade
from tfcourse.grade.report import format_report, write_csv
from tfcourse.grade.sealed.session import SealedVerdict, Setup

from helpers import FIXTURE, SOLUTIONS, TESTS, comparable, describe_outputs

SANITIZE = TESTS / "nbval_sanitize.cfg"
# Per-cell limit for the slow tests: far above what any fixture cell needs (the setup
# cell imports torch), far below the 600 s the hanging cell would take.
TIMEOUT = 20


def cell(nb, cell_id):
    return next(c for c in nb.cells if c.get("id") == cell_id)


def stdout(text):
    return [new_output("stream", name="stdout", text=text)]


# --- restamping (no worker) -------------------------------------------------------------


def test_restamp_undoes_an_edited_check_cell(solution, learner):
    check = cell(learner, "check-causal-mask")
    check.source = 'print("Causal mask: 3/3 checks passed")'
    check.outputs = stdout("something the learner saw\n")
    check.metadata["tags"] = []
    stamped, repairs = restamp(learner, solution)
    restored = cell(stamped, "check-causal-mask")
    reference = cell(solution, "check-causal-mask")
    assert restored.source == reference.source
    assert restored.outputs == reference.outputs
    assert restored.execution_count == reference.execution_count
    assert notebook_format.tags(restored) == ["check", "nbval-check-output"]
    assert restored.metadata["editable"] is False
    assert [(r.cell_id, r.action) for r in repairs] == [("check-causal-mask", "edited")]
    assert "was edited; the original was restored" in repairs[0].describe()
    assert cell(learner, "check-causal-mask").source.startswith("print")  # input untouched


def test_restamp_reinserts_a_deleted_check_cell_at_the_solutions_position(solution, learner):
    learner.cells = [c for c in learner.cells if c.id != "check-rmsnorm"]
    stamped, repairs = restamp(learner, solution)
    ids = [c.id for c in stamped.cells]
    assert ids == [c.id for c in solution.cells]
    assert [(r.cell_id, r.action) for r in repairs] == [("check-rmsnorm", "deleted")]
    # With its exercise cell gone too, it goes after the nearest earlier surviving cell.
    learner.cells = [c for c in learner.cells if c.id != "ex-rmsnorm"]
    stamped, _ = restamp(learner, solution)
    ids = [c.id for c in stamped.cells]
    assert ids.index("check-rmsnorm") == ids.index("ex-rmsnorm-text") + 1


def test_restamp_keeps_learner_cells_and_clears_their_outputs(solution, learner):
    scratch = new_code_cell("print('my experiment')", id="scratch")
    scratch.outputs, scratch.execution_count = stdout("my experiment\n"), 9
    copied = copy.deepcopy(cell(learner, "check-rmsnorm"))
    copied.id = "check-rmsnorm-copy"
    duplicate = new_markdown_cell("notes", id="title")  # an id clash (old copy-paste)
    learner.cells[3:3] = [scratch, copied, duplicate]
    cell(learner, "mask-shape").outputs = stdout("(4, 4) 10\n")
    cell(learner, "mask-shape").execution_count = 4
    stamped, repairs = restamp(learner, solution)
    assert repairs == []
    assert cell(stamped, "scratch").source == "print('my experiment')"
    # Only the solution's check cells keep a stored output, so nbval (which skips cells
    # without an execution count) compares exactly what the grader judges.
    for c in stamped.cells:
        if c.cell_type == "code" and c.id not in ("check-causal-mask", "check-rmsnorm"):
            assert c.outputs == [] and c.execution_count is None, c.id
    ids = [c.id for c in stamped.cells]
    assert len(ids) == len(set(ids)) and "title-2" in ids


def _without_ids(nb, prefix=None):
    """The notebook as another editor saves it: ids dropped (nbformat 4.4) or regenerated."""
    nb = copy.deepcopy(nb)
    for index, c in enumerate(nb.cells):
        if prefix is None:
            c.pop("id", None)
        else:
            c["id"] = f"{prefix}{index:04x}"
    return nb


@pytest.mark.parametrize("prefix", [None, "colab-"])
def test_restamp_finds_checks_without_their_ids(solution, learner, prefix):
    """Ids stripped or regenerated: the checks are found by content, then by exercise name;
    a deleted one comes back right after its exercise, not at the top before the imports."""
    learner = _without_ids(learner, prefix)
    for c in learner.cells:
        if notebook_format.is_check(c) and notebook_format.exercise_name(c) == "Causal mask":
            c.source = 'print("Causal mask: 5/5 checks passed")'  # edited
    learner.cells = [c for c in learner.cells if c.get("source") != "check_rmsnorm(RMSNorm)"]
    if prefix is None:
        notebook_format.normalize_metadata(learner)
        for index, c in enumerate(learner.cells):  # what reading a 4.4 file gives
            c["id"] = f"cell{index}"
    stamped, repairs = restamp(learner, solution)
    assert sorted((r.cell_id, r.action) for r in repairs) == [
        ("check-causal-mask", "edited"),
        ("check-rmsnorm", "deleted"),
    ]
    order = [c.get("source", "").splitlines()[0] for c in stamped.cells if c.cell_type == "code"]
    assert order.index("check_causal_mask(causal_mask)") == order.index("def causal_mask(T):") + 1
    assert (
        order.index("check_rmsnorm(RMSNorm)") == order.index("class RMSNorm(torch.nn.Module):") + 1
    )
    ids = [c.id for c in stamped.cells]
    assert len(ids) == len(set(ids)) and {"check-causal-mask", "check-rmsnorm"} <= set(ids)


def test_restamp_places_a_missing_check_after_the_exercise_found_by_its_definition(
    solution, learner
):
    """Tags gone too (an editor that keeps no metadata): the exercise cell is the one that
    defines what the solution's exercise cell defines."""
    learner = _without_ids(learner, "x-")
    for c in learner.cells:
        c.metadata = {}
    learner.cells = [c for c in learner.cells if not c.get("source", "").startswith("check_")]
    learner.cells.insert(2, new_code_cell("def helper():\n    return 1", id="mine"))
    stamped, repairs = restamp(learner, solution)
    assert {(r.cell_id, r.action) for r in repairs} == {
        ("check-causal-mask", "deleted"),
        ("check-rmsnorm", "deleted"),
    }
    sources = [c.get("source", "") for c in stamped.cells]
    assert sources[sources.index("check_rmsnorm(RMSNorm)") - 1].startswith("class RMSNorm(")
    assert sources[sources.index("check_causal_mask(causal_mask)") - 1].startswith(
        "def causal_mask(T):"
    )


def test_restamp_puts_a_check_with_nothing_to_follow_at_the_end_not_the_top(solution, learner):
    learner.cells = [c for c in learner.cells if c.id in ("setup", "summary")]
    stamped, _ = restamp(learner, solution)
    ids = [c.id for c in stamped.cells]
    assert ids.index("setup") < ids.index("check-causal-mask") < ids.index("check-rmsnorm")


# --- judging (no worker) ----------------------------------------------------------------


def test_comparable_merges_streams_sanitizes_and_skips_pictures():
    outputs = [
        new_output("stream", name="stdout", text="a at 0x7f3a12bc45d0\n"),
        new_output("display_data", data={"image/png": "iVBOR", "text/plain": "<Figure>"}),
        new_output("stream", name="stdout", text="b\n"),
        new_output("stream", name="stderr", text="/home/bob/x.py:1: UserWarning\n"),
    ]
    fields = comparable(outputs)
    assert fields == {
        "stdout": ["a at 0x<address>\nb\n"],
        "text/plain": ["<Figure>"],
        "stderr": ["<path>/x.py:1: UserWarning\n"],
    }
    assert describe_outputs(fields) == (
        "a at 0x<address>\nb\n(displayed) <Figure>\n(on stderr) <path>/x.py:1: UserWarning"
    )


def _graded(monkeypatch, solution, learner, verdicts, setup=None):
    """``grade`` with the sealed verdicts stood in for (no worker starts): the results by
    exercise, the grade, and what the sealed path was asked."""
    from tfcourse.grade import notebook as grade_module

    asked = []

    def sealed(notebook, solution_, names, setup_, identity=""):
        asked.append((names, setup_))
        return {name: verdicts[name] for name in names}

    monkeypatch.setattr(grade_module, "grade_exercises", sealed)
    result = grade_module.grade(learner, solution, setup or Setup(env={"PATH": "/bin"}))
    return {r.name: r for r in result.exercises}, result, asked


PASSED = {
    "Causal mask": SealedVerdict("passed", "causal_mask: 4/4 checks passed"),
    "RMSNorm": SealedVerdict("passed", "RMSNorm: 6/6 checks passed"),
}


def test_grade_turns_sealed_verdicts_into_results(monkeypatch, solution, learner):
    results, graded, asked = _graded(monkeypatch, solution, learner, PASSED)
    assert asked[0][0] == ["Causal mask", "RMSNorm"] and asked[0][1].unsealed is False
    assert all(r.passed and r.reason == "" and r.sealed for r in results.values())
    assert list(results) == ["Causal mask", "RMSNorm"] and graded.ok and graded.isolation

    stub = "NotImplementedError: Exercise 'Causal mask': replace this line with your implementation"
    results, graded, _ = _graded(
        monkeypatch,
        solution,
        learner,
        {
            "Causal mask": SealedVerdict(
                "failed", stub, reason="error", notes=["cell 'oops' (#3) raised ZeroDivisionError"]
            ),
            "RMSNorm": SealedVerdict("failed", "RMSNorm: 1/2 checks", reason="mismatch"),
        },
    )
    mask, norm = results["Causal mask"], results["RMSNorm"]
    assert (mask.passed, mask.reason, mask.expected) == (
        False,
        "error",
        "causal_mask: 4/4 checks passed",
    )
    assert mask.got == stub + "\n(the exercise is not implemented yet)"
    assert mask.notes == ["cell 'oops' (#3) raised ZeroDivisionError"]
    assert (norm.passed, norm.reason) == (False, "mismatch")
    assert (norm.expected, norm.got) == ("RMSNorm: 6/6 checks passed", "RMSNorm: 1/2 checks")
    assert (graded.passed, graded.total, graded.ok) == (0, 2, False)


@pytest.mark.parametrize(
    "verdict, reason",
    [
        (
            SealedVerdict("failed", "the cell did not finish within 5 s", reason="timeout"),
            "timeout",
        ),
        (
            SealedVerdict(
                "failed", "while running your cells, the worker stopped", reason="worker-died"
            ),
            "worker-died",
        ),
        (
            SealedVerdict("failed", "the worker's reply does not add up", reason="protocol"),
            "protocol",
        ),
        (
            SealedVerdict(
                "failed", "its check cell cannot be judged sealed", reason="not-gradeable"
            ),
            "not-gradeable",
        ),
        (
            SealedVerdict("shortcut", "called torch.rms_norm, which does the whole exercise"),
            "shortcut",
        ),
    ],
)
def test_a_failed_verdict_keeps_its_reason_and_costs_only_its_exercise(
    monkeypatch, solution, learner, verdict, reason
):
    results, graded, _ = _graded(monkeypatch, solution, learner, {**PASSED, "RMSNorm": verdict})
    assert (results["RMSNorm"].passed, results["RMSNorm"].reason) == (False, reason)
    assert results["RMSNorm"].got == verdict.output
    assert results["Causal mask"].passed and (graded.passed, graded.total) == (1, 2)


def test_an_unsealed_grade_says_so_in_every_line(monkeypatch, solution, learner):
    results, graded, asked = _graded(
        monkeypatch,
        solution,
        learner,
        {**PASSED, "RMSNorm": SealedVerdict("failed", "RMSNorm: 1/2 checks", reason="mismatch")},
        setup=Setup(env={}, sandbox="none"),
    )
    assert asked[0][1].unsealed and not any(r.sealed for r in results.values())
    assert graded.isolation[0].startswith("UNSEALED (--unsealed): the teacher asked for it")
    report = format_report(graded)
    assert "  Causal mask: PASS (UNSEALED)\n" in report and "  RMSNorm: FAIL (UNSEALED)\n" in report
    assert [e["sealed"] for e in graded.to_dict()["exercises"]] == [False, False]


def test_report_says_expected_and_got_in_plain_words():
    grade = NotebookGrade(
        notebook="alice/03_norms.ipynb",
        solution="solutions/03_norms.ipynb",
        seconds=4.2,
    )
    grade.exercises = [
        ExerciseResult("LayerNorm", True),
        ExerciseResult(
            "RMSNorm",
            False,
            expected="RMSNorm: 6/6 checks passed",
            got="AssertionError: RMSNorm: output differs\nmax |diff| 0.31",
            reason="error",
        ),
    ]
    report = format_report(grade)
    assert report.split("\n") == [
        "alice/03_norms.ipynb (against solutions/03_norms.ipynb, 4.2 s)",
        "  LayerNorm: PASS",
        "  RMSNorm: FAIL",
        "      expected: 'RMSNorm: 6/6 checks passed'",
        "      got:      AssertionError: RMSNorm: output differs",
        "                max |diff| 0.31",
        "  score: 1/2 exercises passed",
    ]
    assert not grade.ok and grade.to_dict()["passed"] == 1
    broken = NotebookGrade(notebook="x.ipynb", error="cannot read notebook")
    assert format_report(broken) == "x.ipynb: NOT GRADED — cannot read notebook"


def test_csv_has_one_row_per_notebook_and_one_column_per_exercise(tmp_path):
    first = NotebookGrade(
        "a.ipynb",
        "s/01.ipynb",
        exercises=[ExerciseResult("Mask", True), ExerciseResult("Attention", False)],
        seconds=1.25,
    )
    second = NotebookGrade("b.ipynb", "s/03.ipynb", exercises=[ExerciseResult("RMSNorm", True)])
    broken = NotebookGrade("c.ipynb", error="no solution notebook for c.ipynb")
    write_csv([first, second, broken], tmp_path / "grades.csv")
    rows = list(csv.reader((tmp_path / "grades.csv").open()))
    assert rows == [
        [
            "notebook",
            "solution",
            "Mask",
            "Attention",
            "RMSNorm",
            "passed",
            "total",
            "seconds",
            "sealed",
            "error",
        ],
        ["a.ipynb", "s/01.ipynb", "1", "0", "", "1", "2", "1.2", "yes", ""],
        ["b.ipynb", "s/03.ipynb", "", "", "1", "1", "1", "0.0", "yes", ""],
        ["c.ipynb", "", "", "", "", "0", "0", "0.0", "yes", "no solution notebook for c.ipynb"],
    ]
    second.exercises[0].sealed = False  # graded with --unsealed
    write_csv([first, second], tmp_path / "grades.csv")
    rows = list(csv.DictReader((tmp_path / "grades.csv").open()))
    assert [row["sealed"] for row in rows] == ["yes", "no"]


def test_find_solution_by_name_by_contained_name_and_by_against(tmp_path):
    assert find_solution(tmp_path / "99_fixture.ipynb", SOLUTIONS) == FIXTURE
    assert find_solution(tmp_path / "alice_99_fixture (1).ipynb", SOLUTIONS) == FIXTURE
    assert find_solution(tmp_path / "anything.ipynb", SOLUTIONS, against="99_fixture") == FIXTURE
    assert find_solution(tmp_path / "x.ipynb", SOLUTIONS, against="99_fixture.ipynb") == FIXTURE
    with pytest.raises(ValueError, match=r"no solution notebook for other\.ipynb"):
        find_solution(tmp_path / "other.ipynb", SOLUTIONS)


@pytest.mark.parametrize(
    "against",
    ["../solutions/99_fixture", "/etc/passwd", "99_fixture/../x", "00_unknown", "", ".hidden"],
)
def test_against_takes_only_a_course_notebook_name(tmp_path, against):
    with pytest.raises(ValueError, match="is not one of the course's notebooks"):
        find_solution(tmp_path / "99_fixture.ipynb", SOLUTIONS, against=against)


def test_the_submission_cannot_choose_its_answer_key(tmp_path, solution):
    """A crafted ``metadata.tfcourse.notebook`` (a path to a file of its own) is ignored."""
    key = tmp_path / "key.ipynb"
    key.write_text("{}")
    learner = make_learner(solution, "99_fixture")
    learner.metadata["tfcourse"]["notebook"] = str(key.with_suffix(""))
    path = tmp_path / "99_fixture.ipynb"
    notebook_format.write_notebook(learner, path)
    assert find_solution(path, SOLUTIONS) == FIXTURE
    learner.metadata["tfcourse"]["notebook"] = "../" + key.stem
    notebook_format.write_notebook(learner, tmp_path / "homework.ipynb")
    with pytest.raises(ValueError, match=r"no solution notebook for homework\.ipynb"):
        find_solution(tmp_path / "homework.ipynb", SOLUTIONS)


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--csv", "{missing}/x.csv", "does not exist"),
        ("--gradescope", "{missing}/results.json", "does not exist"),
        ("--csv", "{tmp}", "is a folder"),
    ],
)
def test_output_paths_are_checked_before_any_grading(
    tmp_path, capsys, monkeypatch, flag, value, message
):
    from tfcourse.grade import notebook as grade_module

    monkeypatch.setattr(
        grade_module,
        "grade_notebook",
        lambda *a, **k: pytest.fail("graded before checking the output paths"),
    )
    (tmp_path / "afile").write_text("")
    notebook_format.write_notebook(
        make_learner(notebook_format.read_notebook(FIXTURE), "99_fixture"),
        tmp_path / "99_fixture.ipynb",
    )
    value = value.format(missing=tmp_path / "missing", tmp=tmp_path, file=tmp_path / "afile")
    status = cli.main(
        ["grade", str(tmp_path / "99_fixture.ipynb"), "--solutions", str(SOLUTIONS), flag, value]
    )
    assert status == 2
    assert message in capsys.readouterr().err


def test_bad_arguments_exit_2(tmp_path, capsys):
    assert cli.main(["grade", str(tmp_path / "missing.ipynb")]) == 2
    assert cli.main(["grade", str(tmp_path)]) == 2  # a folder with no notebooks
    assert "error:" in capsys.readouterr().err


def test_unreadable_or_unmatched_notebooks_are_reported_not_raised(tmp_path, capsys):
    (tmp_path / "broken.ipynb").write_text("{not json")
    code = cli.main(["grade", str(tmp_path / "broken.ipynb"), "--solutions", str(SOLUTIONS)])
    assert code == 1
    assert "broken.ipynb: NOT GRADED — " in capsys.readouterr().out


def test_a_deeply_nested_notebook_is_one_line_and_the_class_goes_on(tmp_path, capsys):
    """JSON nested past Python's recursion limit makes ``json.loads`` raise RecursionError,
    which is no ValueError: it must not end the class run."""
    (tmp_path / "99_fixture.ipynb").write_text('{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}")
    (tmp_path / "other.ipynb").write_text("{not json")
    code = cli.main(["grade", str(tmp_path), "--solutions", str(SOLUTIONS), "--unsealed"])
    assert code == 1
    out = capsys.readouterr().out
    assert "99_fixture.ipynb: NOT GRADED — " in out and "cannot read notebook" in out
    assert "other.ipynb: NOT GRADED — " in out
    with pytest.raises(ValueError, match="cannot read notebook"):
        notebook_format.read_notebook(tmp_path / "99_fixture.ipynb")


# --- sealed workers ---------------------------------------------------------------------


def _submissions(folder: Path, solution, learner) -> None:
    """Three learner notebooks, as a teacher would collect them."""
    solved = solve(learner, solution)
    # A: everything solved, but one check edited to fake a pass and one check deleted.
    a = copy.deepcopy(solved)
    cell(a, "check-causal-mask").source = 'print("Causal mask: 3/3 checks passed")'
    a.cells = [c for c in a.cells if c.id != "check-rmsnorm"]
    notebook_format.write_notebook(a, folder / "a_solved.ipynb")
    # B: a wrong mask (diagonal masked), then a cell that hangs; RMSNorm solved after it.
    b = copy.deepcopy(solved)
    cell(b, "ex-causal-mask").source = cell(b, "ex-causal-mask").source.replace(
        "torch.tril(torch.ones(T, T, dtype=torch.bool))",
        "torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)",
    )
    index = [c.id for c in b.cells].index("ex-rmsnorm")
    b.cells.insert(index, new_code_cell("import time\ntime.sleep(600)", id="hang"))
    b.cells.insert(index, new_code_cell("1 / 0", id="oops"))
    notebook_format.write_notebook(b, folder / "b_wrong.ipynb")
    # C: the untouched stub, with a cell that ends its process between the two checks.
    c = copy.deepcopy(learner)
    index = [x.id for x in c.cells].index("check-causal-mask") + 1
    c.cells.insert(index, new_code_cell("import os\nos._exit(1)", id="crash"))
    notebook_format.write_notebook(c, folder / "c_stub.ipynb")


@pytest.fixture(scope="module")
def graded_folder(tmp_path_factory, solution):
    """Grade the three submissions once with --json and --csv; tests read the results."""
    folder = tmp_path_factory.mktemp("submissions")
    _submissions(folder, solution, make_learner(solution, "99_fixture"))
    out = tmp_path_factory.mktemp("out")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tfcourse",
            "grade",
            str(folder),
            "--json",
            "--csv",
            str(out / "grades.csv"),
            "--timeout",
            str(TIMEOUT),
            "--solutions",
            str(SOLUTIONS),
            "--against",
            "99_fixture",
            "--jobs",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    grades = {Path(g["notebook"]).name: g for g in json.loads(result.stdout)}
    return result.returncode, grades, out / "grades.csv"


def _exercise(grade, name):
    return next(e for e in grade["exercises"] if e["name"] == name)


@pytest.mark.slow
@pytest.mark.notebooks
def test_a_folder_of_three_submissions(graded_folder, subtests):
    """One grading run (its hanging cell waits out the time limit) read by four subtests: one
    test, not four sharing a module fixture, which each xdist worker would build again."""
    code, grades, csv_path = graded_folder
    with subtests.test("the exit code and the CSV"):
        assert code == 1  # not every notebook passes
        rows = list(csv.DictReader(csv_path.open()))
        assert [Path(r["notebook"]).name for r in rows] == [
            "a_solved.ipynb",
            "b_wrong.ipynb",
            "c_stub.ipynb",
        ]
        assert [(r["Causal mask"], r["RMSNorm"], r["passed"], r["total"]) for r in rows] == [
            ("1", "1", "2", "2"),
            ("0", "1", "1", "2"),
            ("0", "0", "0", "2"),
        ]

    with subtests.test("a faked and a deleted check change nothing"):
        grade = grades["a_solved.ipynb"]
        assert grade["ok"] and grade["passed"] == grade["total"] == 2

    with subtests.test("raising and hanging cells are reported and later cells still run"):
        grade = grades["b_wrong.ipynb"]
        mask = _exercise(grade, "Causal mask")
        assert (mask["passed"], mask["reason"]) == (False, "error")
        assert mask["expected"] == "causal_mask: 4/4 checks passed"
        assert mask["got"].startswith(
            "AssertionError: causal_mask: mask differs from the reference (check 1 of 4)\n"
            "  case: causal_mask("
        )
        assert "\n  looks like: the diagonal is excluded" in mask["got"]
        norm = _exercise(grade, "RMSNorm")
        assert norm["passed"] and norm["sealed"]  # judged after the raising and the hanging cell
        notes = "\n".join(norm["notes"])
        assert "cell 'oops' (#8) raised ZeroDivisionError: division by zero" in notes
        assert f"cell 'hang' (#9) raised CellTimeout: did not finish within {TIMEOUT:g} s" in notes

    with subtests.test("a stub fails and a dead worker is reported"):
        grade = grades["c_stub.ipynb"]
        mask, norm = _exercise(grade, "Causal mask"), _exercise(grade, "RMSNorm")
        assert mask["reason"] == "error" and mask["got"].startswith(
            "NotImplementedError: Exercise 'Causal mask': replace this line"
        )
        # The cell that ends its process runs before RMSNorm's exercise: RMSNorm's worker dies.
        assert (norm["passed"], norm["reason"]) == (False, "worker-died")
        assert norm["got"].startswith("while running your cells, the worker stopped")


@pytest.mark.slow
@pytest.mark.notebooks
def test_single_pass_exits_0_and_agrees_with_nbval_on_the_restamped_notebooks(
    tmp_path, solution, learner, capsys
):
    """The grader's verdicts and ``pytest --nbval-lax`` on the notebooks with their check
    cells put back (``restamp``, as ``tfcourse.yours`` reads a learner's notebook) agree."""
    solved = solve(learner, solution)
    for c in solved.cells:  # as saved by a learner who ran everything
        if notebook_format.is_check(c):
            c.outputs = stdout("whatever ran last\n")
    notebook_format.write_notebook(solved, tmp_path / "solved.ipynb")
    code = cli.main(
        [
            "grade",
            str(tmp_path / "solved.ipynb"),
            "--solutions",
            str(SOLUTIONS),
            "--against",
            "99_fixture",
            "--timeout",
            str(TIMEOUT),
        ]
    )
    report = capsys.readouterr().out
    assert code == 0, report
    # each verdict on a line of its own (the functions each exercise called follow it)
    assert "  Causal mask: PASS\n" in report and "  RMSNorm: PASS\n" in report
    assert "  score: 2/2 exercises passed" in report

    for name, nb in (("solved", solved), ("stub", learner)):
        notebook_format.write_notebook(
            restamp(nb, solution)[0], tmp_path / "restamped" / f"{name}.ipynb"
        )
    junit = tmp_path / "nbval.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval-lax",
            "--nbval-current-env",
            "--nbval-sanitize-with",
            str(SANITIZE),
            "-p",
            "no:cacheprovider",
            "-q",
            f"--junitxml={junit}",
            str(tmp_path / "restamped"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        cwd=tmp_path,
        # the outer run's PYTEST_ADDOPTS (e.g. -n 2) would spread the cells over workers
        env={k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"},
    )
    failed = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failed.setdefault(Path(case.get("file") or case.get("classname")).stem, []).append(
            case.find("failure") is not None or case.find("error") is not None
        )
    solved_cells = [v for k, v in failed.items() if "solved" in k]
    stub_cells = [v for k, v in failed.items() if "stub" in k]
    assert solved_cells and not any(solved_cells[0]), failed
    # The stub fails at exactly its two check cells (code cells #2 and #6).
    assert [i for i, f in enumerate(stub_cells[0]) if f] == [2, 6], failed


# --- honest variants and a neighbour's attack, graded together (sealed workers) --------


def _honest_and_attacked(folder: Path, solution, learner) -> None:
    """Submissions that must score full marks, however they were saved, and one that
    tries to overwrite its neighbour."""
    solved = solve(learner, solution)
    notebook_format.write_notebook(solved, folder / "victim.ipynb")
    # Alternative correct implementations.
    other = copy.deepcopy(solved)
    cell(
        other, "ex-causal-mask"
    ).source = "def causal_mask(T):\n    return ~torch.triu(torch.ones(T, T, dtype=torch.bool), 1)"
    rmsnorm = cell(other, "ex-rmsnorm")
    rmsnorm.source = rmsnorm.source.replace(
        "rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)\n"
        "        return self.weight * (x / rms)",
        "return self.weight * x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps)",
    )
    assert rmsnorm.source != cell(solved, "ex-rmsnorm").source
    notebook_format.write_notebook(other, folder / "alternative.ipynb")
    # Saved by an older editor: nbformat 4.4, no ids at all.
    old = _without_ids(solved)
    old.nbformat_minor = 4
    (folder / "no_ids.ipynb").write_text(json.dumps(old), encoding="utf-8")
    # Round-tripped through another editor: every id regenerated; extra cells with outputs.
    regenerated = _without_ids(solved, "colab-")
    regenerated.cells.insert(
        2,
        new_code_cell(
            "print('my notes')", id="extra", outputs=stdout("my notes\n"), execution_count=3
        ),
    )
    regenerated.cells.append(new_markdown_cell("I enjoyed this.", id="thanks"))
    notebook_format.write_notebook(regenerated, folder / "作业 99 张三 (final).ipynb")
    # Saved after running everything: every cell carries outputs, the checks their own.
    saved = copy.deepcopy(solved)
    for c in saved.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = stdout("whatever ran last\n"), 7
    notebook_format.write_notebook(saved, folder / "saved_outputs.ipynb")
    # Einsum and a helper function of the learner's own, defined in a cell of its own.
    helper = copy.deepcopy(solved)
    index = [c.id for c in helper.cells].index("ex-rmsnorm")
    helper.cells.insert(
        index,
        new_code_cell(
            "def mean_square(x):\n"
            "    return torch.einsum('...d,...d->...', x, x)[..., None] / x.shape[-1]",
            id="helper",
        ),
    )
    norm = cell(helper, "ex-rmsnorm")
    norm.source = norm.source.replace("x.pow(2).mean(dim=-1, keepdim=True)", "mean_square(x)")
    assert "mean_square(x)" in norm.source
    notebook_format.write_notebook(helper, folder / "helper_99_fixture.ipynb")
    # Overwrites the neighbour it expects beside it, then scores nothing itself.
    attacker = copy.deepcopy(learner)
    attacker.cells.insert(
        2,
        new_code_cell(
            "import glob, os\n"
            "paths = glob.glob('*.ipynb') + glob.glob('../*.ipynb') + glob.glob('../*/*.ipynb')\n"
            "for path in paths:\n"
            "    if 'attacker' not in path:\n"
            "        open(path, 'w').write('{}')",
            id="vandal",
        ),
    )
    notebook_format.write_notebook(attacker, folder / "attacker.ipynb")


@pytest.mark.slow
@pytest.mark.notebooks
def test_honest_variants_score_full_marks_and_a_neighbour_cannot_harm_them(
    tmp_path, solution, learner
):
    folder = tmp_path / "submissions"
    folder.mkdir()
    _honest_and_attacked(folder, solution, learner)
    names = sorted(p.name for p in folder.glob("*.ipynb"))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tfcourse",
            "grade",
            str(folder),
            "--json",
            "--against",
            "99_fixture",
            "--solutions",
            str(SOLUTIONS),
            "--timeout",
            str(TIMEOUT),
            "--jobs",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    grades = {Path(g["notebook"]).name: g for g in json.loads(result.stdout)}
    assert sorted(grades) == names
    scores = {name: (g["passed"], g["total"], g["error"]) for name, g in grades.items()}
    assert scores == {
        name: ((0, 2, "") if name == "attacker.ipynb" else (2, 2, "")) for name in names
    }
    assert all(json.loads((folder / name).read_text()) for name in names)  # none emptied


def missing_tests(text: str) -> list[str]:
    """The tests ``text`` names (```tests/test_x.py``` and ```test_name```) that do not
    exist: a file that is not there, or a test function no test file defines."""
    root = Path(__file__).resolve().parent
    defined = {
        name
        for path in root.glob("test_*.py")
        for name in re.findall(r"^def (test_\w+)\(", path.read_text(encoding="utf-8"), re.M)
    }
    files = re.findall(r"`tests/(test_\w+\.py)`", text)
    names = re.findall(r"`(test_\w+)`", text)
    return [f for f in files if not (root / f).is_file()] + [n for n in names if n not in defined]


def test_every_promise_names_tests_that_exist():
    """SECURITY.md promises four things, each with the tests that attack it."""
    text = (Path(__file__).resolve().parents[1] / "SECURITY.md").read_text(encoding="utf-8")
    promises = re.findall(r"^\d\. \*\*(.+?)\*\*", text, re.M | re.S)
    assert len(promises) == 4, promises
    sections = re.split(r"^\d\. \*\*", text.split("## What is not promised")[0], flags=re.M)[1:]
    assert all("Tests: `tests/" in section for section in sections)
    assert missing_tests(text) == []
    assert missing_tests("`tests/test_nowhere.py` (`test_a_promise_nobody_tests`)") == [
        "test_nowhere.py",
        "test_a_promise_nobody_tests",
    ]
