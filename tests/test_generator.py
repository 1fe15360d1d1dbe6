"""The learner-notebook generator (``tfcourse build-notebooks``) and the output sanitizer.

Fast: in-memory notebooks, the fixture in tests/fixtures/ and the shipped learner notebooks
(read, not run), no kernel.
"""

from __future__ import annotations

import copy
import shutil

import nbformat
import pytest
from nbformat.v4 import new_output

from tfcourse import cli
from tfcourse.authoring.build import (
    EXPECTED_LABELS,
    HINT_PREFIXES,
    HINT_WIDTH,
    build,
    expected_output,
    fill_in,
    make_learner,
    make_stub,
    solution_regions,
    solve,
    validate_solution,
)
from tfcourse.authoring.sanitize import (
    SANITIZE_PATTERNS,
    find_machine_paths,
    nbval_config,
    sanitize,
)
from tfcourse.course import notebook_format
from tfcourse.course.stubs import is_stub_message, stub_message
from tfcourse.language import text_width

from helpers import FUNCTION, METHOD, ROOT, SOLUTIONS, TESTS, tiny_solution, verdict

PREFIXES = tuple(HINT_PREFIXES.values())

# --- stubs ------------------------------------------------------------------------------


def test_stub_in_a_function_keeps_signature_and_indentation():
    stub = make_stub(FUNCTION, "Mask", "keep the lower triangle")
    assert stub.split("\n") == [
        "def causal_mask(T):",
        '    """(T, T) bool."""',
        "    # Hint: keep the lower triangle",
        (
            "    raise NotImplementedError(\"Exercise 'Mask': replace this line with your "
            'implementation")'
        ),
    ]
    compile(stub, "<stub>", "exec")


def test_stub_in_a_method_uses_the_marker_indentation_and_keeps_code_after():
    stub = make_stub(METHOD, "Norm", "rms")
    lines = stub.split("\n")
    assert "        # Hint: rms" in lines
    assert f"        raise NotImplementedError({stub_message('Norm')!r})" in lines
    assert lines[-1] == "        # code after the region stays"
    assert "rms = " not in stub and "BEGIN SOLUTION" not in stub
    compile(stub, "<stub>", "exec")


def test_stub_at_top_level_and_hint_only_on_the_first_of_several_regions():
    source = (
        "x = 1\n### BEGIN SOLUTION\ny = 2\n### END SOLUTION\n"
        "if True:\n\t### BEGIN SOLUTION\n\tz = 3\n\t### END SOLUTION"
    )
    stub = make_stub(source, "Two", "a  multi\nline hint")
    assert stub.split("\n") == [
        "x = 1",
        "# Hint: a multi line hint",
        f"raise NotImplementedError({stub_message('Two')!r})",
        "if True:",
        f"\traise NotImplementedError({stub_message('Two')!r})",
    ]
    compile(stub, "<stub>", "exec")


def test_the_chinese_stub_speaks_chinese_and_is_still_a_stub():
    """The Chinese edition's stub: its hint and message in Chinese; fill_in, the grader and
    the learner's screen recognise it as the English one."""
    stub = make_stub(METHOD, "Norm", "均方根", language="zh")
    assert "        # 提示：均方根" in stub.split("\n")
    assert "请把这一行换成你的实现" in stub and "replace this line" not in stub
    assert is_stub_message(stub_message("Norm", "zh")) and is_stub_message(stub_message("Norm"))
    assert not is_stub_message("NotImplementedError: float64 on MPS")
    assert fill_in(stub, METHOD, keep_markers=True) == METHOD


def test_stub_without_hint_raises_naming_the_exercise():
    stub = make_stub(FUNCTION, "Alice's mask")
    assert "# Hint" not in stub
    namespace = {}
    exec(compile(stub, "<stub>", "exec"), namespace)
    with pytest.raises(NotImplementedError, match="Exercise 'Alice's mask': replace this line"):
        namespace["causal_mask"](3)


