"""``tfcourse demo``: pre-LN vs post-LN stacks with identical weights, side by side.

The lesson's demo: build a pre-LN and a post-LN stack with the same initial
weights, feed both the same tokens, print the output shapes and, after one
backward pass, the gradient norm at the embedding (the input of the first
block). Two losses are available:

- ``lm`` (default): next-token cross-entropy through the final LayerNorm and
  the LM head, the loss a language model is trained with;
- ``sum``: the lesson's ``output.sum()`` of each stack's output, the last
  block's output before the final norm (``gradient_probe(..., loss="stack_sum")``).
  The post-LN stack ends in a LayerNorm, whose output sums to a constant, so its
  gradient is float round-off; the demo says so when it prints those numbers.

Every sentence of the interpretation is chosen from the measured numbers.
"""

from __future__ import annotations

import argparse
import math
import sys
import textwrap

import torch

from .lab.probes import gradient_probe, summed_output, twin_models
from .nn import validate
from .nn.config import GPTConfig
from .nn.model import GPT
from .runtime import default_device

LOSS_CHOICES = ("lm", "sum", "both")
SIZES = ("layers", "d_model", "heads", "seq_len", "batch", "vocab")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--layers", type=int, default=6, help="blocks per stack (default 6)")
    add("--d-model", type=int, default=384, help="model width D (default 384)")
    add("--heads", type=int, default=6, help="attention heads, must divide D (default 6)")
    add("--seq-len", type=int, default=64, help="tokens per sequence T (default 64)")
    add("--batch", type=int, default=4, help="sequences per batch B (default 4)")
    add("--vocab", type=int, default=512, help="vocabulary size V (default 512)")
    add(
        "--device",
        default=None,
        help="cpu, cuda, mps (default: $TFCOURSE_DEVICE, else cuda, else mps, else cpu)",
    )
    add("--seed", type=int, default=0, help="seed of the weights and the tokens (default 0)")
    add(
        "--loss",
        choices=LOSS_CHOICES,
        default="lm",
        help="lm: LM cross-entropy (default); sum: the lesson's output.sum(); both",
    )


def run(args: argparse.Namespace) -> int:
    try:
        for name in SIZES:
            validate.positive_int("--" + name.replace("_", "-"), getattr(args, name))
        config = GPTConfig(
            vocab_size=args.vocab,
            max_seq_len=args.seq_len,
            n_layers=args.layers,
            n_heads=args.heads,
            d_model=args.d_model,
            activation="gelu",
        )
        device = _device(args.device)
    except (TypeError, ValueError, RuntimeError) as error:
        print(f"tfcourse demo: error: {error}", file=sys.stderr)
        return 2

    pre, post = (model.to(device) for model in twin_models(config, seed=args.seed))
    tokens = torch.randint(
        0,
        config.vocab_size,
        (args.batch, args.seq_len + 1),
        generator=torch.Generator().manual_seed(args.seed),
    ).to(device)
    idx, targets = tokens[:, :-1], tokens[:, 1:]  # predict each next token

    _print_header(config, args, device, pre, post)
    losses = ["lm", "sum"] if args.loss == "both" else [args.loss]
    for number, loss in enumerate(losses, start=1):
        print(f"\n[{number}/{len(losses)}] ", end="")
        if loss == "lm":
            print(
                "loss: LM cross-entropy of the next token "
                "(blocks -> final LayerNorm -> LM head -> logits)"
            )
            results = {
                "pre-LN": gradient_probe(pre, idx, targets, "lm"),
                "post-LN": gradient_probe(post, idx, targets, "lm"),
            }
            _print_table(results, config)
            print(_interpret_lm(results, config))
        else:
            print(
                "loss: output.sum() of each stack's output (B, T, D), as in the lesson "
                "(no final norm, no head)"
            )
            results = {
                "pre-LN": gradient_probe(pre, idx, loss="stack_sum"),
                "post-LN": gradient_probe(post, idx, loss="stack_sum"),
            }
            _print_table(results, config)
            print(_interpret_sum(results, post, idx))
    return 0


