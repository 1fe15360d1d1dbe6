"""Install torch into the course's virtual environment from the index that suits this machine.

``make setup`` runs this before ``pip install -e .[dev]``: torch is installed first, so the
package's range (torch>=2.4,<3) is already satisfied and pip does not pull a second build.

Which index:

- ``--index URL`` wins; ``--index default`` means pip's default index (PyPI, or the mirror
  that ``PIP_INDEX_URL`` / pip's config names).
- ``--find-links URL``: a page or folder of torch wheels, such as a domestic mirror of the
  PyTorch CPU wheels (they publish them as a plain list of files, not as an index). On Linux
  without an NVIDIA GPU the CPU build is asked for by name (``torch==2.13.0+cpu``), so the
  CUDA build on the default index is never picked instead.
- Linux without an NVIDIA GPU: PyTorch's CPU index. PyPI's Linux torch is the CUDA build,
  several GB that a machine without a GPU cannot use; the CPU wheel is a fraction of that.
  The CPU index is probed first (5 s at most). Where it cannot be reached (a firewall, no
  route abroad), the CPU build is looked for by name on the default index and pip's
  find-links (a local wheelhouse or mirror may hold it); where none is found, setup stops and
  says how to choose -- it never falls back to the CUDA build silently.
- Linux with an NVIDIA GPU: the default index, whose Linux torch is the CUDA build.
- macOS and other systems: the default index (macOS wheels use the Apple GPU through MPS).

Where a torch that satisfies ``--torch`` is already installed, nothing is done.

Standard library only: it runs before anything is installed.

Usage: python scripts/install_torch.py --python .venv/bin/python --torch "torch==2.13.0"
       [--index URL | --find-links URL]
"""

from __future__ import annotations

import argparse
import http.client
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
DEFAULT = "default"  # --index value meaning pip's default index
PROBE_SECONDS = 5.0
# pip's defaults (15 s per read, 5 retries; PIP_DEFAULT_TIMEOUT may raise the former) let an
# index that stopped answering after the probe hold setup for minutes; fail within seconds.
FAIL_FAST = ["--timeout", "10", "--retries", "1"]

# Run by the target interpreter: its installed torch version when that satisfies the spec.
# pip's vendored `packaging` reads the spec the way pip does (so "==2.13.0" accepts
# "2.13.0+cpu"); a venv always has pip, and the stdlib has no version-specifier parser.
INSTALLED_CHECK = """
import sys
from importlib import metadata
from pip._vendor.packaging.requirements import Requirement
requirement = Requirement(sys.argv[1])
version = metadata.version(requirement.name)
if requirement.specifier.contains(version, prereleases=True):
    print(version)
"""


def has_nvidia_gpu(gpus: Path = Path("/proc/driver/nvidia/gpus")) -> bool:
    """True where the NVIDIA driver sees a GPU (an entry in ``gpus``, or ``nvidia-smi -L``)."""
    if gpus.is_dir() and any(gpus.iterdir()):
        return True
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        listing = subprocess.run(
            [smi, "-L"], check=False, capture_output=True, text=True, encoding="utf-8", timeout=15
        )
    except (OSError, subprocess.SubprocessError):
        return False
    # nvidia-smi is installed with the driver and exits non-zero without a usable GPU.
    return listing.returncode == 0 and "GPU" in listing.stdout


def say(english: str, chinese: str) -> str:
    """The text in the reader's language: Chinese with ``TFCOURSE_LANG=zh`` (the package's own
    switch; this script runs before the package is installed, so it reads the variable)."""
    return (
        chinese if os.environ.get("TFCOURSE_LANG", "").strip().lower().startswith("zh") else english
    )


