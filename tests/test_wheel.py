"""What the wheel and the sdist carry: the package and every notebook of the course, and
nothing of the repository's tests, benchmarks or build output. Built offline with the
build backend of the dev environment (hatchling), as ``python -m build`` would."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile

import pytest

from tfcourse import __version__

from helpers import ROOT

pytestmark = pytest.mark.slow

COURSE = "tfcourse/_course"
NOT_SHIPPED = ("tests/", "benchmarks/", "scripts/", "build/", "artifacts/", "docs/", ".venv/")


def shipped_notebooks() -> set[str]:
    """Every notebook of the repository's notebooks/ and solutions/, as the wheel names it."""
    return {
        f"{COURSE}/{path.relative_to(ROOT).as_posix()}"
        for folder in ("notebooks", "solutions")
        for path in (ROOT / folder).rglob("*.ipynb")
        if ".ipynb_checkpoints" not in path.parts
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, list[str]]:
    """File names inside the freshly built wheel and sdist."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-d", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    assert wheel.name == f"tfcourse-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive, tarfile.open(sdist) as tar:
        top = f"tfcourse-{__version__}/"
        return {
            "wheel": archive.namelist(),
            "sdist": [m.name.removeprefix(top) for m in tar.getmembers() if m.isfile()],
        }


def test_the_wheel_carries_every_notebook_and_the_package(built):
    names = set(built["wheel"])
    assert shipped_notebooks() <= names, sorted(shipped_notebooks() - names)
    notebooks = {n for n in names if n.endswith(".ipynb")}
    assert notebooks == shipped_notebooks()  # and no other notebook
    packaged = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tfcourse").rglob("*.py")}
    assert packaged <= names, sorted(packaged - names)
    assert "tfcourse/authoring/site.css" in names
    # the Chinese figures' font and its licence (the OFL asks for both together)
    assert {
        f"tfcourse/lab/fonts/{n}" for n in ("NotoSansCJKscSubset-Regular.otf", "OFL.txt")
    } <= names
    assert f"{COURSE}/solutions/01_attention.zh.md" in names  # doctor checks zh/ against it


def test_the_wheel_carries_nothing_else(built):
    unexpected = [
        n
        for n in built["wheel"]
        if not (n.startswith(("tfcourse/", f"tfcourse-{__version__}.dist-info/")))
        or "__pycache__" in n
        or n.endswith((".pyc", ".egg-info"))
    ]
    assert not unexpected


def test_the_sdist_builds_the_same_course(built):
    names = set(built["sdist"])
    assert {n.removeprefix(f"{COURSE}/") for n in shipped_notebooks()} <= names
    assert {"pyproject.toml", "README.md", "README.zh.md", "CHANGELOG.md"} <= names
    assert not [n for n in names if n.startswith(NOT_SHIPPED) or "__pycache__" in n]


def test_the_repository_has_no_second_copy_of_the_course():
    assert not (ROOT / COURSE).exists()
    tracked = subprocess.run(
        ["git", "ls-files", COURSE], cwd=ROOT, capture_output=True, text=True, encoding="utf-8"
    )
    assert tracked.stdout == ""