@pytest.mark.parametrize(
    "source, message",
    [
        ("### BEGIN SOLUTION\nx = 1", "has no '### END SOLUTION'"),
        ("x = 1\n### END SOLUTION", "without a '### BEGIN SOLUTION'"),
        ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION", "inside another"),
    ],
)
def test_unbalanced_markers_are_errors(source, message):
    with pytest.raises(ValueError, match=message):
        solution_regions(source)


LONG_HINT = (
    "Four steps: scores are q times k with k's last two axes swapped, divided by the square "
    "root of the key width; where the mask is False, set the score to minus infinity "
    "(masked_fill); softmax over the keys; the weights times v."
)
LONG_CHINESE_HINT = (
    "先记下 model.training，切换到 eval 模式，在 torch.no_grad() 下循环：裁剪上下文，取最后一个"
    "位置的 logits，除以温度（temperature），需要时只保留 top-k（用 torch.topk 找出第 k 大的值），"
    "再用 torch.multinomial 采样一个（“采样”不是取最大值）。"
)
# Breaks after a mark, so the line it opens starts with the words after that mark: a space
# between a Chinese character and a word stays ("均方加 self.eps", "再乘以 weight").
SPACED_CHINESE_HINT = (
    "x 的平方在最后一维上取均值（keepdim=True），就是均方；用 x 除以“均方加 self.eps”的平方根"
    "（torch.rsqrt 直接给出平方根的倒数），再乘以 weight。不要减去均值。"
)


@pytest.mark.parametrize(
    ("hint", "language"),
    [(LONG_HINT, "en"), (LONG_CHINESE_HINT, "zh"), (SPACED_CHINESE_HINT, "zh")],
)
@pytest.mark.parametrize("source", [FUNCTION, METHOD])
def test_a_long_hint_wraps_at_88_columns_and_fill_in_still_inverts(source, hint, language):
    stub = make_stub(source, "X", hint, language=language)
    lines = stub.split("\n")
    first = next(i for i, line in enumerate(lines) if line.lstrip().startswith(PREFIXES))
    last = next(i for i, line in enumerate(lines) if "raise NotImplementedError" in line)
    indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
    assert last - first >= (3 if len(hint) > 100 else 2)  # wrapped onto more lines
    # Each line is a piece of the hint as written, its spaces included.
    pieces = [lines[first].strip()[len(HINT_PREFIXES[language]) :]]
    pieces += [line.strip()[len("# ") :] for line in lines[first + 1 : last]]
    assert all(piece and piece in " ".join(hint.split()) for piece in pieces), pieces
    assert all(text_width(line) <= HINT_WIDTH for line in lines[first:last])
    assert all(line.startswith(indent + "# ") for line in lines[first + 1 : last])
    # Nothing lost or added but the breaks: the words are all there, in order.
    joined = "".join(line.strip().lstrip("#").strip() for line in lines[first:last])
    assert joined.replace(" ", "") == (HINT_PREFIXES[language][2:] + hint).replace(" ", "")
    # No line starts with a closing mark or ends with an opening one.
    assert not any(line.strip()[2:3] in "，。、；：）」”" for line in lines[first + 1 : last])
    assert not any(line.rstrip()[-1] in "（「“" for line in lines[first:last])
    compile(stub, "<stub>", "exec")
    assert fill_in(stub, source, keep_markers=True) == source
    solved = fill_in(stub, source)
    assert "BEGIN SOLUTION" not in solved and "# " not in solved.replace("# code after", "")


def test_fill_in_keeps_the_comments_above_a_wrapped_hint():
    source = FUNCTION.replace("    ### BEGIN SOLUTION", "    # my own note\n    ### BEGIN SOLUTION")
    stub = make_stub(source, "X", LONG_HINT)
    assert fill_in(stub, source, keep_markers=True) == source
    assert "    # my own note" in fill_in(stub, source).split("\n")