def _device(name: str | None) -> torch.device:
    if not name:
        return default_device()
    device = torch.device(name)
    available = {"cuda": torch.cuda.is_available, "mps": torch.backends.mps.is_available}
    if device.type in available and not available[device.type]():
        raise ValueError(
            f"--device {name!r}: no {device.type} device is available to this "
            f"torch; expected an available device such as 'cpu'"
        )
    return device


# --- printing ----------------------------------------------------------------------------------


def _print_header(config: GPTConfig, args, device, pre: GPT, post: GPT) -> None:
    same = all(
        torch.equal(a, b)
        for a, b in zip(pre.state_dict().values(), post.state_dict().values(), strict=True)
    )
    print("tfcourse demo: pre-LN vs post-LN, identical initial weights, same input")
    print(
        f"  stacks : {config.n_layers} blocks each, d_model {config.d_model}, "
        f"{config.n_heads} heads (head_dim {config.head_dim}), MLP {4 * config.d_model} "
        f"with GELU, dropout 0"
    )
    print("  pre-LN : x = x + attn(norm1(x));  x = x + mlp(norm2(x))")
    print("  post-LN: x = norm1(x + attn(x));  x = norm2(x + mlp(x))")
    print(
        f"  weights: {pre.num_params():,} parameters per model, "
        f"{'identical' if same else 'DIFFERENT'} in both (seed {args.seed})"
    )
    print(
        f"  input  : token ids (B={args.batch}, T={args.seq_len}) from a vocabulary of "
        f"{config.vocab_size}, device {device}"
    )


def _print_table(results: dict, config: GPTConfig) -> None:
    pre, post = results["pre-LN"], results["post-LN"]
    rows = [
        ("output shape", str(pre["output_shape"]), str(post["output_shape"]), ""),
        ("loss value", f"{pre['loss']:.4g}", f"{post['loss']:.4g}", ""),
    ]
    grads = [("grad norm at embedding", pre["embedding"], post["embedding"])]
    grads += [
        (f"grad norm, block {i + 1} params", pre["blocks"][i], post["blocks"][i])
        for i in _shown_blocks(config.n_layers)
    ]
    rows += [
        (label, f"{a:.3g}", f"{b:.3g}", f"{a / b:.3g}" if b else "inf") for label, a, b in grads
    ]
    print(f"  {'':<28}{'pre-LN':>16}{'post-LN':>16}{'pre/post':>10}")
    for label, a, b, ratio in rows:
        print(f"  {label:<28}{a:>16}{b:>16}{ratio:>10}")


