"""``tfcourse doctor``'s checks of the JupyterLab side: what it runs and what it opens.

Whether this interpreter is the project's environment and which ``jupyter`` the shell
finds, whether the ``python3`` kernel that JupyterLab starts runs an interpreter that has
this ``tfcourse``, whether the widget frontend is installed, and whether the notebooks
match the installed package (version stamp, and ``notebooks/`` in sync with
``solutions/``). Each check returns ``Finding``s (``findings.py``); the command
(``__init__.py``) puts them in its report.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from ..language import say
from ..version import __version__
from .findings import Finding, setup_fix

WIDGET_EXTENSION = "@jupyter-widgets/jupyterlab-manager"


def check_environment(root: Path | None) -> list[Finding]:
    """Is this interpreter the project's ``.venv``? Which ``jupyter`` is on the PATH?"""
    findings = []
    prefix = Path(sys.prefix).resolve()
    venv = (root / ".venv").resolve() if root else None
    topic = say("environment", "环境")
    if venv is None:
        findings.append(
            Finding(
                "info",
                topic,
                say(
                    f"{sys.prefix} (tfcourse is not an editable install from a checkout)",
                    f"{sys.prefix}（tfcourse 不是从课程仓库以可编辑模式安装的）",
                ),
            )
        )
    elif prefix == venv:
        findings.append(
            Finding(
                "ok",
                topic,
                say(f"the project's environment ({sys.prefix})", f"项目自己的环境（{sys.prefix}）"),
            )
        )
    elif venv.is_dir():
        command = venv / "bin" / "tfcourse"
        findings.append(
            Finding(
                "warn",
                topic,
                say(
                    f"running from {sys.prefix}, not the project's {venv}",
                    f"当前运行的是 {sys.prefix}，而不是项目的 {venv}",
                ),
                say(
                    f"use the project's interpreter: `{command} doctor`, "
                    "or `make lab` (it always uses .venv)",
                    f"请使用项目的解释器：`{command} doctor`，"
                    "或运行 `make lab`（它总是使用 .venv）",
                ),
            )
        )
    else:
        findings.append(
            Finding(
                "info",
                topic,
                say(
                    f"{sys.prefix} (no .venv in {root}; fine for a conda environment made from "
                    "environment.yml)",
                    f"{sys.prefix}（{root} 中没有 .venv；"
                    "若这是用 environment.yml 创建的 conda 环境，则没有问题）",
                ),
            )
        )
    jupyter = shutil.which("jupyter-lab") or shutil.which("jupyter")
    if (
        jupyter
        and not Path(jupyter).resolve().is_relative_to(prefix)
        and not Path(jupyter).absolute().is_relative_to(Path(sys.prefix).absolute())
    ):
        findings.append(
            Finding(
                "warn",
                say("jupyter on PATH", "PATH 中的 jupyter"),
                say(
                    f"`jupyter lab` from the shell runs {jupyter}, which is not this environment",
                    f"在命令行里运行 `jupyter lab` 用的是 {jupyter}，它不属于当前环境",
                ),
                say(
                    "start the course with `make lab` or `tfcourse lab`, or "
                    "activate the environment first (`. .venv/bin/activate`)",
                    "用 `make lab` 或 `tfcourse lab` 启动课程，或先激活环境"
                    "（`. .venv/bin/activate`）",
                ),
            )
        )
    return findings


def _kernel_spec():
    """The ``python3`` kernelspec a JupyterLab started from this interpreter would use.

    (Patched in tests.)
    """
    from jupyter_client.kernelspec import KernelSpecManager

    return KernelSpecManager().get_kernel_spec("python3")


def _probe_interpreter(executable: str) -> dict:
    """``sys.prefix`` of ``executable`` and where it finds ``tfcourse`` (without importing it)."""
    code = (
        "import sys, json, importlib.util as u; s = u.find_spec('tfcourse'); "
        "print(json.dumps({'prefix': sys.prefix, 'tfcourse': s.origin if s else None}))"
    )
    result = subprocess.run(
        [executable, "-c", code],
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=60,
        check=False,
    )
    if result.returncode:
        raise RuntimeError(
            result.stderr.strip().splitlines()[-1]
            if result.stderr.strip()
            else say(f"exit status {result.returncode}", f"退出状态 {result.returncode}")
        )
    return json.loads(result.stdout)


