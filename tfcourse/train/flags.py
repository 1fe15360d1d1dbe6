"""The flags of ``tfcourse train``: the parser's groups, the values a ``--preset`` implies,
and the dataset, model and training configs the flags describe."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

# Only what the help needs at the top: `tfcourse train --help` imports no torch. The configs
# the flags describe are built by functions below, which import the machinery they need.
from ..cli import _Formatter
from ..language import say, text_width
from ..nn.presets import PRESETS
from .names import CHECKPOINT_NAME, DATASETS, TEXT_SOURCES
from .presets import training_defaults

if TYPE_CHECKING:
    from ..nn.config import GPTConfig
    from .loop import TrainConfig

# Model flags: (flag, GPTConfig field, type).
MODEL_FLAGS = (
    ("--n-layers", "n_layers", int),
    ("--n-heads", "n_heads", int),
    ("--n-kv-heads", "n_kv_heads", int),
    ("--d-model", "d_model", int),
    ("--dropout", "dropout", float),
)
# Defaults of flags that are None in the parser, so --resume can tell a flag given from a default.
_FLAG_DEFAULTS = {
    "vocab_size": 32,
    "weight_decay": 0.1,
    "grad_clip": 1.0,
    "eval_every": 100,
    "eval_batches": 4,
    "seed": 0,
}


# A wide (Chinese) character, a run of spaces, or a run of anything else: the pieces a
# line of help may break between.
_WIDE = "\u2e80-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"  # CJK, full-width forms
_PIECES = re.compile(f"[{_WIDE}]|\\s+|[^\\s{_WIDE}]+")
# Punctuation that must not begin a line (it stays with the character before it), and
# punctuation that must not end one (it goes with the character after it).
_NO_LINE_START, _NO_LINE_END = frozenset("，。；：、）！？"), frozenset("（")


class HelpFormatter(argparse.RawDescriptionHelpFormatter, _Formatter):
    """The help of ``tfcourse train`` and ``tfcourse sample``: the description as written
    (its example commands keep their lines), argparse's own words ("usage:" / "用法：")
    in the reader's language, and Chinese help wrapped by its width on screen."""

    def _split_lines(self, text, width):
        if text_width(text) == len(text):  # no wide characters: argparse's own wrapping
            return super()._split_lines(text, width)
        return wrap_wide(text, width)

    def _fill_text(self, text, width, indent):
        """A Chinese description's prose refilled to the screen's width (its indented
        example commands kept as written); an English one as written."""
        if text_width(text) == len(text):
            return super()._fill_text(text, width, indent)
        paragraphs = []
        for paragraph in text.strip("\n").split("\n\n"):
            lines = paragraph.splitlines()
            if not lines[0].startswith(" "):  # prose: one line, then refilled
                lines = wrap_wide(_joined(lines), width)
            paragraphs.append("\n".join(indent + line for line in lines))
        return "\n\n".join(paragraphs) + "\n"


def _joined(lines: list[str]) -> str:
    """The lines of a paragraph as one: Chinese characters either side of a line break
    join directly, anything else with a space."""
    text = lines[0].strip()
    for line in lines[1:]:
        line = line.strip()
        wide = text_width(text[-1:]) == 2 and text_width(line[:1]) == 2
        text += ("" if wide else " ") + line
    return text


