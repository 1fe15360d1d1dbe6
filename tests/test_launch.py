"""`tfcourse lab`: the jupyter lab command it runs, the URL it prints, and running as root.

The fast tests record the command instead of starting Jupyter; the slow one starts it for real.
"""

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from tfcourse import cli
from tfcourse.course import installed, launch


class Served(list):
    """The commands `tfcourse lab` would run, and per run the environment and the JSON files
    in the first JUPYTER_CONFIG_PATH folder (read while it exists: it goes when the run ends)."""

    def __init__(self):
        super().__init__()
        self.environments, self.configs = [], []

    def __call__(self, command, env=None):
        self.append(command)
        self.environments.append(env)
        first = Path((env or {}).get("JUPYTER_CONFIG_PATH", "").split(os.pathsep)[0] or "missing")
        self.configs.append(
            {
                p.relative_to(first).as_posix(): json.loads(p.read_text())
                for p in first.rglob("*.json")
            }
            if first.is_dir()
            else None
        )
        return 0


@pytest.fixture
def served(monkeypatch):
    """The commands `tfcourse lab` would run; nothing is started. Not root unless a test says so."""
    commands = Served()
    monkeypatch.setattr(launch, "serve", commands)
    monkeypatch.setattr(launch.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(launch.os, "geteuid", lambda: 1000, raising=False)
    return commands


def notebooks(folder: Path, *names: str) -> Path:
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).write_text("{}")
    return folder


def lab(capsys, folder, *extra) -> tuple[int, str]:
    status = cli.main(["lab", "--dir", str(folder), *(["--", *extra] if extra else [])])
    return status, capsys.readouterr().out


def printed_url(out: str) -> str:
    return re.search(r"^tfcourse lab: open (http://\S+)$", out, re.MULTILINE)[1]


def test_lab_without_notebooks_says_what_to_do(capsys, tmp_path, served):
    status = cli.main(["lab", "--dir", str(tmp_path / "missing")])
    err = capsys.readouterr().err
    assert status == 1 and served == []
    assert f"{tmp_path / 'missing'} is not a folder" in err and "--dir" in err


def test_lab_prints_the_url_of_the_first_notebook_with_the_port_and_token_it_passes(
    capsys, tmp_path, served
):
    folder = notebooks(
        tmp_path / "nb",
        "10_later.ipynb",
        "9_first.ipynb",
        "notes.ipynb",
        ".hidden.ipynb",
        "readme.md",
    )
    status, out = lab(capsys, folder)
    assert status == 0
    (command,) = served
    assert command[:4] == [sys.executable, "-m", "jupyterlab", str(folder.resolve())]
    url = printed_url(out)
    match = re.fullmatch(r"http://localhost:(\d+)/lab/tree/9_first\.ipynb\?token=(\w{32,})", url)
    assert match, url
    port, token = match.groups()
    assert int(port) >= launch.FIRST_PORT
    assert f"--ServerApp.port={port}" in command
    assert f"--IdentityProvider.token={token}" in command
    assert f"--ServerApp.file_to_run={folder.resolve() / '9_first.ipynb'}" in command
    assert "--ServerApp.port_retries=0" in command  # else the printed URL could be wrong
    assert "--allow-root" not in command and "running as root" not in out
    # a fresh token every time
    lab(capsys, folder)
    assert served[1] != command


def test_lab_on_a_folder_without_notebooks_opens_the_lab(capsys, tmp_path, served):
    status, out = lab(capsys, tmp_path)
    assert status == 0
    assert re.fullmatch(r"http://localhost:\d+/lab\?token=\w+", printed_url(out))
    assert not any("file_to_run" in arg for arg in served[0])


def test_lab_as_root_allows_root_and_says_why(capsys, tmp_path, served, monkeypatch):
    monkeypatch.setattr(launch.os, "geteuid", lambda: 0, raising=False)
    status, out = lab(capsys, notebooks(tmp_path / "nb", "00_setup.ipynb"), "--no-browser")
    assert status == 0
    (command,) = served
    assert command.count("--allow-root") == 1
    assert command[-1] == "--no-browser"  # the user's arguments come last
    line = next(line for line in out.splitlines() if "running as root" in line)
    assert "--allow-root" in line and "containers" in line
    assert out.index(line) < out.index("tfcourse lab: open http://")


def test_lab_as_root_keeps_the_users_own_allow_root(capsys, tmp_path, served, monkeypatch):
    monkeypatch.setattr(launch.os, "geteuid", lambda: 0, raising=False)
    status, out = lab(capsys, tmp_path, "--allow-root")
    assert status == 0 and served[0].count("--allow-root") == 1 and "running as root" not in out


