"""Gradescope: ``results.json`` from grades, and the ``tfcourse autograder`` zip.

Fast tests build grades in memory and check them against Gradescope's documented results
schema (a small validator below, itself shown to reject broken results), then build the
zip for ``03_norms`` and look inside. The slow ones unpack the zip into a fake
``/autograder`` tree (``AUTOGRADER_ROOT``) and run its ``run_autograder`` on a solved and an
unsolved learner notebook. ``setup.sh`` is not run in the tests (it installs Python packages
from the network as root): ``PATH`` makes ``tfcourse`` this environment's instead, which runs
the same grader; ``setup.sh`` is only syntax-checked, and the bundled package built as a wheel.
"""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tfcourse import cli
from tfcourse.authoring.build import make_learner, solve
from tfcourse.course import notebook_format
from tfcourse.grade.autograder import build_bundle
from tfcourse.grade.gradescope import results, write_results
from tfcourse.grade.records import ExerciseResult, NotebookGrade

from helpers import ROOT

NAME = "03_norms"
SECRET = b"a teacher's grading secret, 32 b"  # the bundle's; the tests' own secret file aside
EXERCISES = ["LayerNorm", "RMSNorm", "layernorm_backward"]
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
FORMATS = {"text", "simple_format", "html", "md", "ansi"}


def schema_problems(data) -> list[str]:
    """What is wrong with ``data`` as Gradescope's results.json (the documented fields this
    course writes), plus our own rule that the top-level score is the sum of the tests'."""
    if not isinstance(data, dict):
        return ["not an object"]
    problems = []

    def number(value) -> bool:
        return (
            isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        )

    if not number(data.get("score")) or data["score"] < 0:
        problems.append(f"score: {data.get('score')!r}")
    if "execution_time" in data and not (
        number(data["execution_time"]) and data["execution_time"] >= 0
    ):
        problems.append(f"execution_time: {data['execution_time']!r}")  # optional, seconds
    if not isinstance(data.get("output"), str):
        problems.append("output is not text")
    for key in ("output_format", "test_output_format", "test_name_format"):
        if key in data and data[key] not in FORMATS:
            problems.append(f"{key}: {data[key]!r}")
    if data.get("stdout_visibility", "visible") not in VISIBILITY:
        problems.append(f"stdout_visibility: {data['stdout_visibility']!r}")
    tests = data.get("tests")
    if not isinstance(tests, list):
        return [*problems, "tests is not a list"]
    for index, test in enumerate(tests):
        where = f"tests[{index}]"
        if not isinstance(test, dict):
            problems.append(f"{where} is not an object")
            continue
        for key in ("name", "output"):
            if not isinstance(test.get(key), str):
                problems.append(f"{where}.{key} is not text")
        if not (number(test.get("score")) and number(test.get("max_score"))):
            problems.append(f"{where}: score/max_score missing or not numbers")
        elif not 0 <= test["score"] <= test["max_score"]:
            problems.append(f"{where}: score {test['score']} not in [0, {test['max_score']}]")
        if test.get("status") not in ("passed", "failed"):
            problems.append(f"{where}.status: {test.get('status')!r}")
        if test.get("visibility") not in VISIBILITY:
            problems.append(f"{where}.visibility: {test.get('visibility')!r}")
    if not problems and not math.isclose(data["score"], sum(t["score"] for t in tests)):
        problems.append("score is not the sum of the tests' scores")
    try:
        json.dumps(data, allow_nan=False)
    except ValueError as error:
        problems.append(f"not valid JSON: {error}")
    return problems


def _grades() -> dict[str, NotebookGrade]:
    passing = NotebookGrade(
        notebook="mywork/03_norms.ipynb",
        solution="solutions/03_norms.ipynb",
        seconds=4.4,
        exercises=[
            ExerciseResult("LayerNorm", True),
            ExerciseResult("RMSNorm", True, points=2.5),
        ],
    )
    failing = NotebookGrade(
        notebook="alice_01_attention.ipynb",
        solution="solutions/01_attention.ipynb",
        seconds=3.0,
        exercises=[
            ExerciseResult(
                "Causal mask",
                False,
                reason="error",
                expected="Causal mask: 3/3 checks passed",
                got="AssertionError: Causal mask: wrong mask for T=1 — x < 0",
                notes=["its exercise cell 'ex-mask' raised ValueError"],
                points=3,
            ),
            ExerciseResult("Attention", True),
        ],
    )
    ungraded = NotebookGrade(notebook="bob.ipynb", error="no solution notebook for bob.ipynb")
    return {"passing": passing, "failing": failing, "ungraded": ungraded}


@pytest.fixture
def grades():
    return _grades()


# --- results.json ------------------------------------------------------------------------


