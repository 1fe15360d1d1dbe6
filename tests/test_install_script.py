"""`python scripts/install.py`, the setup without make, where the package index does not answer:
it gives up within a minute and its last line says, in the reader's language, what to do."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import venv

import pytest

from helpers import ROOT


@pytest.fixture
def silent_index():
    """A package index that accepts connections and never answers (a stalled mirror)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held = []

    def accept():
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/simple"
    server.close()
    for connection in held:
        connection.close()


@pytest.fixture(scope="module")
def environment(tmp_path_factory):
    """A fresh virtual environment, nothing installed (no wheels anywhere pip looks)."""
    folder = tmp_path_factory.mktemp("env")
    venv.EnvBuilder(with_pip=True).create(folder)
    return folder / "bin" / "python"


def install(python, index, language):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "LC_", "LANG"))}
    env.update(PIP_INDEX_URL=index, PIP_CONFIG_FILE=os.devnull, TFCOURSE_LANG=language)
    env.update(VIRTUAL_ENV=str(python.parents[1]))
    started = time.monotonic()
    result = subprocess.run(
        [str(python), str(ROOT / "scripts" / "install.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    return result, time.monotonic() - started


@pytest.mark.slow  # a fresh environment, then pip giving up: about a minute
def test_a_silent_mirror_ends_in_one_chinese_line_that_says_what_to_do(environment, silent_index):
    result, seconds = install(environment, silent_index, "zh")
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("install.py：安装 torch 失败，用的软件包索引是 " + silent_index), last
    assert "换一个镜像（pip config set --site global.index-url https://mirrors." in last
    assert seconds < 60, f"{seconds:.0f} s"  # 22 s here: a 5 s probe, then 10 s twice


def test_outside_a_virtual_environment_it_says_how_to_make_one():
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    result = subprocess.run(
        [sys.base_prefix + "/bin/python3", str(ROOT / "scripts" / "install.py")],
        capture_output=True,
        text=True,
        env={**env, "TFCOURSE_LANG": "zh"},
    )
    assert result.returncode == 2 and "python3 -m venv tfcourse-env" in result.stderr


def test_the_last_line_names_the_step_the_index_and_another_mirror(monkeypatch):
    sys.path.insert(0, str(ROOT / "scripts"))
    import install

    monkeypatch.setenv("TFCOURSE_LANG", "en")
    line = install.what_to_do(("installing the course", "安装课程"), install.OTHER_MIRRORS[0])
    assert line.startswith("install.py: installing the course failed with the package index")
    assert f"global.index-url {install.OTHER_MIRRORS[1]})" in line  # not the one that failed
    monkeypatch.setenv("TFCOURSE_LANG", "zh")
    line = install.what_to_do(("installing the course", "安装课程"), "PyPI")
    assert line.startswith("install.py：安装课程失败，用的软件包索引是 PyPI。")
