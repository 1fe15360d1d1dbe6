"""The front door: `tfcourse demo` (pre-LN vs post-LN gradients).

`tfcourse lab` is tested in test_launch.py.
"""

import subprocess
import sys

import pytest

from tfcourse import cli

SMALL = [
    "--layers",
    "2",
    "--d-model",
    "32",
    "--heads",
    "4",
    "--seq-len",
    "8",
    "--batch",
    "2",
    "--vocab",
    "40",
    "--device",
    "cpu",
]


def run_demo(capsys, *extra):
    status = cli.main(["demo", *SMALL, *extra])
    out = capsys.readouterr()
    return status, out.out, out.err


def table_row(out: str, label: str) -> list[str]:
    """The cells of the first table row starting with ``label``."""
    line = next(line for line in out.splitlines() if line.strip().startswith(label))
    return line.strip()[len(label) :].split()


def test_demo_default_uses_the_lm_loss(capsys):
    status, out, _ = run_demo(capsys)
    assert status == 0
    assert "identical in both (seed 0)" in out
    assert "loss: LM cross-entropy" in out and "output.sum()" not in out
    assert table_row(out, "output shape") == ["(2,", "8,", "40)", "(2,", "8,", "40)"]
    pre, post, ratio = map(float, table_row(out, "grad norm at embedding"))
    assert pre > 0 and post > 0
    assert ratio == pytest.approx(pre / post, rel=0.02)
    assert len([line for line in out.splitlines() if "grad norm, block" in line]) == 2
    assert "Reading it:" in out and "ln(V) = 3.69" in out


def test_demo_sum_loss_explains_the_collapse(capsys):
    status, out, _ = run_demo(capsys, "--loss", "sum")
    assert status == 0
    assert "loss: output.sum() of each stack's output" in out
    assert table_row(out, "output shape") == ["(2,", "8,", "32)", "(2,", "8,", "32)"]
    pre, post, _ = map(float, table_row(out, "grad norm at embedding"))
    assert post < 1e-3 * pre  # the post-LN gradient collapses ...
    text = " ".join(out.split())
    assert "ends with a LayerNorm" in text and "the gradient of a constant is zero" in text
    assert "zero up to float round-off" in text  # ... and the demo says why


def test_demo_both_losses(capsys):
    status, out, _ = run_demo(capsys, "--loss", "both", "--seed", "3")
    assert status == 0
    assert "[1/2] loss: LM cross-entropy" in out and "[2/2] loss: output.sum()" in out
    assert "(seed 3)" in out


def test_demo_is_reproducible(capsys):
    _, first, _ = run_demo(capsys)
    _, second, _ = run_demo(capsys)
    assert first == second


@pytest.mark.parametrize(
    "bad, message",
    [
        (["--heads", "5"], "d_model must be divisible by n_heads, got d_model=32, n_heads=5"),
        (["--layers", "0"], "--layers must be a positive int, got 0"),
    ],
)
def test_demo_reports_bad_sizes(capsys, bad, message):
    status, out, err = run_demo(capsys, *bad)
    assert status == 2 and message in err and out == ""


@pytest.mark.slow
def test_python_dash_m_tfcourse_demo():
    result = subprocess.run(
        [sys.executable, "-m", "tfcourse", "demo", *SMALL],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "grad norm at embedding" in result.stdout
