"""``tfcourse grade`` on a class's hand-ins, attacked where the grader itself decides.

Each test performs the attack through ``tfcourse.cli.main(["grade", ...])`` (or
``grade_notebook``): an answer key planted beside the submission, a submission that is a
link to the answer key or lies inside it, broken notebooks in a class run, bad numbers,
output files that cannot be written, same-named notebooks in two folders, grading
without the sandbox, and two learners whose cases differ. The fast tests grade nothing
(a refusal must come first; ``grade_notebook`` is replaced by a failure where nothing may
be graded); the slow ones grade the small fixture course
(tests/fixtures/solutions/99_fixture.ipynb) in as few runs as the attacks allow.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import errno
import io
import json
import os
import re
from pathlib import Path

import pytest
from nbformat.v4 import new_markdown_cell

from tfcourse import checks, cli
from tfcourse.authoring.build import make_learner, solve
from tfcourse.checks.cases import current_salt
from tfcourse.course import notebook_format
from tfcourse.grade import notebook as grade_module
from tfcourse.grade import report
from tfcourse.grade.command import learner_salt
from tfcourse.grade.notebook import grade_notebook, installed_solutions
from tfcourse.grade.records import ExerciseResult, NotebookGrade
from tfcourse.grade.sealed import sandbox

from helpers import FIXTURE, SOLUTIONS

EXERCISES = ["Causal mask", "RMSNorm"]
TIMEOUT = "60"  # seconds per cell: far above what a fixture cell needs
EXERCISE_LINE = re.compile(r"^  (Causal mask|RMSNorm): (PASS|FAIL)")


def stub(solution):
    """The learner notebook as shipped: every exercise unimplemented."""
    return make_learner(solution, FIXTURE.stem)


def solved(solution):
    return solve(stub(solution), solution)


def doctored_key(solution):
    """An answer key under which any notebook passes: the fixture's solution with its
    check cells emptied (no check to call, nothing expected)."""
    key = copy.deepcopy(solution)
    for cell in key.cells:
        if notebook_format.is_check(cell):
            cell.source, cell.outputs = "", []
    return key


@pytest.fixture
def nothing_graded(monkeypatch):
    """Grading any notebook fails the test: a refusal must come before it."""
    monkeypatch.setattr(
        grade_module, "grade_notebook", lambda *a, **k: pytest.fail("a notebook was graded")
    )


def lines(text: str) -> list[str]:
    return text.strip().splitlines()


# --- a: an answer key beside the submission -----------------------------------------------


def plant(folder: Path, solution, name: str = FIXTURE.stem) -> Path:
    """An unimplemented submission ``name.ipynb`` with a key beside it
    (``solutions/name.ipynb``) under which it scores full marks; returns the submission."""
    notebook_format.write_notebook(make_learner(solution, name), folder / f"{name}.ipynb")
    notebook_format.write_notebook(doctored_key(solution), folder / "solutions" / f"{name}.ipynb")
    return folder / f"{name}.ipynb"


@pytest.mark.slow
@pytest.mark.notebooks
@pytest.mark.sandbox
def test_a_key_planted_beside_a_course_notebook_is_not_used(
    tmp_path, monkeypatch, capsys, grading_setup
):
    """Named as the answer key, the planted one gives the unimplemented notebook full marks
    (the attack); beside it, without --solutions, the course's own key grades it: nothing."""
    course = installed_solutions()
    if course is None:
        pytest.skip("this tfcourse has no solutions of its own")
    submission = plant(
        tmp_path, notebook_format.read_notebook(course / "03_norms.ipynb"), "03_norms"
    )
    fooled = grade_notebook(submission, grading_setup, solutions_dir=tmp_path / "solutions")
    assert fooled.passed == fooled.total == 3, fooled

    monkeypatch.chdir(tmp_path)
    status = cli.main(["grade", "03_norms.ipynb", "--json", "--timeout", TIMEOUT])
    graded = json.loads(capsys.readouterr().out)[0]
    assert status == 1
    assert Path(graded["solution"]).resolve() == (course / "03_norms.ipynb").resolve()
    assert (graded["passed"], graded["total"], graded["error"]) == (0, 3, ""), graded


def test_a_solutions_folder_beside_the_submission_is_not_the_answer_key(
    tmp_path, monkeypatch, capsys, solution
):
    """The fixture's notebook with a planted key beside it, without --solutions: the grader
    takes the course's own solutions, which have no 99_fixture (not graded, no points)."""
    plant(tmp_path, solution)
    monkeypatch.chdir(tmp_path)
    status = cli.main(["grade", "99_fixture.ipynb", "--timeout", TIMEOUT])
    out = capsys.readouterr().out
    assert status == 1, out
    assert out.startswith(
        "99_fixture.ipynb: NOT GRADED — no solution notebook for "
        f"99_fixture.ipynb in {installed_solutions()}"
    ), out
    assert "PASS" not in out and "score" not in out