def check_kernel() -> list[Finding]:
    install = (
        "`python -m ipykernel install --user --name python3 --display-name 'Python 3 (ipykernel)'`"
    )
    fix = say(
        f"register this environment's kernel: {install} run with the project's interpreter "
        "(or remove the stale one: `jupyter kernelspec remove python3`)",
        f"用项目的解释器运行 {install}，注册当前环境的内核"
        "（或删除过时的内核：`jupyter kernelspec remove python3`）",
    )
    topic = say("kernel", "内核")
    try:
        spec = _kernel_spec()
    except ImportError:
        return [
            Finding(
                "FAIL",
                topic,
                say("jupyter_client is not installed", "未安装 jupyter_client"),
                setup_fix(),
            )
        ]
    except (KeyError, OSError, ValueError) as error:  # NoSuchKernel is a KeyError
        return [
            Finding(
                "FAIL",
                topic,
                say(
                    f"no `python3` kernelspec: {error}",
                    f"没有 `python3` 内核规格（kernelspec）：{error}",
                ),
                fix,
            )
        ]
    command = list(spec.argv)
    # jupyter_client runs a bare `python` as the server's own interpreter.
    bare = {
        "python",
        f"python{sys.version_info[0]}",
        f"python{sys.version_info[0]}.{sys.version_info[1]}",
    }
    executable = (
        sys.executable if command and command[0] in bare else (command[0] if command else "")
    )
    where = f"kernelspec {spec.resource_dir}"
    try:
        probe = _probe_interpreter(executable)
    except (OSError, RuntimeError, subprocess.TimeoutExpired, ValueError) as error:
        return [
            Finding(
                "FAIL",
                topic,
                say(
                    f"{where} runs {executable!r}, which fails: {error}",
                    f"{where} 运行的是 {executable!r}，它启动失败：{error}",
                ),
                fix,
            )
        ]
    ours = str(Path(__file__).resolve().parents[1] / "__init__.py")  # tfcourse/__init__.py
    if probe["tfcourse"] is None:
        return [
            Finding(
                "FAIL",
                topic,
                say(
                    f"{where} runs {executable}, which cannot import tfcourse "
                    "(the kernel is from the wrong environment)",
                    f"{where} 运行的是 {executable}，它无法导入 tfcourse（内核来自错误的环境）",
                ),
                fix,
            )
        ]
    if Path(probe["prefix"]).resolve() != Path(sys.prefix).resolve() or Path(
        probe["tfcourse"]
    ).resolve() != Path(ours):
        return [
            Finding(
                "warn",
                topic,
                say(
                    f"{where} runs {executable} (environment {probe['prefix']}, tfcourse from "
                    f"{probe['tfcourse']}), not this environment",
                    f"{where} 运行的是 {executable}（环境 {probe['prefix']}，tfcourse 来自 "
                    f"{probe['tfcourse']}），不是当前环境",
                ),
                fix,
            )
        ]
    return [
        Finding(
            "ok",
            topic,
            say(
                f"`python3` runs this interpreter ({where})",
                f"`python3` 运行的就是当前解释器（{where}）",
            ),
        )
    ]


def _labextension_dirs() -> list[Path]:
    """Folders JupyterLab searches for prebuilt extensions (patched in tests)."""
    from jupyter_core.paths import jupyter_path

    return [Path(p) for p in jupyter_path("labextensions")]


def check_widget_frontend() -> list[Finding]:
    try:
        folders = _labextension_dirs()
    except ImportError:
        folders = []
    for folder in folders:
        package = folder / WIDGET_EXTENSION / "package.json"
        if package.is_file():
            version = json.loads(package.read_text(encoding="utf-8")).get("version", "?")
            return [
                Finding(
                    "ok",
                    say("widget frontend", "控件前端"),
                    say(
                        f"{WIDGET_EXTENSION} {version} ({folder})",
                        f"{WIDGET_EXTENSION} {version}（{folder}）",
                    ),
                )
            ]
    return [
        Finding(
            "FAIL",
            say("widget frontend", "控件前端"),
            say(
                f"{WIDGET_EXTENSION} is not installed: explorers show a static picture, "
                "or 'Error displaying widget', instead of controls",
                f"未安装 {WIDGET_EXTENSION}：交互探索组件只会显示一张静态图片或 "
                "'Error displaying widget'，而不是控件",
            ),
            say(
                "`pip install 'jupyterlab_widgets>=3,<4'` in the environment that runs "
                "JupyterLab, then restart JupyterLab and reload the page",
                "在运行 JupyterLab 的环境中执行 `pip install 'jupyterlab_widgets>=3,<4'`，"
                "然后重启 JupyterLab 并刷新页面",
            ),
        )
    ]


