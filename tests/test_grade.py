"""``tfcourse grade``: restamping, judging, reports, JSON/CSV, exit codes.

Fast tests use in-memory notebooks; the slow ones run the fixture notebook
(tests/fixtures/solutions/99_fixture.ipynb) in real kernels: a folder of three
submissions (solved with tampered checks; wrong + hanging; stub + crashing kernel).
"""

from __future__ import annotations

import copy
import csv
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output

from tfcourse import cli
from tfcourse.course import notebook_format
from tfcourse.course.grade import (
    ExerciseResult,
    NotebookGrade,
    comparable,
    describe_outputs,
    find_solution,
    format_report,
    judge,
    write_csv,
)
from tfcourse.course.run import CellRun
from tfcourse.course.build import make_learner, solve
from tfcourse.course.restamp import restamp

TESTS = Path(__file__).parent
SOLUTIONS = TESTS / "fixtures" / "solutions"
FIXTURE = SOLUTIONS / "99_fixture.ipynb"
SANITIZE = TESTS / "nbval_sanitize.cfg"
# Per-cell limit for the slow tests: far above what any fixture cell needs (the setup
# cell imports torch), far below the 600 s the hanging cell would take.
TIMEOUT = 20


@pytest.fixture(scope="module")
def solution():
    return notebook_format.read_notebook(FIXTURE)


@pytest.fixture
def learner(solution):
    return make_learner(solution, "99_fixture")


def cell(nb, cell_id):
    return next(c for c in nb.cells if c.get("id") == cell_id)


def stdout(text):
    return [new_output("stream", name="stdout", text=text)]


# --- restamping (no kernel) -------------------------------------------------------------

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


# --- judging (no kernel) ----------------------------------------------------------------

def test_comparable_merges_streams_sanitizes_and_skips_pictures():
    outputs = [new_output("stream", name="stdout", text="a at 0x7f3a12bc45d0\n"),
               new_output("display_data", data={"image/png": "iVBOR", "text/plain": "<Figure>"}),
               new_output("stream", name="stdout", text="b\n"),
               new_output("stream", name="stderr", text="/home/bob/x.py:1: UserWarning\n")]
    fields = comparable(outputs)
    assert fields == {"stdout": ["a at 0x<address>\nb\n"], "text/plain": ["<Figure>"],
                      "stderr": ["<path>/x.py:1: UserWarning\n"]}
    assert describe_outputs(fields) == ("a at 0x<address>\nb\n(displayed) <Figure>\n"
                                        "(on stderr) <path>/x.py:1: UserWarning")


def _judge(solution, learner, runs, outputs):
    stamped, _ = restamp(learner, solution)
    for cell_id, text in outputs.items():
        cell(stamped, cell_id).outputs = stdout(text)
    by_id = {c.id: CellRun(index=i, cell_id=c.id, status="ok")
             for i, c in enumerate(stamped.cells) if c.cell_type == "code"}
    by_id.update({run.cell_id: run for run in runs})
    return {r.name: r for r in judge(solution, stamped, by_id)}


def test_judge_pass_mismatch_error_timeout_and_not_run(solution, learner):
    ok = {"check-causal-mask": "Causal mask: 3/3 checks passed\n",
          "check-rmsnorm": "RMSNorm: 2/2 checks passed\n"}
    results = _judge(solution, learner, [], ok)
    assert all(r.passed and r.reason == "" for r in results.values())
    assert list(results) == ["Causal mask", "RMSNorm"]

    results = _judge(solution, learner, [], {**ok, "check-rmsnorm": "RMSNorm: 1/2 checks\n"})
    assert not results["RMSNorm"].passed and results["RMSNorm"].reason == "mismatch"
    assert results["RMSNorm"].expected == "RMSNorm: 2/2 checks passed"
    assert results["RMSNorm"].got == "RMSNorm: 1/2 checks"

    runs = [CellRun(4, "check-causal-mask", "error", "AssertionError",
                    "Causal mask: wrong mask for T=2"),
            CellRun(3, "ex-causal-mask", "error", "SyntaxError", "invalid syntax (line 3)"),
            CellRun(9, "check-rmsnorm", "timeout", evalue="the cell did not finish within 5 s")]
    results = _judge(solution, learner, runs, ok)
    mask, norm = results["Causal mask"], results["RMSNorm"]
    assert (mask.passed, mask.reason) == (False, "error")
    assert mask.got == "AssertionError: Causal mask: wrong mask for T=2"
    assert mask.notes == [("its exercise cell 'ex-causal-mask' raised SyntaxError: invalid "
                          "syntax (line 3)")]
    assert (norm.passed, norm.reason) == (False, "timeout")
    assert "did not finish within 5 s" in norm.got

    runs = [CellRun(9, "check-rmsnorm", "not-run", evalue="not run: the kernel died in cell 'x'")]
    assert _judge(solution, learner, runs, ok)["RMSNorm"].reason == "not-run"


