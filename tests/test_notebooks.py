"""The course notebooks, end to end: for every solutions/NN_topic.ipynb (and the fixture).

- fast: notebooks/ is in sync with solutions/ (``tfcourse build-notebooks --check``), and
  each learner exercise turns back into its solution when the stub is filled in;
- nbval: the solution passes ``pytest --nbval-lax`` with tests/nbval_sanitize.cfg (the
  training runs kept for the other edition: ``train_memo``);
- invert: the shipped learner notebook fails at every exercise's check (like
  ``nbgrader validate --invert``);
- solved: the learner notebook with every solution filled back in, check outputs
  overwritten as a learner's run would, passes ``tfcourse grade`` (sealed workers, 1
  thread): every check prints what the solution stored (from its own run);
- determinism: one notebook run with 2 threads prints the same in every compared cell as
  its stored outputs, as nbval's run with 1 thread does (marked ``alone``: ``make test``
  runs it by itself, after the parallel set, so its threads do not compete with a worker).

Each notebook executes three times (nbval, invert, solved), plus one for determinism.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tfcourse.authoring.build import build, fill_in, make_learner, solve
from tfcourse.authoring.run import kernel_env, run_notebook
from tfcourse.course import notebook_format
from tfcourse.grade.notebook import grade
from tfcourse.grade.sealed.session import Setup, grading_env
from tfcourse.train.memo import MEMO_ENV

from helpers import FIXTURE, ROOT, TESTS, comparable

SANITIZE = TESTS / "nbval_sanitize.cfg"
COURSE = sorted((ROOT / "solutions").glob("*.ipynb"))
CHINESE = sorted((ROOT / "solutions" / "zh").glob("*.ipynb"))  # generated: the 中文版
CASES = [pytest.param(path, id=path.stem) for path in COURSE] + [
    pytest.param(FIXTURE, id="fixture")
]
# nbval and grading run for the Chinese edition too: same code, same compared outputs.
BOTH = CASES + [pytest.param(path, id=f"zh-{path.stem}") for path in CHINESE]
# The notebooks whose nbval run took 20 s or more (the experiments that train): scheduled first,
# the English edition before the Chinese one, which then finds their training runs kept.
# The nbval runs that train are the longest tests: they start first. The Chinese runs of
# 08, 10 and 11 load the English runs' trainings from the memo (``train_memo``) and take a
# fraction of the time, so they start last, long after the English ones have ended (run
# alongside them, they found nothing and trained everything again).
# Seconds each took in one `make test` (the order they start in: conftest.py).
LONG_RUNS = {
    "08_training": 100,
    "11_claims_tested": 70,
    "10_modern_block": 30,
    "12_capstone": 25,
    "zh-12_capstone": 25,
}
MEMO_READERS = {"zh-08_training", "zh-10_modern_block", "zh-11_claims_tested"}


def nbval_case(path: Path, name: str):
    marks = []
    if name in LONG_RUNS:
        marks.append(pytest.mark.long(LONG_RUNS[name]))
    if name in MEMO_READERS:
        marks.append(pytest.mark.last)
    return pytest.param(path, id=name, marks=marks)


NBVAL_CASES = [nbval_case(param.values[0], param.id) for param in BOTH]
# Run once more with 2 threads; the first course notebook with exercises that exists.
DETERMINISM = next((p for p in COURSE if p.stem == "01_attention"), FIXTURE)
CELL_TIMEOUT = 600
# Grading runs with the grader's own default per call (`tfcourse grade --timeout`): every check
# call here takes seconds, and a session that waits on a worker that is gone costs its
# timeout (seen under the full suite for notebook 07: 600 s at CELL_TIMEOUT).
GRADE_TIMEOUT = 120
slow_notebook = [pytest.mark.slow, pytest.mark.notebooks]


def learner_of(solution_path: Path):
    """(learner notebook, folder it runs in): the shipped one for course notebooks."""
    if solution_path == FIXTURE:
        return make_learner(notebook_format.read_notebook(FIXTURE), FIXTURE.stem), FIXTURE.parent
    shipped = ROOT / "notebooks" / solution_path.relative_to(ROOT / "solutions")
    if not shipped.exists():
        pytest.fail(f"{shipped.relative_to(ROOT)} is missing; run `tfcourse build-notebooks`")
    return notebook_format.read_notebook(shipped, require_ids=False), shipped.parent


def compared_cells(nb) -> dict[str, dict]:
    """Outputs of the cells nbval compares (tag nbval-check-output, executed)."""
    return {
        cell.id: comparable(cell.outputs)
        for cell in nb.cells
        if cell.cell_type == "code"
        and notebook_format.CHECK_OUTPUT_TAG in notebook_format.tags(cell)
        and cell.execution_count is not None
    }


def test_notebooks_are_in_sync_with_solutions():
    if not COURSE:
        pytest.skip("no solution notebooks yet")
    report = build(ROOT / "solutions", ROOT / "notebooks", check=True)
    assert report.ok, (
        "notebooks/ is out of sync with solutions/; run `tfcourse "
        f"build-notebooks`.\nproblems: {report.problems}\nout of sync: "
        f"{report.out_of_sync}\norphans: {report.orphans}"
    )


@pytest.mark.parametrize("solution_path", CASES)
def test_filling_in_the_stubs_gives_back_the_solution(solution_path):
    solution = notebook_format.read_notebook(solution_path)
    learner, _ = learner_of(solution_path)
    reference = {cell.id: cell for cell in solution.cells}
    exercises = [cell for cell in learner.cells if notebook_format.is_exercise(cell)]
    assert exercises or not any(notebook_format.is_exercise(c) for c in solution.cells)
    for cell in exercises:
        assert (
            fill_in(cell.source, reference[cell.id].source, keep_markers=True)
            == reference[cell.id].source
        ), cell.id


def nested_pytest_env() -> dict[str, str]:
    """Kernel environment for a pytest run inside the test run: one thread, and none of the
    outer run's PYTEST_ADDOPTS (``-n 2`` there would spread one notebook's cells over workers)."""
    env = kernel_env(threads=1)
    env.pop("PYTEST_ADDOPTS", None)
    return env


@pytest.fixture(scope="session")
def train_memo(tmp_path_factory) -> Path:
    """One folder for the test run, shared by the xdist workers, where the nbval runs keep
    their training runs (tfcourse/train/memo.py): the Chinese edition runs the English one's
    code on the same seeds, so it loads those runs instead of training them again."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if "PYTEST_XDIST_WORKER" in os.environ else base) / "train-memo"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.mark.parametrize("solution_path", NBVAL_CASES)