@pytest.mark.parametrize("source", [FUNCTION, METHOD])
def test_fill_in_inverts_make_stub(source):
    stub = make_stub(source, "X", "hint")
    assert fill_in(stub, source, keep_markers=True) == source
    solved = fill_in(stub, source)
    assert "BEGIN SOLUTION" not in solved and "# Hint" not in solved
    assert solved == "\n".join(line for line in source.split("\n") if "SOLUTION" not in line)


def test_fill_in_refuses_a_cell_whose_stubs_were_removed():
    with pytest.raises(ValueError, match="0 exercise stubs"):
        fill_in("def causal_mask(T):\n    return None", FUNCTION)


# --- validation -------------------------------------------------------------------------


def test_a_valid_solution_has_no_problems():
    assert validate_solution(tiny_solution()) == []


def _problems(mutate):
    nb = tiny_solution()
    mutate(nb)
    return "\n".join(validate_solution(nb))


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (
            lambda nb: nb.cells[2].metadata["tfcourse"].pop("exercise"),
            "cell 'ex-mask' (#2): exercise cell without metadata tfcourse.exercise",
        ),
        (
            lambda nb: setattr(nb.cells[2], "source", "def causal_mask(T):\n    return 1"),
            "cell 'ex-mask' (#2): exercise cell without a '### BEGIN SOLUTION'",
        ),
        (
            lambda nb: setattr(nb.cells[2], "source", FUNCTION.replace("    ### END SOLUTION", "")),
            "cell 'ex-mask' (#2): line 3: '### BEGIN SOLUTION' has no '### END SOLUTION'",
        ),
        (lambda nb: nb.cells.pop(3), "exercise 'Mask' has no check cell"),
        (lambda nb: nb.cells.pop(2), "cell 'check-mask' (#2): check for 'Mask', but no exercise"),
        (
            lambda nb: setattr(nb.cells[4], "id", "check-mask"),
            "cell 'check-mask' (#4): id 'check-mask' is also used by cell #3",
        ),
        (
            lambda nb: setattr(nb.cells[4], "source", 'open("/home/alice/data.txt")'),
            "cell 'demo' (#4): machine-specific path '/home/alice' in the source",
        ),
        (
            lambda nb: setattr(nb.cells[4], "outputs", verdict("saved to /mnt/data/x.pt")),
            "cell 'demo' (#4): machine-specific path '/mnt/' in an output",
        ),
        (
            lambda nb: setattr(nb.cells[0], "source", "see /tmp/notes"),
            "cell 'title' (#0): machine-specific path '/tmp/' in the source",
        ),
        (
            lambda nb: setattr(nb.cells[3], "outputs", []),
            "cell 'check-mask' (#3): check cell has no stored output",
        ),
        (
            lambda nb: nb.cells[3].metadata["tags"].remove("nbval-check-output"),
            "cell 'check-mask' (#3): check cell without the 'nbval-check-output' tag",
        ),
        (
            lambda nb: setattr(
                nb.cells[3],
                "outputs",
                [new_output("error", ename="AssertionError", evalue="no", traceback=[])],
            ),
            "cell 'check-mask' (#3): check cell's stored output is an error",
        ),
        (
            lambda nb: setattr(
                nb.cells[4], "source", "### BEGIN SOLUTION\nx = 1\n### END SOLUTION"
            ),
            "cell 'demo' (#4): solution markers in a cell not tagged 'exercise'",
        ),
        (
            lambda nb: setattr(
                nb.cells[2], "source", "x = (\n### BEGIN SOLUTION\n1\n### END SOLUTION\n)"
            ),
            "cell 'ex-mask' (#2): the learner's stub does not compile",
        ),
        (lambda nb: setattr(nb.cells[4], "id", "bad id!"), "cell 'bad id!' (#4): id must be"),
    ],
)
def test_validation_names_the_cell_and_the_problem(mutate, expected):
    assert expected in _problems(mutate)


def test_urls_and_home_relative_paths_are_not_machine_paths():
    assert find_machine_paths("https://example.com/home/x and ~/tmp/y and a/tmp/b") == []
    assert find_machine_paths("C:\\Users\\bob\\x.py") == ["C:\\Users\\"]


