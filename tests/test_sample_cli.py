"""``tfcourse sample`` writes with a text model; ``--preset capstone`` fills the run's flags."""

import re

import pytest

from tfcourse.cli import build_parser, main
from tfcourse.language import speaking
from tfcourse.nn.model import GPT
from tfcourse.train.flags import apply_preset

from helpers import BASE, with_flags

TEXT = with_flags(BASE, dataset="text") + ["--max-chars", "20000"]


@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("text")
    assert main(TEXT + ["--out", str(out)]) == 0
    return out


def sample(args, capsys):
    code = main(["sample", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip()


def test_sampling_is_seeded_and_continues_the_prompt(text_run, capsys):
    first = sample([str(text_run), "--chars", "40", "--prompt", "The ", "--seed", "3"], capsys)
    again = sample(
        [str(text_run / "checkpoint.pt"), "--chars", "40", "--prompt", "The ", "--seed", "3"],
        capsys,
    )
    assert first[0] == 0 and first == again
    assert first[1].startswith("The ") and len(first[1].rstrip("\n")) == 44
    other = sample([str(text_run), "--chars", "40", "--prompt", "The ", "--seed", "4"], capsys)
    assert other[1] != first[1]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--prompt", "\u00e9"], "characters the model never saw"),
        (["--chars", "0"], "--chars must be >= 1"),
        (["--temperature", "nan"], "--temperature must be a finite number >= 0"),
        (["--top-k", "0"], "--top-k must be >= 1"),
        (["--chars", "100001"], "--chars must be at most 100,000, got 100,001"),
    ],
)
def test_bad_sampling_flags_get_one_line(args, message, text_run, capsys):
    code, _, err = sample([str(text_run), *args], capsys)
    assert code == 2 and message in err and len(err.splitlines()) == 1


def test_sampling_streams_and_ctrl_c_keeps_what_was_printed(text_run, monkeypatch, capsys):
    full = sample([str(text_run), "--chars", "30", "--prompt", "The "], capsys)[1]
    generate, calls = GPT.generate, []

    def interrupted_after_10(self, *args, **kwargs):
        calls.append(capsys.readouterr().out)  # flushed before the next character
        if len(calls) > 10:
            raise KeyboardInterrupt
        return generate(self, *args, **kwargs)

    monkeypatch.setattr(GPT, "generate", interrupted_after_10)
    code = main(["sample", str(text_run), "--chars", "30", "--prompt", "The "])
    last = capsys.readouterr()
    assert code == 130 and "Traceback" not in last.err and "interrupted after 10 of 30" in last.err
    assert calls[0] == "The " and all(len(out) == 1 for out in calls[1:])  # char by char
    assert "".join(calls) + last.out == full[:14] + "\n"  # kept, and the line ended


@pytest.mark.parametrize(
    "args, message",
    [
        (["--prompt", "\u00e9"], "--prompt 中有模型从未见过的字符：'é'"),
        (["--chars", "0"], "--chars 必须 >= 1，实际是 0"),
        (["--chars", "100001"], "--chars 最多为 100,000，实际是 100,001（"),
        (["--temperature", "nan"], "--temperature 必须是 >= 0 的有限数"),
        (["--device", "tpu0"], "--device 'tpu0' 不是 torch 认识的设备"),
    ],
)
def test_bad_sampling_flags_are_refused_in_chinese(args, message, text_run, capsys):
    with speaking("zh"):
        code, _, err = sample([str(text_run), *args], capsys)
    assert code == 2 and err.startswith("错误：") and message in err, err


def test_a_missing_checkpoint_is_said_in_chinese(tmp_path, capsys):
    with speaking("zh"):
        code, _, err = sample([str(tmp_path)], capsys)
    assert code == 2 and err == f"错误：{tmp_path / 'checkpoint.pt'} 处没有检查点"


def test_sampling_writes_the_same_text_in_either_language(text_run, capsys):
    args = [str(text_run), "--chars", "20", "--prompt", "The "]
    english = sample(args, capsys)
    with speaking("zh"):
        assert sample(args, capsys) == english  # the model's text is not translated


def test_a_model_not_trained_on_text_cannot_write(tmp_path, capsys):
    assert main(BASE + ["--out", str(tmp_path)]) == 0
    capsys.readouterr()
    code, _, err = sample([str(tmp_path)], capsys)
    assert code == 2 and "was not trained on text" in err
    with speaking("zh"):
        code, _, err = sample([str(tmp_path)], capsys)
    assert code == 2 and re.fullmatch(
        r"错误：检查点 \S+ 不是在文本上训练的（--dataset text）：.+", err
    )


def test_the_capstone_preset_fills_only_what_is_not_given():
    args = build_parser(only="train").parse_args(
        ["train", "--dataset", "text", "--preset", "capstone", "--steps", "7"]
    )
    apply_preset(args)
    assert (args.text_source, args.max_chars, args.seq_len, args.steps) == (
        "capstone",
        None,
        128,
        7,
    )
    plain = build_parser(only="train").parse_args(["train"])
    apply_preset(plain)
    assert (plain.dataset, plain.steps, plain.seq_len, plain.max_chars) == (
        "markov",
        300,
        64,
        200_000,
    )
