"""``tfcourse train`` refuses bad input at once, in one line, with exit status 2.

One test per case: each flag out of range, an unwritable ``--out``, every kind of bad
checkpoint, an unavailable device, a run too big for memory, and a frozen torchrun
worker (which ends the job within ``--collective-timeout``).
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tfcourse.cli import main
from tfcourse.language import speaking
from tfcourse.nn.config import GPTConfig
from tfcourse.train import preflight
from tfcourse.train.checkpoint import load_checkpoint
from tfcourse.train.preflight import estimate_training_bytes

from helpers import BASE, refused, resume_args, with_flags

FROZEN = Path(__file__).parent / "fixtures" / "frozen_rank.py"


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("lr", "inf", "--lr must be a finite number > 0, got inf"),
        ("lr", "nan", "--lr must be a finite number > 0, got nan"),
        ("lr", "0", "--lr must be a finite number > 0"),
        ("grad-clip", "nan", "--grad-clip must be a finite number >= 0 (0 = off), got nan"),
        ("grad-clip", "-1", "--grad-clip must be a finite number >= 0"),
        ("save-every", "-1", "--save-every must be >= 0, got -1"),
        ("steps", "0", "--steps must be >= 1, got 0"),
        ("batch-size", "0", "--batch-size must be >= 1"),
        ("min-lr", "1", "--min-lr must be a finite number in [0, --lr="),
        ("weight-decay", "-0.1", "--weight-decay must be a finite number >= 0"),
        ("dropout", "1", "--dropout must be in [0, 1)"),
        ("collective-timeout", "0", "--collective-timeout must be > 0"),
        (
            "collective-timeout",
            "inf",
            ("--collective-timeout must be > 0 seconds and at most 86400 (a day), got inf"),
        ),
        (
            "collective-timeout",
            "nan",
            ("--collective-timeout must be > 0 seconds and at most 86400 (a day), got nan"),
        ),
        ("seed", str(2**64), f"--seed must be in [0, {2**63 - 1}], got {2**64}"),
        ("val-block", "0", "--val-block must be >= 1, got 0"),
    ],
)
def test_a_flag_out_of_range_is_refused_before_any_work(flag, value, message, tmp_path, capsys):
    out = tmp_path / "run"
    err = refused(BASE + ["--out", str(out), f"--{flag}", value], capsys)
    assert message in err
    assert not out.exists()  # refused before --out was even created


def test_an_unwritable_out_is_refused_at_start(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    err = refused(BASE + ["--out", str(blocker / "run")], capsys)
    assert err.startswith(f"error: --out {blocker / 'run'}: cannot write there")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A real checkpoint of the BASE run (1 layer, width 32)."""
    out = tmp_path_factory.mktemp("trained")
    assert main(BASE + ["--out", str(out)]) == 0
    return out / "checkpoint.pt"


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda good, bad: bad.write_bytes(b""), "is empty (0 bytes)"),
        (
            lambda good, bad: bad.write_bytes(good.read_bytes()[: good.stat().st_size // 2]),
            "is truncated or corrupt",
        ),
        (
            lambda good, bad: bad.write_text("these are my notes, not weights\n"),
            "is not a torch checkpoint",
        ),
        (
            lambda good, bad: torch.save({"weights": torch.ones(3)}, bad),
            "was not written by tfcourse train",
        ),
        (
            lambda good, bad: torch.save(
                {**torch.load(good, weights_only=True), "format": 99}, bad
            ),
            "has format 99",
        ),
    ],
)
def test_a_bad_checkpoint_gets_one_line_naming_the_file(
    make, message, checkpoint, tmp_path, capsys
):
    bad = tmp_path / "bad.pt"
    make(checkpoint, bad)
    err = refused(resume_args(bad), capsys)
    assert str(bad) in err and message in err


