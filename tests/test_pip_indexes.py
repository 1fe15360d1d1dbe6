"""`make setup`'s uv step uses the mirror pip is configured with, wherever pip reads it."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import ROOT

SCRIPT = ROOT / "scripts" / "pip_indexes.py"
spec = importlib.util.spec_from_file_location("pip_indexes", SCRIPT)
pip_indexes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pip_indexes)

PACKAGE = "tfcourse-mirror-probe"  # on no public index: only the local one can serve it


def _wheel(folder: Path) -> Path:
    """A minimal wheel of PACKAGE 1.0 (one module), built by hand."""
    name = PACKAGE.replace("-", "_")
    files = {
        f"{name}.py": "MIRROR = True\n",
        f"{name}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: 1.0\n",
        f"{name}-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{name}-1.0.dist-info/RECORD"] = "\n".join([*record, f"{name}-1.0.dist-info/RECORD,,"])
    wheel = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def _local_index(root: Path) -> str:
    """A PEP 503 simple index in ``root`` holding PACKAGE; its file:// URL."""
    project = root / "simple" / PACKAGE
    project.mkdir(parents=True)
    wheel = _wheel(project)
    (project / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>\n')
    (root / "simple" / "index.html").write_text(f'<a href="{PACKAGE}/">{PACKAGE}</a>\n')
    return (root / "simple").as_uri()


def _pip_env(config: Path, **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return dict(env, PIP_CONFIG_FILE=str(config), **extra)


@pytest.mark.parametrize(
    "settings, flags",
    [
        ({}, []),
        (
            {"global": {"index-url": "https://mirror.example/simple"}},
            ["--default-index", "https://mirror.example/simple"],
        ),
        (
            {
                "global": {"index-url": "https://a/simple", "find-links": "https://w/"},
                "install": {"index-url": "https://b/simple"},
                ":env:": {"extra-index-url": "https://c/simple https://d/simple"},
            },
            ["--default-index", "https://b/simple", "--index", "https://c/simple"]
            + ["--index", "https://d/simple", "--find-links", "https://w/"]
            + ["--index-strategy", "unsafe-best-match"],
        ),
    ],
)
def test_pips_effective_settings_become_uvs_flags(settings, flags):
    assert pip_indexes.uv_flags(settings) == flags


def test_a_mirror_in_pips_config_file_reaches_uv(tmp_path):
    """`pip config set global.index-url <local index>` (a config file, no PIP_INDEX_URL):
    the flags name it, and uv installs from it a package only it has."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv is None:
        pytest.skip("uv is not installed beside this Python (make setup installs it)")
    url = _local_index(tmp_path / "index")
    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\nindex-url = {url}\n")
    env = _pip_env(config)
    line = subprocess.run(
        [sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert line[line.index("--default-index") + 1] == url
    target = tmp_path / "target"
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", sys.executable, "--target", str(target)]
        + line
        + [PACKAGE],
        env=env,
        check=True,
        timeout=120,
    )
    assert (target / f"{PACKAGE.replace('-', '_')}.py").is_file()