# --- b: the answer key itself as the submission ---------------------------------------------


def test_a_submission_that_links_to_the_answer_key_is_refused(tmp_path, capsys):
    """Graded, the solution notebook would score full marks; as a link it gets nothing, and
    the report names the submission (not the file it points at)."""
    hand_in = tmp_path / "hand-in"
    hand_in.mkdir()
    (hand_in / "99_fixture.ipynb").symlink_to(FIXTURE)
    (hand_in / "alice_99_fixture.ipynb").symlink_to(os.path.relpath(FIXTURE, hand_in))
    refusal = "the submission is a symbolic link; submit the notebook file itself"
    status = cli.main(["grade", str(hand_in), "--solutions", str(SOLUTIONS), "--json"])
    grades = json.loads(capsys.readouterr().out)
    assert status == 1 and len(grades) == 2
    assert [(g["error"], g["passed"], g["exercises"]) for g in grades] == [(refusal, 0, [])] * 2
    # Named on its own, in the text report: one line, not graded.
    assert (
        cli.main(["grade", str(hand_in / "99_fixture.ipynb"), "--solutions", str(SOLUTIONS)]) == 1
    )
    out = lines(capsys.readouterr().out)
    assert len(out) == 1 and out[0].endswith(f": NOT GRADED — {refusal}"), out
    assert [Path(g["notebook"]).name for g in grades] == [
        "99_fixture.ipynb",
        "alice_99_fixture.ipynb",
    ], grades
    assert out[0].startswith(f"{hand_in / '99_fixture.ipynb'}: "), out


def test_a_submission_that_links_to_a_pipe_is_refused_without_reading_it(tmp_path):
    """A link to a named pipe would block whoever reads it: the link is refused unread."""
    import threading

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    (tmp_path / "99_fixture.ipynb").symlink_to(pipe)
    graded = []
    worker = threading.Thread(
        target=lambda: graded.append(
            grade_notebook(tmp_path / "99_fixture.ipynb", None, solutions_dir=SOLUTIONS)
        ),
        daemon=True,
    )
    worker.start()
    worker.join(timeout=20)
    assert graded, "reading the submission blocked on the pipe"
    assert graded[0].error == "the submission is a symbolic link; submit the notebook file itself"


def test_a_submission_over_the_size_bound_is_not_parsed(tmp_path, monkeypatch):
    """Its size is read, its JSON never: a 30 MB file costs the grader nothing but a stat."""
    monkeypatch.setattr(grade_module, "MAX_NOTEBOOK_BYTES", 1000)
    parsed = []
    monkeypatch.setattr(notebook_format, "read_notebook", lambda *a, **k: parsed.append(a) or {})
    big = tmp_path / "99_fixture.ipynb"
    big.write_text(json.dumps({"cells": [], "padding": "x" * 2000}), encoding="utf-8")
    graded = grade_notebook(big, None, solutions_dir=SOLUTIONS)
    assert not parsed
    assert graded.error.startswith("the submission has 2,") and "clear its outputs" in graded.error


@pytest.mark.parametrize(
    "where", ["the file", "the folder", "a link to the folder", "the course's own"]
)
def test_a_submission_inside_the_solutions_folder_is_refused(tmp_path, capsys, where):
    if where == "the course's own":
        course = installed_solutions()
        if course is None:
            pytest.skip("this tfcourse has no solutions of its own")
        paths = [str(course / "03_norms.ipynb")]  # no --solutions
    else:
        paths = {"the file": [str(FIXTURE)], "the folder": [str(SOLUTIONS)]}.get(where)
        if paths is None:
            (tmp_path / "mine").symlink_to(SOLUTIONS, target_is_directory=True)
            paths = [str(tmp_path / "mine")]
        paths += ["--solutions", str(SOLUTIONS)]
    status = cli.main(["grade", *paths, "--json"])
    grades = json.loads(capsys.readouterr().out)
    assert status == 1 and grades
    for graded in grades:
        assert graded["error"] == "the submission lies inside the solutions folder", graded
        assert (graded["passed"], graded["exercises"]) == (0, [])


# --- c, a, h: a class run ---------------------------------------------------------------


