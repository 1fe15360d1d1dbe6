"""A notebook written for another tfcourse version warns in its first cell."""

import pytest
import torch

from tfcourse import __version__, runtime


def test_matching_version_is_silent(capsys):
    device = runtime.setup_notebook(written_for=__version__)
    assert isinstance(device, torch.device)
    assert "WARNING" not in capsys.readouterr().err


@pytest.mark.parametrize("written_for, advice", [
    ("99.0.0", "the package is older than the notebook: update it with `make setup`"),
    ("0.0.1", "the notebook is older than the package: get the current notebooks (`git pull`"),
])
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
    """pyproject.toml takes the version from tfcourse/__init__.py; the installed metadata agrees."""
    from importlib.metadata import version
    from pathlib import Path

    import tfcourse

    tomllib = pytest.importorskip("tomllib")        # Python 3.11+
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "tfcourse.__version__"}
    assert version("tfcourse") == tfcourse.__version__