def wrap_wide(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` columns, a Chinese character counting two,
    broken between Chinese characters or at spaces (``textwrap`` breaks only at spaces,
    and counts a Chinese character as one column); a line neither starts with a closing
    mark (，。；：）) nor ends with an opening one (（)."""
    lines: list[str] = []
    line: list[tuple[bool, str]] = []  # (a space before it?, piece)
    space = False
    for piece in _PIECES.findall(text.strip()):
        if piece.isspace():
            space = True
            continue
        line.append((space and bool(line), piece))
        space = False
        if len(line) > 1 and text_width(_line(line)) > width:
            cut = len(line) - 1  # the new piece starts the next line, with what must go along
            while cut > 1 and line[cut][1][0] in _NO_LINE_START:
                cut -= 1
            while cut > 1 and line[cut - 1][1][-1] in _NO_LINE_END:
                cut -= 1
            lines.append(_line(line[:cut]))
            line = [(False, line[cut][1]), *line[cut + 1 :]]
    return lines + [_line(line)] if line else lines


def _line(pieces: list[tuple[bool, str]]) -> str:
    return "".join((" " if space else "") + piece for space, piece in pieces)


def describe(parser: argparse.ArgumentParser, english: str, chinese: str) -> None:
    """Give ``parser`` the description in the reader's language, printed as written."""
    parser.formatter_class = HelpFormatter
    parser.description = say(english, chinese)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The command's flags, in four groups: data, model, training, checkpoints and runs."""
    data = parser.add_argument_group(say("data", "数据"))
    data.add_argument(
        "--dataset",
        choices=DATASETS,
        default=None,
        help=say(
            "markov: random Markov chain with a known loss floor; copy: copy a "
            "random string; text: English from Python's own documentation "
            "(default: markov, or the preset's)",
            "markov：损失下限已知的随机马尔可夫链；copy：复制一个随机字符串；"
            "text：取自 Python 自带文档的英文文本（默认：markov，或预设中的值）",
        ),
    )
    data.add_argument(
        "--text-source",
        choices=TEXT_SOURCES,
        default=None,
        help=say(
            "text: stdlib docstrings, or the capstone corpus (the reference "
            "manual's topics + docstrings) (default: docstrings, or the preset's)",
            "text 数据的来源：标准库的 docstring，或综合项目的语料（参考手册的各个主题"
            "加上 docstring）（默认：docstrings，或预设中的值）",
        ),
    )
    data.add_argument(
        "--vocab-size",
        type=int,
        default=None,
        help=say(
            "markov: number of states; copy: number of symbols (default: 32)",
            "markov：状态数；copy：符号数（默认：32）",
        ),
    )
    data.add_argument(
        "--max-chars",
        type=int,
        default=None,
        help=say(
            "text: characters to gather (default: 200000; capstone: all)",
            "text：收集多少个字符（默认：200000；`--preset capstone`：全部）",
        ),
    )
    data.add_argument(
        "--val-block",
        type=int,
        default=None,
        metavar="N",
        help=say(
            "text: hold out one block of N characters in ten for validation "
            "(default: the last tenth; capstone: 5000, notebook 12's split)",
            "text：按 N 个字符切块，每十块留出一块作验证集"
            "（默认：留出最后十分之一；`--preset capstone`：5000，即 notebook 12 的划分）",
        ),
    )
    model = parser.add_argument_group(say("model", "模型"))
    model.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="tiny",
        help=say(
            "GPTConfig preset the flags below override (default: tiny)",
            "GPTConfig 预设，下面的参数会覆盖其中对应的值（默认：tiny）",
        ),
    )
    for flag, field, kind in MODEL_FLAGS:
        model.add_argument(
            flag, type=kind, default=None, help=say(f"override {field}", f"覆盖预设的 {field}")
        )
    model.add_argument(
        "--post-ln",
        action="store_true",
        help=say("post-LN blocks (default: pre-LN)", "使用 Post-LN 块（默认：Pre-LN）"),
    )
    loop = parser.add_argument_group(say("training", "训练"))
    loop.add_argument(
        "--steps",
        type=int,
        default=None,
        help=say(
            "total optimizer steps (default: 300 or the preset's; the checkpoint's with --resume)",
            "优化器更新的总步数（默认：300，或预设中的值；用 --resume 时取检查点中的值）",
        ),
    )
    loop.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help=say(
            "sequences per step and process (default: 16 or the preset's)",
            "每个进程每一步的序列数（默认：16，或预设中的值）",
        ),
    )
    loop.add_argument(
        "--seq-len",
        type=int,
        default=None,
        help=say(
            "tokens per sequence (default: 64 or the preset's)",
            "每条序列的词元数（默认：64，或预设中的值）",
        ),
    )
    loop.add_argument(
        "--lr",
        type=float,
        default=None,
        help=say(
            "peak learning rate (default: 3e-3 or the preset's)",
            "学习率的峰值（默认：3e-3，或预设中的值）",
        ),
    )
    loop.add_argument(
        "--min-lr",
        type=float,
        default=None,
        help=say("final learning rate (default: lr/10)", "最终的学习率（默认：lr/10）"),
    )
    loop.add_argument(
        "--warmup",
        type=int,
        default=None,
        help=say(
            "linear warmup steps (default: 10%% of --steps)",
            "学习率线性预热的步数（默认：--steps 的 10%%）",
        ),
    )
    loop.add_argument(
        "--weight-decay",
        type=float,
        default=None,
        help=say(
            "AdamW decay of 2-D weights (default: 0.1)",
            "AdamW 对二维权重的权重衰减（默认：0.1）",
        ),
    )
    loop.add_argument(
        "--grad-clip",
        type=float,
        default=None,
        help=say(
            "clip the gradient norm to this (0 = off; default: 1.0)",
            "把梯度范数裁剪到这个值以内（0 表示不裁剪；默认：1.0）",
        ),
    )
    loop.add_argument(
        "--eval-every",
        type=int,
        default=None,
        help=say(
            "validate every N steps (0 = at the end; default: 100)",
            "每 N 步验证一次（0 表示只在结束时验证；默认：100）",
        ),
    )
    loop.add_argument(
        "--eval-batches",
        type=int,
        default=None,
        help=say("(default: 4)", "每次验证用多少个批次（默认：4）"),
    )
    loop.add_argument(
        "--seed", type=int, default=None, help=say("(default: 0)", "随机种子（默认：0）")
    )
    loop.add_argument(
        "--device",
        default=None,
        help=say(
            "cpu, cuda, mps (default: $TFCOURSE_DEVICE, else the best available)",
            "cpu、cuda、mps（默认：$TFCOURSE_DEVICE，未设置时用这台机器上最好的设备）",
        ),
    )
    run = parser.add_argument_group(say("checkpoints and runs", "检查点与运行"))
    run.add_argument(
        "--out",
        default=None,
        help=say(
            f"directory for {CHECKPOINT_NAME} (default: no checkpoints)",
            f"存放 {CHECKPOINT_NAME} 的目录（默认：不保存检查点）",
        ),
    )
    run.add_argument(
        "--save-every",
        type=int,
        default=0,
        help=say(
            "also checkpoint every N steps (default: only at the end)",
            "训练中每 N 步也保存一次检查点（默认：只在结束时保存）",
        ),
    )
    run.add_argument(
        "--resume",
        nargs="?",
        const="auto",
        default=None,
        metavar="CHECKPOINT",
        help=say(
            f"continue from CHECKPOINT (default: OUT/{CHECKPOINT_NAME}); the run's "
            "config comes from the checkpoint, --steps may extend it",
            f"从检查点 CHECKPOINT 断点续训（默认：OUT/{CHECKPOINT_NAME}）；"
            "训练配置取自检查点，可以用 --steps 延长训练",
        ),
    )
    run.add_argument(
        "--stop-after",
        type=int,
        default=None,
        metavar="N",
        help=say(
            "stop after N steps of this invocation (checkpoint, then --resume later)",
            "这次运行训练 N 步后就停下（保存检查点，之后用 --resume 继续）",
        ),
    )
    run.add_argument(
        "--sample",
        type=int,
        default=200,
        metavar="N",
        help=say(
            "generate N tokens at the end (0 = none; default: 200)",
            "训练结束时生成 N 个词元（0 表示不生成；默认：200）",
        ),
    )
    run.add_argument(
        "--no-progress", action="store_true", help=say("no progress bar", "不显示进度条")
    )
    run.add_argument(
        "--no-memory-check",
        action="store_true",
        help=say(
            "start even when the memory estimate exceeds what is available",
            "即使估算的内存超过可用内存，也照样开始训练",
        ),
    )
    run.add_argument(
        "--memory-limit",
        type=float,
        default=None,
        metavar="GIB",
        help=say(
            "refuse runs estimated above GIB (default: the memory available)",
            "估算所需内存超过 GIB 时拒绝运行（默认：当前可用的内存）",
        ),
    )
    run.add_argument(
        "--collective-timeout",
        type=float,
        default=300,
        metavar="SECONDS",
        help=say(
            "under torchrun, end the job when a collective waits longer than "
            "this for a frozen or dead process (at most 86400; default: 300)",
            "在 torchrun 下，一次集合通信等待卡死或已退出的进程超过这么多秒时，"
            "结束整个任务（最多 86400；默认：300）",
        ),
    )


def apply_preset(args) -> None:
    """Fill every flag left unset with the value the ``--preset`` implies; ``args.given``
    names the flags given on the command line (``--resume`` compares only those)."""
    args.given = {name for name, value in vars(args).items() if value is not None}
    args.steps_given = args.steps  # --resume keeps the checkpoint's unless given
    for name, value in {**_FLAG_DEFAULTS, **training_defaults(args.preset)}.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)


def dataset_spec(args) -> dict:
    """The dataset the flags name: ``{name, kwargs}`` for ``make_dataset`` and the checkpoint."""
    if args.dataset == "markov":
        return {"name": "markov", "kwargs": {"vocab_size": args.vocab_size, "seed": 0}}
    if args.dataset == "copy":
        return {"name": "copy", "kwargs": {"n_symbols": args.vocab_size}}
    return {
        "name": "text",
        "kwargs": {
            "max_chars": args.max_chars,
            "source": args.text_source,
            "val_block": args.val_block,
        },
    }


def model_config(args, vocab_size: int) -> GPTConfig:
    """The ``--preset``'s ``GPTConfig`` with the model flags given, for ``vocab_size`` tokens."""
    from ..nn.config import GPTConfig
    from .preflight import PreflightError

    overrides = {
        field: getattr(args, field)
        for _, field, _ in MODEL_FLAGS
        if getattr(args, field) is not None
    }
    if args.post_ln:
        overrides["pre_ln"] = False
    try:
        return GPTConfig.preset(
            args.preset, vocab_size=vocab_size, max_seq_len=args.seq_len, **overrides
        )
    except ValueError as error:  # e.g. --n-heads that does not divide --d-model
        fields = {**PRESETS[args.preset], **overrides}
        raise PreflightError(say(str(error), _model_error_zh(fields, error))) from None


def _model_error_zh(fields: dict, error: ValueError) -> str:
    """The reason ``GPTConfig`` refused ``fields``, for a Chinese reader."""
    d, h, kv = fields.get("d_model"), fields.get("n_heads"), fields.get("n_kv_heads")
    if d and h and d % h:
        return (
            f"d_model={d} 不能被 n_heads={h} 整除（每个头的宽度 d_model / n_heads 必须是整数）；"
            "请调整 --d-model 或 --n-heads"
        )
    if h and kv and h % kv:
        return (
            f"n_kv_heads={kv} 必须能整除 n_heads={h}（每个键/值头由同样多的查询头共用）；"
            "请调整 --n-kv-heads 或 --n-heads"
        )
    if d and h and fields.get("positional") == "rope" and (d // h) % 2:
        return (
            f"旋转位置编码（RoPE）要求头维度为偶数，而这里 d_model / n_heads = {d // h}；"
            "请调整 --d-model 或 --n-heads"
        )
    return f"模型配置无效（{error}）"


def train_config(args) -> TrainConfig:
    """The ``TrainConfig`` of the training flags (warmup: a tenth of the steps unless given)."""
    from .loop import TrainConfig

    steps = 300 if args.steps is None else args.steps
    warmup = steps // 10 if args.warmup is None else args.warmup
    return TrainConfig(
        steps=steps,
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        max_lr=args.lr,
        min_lr=args.min_lr,
        warmup_steps=warmup,
        weight_decay=args.weight_decay,
        grad_clip=args.grad_clip if args.grad_clip > 0 else None,
        eval_every=args.eval_every,
        eval_batches=args.eval_batches,
        seed=args.seed,
    )