@pytest.mark.slow
@pytest.mark.notebooks
def test_solution_passes_nbval(solution_path, train_memo):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval-lax",
            "--nbval-current-env",
            "--nbval-sanitize-with",
            str(SANITIZE),
            "--nbval-cell-timeout",
            str(CELL_TIMEOUT),
            "-p",
            "no:cacheprovider",
            "-q",
            "-o",
            "addopts=",
            str(solution_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**nested_pytest_env(), MEMO_ENV: str(train_memo)},
        timeout=3600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


@pytest.mark.parametrize("solution_path", CASES)
@pytest.mark.slow
@pytest.mark.notebooks
@pytest.mark.sandbox
def test_learner_notebook_fails_at_every_exercise(solution_path):
    solution = notebook_format.read_notebook(solution_path)
    learner, _ = learner_of(solution_path)
    result = grade(learner, solution, Setup(env=grading_env(1), timeout=GRADE_TIMEOUT))
    if not result.exercises:
        pytest.skip(f"{solution_path.name} has no exercises")
    ours = [
        (c.source, notebook_format.tags(c)) for c in solution.cells if notebook_format.is_check(c)
    ]
    shipped = [
        (c.source, notebook_format.tags(c)) for c in learner.cells if notebook_format.is_check(c)
    ]
    assert shipped == ours, "the shipped learner notebook's checks differ from the solution"
    passing = [
        e.name for e in result.exercises if e.passed or e.reason not in ("error", "mismatch")
    ]
    assert not passing, f"exercises whose check does not fail on the stub: {passing}\n" + "\n".join(
        f"{e.name}: {e.reason}: {e.got}" for e in result.exercises
    )


@pytest.mark.parametrize("solution_path", BOTH)
@pytest.mark.slow
@pytest.mark.notebooks
@pytest.mark.sandbox
def test_solved_learner_notebook_passes_grading(solution_path):
    solution = notebook_format.read_notebook(solution_path)
    learner, _ = learner_of(solution_path)
    solved = solve(learner, solution)
    for cell in solved.cells:  # a learner's own run overwrote the stored verdicts
        if notebook_format.is_check(cell):
            cell.outputs = [{"output_type": "stream", "name": "stdout", "text": "stale\n"}]
    result = grade(solved, solution, Setup(env=grading_env(1), timeout=GRADE_TIMEOUT))
    failures = [
        f"{e.name}: expected {e.expected!r}, got {e.got!r}"
        for e in result.exercises
        if not e.passed
    ]
    assert not failures and not result.notes, "\n".join(failures + result.notes)


