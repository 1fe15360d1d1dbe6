"""Attacks on the grade, each of which must earn no points, and honest work that must.

Every attack below is a way a learner could make ``check_rmsnorm`` (or every check) print
its pass line without writing RMSNorm. Two kinds:

- ``ATTACKS`` answer the exercise with the course's reference or a built-in that does the
  whole job: the sealed worker stubs the reference (the report says "reference") and
  watches for the built-in ("shortcut");
- ``SANDBOXED`` reach for the grader itself (replace the check, patch the checks module or
  the harness, IPython hooks, ``sys.modules``, builtins, generated code, a shell line).
  The checks run in the grader, not in the learner's process, so these change nothing:
  they must score nothing for RMSNorm and must not cost the neighbouring exercise its
  point.

The slow test grades them all through ``tfcourse grade``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell

from tfcourse.authoring.build import make_learner, solve
from tfcourse.course import notebook_format

from helpers import SOLUTIONS

PASS_LINE = 'print("RMSNorm: 6/6 checks passed")'

# name -> (code replacing the RMSNorm exercise cell, code of an extra cell before it or None,
#          the verdict expected: (exercise, the report's reason))
ATTACKS = {
    "alias": ("RMSNorm = tc.RMSNorm", None, ("RMSNorm", "reference")),
    # The stub below the alias, left as given, replaces it: the exercise is not done.
    "alias elsewhere": (None, "RMSNorm = tc.RMSNorm", ("RMSNorm", "error")),
    "import the reference": ("from tfcourse import RMSNorm", None, ("RMSNorm", "reference")),
    "subclass": ("class RMSNorm(tc.RMSNorm):\n    pass", None, ("RMSNorm", "reference")),
    "wrap through an alias": (
        (
            "class RMSNorm(torch.nn.Module):\n    def __init__(self, d, eps=1e-6):\n"
            "        super().__init__()\n        self.inner = Hidden(d, eps)\n"
            "        self.weight = self.inner.weight\n    def forward(self, x):\n"
            "        return self.inner(x)"
        ),
        "from tfcourse.nn.norms import RMSNorm as Hidden",
        ("RMSNorm", "reference"),
    ),
    "torch built-in": (
        (
            "class RMSNorm(torch.nn.Module):\n    def __init__(self, d, eps=1e-6):\n"
            "        super().__init__()\n        self.eps = eps\n"
            "        self.weight = torch.nn.Parameter(torch.ones(d))\n    def forward(self, x):\n"
            "        return torch.nn.functional.rms_norm(x, x.shape[-1:], self.weight, self.eps)"
        ),
        None,
        ("RMSNorm", "shortcut"),
    ),
    "built-in through a helper": (
        (
            "class RMSNorm(torch.nn.Module):\n    def __init__(self, d, eps=1e-6):\n"
            "        super().__init__()\n        self.eps = eps\n"
            "        self.weight = torch.nn.Parameter(torch.ones(d))\n    def forward(self, x):\n"
            "        return norm(x, x.shape[-1:], self.weight, self.eps)"
        ),
        "import torch.nn.functional as G\nnorm = G.rms_norm",
        ("RMSNorm", "shortcut"),
    ),
}

# name -> (code replacing the RMSNorm exercise cell or None for the stub as given, code of an
#          extra cell before it or None)
SANDBOXED = {
    "replace the check function": (None, f"check_rmsnorm = lambda cls: {PASS_LINE}"),
    "patch the checks module": (
        None,
        (f"import tfcourse.checks as C\nC.check_rmsnorm = lambda cls: {PASS_LINE}"),
    ),
    "patch the harness": (
        None,
        ("from tfcourse.checks import _harness\n_harness.Checker.__exit__ = lambda *a: True"),
    ),
    "IPython hook": (None, "get_ipython().events.register('pre_run_cell', lambda *a: None)"),
    "module swap": (
        None,
        ("import sys, types\nsys.modules['tfcourse.checks'] = types.SimpleNamespace()"),
    ),
    "generated code": (
        "exec(bytes.fromhex('524d534e6f726d203d2074632e524d534e6f726d').decode())",
        None,
    ),
    "globals": ("globals()['RMSNorm'] = getattr(tc, 'RMS' + 'Norm')", None),
    "builtins": (None, "import builtins\nbuiltins.print = lambda *a, **k: None"),
    "shell": (None, "!cp ../solutions/99_fixture.ipynb ."),
}


def attacked(solution, name: str):
    """The solved fixture with its RMSNorm exercise replaced by the attack ``name``."""
    replacement, extra = ATTACKS[name][:2] if name in ATTACKS else SANDBOXED[name]
    nb = solve(make_learner(solution, "99_fixture"), solution)
    index = next(i for i, c in enumerate(nb.cells) if c.get("id") == "ex-rmsnorm")
    learner_stub = make_learner(solution, "99_fixture").cells[index].source
    if replacement is None:
        nb.cells[index].source = learner_stub  # the exercise left as it was given
    else:
        nb.cells[index].source = replacement
    if extra is not None:
        nb.cells.insert(index, new_code_cell(extra, id="extra"))
    return nb


def test_there_are_at_least_twelve_distinct_attacks():
    routes = {(r, e) for r, e, _ in ATTACKS.values()} | set(SANDBOXED.values())
    assert len(routes) >= 12


@pytest.mark.slow
@pytest.mark.notebooks
@pytest.mark.parametrize(
    "sandbox",
    # Seconds each took in one `make test`: a fresh user per worker imports torch each time.
    [
        pytest.param("bubblewrap", marks=pytest.mark.long(15)),
        pytest.param("users", marks=pytest.mark.long(50)),
    ],
)
@pytest.mark.sandbox
def test_every_attack_scores_nothing_for_what_it_attacks(tmp_path, solution, sandbox, request):
    """In both set-ups: bubblewrap, and a fresh user per worker (as root: containers)."""
    if sandbox == "users":
        request.getfixturevalue("separate_users")
    folder = tmp_path / "submissions"
    folder.mkdir(mode=0o700)
    files = {}
    for number, name in enumerate(sorted([*ATTACKS, *SANDBOXED])):
        files[f"attack_{number:02d}.ipynb"] = name
        notebook_format.write_notebook(
            attacked(solution, name), folder / f"attack_{number:02d}.ipynb"
        )
    # The same routes without the shortcut still score: the grader does not punish a file.
    honest = solve(make_learner(solution, "99_fixture"), solution)
    honest.cells.append(new_code_cell("print(tc.RMSNorm(4)(torch.ones(1, 1, 4)).shape)", id="mine"))
    notebook_format.write_notebook(honest, folder / "honest.ipynb")
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
            "60",
            "--jobs",
            "2",
            "--sandbox",
            sandbox,
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    grades = {Path(g["notebook"]).name: g for g in json.loads(result.stdout)}
    assert result.returncode == 1
    assert grades["honest.ipynb"]["passed"] == 2, grades["honest.ipynb"]
    for file, name in files.items():
        # A shortcut meets the sealed stub or a trap; reaching for the grader leaves the
        # exercise's own stub to fail its check. Neither costs the neighbouring exercise its point.
        kind = (
            ATTACKS[name][2][1]
            if name in ATTACKS
            else "reference"
            if name in ("generated code", "globals")  # the reference, reached by a detour
            else "error"
        )
        verdicts = {e["name"]: (e["passed"], e["reason"]) for e in grades[file]["exercises"]}
        assert verdicts["RMSNorm"] == (False, kind), (name, verdicts)
        assert verdicts["Causal mask"] == (True, ""), (name, verdicts)
