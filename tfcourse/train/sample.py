"""``tfcourse sample DIR``: text from a model trained with ``tfcourse train --dataset text``.

    tfcourse sample runs/capstone --chars 500 --temperature 0.8
    tfcourse sample runs/capstone --prompt "A class definition" --top-k 20 --seed 3

Reads ``DIR/checkpoint.pt`` (or a checkpoint file), rebuilds the model from the
config stored in it and the character vocabulary stored beside the config, and
prints ``--chars`` new characters after the prompt. The same seed gives the same
text on the same device.
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
from .preflight import PreflightError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = __doc__
    parser.add_argument("checkpoint", metavar="DIR",
                        help=f"a run directory (holding {CHECKPOINT_NAME}) or a checkpoint file")
    parser.add_argument("--chars", type=int, default=500, help="characters to generate (default: 500)")
    parser.add_argument("--temperature", type=float, default=0.8,
                        help="softmax temperature; 0 = always the most likely (default: 0.8)")
    parser.add_argument("--top-k", type=int, default=None,
                        help="sample among the K most likely characters only (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default: 0)")
    parser.add_argument("--prompt", default="\n", help="text to continue (default: a newline)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, mps (default: cpu)")


def load_text_model(path: str, device: torch.device) -> tuple[GPT, CharTokenizer]:
    """The model and tokenizer of a ``tfcourse train --dataset text`` checkpoint."""
    if os.path.isdir(path):
        path = os.path.join(path, CHECKPOINT_NAME)
    state = preflight.read_checkpoint(path)
    chars = state["config"].get("tokenizer")
    if not chars:
        raise PreflightError(say(f"checkpoint {path} was not trained on text (--dataset text): "
                                 f"it has no character vocabulary to write with",
                                 f"检查点 {path} 不是在文本上训练的（--dataset text）："
                                 f"它没有可用来生成文字的字符词表"))
    model = GPT(GPTConfig(**state["config"]["model"]))
    preflight.restore(path, lambda: model.load_state_dict(state["model"], strict=True))
    return model.to(device).eval(), CharTokenizer(list(chars))


def sample_text(model: GPT, tokenizer: CharTokenizer, prompt: str, n_chars: int, *,
                temperature: float, top_k: int | None, seed: int) -> str:
    """``n_chars`` characters sampled after ``prompt`` (the prompt is not repeated)."""
    device = next(model.parameters()).device
    idx = torch.tensor([tokenizer.encode(prompt)], device=device)
    generator = torch.Generator().manual_seed(seed)
    out = model.generate(idx, n_chars, temperature=temperature, top_k=top_k,
                         generator=generator)
    return tokenizer.decode(out[0, idx.shape[1]:].cpu())


def _check(args) -> None:
    if args.chars < 1:
        raise PreflightError(say(f"--chars must be >= 1, got {args.chars}",
                                 f"--chars 必须 >= 1，实际是 {args.chars}"))
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise PreflightError(say(f"--temperature must be a finite number >= 0, "
                                 f"got {args.temperature}",
                                 f"--temperature 必须是 >= 0 的有限数，实际是 {args.temperature}"))
    if args.top_k is not None and args.top_k < 1:
        raise PreflightError(say(f"--top-k must be >= 1, got {args.top_k}",
                                 f"--top-k 必须 >= 1，实际是 {args.top_k}"))
    if args.seed < 0:
        raise PreflightError(say(f"--seed must be >= 0, got {args.seed}",
                                 f"--seed 必须 >= 0，实际是 {args.seed}"))
    if not args.prompt:
        raise PreflightError(say("--prompt must not be empty", "--prompt 不能为空"))


def run(args) -> int:
    try:
        _check(args)
        device = preflight.resolve_device(args.device, lambda: torch.device("cpu"))
        model, tokenizer = load_text_model(args.checkpoint, device)
        unknown = sorted(set(args.prompt) - set(tokenizer.chars))
        if unknown:
            raise PreflightError(say(f"--prompt has characters the model never saw: "
                                     f"{''.join(unknown)!r}",
                                     f"--prompt 中有模型从未见过的字符："
                                     f"{''.join(unknown)!r}"))
        with torch.no_grad():
            text = sample_text(model, tokenizer, args.prompt, args.chars,
                               temperature=args.temperature, top_k=args.top_k, seed=args.seed)
    except PreflightError as error:
        print(say(f"error: {error}", f"错误：{error}"), file=sys.stderr)
        return 2
    print(args.prompt + text if args.prompt != "\n" else text)
    return 0
