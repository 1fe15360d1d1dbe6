"""``tfcourse sample DIR``: text from a model trained with ``tfcourse train --dataset text``.

    tfcourse sample runs/capstone --chars 500 --temperature 0.8
    tfcourse sample runs/capstone --prompt "A class definition" --top-k 20 --seed 3

Reads ``DIR/checkpoint.pt`` (or a checkpoint file), rebuilds the model from the
config stored in it and the character vocabulary stored beside the config, and
prints ``--chars`` new characters (at most 100,000) after the prompt, each as soon as it
is generated. The same seed gives the same text on the same device. Ctrl-C keeps what
was printed, ends the line and exits with status 130.
"""

from __future__ import annotations

import argparse

from ..language import say
from .flags import describe
from .names import CHECKPOINT_NAME

# One forward pass a character: beyond this a typo (--chars 5000000) runs for hours.
MAX_CHARS = 100_000


# The command's help for a Chinese reader: what the module's docstring says.
DESCRIPTION_ZH = f"""tfcourse sample DIR：用 tfcourse train --dataset text 训练出的模型写文本。

    tfcourse sample runs/capstone --chars 500 --temperature 0.8
    tfcourse sample runs/capstone --prompt "A class definition" --top-k 20 --seed 3

读取 DIR/checkpoint.pt（也可以直接给一个检查点文件），按其中保存的配置重建模型，
用保存在配置旁边的字符词表，在提示词之后生成 --chars 个新字符（最多 {MAX_CHARS:,} 个），
每生成一个就立刻打印出来。同一台设备上，相同的种子给出相同的文本。按 Ctrl-C 会保留
已经打印的内容，结束这一行，并以退出码 130 退出。
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    describe(parser, __doc__, DESCRIPTION_ZH)
    parser.add_argument(
        "checkpoint",
        metavar="DIR",
        help=say(
            f"a run directory (holding {CHECKPOINT_NAME}) or a checkpoint file",
            f"一个运行目录（其中有 {CHECKPOINT_NAME}），或一个检查点文件",
        ),
    )
    parser.add_argument(
        "--chars",
        type=int,
        default=500,
        help=say(
            f"characters to generate, at most {MAX_CHARS:,} (default: 500)",
            f"要生成的字符数，最多 {MAX_CHARS:,}（默认：500）",
        ),
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.8,
        help=say(
            "softmax temperature; 0 = always the most likely (default: 0.8)",
            "softmax 的温度；0 表示总是取最可能的字符（默认：0.8）",
        ),
    )
    parser.add_argument(
        "--top-k",
        type=int,
        default=None,
        help=say(
            "sample among the K most likely characters only (default: all)",
            "只在最可能的 K 个字符中采样（默认：在全部字符中采样）",
        ),
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help=say("sampling seed (default: 0)", "采样用的随机种子（默认：0）"),
    )
    parser.add_argument(
        "--prompt",
        default="\n",
        help=say("text to continue (default: a newline)", "要续写的文本（默认：一个换行符）"),
    )
    parser.add_argument(
        "--device",
        default="cpu",
        help=say("cpu, cuda, mps (default: cpu)", "cpu、cuda、mps（默认：cpu）"),
    )


def run(args) -> int:
    """Write (``sample.py``: imported here, so that ``--help`` needs no torch)."""
    from .sample import run as write

    return write(args)
