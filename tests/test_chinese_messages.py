"""Under ``TFCOURSE_LANG=zh`` (or for a notebook of the Chinese edition) the messages met
outside the checks are in Chinese: ``tfcourse doctor``, the refusals of ``tfcourse train``
and ``tfcourse sample``, and ``tfcourse grade``'s reports, with the same verdicts and
scores as in English."""

from __future__ import annotations

import copy
import re

import pytest

from tfcourse import cli, language
from tfcourse.authoring.build import solve
from tfcourse.course import notebook_format
from tfcourse.grade.gradescope import results
from tfcourse.grade.notebook import grade, grade_notebook
from tfcourse.grade.records import ExerciseResult, NotebookGrade
from tfcourse.grade.report import format_report
from tfcourse.grade.sealed import sandbox

from helpers import BASE, SOLUTIONS, refused, resume_args

CHINESE = re.compile(r"[\u4e00-\u9fff]")

pytestmark = pytest.mark.usefixtures("english_first")


def test_doctor_speaks_chinese(zh, tmp_path, capsys):
    status = cli.main(["doctor", "--root", str(tmp_path)])
    out = capsys.readouterr().out
    assert status in (0, 1)
    lines = out.splitlines()
    assert lines[0].startswith("tfcourse ") and "课程文件夹" in lines[0]
    assert all(CHINESE.search(line) for line in lines), out
    assert "Healthy" not in out and "fix:" not in out
    assert ("一切正常" in lines[-1]) == (status == 0)
    assert f"{tmp_path} 中没有 notebooks/ 或 solutions/" in out


def test_train_refuses_a_bad_flag_in_one_chinese_line(zh, tmp_path, capsys):
    err = refused(BASE + ["--out", str(tmp_path / "run"), "--lr", "inf"], capsys)
    assert err == "错误：--lr 必须是大于 0 的有限数，实际是 inf"
    assert not (tmp_path / "run").exists()


def test_train_refuses_a_bad_checkpoint_in_one_chinese_line(zh, tmp_path, capsys):
    notes = tmp_path / "notes.pt"
    notes.write_text("these are my notes, not weights\n")
    err = refused(resume_args(notes), capsys)
    assert err.startswith(f"错误：检查点 {notes} 不是 torch 检查点（"), err


