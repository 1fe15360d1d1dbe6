"""``tfcourse lab``: open the course's notebooks in JupyterLab.

Which folder: ``--dir FOLDER``, opened as it is; else the learner's own copy (``~/tfcourse``,
``~/tfcourse-zh`` for the Chinese edition, or ``$TFCOURSE_NOTEBOOKS``), never the course's
own files -- in a checkout too, where ``notebooks/`` belongs to the repository and a learner's
edits there would collide with ``git pull``. Each start copies into that copy the course's
notebooks it lacks (all of them on first use, a new one after an update) and says so in one
line; a file already there is never written (``notebooks_command.add_missing``).

Starts ``jupyter lab`` on a free localhost port (the first from 8888) with a fresh token,
prints the URL of the first notebook and opens it there. Extra arguments after ``--`` go to
``jupyter lab`` unchanged, e.g. ``tfcourse lab -- --port 8889 --no-browser``. As root
(containers, cloud VMs) it adds ``--allow-root``, without which Jupyter refuses to start.

The URL is the last line a learner sees: the server logs warnings and errors only
(``QUIET_LOG``). At its default level, JupyterLab 4 on jupyter_server 2 prints about twenty
lines of startup log after it (extensions linked and loaded, "Jupyter Server ... is running
at", the language servers it skipped), which scroll it out of view. ``LabApp`` logs on a
logger of its own, so it needs its own level.

The sessions it starts are quiet: no "Would you like to get notified about official Jupyter
news?" toast over the learner's outputs, and no "a newer JupyterLab is available" one. The
toast comes from the front-end plugin ``@jupyterlab/apputils-extension:announcements``, which
asks whenever the ``fetchNews`` setting is still ``"none"`` (the default) -- the server option
``--LabApp.news_url=None`` alone does not stop it. So for this session only (nothing is written
to the user's own Jupyter settings) the launcher puts a folder first on ``JUPYTER_CONFIG_PATH``
whose ``labconfig/`` disables that plugin and defaults ``fetchNews`` to "false" and
``checkForUpdates`` to false, and tells the server not to fetch news or check PyPI for updates.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

from ..language import current, say
from . import installed
from .notebooks_command import add_missing, destination

FIRST_PORT = 8888

# What keeps JupyterLab's announcements quiet (see the module docstring; JupyterLab 4).
ANNOUNCEMENTS_PLUGIN = "@jupyterlab/apputils-extension:announcements"
NOTIFICATION_SETTINGS = "@jupyterlab/apputils-extension:notification"
QUIET_OPTIONS = [
    "--LabApp.news_url=None",  # the server fetches no news feed
    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",  # nor asks PyPI
]
# The server's own log: warnings and errors only, so the URL stays the last line in view.
QUIET_LOG = ["--ServerApp.log_level=WARN", "--LabApp.log_level=WARN"]
QUIET_LABCONFIG = {
    # read by jupyterlab_server from <each JUPYTER_CONFIG_PATH entry>/labconfig/
    "page_config.json": {"disabledExtensions": {ANNOUNCEMENTS_PLUGIN: True}},
    "default_setting_overrides.json": {
        NOTIFICATION_SETTINGS: {"fetchNews": "false", "checkForUpdates": False}
    },
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir",
        default=None,
        help=say(
            "folder to open, as it is (default: your own copy of the notebooks, ~/tfcourse, "
            "~/tfcourse-zh for the Chinese edition, or $TFCOURSE_NOTEBOOKS: made on first "
            "use; later the course's new notebooks are added to it, and none of your files "
            "is overwritten)",
            "要打开的文件夹，按原样打开（默认：你自己的 notebook 副本，英文版在 ~/tfcourse，"
            "中文版在 ~/tfcourse-zh，也可以用 $TFCOURSE_NOTEBOOKS 指定：第一次运行时创建；"
            "以后课程新增的 notebook 会补充进去，你的文件一个也不会被覆盖）",
        ),
    )
    parser.add_argument(
        "--language",
        choices=installed.LANGUAGES,
        default=None,
        help=say(
            "the edition to open: which copy, made of which notebooks (default: "
            "TFCOURSE_LANG, else en)",
            "打开哪个版本：用哪一份副本、从哪个版本复制（默认：TFCOURSE_LANG，否则 en）",
        ),
    )
    parser.add_argument(
        "jupyter_args",
        nargs="*",
        metavar="-- JUPYTER_ARGS",
        help=say(
            "passed to `jupyter lab` (put them after --)",
            "原样传给 `jupyter lab` 的参数（写在 -- 之后）",
        ),
    )


def find_notebooks(explicit: str | None = None, language: str = "en") -> Path | None:
    """The folder to open: ``explicit`` as it is (None if it is not a folder); else the
    learner's own copy of ``language``'s edition, into which the course's notebooks it lacks
    are copied first (all of them on first use), said in one line. The same in a checkout
    as in an installed wheel: never the course's own ``notebooks/``. Raises ``OSError`` when
    that copy cannot be made."""
    if explicit is not None:
        folder = Path(explicit).expanduser()
        return folder.resolve() if folder.is_dir() else None
    folder = destination(None, language)
    first = not folder.is_dir() or not any(folder.glob("*.ipynb"))
    try:
        added = add_missing(folder, language)
    except FileNotFoundError:  # this installation has no notebooks: open what is there
        if first:
            raise
        added = []
    folder = folder.resolve()
    if added:
        print(copied(folder, added, first), flush=True)
    return folder


def copied(folder: Path, added: list[str], first: bool) -> str:
    """The one line that says what ``find_notebooks`` copied into the learner's copy."""
    if first:
        return say(
            f"tfcourse lab: first run: copied the course's {len(added)} notebooks into "
            f"{folder}, your own copy (your work stays there; updating the course never "
            "overwrites it)",
            f"tfcourse lab：第一次运行，已把课程的 {len(added)} 个 notebook 复制到 {folder}，"
            "这是你自己的副本（你的练习都保存在这里，更新课程时不会覆盖它）",
        )
    return say(
        f"tfcourse lab: the course has new notebooks; added to your copy in {folder}: "
        + ", ".join(added),
        f"tfcourse lab：课程新增了 notebook，已复制到你的副本 {folder}：" + "、".join(added),
    )


