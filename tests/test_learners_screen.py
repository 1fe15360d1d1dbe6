"""What a learner's screen shows: a failing check in a few lines, an unsolved exercise in one
line that does not stop Run All (tfcourse/course/screen.py)."""

import nbformat
import pytest
import torch

from tfcourse import checks
from tfcourse.authoring.run import kernel_env, run_notebook
from tfcourse.course.screen import one_line
from tfcourse.course.stubs import stub_message
from tfcourse.language import speaking, text_width

from mutants.core import (
    LearnerLayerNorm,
    LearnerMHA,
    LearnerRMSNorm,
    make_sdpa,
    mask_diagonal_excluded,
    variant,
)


class Indexes(torch.nn.Module):
    """A LayerNorm whose forward raises inside the learner's own code."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d_model))
        self.bias = torch.nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return x[..., 99]


class Doubles(Indexes):
    def forward(self, x):
        return x * 2


def test_a_failing_check_shows_its_verdict_and_the_learners_line_without_our_frames():
    with pytest.raises(AssertionError) as raised:
        checks.check_layernorm(Indexes)
    screen = "\n".join(raised.value._render_traceback_())
    assert len(screen.splitlines()) <= 8
    assert "IndexError" in screen and "return x[..., 99]" in screen
    assert "File " not in screen and "_harness" not in screen and "site-packages" not in screen


class Views(Indexes):
    """A LayerNorm whose forward raises a torch error the checks recognise."""

    def forward(self, x):
        return x.transpose(0, 1).view(-1)


def _screen(check, implementation) -> list[str]:
    with pytest.raises(AssertionError) as raised:
        check(implementation)
    return [
        line.replace("\x1b[0;31m", "").replace("\x1b[0m", "")
        for line in raised.value._render_traceback_()
    ]


def test_the_learners_line_follows_what_it_raised_and_comes_before_the_diagnosis():
    screen = _screen(checks.check_layernorm, Views)
    assert screen[0] == (
        "AssertionError: LayerNorm: calling your module raised RuntimeError (check 2 of 6)"
    )
    assert screen[1] == "  case: x (2, 5, 16): input not modified in place"
    assert screen[2].startswith("  RuntimeError: view size is not compatible")
    assert (
        screen[3].startswith("  in your code, line ")
        and "return x.transpose(0, 1).view(-1)" in screen[3]
    )
    assert screen[4].startswith("  looks like: a .view() of a tensor that is not contiguous")
    assert screen[-1] == "  (the full traceback: tc.checks.full_traceback())"


# Typical mistakes: each first line, as the screen shows it, fits 100 columns in both languages.
TYPICAL = [
    (checks.check_causal_mask, mask_diagonal_excluded),
    (checks.check_attention, make_sdpa("no_scale")),
    (checks.check_attention, make_sdpa("mask_ignored")),
    (checks.check_multi_head_attention, variant(LearnerMHA, "NoMaskMHA", mask_mode="none")),
    (checks.check_layernorm, variant(LearnerLayerNorm, "Eps", mistake="eps_outside")),
    (checks.check_rmsnorm, variant(LearnerRMSNorm, "MeanAbs", mistake="mean_abs")),
    (checks.check_layernorm, Indexes),
]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_typical_first_line_fits_the_screen(language):
    for check, implementation in TYPICAL:
        with speaking(language):
            first = _screen(check, implementation)[0]
        assert text_width(first) <= 100, first


def test_one_line_gives_the_first_line_and_the_diagnosis_in_either_language():
    wrong = variant(LearnerLayerNorm, "Eps", mistake="eps_outside")
    for language, joined in (
        ("en", "(check 4 of 6); looks like: eps"),
        ("zh", "（第 4 项检查，共 6 项）；可能的原因：eps"),
    ):
        with speaking(language), pytest.raises(AssertionError) as raised:
            checks.check_layernorm(wrong)
        message = str(raised.value)
        assert one_line(message).startswith(message.splitlines()[0])
        assert joined in one_line(message), one_line(message)
    assert one_line("A: b (check 1 of 2)\n  case: x\n  hint: h") == "A: b (check 1 of 2)"
    assert one_line("") == ""


def test_the_full_traceback_is_one_call_or_one_variable_away(capsys, monkeypatch):
    with pytest.raises(AssertionError):
        checks.check_layernorm(Doubles)
    capsys.readouterr()
    checks.full_traceback()
    assert "checks/_harness.py" in capsys.readouterr().out.replace("\\", "/")
    monkeypatch.setenv("TFCOURSE_TRACEBACK", "full")
    with pytest.raises(AssertionError) as raised:
        checks.check_layernorm(Doubles)
    assert not hasattr(raised.value, "_render_traceback_")


@pytest.mark.notebooks
def test_run_all_goes_past_an_unsolved_exercise_in_one_line(tmp_path):
    stub = f"raise NotImplementedError({stub_message('attention')!r})"
    cells = [
        "import tfcourse as tc\ntc.runtime.setup_notebook(written_for=tc.__version__)",
        f"def attention(q, k, v):\n    {stub}",
        "attention(1, 2, 3)",
        "print('the plot below the exercise')",
        "raise NotImplementedError('a real one')",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    run = run_notebook(nb, cwd=tmp_path, timeout=60, env=kernel_env(threads=1))
    statuses = [cell.status for cell in run.cells]
    assert statuses == ["ok", "ok", "ok", "ok", "error"], statuses
    unsolved = nb.cells[2].outputs
    assert [o.get("output_type") for o in unsolved] == ["stream"]
    assert unsolved[0]["text"] == f"not solved yet: {stub_message('attention')}\n"
    assert nb.cells[3].outputs[0]["text"] == "the plot below the exercise\n"


def test_only_a_jupyter_kernel_lets_a_stub_pass_as_run(monkeypatch):
    """The grader's worker runs cells in a plain IPython shell: there a stub stays an error
    (the cell fails), however the learner's first cell calls setup_notebook."""
    import IPython

    from tfcourse import runtime

    class Shell:
        def __init__(self, kernel):
            self.kernel, self.handled = kernel, []
            self.events = type(
                "Events",
                (),
                {"callbacks": {"post_run_cell": []}, "register": lambda _, event, f: None},
            )()

        def set_custom_exc(self, types, handler):
            self.handled.append(types)

    for kernel, installed in [(None, []), (object(), [(NotImplementedError,)])]:
        shell = Shell(kernel)
        monkeypatch.setattr(IPython, "get_ipython", lambda shell=shell: shell)
        runtime._learners_screen()
        assert shell.handled == installed
