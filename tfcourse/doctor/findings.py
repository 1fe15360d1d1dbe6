"""What ``tfcourse doctor``'s checks report: a ``Finding`` per line, and the usual fix."""

from __future__ import annotations

from dataclasses import dataclass

from ..language import say


def setup_fix() -> str:
    return say(
        "run `make setup` in the course folder (or `pip install -e '.[dev]'` in its environment)",
        "在课程文件夹中运行 `make setup`（或在课程的环境中运行 `pip install -e '.[dev]'`）",
    )


@dataclass
class Finding:
    """One line of the report."""

    status: str  # "ok" | "info" | "warn" | "FAIL"
    topic: str
    detail: str
    fix: str = ""
