"""``tfcourse progress``: every exercise of the course, as it stands in a learner's folder."""

from __future__ import annotations

import pytest

from tfcourse.authoring.build import make_learner, solve
from tfcourse.cli import main as tfcourse_cli
from tfcourse.course import notebook_format
from tfcourse.grade.progress import Row, progress, table
from tfcourse.language import speaking

from helpers import ROOT

SOLUTIONS = ROOT / "solutions"


def _learner(name: str, *, solved: bool):
    solution = notebook_format.read_notebook(SOLUTIONS / f"{name}.ipynb")
    learner = make_learner(solution, name)
    return solve(learner, solution) if solved else learner


@pytest.mark.slow
def test_a_folder_gives_every_exercise_its_status(tmp_path, capsys):
    """Solved, wrong (its mistake named), unsolved and missing notebooks, in course order."""
    norms = _learner("03_norms", solved=True)
    cell = next(c for c in norms.cells if notebook_format.exercise_name(c) == "LayerNorm")
    biased = "var = (x - mean).pow(2).mean(dim=-1, keepdim=True)"
    assert biased in cell.source
    cell.source = cell.source.replace(biased, "var = x.var(dim=-1, keepdim=True)")
    notebook_format.write_notebook(norms, tmp_path / "03_norms.ipynb")
    notebook_format.write_notebook(
        _learner("01_attention", solved=False), tmp_path / "01_attention.ipynb"
    )
    notebook_format.write_notebook(
        _learner("02_multi_head_attention", solved=True), tmp_path / "02_multi_head_attention.ipynb"
    )
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    rows = {(r.notebook, r.exercise): r for r in progress(tmp_path, solutions_dir=SOLUTIONS)}

    assert rows["01_attention", "causal_mask"].status == "not started"
    assert rows["02_multi_head_attention", "MultiHeadAttention"].status == "passed"
    layernorm = rows["03_norms", "LayerNorm"]
    assert layernorm.status == "failing" and "unbiased" in layernorm.detail, layernorm
    assert rows["03_norms", "RMSNorm"].status == "passed"
    assert rows["12_capstone", "merge_pair"].status == "no notebook"
    assert next(iter(rows)) == ("01_attention", "causal_mask")  # course order
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing written

    assert tfcourse_cli(["progress", str(tmp_path), "--solutions", str(SOLUTIONS)]) == 0
    out = capsys.readouterr().out
    assert "4 of 35 exercises passed; 1 failing; 2 not started; 28 without a notebook" in out


def test_the_table_names_each_notebook_once_in_the_readers_language():
    rows = [
        Row("03_norms", "LayerNorm", "failing", "LayerNorm [x]: differs; looks like: unbiased"),
        Row("03_norms", "RMSNorm", "passed"),
        Row("04_mlp", "FeedForward", "no notebook"),
    ]
    lines = table(rows).splitlines()
    assert lines[1].startswith("03_norms") and lines[2].startswith(" " * len("03_norms"))
    assert "failing: LayerNorm [x]: differs; looks like: unbiased" in lines[1]
    assert lines[-1] == "1 of 3 exercises passed; 1 failing; 0 not started; 1 without a notebook"
    with speaking("zh"):
        chinese = table(rows).splitlines()
    assert chinese[0].split()[1:] == ["练习", "状态"] and "未通过" in chinese[1]
    assert chinese[-1] == "3 道练习中通过 1 道；未通过 1 道；尚未开始 0 道；缺少 notebook 的 1 道"


def test_a_missing_folder_is_said_in_one_line(tmp_path, capsys):
    assert tfcourse_cli(["progress", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a folder" in err[0]