@pytest.mark.parametrize("given", [["--port", "8899"], ["--port=8899"], ["--ServerApp.port=8899"]])
def test_lab_respects_the_users_port_and_extra_args(capsys, tmp_path, served, given):
    folder = notebooks(tmp_path / "nb", "00_setup.ipynb")
    status, out = lab(capsys, folder, *given, "--no-browser")
    assert status == 0
    (command,) = served
    assert command[-len(given) - 1 :] == [*given, "--no-browser"]
    assert not any(arg.startswith("--ServerApp.port=") for arg in command[: -len(given) - 1])
    assert printed_url(out).startswith("http://localhost:8899/lab/tree/00_setup.ipynb?token=")


def test_lab_respects_the_users_token(capsys, tmp_path, served):
    status, out = lab(capsys, tmp_path, "--IdentityProvider.token=abc")
    assert status == 0 and printed_url(out).endswith("/lab?token=abc")
    assert [arg for arg in served[0] if "token" in arg] == ["--IdentityProvider.token=abc"]


ANNOUNCEMENTS = "@jupyterlab/apputils-extension:announcements"
NOTIFICATION = "@jupyterlab/apputils-extension:notification"


def test_lab_turns_off_the_news_prompt_and_update_check_for_its_session_only(
    capsys, tmp_path, served, monkeypatch
):
    """JupyterLab 4's announcements plugin toasts "Would you like to get notified about official
    Jupyter news?" while the fetchNews setting is "none" (its default), whatever the server's
    news_url; the update check toasts when PyPI has a newer JupyterLab. The session disables
    that plugin, defaults fetchNews/checkForUpdates off, and the server fetches nothing --
    without writing to the user's Jupyter config dir, and keeping their JUPYTER_CONFIG_PATH."""
    user_config = tmp_path / "user-config"
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(user_config))
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(tmp_path / "theirs"))
    status, _ = lab(capsys, notebooks(tmp_path / "nb", "00_setup.ipynb"))
    assert status == 0
    (command,), (env,), (config,) = served, served.environments, served.configs
    assert "--LabApp.news_url=None" in command
    assert "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate" in command
    ours, *rest = env["JUPYTER_CONFIG_PATH"].split(os.pathsep)
    assert rest == [str(tmp_path / "theirs")]  # first: ours wins, theirs still read
    assert config == {
        "labconfig/page_config.json": {"disabledExtensions": {ANNOUNCEMENTS: True}},
        "labconfig/default_setting_overrides.json": {
            NOTIFICATION: {"fetchNews": "false", "checkForUpdates": False}
        },
    }
    assert env["JUPYTER_CONFIG_DIR"] == str(user_config) and not user_config.exists()
    assert not Path(ours).exists()  # the session's labconfig is cleaned up


def test_the_quiet_options_mean_what_the_installed_jupyterlab_reads(tmp_path, monkeypatch):
    """The installed JupyterLab parses the options and reads the labconfig as intended."""
    pytest.importorskip("jupyterlab")
    from jupyterlab.handlers.announcements import NeverCheckForUpdate
    from jupyterlab.labapp import LabApp
    from jupyterlab_server.config import get_page_config
    from jupyterlab_server.settings_utils import _get_overrides

    app = LabApp()
    app.parse_command_line(launch.QUIET_OPTIONS)
    assert app.news_url is None and app.check_for_updates_class is NeverCheckForUpdate
    env = launch.quiet_environment(launch.write_quiet_config(tmp_path / "session"), {})
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", env["JUPYTER_CONFIG_PATH"])
    assert ANNOUNCEMENTS in get_page_config([], None)["disabledExtensions"]
    overrides, error = _get_overrides(str(tmp_path / "no-app-settings"))
    assert not error
    assert overrides[NOTIFICATION] == {"fetchNews": "false", "checkForUpdates": False}


def test_free_port_skips_a_port_in_use():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        assert launch.free_port(taken) != taken


def test_serve_waits_for_jupyter_after_ctrl_c(monkeypatch):
    """Ctrl+C reaches Jupyter as well; the launcher waits for it to shut down, not kills it."""

    class Jupyter:
        waits = 0

        def __init__(self, command):
            self.command = command

        def wait(self):
            Jupyter.waits += 1
            if Jupyter.waits == 1:
                raise KeyboardInterrupt
            return 0

        def kill(self):
            pytest.fail("killed Jupyter")

    monkeypatch.setattr(launch.subprocess, "Popen", lambda command, env=None: Jupyter(command))
    assert launch.serve(["jupyter"]) == 0 and Jupyter.waits == 2


