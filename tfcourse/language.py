"""The language learners read: English by default, Simplified Chinese with ``TFCOURSE_LANG=zh``
or in a Chinese notebook (its first cell calls ``setup_notebook(..., language="zh")``).

Every message a learner meets is written as a pair at the place it is raised,
``say("the mask is missing", "缺少掩码")``, so the two texts are read (and updated) together.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import unicodedata
from pathlib import Path

LANGUAGES = ("en", "zh")
_chosen: str | None = None  # set by use(); otherwise TFCOURSE_LANG decides
# Set by speaking(): one thread's (or task's) language, e.g. the grader's for one notebook.
_spoken: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "tfcourse_language", default=None
)


def current() -> str:
    """``"en"`` or ``"zh"``: what ``speaking()`` or ``use()`` chose, else ``TFCOURSE_LANG``,
    else English."""
    if _spoken.get() is not None:
        return _spoken.get()
    if _chosen is not None:
        return _chosen
    value = os.environ.get("TFCOURSE_LANG", "").strip().lower()
    return "zh" if value.startswith("zh") else "en"


def use(language: str | None) -> None:
    """Choose the language for this process (``None``: back to ``TFCOURSE_LANG``)."""
    global _chosen
    if language is not None and language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    _chosen = language


def locale_language() -> str | None:
    """``"zh"`` where the system's locale is Chinese (``LC_ALL``, ``LC_MESSAGES`` or ``LANG``,
    the first that is set, as gettext reads them), else ``None``."""
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(name, "").strip().lower()
        if value:
            return "zh" if value.startswith("zh") else None
    return None


def folder_language(folder, most: int = 20) -> str | None:
    """``"zh"`` where the notebooks directly in ``folder`` (the first ``most`` by name) are
    mostly of the Chinese edition (``metadata.tfcourse.language``), else ``None``. A folder
    that does not exist, or a notebook that cannot be read, counts for neither."""
    votes = {"zh": 0, "en": 0}
    try:
        paths = sorted(Path(folder).glob("*.ipynb"))[:most]
    except OSError:
        return None
    for path in paths:
        try:
            meta = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
        except (OSError, ValueError, AttributeError):
            continue
        course = meta.get("tfcourse") if isinstance(meta, dict) else None
        chinese = isinstance(course, dict) and course.get("language") == "zh"
        votes["zh" if chinese else "en"] += 1
    return "zh" if votes["zh"] > votes["en"] else None


@contextlib.contextmanager
def using(language: str | None):
    """Within the block, the whole process speaks ``language`` (``None``: as before): a
    command's own choice (``tfcourse ... --language zh``), undone when the command returns."""
    global _chosen
    if language is not None and language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    before = _chosen
    _chosen = language if language is not None else before
    try:
        yield
    finally:
        _chosen = before


@contextlib.contextmanager
def speaking(language: str | None):
    """Within the block, in this thread only, speak ``language`` (``None``: as before).

    For work done for one reader among others at once: ``tfcourse grade --jobs N`` grades
    each notebook, in its own thread, in that notebook's language. A thread started inside
    the block does not inherit it unless it runs in a copy of this context
    (``contextvars.copy_context().run``).
    """
    if language is not None and language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    token = _spoken.set(language if language is not None else _spoken.get())
    try:
        yield
    finally:
        _spoken.reset(token)


def say(english: str, chinese: str) -> str:
    """The text in the current language."""
    return chinese if current() == "zh" else english


def yes_no(value: bool) -> str:
    """A verdict's answer in the current language: "yes"/"no", or 是/否 (Python's
    ``True``/``False`` reads as code in a Chinese sentence)."""
    return say("yes", "是") if value else say("no", "否")


def text_width(text: str) -> int:
    """Columns ``text`` takes in a terminal or a notebook's output: two for each Chinese
    (wide) character, so tables of Chinese text line up."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def pad(text: str, width: int, align: str = "<") -> str:
    """``text`` padded with spaces to ``width`` columns, aligned as in a format spec: ``"<"``
    left, ``">"`` right, ``"^"`` centred. ``f"{text:<{width}}"`` counts a Chinese character as
    one column and misaligns the table."""
    if align not in ("<", ">", "^"):
        raise ValueError(f"align must be '<', '>' or '^', got {align!r}")
    spaces = max(0, width - text_width(text))
    left = {"<": 0, ">": spaces, "^": spaces // 2}[align]
    return " " * left + text + " " * (spaces - left)
