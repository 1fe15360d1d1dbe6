"""Where the course's notebooks are: inside the installed package, else the checkout.

A wheel carries the course as package data (``pyproject.toml`` maps the repository's
``notebooks/`` and ``solutions/`` into it at build time)::

    tfcourse/_course/notebooks/NAME.ipynb       the learner notebooks (zh/: the Chinese edition)
    tfcourse/_course/solutions/NAME.ipynb       the answer key of `tfcourse grade` and `doctor`

An editable install from a checkout has no ``_course/``: the checkout's own ``notebooks/``
and ``solutions/`` are the course. Nothing here looks near a submission or in the current
folder: what the grader grades against is decided by the installation alone.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGED = Path(__file__).resolve().parents[1] / "_course"  # tfcourse/_course in a wheel
CHECKOUT = Path(__file__).resolve().parents[2]  # tfcourse/course/ -> the repository
LANGUAGES = ("en", "zh")
# Where `tfcourse notebooks` and `tfcourse lab` put a learner's copy when given no folder.
DEFAULT_FOLDER_VARIABLE = "TFCOURSE_NOTEBOOKS"


def course_root() -> Path | None:
    """The folder holding ``notebooks/`` and ``solutions/``: the package's ``_course/``, else
    the checkout of an editable install, else None."""
    for root in (PACKAGED, CHECKOUT):
        if (root / "notebooks").is_dir() and (root / "solutions").is_dir():
            return root
    return None


def _edition(folder: Path, language: str) -> Path:
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    return folder if language == "en" else folder / language


def solutions(language: str = "en") -> Path | None:
    """The solution notebooks of ``language``'s edition, or None when none are installed."""
    root = course_root()
    folder = _edition(root / "solutions", language) if root else None
    return folder if folder is not None and folder.is_dir() else None


def learner_notebooks(language: str = "en") -> Path | None:
    """The learner notebooks of ``language``'s edition, or None when none are installed."""
    root = course_root()
    folder = _edition(root / "notebooks", language) if root else None
    return folder if folder is not None and folder.is_dir() else None


def default_folder() -> Path:
    """A learner's own copy of the notebooks: ``$TFCOURSE_NOTEBOOKS``, else ``~/tfcourse``."""
    return Path(os.environ.get(DEFAULT_FOLDER_VARIABLE) or Path.home() / "tfcourse")
