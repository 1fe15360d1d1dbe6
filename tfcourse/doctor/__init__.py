"""``tfcourse doctor``: check the installation and say how to fix what is wrong.

Looks at what the course needs, in the order a learner meets it: Python and
PyTorch (and which accelerator torch sees), the Jupyter pieces and their
versions, whether this interpreter is the project's environment, whether the
``python3`` kernel that JupyterLab starts runs an interpreter that has this
``tfcourse``, whether the widget frontend is installed, and whether the
notebooks match the installed package (version stamp, and ``notebooks/`` in
sync with ``solutions/``), whether figures can draw Chinese, whether
``tfcourse grade`` can seal learners' code (bubblewrap), and whether its isolated workers
can import the course's packages (not from the user site-packages).

Each line is ``ok``, ``info``, ``warn`` or ``FAIL``; every warn/FAIL names a
fix. The exit status is 1 when a required piece is missing (a FAIL), else 0.

This module holds the report, the command and the checks of this interpreter's
packages and of the system; ``jupyter`` holds those of the JupyterLab side
(environment, kernel, widget frontend, notebooks); ``findings`` what both report.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from importlib import metadata
from pathlib import Path

from ..language import pad, say, text_width
from ..version import __version__
from .findings import Finding, setup_fix

MIN_PYTHON = (3, 10)
# distribution name -> (required?, what it is for: English, Chinese)
PACKAGES = {
    "jupyterlab": (True, ("the course runs in JupyterLab 4", "课程在 JupyterLab 4 中运行")),
    "ipykernel": (True, ("the notebooks' Python kernel", "notebook 的 Python 内核")),
    "ipywidgets": (True, ("the explorers (sliders, dropdowns)", "交互探索组件（滑块、下拉菜单）")),
    "jupyterlab_widgets": (
        True,
        ("JupyterLab's frontend for ipywidgets", "ipywidgets 在 JupyterLab 中的前端"),
    ),
    "matplotlib": (True, ("the plots", "绘图")),
    "nbformat": (True, ("reading and writing notebooks", "读写 notebook")),
    "nbclient": (True, ("`tfcourse execute` / grading", "`tfcourse execute` 与评分")),
    "transformers": (
        True,
        (
            "notebooks 07 and 10 compare with GPT-2 and LLaMA",
            "第 07 和第 10 个 notebook 要与 GPT-2 和 LLaMA 对比",
        ),
    ),
    "nbval": (
        False,
        (
            "only for the course's own tests (`make test`: nbval runs the notebooks)",
            "只有课程自己的测试需要（`make test`：由 nbval 运行 notebook）",
        ),
    ),
}
# How each status is shown (the status itself stays the English word).
STATUS = {
    "ok": ("ok", "正常"),
    "info": ("info", "信息"),
    "warn": ("warn", "警告"),
    "FAIL": ("FAIL", "失败"),
}


def package_version(name: str) -> str | None:
    """The installed version of a distribution, or None (patched in tests)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def project_root() -> Path | None:
    """The course checkout this ``tfcourse`` was installed from (editable install), if any."""
    root = Path(__file__).resolve().parents[2]  # tfcourse/doctor/__init__.py -> the checkout
    return root if (root / "pyproject.toml").is_file() else None


# ------------------------------------------------------------------------- checks


def check_python() -> list[Finding]:
    version = platform.python_version()
    if sys.version_info[:2] < MIN_PYTHON:
        needed = ".".join(map(str, MIN_PYTHON))
        return [
            Finding(
                "FAIL",
                "Python",
                say(
                    f"{version} at {sys.executable}; the course needs >= {needed}",
                    f"{sys.executable} 的版本是 {version}；本课程需要 >= {needed}",
                ),
                say(
                    "install a newer Python and re-run `make setup PYTHON=python3.11`",
                    "安装更新版本的 Python，然后重新运行 `make setup PYTHON=python3.11`",
                ),
            )
        ]
    return [Finding("ok", "Python", f"{version} ({sys.executable})")]


