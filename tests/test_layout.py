"""The package's shape: the wings, and which may import which.

``MAY_IMPORT`` is the one table of the directions between the wings (and the top-level
modules, ``<top>``); an import between two wings that it does not list is a failure. Every
import counts, including those inside functions (a lazy import is still a dependency) and
those by name: a string constant naming one of the package's modules
(``importlib.import_module("tfcourse.grade.command")``, the CLI's table of commands,
the package's lazy attributes) is an import of it. Cycles are looked for among module-level
imports, since an import inside a function is the sanctioned way to load something on first
use.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tfcourse"
WINGS = ("nn", "checks", "lab", "train", "course", "grade", "authoring", "doctor")
# Which wing may import which (besides itself and the SHARED modules), and why.
MAY_IMPORT = {
    "nn": set(),  # the model stands alone: the course's reference
    "lab": {"nn"},  # plots, widgets and demos show the model
    "train": {"nn", "lab", "<top>"},  # training runs the model; the capstone's tests and
    # byte pairs are lab's; runtime's device and seeding
    "checks": {"nn", "lab", "train", "course", "<top>"},  # the checks compare with the references:
    # the model, lab's demos (09's production notes),
    # train's loop and tokenizer; runtime; the learner's screen (course/screen.py)
    "course": set(),  # notebooks as files: none of the course's code
    "grade": {"course"},  # grading reads notebooks; its one use of the checks is below
    "authoring": {"course"},  # making the course: notebooks as files, no learner's command
    # `tfcourse doctor` looks at everything the course needs: the version, the device,
    # the fonts (top level), the installed course, the grading sandbox, the generator
    "doctor": {"<top>", "lab", "course", "grade", "authoring"},
    "<top>": {"nn", "lab", "train", "checks", "course", "grade", "authoring", "doctor"},  # the
    # public face and the commands
}
# Single modules beyond their wing's row. The sealed grader's judge runs the checks in the
# grader's own process (the learner's code is in a worker), and nothing else of course/ does.
ALLOWED = {("tfcourse.grade.sealed.session", "tfcourse.checks")}
# Top-level modules every wing may import: they import nothing of the package themselves
# (test_shared_modules_import_nothing_of_the_package), so they pull in no wing.
SHARED = {"tfcourse.language", "tfcourse.files", "tfcourse.version"}


def module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, package: Path) -> list[tuple[str, bool]]:
    """``(imported module, at module level?)`` for each import of the package's own modules."""
    name = module_name(path, package)
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    tree = ast.parse(path.read_text(), filename=str(path))
    top_level = {id(node) for node in tree.body}
    root = package.name
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from pkg import submodule` imports the submodule; pkg itself counts only
            # when a name other than a submodule is taken from it.
            modules = [
                f"{target}.{alias.name}"
                for alias in node.names
                if (package.parent / f"{target}.{alias.name}".replace(".", "/"))
                .with_suffix(".py")
                .exists()
                or (package.parent / f"{target}.{alias.name}".replace(".", "/")).is_dir()
            ]
            targets = modules + ([target] if len(modules) < len(node.names) else [])
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and re.fullmatch(rf"{root}(\.[A-Za-z_]\w*)+", node.value)
            and _is_module(node.value, package)
        ):
            targets = [node.value]  # imported by name: a dependency all the same
        else:
            continue
        for target in targets:
            if target == root or target.startswith(root + "."):
                found.append((target, id(node) in top_level and not isinstance(node, ast.Constant)))
    return found


def _is_module(dotted: str, package: Path) -> bool:
    path = package.parent / dotted.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def wing_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in WINGS) else "<top>"


def import_graph(package: Path) -> dict[str, list[tuple[str, bool]]]:
    return {module_name(p, package): imports_of(p, package) for p in sorted(package.rglob("*.py"))}


def direction_violations(package: Path) -> list[str]:
    problems = []
    for module, targets in import_graph(package).items():
        source = wing_of(module)
        for target, _ in targets:
            if target in SHARED or (module, target) in ALLOWED or wing_of(target) == source:
                continue
            if wing_of(target) not in MAY_IMPORT[source]:
                problems.append(
                    f"{module} imports {target} ({source} may not import {wing_of(target)})"
                )
    return problems


def module_level_cycle(package: Path) -> list[str] | None:
    graph = {
        module: sorted({t for t, top in targets if top and t != module})
        for module, targets in import_graph(package).items()
    }
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module):
        state[module] = 1
        path.append(module)
        for target in graph.get(module, []):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[module] = 2
        return None

    for module in graph:
        if module not in state and (cycle := visit(module)):
            return cycle
    return None


# --------------------------------------------------------------------------- the real package


def test_the_top_level_holds_only_the_public_face_and_the_commands():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == [
        "__init__.py",
        "__main__.py",
        "cli.py",
        "demo.py",
        "demo_command.py",
        "files.py",
        "language.py",
        "runtime.py",
        "version.py",
        "yours.py",
    ]
    wings = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert wings == sorted(WINGS)


def test_import_directions():
    assert direction_violations(PACKAGE) == []


def test_an_import_by_name_is_an_import():
    """The CLI loads its commands by name; the directions see those imports."""
    graph = import_graph(PACKAGE)
    assert ("tfcourse.grade.command", False) in graph["tfcourse.cli"]


def test_the_authoring_tools_are_loaded_by_their_commands_alone():
    """No module a learner's session or the grader loads imports the authoring wing: the
    CLI's table of commands names it (``tfcourse build-notebooks``, ``site``, ...), and
    ``tfcourse doctor`` runs the generator in a checkout (are notebooks/ and solutions/ in
    step?), never in an installed course."""
    graph = import_graph(PACKAGE)
    importers = sorted(
        module
        for module, targets in graph.items()
        if not module.startswith("tfcourse.authoring")
        and any(target.startswith("tfcourse.authoring") for target, _ in targets)
    )
    assert importers == ["tfcourse.cli", "tfcourse.doctor.jupyter"]


def test_shared_modules_import_nothing_of_the_package():
    graph = import_graph(PACKAGE)
    assert {module: graph[module] for module in SHARED} == {module: [] for module in SHARED}


def test_no_import_cycles():
    assert module_level_cycle(PACKAGE) is None


# Counted on ruff-formatted code, which spends about a fifth more lines than the hand-wrapped
# style the limit of 520 was first set on: the same density as before.
MAX_MODULE_LINES = 600


def test_modules_are_readable_in_one_sitting():
    too_long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert too_long == {}


# --------------------------------------------------------------------------- the test can fail


def _fake_package(tmp_path: Path, files: dict[str, str]) -> Path:
    package = tmp_path / "tfcourse"
    for wing in WINGS:
        (package / wing).mkdir(parents=True, exist_ok=True)
        (package / wing / "__init__.py").write_text("")
    (package / "__init__.py").write_text("from .nn.model import GPT\n")
    (package / "nn" / "model.py").write_text("GPT = object\n")
    for name, text in files.items():
        (package / name).write_text(text)
    return package


@pytest.mark.parametrize(
    "name, text, expected",
    [
        ("nn/attention.py", "from ..lab import plots\n", "nn may not import lab"),
        (
            "nn/attention.py",
            "def f():\n    from tfcourse.train import loop\n",
            "nn may not import train",
        ),
        ("nn/attention.py", "from .. import runtime\n", "nn may not import <top>"),
        ("course/grade.py", "from ..nn.model import GPT\n", "course may not import nn"),
        ("course/grade.py", "import tfcourse\n", "course may not import <top>"),
        ("lab/plots.py", "from ..train import loop\n", "lab may not import train"),
        ("checks/norms.py", "from ..grade import notebook\n", "checks may not import grade"),
        (
            "nn/attention.py",
            "import importlib\nimportlib.import_module('tfcourse.nn.model')\n"
            "importlib.import_module('tfcourse.lab')\n",
            "nn may not import lab",
        ),
    ],
)
def test_a_wrong_import_direction_is_found(tmp_path, name, text, expected):
    package = _fake_package(tmp_path, {name: text})
    problems = direction_violations(package)
    assert len(problems) == 1 and expected in problems[0], problems


def test_a_cycle_is_found(tmp_path):
    package = _fake_package(
        tmp_path, {"lab/a.py": "from . import b\n", "lab/b.py": "from .a import x\n"}
    )
    assert module_level_cycle(package) in (
        ["tfcourse.lab.a", "tfcourse.lab.b", "tfcourse.lab.a"],
        ["tfcourse.lab.b", "tfcourse.lab.a", "tfcourse.lab.b"],
    )
    lazy = _fake_package(
        tmp_path / "lazy",
        {"lab/a.py": "from . import b\n", "lab/b.py": "def f():\n    from .a import x\n"},
    )
    assert module_level_cycle(lazy) is None


def test_allowed_imports_pass(tmp_path):
    package = _fake_package(
        tmp_path,
        {
            "lab/plots.py": "from ..nn.model import GPT\n",
            "course/build.py": "from . import notebook_format\nfrom ..language import say\n",
            "course/notebook_format.py": "TAG = 'x'\n",
        },
    )
    assert direction_violations(package) == []
    assert module_level_cycle(package) is None


# --------------------------------------------------------------------------- the tests themselves

TESTS = Path(__file__).resolve().parent


def imported_modules(source: str) -> set[str]:
    """The top-level names of every module ``source`` imports, at any depth."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_files_import_no_other_test_file():
    """What several test files share lives in helpers.py, conftest.py or mutants/."""
    importing = {
        path.name: sorted(n for n in imported_modules(path.read_text()) if n.startswith("test_"))
        for path in sorted(TESTS.rglob("*.py"))
    }
    assert {name: found for name, found in importing.items() if found} == {}


def test_a_test_file_importing_another_is_found():
    found = imported_modules("def f():\n    import test_browser\nfrom test_grade import x\n")
    assert found == {"test_browser", "test_grade"}


def test_the_command_line_answers_help_without_importing_torch():
    """``import tfcourse`` is lazy (PEP 562): ``tfcourse --help`` answers at once, and the
    names notebooks use (``tc.GPT``, ``tc.runtime``) load on first use."""
    code = (
        "import sys\nfrom tfcourse.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('torch' in sys.modules)\n"
        "import tfcourse as tc\nprint(tc.GPT.__name__, tc.runtime.__name__)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, encoding="utf-8", check=True
    )
    assert result.stdout.splitlines()[-2:] == ["False", "GPT tfcourse.runtime"], result.stdout
