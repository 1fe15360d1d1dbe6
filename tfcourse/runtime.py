"""Device choice, seeding, and number formatting for stable notebook outputs."""

from __future__ import annotations

import contextlib
import os
import random

import numpy as np
import torch

from .language import say

DEVICE_ENV = "TFCOURSE_DEVICE"


def default_device() -> torch.device:
    """``$TFCOURSE_DEVICE`` if set, else CUDA, else Apple MPS, else CPU.

    Raises ``ValueError`` if ``TFCOURSE_DEVICE`` names a device that is not available,
    rather than silently falling back.
    """
    requested = os.environ.get(DEVICE_ENV, "").strip()
    if requested:
        try:
            device = torch.device(requested)
        except RuntimeError as error:
            raise ValueError(
                say(
                    f"{DEVICE_ENV}={requested!r} is not a torch device: {error}",
                    f"{DEVICE_ENV}={requested!r} 不是 torch 认得的设备名（可用的例如 cpu、cuda、"
                    f"mps）",
                )
            ) from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(
                say(
                    f"{DEVICE_ENV}={requested!r} but torch.cuda.is_available() is False",
                    f"设置了 {DEVICE_ENV}={requested!r}，但 torch.cuda.is_available() 为 False",
                )
            )
        if device.type == "mps" and not torch.backends.mps.is_available():
            raise ValueError(
                say(
                    f"{DEVICE_ENV}={requested!r} but torch.backends.mps.is_available() is False",
                    f"设置了 {DEVICE_ENV}={requested!r}，但 torch.backends.mps.is_available() "
                    f"为 False",
                )
            )
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int = 0) -> torch.Generator:
    """Seed Python, NumPy and PyTorch (all devices); return a CPU generator with that seed."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def fmt(value: float, digits: int = 3) -> str:
    """Format a number for a stable printout: ``digits`` significant digits, no ``-0``."""
    value = float(value)
    text = f"{value:.{digits}g}"
    return "0" if text in {"-0", "0"} else text


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True if two tensors are equal up to float round-off (dtype-aware tolerances)."""
    try:
        torch.testing.assert_close(a, b)
        return True
    except AssertionError:
        return False


def _version_key(version: str) -> tuple:
    """``"0.10.1"`` -> ``(0, 10, 1)``; non-numeric parts sort as 0 (enough to tell old from new)."""
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("+")[0].split("."))


def version_mismatch(written_for: str, installed: str) -> str | None:
    """The warning to print when a notebook and the installed package disagree, else None;
    in the reader's language (``setup_notebook`` sets it to the notebook's first)."""
    if not isinstance(written_for, str) or not written_for:
        raise TypeError(
            say(
                f"written_for must be a version string like '0.1.0', got {written_for!r}",
                f"written_for 必须是版本号字符串（例如 '0.1.0'），实际是 {written_for!r}",
            )
        )
    if written_for == installed:
        return None
    if _version_key(written_for) > _version_key(installed):
        fix = say(
            "the package is older than the notebook: update it with `make setup` (or "
            "`pip install -e .`) in the course folder, then restart the kernel",
            "软件包比 notebook 旧，请在课程文件夹中运行 `make setup`（或 `pip install -e .`）"
            "更新它，然后重启内核",
        )
    else:
        fix = say(
            "the notebook is older than the package: get the current notebooks (`git pull` in "
            "the course folder; keep your own work in a copy), or install the matching package",
            "notebook 比软件包旧，请获取最新的 notebook（在课程文件夹中运行 `git pull`；"
            "先把自己的作业另存为副本），或者安装与 notebook 相配的软件包版本",
        )
    return say(
        f"WARNING: this notebook was written for tfcourse {written_for}, but tfcourse "
        f"{installed} is installed; exercises and checks may not match. Fix: {fix}. "
        f"`tfcourse doctor` checks the whole setup.",
        f"警告：这个 notebook 是为 tfcourse {written_for} 编写的，但当前安装的是 tfcourse "
        f"{installed}；练习和检查可能对不上。修复：{fix}。运行 `tfcourse doctor` 可以检查整个"
        f"环境。",
    )


def setup_notebook(written_for: str, seed: int = 0, language: str | None = None) -> torch.device:
    """First cell of every course notebook: seed, pick the device, tame warnings.

    ``language="zh"`` (the Chinese edition's first cell) makes checks and messages speak
    Chinese, ``help(check_xxx)`` read Chinese (``checks.localized_docs``), and lets figures
    draw Chinese labels (``fonts.use_chinese_fonts``).

    Warns (on stderr) when the installed ``tfcourse`` is not the version the
    notebook was written for, which is the usual cause of a notebook failing in
    ways its text does not explain. Returns the default device.
    """
    import sys
    import warnings

    from . import language as course_language
    from .version import __version__

    course_language.use(language)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="torch")
    # In the notebook's language, even where a caller's speaking() chose another one.
    with course_language.speaking(language):
        message = version_mismatch(written_for, __version__)
    if message:
        print(message, file=sys.stderr)
    seed_everything(seed)
    _learners_screen()
    # The checks' help in the notebook's language; not yet imported, they read it when they
    # are. (The grader's worker holds a sealed stand-in of the checks, without it.)
    localized_docs = getattr(sys.modules.get("tfcourse.checks"), "localized_docs", None)
    if localized_docs is not None:
        localized_docs(course_language.current())
    try:
        import matplotlib

        matplotlib.rcParams.update({"figure.dpi": 90, "figure.figsize": (6.4, 3.6)})
        if course_language.current() == "zh":
            from .lab.fonts import use_chinese_fonts

            use_chinese_fonts()
    except ImportError:  # matplotlib is a dependency, but setup must not fail without it
        pass
    return default_device()


def _learners_screen() -> None:
    """In a notebook's kernel: an unsolved exercise's stub stops its cell in one line, not
    Run All (``tfcourse.course.screen``), and ``display(fig)`` shows a figure of ``tc.plots`` as a
    picture even before pyplot has drawn anything (matplotlib's inline backend is loaded
    lazily, and until then IPython knows no picture of a Figure, only ``<Figure size ...>``).
    Only in a Jupyter kernel (a shell with a ``kernel``): the grader's worker runs cells in a
    plain IPython shell, where a stub must stay an error."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if getattr(shell, "kernel", None) is not None and hasattr(shell, "set_custom_exc"):
        from .course.screen import install_stub_handler

        install_stub_handler(shell)
        # No inline backend: figures still show through pyplot.
        with contextlib.suppress(Exception):
            shell.enable_matplotlib("inline")
            # Each stored figure keeps its texts: the Chinese edition's test reads them.
            from .lab.figure_text import record_figure_texts

            record_figure_texts(shell)