def test_a_checkpoint_whose_weights_do_not_fit_its_config(checkpoint, tmp_path, capsys):
    state = torch.load(checkpoint, weights_only=True)
    state["config"]["model"]["d_model"] = 64  # the weights are still width 32
    bad = tmp_path / "edited.pt"
    torch.save(state, bad)
    err = refused(resume_args(bad), capsys)
    assert str(bad) in err and "does not fit its own model config" in err


def test_resume_flags_that_contradict_the_checkpoint(checkpoint, capsys):
    err = refused(resume_args(checkpoint) + ["--n-layers", "4"], capsys)
    assert (
        "checkpoint was written for n_layers=1, n_heads=4, d_model=32, pre_ln=True; "
        "this run asks for n_layers=4"
    ) in err


def test_resume_refuses_steps_below_the_saved_step(checkpoint, tmp_path, capsys):
    copy = tmp_path / "checkpoint.pt"
    copy.write_bytes(checkpoint.read_bytes())
    err = refused(resume_args(copy) + ["--steps", "4"], capsys)
    assert "--steps 4 is below the checkpoint's step 8" in err
    assert (
        load_checkpoint(copy)["step"] == 8
        and load_checkpoint(copy)["config"]["train"]["steps"] == 8
    )


def test_resume_names_each_flag_that_differs_from_the_checkpoint(checkpoint, capsys):
    err = refused(
        resume_args(checkpoint) + ["--lr", "0.5", "--seed", "4", "--vocab-size", "32"], capsys
    )
    assert "these flags differ from the checkpoint's settings" in err
    assert "--lr 0.5 (checkpoint: 0.01)" in err and "--seed 4 (checkpoint: 3)" in err
    assert "--vocab-size 32 (checkpoint: 16)" in err
    # Flags that continue the same run are used, with a warning.
    code = main(
        resume_args(checkpoint)
        + ["--steps", "9", "--eval-every", "3", "--out", str(checkpoint.parent / "longer")]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert "warning: --steps 9 (checkpoint: 8)" in err and "warning: --eval-every 3" in err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--n-layers", "4"], "检查点是按 n_layers=1, n_heads=4, d_model=32, pre_ln=True 写的；"),
        (["--steps", "4"], "--steps 4 小于检查点已训练到的第 8 步；续训不能倒退"),
        (
            ["--lr", "0.5", "--seed", "4"],
            "这些参数与检查点的设置不一致：--lr 0.5（检查点：0.01）；",
        ),
    ],
)
def test_resume_refusals_are_said_in_chinese(extra, message, checkpoint, tmp_path, capsys):
    copy = tmp_path / "checkpoint.pt"
    copy.write_bytes(checkpoint.read_bytes())
    with speaking("zh"):
        err = refused(resume_args(copy) + extra, capsys)
    assert err.startswith(f"错误：{copy}：") and message in err, err


@pytest.mark.parametrize(
    "args, message",
    [
        (BASE + ["--memory-limit", "0.0001"], "GiB 可用；请调小 --batch-size、--seq-len 或"),
        (
            with_flags(BASE, vocab_size=1_000_000) + ["--no-memory-check"],
            "vocab_size=1000000 个词元的马尔可夫链要建 (V, V) 的 float64 表",
        ),
        (
            with_flags(BASE, dataset="text", seq_len=64) + ["--max-chars", "300"],
            "--seq-len 64 要求验证集至少有 65 个字符",
        ),
        (BASE + ["--collective-timeout", "inf"], "--collective-timeout 必须大于 0 秒且不超过"),
    ],
)
def test_refusals_before_training_are_said_in_chinese(args, message, capsys):
    with speaking("zh"):
        err = refused(args, capsys)
    assert err.startswith("错误：") and message in err, err


def test_a_validation_split_shorter_than_seq_len_is_refused_before_training(tmp_path, capsys):
    out = tmp_path / "run"
    err = refused(
        with_flags(BASE, dataset="text", seq_len=64) + ["--max-chars", "300", "--out", str(out)],
        capsys,
    )
    assert "--seq-len 64 needs a validation split of at least 65 characters" in err


