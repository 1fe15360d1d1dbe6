"""Install the course into the active virtual environment, without make: torch first, then the
course with the versions the tests ran with.

    python scripts/install.py                       # in the course's folder, environment active
    python scripts/install.py --find-links https://mirrors.aliyun.com/pytorch-wheels/cpu/

Torch comes from the index that suits the machine (``scripts/install_torch.py``: the CPU build
on Linux without an NVIDIA GPU, never the CUDA build by accident), then ``pip install .
-c constraints.txt``. Every pip step gives up on an index that does not answer within seconds
(``install_torch.FAIL_FAST`` as ``PIP_TIMEOUT`` and ``PIP_RETRIES``, where the reader has not
set them), and where a step fails the last line says, in the reader's
language (``TFCOURSE_LANG``, else a Chinese locale), which step, which package index it
used, and what to do. Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import install_torch  # the script beside this one

ROOT = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"  # the Makefile's TORCH
OTHER_MIRRORS = (
    "https://mirrors.aliyun.com/pypi/simple/",
    "https://mirrors.ustc.edu.cn/pypi/simple/",
)


def chinese_reader() -> bool:
    chosen = os.environ.get("TFCOURSE_LANG", "").strip().lower()
    if chosen:
        return chosen.startswith("zh")
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(name, "").strip().lower()
        if value:
            return value.startswith("zh")
    return False


def say(english: str, chinese: str) -> str:
    return chinese if chinese_reader() else english


def package_index() -> str:
    """The index pip uses here: ``PIP_INDEX_URL``, else pip's configuration, else PyPI."""
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]
    found = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.index-url"],
        capture_output=True,
        text=True,
        encoding="utf-8",
    )
    return found.stdout.strip() if found.returncode == 0 and found.stdout.strip() else "PyPI"


def what_to_do(step: tuple[str, str], index: str) -> str:
    """The one line that ends a failed install: ``step`` in English and in Chinese."""
    other = next((m for m in OTHER_MIRRORS if m.rstrip("/") != index.rstrip("/")), OTHER_MIRRORS[0])
    return say(
        f"install.py: {step[0]} failed with the package index {index}. If it did not answer, "
        f"choose another mirror (pip config set --site global.index-url {other}) and run "
        f"`python scripts/install.py` again; docs/setup.md lists the options.",
        f"install.py：{step[1]}失败，用的软件包索引是 {index}。如果是它没有响应，换一个镜像"
        f"（pip config set --site global.index-url {other}），再运行一次 "
        f"`python scripts/install.py`；更多办法见 docs/setup.zh.md。",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--find-links", default=None, help="a mirror of the PyTorch CPU wheels")
    parser.add_argument("--torch", default=TORCH, help=f"torch's requirement (default {TORCH})")
    args = parser.parse_args(argv)
    if sys.prefix == sys.base_prefix:
        print(
            say(
                "install.py: no virtual environment is active: first `python3 -m venv "
                "tfcourse-env` and `. tfcourse-env/bin/activate` (docs/setup.md)",
                "install.py：当前没有激活虚拟环境：请先运行 `python3 -m venv tfcourse-env` 和 "
                "`. tfcourse-env/bin/activate`（见 docs/setup.zh.md）",
            ),
            file=sys.stderr,
        )
        return 2
    index = package_index()
    # Give up on an index that does not answer within seconds, the default index included
    # (pip's own defaults wait 15 s a read, 5 times): PIP_TIMEOUT and PIP_RETRIES, unless the
    # reader set them.
    os.environ.setdefault("PIP_TIMEOUT", install_torch.FAIL_FAST[1])
    os.environ.setdefault("PIP_RETRIES", install_torch.FAIL_FAST[3])
    torch_args = ["--python", sys.executable, "--torch", args.torch]
    if args.find_links:
        torch_args += ["--find-links", args.find_links]
    if install_torch.main(torch_args) != 0:
        print(what_to_do(("installing torch", "安装 torch "), index), file=sys.stderr)
        return 1
    course = [sys.executable, "-m", "pip", "install", *install_torch.FAIL_FAST]
    course += [str(ROOT), "-c", str(ROOT / "constraints.txt")]
    if subprocess.call(course) != 0:
        print(what_to_do(("installing the course", "安装课程"), index), file=sys.stderr)
        return 1
    print(
        say(
            "install.py: done. Open the course with `tfcourse lab` (the Chinese edition: "
            "`tfcourse lab --language zh`).",
            "install.py：安装完成。用 `tfcourse lab --language zh` 打开课程"
            "（英文版：`tfcourse lab`）。",
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
