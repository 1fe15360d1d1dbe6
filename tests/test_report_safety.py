"""Grade reports against hostile learner text: every attack here is one seen in practice.

A submission controls what its cells print and raise, and its own file name. Shown raw in
the text report, the CSV, the JSON or Gradescope's results, such text could draw a fake
score line on the teacher's terminal, reorder what a line says, plant a spreadsheet
formula, or (with a bad output path) lose every grade after the grading was done. Each test
performs the attack on the real report functions; the last ones check that honest text
(Chinese, multi-line diagnoses, tabs) comes through unchanged.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import re
from types import SimpleNamespace

import pytest

from tfcourse.grade import report
from tfcourse.grade.command import write_outputs
from tfcourse.grade.gradescope import results, write_results
from tfcourse.grade.records import ExerciseResult, NotebookGrade
from tfcourse.grade.report import (
    clean_grade,
    format_report,
    json_report,
    probe_output,
    write_csv,
)
from tfcourse.grade.untrusted import clean_dict, csv_text, plain
from tfcourse.language import speaking

# Erase this line, go up one, and write what the grader would have written there.
FAKE_SCORE = "\x1b[2K\x1b[1A\r  score: 2/2 exercises passed"
OSC_LINK = "\x1b]8;;http://evil.example/\x07click me\x1b]8;;\x07"
OSC_CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # writes "rm -rf ~" to the clipboard
C1_CSI = "\x9b2K\x9b1A"  # the same erase and cursor-up as 8-bit controls
BIDI = "\u202e2/0\u202c \u2066x\u2069 \u200b\U000e0041\ufeff"  # override, isolate, invisibles
FORMULA = '=HYPERLINK("http://x","click")'
# Nothing that moves the cursor, reorders or hides text may reach a report.
DANGEROUS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200b\u200e"
    "\u200f\u2060-\u2064\ufeff\U000e0000-\U000e007f\ud800-\udfff]"
)


def render(text: str) -> list[str]:
    """What a terminal shows after printing ``text``: enough of a VT100 for these attacks
    (printing, newline, carriage return, CSI K erase and CSI A cursor up)."""
    screen, row, col = [""], 0, 0
    for match in re.finditer(r"\x1b\[(\d*)([A-Za-z])|(.)", text, flags=re.DOTALL):
        number, command, char = match.groups()
        if command == "A":
            row = max(0, row - int(number or 1))
        elif command == "K":
            screen[row], col = "", 0
        elif char == "\n":
            row, col = row + 1, 0
            screen += [""] * (row + 1 - len(screen))
        elif char == "\r":
            col = 0
        elif char is not None and char >= " ":
            line = screen[row].ljust(col)
            screen[row], col = line[:col] + char + line[col + 1 :], col + 1
    return screen


def hostile_grade(label: str = "mallory/03_norms.ipynb") -> NotebookGrade:
    return NotebookGrade(
        notebook=label,
        solution="solutions/03_norms.ipynb",
        seconds=1.5,
        notes=["first line\n  score: 2/2 exercises passed", BIDI],
        exercises=[
            ExerciseResult(
                "LayerNorm",
                False,
                reason="error",
                expected="LayerNorm: 6/6 checks passed",
                got=f"ValueError: boom{FAKE_SCORE}\n{OSC_LINK}{OSC_CLIPBOARD}",
                notes=[f"its exercise cell raised{C1_CSI}\n  RMSNorm: PASS"],
            ),
            ExerciseResult(
                "RMSNorm",
                False,
                reason="mismatch",
                expected="RMSNorm: 6/6 checks passed",
                got=f"{FAKE_SCORE}\n  LayerNorm: PASS\ud800",
            ),
        ],
    )


def _every_string(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _every_string(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _every_string(item)


# --- 1. escape sequences and look-alike lines in the text report -------------------------


def test_the_raw_attack_would_forge_a_score_line():
    """The premise: printed raw, the learner's text rewrites the line above it."""
    assert "  score: 2/2 exercises passed" in render(f"  got: boom\n{FAKE_SCORE}")


