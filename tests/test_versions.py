"""A notebook written for another tfcourse version warns in its first cell."""

import pytest
import torch

from tfcourse import __version__, runtime


def test_matching_version_is_silent(capsys):
    device = runtime.setup_notebook(written_for=__version__)
    assert isinstance(device, torch.device)
    assert "WARNING" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "written_for, advice",
    [
        ("99.0.0", "the package is older than the notebook: update it with `make setup`"),
        ("0.0.1", "the notebook is older than the package: get the current notebooks (`git pull`"),
    ],
)
def test_mismatch_prints_a_warning_with_the_fix(capsys, written_for, advice):
    runtime.setup_notebook(written_for=written_for)
    err = capsys.readouterr().err
    assert f"written for tfcourse {written_for}, but tfcourse {__version__} is installed" in err
    assert advice in err and "tfcourse doctor" in err


def test_written_for_must_be_a_version_string():
    with pytest.raises(TypeError, match="written_for must be a version string"):
        runtime.setup_notebook(written_for=0.1)


def test_version_order_is_numeric():
    assert "package is older" in runtime.version_mismatch("0.10.0", "0.9.0")
    assert runtime.version_mismatch("0.1.0", "0.1.0") is None


def test_the_version_is_written_once():
    """pyproject.toml takes the version from tfcourse/version.py; the installed metadata agrees."""
    from importlib.metadata import version
    from pathlib import Path

    import tfcourse

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["hatch"]["version"] == {"path": "tfcourse/version.py"}
    assert version("tfcourse") == tfcourse.__version__


def _pins(python: str) -> dict[str, str]:
    """constraints.txt's ``{name: version}`` for this Python (its markers evaluated)."""
    from pathlib import Path

    from packaging.requirements import Requirement

    pins = {}
    for line in (Path(__file__).parents[1] / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate(
                {"python_full_version": python, "python_version": python[:4]}
            ):
                pins[requirement.name] = str(requirement.specifier).removeprefix("==")
    return pins


@pytest.mark.parametrize("python", ["3.10.0", "3.11.7", "3.13.0"])
def test_the_constraints_pin_every_dependency_within_its_range(python):
    """``make constraints`` was run after the last change to pyproject.toml's ranges: every
    dependency and dev tool has one pin per Python, inside its range; torch has none
    (``make setup`` installs TORCH first)."""
    from pathlib import Path

    from packaging.requirements import Requirement

    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    pins = _pins(python)
    for line in [*project["dependencies"], *project["optional-dependencies"]["dev"]]:
        requirement = Requirement(line)
        if requirement.name == "torch":
            assert "torch" not in pins
            continue
        assert requirement.name in pins, f"{requirement.name}: no pin (run make constraints)"
        assert requirement.specifier.contains(pins[requirement.name]), (
            f"{requirement.name}=={pins[requirement.name]} is outside {requirement.specifier}"
        )


def test_conda_installs_the_same_versions():
    """environment.yml takes PyTorch at the Makefile's TORCH and the rest from constraints.txt."""
    import re
    from pathlib import Path

    root = Path(__file__).parents[1]
    environment = (root / "environment.yml").read_text()
    torch_pin = re.search(r"^TORCH \?= torch==(\S+)$", (root / "Makefile").read_text(), re.M)
    assert f"- pytorch={torch_pin[1]}\n" in environment
    assert "- -c constraints.txt\n" in environment and "- -e .[dev]\n" in environment


def test_pre_commit_runs_the_pinned_ruff():
    import re
    from pathlib import Path

    config = (Path(__file__).parents[1] / ".pre-commit-config.yaml").read_text()
    rev = re.search(r"ruff-pre-commit\n\s+rev: v(\S+)", config)
    assert rev and rev[1] == _pins("3.11.7")["ruff"]
