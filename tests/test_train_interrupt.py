"""``tfcourse train`` never loses a run: Ctrl-C or SIGTERM saves a checkpoint and says how
to resume; a checkpoint that cannot be written ends with one line and no ``.tmp`` file."""

import errno
import os
import signal

import pytest

from tfcourse.cli import main
from tfcourse.language import speaking
from tfcourse.train import checkpoint as checkpoint_module
from tfcourse.train.checkpoint import load_checkpoint
from tfcourse.train.loop import Trainer

from helpers import BASE


@pytest.fixture
def sigterm_raises():
    """SIGTERM raises in the test (as SIGINT does) instead of killing pytest, should
    ``tfcourse train`` not handle it."""

    def fail(signum, frame):
        raise AssertionError("tfcourse train did not handle SIGTERM")

    old = signal.signal(signal.SIGTERM, fail)
    yield
    signal.signal(signal.SIGTERM, old)


@pytest.mark.usefixtures("sigterm_raises")
@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_saves_the_current_step_and_says_how_to_resume(
    signum, status, tmp_path, monkeypatch, capsys
):
    step = Trainer.train_step

    def signalled_at_step_3(self):
        loss = step(self)
        if self.step == 3:
            signal.raise_signal(signum)  # as Ctrl-C or `kill` would, mid-run
        return loss

    monkeypatch.setattr(Trainer, "train_step", signalled_at_step_3)
    out = tmp_path / "run"
    try:
        code = main(BASE + ["--out", str(out)])
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C escaped tfcourse train as a KeyboardInterrupt")
    err = capsys.readouterr().err.strip()
    assert code == status, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"at step 3 of 8: saved {out / 'checkpoint.pt'}" in err
    assert f"resume with: tfcourse train --out {out} --resume --device cpu" in err
    assert load_checkpoint(out / "checkpoint.pt")["step"] == 3
    assert os.listdir(out) == ["checkpoint.pt"]
    monkeypatch.undo()
    # The saved state is whole: resuming gives the uninterrupted run's losses.
    assert main(["train", "--out", str(out), "--resume", "--device", "cpu", "--no-progress"]) == 0
    assert main(BASE + ["--out", str(tmp_path / "whole")]) == 0
    a, b = (load_checkpoint(p / "checkpoint.pt") for p in (tmp_path / "whole", out))
    assert a["history"] == b["history"]


def test_a_checkpoint_that_cannot_be_written_ends_with_one_line(tmp_path, monkeypatch, capsys):
    def disk_full(state, path):
        with open(path, "wb") as file:  # torch.save got part of the way
            file.write(b"PK\x03\x04 half a checkpoint")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(checkpoint_module.torch, "save", disk_full)
    out = tmp_path / "run"
    code = main(BASE + ["--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 1, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert (
        f"could not write the checkpoint {out / 'checkpoint.pt'} (No space left on device)" in err
    )
    assert os.listdir(out) == []  # no .tmp file left behind


@pytest.mark.usefixtures("sigterm_raises")
def test_the_interruption_is_said_in_chinese(tmp_path, monkeypatch, capsys):
    step = Trainer.train_step

    def signalled_at_step_3(self):
        loss = step(self)
        if self.step == 3:
            signal.raise_signal(signal.SIGTERM)
        return loss

    monkeypatch.setattr(Trainer, "train_step", signalled_at_step_3)
    out = tmp_path / "run"
    with speaking("zh"):
        code = main(BASE + ["--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 143, err
    assert err == (
        f"已中断（SIGTERM），停在第 3/8 步：已保存到 {out / 'checkpoint.pt'}；"
        f"继续训练请运行：tfcourse train --out {out} --resume --device cpu"
    )


def test_a_checkpoint_that_cannot_be_written_is_said_in_chinese(tmp_path, monkeypatch, capsys):
    def disk_full(state, path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(checkpoint_module.torch, "save", disk_full)
    out = tmp_path / "run"
    with speaking("zh"):
        code = main(BASE + ["--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.startswith(f"错误：无法写入检查点 {out / 'checkpoint.pt'}（"), err
