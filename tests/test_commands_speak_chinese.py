"""The learner's commands in Chinese (TFCOURSE_LANG=zh): `tfcourse demo`, the first cell's
version warning, argparse's headings, `tfcourse --help`'s groups, `tfcourse notebooks`'s next
step, and the help of `lab`, `notebooks`, `doctor` and `progress`."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from tfcourse import __version__, cli, language, runtime
from tfcourse.course import launch, notebooks_command
from tfcourse.grade import progress
from tfcourse.language import text_width

from helpers import english_sentences

SMALL = ["--layers", "2", "--d-model", "32", "--heads", "2", "--seq-len", "8", "--batch", "2"]
SMALL += ["--vocab", "40", "--device", "cpu"]
CHINESE = re.compile(r"[\u4e00-\u9fff]")

pytestmark = pytest.mark.usefixtures("english_first")


def helped(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit):
        cli.main([*argv, "--help"])
    return capsys.readouterr().out


# --- tfcourse demo


def demo(capsys, *extra: str) -> str:
    assert cli.main(["demo", *SMALL, *extra]) == 0
    return capsys.readouterr().out


def tables(out: str) -> list[list[str]]:
    """The lines of each table: from the line after ``[n/N] ...`` to the blank line."""
    found, table = [], None
    for line in out.splitlines():
        if line.startswith("["):
            table = []
            found.append(table)
        elif table is not None and line.strip():
            table.append(line)
        else:
            table = None
    return found


def numbers(out: str) -> list[str]:
    """Every number of the tables and of the paragraphs, in order."""
    return re.findall(r"-?\d[\d.,e+-]*", " ".join(" ".join(t) for t in tables(out)))


def test_demo_speaks_chinese_in_every_line(zh, capsys):
    out = demo(capsys, "--loss", "both")
    lines = [line for line in out.splitlines() if line.strip()]
    assert all(CHINESE.search(line) for line in lines), out
    assert english_sentences(out) == [], english_sentences(out)
    assert lines[0].startswith("tfcourse demo：前置层归一化（Pre-LN）与后置层归一化（Post-LN）")
    assert "[1/2] 损失：下一个词元的语言模型交叉熵" in out and "[2/2] 损失：" in out
    assert "怎么读这张表：" in out and "ln(V) = 3.69" in out and "常数的梯度为零" in out
    assert "两个模型的权重完全相同（随机种子 0）" in out


def test_demo_tables_line_up_in_chinese_with_the_same_numbers(zh, monkeypatch, capsys):
    chinese = demo(capsys, "--loss", "both")
    for table in tables(chinese):
        assert table[0].split() == ["测量项", "Pre-LN", "Post-LN", "Pre/Post"]
        assert {text_width(line) for line in table} == {72}, table
        assert [line.split()[0] for line in table[1:4]] == [
            "输出形状",
            "损失值",
            "嵌入层处的梯度范数",
        ]
    monkeypatch.setenv("TFCOURSE_LANG", "en")
    english = demo(capsys, "--loss", "both")
    assert numbers(chinese) == numbers(english)


def test_demo_paragraphs_fit_their_width_in_chinese(zh, capsys):
    out = demo(capsys, "--loss", "both")
    blocks = [block.splitlines() for block in out.split("\n\n")]
    paragraphs = [
        b for b in blocks if b[0].startswith(("  怎么读这张表：", "  为什么会是这些数字："))
    ]
    assert len(paragraphs) == 2, out
    for lines in paragraphs:
        assert all(text_width(line) <= 96 for line in lines), lines
        assert not any(line.endswith("（") or line[2] in "，。；：）" for line in lines), lines


def test_demo_refuses_bad_sizes_in_chinese(zh, capsys):
    assert cli.main(["demo", *SMALL, "--heads", "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tfcourse demo：错误：--d-model 必须能被 --heads 整除"), err
    assert cli.main(["demo", *SMALL, "--layers", "0"]) == 2
    assert capsys.readouterr().err.strip() == "tfcourse demo：错误：--layers 必须是正整数，实际是 0"


def test_demo_help_speaks_chinese(zh, capsys):
    out = helped(capsys, "demo")
    assert "每个堆叠的块数（默认 6）" in out and "lm：语言模型的交叉熵损失（默认）" in out
    assert english_sentences(out) == [], english_sentences(out)


# --- the first cell's version warning


def test_a_chinese_notebook_warns_in_chinese(capsys):
    with language.speaking("en"):  # whatever spoke before, the notebook's language wins
        runtime.setup_notebook(written_for="99.0.0", language="zh")
    err = capsys.readouterr().err.strip()
    assert err == (
        f"警告：这个 notebook 是为 tfcourse 99.0.0 编写的，但当前安装的是 tfcourse {__version__}；"
        "练习和检查可能对不上。修复：软件包比 notebook 旧，请在课程文件夹中运行 `make setup`"
        "（或 `pip install -e .`）更新它，然后重启内核。运行 `tfcourse doctor` 可以检查整个环境。"
    )
    runtime.setup_notebook(written_for="0.0.1", language="zh")
    err = capsys.readouterr().err
    assert "notebook 比软件包旧，请获取最新的 notebook" in err and "WARNING" not in err
    runtime.setup_notebook(written_for="0.0.1")  # an English notebook: English
    assert capsys.readouterr().err.startswith("WARNING: this notebook was written for")


def test_a_bad_device_setting_is_said_in_chinese(zh, monkeypatch):
    monkeypatch.setenv(runtime.DEVICE_ENV, "banana")
    with pytest.raises(ValueError, match="TFCOURSE_DEVICE='banana' 不是 torch 认得的设备名"):
        runtime.default_device()


# --- argparse's headings and tfcourse --help


@pytest.mark.parametrize("command", [[], *([name] for name in cli.COMMANDS)])
def test_headings_end_with_a_full_width_colon_in_chinese(command, monkeypatch, capsys):
    monkeypatch.setenv("TFCOURSE_LANG", "zh")
    out = helped(capsys, *command)
    unindented = [line for line in out.splitlines() if line and not line[0].isspace()]
    assert "选项：" in unindented and not any(line.endswith(":") for line in unindented), out
    monkeypatch.setenv("TFCOURSE_LANG", "en")
    english = helped(capsys, *command)
    assert "\noptions:\n" in english and "选项" not in english


def sections(out: str) -> dict[str, list[str]]:
    """Each heading of a help text and the first words of the lines under it."""
    found: dict[str, list[str]] = {}
    heading = None
    for line in out.splitlines():
        if line and not line[0].isspace():
            heading = line
            found[heading] = []
        elif heading is not None and line.startswith("  ") and not line.startswith("   "):
            found[heading].append(line.split()[0])
    return found


@pytest.mark.parametrize(
    "lang, learners, teachers, maintainers",
    [
        (
            "en",
            "commands for learners:",
            "commands for teachers (grading a class):",
            "commands for maintainers (changing the course in its repository):",
        ),
        (
            "zh",
            "学员的命令：",
            "教师的命令（给全班评分）：",
            "维护者的命令（在课程仓库里修改课程）：",
        ),
    ],
)
def test_help_lists_the_learners_commands_first_and_the_others_apart(
    lang, learners, teachers, maintainers, monkeypatch, capsys
):
    monkeypatch.setenv("TFCOURSE_LANG", lang)
    out = helped(capsys)
    found = sections(out)
    headings = list(found)
    assert headings[headings.index(learners) :][:3] == [learners, teachers, maintainers], out
    assert found[learners] == ["lab", "notebooks", "progress", "demo", "train", "sample", "doctor"]
    assert found[teachers] == ["grade", "autograder"]
    assert found[maintainers] == ["build-notebooks", "translate", "execute", "site"]
    listed = [
        name for names in (found[learners], found[teachers], found[maintainers]) for name in names
    ]
    assert sorted(listed) == sorted(cli.COMMANDS)  # every command, once
    assert not {"positional arguments:", "位置参数："} & set(found)  # no list of them all


def test_the_groups_hold_every_command_once():
    grouped = [name for _, names in cli.GROUPS for name in names]
    assert sorted(grouped) == sorted(cli.COMMANDS) and len(set(grouped)) == len(grouped)


def test_commands_still_dispatch_and_keep_their_own_help(capsys):
    out = helped(capsys, "progress")
    assert out.startswith("usage: tfcourse progress") and "commands for learners" not in out
    args = cli.build_parser(only="lab").parse_args(["lab", "--dir", "x"])
    assert (args.command, args.dir) == ("lab", "x")


# --- tfcourse notebooks, lab, doctor, progress


def test_notebooks_says_what_to_run_next(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "my course"
    assert notebooks_command.run(argparse.Namespace(dir=str(folder), language="en")) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == f'Next: `tfcourse lab --dir "{folder}"` opens them in JupyterLab.'
    monkeypatch.setenv("TFCOURSE_LANG", "zh")
    folder = tmp_path / "mine"
    assert notebooks_command.run(argparse.Namespace(dir=str(folder), language="zh")) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert (
        last == f"下一步：运行 `tfcourse lab --dir {folder}`，在 JupyterLab 中打开这些 notebook。"
    )
    # ... which opens that folder.
    args = cli.build_parser(only="lab").parse_args(["lab", "--dir", str(folder)])
    assert launch.find_notebooks(args.dir) == folder.resolve()


# Every command but the maintainers' (their documentation, CONTRIBUTING.md, is English).
READERS_COMMANDS = [name for (_, names) in cli.GROUPS[:2] for name in names]


@pytest.mark.parametrize("command", READERS_COMMANDS)
def test_every_learners_and_teachers_command_helps_in_chinese(command, zh, capsys):
    out = helped(capsys, command)
    assert english_sentences(out) == [], english_sentences(out)


def test_the_top_level_help_speaks_chinese(zh, capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    maintainers = set(cli.GROUPS[2][1])
    lines = [
        line
        for line in out.splitlines()
        if line.split()[:1] != [] and line.split()[0] not in maintainers
    ]
    assert english_sentences("\n".join(lines)) == []


def test_a_chinese_progress_line_is_cut_to_its_width():
    line = "练习" * 100
    cut = progress._clip(line, 41)
    assert text_width(cut) <= 41 and cut.endswith("…") and line.startswith(cut[:-1])
    assert progress._clip("short", 41) == "short"


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--loss", "nope"],
        ["train", "--steps", "x"],
        ["grade"],
        ["nope"],
        ["sample", "a", "b"],
    ],
)
def test_argparses_own_errors_are_chinese_and_english_stays_english(argv, capsys, monkeypatch):
    for lang in ("zh", "en"):
        monkeypatch.setenv("TFCOURSE_LANG", lang)
        with pytest.raises(SystemExit):
            cli.main(argv)
        err = capsys.readouterr().err
        error = err.strip().splitlines()[-1]
        if lang == "zh":
            assert err.startswith("用法：") and "：错误：" in error, err
            assert english_sentences(error) == [], error
        else:
            assert err.startswith("usage: ") and ": error: " in error, err


def test_the_language_flag_makes_the_command_itself_speak_chinese(tmp_path, capsys):
    """`tfcourse notebooks DIR --language zh` copies the Chinese notebooks and says so in
    Chinese, with nothing in the environment asking for it; the choice ends with the command."""
    assert cli.main(["notebooks", str(tmp_path / "course"), "--language", "zh"]) == 0
    out = capsys.readouterr().out
    assert CHINESE.search(out) and not english_sentences(out), out
    assert language.current() == "en"  # the process speaks as before


def test_a_chinese_locale_is_honoured_where_nothing_else_decides(monkeypatch, capsys):
    for name in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert "学员的命令：" in helped(capsys)
    monkeypatch.setenv("TFCOURSE_LANG", "en")  # the variable decides over the locale
    assert "commands for learners:" in helped(capsys)


def chinese_folder(folder, edition: str = "zh"):
    """``folder`` with one notebook of ``edition`` in it (no exercise of the course)."""
    folder.mkdir(exist_ok=True)
    meta = {"tfcourse": {"language": edition}} if edition == "zh" else {}
    notebook = {"cells": [], "metadata": meta, "nbformat": 4, "nbformat_minor": 5}
    (folder / "notes.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    return folder


@pytest.fixture
def no_locale(monkeypatch):
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(name, raising=False)


def test_a_folder_of_chinese_notebooks_makes_progress_speak_chinese(
    tmp_path, no_locale, monkeypatch, capsys
):
    """As `grade` does for a notebook: nothing in the environment asks for Chinese, the
    folder's notebooks are the Chinese edition's, and the table is Chinese."""
    folder = chinese_folder(tmp_path / "tfcourse-zh")
    assert cli.main(["progress", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "尚未开始" in out and not english_sentences(out), out
    assert language.current() == "en"  # only for the command
    # An English folder stays English, and the variable decides over the folder.
    assert cli.main(["progress", str(chinese_folder(tmp_path / "en", "en"))]) == 0
    assert "not started" in capsys.readouterr().out
    monkeypatch.setenv("TFCOURSE_LANG", "en")
    assert cli.main(["progress", str(folder)]) == 0
    assert "not started" in capsys.readouterr().out


def test_notebooks_into_a_chinese_folder_speaks_chinese(tmp_path, no_locale, capsys):
    folder = chinese_folder(tmp_path / "mine")
    assert cli.main(["notebooks", str(folder)]) == 0
    out = capsys.readouterr().out
    assert CHINESE.search(out) and not english_sentences(out), out


def test_the_folders_language_is_the_most_of_its_notebooks(tmp_path):
    assert language.folder_language(tmp_path / "missing") is None
    assert language.folder_language(chinese_folder(tmp_path / "zh")) == "zh"
    mixed = chinese_folder(tmp_path / "zh")
    (mixed / "broken.ipynb").write_text("{", encoding="utf-8")  # counts for neither
    assert language.folder_language(mixed) == "zh"
    for name in ("a.ipynb", "b.ipynb"):
        (mixed / name).write_text(json.dumps({"metadata": {}}), encoding="utf-8")
    assert language.folder_language(mixed) is None
