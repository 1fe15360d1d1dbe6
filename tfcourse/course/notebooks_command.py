"""``tfcourse notebooks [DIR] [--language zh]``: copy the learner notebooks into a folder.

The copies come from the installed course (``tfcourse.course.installed``). A learner's file
is never overwritten: where ``DIR/NAME.ipynb`` exists and differs from the course's, it is
kept and the course's notebook is written beside it as ``NAME.vVERSION.ipynb`` (one line
says so); an identical one is left as it is. The two editions use the same file names, so
the Chinese one has a default folder of its own (``~/tfcourse-zh``).

``add_missing`` is what ``tfcourse lab`` does to the learner's copy on every start: it
copies in the course's notebooks the copy lacks (all of them, the first time) and leaves
every file there as it is.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from ..language import current, say
from . import installed


@dataclass
class Copied:
    """What happened to one notebook: ``written`` to ``path``, ``unchanged``, or ``kept``
    (the learner's file stayed; the course's copy is ``path``)."""

    name: str
    outcome: str  # "written" | "unchanged" | "kept"
    path: Path


def beside(target: Path, content: bytes) -> Path:
    """Where the course's copy goes when ``target`` is the learner's: the first of
    ``NAME.vVERSION.ipynb``, ``NAME.vVERSION-2.ipynb``, ... that is free or already holds
    ``content``."""
    stem = f"{target.stem}.v{version('tfcourse')}"  # the installed package's
    number = 1
    while True:
        candidate = target.with_name(f"{stem}{'' if number == 1 else f'-{number}'}.ipynb")
        if not candidate.exists() or candidate.read_bytes() == content:
            return candidate
        number += 1


def course_notebooks(language: str = "en") -> list[Path]:
    """The installed learner notebooks of ``language``'s edition, in course order. Raises
    ``FileNotFoundError`` when this installation has none."""
    source = installed.learner_notebooks(language)
    if source is None:
        raise FileNotFoundError(
            say(
                "this tfcourse has no notebooks installed (a wheel built from the repository "
                "carries them; so does a checkout)",
                "这个 tfcourse 没有附带 notebook（从课程仓库构建的 wheel 和课程仓库本身都带有）",
            )
        )
    return sorted(source.glob("*.ipynb"))


def copy_notebooks(folder: Path, language: str = "en") -> list[Copied]:
    """Copy the learner notebooks of ``language``'s edition into ``folder`` (created if
    missing), never replacing a file that differs. Raises ``FileNotFoundError`` when this
    installation has no notebooks."""
    notebooks = course_notebooks(language)
    folder.mkdir(parents=True, exist_ok=True)
    done = []
    for notebook in notebooks:
        content = notebook.read_bytes()
        target = folder / notebook.name
        if not target.exists():
            target.write_bytes(content)
            done.append(Copied(notebook.name, "written", target))
        elif target.read_bytes() == content:
            done.append(Copied(notebook.name, "unchanged", target))
        else:
            copy = beside(target, content)
            if not copy.exists():
                shutil.copyfile(notebook, copy)
            done.append(Copied(notebook.name, "kept", copy))
    return done


def add_missing(folder: Path, language: str = "en") -> list[str]:
    """Copy into ``folder`` (created if missing) each learner notebook of ``language``'s
    edition that it lacks, and return their names. A file already there is never written,
    whatever it holds: it is the learner's. Raises ``FileNotFoundError`` when this
    installation has no notebooks, ``OSError`` when the folder cannot be written."""
    notebooks = course_notebooks(language)
    folder.mkdir(parents=True, exist_ok=True)
    added = []
    for notebook in notebooks:
        target = folder / notebook.name
        if target.exists():
            continue
        content = notebook.read_bytes()
        try:
            with open(target, "xb") as copy:  # "x": never over a file made meanwhile
                copy.write(content)
        except FileExistsError:
            continue
        added.append(notebook.name)
    return added


def report(folder: Path, done: list[Copied]) -> str:
    """What ``copy_notebooks`` did, in lines a learner reads."""
    written = sum(c.outcome == "written" for c in done)
    unchanged = sum(c.outcome == "unchanged" for c in done)
    lines = [
        say(
            f"{folder}: {written} notebook(s) copied, {unchanged} already up to date",
            f"{folder}：复制了 {written} 个 notebook，{unchanged} 个已是最新",
        )
    ]
    for c in done:
        if c.outcome == "kept":
            lines.append(
                say(
                    f"  {c.name}: yours is kept; the course's is beside it as {c.path.name}",
                    f"  {c.name}：保留了你的文件；课程的版本放在旁边，名为 {c.path.name}",
                )
            )
    return "\n".join(lines)


def next_step(folder: Path) -> str:
    """The line after the copy: the command that opens these notebooks. ``--dir`` is always
    given: without it ``tfcourse lab`` opens the default copy of the reader's language, which
    this folder need not be."""
    where = str(folder)
    command = f'tfcourse lab --dir "{where}"' if " " in where else f"tfcourse lab --dir {where}"
    return say(
        f"Next: `{command}` opens them in JupyterLab.",
        f"下一步：运行 `{command}`，在 JupyterLab 中打开这些 notebook。",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dir",
        nargs="?",
        default=None,
        metavar="DIR",
        help=say(
            f"folder to copy into (default: ${installed.DEFAULT_FOLDER_VARIABLE}, else "
            "~/tfcourse; the Chinese edition: ~/tfcourse-zh)",
            f"复制到哪个文件夹（默认：${installed.DEFAULT_FOLDER_VARIABLE}，否则 ~/tfcourse；"
            "中文版：~/tfcourse-zh）",
        ),
    )
    parser.add_argument(
        "--language",
        choices=installed.LANGUAGES,
        default=None,
        help=say(
            "edition: en or zh (default: TFCOURSE_LANG, else en)",
            "版本：en 或 zh（默认：TFCOURSE_LANG，否则 en）",
        ),
    )


def destination(given: str | None, language: str) -> Path:
    """``given``, else the default folder of ``language``'s edition."""
    if given is not None:
        return Path(given).expanduser()
    folder = installed.default_folder()
    return folder if language == "en" else folder.with_name(f"{folder.name}-{language}")


def run(args: argparse.Namespace) -> int:
    language = args.language or current()
    folder = destination(args.dir, language)
    try:
        done = copy_notebooks(folder, language)
    except OSError as error:  # no notebooks installed, or the folder cannot be written
        print(say(f"tfcourse notebooks: {error}", f"tfcourse notebooks：{error}"), file=sys.stderr)
        return 1
    print(report(folder, done))
    print(next_step(folder))
    return 0
