"""``tfcourse lab``: open the course's ``notebooks/`` folder in JupyterLab.

Starts ``jupyter lab`` on a free localhost port (the first from 8888) with a fresh token,
prints the URL of the first notebook and opens it there. Extra arguments after ``--`` go to
``jupyter lab`` unchanged, e.g. ``tfcourse lab -- --port 8889 --no-browser``. As root
(containers, cloud VMs) it adds ``--allow-root``, without which Jupyter refuses to start.

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

from ..language import say

FOLDER = "notebooks"
FIRST_PORT = 8888

# What keeps JupyterLab's announcements quiet (see the module docstring; JupyterLab 4).
ANNOUNCEMENTS_PLUGIN = "@jupyterlab/apputils-extension:announcements"
NOTIFICATION_SETTINGS = "@jupyterlab/apputils-extension:notification"
QUIET_OPTIONS = [
    "--LabApp.news_url=None",  # the server fetches no news feed
    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",  # nor asks PyPI
]
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
        help=f"folder to open (default: the course's {FOLDER}/ next to the "
        f"package, else ./{FOLDER}/)",
    )
    parser.add_argument(
        "jupyter_args",
        nargs="*",
        metavar="-- JUPYTER_ARGS",
        help="passed to `jupyter lab` (put them after --)",
    )


def find_notebooks(explicit: str | None = None) -> Path | None:
    """The folder to open: ``explicit``, else the checkout's ``notebooks/``, else ./notebooks/."""
    if explicit is not None:
        candidates = [Path(explicit)]
    else:
        repository = Path(__file__).resolve().parents[2]  # tfcourse/course/ -> the checkout
        candidates = [repository / FOLDER, Path.cwd() / FOLDER]
    return next((c.resolve() for c in candidates if c.is_dir()), None)


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
    folder = find_notebooks(args.dir)
    if folder is None:
        where = args.dir or say(
            f"{FOLDER}/ next to the tfcourse package or in the current directory",
            f"tfcourse 软件包旁边或当前目录下的 {FOLDER}/",
        )
        print(
            say(
                f"tfcourse lab: no notebook folder found (looked for {where}).\n"
                f"Run this from the course folder (the one with solutions/ and notebooks/), or "
                f"pass --dir FOLDER. If notebooks/ is missing but solutions/ exists, create it "
                f"with `tfcourse build-notebooks`. Meanwhile, `tfcourse demo` runs without "
                f"notebooks.",
                f"tfcourse lab：没有找到 notebook 文件夹（查找的是 {where}）。\n"
                f"请在课程文件夹（包含 solutions/ 和 notebooks/ 的那个）中运行，或用 --dir FOLDER "
                f"指定文件夹。如果缺少 notebooks/ 但有 solutions/，可以用 "
                f"`tfcourse build-notebooks` 生成它。在此之前，`tfcourse demo` 不需要 notebook "
                f"也能运行。",
            ),
            file=sys.stderr,
        )
        return 1
    if importlib.util.find_spec("jupyterlab") is None:
        print(
            say(
                "tfcourse lab: JupyterLab is not installed in this environment; install it with "
                "`pip install -e '.[lab]'` (or run `make lab`).",
                "tfcourse lab：当前环境中没有安装 JupyterLab；请用 `pip install -e '.[lab]'` "
                "安装（或运行 `make lab`）。",
            ),
            file=sys.stderr,
        )
        return 1
    extra = list(args.jupyter_args)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    # The URL printed below must be the one that serves: choose the port and token here
    # (the user's own --port / token win) and stop Jupyter moving to another port.
    ours = ["--ServerApp.port_retries=0", *QUIET_OPTIONS]
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
            f"tfcourse lab: opening {folder} in JupyterLab (Ctrl+C stops the server)\n"
            f"tfcourse lab: open {link}",
            f"tfcourse lab：正在用 JupyterLab 打开 {folder}（按 Ctrl+C 停止服务器）\n"
            f"tfcourse lab：请打开 {link}",
        ),
        flush=True,
    )
    # The quiet labconfig lives as long as this session, then goes.
    with tempfile.TemporaryDirectory(prefix="tfcourse-lab-") as config:
        return serve(command, quiet_environment(write_quiet_config(Path(config))))