# --- learner notebook -------------------------------------------------------------------


def test_learner_notebook_stubs_exercises_clears_outputs_marks_the_expected_verdicts():
    solution = tiny_solution()
    learner = make_learner(solution, "00_tiny")
    cells = {cell.id: cell for cell in learner.cells}
    assert [cell.id for cell in learner.cells] == [cell.id for cell in solution.cells]
    assert "raise NotImplementedError(\"Exercise 'Mask'" in cells["ex-mask"].source
    assert "raise NotImplementedError(\"Exercise 'Norm'" in cells["ex-norm"].source
    for cell_id in ("setup", "ex-mask", "demo", "ex-norm"):
        assert cells[cell_id].outputs == [] and cells[cell_id].execution_count is None
    check = cells["check-mask"]
    assert check.source == "check_mask(causal_mask)"
    # Nothing ran in a fresh notebook: no execution count, and the verdict is the
    # reference's, said to be (the grader and restamp take theirs from the solution).
    assert check.execution_count is None
    assert check.outputs == [
        new_output(
            "display_data",
            data={"text/plain": "expected (the reference's output): Mask: 3/3 checks passed"},
            metadata={"tfcourse": {"expected": True}},
        )
    ]
    assert solution.cells[3].outputs == verdict("Mask: 3/3 checks passed")  # untouched
    assert check.metadata["editable"] is False and check.metadata["deletable"] is False
    assert "editable" not in cells["demo"].metadata
    nbformat.validate(learner)


@pytest.mark.parametrize(
    ("outputs", "language", "text"),
    [
        (
            [
                new_output("stream", name="stdout", text="gpt2_small_params："),
                new_output("stream", name="stdout", text="2/2 项检查通过\n"),
            ],
            "zh",
            "预期（参考实现的输出）：gpt2_small_params：2/2 项检查通过",
        ),
        (
            verdict("A: 2/2 checks passed\nB: 3/3 checks passed"),
            "en",
            "expected (the reference's output):\n  A: 2/2 checks passed\n  B: 3/3 checks passed",
        ),
        (
            [
                new_output("stream", name="stderr", text="a warning\n"),
                new_output("execute_result", data={"text/plain": "'ok'"}, execution_count=1),
            ],
            "en",
            "expected (the reference's output): 'ok'",
        ),
    ],
)
def test_the_expected_verdict_is_marked_in_the_notebooks_language(outputs, language, text):
    shown = expected_output(outputs, language)
    assert shown.output_type == "display_data" and shown.data == {"text/plain": text}
    assert shown.metadata == {"tfcourse": {"expected": True}}
    assert expected_output([new_output("stream", name="stderr", text="x\n")]) is None


LEARNER_NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted(
    (ROOT / "notebooks" / "zh").glob("*.ipynb")
)


@pytest.mark.parametrize(
    "path", LEARNER_NOTEBOOKS, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix()
)
def test_a_fresh_learner_notebook_shows_nothing_that_did_not_run_there(path):
    """No execution count anywhere (``[4]:`` under an unsolved exercise says it ran), and
    no output but a check's expected verdict, marked as the reference's."""
    nb = notebook_format.read_notebook(path, require_ids=False)
    label = EXPECTED_LABELS[notebook_format.language_of(nb)]
    checks = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        assert cell.execution_count is None, cell.id
        if not notebook_format.is_check(cell):
            assert cell.outputs == [], cell.id
            continue
        checks += 1
        (shown,) = cell.outputs
        assert shown.output_type == "display_data", cell.id
        assert shown.metadata == {"tfcourse": {"expected": True}}, cell.id
        assert list(shown.data) == ["text/plain"] and shown.data["text/plain"].startswith(label)
        assert (
            "checks passed" in shown.data["text/plain"] or "项检查通过" in shown.data["text/plain"]
        )
    assert checks or not any(notebook_format.is_exercise(c) for c in nb.cells)