def test_report_says_expected_and_got_in_plain_words():
    grade = NotebookGrade(notebook="alice/03_norms.ipynb", solution="solutions/03_norms.ipynb",
                          seconds=4.2, restamped=[("check cell 'check-rmsnorm' (RMSNorm) was "
                                                  "edited; the original was restored")])
    grade.exercises = [
        ExerciseResult("LayerNorm", True, ["check-layernorm"]),
        ExerciseResult("RMSNorm", False, ["check-rmsnorm"], expected="RMSNorm: 6/6 checks passed",
                       got="AssertionError: RMSNorm: output differs\nmax |diff| 0.31",
                       reason="error"),
    ]
    report = format_report(grade)
    assert report.split("\n") == [
        "alice/03_norms.ipynb (against solutions/03_norms.ipynb, 4.2 s)",
        "  LayerNorm: PASS",
        "  RMSNorm: FAIL",
        "      expected: 'RMSNorm: 6/6 checks passed'",
        "      got:      AssertionError: RMSNorm: output differs",
        "                max |diff| 0.31",
        "  note: check cell 'check-rmsnorm' (RMSNorm) was edited; the original was restored",
        "  score: 1/2 exercises passed",
    ]
    assert not grade.ok and grade.to_dict()["passed"] == 1
    broken = NotebookGrade(notebook="x.ipynb", error="cannot read notebook")
    assert format_report(broken) == "x.ipynb: NOT GRADED — cannot read notebook"


def test_csv_has_one_row_per_notebook_and_one_column_per_exercise(tmp_path):
    first = NotebookGrade("a.ipynb", "s/01.ipynb", exercises=[
        ExerciseResult("Mask", True, []), ExerciseResult("Attention", False, [])], seconds=1.25)
    second = NotebookGrade("b.ipynb", "s/03.ipynb", exercises=[ExerciseResult("RMSNorm", True, [])])
    broken = NotebookGrade("c.ipynb", error="no solution notebook for c.ipynb")
    write_csv([first, second, broken], tmp_path / "grades.csv")
    rows = list(csv.reader((tmp_path / "grades.csv").open()))
    assert rows == [
        ["notebook", "solution", "Mask", "Attention", "RMSNorm", "passed", "total", "seconds",
         "error"],
        ["a.ipynb", "s/01.ipynb", "1", "0", "", "1", "2", "1.2", ""],
        ["b.ipynb", "s/03.ipynb", "", "", "1", "1", "1", "0.0", ""],
        ["c.ipynb", "", "", "", "", "0", "0", "0.0", "no solution notebook for c.ipynb"],
    ]


def test_find_solution_by_metadata_by_name_and_by_contained_name(tmp_path, learner):
    assert find_solution(learner, tmp_path / "anything.ipynb", SOLUTIONS) == FIXTURE
    learner.metadata["tfcourse"].pop("notebook")
    assert find_solution(learner, tmp_path / "99_fixture.ipynb", SOLUTIONS) == FIXTURE
    assert find_solution(learner, tmp_path / "alice_99_fixture (1).ipynb", SOLUTIONS) == FIXTURE
    with pytest.raises(ValueError, match="no solution notebook for other.ipynb"):
        find_solution(learner, tmp_path / "other.ipynb", SOLUTIONS)


def test_bad_arguments_exit_2(tmp_path, capsys):
    assert cli.main(["grade", str(tmp_path / "missing.ipynb")]) == 2
    assert cli.main(["grade", str(tmp_path)]) == 2  # a folder with no notebooks
    assert "error:" in capsys.readouterr().err


def test_unreadable_or_unmatched_notebooks_are_reported_not_raised(tmp_path, capsys):
    (tmp_path / "broken.ipynb").write_text("{not json")
    code = cli.main(["grade", str(tmp_path / "broken.ipynb"), "--solutions", str(SOLUTIONS)])
    assert code == 1
    assert "broken.ipynb: NOT GRADED — " in capsys.readouterr().out


# --- real kernels -----------------------------------------------------------------------

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
        "torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)")
    index = [c.id for c in b.cells].index("ex-rmsnorm")
    b.cells.insert(index, new_code_cell("import time\ntime.sleep(600)", id="hang"))
    b.cells.insert(index, new_code_cell("1 / 0", id="oops"))
    notebook_format.write_notebook(b, folder / "b_wrong.ipynb")
    # C: the untouched stub, whose kernel dies between the two checks.
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
        [sys.executable, "-m", "tfcourse", "grade", str(folder), "--json", "--csv",
         str(out / "grades.csv"), "--timeout", str(TIMEOUT), "--solutions", str(SOLUTIONS)],
        capture_output=True, text=True, timeout=900, check=False)
    grades = {Path(g["notebook"]).name: g for g in json.loads(result.stdout)}
    return result.returncode, grades, out / "grades.csv"


