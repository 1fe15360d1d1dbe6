"""Honest work earns full marks, whatever IPython syntax or scratch code sits around it.

The grade is kept honest by the sealed worker (the checks run in the grader), so nothing a
learner does in a scratch cell (time a call, peek at ``vars(cfg)``, list packages with
``!pip list``, test their answer against the course's reference) may cost a point. The
fast tests turn the worker's notes into report lines; the slow one grades one notebook
that holds every honest variant at once (a worker imports torch: seconds, not
milliseconds).
"""

from __future__ import annotations

import pytest
from nbformat.v4 import new_code_cell

from tfcourse.authoring.build import make_learner, solve
from tfcourse.grade.sealed.session import _raised
from tfcourse.language import speaking

from helpers import cells_for

CONFIG = "tc.GPTConfig(vocab_size=50, max_seq_len=16, n_layers=2, n_heads=4, d_model=32)"

# Scratch cells a learner may leave anywhere: timing, plotting settings, the shell, a look
# at names (id -> source).
SCRATCH = {
    "timeit": "%timeit causal_mask(8)",
    "plots": "%matplotlib inline\n%config InlineBackend.figure_format = 'retina'",
    "shell": "!pip list\nfiles = !ls\nprint(len(files))",
    "bash": "%%bash\necho hello",
    "reload": "%load_ext autoreload\n%autoreload 2",
    "peek": f"cfg = {CONFIG}\nprint(vars(cfg))\nprint(sorted(globals())[:5])",
    "timed": "%%time\nx = torch.randn(2, 3, 8)\nprint(causal_mask(4).sum())",
    "generated": "exec('y = 1')\nprint(eval('y + 1'))",
}


SELF_TEST = """
x = torch.randn(2, 3, 8)
try:
    print((RMSNorm(8)(x) - tc.RMSNorm(8)(x)).abs().max())
except Exception as error:
    print("no reference to compare with:", error)
"""


def _cell(nb, cell_id: str):
    return next(cell for cell in nb.cells if cell.get("id") == cell_id)


def _with_cells(solution, cells: dict[str, str]):
    """The solved fixture with ``cells`` (id -> source) inserted before the RMSNorm exercise."""
    nb = solve(make_learner(solution, "99_fixture"), solution)
    index = nb.cells.index(_cell(nb, "ex-rmsnorm"))
    nb.cells[index:index] = [new_code_cell(source, id=cell_id) for cell_id, source in cells.items()]
    return nb


# --- what the worker runs, and the report's notes (fast) -------------------------------------


def test_a_scratch_copy_of_the_check_above_the_exercise_is_not_the_check(solution):
    """A Colab file (no cell ids) with ``check_rmsnorm(RMSNorm)`` tried above the exercise:
    the worker runs everything down to the exercise cell and the learner's own cells, never
    a check (the checks run in the grader, from the solution)."""
    nb = solve(make_learner(solution, "99_fixture"), solution)
    index = nb.cells.index(_cell(nb, "ex-rmsnorm"))
    nb.cells.insert(index, new_code_cell("check_rmsnorm(RMSNorm)"))
    for cell in nb.cells:
        cell.pop("id", None)
    sent = cells_for(nb, solution, "RMSNorm")
    assert sent[-1].startswith("class RMSNorm(")
    assert "check_rmsnorm(RMSNorm)" not in sent


def test_a_solution_below_the_untouched_stub_is_sent_to_the_worker(solution):
    nb = make_learner(solution, "99_fixture")
    index = nb.cells.index(_cell(nb, "ex-rmsnorm"))
    nb.cells.insert(
        index + 1, new_code_cell("class RMSNorm(torch.nn.Module):\n    pass", id="mine")
    )
    nb.cells.append(new_code_cell("print('after the check')", id="later"))
    sent = cells_for(nb, solution, "RMSNorm")
    assert sent[-1] == "class RMSNorm(torch.nn.Module):\n    pass"
    assert not any("check_rmsnorm(" in cell or "after the check" in cell for cell in sent)