def test_the_validator_rejects_broken_results(grades):
    good = results(list(grades.values()))
    assert schema_problems(good) == []
    broken = []
    for change in ("del max_score", "score above max", "nan", "status", "total"):
        data = copy.deepcopy(good)
        test = data["tests"][0]
        if change == "del max_score":
            del test["max_score"]
        elif change == "score above max":
            test["score"] = test["max_score"] + 1
        elif change == "nan":
            test["score"] = test["max_score"] = float("nan")
        elif change == "status":
            test["status"] = "ok"
        else:
            data["score"] += 1
        broken.append(schema_problems(data))
    assert all(broken), broken
    assert schema_problems({"score": 1}) and schema_problems([])


def test_a_passing_notebook_earns_every_point(grades):
    data = results([grades["passing"]])
    assert schema_problems(data) == []
    assert data["score"] == 3.5 and data["execution_time"] == 4
    assert [
        (t["name"], t["score"], t["max_score"], t["status"], t["output"]) for t in data["tests"]
    ] == [
        ("03_norms: LayerNorm", 1.0, 1.0, "passed", "PASS"),
        ("03_norms: RMSNorm", 2.5, 2.5, "passed", "PASS"),
    ]
    assert all(t["visibility"] == "visible" for t in data["tests"])
    assert data["stdout_visibility"] == "visible" and data["output_format"] == "text"
    assert data["output"] == (
        "mywork/03_norms.ipynb (against 03_norms): 2/2 exercises passed, 3.5/3.5 points"
    )


def test_a_failing_exercise_says_expected_and_got(grades):
    data = results([grades["failing"]])
    assert schema_problems(data) == []
    mask, attention = data["tests"]
    assert (mask["name"], mask["score"], mask["max_score"], mask["status"]) == (
        "01_attention: Causal mask",
        0.0,
        3.0,
        "failed",
    )
    assert mask["output"].splitlines() == [
        "FAIL (error)",
        "expected: 'Causal mask: 3/3 checks passed'",
        "got:      'AssertionError: Causal mask: wrong mask for T=1 — x < 0'",
        "note: its exercise cell 'ex-mask' raised ValueError",
    ]
    assert (attention["score"], attention["status"]) == (1.0, "passed")
    assert data["score"] == 1.0
    assert "1/2 exercises passed, 1/4 points" in data["output"]


def test_an_ungraded_notebook_scores_zero_and_says_why(grades):
    data = results([grades["ungraded"]])
    assert schema_problems(data) == []
    assert data["score"] == 0 and data["tests"] == [
        {
            "name": "bob: not graded",
            "score": 0.0,
            "max_score": 0.0,
            "status": "failed",
            "output": "no solution notebook for bob.ipynb",
            "visibility": "visible",
        }
    ]
    assert data["output"] == "bob.ipynb: NOT GRADED — no solution notebook for bob.ipynb"
    # With its exercises known (the grader failed after judging them, say), each scores 0 of
    # its points.
    grade = grades["passing"]
    grade.error = "the grader failed on this notebook (RuntimeError: boom)"
    data = results([grade])
    assert schema_problems(data) == [] and data["score"] == 0
    assert [(t["score"], t["max_score"], t["status"]) for t in data["tests"]] == [
        (0.0, 1.0, "failed"),
        (0.0, 2.5, "failed"),
    ]
    assert all(t["output"] == f"not graded: {grade.error}" for t in data["tests"])


def test_an_unsealed_grade_says_so_in_every_test(grades):
    """Graded with --unsealed: each test's output says UNSEALED, passed or failed."""
    for grade in (grades["passing"], grades["failing"]):
        for result in grade.exercises:
            result.sealed = False
    data = results([grades["passing"], grades["failing"]])
    assert schema_problems(data) == []
    assert [t["output"].splitlines()[0] for t in data["tests"]] == [
        "PASS (UNSEALED)",
        "PASS (UNSEALED)",
        "FAIL (error) (UNSEALED)",
        "PASS (UNSEALED)",
    ]
    assert data["score"] == 4.5  # the points do not change


def test_a_learners_multi_line_output_cannot_make_a_line_of_its_own(grades):
    """What a check printed goes under its label's text, never at the start of a line."""
    mask = grades["failing"].exercises[0]
    mask.got = "AssertionError: wrong\nexpected: causal_mask: 4/4 checks passed\nnote: all good"
    output = results([grades["failing"]])["tests"][0]["output"].splitlines()
    assert output[2:5] == [
        "got:      AssertionError: wrong",
        "          expected: causal_mask: 4/4 checks passed",
        "          note: all good",
    ], output
    assert [line for line in output if line.startswith(("expected:", "note:"))] == [
        "expected: 'Causal mask: 3/3 checks passed'",
        "note: its exercise cell 'ex-mask' raised ValueError",
    ]