def test_lab_opens_the_learners_copy_in_a_checkout_too(tmp_path, monkeypatch, capsys):
    """Never the repository's own notebooks/: a learner's edits there would collide with
    `git pull`. The copy is made on first use (one line says where), and a notebook the
    course gains later is added to it without touching the learner's files."""
    assert installed.course_root() == installed.CHECKOUT  # this is a checkout
    monkeypatch.setenv(installed.DEFAULT_FOLDER_VARIABLE, str(tmp_path / "course"))
    course = installed.CHECKOUT / "notebooks"
    shipped = sorted(p.name for p in course.glob("*.ipynb"))
    mine = (tmp_path / "course").resolve()
    assert launch.find_notebooks() == mine
    (line,) = capsys.readouterr().out.splitlines()
    assert line == (
        f"tfcourse lab: first run: copied the course's {len(shipped)} notebooks into {mine}, "
        "your own copy (your work stays there; updating the course never overwrites it)"
    )
    assert sorted(p.name for p in mine.glob("*.ipynb")) == shipped
    assert (mine / shipped[0]).read_bytes() == (course / shipped[0]).read_bytes()
    assert launch.find_notebooks() == mine and capsys.readouterr().out == ""  # made once

    # The learner worked on one notebook; `git pull` brought two the copy lacks.
    (mine / shipped[0]).write_text('{"my": "work"}', encoding="utf-8")
    for name in shipped[-2:]:
        (mine / name).unlink()
    assert launch.find_notebooks() == mine
    assert capsys.readouterr().out.splitlines() == [
        f"tfcourse lab: the course has new notebooks; added to your copy in {mine}: "
        + ", ".join(shipped[-2:])
    ]
    assert (mine / shipped[0]).read_text(encoding="utf-8") == '{"my": "work"}'
    assert (mine / shipped[-1]).read_bytes() == (course / shipped[-1]).read_bytes()

    # The Chinese edition: its own copy, said in Chinese.
    monkeypatch.setenv("TFCOURSE_LANG", "zh")
    chinese = (tmp_path / "course-zh").resolve()
    assert launch.find_notebooks(language="zh") == chinese
    (line,) = capsys.readouterr().out.splitlines()
    count = len(list((course / "zh").glob("*.ipynb")))
    assert line.startswith(
        f"tfcourse lab：第一次运行，已把课程的 {count} 个 notebook 复制到 {chinese}"
    )
    assert 'language=\\"zh\\"' in (chinese / "01_attention.ipynb").read_text(encoding="utf-8")
    (chinese / "01_attention.ipynb").unlink()
    launch.find_notebooks(language="zh")
    assert capsys.readouterr().out.splitlines() == [
        f"tfcourse lab：课程新增了 notebook，已复制到你的副本 {chinese}：01_attention.ipynb"
    ]


def test_lab_with_dir_opens_that_folder_as_it_is(tmp_path, monkeypatch, capsys, served):
    monkeypatch.setenv(installed.DEFAULT_FOLDER_VARIABLE, str(tmp_path / "course"))
    folder = notebooks(tmp_path / "mine", "03_norms.ipynb")
    status, out = lab(capsys, folder)
    assert status == 0 and served[0][3] == str(folder.resolve())
    assert [p.name for p in folder.iterdir()] == ["03_norms.ipynb"]  # nothing copied in
    assert not (tmp_path / "course").exists() and "copied" not in out
    assert launch.find_notebooks(str(tmp_path)) == tmp_path.resolve()
    assert launch.find_notebooks(str(tmp_path / "missing")) is None


def test_lab_without_dir_serves_the_copy_and_prints_the_url_last(
    tmp_path, monkeypatch, capsys, served
):
    monkeypatch.setenv(installed.DEFAULT_FOLDER_VARIABLE, str(tmp_path / "course"))
    assert cli.main(["lab", "--language", "en"]) == 0
    out = capsys.readouterr().out.splitlines()
    mine = (tmp_path / "course").resolve()
    assert served[0][3] == str(mine)
    assert out[0].startswith("tfcourse lab: first run: copied") and str(mine) in out[0]
    assert out[-1] == f"tfcourse lab: open {printed_url(chr(10).join(out))}"
    assert "/lab/tree/00_setup_and_shapes.ipynb?token=" in out[-1]


def test_lab_keeps_the_servers_log_to_warnings_and_errors(capsys, tmp_path, served):
    """At INFO, some 20 lines of Jupyter's startup log follow the URL and scroll it away."""
    status, _ = lab(capsys, tmp_path)
    assert status == 0
    assert {"--ServerApp.log_level=WARN", "--LabApp.log_level=WARN"} <= set(served[0])
    status, _ = lab(capsys, tmp_path, "--ServerApp.log_level=DEBUG")
    assert served[1][-1] == "--ServerApp.log_level=DEBUG"  # the user's own, last, wins


