"""What a learner's screen shows: a failing check in a few lines, an unsolved exercise in one
line that does not stop Run All (tfcourse/course/screen.py)."""

import nbformat
import pytest
import torch

from tfcourse import checks
from tfcourse.authoring.run import kernel_env, run_notebook
from tfcourse.course.stubs import stub_message


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