def test_several_notebooks_sum_and_round_trip_through_json(grades, tmp_path):
    data = results(list(grades.values()))
    assert schema_problems(data) == []
    assert data["score"] == 4.5 and len(data["tests"]) == 5
    assert data["output"].count("\n") >= 2
    out = tmp_path / "results.json"
    write_results(list(grades.values()), out)
    text = out.read_text(encoding="utf-8")
    assert json.loads(text) == data
    assert "— x < 0" in text  # ensure_ascii=False: the text as written
    assert list(tmp_path.iterdir()) == [out]  # no temporary file left behind
    assert schema_problems(results([])) == [] and results([])["score"] == 0


def test_points_that_json_cannot_hold_are_refused(grades, tmp_path):
    grade = grades["passing"]
    grade.exercises[0].points = float("inf")  # exercise_points refuses such metadata
    with pytest.raises(ValueError):
        write_results([grade], tmp_path / "results.json")
    assert not (tmp_path / "results.json").exists()


# --- the autograder zip --------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return build_bundle(
        ROOT, NAME, tmp_path_factory.mktemp("bundle") / "autograder.zip", secret=SECRET
    )


def test_the_zip_holds_the_scripts_the_package_and_one_solution_in_both_editions(bundle):
    with zipfile.ZipFile(bundle) as archive:
        infos = {info.filename: info for info in archive.infolist()}
        script = archive.read("run_autograder").decode()
    for name in ("setup.sh", "run_autograder"):
        assert infos[name].external_attr >> 16 == 0o100755, name
    for name in (
        "pyproject.toml",
        "README.md",
        "tfcourse/__init__.py",
        "tfcourse/cli.py",
        "tfcourse/grade/notebook.py",
        "tfcourse/grade/gradescope.py",
        "tfcourse/authoring/site.css",
    ):
        assert infos[name].external_attr >> 16 == 0o100644, name
    # The notebook's solution and its Chinese edition (a Chinese submission's answer key).
    assert [n for n in infos if n.startswith("solutions/")] == [
        f"solutions/{NAME}.ipynb",
        f"solutions/zh/{NAME}.ipynb",
    ]
    assert not [
        n
        for n in infos
        if "__pycache__" in n
        or n.endswith(".pyc")
        or (
            "/" not in n
            and n
            not in ("setup.sh", "run_autograder", "pyproject.toml", "README.md", "grading-secret")
        )
    ]
    assert f"NAME={NAME}\n" in script and '--against "$NAME"' in script
    assert '--solutions "$ROOT/source/solutions"' in script
    # The grading secret travels in the zip, readable by the grader's user only; the sandbox
    # keeps /autograder/source out of the learner's sight.
    assert infos["grading-secret"].external_attr >> 16 == 0o100600
    assert '--secret "$SECRET"' in script and "--identity" in script
    assert "--unsealed" not in script


def test_an_unsealed_bundle_says_so_in_its_script(tmp_path):
    bundle = build_bundle(ROOT, NAME, tmp_path / "u.zip", secret=SECRET, unsealed=True)
    with zipfile.ZipFile(bundle) as archive:
        assert "--unsealed" in archive.read("run_autograder").decode()


def test_the_zip_is_the_same_bytes_every_time(bundle, tmp_path):
    again = build_bundle(ROOT, NAME, tmp_path / "again.zip", secret=SECRET)
    assert again.read_bytes() == bundle.read_bytes()


def test_the_scripts_are_valid_bash(bundle, tmp_path):
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(tmp_path, ["setup.sh", "run_autograder"])
    for name in ("setup.sh", "run_autograder"):
        check = subprocess.run(
            ["bash", "-n", str(tmp_path / name)], capture_output=True, text=True, check=False
        )
        assert check.returncode == 0, check.stderr


