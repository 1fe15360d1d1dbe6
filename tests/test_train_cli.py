"""``tfcourse train``: checkpoints, resume, and data-parallel training under torchrun."""

import os
import re
import subprocess
import sys

import pytest
import torch

from tfcourse.cli import main
from tfcourse.train.checkpoint import load_checkpoint

from helpers import BASE, with_flags


def run_cli(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_train_writes_a_weights_only_checkpoint(tmp_path, capsys):
    code, out, _ = run_cli(BASE + ["--out", str(tmp_path)], capsys)
    assert code == 0, out
    assert "loss floor" in out and re.search(r"step 8: train loss \d", out)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert set(state) >= {"model", "optimizer", "step", "config", "rng", "history"}
    assert state["step"] == 8
    assert state["config"]["model"]["n_layers"] == 1
    assert state["config"]["train"]["steps"] == 8
    assert state["config"]["data"] == {"name": "markov", "kwargs": {"vocab_size": 16, "seed": 0}}
    assert len(state["history"]["loss"]) == 8 and state["history"]["val_step"] == [4, 8]
    assert all(isinstance(t, torch.Tensor) for t in state["rng"]["cpu"])


def test_resume_gives_exactly_the_uninterrupted_losses(tmp_path, capsys):
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert run_cli(BASE + ["--out", str(whole)], capsys)[0] == 0
    code, out, _ = run_cli(BASE + ["--out", str(parts), "--stop-after", "3"], capsys)
    assert code == 0 and "at step 3" in out
    code, out, _ = run_cli(
        [
            "train",
            "--out",
            str(parts),
            "--resume",
            "--no-progress",
            "--sample",
            "0",
            "--device",
            "cpu",
        ],
        capsys,
    )
    assert code == 0 and "resuming from" in out and "at step 3" in out
    a, b = load_checkpoint(whole / "checkpoint.pt"), load_checkpoint(parts / "checkpoint.pt")
    assert b["step"] == 8
    assert a["history"] == b["history"]
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name


def test_save_every_and_extending_a_finished_run(tmp_path, capsys):
    code, _, _ = run_cli(
        BASE + ["--out", str(tmp_path), "--save-every", "2", "--stop-after", "5"], capsys
    )
    assert code == 0
    assert load_checkpoint(tmp_path / "checkpoint.pt")["step"] == 5
    code, _, _ = run_cli(
        [
            "train",
            "--out",
            str(tmp_path),
            "--resume",
            "--steps",
            "10",
            "--no-progress",
            "--sample",
            "0",
            "--device",
            "cpu",
        ],
        capsys,
    )
    assert code == 0
    state = load_checkpoint(tmp_path / "checkpoint.pt")
    assert state["step"] == 10 and state["config"]["train"]["steps"] == 10


@pytest.mark.parametrize("dataset", ["copy", "text"])
def test_other_datasets_and_samples(dataset, capsys):
    code, out, err = run_cli(
        with_flags(BASE, dataset=dataset, sample=20) + ["--max-chars", "5000"], capsys
    )
    assert code == 0, err
    if dataset == "copy":
        assert "copied right" in out
    else:  # what notebook 12 measures: the loss over all held-out text, real words
        assert re.search(r"held-out loss: \d\.\d{3} nats/char over all [\d,]+ validation", out)
        assert re.search(r"--- sample \(temperature 0\.8\): \d+% real words ---", out)
    assert re.search(r"trained \d+ steps in [\d.]+ min \([\d,]+ tokens/s\)", out + err)


def test_errors_are_reported_without_a_traceback(tmp_path, capsys):
    code, _, err = run_cli(BASE + ["--warmup", "20"], capsys)
    assert code == 2 and "warmup_steps (20) must be <= steps (8)" in err
    code, _, err = run_cli(["train", "--resume", "--out", str(tmp_path), "--device", "cpu"], capsys)
    assert code == 2 and "no checkpoint at" in err
    code, _, err = run_cli(["train", "--resume", "--device", "cpu"], capsys)
    assert code == 2 and "--resume needs" in err


def _torchrun(args, cwd):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    env.pop("TFCOURSE_DEVICE", None)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "tfcourse",
    ] + args
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_torchrun_two_processes_on_cpu(tmp_path):
    done = _torchrun(BASE + ["--out", str(tmp_path / "ddp")], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "2 processes (gloo)" in out
    assert out.count("tfcourse train:") == 1  # only rank 0 logs
    assert "ranks in sync: max |parameter difference| across 2 processes = 0" in out
    state = load_checkpoint(tmp_path / "ddp" / "checkpoint.pt")
    assert state["step"] == 8 and state["world_size"] == 2
    assert len(state["rng"]["cpu"]) == 2  # one RNG state per rank


@pytest.mark.slow
def test_torchrun_resume_gives_the_uninterrupted_losses(tmp_path):
    whole = _torchrun(BASE + ["--out", str(tmp_path / "whole")], tmp_path)
    assert whole.returncode == 0, whole.stderr
    first = _torchrun(BASE + ["--out", str(tmp_path / "parts"), "--stop-after", "4"], tmp_path)
    assert first.returncode == 0, first.stderr
    second = _torchrun(
        [
            "train",
            "--out",
            str(tmp_path / "parts"),
            "--resume",
            "--no-progress",
            "--sample",
            "0",
            "--device",
            "cpu",
        ],
        tmp_path,
    )
    assert second.returncode == 0, second.stderr
    a = load_checkpoint(tmp_path / "whole" / "checkpoint.pt")
    b = load_checkpoint(tmp_path / "parts" / "checkpoint.pt")
    assert a["history"]["loss"] == b["history"]["loss"]
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name


def test_the_capstone_preset_holds_out_notebook_12s_split():
    """`tfcourse train --preset capstone` scores the held-out text notebook 12 scores (one
    block in ten), not the corpus's last tenth, which is docstrings only."""
    import argparse

    from tfcourse.train import capstone
    from tfcourse.train.command import add_arguments
    from tfcourse.train.data import make_dataset
    from tfcourse.train.flags import apply_preset, dataset_spec

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--dataset", "text", "--preset", "capstone"])
    apply_preset(args)
    spec = dataset_spec(args)
    assert spec["kwargs"]["val_block"] == capstone.VAL_BLOCK
    ours, notebook = make_dataset(spec["name"], **spec["kwargs"]), capstone.capstone_data()
    assert torch.equal(ours.val, notebook.val) and torch.equal(ours.train, notebook.train)
    args = parser.parse_args(["--dataset", "text", "--preset", "capstone", "--val-block", "700"])
    apply_preset(args)
    assert dataset_spec(args)["kwargs"]["val_block"] == 700  # the flag wins
