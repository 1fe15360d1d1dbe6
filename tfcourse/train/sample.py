"""The machinery of ``tfcourse sample`` (its flags and help: ``sample_command.py``): the
checkpoint read back into a model and its character vocabulary, and the text written a
character at a time."""

from __future__ import annotations

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
from .preflight import MAX_SEED, PreflightError
from .sample_command import MAX_CHARS


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
