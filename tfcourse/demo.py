"""``tfcourse demo``: pre-LN vs post-LN stacks with identical weights, side by side.

The lesson's demo: build a pre-LN and a post-LN stack with the same initial
weights, feed both the same tokens, print the output shapes and, after one
backward pass, the gradient norm at the embedding (the input of the first
block). Two losses are available:

- ``lm`` (default): next-token cross-entropy through the final LayerNorm and
  the LM head, the loss a language model is trained with;
- ``sum``: the lesson's ``output.sum()`` of each stack's output. The post-LN
  stack ends in a LayerNorm, whose output sums to a constant, so its gradient
  is float round-off; the demo says so when it prints those numbers.
"""

from __future__ import annotations

import argparse
import math
import sys

import torch

from . import _validate
from .config import GPTConfig
from .experiments import block_grad_norms, gradient_probe, twin_models
from .model import GPT
from .runtime import default_device

LOSS_CHOICES = ("lm", "sum", "both")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--layers", type=int, default=6, help="blocks per stack (default 6)")
    parser.add_argument("--d-model", type=int, default=384, help="model width D (default 384)")
    parser.add_argument("--heads", type=int, default=6, help="attention heads; must divide D (default 6)")
    parser.add_argument("--seq-len", type=int, default=64, help="tokens per sequence T (default 64)")
    parser.add_argument("--batch", type=int, default=4, help="sequences per batch B (default 4)")
    parser.add_argument("--vocab", type=int, default=512, help="vocabulary size V (default 512)")
    parser.add_argument("--device", default=None,
                        help="cpu, cuda, mps (default: $TFCOURSE_DEVICE, else cuda, else mps, else cpu)")
    parser.add_argument("--seed", type=int, default=0, help="seed for the weights and the tokens (default 0)")
    parser.add_argument("--loss", choices=LOSS_CHOICES, default="lm",
                        help="lm: LM cross-entropy (default); sum: the lesson's output.sum(); both")


def run(args: argparse.Namespace) -> int:
    try:
        for name in ("layers", "d_model", "heads", "seq_len", "batch", "vocab"):
            _validate.positive_int(f"--{name.replace('_', '-')}", getattr(args, name))
        config = GPTConfig(vocab_size=args.vocab, max_seq_len=args.seq_len, n_layers=args.layers,
                           n_heads=args.heads, d_model=args.d_model, activation="gelu", dropout=0.0)
        device = _device(args.device)
    except (TypeError, ValueError, RuntimeError) as error:
        print(f"tfcourse demo: error: {error}", file=sys.stderr)
        return 2

    pre, post = twin_models(config, seed=args.seed)
    pre, post = pre.to(device), post.to(device)
    tokens = torch.randint(0, config.vocab_size, (args.batch, args.seq_len + 1),
                           generator=torch.Generator().manual_seed(args.seed)).to(device)
    idx, targets = tokens[:, :-1], tokens[:, 1:]              # predict each next token

    _print_header(config, args, device, pre, post)
    losses = ["lm", "sum"] if args.loss == "both" else [args.loss]
    for number, loss in enumerate(losses, start=1):
        if loss == "lm":
            results = {"pre-LN": gradient_probe(pre, idx, targets, "lm"),
                       "post-LN": gradient_probe(post, idx, targets, "lm")}
            print(f"\n[{number}/{len(losses)}] loss: LM cross-entropy of the next token "
                  f"(blocks -> final LayerNorm -> LM head -> logits (B, T, V))")
            _print_table(results, config)
            print(_interpret_lm(results, config))
        else:
            results = {"pre-LN": stack_sum_probe(pre, idx), "post-LN": stack_sum_probe(post, idx)}
            print(f"\n[{number}/{len(losses)}] loss: output.sum() of each stack's output (B, T, D), "
                  f"as in the lesson (no final norm, no head)")
            _print_table(results, config)
            print(_interpret_sum(results, post, idx, config))
    return 0


def _device(name: str | None) -> torch.device:
    if not name:
        return default_device()
    device = torch.device(name)
    available = {"cuda": torch.cuda.is_available, "mps": torch.backends.mps.is_available}
    if device.type in available and not available[device.type]():
        raise ValueError(f"--device {name!r}: no {device.type} device is available to this torch; "
                         f"expected an available device such as 'cpu'")
    return device