def check_torch() -> list[Finding]:
    version = package_version("torch")
    if version is None:
        return [Finding("FAIL", "torch", say("not installed", "未安装"), setup_fix())]
    try:
        import torch
    except (ImportError, OSError, RuntimeError, AttributeError) as error:  # a broken wheel
        return [
            Finding(
                "FAIL",
                "torch",
                say(
                    f"{version} is installed but does not import: {error}",
                    f"已安装 {version}，但无法导入：{error}",
                ),
                say(
                    "reinstall it: `make clean setup` (see docs/troubleshooting.md, 'Setup')",
                    "重新安装：`make clean setup`（见 docs/troubleshooting.md 的 'Setup' 一节）",
                ),
            )
        ]
    findings = [Finding("ok", "torch", f"{torch.__version__}")]
    if torch.cuda.is_available():
        names = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        findings.append(
            Finding(
                "info",
                "CUDA",
                say(
                    f"available: {names} (CUDA {torch.version.cuda})",
                    f"可用：{names}（CUDA {torch.version.cuda}）",
                ),
            )
        )
    else:
        cuda = torch.version.cuda
        built = (
            say(f"torch built with CUDA {cuda}", f"用 CUDA {cuda} 构建的 torch")
            if cuda
            else say("CPU build of torch", "CPU 版 torch")
        )
        findings.append(
            Finding("info", "CUDA", say(f"not available ({built})", f"不可用（{built}）"))
        )
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        findings.append(
            Finding(
                "info",
                "MPS",
                say(
                    "available (Apple GPU); small numeric differences from CPU are expected, "
                    "the checks allow for them",
                    "可用（Apple GPU）；与 CPU 相比会有微小的数值差异，这是正常的，"
                    "检查允许这些差异",
                ),
            )
        )
    else:
        findings.append(Finding("info", "MPS", say("not available", "不可用")))
    from ..runtime import DEVICE_ENV, default_device

    try:
        device = default_device()
    except ValueError as error:
        findings.append(
            Finding(
                "FAIL",
                say("device", "设备"),
                str(error),
                say(
                    f"unset {DEVICE_ENV} or set it to an available device (cpu, cuda, mps)",
                    f"取消设置 {DEVICE_ENV}，或把它设为一个可用的设备（cpu、cuda、mps）",
                ),
            )
        )
    else:
        setting = os.environ.get(DEVICE_ENV)
        findings.append(
            Finding(
                "ok",
                say("device", "设备"),
                say(
                    f"notebooks will run on {device}"
                    + (f" ({DEVICE_ENV}={setting})" if setting else ""),
                    f"notebook 将在 {device} 上运行"
                    + (f"（{DEVICE_ENV}={setting}）" if setting else ""),
                ),
            )
        )
    return findings


def check_packages() -> list[Finding]:
    findings = []
    for name, (required, purpose) in PACKAGES.items():
        version = package_version(name)
        if version is None:
            # A missing test tool is worth a warning in a checkout only: a learner's
            # `pip install tfcourse` has no use for it.
            status = "FAIL" if required else "warn" if project_root() else "info"
            findings.append(
                Finding(
                    status,
                    name,
                    say(f"not installed ({purpose[0]})", f"未安装（{purpose[1]}）"),
                    setup_fix() if status != "info" else "",
                )
            )
        else:
            findings.append(Finding("ok", name, version))
    findings += _check_version_pairs()
    return findings


def _major(version: str | None) -> int | None:
    try:
        return int(version.split(".")[0]) if version else None
    except ValueError:
        return None