def test_a_huge_vocabulary_is_refused_before_any_table_is_built(capsys):
    started = time.monotonic()
    err = refused(with_flags(BASE, vocab_size=1_000_000), capsys)
    assert "vocab 1000000" in err and "--vocab-size" in err
    # Skipping the estimate does not build a table larger than the machine: where the kernel
    # overcommits, torch.zeros of 8 TB succeeds and filling it got the process killed.
    err = refused(with_flags(BASE, vocab_size=1_000_000) + ["--no-memory-check"], capsys)
    assert "vocab_size=1000000" in err and "GiB of memory" in err
    assert time.monotonic() - started < 30


def test_an_allocation_that_fails_without_the_memory_check_is_said_in_one_line(monkeypatch, capsys):
    def impossible(config):  # more than any address space: refused by every allocator
        return torch.empty(2**62, dtype=torch.uint8)

    monkeypatch.setattr("tfcourse.train.run.GPT", impossible)
    err = refused(BASE + ["--no-memory-check"], capsys, status=1)
    assert "out of memory" in err and "can't allocate memory" in err
    assert "--no-memory-check skipped the estimate" in err


def test_an_out_without_room_for_the_checkpoint_is_refused(tmp_path, monkeypatch, capsys):
    full = preflight.shutil.disk_usage(tmp_path)._replace(free=100_000)
    monkeypatch.setattr(preflight.shutil, "disk_usage", lambda path: full)
    err = refused(BASE + ["--out", str(tmp_path / "run")], capsys)
    assert f"--out {tmp_path / 'run'}: a checkpoint of this run takes about" in err
    assert "0.1 MiB is free there" in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_an_unavailable_device_gets_one_line(capsys):
    err = refused(with_flags(BASE, device="cuda"), capsys)
    assert "--device cuda: this torch" in err and "build" in err
    assert "not a device torch knows" in refused(with_flags(BASE, device="tpu0"), capsys)


def test_a_run_too_big_for_memory_is_refused_before_allocating(capsys):
    started = time.monotonic()
    err = refused(with_flags(BASE, seq_len=16384, batch_size=16), capsys)
    assert "GiB" in err and "--no-memory-check" in err and "seq-len 16384" in err
    assert time.monotonic() - started < 30  # nothing was allocated
    err = refused(BASE + ["--memory-limit", "0.0001"], capsys)
    assert "0.0 GiB is available" in err
    assert main(BASE + ["--memory-limit", "0.0001", "--no-memory-check"]) == 0


def test_the_memory_estimate_grows_with_the_run_and_covers_the_weights():
    config = GPTConfig.preset("tiny", vocab_size=64, max_seq_len=256)
    small = estimate_training_bytes(config, 4, 64)
    assert estimate_training_bytes(config, 8, 64) > small
    assert estimate_training_bytes(config, 4, 256) > 2 * small  # the T x T scores
    n_params = sum(p.numel() for p in __import__("tfcourse").GPT(config).parameters())
    assert small > 16 * n_params  # weights, gradients, two AdamW moments: float32


@pytest.mark.slow
def test_a_frozen_torchrun_worker_ends_the_job_within_the_collective_timeout(tmp_path):
    # TMPDIR: torchrun leaves a torchelastic_* folder there, which goes with the test's own.
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONWARNINGS": "ignore",
        "TMPDIR": str(tmp_path),
    }
    env.pop("TFCOURSE_DEVICE", None)
    command = (
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            str(FROZEN),
        ]
        + BASE
        + ["--collective-timeout", "5"]
    )
    started = time.monotonic()
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    seconds = time.monotonic() - started
    assert done.returncode != 0
    assert "--collective-timeout=5 s" in done.stderr, done.stderr[-2000:]
    assert seconds < 120, seconds