def stack_sum_probe(model: GPT, idx: torch.Tensor) -> dict:
    """The lesson's probe: ``loss = blocks(embed(idx)).sum()``, one backward pass.

    The stack's output is the last block's output, before the GPT's final norm
    and head. Returns the same keys as ``gradient_probe``.
    """
    model.zero_grad(set_to_none=True)
    captured = {}

    def keep_input(module, args):
        args[0].retain_grad()
        captured["x"] = args[0]

    def keep_output(module, args, output):
        captured["out"] = output

    hooks = [model.blocks[0].register_forward_pre_hook(keep_input),
             model.blocks[-1].register_forward_hook(keep_output)]
    try:
        model(idx)
        value = captured["out"].sum()
        value.backward()
    finally:
        for hook in hooks:
            hook.remove()
    return {"loss": value.item(), "embedding": float(captured["x"].grad.norm()),
            "blocks": block_grad_norms(model), "output_shape": tuple(captured["out"].shape)}


def _print_header(config: GPTConfig, args, device, pre: GPT, post: GPT) -> None:
    same = all(torch.equal(a, b) for a, b in zip(pre.state_dict().values(), post.state_dict().values()))
    print("tfcourse demo: pre-LN vs post-LN, identical initial weights, same input")
    print(f"  stacks : {config.n_layers} blocks each, d_model {config.d_model}, {config.n_heads} heads "
          f"(head_dim {config.head_dim}), MLP {4 * config.d_model} with GELU, dropout 0")
    print("  pre-LN : x = x + attn(norm1(x));  x = x + mlp(norm2(x))")
    print("  post-LN: x = norm1(x + attn(x));  x = norm2(x + mlp(x))")
    print(f"  weights: {pre.num_params():,} parameters per model, "
          f"{'identical' if same else 'DIFFERENT'} in both (seed {args.seed})")
    print(f"  input  : token ids (B={args.batch}, T={args.seq_len}) from a vocabulary of {config.vocab_size}, "
          f"device {device}")


def _print_table(results: dict, config: GPTConfig) -> None:
    pre, post = results["pre-LN"], results["post-LN"]
    rows = [("output shape", str(pre["output_shape"]), str(post["output_shape"]), ""),
            ("loss value", f"{pre['loss']:.4g}", f"{post['loss']:.4g}", "")]
    grad_rows = [("grad norm at embedding", pre["embedding"], post["embedding"])]
    grad_rows += [(f"grad norm, block {i + 1} params", pre["blocks"][i], post["blocks"][i])
                  for i in _shown_blocks(config.n_layers)]
    rows += [(label, f"{a:.3g}", f"{b:.3g}", _ratio(a, b)) for label, a, b in grad_rows]
    print(f"  {'':<28}{'pre-LN':>16}{'post-LN':>16}{'pre/post':>10}")
    for label, a, b, ratio in rows:
        print(f"  {label:<28}{a:>16}{b:>16}{ratio:>10}")