def first_notebook(folder: Path) -> str | None:
    """The lowest-numbered ``*.ipynb`` in ``folder`` (``00_setup_and_shapes.ipynb``), or None."""

    def number(name: str) -> tuple[float, str]:
        digits = re.match(r"\d+", name)
        return (int(digits[0]) if digits else float("inf"), name)

    names = [p.name for p in folder.glob("*.ipynb") if not p.name.startswith(".")]
    return min(names, key=number, default=None)


def option(args: list[str], *names: str) -> str | None:
    """The value of the last ``--name VALUE`` or ``--name=VALUE`` in ``args``, any of ``names``."""
    value = None
    for i, arg in enumerate(args):
        name, equals, given = arg.partition("=")
        if name in names:
            value = given if equals else next(iter(args[i + 1 : i + 2]), None)
    return value


def free_port(start: int = FIRST_PORT, tries: int = 50) -> int:
    """The first port from ``start`` that nothing on localhost holds (else one the OS picks)."""
    for port in [*range(start, start + tries), 0]:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return probe.getsockname()[1]
    raise OSError(say("no free localhost port", "本机（localhost）上没有空闲端口"))


def running_as_root() -> bool:
    """True for root on POSIX, where Jupyter refuses to start without ``--allow-root``."""
    return hasattr(os, "geteuid") and os.geteuid() == 0  # no geteuid on Windows


def write_quiet_config(folder: Path) -> Path:
    """Write the ``labconfig/`` that silences the announcements into ``folder``; return it."""
    labconfig = folder / "labconfig"
    labconfig.mkdir(parents=True, exist_ok=True)
    for name, data in QUIET_LABCONFIG.items():
        (labconfig / name).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return folder