def choose_index(system: str, has_gpu: bool, explicit: str | None = None) -> tuple[str | None, str]:
    """``(index URL or None for pip's default index, the reason in words)``.

    ``system`` is ``platform.system()``: "Linux", "Darwin", "Windows", ...
    """
    if explicit == DEFAULT:
        return None, say(
            "index given (default) -> pip's default index", "指定了索引（default）-> pip 的默认索引"
        )
    if explicit:
        return explicit, say(f"index given -> {explicit}", f"指定了索引 -> {explicit}")
    if system == "Linux" and not has_gpu:
        return CPU_INDEX, say(
            f"Linux, no NVIDIA GPU -> CPU wheel from {CPU_INDEX}",
            f"Linux，没有 NVIDIA GPU -> 从 {CPU_INDEX} 安装 CPU 版",
        )
    if system == "Linux":
        return None, say(
            "Linux with an NVIDIA GPU -> CUDA build from the default index",
            "Linux，有 NVIDIA GPU -> 从默认索引安装 CUDA 版",
        )
    if system == "Darwin":
        return None, say(
            "macOS -> the default index (its wheel uses the Apple GPU through MPS)",
            "macOS -> 默认索引（它的 wheel 通过 MPS 使用 Apple GPU）",
        )
    name = system or "unknown system"
    return None, say(f"{name} -> the default index", f"{name} -> 默认索引")


def reachable(url: str, timeout: float = PROBE_SECONDS) -> tuple[bool, str]:
    """``(True, "HTTP 200")`` when ``url`` answers within ``timeout`` seconds in all, else
    ``(False, why)``.

    urllib's own timeout covers each socket operation but not the DNS lookup, which can hang
    far longer without a resolver; a daemon thread bounds the whole probe.
    """
    answer: list[tuple[bool, str]] = []

    def probe() -> None:
        try:
            request = urllib.request.Request(url, method="HEAD")
            with urllib.request.urlopen(request, timeout=timeout) as response:
                answer.append((True, f"HTTP {response.status}"))
        except urllib.error.HTTPError as error:  # it answered, but not with the index page
            answer.append((False, f"HTTP {error.code}"))
        except urllib.error.URLError as error:
            reason = error.reason
            answer.append((False, getattr(reason, "strerror", None) or str(reason)))
        # Timeouts, resets, garbled answers, malformed URLs: all mean "cannot be reached".
        except (OSError, ValueError, http.client.HTTPException) as error:
            answer.append((False, str(error) or type(error).__name__))

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    return (
        answer[0]
        if answer
        else (False, say(f"no answer within {timeout:g} s", f"{timeout:g} 秒内没有应答"))
    )


def pip_command(
    python: str, spec: str, index: str | None, find_links: str | None = None
) -> list[str]:
    """The pip command that installs ``spec`` into ``python`` from ``index`` (None: the
    default) and, when given, the wheels listed at ``find_links``."""
    command = [python, "-m", "pip", "install", spec]
    if index is not None:
        command += ["--index-url", index]
    if find_links is not None:
        command += ["--find-links", find_links]
    if index is not None or find_links is not None:
        command += FAIL_FAST
    return command


def cpu_spec(spec: str) -> str | None:
    """``torch==2.13.0`` -> ``torch==2.13.0+cpu``: the CPU build asked for by name, which
    neither PyPI's CUDA wheel nor any other build satisfies. None where ``spec`` pins no
    single version (a range cannot name a build)."""
    match = re.fullmatch(r"\s*torch\s*===?\s*([0-9][0-9A-Za-z.]*)(\+cpu)?\s*", spec)
    return None if match is None else f"torch=={match.group(1)}+cpu"


NO_CPU_WHEEL = """\
torch: no CPU build of torch was found ({detail}); setup stops here rather than install the
  CUDA build, several GB that this machine (no NVIDIA GPU) cannot use. Choose one:
  - a mirror of the PyTorch CPU wheels, e.g. in mainland China
      make setup TORCH_FIND_LINKS=https://mirrors.aliyun.com/pytorch-wheels/cpu/
  - another index that serves them:   make setup TORCH_INDEX=<url>
  - the CUDA build anyway:            make setup TORCH_INDEX=default
  (docs/setup.md: "Mainland China")"""

NO_CPU_WHEEL_ZH = """\
torch：没有找到 torch 的 CPU 版（{detail}）；安装到此为止，不会改装 CUDA 版：它有好几 GB，
  而这台机器（没有 NVIDIA GPU）用不上。请任选一种：
  - PyTorch CPU wheel 的镜像，例如在中国大陆
      make setup TORCH_FIND_LINKS=https://mirrors.aliyun.com/pytorch-wheels/cpu/
  - 另一个提供这些 wheel 的索引：   make setup TORCH_INDEX=<url>
  - 仍然安装 CUDA 版：              make setup TORCH_INDEX=default
  （docs/setup.zh.md：“在中国大陆安装”）"""


