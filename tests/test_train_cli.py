"""``tfcourse train``: checkpoints, resume, and data-parallel training under torchrun."""

import os
import re
import subprocess
import sys

import pytest
import torch

from tfcourse.cli import main
from tfcourse.language import speaking, text_width
from tfcourse.train.checkpoint import load_checkpoint

from helpers import BASE, refused, with_flags


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
    # TMPDIR: torchrun leaves a torchelastic_* folder there, which goes with the test's own.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", "TMPDIR": str(cwd)}
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
    from tfcourse.train.data import make_dataset
    from tfcourse.train.flags import apply_preset, dataset_spec
    from tfcourse.train.train_command import add_arguments

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


# --------------------------------------------------------------------------- in Chinese

CHINESE = re.compile(r"[\u4e00-\u9fff]")
# What a line may hold in English without being English prose: paths, numbers, punctuation.
_NOT_WORDS = re.compile(r"\S*/\S*|[\d.,:;%()\[\]|<>?=+-]+")


def untranslated(text: str) -> list[str]:
    """The lines of ``text`` a Chinese reader would read in English: lines without a Chinese
    character that hold more than numbers and paths. The model's own text (after a heading
    ``--- ...``, up to a line ``---``) is left out. ``splitlines`` also splits tqdm's
    ``\\r`` updates, so each state of a progress bar is a line."""
    found, in_sample = [], False
    for line in text.splitlines():
        line = line.strip()
        if in_sample:
            in_sample = line != "---"
            continue
        in_sample = line.startswith("--- ")
        if not CHINESE.search(line) and re.search(r"[A-Za-z]{2}", _NOT_WORDS.sub(" ", line)):
            found.append(line)
    return found


def run_in_chinese(args, capsys) -> str:
    """Run ``args`` under ``TFCOURSE_LANG=zh`` (``speaking``); assert status 0; return what
    it printed, stdout then stderr."""
    with speaking("zh"):
        code, out, err = run_cli(args, capsys)
    assert code == 0, err
    return out + err


def test_train_speaks_chinese_from_the_first_line_to_the_sample(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    with_progress = [arg for arg in BASE if arg != "--no-progress"]
    printed = {
        "copy": run_in_chinese(with_flags(BASE, dataset="copy", sample=20), capsys),
        "text": run_in_chinese(
            with_flags(BASE, dataset="text", sample=20) + ["--max-chars", "5000"], capsys
        ),
        "stopped": run_in_chinese(
            with_flags(with_progress, sample=20) + ["--out", str(out), "--stop-after", "4"], capsys
        ),
        "resumed": run_in_chinese(
            ["train", "--out", str(out), "--resume", "--steps", "10", "--eval-every", "5"]
            + ["--device", "cpu", "--sample", "20", "--no-progress"],
            capsys,
        ),
    }
    monkeypatch.setitem(sys.modules, "tqdm.std", None)  # no tqdm: a line every tenth step
    printed["lines"] = run_in_chinese(with_progress, capsys)
    for name, text in printed.items():
        assert untranslated(text) == [], (name, text)
    assert re.search(
        r"tfcourse train：copy 数据（词表 17，损失下限 0\.0000 nats）", printed["copy"]
    )
    assert re.search(r"第 8 步：训练损失 \d\.\d{4}（最近 8 步的平均），验证损失", printed["copy"])
    assert re.search(r"复制任务，贪心解码：\d+ 个符号中复制正确的占", printed["copy"])
    assert "留出集损失" in printed["text"] and "--- 采样（温度 0.8）" in printed["text"]
    assert f"已保存第 4 步的检查点：{out / 'checkpoint.pt'}" in printed["stopped"]
    assert "训练：" in printed["stopped"]  # tqdm's bar
    assert "警告：--steps 10（检查点：8）：续训将使用新的值" in printed["resumed"]
    assert f"从 {out / 'checkpoint.pt'} 的第 4 步继续训练" in printed["resumed"]
    assert "生成了 4 行、每行" in printed["resumed"] and "采样（第一行）：[" in printed["resumed"]
    assert re.search(r"第 +8/8 步  损失 \d", printed["lines"])


@pytest.mark.parametrize(
    "args",
    [
        BASE + ["--warmup", "20"],
        BASE + ["--n-heads", "3"],
        BASE + ["--lr", "nan"],
        with_flags(BASE, dataset="copy", seq_len=2),
        with_flags(BASE, dataset="text") + ["--max-chars", "3000", "--val-block", "1000"],
        ["train", "--resume", "--device", "cpu"],
        ["train", "--resume", "no-such-checkpoint.pt", "--device", "cpu"],
    ],
)
def test_train_refuses_in_chinese(args, capsys):
    with speaking("zh"):
        err = refused(args, capsys)
    assert err.startswith("错误：") and untranslated(err) == [], err
    assert CHINESE.search(err.removeprefix("错误：")), err


# Code in a line of help: {choices}, flags, paths and file names, identifiers with _ or =,
# upper-case metavars, and the command's own name.
_CODE = re.compile(
    r"\{[^}]*\}|(?<!\w)--?[\w-]+|\S*[/.]\S+|\w*[_=]\w*|\b[A-Z][A-Z_]+\b|tfcourse \w+"
)
# Two English words in a row: prose, not a name or a term.
_TWO_WORDS = re.compile(r"(?<![A-Za-z])[A-Za-z]{2,}[,;:.]?\s+[a-z]{2,}(?![A-Za-z])")


def english_in_help(text: str) -> list[str]:
    """The lines of ``--help`` with English prose in them, once code is taken out; the
    usage block (flags and metavars only) and the example commands are code."""
    usage, _, rest = text.partition("\n\n")
    assert usage.startswith(("usage: ", "用法：")), usage
    return [
        line
        for line in rest.splitlines()
        if not re.match(r"\s+(tfcourse|torchrun) ", line)  # an example command
        and _TWO_WORDS.search(_CODE.sub(" ", line))
    ]


@pytest.mark.parametrize("command", ["train", "sample"])
def test_the_help_is_chinese_for_a_chinese_reader(command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # argparse's width
    for language in ("en", "zh"):
        with speaking(language), pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        if language == "en":  # the check finds English where there is some
            assert len(english_in_help(text)) > 5, text
            continue
        assert text.startswith(f"用法：tfcourse {command} ") and "usage" not in text
        assert english_in_help(text) == [], text
        assert "%(" not in text and "%%" not in text  # argparse filled in its %-fields
        # Chinese wrapped by its width on screen (two columns a character), not by its length.
        wide = [
            line
            for line in text.splitlines()
            if CHINESE.search(line) and not re.match(r"\s+(tfcourse|torchrun) ", line)
        ]
        assert max(text_width(line) for line in wide) <= 80, text
    headings = {"train": ("数据", "模型", "训练", "检查点与运行"), "sample": ("位置参数", "选项")}
    for heading in headings[command]:
        assert re.search(f"\n{heading}[：:]\n", text), (heading, text)