def _check_version_pairs() -> list[Finding]:
    """Versions that must go together: JupyterLab 4, ipywidgets 8 with jupyterlab_widgets 3."""
    findings = []
    lab, widgets, frontend = (
        package_version(n) for n in ("jupyterlab", "ipywidgets", "jupyterlab_widgets")
    )
    if lab and _major(lab) != 4:
        findings.append(
            Finding(
                "FAIL",
                "jupyterlab",
                say(
                    f"{lab} installed; the course needs JupyterLab 4",
                    f"安装的是 {lab}；本课程需要 JupyterLab 4",
                ),
                say(
                    "`pip install 'jupyterlab>=4,<5'` (or `make setup`)",
                    "`pip install 'jupyterlab>=4,<5'`（或 `make setup`）",
                ),
            )
        )
    if widgets and _major(widgets) != 8:
        findings.append(
            Finding(
                "FAIL",
                "ipywidgets",
                say(
                    f"{widgets} installed; the course needs ipywidgets 8",
                    f"安装的是 {widgets}；本课程需要 ipywidgets 8",
                ),
                say(
                    "`pip install 'ipywidgets>=8,<9'` (or `make setup`)",
                    "`pip install 'ipywidgets>=8,<9'`（或 `make setup`）",
                ),
            )
        )
    if widgets and frontend and _major(widgets) == 8 and _major(frontend) != 3:
        findings.append(
            Finding(
                "FAIL",
                "jupyterlab_widgets",
                say(
                    f"{frontend} does not match ipywidgets {widgets} (needs 3.x)",
                    f"{frontend} 与 ipywidgets {widgets} 不匹配（需要 3.x）",
                ),
                "`pip install 'jupyterlab_widgets>=3,<4'`",
            )
        )
    return findings


def check_grading_sandbox() -> list[Finding]:
    """Whether ``tfcourse grade`` can seal learners' code here (bubblewrap): for teachers;
    a learner grading their own notebook can do without it (``--unsealed``)."""
    from ..grade.sealed.sandbox import sandbox

    found = sandbox()
    if found.bwrap is not None:
        return [Finding("ok", say("grading sandbox", "评分沙箱"), found.version or found.bwrap)]
    from ..grade.sealed.users import available

    users = (
        ""
        if available()
        else say(
            " (as root, `tfcourse grade` can instead run each worker as a fresh user: see "
            'docs/grading.md, "Containers")',
            "（以 root 身份运行时，`tfcourse grade` 也可以让每个隔离进程以全新的用户身份运行："
            "见 docs/grading.md 的“容器”一节）",
        )
    )
    return [
        Finding(
            "info",
            say("grading sandbox", "评分沙箱"),
            found.reason,
            say(
                "teachers: install bubblewrap (apt-get install bubblewrap) before grading a class; "
                "to grade your own notebook, add --unsealed",
                "教师：批改全班作业前请安装 bubblewrap（apt-get install bubblewrap）；"
                "给自己的 notebook 评分时，加上 --unsealed 即可",
            )
            + users,
        )
    ]


# What a grader's worker imports before any learner code: the course's own dependencies.
WORKER_IMPORTS = ("torch", "numpy", "safetensors")


def check_grading_imports() -> list[Finding]:
    """``tfcourse grade`` starts its workers with ``python -I``, which leaves out the user
    site-packages (``pip install --user``): packages installed there are invisible to them,
    and every exercise would fail. Nothing to say otherwise."""
    import importlib.util
    import site

    if not site.ENABLE_USER_SITE:  # a virtual environment, or Python started with -s/-I
        return []
    user_site = Path(site.getusersitepackages()).resolve()
    stranded = []
    for name in WORKER_IMPORTS:
        spec = importlib.util.find_spec(name)
        if spec and spec.origin and user_site in Path(spec.origin).resolve().parents:
            stranded.append(name)
    if not stranded:
        return []
    names = ", ".join(stranded)
    return [
        Finding(
            "warn",
            say("packages for grading", "评分所需的包"),
            say(
                f"{names} installed in the user site-packages ({user_site}), which the grader's "
                "isolated workers (python -I) do not see",
                f"{names} 装在用户级 site-packages（{user_site}）里，"
                "评分器的隔离进程（python -I）看不到它们",
            ),
            say(
                "install the course into a virtual environment (the README's setup) to grade "
                "notebooks with tfcourse grade",
                "要用 tfcourse grade 评分，请把课程装进虚拟环境（按 README 的步骤）",
            ),
        )
    ]