@pytest.mark.parametrize(
    "path", LEARNER_NOTEBOOKS, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix()
)
def test_hint_comments_fit_in_88_columns(path):
    nb = notebook_format.read_notebook(path, require_ids=False)
    for cell in (c for c in nb.cells if notebook_format.is_exercise(c)):
        lines = cell.source.split("\n")
        starts = [i for i, line in enumerate(lines) if line.lstrip().startswith(PREFIXES)]
        if not starts:
            continue
        (start,) = starts
        end = next(i for i in range(start, len(lines)) if "raise NotImplementedError" in lines[i])
        indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
        for line in lines[start:end]:
            assert text_width(line) <= HINT_WIDTH, (cell.id, line)
        for line in lines[start + 1 : end]:
            assert line.startswith(indent + "# ") and not line.startswith(indent + "#  "), line
        # Each line is a piece of the hint as written, its spaces kept ("加 self.eps").
        hint = " ".join(cell.metadata["tfcourse"]["hint"].split())
        pieces = [lines[start].strip().split("：" if "提示：" in lines[start] else ": ", 1)[1]]
        pieces += [line.strip()[len("# ") :] for line in lines[start + 1 : end]]
        assert all(piece in hint for piece in pieces), (cell.id, pieces)


def test_learner_metadata_is_normalized():
    solution = tiny_solution()
    solution.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"x": 1}}
    solution.metadata["vscode"] = {"interpreter": {"hash": "abc"}}
    solution.metadata["language_info"] = {
        "name": "python",
        "version": "3.11.7",
        "codemirror_mode": {"name": "ipython"},
    }
    solution.metadata["kernelspec"] = {
        "name": "myenv",
        "display_name": "My env",
        "language": "python",
    }
    solution.cells[4].metadata["execution"] = {"iopub.status.busy": "2024-01-01T00:00:00"}
    learner = make_learner(solution, "00_tiny")
    assert learner.metadata == {
        "kernelspec": notebook_format.KERNELSPEC,
        "language_info": {"name": "python"},
        "tfcourse": {"version": "0.1.0", "notebook": "00_tiny"},
    }
    assert "execution" not in learner.cells[4].metadata
    assert solution.metadata["kernelspec"]["name"] == "myenv"  # the input is not modified


def test_solve_fills_every_exercise_back_in():
    solution = tiny_solution()
    solved = solve(make_learner(solution, "00_tiny"), solution)
    for mine, reference in zip(solved.cells, solution.cells, strict=True):
        expected = "\n".join(
            line for line in reference.source.split("\n") if "SOLUTION" not in line
        )
        assert mine.source == expected


# --- build / --check --------------------------------------------------------------------


@pytest.fixture
def course(tmp_path):
    """A course folder with the fixture solution and a second, in-memory one."""
    solutions = tmp_path / "solutions"
    shutil.copytree(SOLUTIONS, solutions)
    notebook_format.write_notebook(tiny_solution(), solutions / "00_tiny.ipynb")
    return tmp_path


def test_build_is_idempotent_and_deterministic(course):
    first = build(course / "solutions", course / "notebooks")
    assert sorted(p.name for p in first.written) == ["00_tiny.ipynb", "99_fixture.ipynb"]
    before = {p.name: p.read_bytes() for p in (course / "notebooks").iterdir()}
    second = build(course / "solutions", course / "notebooks")
    assert second.written == [] and len(second.unchanged) == 2 and second.ok
    assert {p.name: p.read_bytes() for p in (course / "notebooks").iterdir()} == before
    text = before["00_tiny.ipynb"].decode()
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert text == notebook_format.dumps(nbformat.reads(text, as_version=4))