def no_cpu_wheel(english_detail: str, chinese_detail: str) -> str:
    return say(
        NO_CPU_WHEEL.format(detail=english_detail), NO_CPU_WHEEL_ZH.format(detail=chinese_detail)
    )


def installed_version(python: str, spec: str) -> str | None:
    """The version of torch installed in ``python`` when it satisfies ``spec``, else None."""
    try:
        check = subprocess.run(
            [python, "-c", INSTALLED_CHECK, spec],
            check=False,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    # Not installed, not satisfying, or a spec that is a path or URL: all mean "install".
    return check.stdout.strip() or None


def run_pip(command: list[str]) -> int:
    """Run ``command`` and return its exit status (replaced in tests)."""
    return subprocess.call(command)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter to install into (default: this one)",
    )
    parser.add_argument("--torch", default="torch", help="pip requirement, e.g. torch==2.13.0")
    parser.add_argument(
        "--index",
        default=None,
        help=f"package index URL, or '{DEFAULT}' for pip's default index "
        "(default: chosen for this machine)",
    )
    parser.add_argument(
        "--find-links",
        default=None,
        help="a page or folder of torch wheels (a mirror of the PyTorch CPU "
        "wheels); the default index still serves torch's dependencies",
    )
    args = parser.parse_args(argv)
    if args.index and args.find_links:
        parser.error("give --index or --find-links, not both")

    version = installed_version(args.python, args.torch)
    if version is not None:
        print(
            say(
                f"torch: {version} is already installed in {args.python} ({args.torch}); "
                "nothing to do",
                f"torch：{args.python} 里已经装有 {version}（{args.torch}），无需再装",
            ),
            flush=True,
        )
        return 0

    system = platform.system()
    has_gpu = system == "Linux" and has_nvidia_gpu()  # elsewhere nvidia-smi need not run
    wants_cpu = system == "Linux" and not has_gpu
    if args.find_links:
        spec = (cpu_spec(args.torch) if wants_cpu else None) or args.torch
        print(
            say(
                f"torch: {spec} from the wheels at {args.find_links}",
                f"torch：从 {args.find_links} 的 wheel 安装 {spec}",
            ),
            flush=True,
        )
        return run_pip(pip_command(args.python, spec, None, args.find_links))
    index, why = choose_index(system, has_gpu, args.index or None)
    print(say(f"torch: {why}", f"torch：{why}"), flush=True)
    if index != CPU_INDEX or args.index:
        return run_pip(pip_command(args.python, args.torch, index))
    ok, detail = reachable(f"{CPU_INDEX}/torch/")
    # An index can answer the probe and then stall mid-download (common from mainland China):
    # pip gives up within seconds (FAIL_FAST), and the fallback below is tried as for an
    # index that never answered.
    if ok and run_pip(pip_command(args.python, args.torch, index)) == 0:
        return 0
    if ok:
        detail = say(
            "it answered, but pip could not download torch from it",
            "它有应答，但 pip 没能从它下载 torch",
        )
    spec = cpu_spec(args.torch)
    print(
        say(
            f"torch: the PyTorch CPU index {CPU_INDEX} cannot be used ({detail}); looking for "
            f"{spec or 'a CPU build'} on the default index and pip's find-links instead",
            f"torch：PyTorch 的 CPU 索引 {CPU_INDEX} 用不了（{detail}）；改到默认索引和 pip 的 "
            f"find-links 里找 {spec or 'CPU 版'}",
        ),
        flush=True,
    )
    if spec is None:
        print(
            no_cpu_wheel(
                f"{args.torch} pins no version to ask for by name",
                f"{args.torch} 没有固定版本，无法按名字查找",
            ),
            file=sys.stderr,
            flush=True,
        )
        return 1
    status = run_pip(pip_command(args.python, spec, None))
    if status != 0:
        print(
            no_cpu_wheel(f"pip could not install {spec}", f"pip 没能安装 {spec}"),
            file=sys.stderr,
            flush=True,
        )
    return status


if __name__ == "__main__":
    sys.exit(main())