@pytest.mark.parametrize("language", ["en", "zh"])
def test_learner_text_cannot_draw_a_report_line(language):
    grade = hostile_grade()
    grade.language = language
    text = format_report(grade)
    assert not DANGEROUS.search(text)
    text.encode("utf-8")  # the lone surrogate is gone too
    shown = render(text)
    assert shown == text.split("\n")  # what is printed is what the terminal shows
    score = "  成绩：" if language == "zh" else "  score:"
    assert [line for line in shown if line.startswith(score)] == [shown[-1]]
    # Each line at a report's own indents is the grader's: a header, an exercise, a field.
    own = re.compile(
        r"(\S|  (LayerNorm|RMSNorm)[:：]|      (expected|got|note|预期|实际|说明)"
        r"|  (note|sealed|score|points|说明|成绩)[:：])"
    )
    assert [line for line in shown if not line.startswith(" " * 8) and not own.match(line)] == []
    assert sum(line.startswith("  LayerNorm") for line in shown) == 1
    assert sum(line.startswith("  RMSNorm") for line in shown) == 1
    assert "http://evil.example/" not in text and "cm0gLXJmIH4=" not in text
    assert "click me" in text and "2/0" in text  # the visible text stays


def test_notes_and_errors_are_indented_under_their_first_line():
    text = format_report(hostile_grade())
    assert "  note: first line\n          score: 2/2 exercises passed" in text
    assert "      note: its exercise cell raised\n              RMSNorm: PASS" in text
    broken = NotebookGrade(notebook="x.ipynb", error=f"cannot read{FAKE_SCORE}\nnext.ipynb (ok)")
    shown = format_report(broken).split("\n")
    assert shown == [
        "x.ipynb: NOT GRADED — cannot read",
        "      score: 2/2 exercises passed",  # its carriage return: a new line
        "    next.ipynb (ok)",
    ]


@pytest.mark.parametrize(
    "label",
    [
        "evil\x1b[1A\x1b[2K\n  score: 2/2 exercises passed.ipynb",
        "alice\u202e\u2066bynpi.\u2069",
        "a\rb\x00c\x7f\x85d.ipynb",
    ],
)
def test_a_file_name_stays_one_plain_line(label):
    for grade in (hostile_grade(label), NotebookGrade(notebook=label, error="unreadable")):
        first = format_report(grade).split("\n")[0]
        assert not DANGEROUS.search(first)
        assert first.startswith(clean_grade(grade).notebook)
        assert "\n" not in clean_grade(grade).notebook
    assert plain(label, one_line=True).startswith(("evil\\n", "alice", "a\\nbcd"))


# --- 2. formulas in the CSV ----------------------------------------------------------------


def test_csv_cells_cannot_be_formulas_but_numbers_stay_numbers(tmp_path):
    grades = [
        NotebookGrade(
            f"{FORMULA}.ipynb",
            "s/03.ipynb",
            seconds=2.25,
            exercises=[ExerciseResult("Mask", True)],
        ),
        NotebookGrade("+cmd|' /C calc'!A0.ipynb", error="@SUM(1+1)*cmd|' /C calc'!A0"),
        NotebookGrade("-2+3.ipynb", error="\t=1+1"),
        NotebookGrade("\x1b[2K=1.ipynb", error=f"\r={FORMULA}"),
        NotebookGrade("＝1+1.ipynb", error="fine"),
    ]
    write_csv(grades, tmp_path / "grades.csv")
    rows = list(csv.reader((tmp_path / "grades.csv").open(encoding="utf-8", newline="")))
    assert rows[1] == [f"'{FORMULA}.ipynb", "s/03.ipynb", "1", "1", "1", "2.2", "yes", ""]
    assert rows[2][0] == "'+cmd|' /C calc'!A0.ipynb" and rows[2][-1].startswith("'@SUM")
    assert rows[3][0] == "'-2+3.ipynb" and rows[3][-1] == "'\t=1+1"
    assert rows[4][0] == "'=1.ipynb" and rows[4][-1] == f"'\n={FORMULA}"
    assert rows[5][0] == "'＝1+1.ipynb"
    for row in rows:
        assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for cell in row)
        assert not any(DANGEROUS.search(cell) for cell in row)
    assert [row[-5:-2] for row in rows[2:]] == [["0", "0", "0.0"]] * 4  # numbers, unquoted
    assert csv_text("3") == "3" and csv_text("a=b") == "a=b" and csv_text("") == ""


# --- JSON and Gradescope -------------------------------------------------------------------


def test_json_report_carries_no_escape_sequences():
    text = json_report([hostile_grade(), hostile_grade("=evil\x1b[2K.ipynb")])
    assert "\\u001b" not in text and "\\u00" not in text and not DANGEROUS.search(text)
    data = json.loads(text)
    assert not any(DANGEROUS.search(s) for s in _every_string(data))
    assert data[0]["notebook"] == "mallory/03_norms.ipynb"
    assert data[1]["notebook"] == "=evil.ipynb"
    assert data[0]["passed"] == 0 and data[0]["total"] == 2
    assert clean_dict({"a": ["\x1b[2Kx", ("\u202ey", 3)], "b": None}) == {
        "a": ["x", ("y", 3)],
        "b": None,
    }


