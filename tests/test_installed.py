"""Where the installed course lives, and `tfcourse notebooks` copying it without
overwriting a learner's work."""

from __future__ import annotations

import argparse

import pytest

from tfcourse import __version__
from tfcourse.course import installed
from tfcourse.course.notebooks_command import copy_notebooks, destination, report, run
from tfcourse.grade.notebook import installed_solutions

from helpers import ROOT


def test_a_checkout_is_the_course_of_its_editable_install():
    # No tfcourse/_course/ in a checkout: its own folders are the course.
    assert not installed.PACKAGED.exists()
    assert installed.course_root() == ROOT
    assert installed.solutions() == ROOT / "solutions"
    assert installed.solutions("zh") == ROOT / "solutions" / "zh"
    assert installed.learner_notebooks("zh") == ROOT / "notebooks" / "zh"
    assert installed_solutions() == ROOT / "solutions"
    with pytest.raises(ValueError, match="language must be one of"):
        installed.solutions("fr")


def test_the_packaged_course_comes_first(tmp_path, monkeypatch):
    packaged = tmp_path / "_course"
    (packaged / "notebooks").mkdir(parents=True)
    (packaged / "solutions").mkdir()
    monkeypatch.setattr(installed, "PACKAGED", packaged)
    assert installed.course_root() == packaged
    monkeypatch.setattr(installed, "CHECKOUT", tmp_path / "nothing")
    (packaged / "notebooks").rmdir()
    assert installed.course_root() is None
    assert installed.solutions() is None


def test_copies_every_notebook_then_keeps_a_learners_file(tmp_path):
    folder = tmp_path / "mine"
    done = copy_notebooks(folder)
    shipped = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert [c.name for c in done] == shipped
    assert {c.outcome for c in done} == {"written"}
    assert (folder / shipped[1]).read_bytes() == (ROOT / "notebooks" / shipped[1]).read_bytes()

    assert {c.outcome for c in copy_notebooks(folder)} == {"unchanged"}

    work = folder / shipped[1]
    work.write_text('{"my": "work"}', encoding="utf-8")
    kept = {c.name: c for c in copy_notebooks(folder)}[shipped[1]]
    assert kept.outcome == "kept"
    assert work.read_text(encoding="utf-8") == '{"my": "work"}'
    assert kept.path.name == f"{work.stem}.v{__version__}.ipynb"
    assert kept.path.read_bytes() == (ROOT / "notebooks" / shipped[1]).read_bytes()
    assert f"{shipped[1]}: yours is kept" in report(folder, [kept])

    # Running again finds the copy beside it; a changed copy beside gets a sibling.
    assert {c.name: c for c in copy_notebooks(folder)}[shipped[1]].path == kept.path
    kept.path.write_text("edited too", encoding="utf-8")
    again = {c.name: c for c in copy_notebooks(folder)}[shipped[1]]
    assert again.path.name == f"{work.stem}.v{__version__}-2.ipynb"
    assert kept.path.read_text(encoding="utf-8") == "edited too"


def test_the_chinese_edition_and_the_default_folders(tmp_path, monkeypatch):
    done = copy_notebooks(tmp_path, "zh")
    first = (tmp_path / done[0].name).read_text(encoding="utf-8")
    assert 'language=\\"zh\\"' in first
    monkeypatch.setenv(installed.DEFAULT_FOLDER_VARIABLE, str(tmp_path / "course"))
    assert destination(None, "en") == tmp_path / "course"
    assert destination(None, "zh") == tmp_path / "course-zh"
    assert destination("~/x", "zh").name == "x"


def test_the_command_says_what_it_did(tmp_path, capsys, monkeypatch):
    assert run(argparse.Namespace(dir=str(tmp_path), language="en")) == 0
    assert "notebook(s) copied" in capsys.readouterr().out
    monkeypatch.setattr(installed, "PACKAGED", tmp_path / "none")
    monkeypatch.setattr(installed, "CHECKOUT", tmp_path / "none")
    assert run(argparse.Namespace(dir=str(tmp_path), language="en")) == 1
    assert "has no notebooks installed" in capsys.readouterr().err