def _shown_blocks(n_layers: int) -> list[int]:
    """Every block of a short stack; first, second, middle and last two of a deep one."""
    if n_layers <= 8:
        return list(range(n_layers))
    return sorted({0, 1, n_layers // 2, n_layers - 2, n_layers - 1})


def _compare(ratio: float) -> str:
    """Words for a pre/post ratio: same size within a factor 2, else which side is larger."""
    if 0.5 <= ratio <= 2.0:
        return f"about the same size in both stacks (pre/post = {ratio:.2f})"
    if ratio > 2.0:
        return f"{ratio:.3g}x larger in the pre-LN stack"
    return f"{1 / ratio:.3g}x larger in the post-LN stack"


def _block_range(pre_blocks: list[float], post_blocks: list[float]) -> str:
    ratios = [a / b for a, b in zip(pre_blocks, post_blocks, strict=True)]
    low, high = min(ratios), max(ratios)
    if low > 2.0:
        return f"{low:.3g}x to {high:.3g}x larger in the pre-LN stack"
    if high < 0.5:
        return f"{1 / high:.3g}x to {1 / low:.3g}x larger in the post-LN stack"
    return f"between {low:.3g}x and {high:.3g}x as large in the pre-LN stack"


def _interpret_lm(results: dict, config: GPTConfig) -> str:
    pre, post = results["pre-LN"], results["post-LN"]
    log_vocab = math.log(config.vocab_size)
    near = all(abs(r["loss"] - log_vocab) < 0.5 for r in (pre, post))
    B, T = pre["output_shape"][:2]
    depth = {name: r["blocks"][0] / r["blocks"][-1] for name, r in results.items()}
    return _paragraph(
        f"Reading it: both stacks map ({B}, {T}) token ids to {pre['output_shape']} logits; "
        f"their losses are {'close to' if near else 'to be compared with'} ln(V) = "
        f"{log_vocab:.3g}, the loss of a uniform guess. With this loss the gradient reaching "
        f"the embedding is {_compare(pre['embedding'] / post['embedding'])}. The blocks' own "
        f"parameter gradients are {_block_range(pre['blocks'], post['blocks'])}, block by block. "
        f"Within each stack, block 1's parameter gradient is {depth['pre-LN']:.3g}x block "
        f"{config.n_layers}'s (pre-LN) and {depth['post-LN']:.3g}x (post-LN). These numbers are "
        f"one step at initialization; how well each stack trains (and whether post-LN needs a "
        f"learning-rate warmup) is a question for a training run, not for one gradient."
    )


def _interpret_sum(results: dict, post_model: GPT, idx: torch.Tensor) -> str:
    pre, post = results["pre-LN"], results["post-LN"]
    n = math.prod(post["output_shape"])
    other = torch.randint(
        0,
        post_model.config.vocab_size,
        tuple(idx.shape),
        generator=torch.Generator().manual_seed(12345),
    ).to(idx.device)
    with torch.no_grad():
        other_sum = summed_output(post_model, other, "stack_sum").sum().item()
    text = (
        "Why the numbers look like this: the post-LN stack ends with a LayerNorm. Each of "
        "its output vectors is normalized to mean 0, then scaled by weight and shifted by "
        "bias, so the sum over the D features of one token is D * mean(x_hat * weight) + "
        "sum(bias); with the initial weight = 1 and bias = 0 that is exactly 0 for every "
        "token, whatever the input. output.sum() is then a constant, and the gradient of a "
        "constant is zero."
    )
    if max(abs(post["loss"]), abs(other_sum)) < 1e-4 * n:
        ratio = pre["embedding"] / post["embedding"] if post["embedding"] else math.inf
        text += (
            f" Measured: the post-LN output sums to {post['loss']:.2g} over {n:,} numbers, and "
            f"to {other_sum:.2g} for a different input: zero up to float round-off. Its gradient "
            f"norm {post['embedding']:.2g} is that round-off pushed back through the stack, not "
            f"a signal. The pre-LN stack ends with a residual addition, so its output.sum() = "
            f"{pre['loss']:.4g} does depend on the input and its gradient "
            f"({pre['embedding']:.3g}) is real. The {ratio:.3g}x gap therefore measures the "
            f"loss, not how trainable either stack is; use --loss lm to compare them. (The last "
            f"post-LN block's own parameters do get a gradient, {post['blocks'][-1]:.3g}: the "
            f"sum depends on that LayerNorm's weight and bias, e.g. d sum / d bias = B*T = "
            f"{n // post['output_shape'][-1]} for every feature; only its input no longer "
            f"matters.)"
        )
    else:
        text += (
            f" Measured: the post-LN output sums to {post['loss']:.4g} (and {other_sum:.4g} "
            f"for a different input), so its LayerNorm's weight or bias is no longer at the "
            f"initial value and the sum is not constant here."
        )
    return _paragraph(text)


def _paragraph(text: str, width: int = 96) -> str:
    """A blank line, then ``text`` as one indented paragraph."""
    return "\n" + textwrap.fill(
        text, width=width, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False
    )