@pytest.fixture(scope="module")
def class_run(tmp_path_factory, solution):
    """One class graded at once, from its own folder (``--jobs 2``):

    - alice_ and bob_99_fixture: the same correct code (two identities: their cases differ);
    - carol_99_fixture: unimplemented, with a key beside it (``solutions/99_fixture.ipynb``)
      under which it would score full marks; the teacher names the fixture's with --solutions;
    - dave_99_fixture: correct, with ``metadata.tfcourse = "x"``;
    - erin_99_fixture: not JSON.

    Returns the exit status, stderr, the JSON report by file name, the CSV rows, Gradescope's
    results and the salts each RMSNorm check ran with."""
    folder = tmp_path_factory.mktemp("class")
    out = tmp_path_factory.mktemp("out")
    for name in ("alice", "bob"):
        notebook_format.write_notebook(solved(solution), folder / f"{name}_99_fixture.ipynb")
    notebook_format.write_notebook(stub(solution), folder / "carol_99_fixture.ipynb")
    notebook_format.write_notebook(doctored_key(solution), folder / "solutions" / FIXTURE.name)
    odd = solved(solution)
    odd.metadata["tfcourse"] = "x"
    notebook_format.write_notebook(odd, folder / "dave_99_fixture.ipynb")
    (folder / "erin_99_fixture.ipynb").write_text("{not json", encoding="utf-8")

    salts, check = [], checks.check_rmsnorm

    def recording(*args):
        salts.append(current_salt())
        return check(*args)

    stdout, stderr = io.StringIO(), io.StringIO()
    with (
        pytest.MonkeyPatch.context() as patch,
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
    ):
        patch.chdir(folder)
        patch.setattr(checks, "check_rmsnorm", recording)
        status = cli.main(
            [
                "grade",
                ".",
                "--solutions",
                str(SOLUTIONS),
                "--json",
                "--jobs",
                "2",
                "--timeout",
                TIMEOUT,
                "--csv",
                str(out / "grades.csv"),
                "--gradescope",
                str(out / "results.json"),
            ]
        )
    grades = {Path(g["notebook"]).name: g for g in json.loads(stdout.getvalue())}
    rows = list(csv.DictReader((out / "grades.csv").read_text(encoding="utf-8").splitlines()))
    gradescope = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return status, stderr.getvalue(), grades, rows, gradescope, set(salts)


NAMES = [f"{name}_99_fixture.ipynb" for name in ("alice", "bob", "carol", "dave", "erin")]


@pytest.mark.slow
@pytest.mark.notebooks
def test_a_class_run_grades_every_notebook_it_can_and_reports_every_one(class_run):
    status, err, grades, rows, gradescope, _ = class_run
    as_root = "tfcourse grade: running as root; each learner's code runs as a fresh " + (
        "unprivileged user, never as root\n"
    )
    assert status == 1 and err == (as_root if os.geteuid() == 0 else "")
    assert list(grades) == NAMES
    scores = {name: (g["passed"], g["total"], bool(g["error"])) for name, g in grades.items()}
    assert scores == {
        NAMES[0]: (2, 2, False),
        NAMES[1]: (2, 2, False),
        NAMES[2]: (0, 2, False),
        NAMES[3]: (2, 2, False),
        NAMES[4]: (0, 0, True),
    }, scores
    assert all(e["sealed"] for g in grades.values() for e in g["exercises"])
    assert [Path(row["notebook"]).name for row in rows] == NAMES
    assert [(row["Causal mask"], row["RMSNorm"], row["sealed"]) for row in rows] == [
        ("1", "1", "yes"),
        ("1", "1", "yes"),
        ("0", "0", "yes"),
        ("1", "1", "yes"),
        ("", "", "yes"),
    ]
    assert rows[4]["error"] == grades[NAMES[4]]["error"] != ""
    tests = [t["name"] for t in gradescope["tests"]]
    assert tests.count("erin_99_fixture: not graded") == 1
    assert len(tests) == 4 * len(EXERCISES) + 1 and gradescope["score"] == 6


@pytest.mark.slow
@pytest.mark.notebooks
def test_a_key_planted_in_the_class_folder_is_not_used(class_run):
    grades = class_run[2]
    carol = grades["carol_99_fixture.ipynb"]
    assert Path(carol["solution"]).resolve() == FIXTURE.resolve()
    assert [(e["passed"], e["reason"]) for e in carol["exercises"]] == [(False, "error")] * 2
    assert all("(the exercise is not implemented yet)" in e["got"] for e in carol["exercises"])
    assert all(
        Path(g["solution"]).resolve() == FIXTURE.resolve()
        for g in grades.values()
        if not g["error"]
    )


