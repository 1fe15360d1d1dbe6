"""Attacks on the grade, each of which must earn no points, and honest work that must.

Every attack below is a way a learner could make ``check_rmsnorm`` (or every check) print
its pass line without writing RMSNorm. The fast tests show the grader's static scan names
each one; the slow test grades them all through ``tfcourse grade`` in real kernels, where
several would otherwise pass (the check cells run in the learner's kernel).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell

from tfcourse.course import notebook_format
from tfcourse.course.build import make_learner, solve
from tfcourse.course.restamp import restamp
from tfcourse.course.scan import scan

SOLUTIONS = Path(__file__).parent / "fixtures" / "solutions"
FIXTURE = SOLUTIONS / "99_fixture.ipynb"
PASS_LINE = 'print("RMSNorm: 6/6 checks passed")'

# name -> (code replacing the RMSNorm exercise cell, code of an extra cell before it or None,
#          the finding expected: (exercise or None for every exercise, kind))
ATTACKS = {
    "alias": ("RMSNorm = tc.RMSNorm", None, ("RMSNorm", "reference")),
    "alias elsewhere": (None, "RMSNorm = tc.RMSNorm", ("RMSNorm", "reference")),
    "import the reference": ("from tfcourse import RMSNorm", None, ("RMSNorm", "reference")),
    "subclass": ("class RMSNorm(tc.RMSNorm):\n    pass", None, ("RMSNorm", "reference")),
    "wrap through an alias": (
        "class RMSNorm(torch.nn.Module):\n    def __init__(self, d, eps=1e-6):\n"
        "        super().__init__()\n        self.inner = Hidden(d, eps)\n"
        "        self.weight = self.inner.weight\n    def forward(self, x):\n"
        "        return self.inner(x)",
        "from tfcourse.nn.norms import RMSNorm as Hidden", ("RMSNorm", "reference")),
    "torch built-in": (
        "class RMSNorm(torch.nn.Module):\n    def __init__(self, d, eps=1e-6):\n"
        "        super().__init__()\n        self.eps = eps\n"
        "        self.weight = torch.nn.Parameter(torch.ones(d))\n    def forward(self, x):\n"
        "        return torch.nn.functional.rms_norm(x, x.shape[-1:], self.weight, self.eps)",
        None, ("RMSNorm", "builtin")),
    "built-in through a helper": (
        "class RMSNorm(torch.nn.Module):\n    def __init__(self, d, eps=1e-6):\n"
        "        super().__init__()\n        self.eps = eps\n"
        "        self.weight = torch.nn.Parameter(torch.ones(d))\n    def forward(self, x):\n"
        "        return norm(x, x.shape[-1:], self.weight, self.eps)",
        "import torch.nn.functional as G\nnorm = G.rms_norm", ("RMSNorm", "builtin")),
    "replace the check function": (None, f"check_rmsnorm = lambda cls: {PASS_LINE}",
                                   (None, "tampering")),
    "patch the checks module": (None, "import tfcourse.checks as C\n"
                                      f"C.check_rmsnorm = lambda cls: {PASS_LINE}",
                                (None, "tampering")),
    "patch the harness": (None, "from tfcourse.checks import _harness\n"
                                "_harness.Checker.__exit__ = lambda *a: True",
                          (None, "tampering")),
    "IPython hook": (None, "get_ipython().events.register('pre_run_cell', lambda *a: None)",
                     (None, "tampering")),
    "module swap": (None, "import sys, types\nsys.modules['tfcourse.checks'] = types.SimpleNamespace()",
                    (None, "tampering")),
    "generated code": (None, "exec(bytes.fromhex('524d534e6f726d203d2074632e524d534e6f726d').decode())",
                       (None, "tampering")),
    "globals": (None, "globals()['RMSNorm'] = getattr(tc, 'RMS' + 'Norm')", (None, "tampering")),
    "builtins": (None, "import builtins\nbuiltins.print = lambda *a, **k: None", (None, "tampering")),
    "shell": (None, "!cp ../solutions/99_fixture.ipynb .", (None, "tampering")),
}


@pytest.fixture(scope="module")
def solution():
    return notebook_format.read_notebook(FIXTURE)


def attacked(solution, name: str):
    """The solved fixture with its RMSNorm exercise replaced by the attack ``name``."""
    replacement, extra, _ = ATTACKS[name]
    nb = solve(make_learner(solution, "99_fixture"), solution)
    index = next(i for i, c in enumerate(nb.cells) if c.get("id") == "ex-rmsnorm")
    learner_stub = make_learner(solution, "99_fixture").cells[index].source
    if replacement is None:
        nb.cells[index].source = learner_stub          # the exercise left as it was given
    else:
        nb.cells[index].source = replacement
    if extra is not None:
        nb.cells.insert(index, new_code_cell(extra, id="extra"))
    return nb


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_the_scan_names_each_attack(solution, name):
    stamped, _ = restamp(attacked(solution, name), solution)
    found = {(f.exercise, f.kind) for f in scan(solution, stamped)}
    assert ATTACKS[name][2] in found, found


def test_there_are_at_least_twelve_distinct_attacks():
    assert len({(r, e) for r, e, _ in ATTACKS.values()}) >= 12


@pytest.mark.parametrize("code", [
    "x = torch.randn(2, 3, 8)\nprint((RMSNorm(8)(x) - tc.RMSNorm(8)(x)).abs().max())",  # compare
    "ref = torch.nn.functional.rms_norm(torch.ones(2, 4), (4,))",      # try the built-in
    "import inspect as _inspect_not_used_by_rmsnorm" ,                 # an import alone
    "from IPython.display import display\ndisplay('hello')",
])
def test_honest_scratch_cells_are_not_findings(solution, code):
    nb = solve(make_learner(solution, "99_fixture"), solution)
    nb.cells.append(new_code_cell(code, id="scratch"))
    stamped, _ = restamp(nb, solution)
    assert scan(solution, stamped) == []


def test_solved_and_unsolved_notebooks_have_no_findings(solution):
    for nb in (make_learner(solution, "99_fixture"),
               solve(make_learner(solution, "99_fixture"), solution)):
        assert scan(solution, restamp(nb, solution)[0]) == []


@pytest.mark.slow
@pytest.mark.notebooks
def test_every_attack_scores_nothing_for_what_it_attacks(tmp_path, solution):
    folder = tmp_path / "submissions"
    folder.mkdir()
    files = {}
    for number, name in enumerate(sorted(ATTACKS)):
        files[f"attack_{number:02d}.ipynb"] = name
        notebook_format.write_notebook(attacked(solution, name), folder / f"attack_{number:02d}.ipynb")
    # The same routes without the shortcut still score: the grader does not punish a file.
    honest = solve(make_learner(solution, "99_fixture"), solution)
    honest.cells.append(new_code_cell("print(tc.RMSNorm(4)(torch.ones(1, 1, 4)).shape)", id="mine"))
    notebook_format.write_notebook(honest, folder / "honest.ipynb")
    result = subprocess.run(
        [sys.executable, "-m", "tfcourse", "grade", str(folder), "--json", "--against",
         "99_fixture", "--solutions", str(SOLUTIONS), "--timeout", "60", "--jobs", "2"],
        capture_output=True, text=True, timeout=900, check=False)
    grades = {Path(g["notebook"]).name: g for g in json.loads(result.stdout)}
    assert result.returncode == 1
    assert grades["honest.ipynb"]["passed"] == 2, grades["honest.ipynb"]
    for file, name in files.items():
        exercise, kind = ATTACKS[name][2]
        verdicts = {e["name"]: (e["passed"], e["reason"]) for e in grades[file]["exercises"]}
        assert verdicts["RMSNorm"] == (False, kind), (name, verdicts)
        if exercise is None:
            assert verdicts["Causal mask"] == (False, kind), (name, verdicts)
        else:
            assert verdicts["Causal mask"] == (True, ""), (name, verdicts)