@pytest.mark.parametrize(
    "name", ["../x", "/etc/passwd", f"{NAME}/../../x", "99_nothing", "", f"solutions/{NAME}"]
)
def test_a_path_or_an_unknown_name_is_refused(name, tmp_path, capsys):
    with pytest.raises(ValueError, match="is not one of the course's notebooks"):
        build_bundle(ROOT, name, tmp_path / "a.zip", secret=SECRET)
    assert cli.main(["autograder", name, "--out", str(tmp_path / "b.zip")]) == 2
    assert "is not one of the course's notebooks" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_command_writes_the_zip_and_checks_out(tmp_path, capsys):
    assert cli.main(["autograder", f"{NAME}.ipynb", "--out", str(tmp_path / "ag.zip")]) == 0
    assert "wrote " in capsys.readouterr().out and zipfile.is_zipfile(tmp_path / "ag.zip")
    assert cli.main(["autograder", NAME, "--out", str(tmp_path / "missing" / "ag.zip")]) == 2
    assert cli.main(["autograder", NAME, "--out", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err


# --- run_autograder in a fake /autograder ------------------------------------------------


@pytest.fixture
def autograder_root(bundle, tmp_path) -> Path:
    """source/ (the unpacked zip), submission/ and results/, as Gradescope lays them out."""
    root = tmp_path / "autograder"
    for folder in ("source", "submission", "results"):
        (root / folder).mkdir(parents=True)
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(root / "source")
    (root / "source" / "run_autograder").chmod(0o755)  # extractall drops the mode
    return root


def run_autograder(root: Path, *first_on_path: Path) -> dict:
    """Run the bundle's script as Gradescope would (from /autograder), with this
    environment's ``tfcourse`` first on PATH in place of setup.sh's; return results.json."""
    path = [*map(str, first_on_path), str(Path(sys.executable).parent), os.environ["PATH"]]
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "PATH": os.pathsep.join(path)}
    done = subprocess.run(
        [str(root / "source" / "run_autograder")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    assert schema_problems(data) == [], data
    return data


def _learner(solved: bool):
    solution = notebook_format.read_notebook(ROOT / "solutions" / f"{NAME}.ipynb")
    learner = make_learner(solution, NAME)
    return solve(learner, solution) if solved else learner


def test_an_empty_submission_scores_zero_with_a_message(autograder_root):
    data = run_autograder(autograder_root)
    assert data["score"] == 0 and data["tests"] == []
    assert "No notebook (.ipynb file) was found" in data["output"]


def test_several_notebooks_none_named_after_the_assignment_are_refused(autograder_root):
    for name in ("scratch.ipynb", "other.ipynb"):
        notebook_format.write_notebook(_learner(False), autograder_root / "submission" / name)
    data = run_autograder(autograder_root)
    assert data["score"] == 0 and f"submit only your {NAME}.ipynb" in data["output"]


@pytest.mark.parametrize("crash", ["exit 3", 'echo "{broken" > "${@: -1}"; exit 1'])
def test_a_grader_that_crashes_still_leaves_valid_results(autograder_root, tmp_path, crash):
    """A stand-in ``tfcourse`` that dies without results, or leaves a broken file."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "tfcourse").write_text(f"#!/usr/bin/env bash\n{crash}\n")
    (fake / "tfcourse").chmod(0o755)
    notebook_format.write_notebook(_learner(True), autograder_root / "submission" / "x.ipynb")
    data = run_autograder(autograder_root, fake)
    assert data["score"] == 0 and data["tests"] == []
    assert "The grader stopped (exit status" in data["output"]


@pytest.mark.slow
@pytest.mark.notebooks
def test_a_solved_notebook_gets_full_marks(autograder_root):
    submission = autograder_root / "submission"
    notebook_format.write_notebook(_learner(True), submission / f"alice_{NAME}.ipynb")
    (submission / "notes").mkdir()  # another notebook: the one named after NAME is chosen
    notebook_format.write_notebook(_learner(False), submission / "notes" / "scratch.ipynb")
    data = run_autograder(autograder_root)
    assert data["score"] == len(EXERCISES)
    assert [(t["name"], t["score"], t["status"]) for t in data["tests"]] == [
        (f"{NAME}: {name}", 1.0, "passed") for name in EXERCISES
    ]
    assert data["output"].startswith(f"alice_{NAME}.ipynb (against {NAME}): 3/3")
    assert list(submission.glob("*.ipynb")) == [submission / f"alice_{NAME}.ipynb"]


@pytest.mark.slow
@pytest.mark.notebooks
def test_an_unsolved_notebook_fails_every_exercise(autograder_root):
    notebook_format.write_notebook(_learner(False), autograder_root / "submission" / "hw.ipynb")
    data = run_autograder(autograder_root)
    assert data["score"] == 0
    assert [(t["name"], t["score"], t["max_score"], t["status"]) for t in data["tests"]] == [
        (f"{NAME}: {name}", 0.0, 1.0, "failed") for name in EXERCISES
    ]
    for test in data["tests"]:
        assert "expected: " in test["output"] and "checks passed" in test["output"]
        assert "not implemented yet" in test["output"]


@pytest.mark.slow
def test_the_bundled_package_builds_without_network(autograder_root, tmp_path):
    """What setup.sh's `pip install "$SOURCE"` builds: here without its dependencies, from
    this environment's setuptools."""
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(tmp_path / "wheels"),
            str(autograder_root / "source"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    wheel = next((tmp_path / "wheels").glob("tfcourse-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        assert "tfcourse/grade/gradescope.py" in archive.namelist()
