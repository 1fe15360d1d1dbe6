"""``tfcourse demo``'s flags, apart from the demo itself (``tfcourse.demo``, which imports
torch): ``tfcourse demo --help`` answers without it."""

from __future__ import annotations

import argparse

from .language import say

LOSS_CHOICES = ("lm", "sum", "both")
SIZES = ("layers", "d_model", "heads", "seq_len", "batch", "vocab")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        "--layers",
        type=int,
        default=6,
        help=say("blocks per stack (default 6)", "每个堆叠的块数（默认 6）"),
    )
    add(
        "--d-model",
        type=int,
        default=384,
        help=say("model width D (default 384)", "模型宽度 D（默认 384）"),
    )
    add(
        "--heads",
        type=int,
        default=6,
        help=say(
            "attention heads, must divide D (default 6)", "注意力头数，必须能整除 D（默认 6）"
        ),
    )
    add(
        "--seq-len",
        type=int,
        default=64,
        help=say("tokens per sequence T (default 64)", "每个序列的词元数 T（默认 64）"),
    )
    add(
        "--batch",
        type=int,
        default=4,
        help=say("sequences per batch B (default 4)", "每个批次的序列数 B（默认 4）"),
    )
    add(
        "--vocab",
        type=int,
        default=512,
        help=say("vocabulary size V (default 512)", "词表大小 V（默认 512）"),
    )
    add(
        "--device",
        default=None,
        help=say(
            "cpu, cuda, mps (default: $TFCOURSE_DEVICE, else cuda, else mps, else cpu)",
            "cpu、cuda 或 mps（默认：$TFCOURSE_DEVICE；未设置时依次选 cuda、mps、cpu 中"
            "第一个可用的）",
        ),
    )
    add(
        "--seed",
        type=int,
        default=0,
        help=say(
            "seed of the weights and the tokens (default 0)", "权重和词元的随机种子（默认 0）"
        ),
    )
    add(
        "--loss",
        choices=LOSS_CHOICES,
        default="lm",
        help=say(
            "lm: LM cross-entropy (default); sum: the lesson's output.sum(); both",
            "lm：语言模型的交叉熵损失（默认）；sum：课上用的 output.sum()；both：两者都算",
        ),
    )


def run(args: argparse.Namespace) -> int:
    from .demo import run as run_demo

    return run_demo(args)