def test_sample_on_a_missing_folder_speaks_chinese(zh, tmp_path, capsys):
    missing = tmp_path / "missing"
    assert cli.main(["sample", str(missing)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"错误：{missing} 处没有检查点"


def test_the_english_stays_english(tmp_path, capsys):
    missing = tmp_path / "missing"
    assert cli.main(["sample", str(missing)]) == 2
    assert capsys.readouterr().err.strip() == f"error: no checkpoint at {missing}"


def test_a_chinese_report_says_the_same_in_chinese():
    grade_ = NotebookGrade(
        notebook="alice/03_norms.ipynb",
        solution="solutions/03_norms.ipynb",
        seconds=4.2,
        language="zh",
    )
    grade_.exercises = [
        ExerciseResult("LayerNorm", True),
        ExerciseResult(
            "RMSNorm",
            False,
            expected="RMSNorm: 6/6 checks passed",
            got="AssertionError: RMSNorm: 输出不同\nmax |diff| 0.31",
            reason="error",
        ),
    ]
    assert format_report(grade_).split("\n") == [
        "alice/03_norms.ipynb（对照 solutions/03_norms.ipynb，4.2 秒）",
        "  LayerNorm：通过",
        "  RMSNorm：未通过",
        "      预期：'RMSNorm: 6/6 checks passed'",
        "      实际：AssertionError: RMSNorm: 输出不同",
        "            max |diff| 0.31",
        "  成绩：通过 1/2 个练习",
    ]
    assert "language" not in grade_.to_dict()
    english = copy.deepcopy(grade_)
    english.language = ""
    assert format_report(english).endswith("  score: 1/2 exercises passed")
    # Gradescope: field names, statuses and test names stay English, the texts do not.
    zh, en = results([grade_]), results([english])
    assert zh.keys() == en.keys() and zh["score"] == en["score"]
    assert [t["name"] for t in zh["tests"]] == [t["name"] for t in en["tests"]]
    assert [t["status"] for t in zh["tests"]] == ["passed", "failed"]
    assert "得分 1/2" in zh["output"] and "1/2 points" in en["output"]


def test_a_chinese_notebook_is_graded_in_chinese_and_its_checks_get_tfcourse_lang(
    monkeypatch, solution, learner
):
    """Without starting a worker: the grade's language and the workers' environment where
    the sealed verdicts are asked for."""
    from tfcourse.grade import notebook as grade_module
    from tfcourse.grade.sealed import session

    seen = {}

    def sealed_verdicts(notebook, solution_, names, setup, identity=""):
        seen.update(env=setup.env, timeout=setup.timeout, language=language.current())
        return {
            name: session.SealedVerdict(
                "failed", output=language.say("wrong", "错了"), reason="error"
            )
            for name in names
        }

    monkeypatch.setattr(grade_module, "grade_exercises", sealed_verdicts)
    learner.metadata["tfcourse"]["language"] = "zh"
    result = grade(learner, solution, session.Setup(env={"PATH": "/bin"}, timeout=7))
    assert seen == {"env": {"PATH": "/bin", "TFCOURSE_LANG": "zh"}, "timeout": 7, "language": "zh"}
    assert result.language == "zh" and language.current() == "en"  # only while grading
    report = format_report(result)
    assert "      实际：'错了'" in report and "  成绩：通过 0/2 个练习" in report
    assert all(CHINESE.search(word) for word in result.isolation)


def test_grade_refuses_bad_flags_and_a_missing_sandbox_in_chinese(
    zh, tmp_path, capsys, monkeypatch
):
    """The refusals before any grading (``check_arguments``): one Chinese line each."""
    from tfcourse.grade import notebook as grade_module
    from tfcourse.grade.sealed import sandbox

    monkeypatch.setattr(
        grade_module, "grade_notebook", lambda *a, **k: pytest.fail("graded despite a refusal")
    )
    notebook = tmp_path / "99_fixture.ipynb"
    notebook.write_text("{}")
    base = ["grade", str(notebook), "--solutions", str(SOLUTIONS)]
    assert cli.main([*base, "--timeout", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "错误：--timeout 必须是 1 到 86400 之间的数，实际是 0.0", err
    assert cli.main([*base, "--csv", str(tmp_path / "missing" / "grades.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("错误：--csv ") and "不存在" in err and "\n" not in err, err
    monkeypatch.setattr(sandbox, "_found", sandbox.Sandbox(None, "测试中"))
    assert cli.main([*base, "--sandbox", "bubblewrap"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("错误：无法在这里隔离学员的代码：测试中。请安装 bubblewrap"), err
    assert "--unsealed" in err and "\n" not in err


@pytest.mark.slow
@pytest.mark.notebooks
@pytest.mark.sandbox
def test_a_chinese_notebook_scores_what_the_english_one_scores(
    tmp_path, solution, learner, grading_setup
):
    """The cheapest real grade: a solved notebook (one sealed worker judges both exercises)."""
    solved = solve(learner, solution)
    english, chinese = tmp_path / "en" / "99_fixture.ipynb", tmp_path / "zh" / "99_fixture.ipynb"
    notebook_format.write_notebook(solved, english)
    solved.metadata["tfcourse"]["language"] = "zh"
    notebook_format.write_notebook(solved, chinese)
    grades = [
        grade_notebook(path, grading_setup, solutions_dir=SOLUTIONS) for path in (english, chinese)
    ]
    en, zh = (format_report(g) for g in grades)
    assert [(e.name, e.passed, e.score) for e in grades[0].exercises] == [
        (e.name, e.passed, e.score) for e in grades[1].exercises
    ]
    assert (grades[0].passed, grades[0].total) == (grades[1].passed, grades[1].total) == (2, 2)
    assert "  score: 2/2 exercises passed" in en and not CHINESE.search(en)
    assert "  成绩：通过 2/2 个练习" in zh and "  Causal mask：通过" in zh
    assert grades[1].isolation and all(CHINESE.search(word) for word in grades[1].isolation)


@pytest.mark.slow
@pytest.mark.notebooks
@pytest.mark.sandbox
def test_a_chinese_notebook_is_graded_against_the_chinese_solution(
    tmp_path, solution, learner, grading_setup
):
    """Where the course has the Chinese edition of the solution, a Chinese notebook is graded
    against it: its check cells hold the pass lines in Chinese, which the checks then print."""
    folder = tmp_path / "solutions"
    notebook_format.write_notebook(solution, folder / "99_fixture.ipynb")
    chinese_solution = copy.deepcopy(solution)
    chinese_solution.metadata["tfcourse"]["language"] = "zh"
    for cell in chinese_solution.cells:
        for output in cell.get("outputs", []):
            if "text" in output:
                output["text"] = re.sub(
                    r"^(.+): (\d+)/\2 checks passed$",
                    r"\1：\2/\2 项检查通过",
                    "".join(output["text"]),
                    flags=re.MULTILINE,
                )
    notebook_format.write_notebook(chinese_solution, folder / "zh" / "99_fixture.ipynb")
    solved = solve(learner, solution)
    solved.metadata["tfcourse"]["language"] = "zh"
    notebook_format.write_notebook(solved, tmp_path / "mine" / "99_fixture.ipynb")
    graded = grade_notebook(
        tmp_path / "mine" / "99_fixture.ipynb", grading_setup, solutions_dir=folder
    )
    assert graded.solution.replace("\\", "/").endswith("zh/99_fixture.ipynb"), graded.solution
    assert (graded.passed, graded.total) == (2, 2), format_report(graded)


def test_grade_help_speaks_chinese(monkeypatch, capsys):
    monkeypatch.setenv("TFCOURSE_LANG", "zh")
    with pytest.raises(SystemExit):
        cli.main(["grade", "--help"])
    out = capsys.readouterr().out
    assert "对照参考答案给学员的 notebook 评分" in out and "学员代码的隔离方式" in out, out
    # argparse's own words too: the usage line, the headings, the -h line.
    assert out.startswith("用法：tfcourse grade") and "位置参数" in out and "选项" in out, out
    assert "显示本帮助信息并退出" in out and "usage:" not in out and "show this help" not in out
    monkeypatch.setenv("TFCOURSE_LANG", "en")
    with pytest.raises(SystemExit):
        cli.main(["grade", "--help"])
    english = capsys.readouterr().out
    assert english.startswith("usage: tfcourse grade") and "show this help message" in english


def test_the_probes_reason_is_said_in_the_language_of_each_use(monkeypatch):
    """The probe runs once per process; a class run then grades notebooks in both
    languages, so a Chinese verdict must not carry the English reason it was found with."""
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    monkeypatch.setattr(sandbox, "_found", None)
    monkeypatch.setattr(sandbox.sys, "platform", "linux")
    with language.speaking("en"):
        found = sandbox.sandbox()
        assert found.reason == "bubblewrap (bwrap) is not installed"
    with language.speaking("zh"):
        assert sandbox.sandbox().reason == "没有安装 bubblewrap（bwrap）"