@pytest.mark.slow
@pytest.mark.notebooks
def test_two_learners_with_the_same_correct_code_both_earn_full_marks(class_run):
    """Their cases are drawn from the secret and their identities (the file names): the
    RMSNorm checks ran with each learner's own salt, and correct code passes every one."""
    grades, salts = class_run[2], class_run[5]
    alice, bob = grades["alice_99_fixture.ipynb"], grades["bob_99_fixture.ipynb"]
    assert alice["ok"] and bob["ok"] and alice["passed"] == bob["passed"] == 2
    salt = learner_salt(None)  # the secret the run used (conftest's)
    mine = {name: salt(name, "RMSNorm") for name in NAMES[:4]}
    assert mine["alice_99_fixture.ipynb"] != mine["bob_99_fixture.ipynb"]
    assert salts == set(mine.values()), (salts, mine)


# --- d: numbers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--timeout", "0", "--timeout must be a number from 1 to 86400, got 0.0"),
        ("--timeout", "-1", "--timeout must be a number from 1 to 86400, got -1.0"),
        ("--timeout", "nan", "--timeout must be a number from 1 to 86400, got nan"),
        ("--timeout", "inf", "--timeout must be a number from 1 to 86400, got inf"),
        ("--timeout", "1e9", "--timeout must be a number from 1 to 86400, got 1000000000.0"),
        ("--threads", "-1", "--threads must be an integer from 0 to 256, got -1"),
        ("--threads", "100000", "--threads must be an integer from 0 to 256, got 100000"),
        ("--jobs", "0", "--jobs must be an integer from 1 to 256, got 0"),
        ("--jobs", "-3", "--jobs must be an integer from 1 to 256, got -3"),
    ],
)
def test_a_bad_number_is_one_line_and_nothing_is_graded(
    tmp_path, capsys, nothing_graded, solution, flag, value, message
):
    notebook_format.write_notebook(stub(solution), tmp_path / "99_fixture.ipynb")
    status = cli.main(
        [
            "grade",
            str(tmp_path / "99_fixture.ipynb"),
            "--solutions",
            str(SOLUTIONS),
            "--csv",
            str(tmp_path / "grades.csv"),
            flag,
            value,
        ]
    )
    captured = capsys.readouterr()
    assert status == 2
    assert lines(captured.err) == [f"error: {message}"], captured.err
    assert captured.out == "" and "Traceback" not in captured.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["99_fixture.ipynb"]  # no CSV


# --- e, g: --unsealed --------------------------------------------------------


@pytest.mark.slow
@pytest.mark.notebooks
def test_unsealed_same_named_notebooks_in_two_folders(tmp_path, monkeypatch, capsys, solution):
    """Where bubblewrap cannot work, --unsealed grades, and says so in every exercise line,
    in the CSV and in the JSON; same-named notebooks in a/ and b/ each get their row."""
    monkeypatch.setattr(sandbox, "_found", sandbox.Sandbox(None, "tested"))
    for folder in ("a", "b"):
        notebook = solved(solution)
        notebook.cells.append(new_markdown_cell(f"handed in from {folder}", id="whose"))
        notebook_format.write_notebook(notebook, tmp_path / folder / "99_fixture.ipynb")
    monkeypatch.chdir(tmp_path)
    base = ["grade", "--solutions", str(SOLUTIONS), "--timeout", TIMEOUT, "--unsealed"]
    status = cli.main(
        [
            *base,
            "a",
            "b/99_fixture.ipynb",
            "--csv",
            "grades.csv",
            "--jobs",
            "2",
        ]
    )
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err
    exercise_lines = [line for line in lines(captured.out) if EXERCISE_LINE.match(line)]
    assert len(exercise_lines) == 2 * len(EXERCISES), captured.out
    assert all(line.endswith(": PASS (UNSEALED)") for line in exercise_lines), exercise_lines
    assert captured.out.count("  sealed: UNSEALED (--unsealed): ") == 2
    rows = list(csv.DictReader((tmp_path / "grades.csv").read_text(encoding="utf-8").splitlines()))
    assert [(row["notebook"], row["sealed"]) for row in rows] == [
        (os.path.join("a", "99_fixture.ipynb"), "no"),
        (os.path.join("b", "99_fixture.ipynb"), "no"),
    ]
    assert cli.main([*base, "a", "--json"]) == 0
    graded = json.loads(capsys.readouterr().out)[0]
    assert [(e["name"], e["passed"], e["sealed"]) for e in graded["exercises"]] == [
        (name, True, False) for name in EXERCISES
    ]
    assert graded["isolation"][0].startswith("UNSEALED (--unsealed): ")