def _exercise(grade, name):
    return next(e for e in grade["exercises"] if e["name"] == name)


@pytest.mark.slow
@pytest.mark.notebooks
def test_folder_exit_code_and_csv(graded_folder):
    code, _grades, csv_path = graded_folder
    assert code == 1  # not every notebook passes
    rows = list(csv.DictReader(csv_path.open()))
    assert [Path(r["notebook"]).name for r in rows] == ["a_solved.ipynb", "b_wrong.ipynb",
                                                        "c_stub.ipynb"]
    assert [(r["Causal mask"], r["RMSNorm"], r["passed"], r["total"]) for r in rows] == [
        ("1", "1", "2", "2"), ("0", "1", "1", "2"), ("0", "0", "0", "2")]


@pytest.mark.slow
@pytest.mark.notebooks
def test_restamping_undoes_a_faked_and_a_deleted_check(graded_folder):
    grade = graded_folder[1]["a_solved.ipynb"]
    assert grade["ok"] and grade["passed"] == grade["total"] == 2
    assert sorted(grade["restamped"]) == [
        "check cell 'check-causal-mask' (Causal mask) was edited; the original was restored",
        "check cell 'check-rmsnorm' (RMSNorm) was missing; restored from the solution"]


@pytest.mark.slow
@pytest.mark.notebooks
def test_raising_and_hanging_cells_are_reported_and_later_cells_still_run(graded_folder):
    grade = graded_folder[1]["b_wrong.ipynb"]
    mask = _exercise(grade, "Causal mask")
    assert (mask["passed"], mask["reason"]) == (False, "error")
    assert mask["expected"] == "Causal mask: 3/3 checks passed"
    assert mask["got"] == "AssertionError: Causal mask: wrong mask for T=1"
    notes = "\n".join(grade["notes"])
    assert "cell 'oops' (#8) raised ZeroDivisionError: division by zero" in notes
    assert f"cell 'hang' (#9) the cell did not finish within {TIMEOUT} s" in notes
    assert _exercise(grade, "RMSNorm")["passed"]  # ran after the hanging cell


@pytest.mark.slow
@pytest.mark.notebooks
def test_stub_fails_and_a_dead_kernel_is_reported(graded_folder):
    grade = graded_folder[1]["c_stub.ipynb"]
    mask, norm = _exercise(grade, "Causal mask"), _exercise(grade, "RMSNorm")
    assert mask["reason"] == "error" and mask["got"].startswith(
        "NotImplementedError: Exercise 'Causal mask': replace this line")
    assert "cell 'crash' (#5) the kernel died while running this cell" in "\n".join(grade["notes"])
    assert (norm["passed"], norm["reason"]) == (False, "not-run")
    assert norm["got"] == "not run: the kernel died in cell 'crash'"


@pytest.mark.slow
@pytest.mark.notebooks
def test_single_pass_exits_0_and_restamped_notebooks_agree_with_nbval(tmp_path, solution,
                                                                      learner, capsys):
    """The grader's verdicts and ``pytest --nbval-lax`` on the restamped notebooks agree."""
    solved = solve(learner, solution)
    for c in solved.cells:  # as saved by a learner who ran everything
        if notebook_format.is_check(c):
            c.outputs = stdout("whatever ran last\n")
    notebook_format.write_notebook(solved, tmp_path / "solved.ipynb")
    code = cli.main(["grade", str(tmp_path / "solved.ipynb"), "--solutions", str(SOLUTIONS),
                     "--timeout", str(TIMEOUT), "--restamped", str(tmp_path / "restamped")])
    report = capsys.readouterr().out
    assert code == 0, report
    assert "  Causal mask: PASS\n  RMSNorm: PASS\n  score: 2/2 exercises passed" in report

    notebook_format.write_notebook(restamp(learner, solution)[0], tmp_path / "restamped" / "stub.ipynb")
    junit = tmp_path / "nbval.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env",
         "--nbval-sanitize-with", str(SANITIZE), "-p", "no:cacheprovider", "-q",
         f"--junitxml={junit}", str(tmp_path / "restamped")],
        capture_output=True, text=True, timeout=900, check=False, cwd=tmp_path,
        # the outer run's PYTEST_ADDOPTS (e.g. -n 2) would spread the cells over workers
        env={k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"})
    failed = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failed.setdefault(Path(case.get("file") or case.get("classname")).stem, []).append(
            case.find("failure") is not None or case.find("error") is not None)
    solved_cells = [v for k, v in failed.items() if "solved" in k]
    stub_cells = [v for k, v in failed.items() if "stub" in k]
    assert solved_cells and not any(solved_cells[0]), failed
    # The stub fails at exactly its two check cells (code cells #2 and #6).
    assert [i for i, f in enumerate(stub_cells[0]) if f] == [2, 6], failed