def test_gradescope_results_are_clean_and_cannot_forge_a_summary_line(tmp_path):
    grade = hostile_grade("\u202eevil.ipynb")
    grade.notes.append("x\nalice.ipynb (against 03_norms): 2/2 exercises passed, 2/2 points")
    data = results([grade])
    assert not any(DANGEROUS.search(s) for s in _every_string(data))
    lines = data["output"].split("\n")
    assert [line for line in lines if not line.startswith(" ")] == [lines[0]]
    assert lines[0].startswith("evil.ipynb (against 03_norms): 0/2")
    for test in data["tests"]:
        assert all(
            line.startswith(("FAIL", "expected: ", "got: ", "note: ", "      "))
            for line in test["output"].split("\n")
        ), test["output"]
    write_results([grade], tmp_path / "results.json")
    assert json.loads((tmp_path / "results.json").read_text(encoding="utf-8")) == data


# --- 3. output files: probed before grading, written whole or not at all --------------------


def test_probe_output_accepts_a_new_or_existing_file_and_changes_nothing(tmp_path):
    assert probe_output(tmp_path / "grades.csv") is None
    assert list(tmp_path.iterdir()) == []  # the file it created is gone again
    existing = tmp_path / "old.csv"
    existing.write_text("kept\n")
    assert probe_output(str(existing)) is None
    assert existing.read_text() == "kept\n" and list(tmp_path.iterdir()) == [existing]