def _shown_blocks(n_layers: int) -> list[int]:
    """Every block of a short stack; first, second, middle and last two of a deep one."""
    if n_layers <= 8:
        return list(range(n_layers))
    return sorted({0, 1, n_layers // 2, n_layers - 2, n_layers - 1})


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3g}" if b else "inf"


def _times(ratio: float) -> str:
    """'about the same size (ratio 1.02)' / '12.3x larger in the pre-LN stack' ..."""
    if 0.5 <= ratio <= 2.0:
        return f"about the same size in both stacks (pre/post = {ratio:.2f})"
    if ratio > 2.0:
        return f"{ratio:.3g}x larger in the pre-LN stack"
    return f"{1 / ratio:.3g}x larger in the post-LN stack"


def _interpret_lm(results: dict, config: GPTConfig) -> str:
    pre, post = results["pre-LN"], results["post-LN"]
    ratio = pre["embedding"] / post["embedding"]
    first_last = {name: r["blocks"][0] / r["blocks"][-1] for name, r in results.items()}
    per_block = [a / b for a, b in zip(pre["blocks"], post["blocks"])]
    low, high = min(per_block), max(per_block)
    if high < 0.5 or low > 2.0:
        side = "pre-LN" if low > 2.0 else "post-LN"
        low, high = sorted((low, high) if side == "pre-LN" else (1 / high, 1 / low))
        block_range = f"{low:.3g}x to {high:.3g}x larger in the {side} stack, block by block."
    else:
        block_range = f"between {low:.3g}x and {high:.3g}x (pre/post), block by block."
    log_vocab = math.log(config.vocab_size)
    near = "close to" if abs(pre["loss"] - log_vocab) < 0.5 and abs(post["loss"] - log_vocab) < 0.5 else "to be compared with"
    text = (f"Reading it: both stacks map ({', '.join(map(str, pre['output_shape'][:2]))}) token ids to "
            f"{pre['output_shape']} logits, and their losses are {near} ln(V) = {log_vocab:.3g}, the loss "
            f"of a uniform guess. "
            f"With this loss the gradient reaching the embedding is {_times(ratio)}. "
            f"The blocks' own parameter gradients are {block_range} Within each stack, block 1's "
            f"parameter gradient is {first_last['pre-LN']:.3g}x block {config.n_layers}'s (pre-LN) and "
            f"{first_last['post-LN']:.3g}x (post-LN). These are one step at initialization; how well each stack trains (and whether "
            f"post-LN needs a learning-rate warmup) is a question for a training run, not for one gradient.")
    return _wrap(text)


def _interpret_sum(results: dict, post_model: GPT, idx: torch.Tensor, config: GPTConfig) -> str:
    pre, post = results["pre-LN"], results["post-LN"]
    n = 1
    for size in post["output_shape"]:
        n *= size
    other = torch.randint(0, config.vocab_size, tuple(idx.shape),
                          generator=torch.Generator().manual_seed(12345)).to(idx.device)
    with torch.no_grad():
        other_sum = stack_output(post_model, other).sum().item()
    ratio = pre["embedding"] / post["embedding"] if post["embedding"] else float("inf")
    constant = abs(post["loss"]) < 1e-4 * n and abs(other_sum) < 1e-4 * n
    text = ("Why the numbers look like this: the post-LN stack ends with a LayerNorm. Each of its "
            "output vectors is normalized to mean 0 and then scaled by weight and shifted by bias, so "
            "the sum over the D features of one token is D * mean(x_hat * weight) + sum(bias); with the "
            "initial weight = 1 and bias = 0 that is exactly 0 for every token, whatever the input. "
            "output.sum() is then a constant, and the gradient of a constant is zero.")
    if constant:
        text += (f" Measured: the post-LN output sums to {post['loss']:.2g} over {n:,} numbers, and to "
                 f"{other_sum:.2g} for a different input: zero up to float round-off. Its gradient norm "
                 f"{post['embedding']:.2g} is that round-off pushed back through the stack, not a signal. "
                 f"The pre-LN stack ends with a residual addition, so its output.sum() = {pre['loss']:.4g} "
                 f"does depend on the input and its gradient ({pre['embedding']:.3g}) is real. The "
                 f"{ratio:.3g}x gap therefore measures the loss, not how trainable either stack is; "
                 f"use the LM loss (--loss lm) to compare them. (The last post-LN block's own "
                 f"parameters do get a gradient, {post['blocks'][-1]:.3g}: the sum depends on that "
                 f"LayerNorm's weight and bias, e.g. d sum / d bias = B*T = {n // post['output_shape'][-1]} "
                 f"for every feature; only its input no longer matters.)")
    else:
        text += (f" Measured: the post-LN output sums to {post['loss']:.4g} (and {other_sum:.4g} for a "
                 f"different input), so its final LayerNorm's weight or bias is no longer at the initial "
                 f"value and the sum is not constant here.")
    return _wrap(text)


def stack_output(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    """The last block's output ``(B, T, D)`` (the model without its final norm and head)."""
    captured = {}
    handle = model.blocks[-1].register_forward_hook(lambda m, a, out: captured.setdefault("out", out))
    try:
        model(idx)
    finally:
        handle.remove()
    return captured["out"]


def _wrap(text: str, width: int = 96) -> str:
    """A blank line, then ``text`` as one indented paragraph."""
    import textwrap

    return "\n" + textwrap.fill(" ".join(text.split()), width=width, initial_indent="  ",
                                subsequent_indent="  ")