@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.notebooks
def test_compared_outputs_are_identical_across_runs_and_thread_counts():
    """nbval runs every notebook with 1 thread; this run uses 2."""
    solution = notebook_format.read_notebook(DETERMINISM)
    stored = compared_cells(solution)
    assert stored, f"{DETERMINISM.name} has no compared cells"
    nb = copy.deepcopy(solution)
    run = run_notebook(nb, cwd=DETERMINISM.parent, timeout=CELL_TIMEOUT, env=kernel_env(threads=2))
    assert not [
        r
        for r in run.failures()
        if "raises-exception" not in notebook_format.tags(nb.cells[r.index])
    ], run.failures()
    fresh = compared_cells(nb)
    differing = sorted(key for key in stored if fresh.get(key) != stored[key])
    assert not differing, (
        f"{DETERMINISM.name} with 2 threads: compared cells {differing} differ from the stored run"
    )


# --- tfcourse execute -------------------------------------------------------------------


def test_clean_outputs_sanitizes_joins_streams_and_drops_widget_views():
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    from tfcourse.authoring.execute import clean_outputs

    cell = new_code_cell("x", id="x")
    cell.outputs = [
        new_output("stream", name="stdout", text="--- heading"),
        new_output("stream", name="stdout", text="\nits line\n"),
        new_output("stream", name="stderr", text="/home/bob/lib/x.py:3: UserWarning: hm\n"),
        new_output(
            "display_data",
            data={
                notebook_format.WIDGET_MIME: {"model_id": "abc"},
                "text/plain": "IntSlider(value=3)",
            },
        ),
        new_output("display_data", data={notebook_format.WIDGET_MIME: {"model_id": "def"}}),
        new_output(
            "execute_result", data={"text/plain": "<Foo at 0x7f00deadbeef>"}, execution_count=1
        ),
    ]
    nb = new_notebook(cells=[cell])
    clean_outputs(nb)
    assert [dict(o.get("data", {})) or o.text for o in nb.cells[0].outputs] == [
        "--- heading\nits line\n",  # one print's pieces joined again
        "<path>/x.py:3: UserWarning: hm\n",
        {"text/plain": "IntSlider(value=3)"},
        {"text/plain": "<Foo at 0x<address>>"},
    ]


@pytest.mark.slow
@pytest.mark.notebooks
def test_execute_refreshes_outputs_in_place_and_keeps_a_failing_notebook(tmp_path):
    from nbformat.v4 import new_code_cell

    from tfcourse.authoring.execute import execute_notebook

    solution = notebook_format.read_notebook(FIXTURE)
    where = new_code_cell("import os\nprint(os.getcwd())", id="where")
    where.metadata["tags"] = [notebook_format.IGNORE_OUTPUT_TAG]
    solution.cells.append(where)
    solution.metadata["widgets"] = {"state": {}}
    for cell in solution.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    path = tmp_path / "99_fixture.ipynb"
    notebook_format.write_notebook(solution, path)
    problems, seconds, slowest = execute_notebook(path, threads=1)
    assert problems == [] and seconds > 0 and len(slowest) == 3
    executed = notebook_format.read_notebook(path)
    assert compared_cells(executed) == compared_cells(notebook_format.read_notebook(FIXTURE))
    assert "widgets" not in executed.metadata
    printed = executed.cells[-1].outputs[0].text
    assert printed == f"<path>/{tmp_path.name}\n"  # the run's folder, without the machine path
    assert [c.id for c in executed.cells] == [c.id for c in solution.cells]

    before = path.read_bytes()
    broken = notebook_format.read_notebook(path)
    broken.cells.insert(2, new_code_cell("1 / 0", id="oops"))
    notebook_format.write_notebook(broken, path)
    written = path.read_bytes()
    problems, _, _ = execute_notebook(path, threads=1)
    assert problems == ["cell 'oops' (#2): error: ZeroDivisionError: division by zero"]
    assert path.read_bytes() == written != before  # not overwritten