def check_chinese_font() -> list[Finding]:
    """Whether figures can draw Chinese: a warning for a reader of the Chinese edition,
    information for everyone else."""
    from ..lab.fonts import CJK_FONTS, installed_cjk_fonts
    from ..language import current

    topic = say("Chinese font", "中文字体")
    try:
        found = installed_cjk_fonts()
    except ImportError:
        return [Finding("info", topic, say("matplotlib is not installed", "未安装 matplotlib"))]
    if found:
        return [Finding("ok", topic, found[0])]
    return [
        Finding(
            "warn" if current() == "zh" else "info",
            topic,
            say(
                f"none of {', '.join(CJK_FONTS)} is installed: the Chinese edition's "
                "figures show boxes where the words should be",
                f"{'、'.join(CJK_FONTS)} 都没有安装：中文版的图中，文字会显示成方框",
            ),
            say(
                "reinstall the course as the README says (the package ships its font, in "
                "tfcourse/lab/fonts/), or install a system font (Debian/Ubuntu: "
                "`sudo apt-get install fonts-noto-cjk`); then restart the kernel",
                "按 README 重新安装课程（软件包自带字体，在 tfcourse/lab/fonts/ 中），或安装"
                "系统字体（Debian/Ubuntu：`sudo apt-get install fonts-noto-cjk`）；装好后重启内核",
            ),
        )
    ]


def collect(root: Path | None) -> list[Finding]:
    """Every finding, in report order."""
    # Imported here: the JupyterLab checks load jupyter_client and friends, only when run.
    from ..course import installed
    from .jupyter import (
        check_environment,
        check_kernel,
        check_notebooks,
        check_widget_frontend,
    )

    return (
        check_python()
        + check_torch()
        + check_packages()
        + check_environment(root)
        + check_kernel()
        + check_widget_frontend()
        + check_notebooks(root or installed.course_root())
        + check_chinese_font()
        + check_grading_sandbox()
        + check_grading_imports()
    )


# ------------------------------------------------------------------------- command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root",
        metavar="FOLDER",
        default=None,
        help=say(
            "course folder to check (default: the checkout tfcourse was installed from)",
            "要检查的课程文件夹（默认：安装 tfcourse 时所用的课程仓库）",
        ),
    )


def run(args: argparse.Namespace) -> int:
    root = Path(args.root).resolve() if getattr(args, "root", None) else project_root()
    findings = collect(root)
    print(
        f"tfcourse {__version__} doctor"
        + (say(f" — course folder {root}", f"——课程文件夹 {root}") if root else "")
    )
    width = max(text_width(f.topic) for f in findings)
    for finding in findings:
        status = say(*STATUS.get(finding.status, (finding.status, finding.status)))
        print(f"  {pad(status, 4)}  {pad(finding.topic, width)}  {finding.detail}")
        if finding.fix:
            fix = say(f"fix: {finding.fix}", f"修复：{finding.fix}")
            print(f"  {'':<4}  {'':<{width}}  {fix}")
    failures = [f for f in findings if f.status == "FAIL"]
    warnings = [f for f in findings if f.status == "warn"]
    if failures:
        print(
            say(
                f"{len(failures)} required piece(s) missing or broken, {len(warnings)} "
                "warning(s): apply the fixes above, then run `tfcourse doctor` again.",
                f"{len(failures)} 个必需组件缺失或损坏，{len(warnings)} 条警告：请按上面的方法"
                "修复，然后再次运行 `tfcourse doctor`。",
            )
        )
        return 1
    print(
        say(
            "Healthy: everything the course needs is in place"
            + (f" ({len(warnings)} warning(s) above)." if warnings else "."),
            "一切正常：课程所需的组件都已就绪"
            + (f"（上面有 {len(warnings)} 条警告）。" if warnings else "。"),
        )
    )
    return 0