def notebook_versions(folder: Path) -> dict[str, str | None]:
    """``{notebook name: metadata.tfcourse.version}`` for the notebooks in ``folder``."""
    versions: dict[str, str | None] = {}
    for path in sorted(folder.glob("*.ipynb")):
        try:
            meta = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
        except (OSError, ValueError):
            versions[path.name] = None
            continue
        versions[path.name] = (meta.get("tfcourse") or {}).get("version")
    return versions


def check_notebooks(root: Path | None) -> list[Finding]:
    if root is None:
        return [
            Finding(
                "info",
                say("notebooks", "notebook"),
                say(
                    "no course checkout found; pass --root FOLDER to check one",
                    "没有找到课程仓库；用 --root FOLDER 指定要检查的文件夹",
                ),
            )
        ]
    findings = []
    for name in ("notebooks", "solutions"):
        folder = root / name
        if not folder.is_dir():
            continue
        versions = notebook_versions(folder)
        stale = {n: v for n, v in versions.items() if v != __version__}
        if not versions:
            continue
        topic = say(f"{name}/ version", f"{name}/ 版本")
        if stale:
            first = sorted(stale.items())[:5]
            findings.append(
                Finding(
                    "FAIL",
                    topic,
                    say(
                        f"{len(stale)} of {len(versions)} written for another tfcourse than "
                        f"the installed {__version__}: "
                        + ", ".join(f"{n} ({v or 'no version'})" for n, v in first),
                        f"{len(versions)} 个中有 {len(stale)} 个是为另一版本的 tfcourse 编写的"
                        f"（已安装的是 {__version__}）："
                        + "，".join(f"{n}（{v or '无版本号'}）" for n, v in first),
                    ),
                    say(
                        "update both together: `git pull` in the course folder, then `make setup` "
                        "(reinstalls the package)",
                        "两者一起更新：在课程文件夹中运行 `git pull`，然后运行 `make setup`"
                        "（会重新安装软件包）",
                    ),
                )
            )
        else:
            findings.append(
                Finding(
                    "ok",
                    topic,
                    say(
                        f"{len(versions)} notebooks written for tfcourse {__version__}",
                        f"{len(versions)} 个 notebook 均为 tfcourse {__version__} 编写",
                    ),
                )
            )
    findings += _check_sync(root)
    return findings or [
        Finding(
            "info",
            say("notebooks", "notebook"),
            say(
                f"no notebooks/ or solutions/ in {root}", f"{root} 中没有 notebooks/ 或 solutions/"
            ),
        )
    ]


def _check_sync(root: Path) -> list[Finding]:
    solutions, learner = root / "solutions", root / "notebooks"
    if not (solutions.is_dir() and learner.is_dir()):
        return []
    topic = say("notebooks/ sync", "notebooks/ 同步")
    try:
        from ..authoring.build import build
    except ImportError:
        return [
            Finding(
                "info",
                topic,
                say(
                    "the generator (tfcourse.authoring.build) is not installed",
                    "未安装 notebook 生成器（tfcourse.authoring.build）",
                ),
            )
        ]
    report = build(solutions, learner, check=True)
    if report.ok:
        return [
            Finding(
                "ok", topic, say("notebooks/ match solutions/", "notebooks/ 与 solutions/ 一致")
            )
        ]
    parts = []
    comma = say(", ", "、")
    if report.out_of_sync:
        parts.append(
            say("out of date: ", "已过时：") + comma.join(p.name for p in report.out_of_sync[:5])
        )
    if report.orphans:
        parts.append(
            say("no solution for: ", "没有对应的参考答案：")
            + comma.join(p.name for p in report.orphans[:5])
        )
    if report.problems:
        parts.append(
            say(
                f"{len(report.problems)} solution problem(s), first: {report.problems[0]}",
                f"参考答案有 {len(report.problems)} 个问题，第一个：{report.problems[0]}",
            )
        )
    return [
        Finding(
            "warn",
            topic,
            say("; ", "；").join(parts),
            say(
                "maintainers: `tfcourse build-notebooks`; learners: `git pull` (keep your "
                "own work in a copy of the notebook)",
                "维护者：运行 `tfcourse build-notebooks`；学员：运行 `git pull`"
                "（先把自己的作业另存为 notebook 的副本）",
            ),
        )
    ]