def quiet_environment(config: Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: ours) with ``config`` first on ``JUPYTER_CONFIG_PATH``: first wins.

    The user's own config dir (``JUPYTER_CONFIG_DIR``, where JupyterLab writes settings)
    stays as it is, so nothing the user set is changed, and their choices there still apply
    except where this session's labconfig takes precedence.
    """
    env = dict(os.environ if environ is None else environ)
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
        [str(config), *filter(None, [env.get("JUPYTER_CONFIG_PATH")])]
    )
    return env


def serve(command: list[str], env: dict[str, str] | None = None) -> int:
    """Run Jupyter until it exits, and return its exit status.

    Ctrl+C in the terminal reaches Jupyter too, which stops its kernels and exits (or asks
    first); so keep waiting. ``subprocess.call`` would kill it 0.25 s later instead, leaving
    the kernels running.
    """
    process = subprocess.Popen(command, env=env)
    while True:
        try:
            return process.wait()
        except KeyboardInterrupt:
            pass


def run(args: argparse.Namespace) -> int:
    try:
        folder = find_notebooks(args.dir, args.language or current())
    except OSError as error:
        print(say(f"tfcourse lab: {error}", f"tfcourse lab：{error}"), file=sys.stderr)
        return 1
    if folder is None:
        print(
            say(
                f"tfcourse lab: {args.dir} is not a folder; pass --dir FOLDER with the "
                "notebooks, or leave --dir out to open your copy of the course",
                f"tfcourse lab：{args.dir} 不是文件夹；请用 --dir 指定存放 notebook 的文件夹，"
                "或者不加 --dir，打开你的课程副本",
            ),
            file=sys.stderr,
        )
        return 1
    if importlib.util.find_spec("jupyterlab") is None:
        print(
            say(
                "tfcourse lab: JupyterLab is not installed in this environment (tfcourse "
                "depends on it); reinstall with `pip install tfcourse` (or run `make setup`).",
                "tfcourse lab：当前环境中没有安装 JupyterLab（tfcourse 依赖它）；请用 "
                "`pip install tfcourse` 重新安装（或运行 `make setup`）。",
            ),
            file=sys.stderr,
        )
        return 1
    extra = list(args.jupyter_args)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    # The URL printed below must be the one that serves: choose the port and token here
    # (the user's own --port / token win) and stop Jupyter moving to another port.
    ours = ["--ServerApp.port_retries=0", *QUIET_OPTIONS, *QUIET_LOG]
    port = option(extra, "--port", "--ServerApp.port")
    if port is None:
        port = str(free_port())
        ours.append(f"--ServerApp.port={port}")
    token = option(extra, "--IdentityProvider.token", "--ServerApp.token")
    if token is None:
        token = secrets.token_hex(24)
        ours.append(f"--IdentityProvider.token={token}")
    notebook = first_notebook(folder)
    if notebook is not None:  # Jupyter opens it in the browser it starts
        ours.append(f"--ServerApp.file_to_run={folder / notebook}")
    if running_as_root() and not {"--allow-root", "--ServerApp.allow_root=True"} & set(extra):
        ours.append("--allow-root")
        print(
            say(
                "tfcourse lab: running as root, so passing --allow-root to Jupyter (usual in "
                "containers and cloud VMs; Jupyter refuses root without it)",
                "tfcourse lab：正以 root 身份运行，因此给 Jupyter 加上 --allow-root（在容器和"
                "云虚拟机中很常见；没有它 Jupyter 会拒绝以 root 启动）",
            ),
            flush=True,
        )
    command = [sys.executable, "-m", "jupyterlab", str(folder), *ours, *extra]
    url = f"http://localhost:{port}/lab" + (f"/tree/{quote(notebook)}" if notebook else "")
    link = url + (f"?token={token}" if token else "")
    print(
        say(
            f"tfcourse lab: opening {folder} in JupyterLab (Ctrl+C twice stops the server)\n"
            f"tfcourse lab: open {link}",
            f"tfcourse lab：正在用 JupyterLab 打开 {folder}（连按两次 Ctrl+C 停止服务器）\n"
            f"tfcourse lab：请打开 {link}",
        ),
        flush=True,
    )
    # The quiet labconfig lives as long as this session, then goes.
    with tempfile.TemporaryDirectory(prefix="tfcourse-lab-") as config:
        return serve(command, quiet_environment(write_quiet_config(Path(config))))