def test_without_bubblewrap_sandbox_bubblewrap_refuses_to_grade(
    tmp_path, monkeypatch, capsys, solution, nothing_graded
):
    monkeypatch.setattr(sandbox, "_found", sandbox.Sandbox(None, "tested"))
    notebook_format.write_notebook(solved(solution), tmp_path / "99_fixture.ipynb")
    status = cli.main(
        [
            "grade",
            str(tmp_path / "99_fixture.ipynb"),
            "--solutions",
            str(SOLUTIONS),
            "--sandbox",
            "bubblewrap",
        ]
    )
    captured = capsys.readouterr()
    assert status == 2 and captured.out == ""
    (line,) = lines(captured.err)
    assert line.startswith(
        "error: cannot seal the learners' code here: tested. Install bubblewrap"
    ), line
    assert "--unsealed" in line and "Traceback" not in captured.err


# --- f: output files ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--csv", "{tmp}/missing/grades.csv", "does not exist"),
        ("--csv", "/dev/full", "is not a regular file"),
        ("--gradescope", "/dev/full", "is not a regular file"),
        ("--gradescope", "{tmp}/missing/results.json", "does not exist"),
    ],
)
def test_an_output_that_cannot_be_written_stops_the_run_before_grading(
    tmp_path, capsys, nothing_graded, solution, flag, value, message
):
    notebook_format.write_notebook(stub(solution), tmp_path / "99_fixture.ipynb")
    value = value.format(tmp=tmp_path)
    status = cli.main(
        ["grade", str(tmp_path / "99_fixture.ipynb"), "--solutions", str(SOLUTIONS), flag, value]
    )
    captured = capsys.readouterr()
    assert status == 2 and captured.out == ""
    (line,) = lines(captured.err)
    assert line.startswith(f"error: {flag} {value}: ") and message in line, line
    assert not (tmp_path / "missing").exists()


def test_a_write_that_fails_after_grading_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    """The disk fills up while grading: the report is still printed, the CSV is not left
    half written, and the failure is one line."""
    graded = NotebookGrade(
        "99_fixture.ipynb",
        "99_fixture.ipynb",
        seconds=1.0,
        exercises=[ExerciseResult(name, True) for name in EXERCISES],
    )
    monkeypatch.setattr(grade_module, "grade_notebook", lambda *a, **k: graded)

    def full(path, text, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(report, "write_atomically", full)
    (tmp_path / "99_fixture.ipynb").write_text("{}")
    status = cli.main(
        ["grade", str(tmp_path / "99_fixture.ipynb"), "--csv", str(tmp_path / "grades.csv")]
    )
    captured = capsys.readouterr()
    assert status == 2
    assert "  score: 2/2 exercises passed" in captured.out
    why = os.strerror(errno.ENOSPC)
    as_root = ["running as root" in line for line in lines(captured.err)]
    assert as_root[:1] == [os.geteuid() == 0], captured.err  # a root grader says so first
    assert lines(captured.err)[sum(as_root) :] == [
        f"error: could not write the CSV {tmp_path / 'grades.csv'}: {why}"
    ], captured.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["99_fixture.ipynb"]


def test_a_report_that_breaks_is_that_notebooks_line_alone(tmp_path, monkeypatch, capsys):
    """Formatting one notebook's report raises: that notebook gets a line saying so, the
    next is reported, and the CSV has both rows."""
    from tfcourse.grade import command

    def graded(path, *args, **kwargs):
        return NotebookGrade(
            path.name,
            "99_fixture.ipynb",
            exercises=[ExerciseResult(name, True) for name in EXERCISES],
        )

    real = command.format_report

    def fragile(grade):
        if grade.notebook == "a_99_fixture.ipynb":
            raise UnicodeError("a character the terminal cannot take")
        return real(grade)

    monkeypatch.setattr(grade_module, "grade_notebook", graded)
    monkeypatch.setattr(command, "format_report", fragile)
    for name in ("a_99_fixture.ipynb", "b_99_fixture.ipynb"):
        (tmp_path / name).write_text("{}")
    status = cli.main(["grade", str(tmp_path), "--csv", str(tmp_path / "grades.csv")])
    out = capsys.readouterr().out
    assert status == 1
    assert "the report of this notebook failed (UnicodeError: a character" in out
    assert "b_99_fixture.ipynb" in out and "  score: 2/2 exercises passed" in out
    rows = list(csv.DictReader((tmp_path / "grades.csv").read_text().splitlines()))
    assert [Path(row["notebook"]).name for row in rows] == [
        "a_99_fixture.ipynb",
        "b_99_fixture.ipynb",
    ]