def test_the_log_options_mean_what_the_installed_jupyter_reads():
    pytest.importorskip("jupyterlab")
    from jupyter_server.serverapp import ServerApp
    from jupyterlab.labapp import LabApp

    for app in (ServerApp(), LabApp()):
        app.parse_command_line(launch.QUIET_LOG)
        assert app.log_level == logging.WARN, type(app).__name__


def test_the_installed_course_without_a_checkout_fills_the_copy_too(tmp_path, monkeypatch, capsys):
    # An installed wheel: the course inside the package, the learner's copy outside it.
    monkeypatch.setattr(installed, "PACKAGED", installed.CHECKOUT)
    monkeypatch.setattr(installed, "CHECKOUT", tmp_path / "no checkout")
    monkeypatch.setenv(installed.DEFAULT_FOLDER_VARIABLE, str(tmp_path / "course"))
    assert launch.find_notebooks(language="zh") == (tmp_path / "course-zh").resolve()
    shipped = len(list((installed.PACKAGED / "notebooks" / "zh").glob("*.ipynb")))
    assert f"copied the course's {shipped} notebooks" in capsys.readouterr().out
    assert launch.find_notebooks(language="zh") == (tmp_path / "course-zh").resolve()
    assert capsys.readouterr().out == ""  # made once
    # Without notebooks installed: the copy opens as it is; no copy at all is an error.
    monkeypatch.setattr(installed, "PACKAGED", tmp_path / "nothing")
    assert launch.find_notebooks(language="zh") == (tmp_path / "course-zh").resolve()
    with pytest.raises(FileNotFoundError, match="no notebooks installed"):
        launch.find_notebooks(language="en")


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="stops the server with a process-group SIGINT")
def test_tfcourse_lab_serves_the_first_notebook_and_stops_cleanly(tmp_path):
    """A real server, as this user (root in containers): the printed URL answers 200 and is
    the last line in view (the server's startup log is quiet), and Ctrl+C twice in a
    terminal (SIGINT to the process group; Jupyter's "twice to skip confirmation") shuts
    Jupyter down cleanly instead of the launcher killing it."""
    folder = tmp_path / "nb"
    folder.mkdir()
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    nbformat.write(notebook, folder / "00_tiny.ipynb")
    runtime, out_file, err_file = tmp_path / "runtime", tmp_path / "out.txt", tmp_path / "err.txt"
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
    }
    import pty  # POSIX only

    # A terminal as stdin: Jupyter handles Ctrl+C the interactive way only on a tty.
    terminal, terminal_end = pty.openpty()
    with open(out_file, "w") as out, open(err_file, "w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "tfcourse", "lab", "--dir", str(folder), "--", "--no-browser"],
            stdin=terminal_end,
            stdout=out,
            stderr=err,
            env=env,
            start_new_session=True,
        )
    os.close(terminal_end)
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy for localhost
    deadline = time.monotonic() + 60
    try:
        status = None
        while status != 200:
            assert process.poll() is None, f"tfcourse lab exited:\n{err_file.read_text()[-3000:]}"
            assert time.monotonic() < deadline, (
                f"no answer in 60 s:\n{err_file.read_text()[-3000:]}"
            )
            time.sleep(0.5)
            match = re.search(r"^tfcourse lab: open (\S+)$", out_file.read_text(), re.MULTILINE)
            if match:
                try:
                    with direct.open(match[1], timeout=5) as response:
                        status = response.status
                except OSError:
                    pass
        assert "/lab/tree/00_tiny.ipynb?token=" in match[1]
        if os.geteuid() == 0:
            assert "passing --allow-root" in out_file.read_text()
        # the page Jupyter opens in a browser (--no-browser: written, not opened) is the notebook
        (opener,) = runtime.glob("jpserver-file-to-run-*-open.html")
        assert "lab/tree/00_tiny.ipynb" in opener.read_text()
        assert list(runtime.glob("jpserver-*.json"))
        # Up and answering: the startup log is over. No INFO line of it follows the URL.
        time.sleep(2)
        assert out_file.read_text().splitlines()[-1] == f"tfcourse lab: open {match[1]}"
        logged = [line for line in err_file.read_text().splitlines() if line.strip()]
        assert not [line for line in logged if line.startswith("[I ")], logged

        os.killpg(process.pid, signal.SIGINT)
        time.sleep(1)
        os.killpg(process.pid, signal.SIGINT)
        assert process.wait(timeout=30) == 0
        # a clean shutdown removes the server's runtime files; a killed server leaves them
        assert not list(runtime.glob("jpserver-*")), err_file.read_text()[-3000:]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        os.close(terminal)