RAN = [
    {
        "ok": True,
        "error": "",
        "notes": [
            {"kind": "shell", "line": "!pip list", "error": ""},
            {"kind": "timing", "line": "%timeit f(x)", "error": ""},
            {"kind": "magic", "line": "%load_ext autoreload", "error": ""},
            {"kind": "failed", "line": "%config Nope.x = 1", "error": "UsageError: no"},
        ],
    },
    {"ok": False, "error": "NameError: name 'q' is not defined", "notes": []},
]


def test_the_workers_notes_become_report_notes_in_both_languages():
    sent = [("cell 'a' (#3)", ""), ("cell 'b' (#4)", "")]
    with speaking("en"):
        assert _raised(sent, RAN) == [
            "cell 'a' (#3): shell line `!pip list` not run in grading",
            "cell 'a' (#3): `%timeit f(x)` skipped in grading (it only measures time)",
            "cell 'a' (#3): magic `%load_ext autoreload` skipped in grading",
            "cell 'a' (#3): `%config Nope.x = 1` had no effect in grading (UsageError: no)",
            "cell 'b' (#4) raised NameError: name 'q' is not defined",
        ]
    with speaking("zh"):
        chinese = _raised(sent, RAN)
    assert len(chinese) == 5 and "`!pip list` 在评分时不运行" in chinese[0]
    assert all(not note.isascii() for note in chinese)


def test_notes_of_an_unknown_form_are_left_out():
    """The worker's reply is the learner's to shape: nothing odd reaches the report."""
    ran = [
        {"ok": True, "notes": "!rm -rf"},
        {"ok": True, "notes": [1, None, {"kind": "x"}]},
        {"ok": True, "notes": [{"kind": "shell", "line": "!" + "x" * 5000}]},
    ]
    notes = _raised([("a", ""), ("b", ""), ("c", "")], ran)
    assert len(notes) == 1 and len(notes[0]) < 200


# --- one honest notebook, graded (slow) ------------------------------------------------------


@pytest.mark.slow
def test_honest_notebook_with_magics_shell_lines_and_peeks_scores_full_marks(solution):
    from tfcourse.grade.notebook import grade
    from tfcourse.grade.sealed.sandbox import sandbox
    from tfcourse.grade.sealed.session import Setup, grading_env

    nb = _with_cells(solution, SCRATCH)
    # %%time on an exercise runs it; a magic on a cell's first line does not stop the cell.
    exercise = _cell(nb, "ex-causal-mask")
    exercise.source = "%%time\n" + exercise.source
    _cell(nb, "setup").source = "%matplotlib inline\n" + _cell(nb, "setup").source
    # The RMSNorm stub left as given, the answer typed into a new cell right below it, with
    # a self-test against the course's reference (sealed in grading: it fails inside the
    # learner's own try, and costs nothing).
    answer = _cell(nb, "ex-rmsnorm").source + SELF_TEST
    _cell(nb, "ex-rmsnorm").source = _cell(
        make_learner(solution, "99_fixture"), "ex-rmsnorm"
    ).source
    nb.cells.insert(nb.cells.index(_cell(nb, "ex-rmsnorm")) + 1, new_code_cell(answer, id="answer"))
    setup = Setup(
        env=grading_env(1), timeout=30, sandbox="bubblewrap" if sandbox().bwrap else "none"
    )
    with speaking("en"):
        result = grade(nb, solution, setup)
    assert [(e.name, e.passed, e.reason) for e in result.exercises] == [
        ("Causal mask", True, ""),
        ("RMSNorm", True, ""),
    ], result.exercises
    notes = result.exercises[1].notes
    for cell_id, line, said in [
        ("timeit", "%timeit causal_mask(8)", "skipped in grading (it only measures time)"),
        ("shell", "!pip list", "not run in grading"),
        ("shell", "!ls", "not run in grading"),
        ("bash", "%%bash", "not run in grading"),
        ("reload", "%load_ext autoreload", "skipped in grading"),
        ("reload", "%autoreload 2", "skipped in grading"),
    ]:
        assert any(f"'{cell_id}'" in note and f"`{line}` {said}" in note for note in notes), (
            cell_id,
            line,
            notes,
        )
    quiet = ("plots", "peek", "timed", "generated", "setup", "ex-causal-mask", "answer")
    assert not any(f"'{cell_id}'" in note for note in notes for cell_id in quiet), notes