def test_probe_output_names_what_is_wrong(tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("")
    assert "is a folder" in probe_output(tmp_path)
    assert "does not exist" in probe_output(tmp_path / "missing" / "x.csv")
    assert "does not exist" in probe_output(tmp_path / "afile" / "x.csv")
    if os.path.exists("/dev/full"):  # a write there always fails with "no space"
        assert "not a regular file" in probe_output("/dev/full")
    with speaking("zh"):
        assert "文件夹" in probe_output(tmp_path)
    monkeypatch.setattr(
        report.shutil, "disk_usage", lambda path: SimpleNamespace(total=100, used=100, free=0)
    )
    message = probe_output(tmp_path / "grades.csv")
    assert "the disk is full" in message and "\n" not in message


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() == 0, reason="root may write into a read-only folder"
)
def test_probe_output_refuses_a_read_only_folder(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert "cannot write there" in probe_output(folder / "grades.csv")
    finally:
        folder.chmod(0o755)


def _full_disk(monkeypatch):
    """Every write reaches the disk only at fsync, and the disk is full."""

    def fsync(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(report.os, "fsync", fsync)


def test_a_full_disk_keeps_the_old_files_and_says_so(tmp_path, monkeypatch):
    grades = [hostile_grade()]
    old_csv, old_json = tmp_path / "grades.csv", tmp_path / "results.json"
    old_csv.write_text("old grades\n")
    old_json.write_text("{}\n")
    _full_disk(monkeypatch)
    with pytest.raises(OSError, match=r"could not write the CSV .*grades\.csv: No space left"):
        write_csv(grades, old_csv)
    with pytest.raises(OSError, match=r"results\.json: No space left"):
        write_results(grades, old_json)
    problems = write_outputs(grades, csv=old_csv, gradescope=old_json)
    assert len(problems) == 2 and all("No space left" in p and "\n" not in p for p in problems)
    assert old_csv.read_text() == "old grades\n" and old_json.read_text() == "{}\n"
    assert sorted(tmp_path.iterdir()) == [old_csv, old_json]  # no temporary file left


def test_write_outputs_writes_both_and_reports_each_failure_alone(tmp_path):
    grades = [hostile_grade()]
    assert write_outputs(grades, csv=tmp_path / "g.csv", gradescope=tmp_path / "r.json") == []
    assert (tmp_path / "g.csv").exists() and json.loads((tmp_path / "r.json").read_text())
    problems = write_outputs(
        grades, csv=tmp_path / "missing" / "g.csv", gradescope=tmp_path / "r2.json"
    )
    assert len(problems) == 1 and "could not write the CSV" in problems[0]
    assert (tmp_path / "r2.json").exists()
    assert write_outputs(grades) == []


def test_write_follows_a_symlink_to_its_target(tmp_path):
    target = tmp_path / "real.csv"
    target.write_text("")
    (tmp_path / "link.csv").symlink_to(target)
    write_csv([hostile_grade()], tmp_path / "link.csv")
    assert (tmp_path / "link.csv").is_symlink() and target.read_text().startswith("notebook,")


# --- plain() itself --------------------------------------------------------------------------


def test_plain_caps_the_length_keeping_the_head_and_says_how_much_was_cut():
    text = "a" * 10_000
    short = plain(text, 100)
    assert len(short) <= 100 and short.startswith("a" * 60)
    head, marker = short.split(" … ")
    assert marker == f"[{10_000 - len(head)} more characters cut]" and set(head) == {"a"}
    assert plain(short, 100) == short  # a second pass leaves it alone
    with speaking("zh"):
        assert "个字符被截去" in plain(text, 100)
    huge = "\x1b[2K" * 1_000_000 + "tail"  # cleaned in bounded time, cut all the same
    assert len(plain(huge, 100)) <= 100 and "\x1b" not in plain(huge, 100)
    assert plain("b" * 100, 100) == "b" * 100 and plain(text, None) == text


def test_plain_removes_every_kind_of_escape_as_a_whole():
    assert plain("a\x1b[38;5;196mred\x1b[0m b") == "ared b"
    assert plain(f"x{OSC_LINK}y") == "xclick mey"
    assert plain("x\x1bP1$r0m\x1b\\y\x1b7\x1bM\x1bc\x1b(Bz") == "xyz"
    assert plain("x\x1b]0;title") == "x"  # unterminated: it would swallow what follows
    assert plain("a\x9b31mb\x9d0;t\x9cc") == "abc"
    assert plain("1\r\n2\r3\u20284\u20295") == "1\n2\n3\n4\n5"
    assert plain("\x00\x07\x08\x0b\x0c\x7f\x85ok\ud800") == "ok\ufffd"
    assert plain("👩\u200d💻 می\u200cخواهم") == "👩\u200d💻 می\u200cخواهم"  # joiners stay


def test_bad_arguments_are_refused():
    with pytest.raises(TypeError):
        plain(b"bytes")
    for limit in (10, 0, True, 1.5):
        with pytest.raises(ValueError, match="limit"):
            plain("x", limit)
    with pytest.raises(TypeError):
        clean_dict(["x"])
    with pytest.raises(TypeError):
        csv_text(1)
    with pytest.raises(TypeError):
        json_report("grades")
    with pytest.raises(TypeError):
        clean_grade({"notebook": "x"})
    with pytest.raises(TypeError):
        probe_output(3)


# --- honest text ---------------------------------------------------------------------------


def honest_grade() -> NotebookGrade:
    return NotebookGrade(
        notebook="作业/张三_03_norms.ipynb",
        solution="solutions/03_norms.ipynb",
        seconds=2.0,
        language="zh",
        notes=["内核重启了一次\n第二行说明"],
        exercises=[
            ExerciseResult(
                "RMSNorm",
                False,
                reason="mismatch",
                expected="RMSNorm: 6/6 checks passed",
                got="AssertionError: 输出不一致\nmax |diff|\t0.31 — x < 0",
                notes=["它的练习单元格抛出了 ValueError：形状不对"],
            )
        ],
    )


def test_honest_text_survives_unchanged(tmp_path):
    grade = honest_grade()
    assert clean_grade(grade) == grade
    for text in (
        "AssertionError: 输出不一致\nmax |diff|\t0.31 — x < 0",
        "tensor([[ 0.1,  -0.2]])",
        "“引号”与『书名号』，全角：１２３",
        "emoji ✅ and accents: é ñ ü",
    ):
        assert plain(text) == text
    lines = format_report(grade).split("\n")
    assert lines == [
        "作业/张三_03_norms.ipynb（对照 solutions/03_norms.ipynb，2.0 秒）",
        "  RMSNorm：未通过",
        "      预期：'RMSNorm: 6/6 checks passed'",
        "      实际：AssertionError: 输出不一致",
        "            max |diff|\t0.31 — x < 0",
        "      说明：它的练习单元格抛出了 ValueError：形状不对",
        "  说明：内核重启了一次",
        "        第二行说明",
        "  成绩：通过 0/1 个练习",
    ]
    data = json.loads(json_report([grade]))[0]
    assert data["exercises"][0]["got"] == grade.exercises[0].got
    assert data["notebook"] == grade.notebook
    write_csv([grade], tmp_path / "g.csv")
    rows = list(csv.reader(io.StringIO((tmp_path / "g.csv").read_text(encoding="utf-8"))))
    assert rows[1][0] == grade.notebook