def test_check_detects_drift_missing_and_orphan_notebooks(course, capsys):
    build(course / "solutions", course / "notebooks")
    args = [
        "build-notebooks",
        "--check",
        "--solutions",
        str(course / "solutions"),
        "--out",
        str(course / "notebooks"),
    ]
    assert cli.main(args) == 0
    learner = course / "notebooks" / "99_fixture.ipynb"
    nb = nbformat.read(learner, as_version=4)
    nb.cells[3].source += "\n# edited by hand"
    nbformat.write(nb, learner)
    (course / "notebooks" / "00_tiny.ipynb").unlink()
    shutil.copy(learner, course / "notebooks" / "50_gone.ipynb")
    capsys.readouterr()
    assert cli.main(args) == 1
    out = capsys.readouterr().out
    assert "out of sync:" in out and "99_fixture.ipynb" in out and "00_tiny.ipynb" in out
    assert "orphan:" in out and "50_gone.ipynb" in out
    assert learner.read_text().count("# edited by hand") == 1  # --check writes nothing
    assert cli.main(args[:1] + args[2:]) == 0  # rebuild: fixes, removes the orphan
    assert not (course / "notebooks" / "50_gone.ipynb").exists()
    assert cli.main(args) == 0


def test_invalid_solution_fails_the_build_naming_notebook_and_cell(course, capsys):
    nb = tiny_solution()
    nb.cells[3].metadata["tags"] = ["nbval-check-output"]  # the check tag is gone
    notebook_format.write_notebook(nb, course / "solutions" / "00_tiny.ipynb")
    code = cli.main(
        [
            "build-notebooks",
            "--solutions",
            str(course / "solutions"),
            "--out",
            str(course / "notebooks"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "00_tiny.ipynb: cell 'ex-mask' (#2): exercise 'Mask' has no check cell" in err
    assert not (course / "notebooks" / "00_tiny.ipynb").exists()


def test_solutions_without_cell_ids_are_rejected(tmp_path):
    nb = tiny_solution()
    raw = nbformat.writes(nb)
    for cell in nb.cells:
        raw = raw.replace(f'"id": "{cell.id}",', "")
    path = tmp_path / "00_noids.ipynb"
    path.write_text(raw)
    with pytest.raises(ValueError, match="have no 'id'"):
        notebook_format.read_notebook(path)


def test_the_fixture_solution_is_valid_and_its_learner_version_is_stubbed():
    solution = notebook_format.read_notebook(SOLUTIONS / "99_fixture.ipynb")
    assert validate_solution(solution) == []
    learner = make_learner(solution, "99_fixture")
    stubs = [cell.source for cell in learner.cells if notebook_format.is_exercise(cell)]
    assert len(stubs) == 2 and all("raise NotImplementedError" in s for s in stubs)
    assert copy.deepcopy(learner) == learner


# --- sanitize ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "/opt/course/.venv/lib/python3.11/site-packages/torch/nn/functional.py:12: UserWarning",
            "<path>/functional.py:12: UserWarning",
        ),
        ("<Foo object at 0x7f3a12bc45d0>", "<Foo object at 0x<address>>"),
        ("C:\\Users\\bob\\course\\x.py", "<path>\\x.py"),
        ("\x1b[0;32m/home/bob/x/y.py\x1b[0m", "\x1b[0;32m<path>/y.py\x1b[0m"),
        ("RMSNorm: 6/6 checks passed", "RMSNorm: 6/6 checks passed"),
        ("https://pytorch.org/x.html or a/b/c", "https://pytorch.org/x.html or a/b/c"),
        ("mask 0xFF", "mask 0xFF"),
    ],
)
def test_sanitize_rewrites_machine_text_and_is_idempotent(text, expected):
    assert sanitize(text) == expected
    assert sanitize(expected) == expected


def test_nbval_sanitize_file_matches_the_package_patterns():
    cfg = TESTS / "nbval_sanitize.cfg"
    assert cfg.read_text() == nbval_config(), (
        "tests/nbval_sanitize.cfg is out of date; regenerate it with: python -c 'from "
        'tfcourse.course import sanitize; print(sanitize.nbval_config(), end="")\' '
        "> tests/nbval_sanitize.cfg"
    )
    from nbval.plugin import get_sanitize_patterns

    assert get_sanitize_patterns(cfg.read_text()) == SANITIZE_PATTERNS
