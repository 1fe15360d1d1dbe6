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
import math
import os
import sys

import torch

from ..language import say
from ..nn.config import GPTConfig
from ..nn.model import GPT
from . import preflight
from .checkpoint import CHECKPOINT_NAME
from .data import CharTokenizer
from .flags import describe
from .preflight import MAX_SEED, PreflightError

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


def load_text_model(path: str, device: torch.device) -> tuple[GPT, CharTokenizer]:
    """The model and tokenizer of a ``tfcourse train --dataset text`` checkpoint."""
    if os.path.isdir(path):
        path = os.path.join(path, CHECKPOINT_NAME)
    state = preflight.read_checkpoint(path)
    chars = state["config"].get("tokenizer")
    if not chars:
        raise PreflightError(
            say(
                f"checkpoint {path} was not trained on text (--dataset text): "
                f"it has no character vocabulary to write with",
                f"检查点 {path} 不是在文本上训练的（--dataset text）："
                f"它没有可用来生成文字的字符词表",
            )
        )
    model = GPT(GPTConfig(**state["config"]["model"]))
    preflight.restore(path, lambda: model.load_state_dict(state["model"], strict=True))
    return model.to(device).eval(), CharTokenizer(list(chars))


def sample_text(
    model: GPT,
    tokenizer: CharTokenizer,
    prompt: str,
    n_chars: int,
    *,
    temperature: float,
    top_k: int | None,
    seed: int,
) -> str:
    """``n_chars`` characters sampled after ``prompt`` (the prompt is not repeated)."""
    return "".join(
        sample_chars(
            model, tokenizer, prompt, n_chars, temperature=temperature, top_k=top_k, seed=seed
        )
    )


def sample_chars(
    model: GPT,
    tokenizer: CharTokenizer,
    prompt: str,
    n_chars: int,
    *,
    temperature: float,
    top_k: int | None,
    seed: int,
):
    """The characters of ``sample_text`` one at a time, as they are generated.

    One ``generate`` call a character draws from the generator exactly as one call for
    all of them would, so the text is the same either way."""
    device = next(model.parameters()).device
    idx = torch.tensor([tokenizer.encode(prompt)], device=device)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(n_chars):
        context = idx[:, -model.config.max_seq_len :]  # all generate looks at
        next_id = model.generate(
            context, 1, temperature=temperature, top_k=top_k, generator=generator
        )[:, -1:]
        idx = torch.cat([context, next_id], dim=1)
        yield tokenizer.decode(next_id[0].cpu())


def _check(args) -> None:
    if args.chars < 1:
        raise PreflightError(
            say(
                f"--chars must be >= 1, got {args.chars}", f"--chars 必须 >= 1，实际是 {args.chars}"
            )
        )
    if args.chars > MAX_CHARS:
        raise PreflightError(
            say(
                f"--chars must be at most {MAX_CHARS:,}, got {args.chars:,} "
                f"(run it several times with other --seed values for more)",
                f"--chars 最多为 {MAX_CHARS:,}，实际是 {args.chars:,}"
                f"（需要更多文本，可以换不同的 --seed 多运行几次）",
            )
        )
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise PreflightError(
            say(
                f"--temperature must be a finite number >= 0, got {args.temperature}",
                f"--temperature 必须是 >= 0 的有限数，实际是 {args.temperature}",
            )
        )
    if args.top_k is not None and args.top_k < 1:
        raise PreflightError(
            say(
                f"--top-k must be >= 1, got {args.top_k}", f"--top-k 必须 >= 1，实际是 {args.top_k}"
            )
        )
    if not 0 <= args.seed <= MAX_SEED:
        raise PreflightError(
            say(
                f"--seed must be in [0, {MAX_SEED}], got {args.seed}",
                f"--seed 必须在 [0, {MAX_SEED}] 区间内，实际是 {args.seed}",
            )
        )
    if not args.prompt:
        raise PreflightError(say("--prompt must not be empty", "--prompt 不能为空"))


def run(args) -> int:
    try:
        _check(args)
        device = preflight.resolve_device(args.device, lambda: torch.device("cpu"))
        model, tokenizer = load_text_model(args.checkpoint, device)
        unknown = sorted(set(args.prompt) - set(tokenizer.chars))
        if unknown:
            raise PreflightError(
                say(
                    f"--prompt has characters the model never saw: {''.join(unknown)!r}",
                    f"--prompt 中有模型从未见过的字符：{''.join(unknown)!r}",
                )
            )
    except PreflightError as error:
        print(say(f"error: {error}", f"错误：{error}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130  # nothing printed yet: nothing to keep
    return _stream(args, model, tokenizer)


def _stream(args, model, tokenizer) -> int:
    """Print the sample as it is generated; Ctrl-C keeps what was printed and ends the line."""
    written = 0
    try:
        if args.prompt != "\n":
            sys.stdout.write(args.prompt)
        with torch.no_grad():
            for char in sample_chars(
                model,
                tokenizer,
                args.prompt,
                args.chars,
                temperature=args.temperature,
                top_k=args.top_k,
                seed=args.seed,
            ):
                sys.stdout.write(char)
                sys.stdout.flush()  # a reader sees each character as it comes
                written += 1
    except KeyboardInterrupt:
        sys.stdout.write("\n")
        sys.stdout.flush()
        print(
            say(
                f"interrupted after {written:,} of {args.chars:,} characters",
                f"已中断：生成了 {args.chars:,} 个字符中的 {written:,} 个",
            ),
            file=sys.stderr,
        )
        return 130
    sys.stdout.write("\n")
    sys.stdout.flush()
    return 0
