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

Every sentence of the interpretation is chosen from the measured numbers, and everything
is printed in the reader's language (``TFCOURSE_LANG=zh``: Chinese, tables aligned by display
width).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import textwrap
from collections.abc import Callable

import torch

from .demo_command import SIZES
from .lab.probes import gradient_probe, summed_output, twin_models
from .language import current, pad, say, text_width
from .nn.config import GPTConfig
from .nn.model import GPT
from .runtime import default_device


def run(args: argparse.Namespace) -> int:
    try:
        _check_sizes(args)
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
        print(
            say(f"tfcourse demo: error: {error}", f"tfcourse demo：错误：{error}"), file=sys.stderr
        )
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
                say(
                    "loss: LM cross-entropy of the next token "
                    "(blocks -> final LayerNorm -> LM head -> logits)",
                    "损失：下一个词元的语言模型交叉熵"
                    "（各块 -> 最后的 LayerNorm -> 语言模型头 -> logits）",
                )
            )
            results = {
                "pre-LN": gradient_probe(pre, idx, targets, "lm"),
                "post-LN": gradient_probe(post, idx, targets, "lm"),
            }
            _print_table(results, config)
            print(_interpret_lm(results, config))
        else:
            print(
                say(
                    "loss: output.sum() of each stack's output (B, T, D), as in the lesson "
                    "(no final norm, no head)",
                    "损失：每个堆叠的输出 (B, T, D) 的 output.sum()，与课上相同"
                    "（没有最后的归一化层，也没有语言模型头）",
                )
            )
            results = {
                "pre-LN": gradient_probe(pre, idx, loss="stack_sum"),
                "post-LN": gradient_probe(post, idx, loss="stack_sum"),
            }
            _print_table(results, config)
            print(_interpret_sum(results, post, idx))
    return 0


def _check_sizes(args: argparse.Namespace) -> None:
    """Refuse a size that is not positive, or heads that do not divide D, in the reader's
    language (``GPTConfig`` checks them too, in English)."""
    for name in SIZES:
        flag, value = "--" + name.replace("_", "-"), getattr(args, name)
        if value <= 0:
            raise ValueError(
                say(
                    f"{flag} must be a positive int, got {value}",
                    f"{flag} 必须是正整数，实际是 {value}",
                )
            )
    if args.d_model % args.heads:
        raise ValueError(
            say(
                f"d_model must be divisible by n_heads, got d_model={args.d_model}, "
                f"n_heads={args.heads} (d_model % n_heads = {args.d_model % args.heads})",
                f"--d-model 必须能被 --heads 整除，实际是 d_model={args.d_model}、"
                f"n_heads={args.heads}（d_model % n_heads = {args.d_model % args.heads}）",
            )
        )


def _device(name: str | None) -> torch.device:
    if not name:
        return default_device()
    try:
        device = torch.device(name)
    except RuntimeError:
        if current() != "zh":
            raise
        raise ValueError(
            f"--device {name!r} 不是 torch 认得的设备名；请用一个可用的设备，例如 cpu、cuda、mps"
        ) from None
    available: dict[str, Callable[[], bool]] = {
        "cuda": torch.cuda.is_available,
        "mps": torch.backends.mps.is_available,
    }
    if device.type in available and not available[device.type]():
        raise ValueError(
            say(
                f"--device {name!r}: no {device.type} device is available to this "
                f"torch; expected an available device such as 'cpu'",
                f"--device {name!r}：当前的 torch 没有可用的 {device.type} 设备；"
                f"请换一个可用的设备，例如 'cpu'",
            )
        )
    return device


# --- printing ----------------------------------------------------------------------------------


def _print_header(config: GPTConfig, args, device, pre: GPT, post: GPT) -> None:
    same = all(
        torch.equal(a, b)
        for a, b in zip(pre.state_dict().values(), post.state_dict().values(), strict=True)
    )
    if current() == "zh":
        _print_header_zh(config, args, device, pre, same)
        return
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


def _print_header_zh(config: GPTConfig, args, device, pre: GPT, same: bool) -> None:
    print(
        "tfcourse demo：前置层归一化（Pre-LN）与后置层归一化（Post-LN）的对比，"
        "初始权重相同，输入相同"
    )
    lines = [
        (
            "堆叠",
            f"每个堆叠 {config.n_layers} 个块，d_model {config.d_model}，{config.n_heads} 个头"
            f"（head_dim {config.head_dim}），MLP 隐藏层宽度 {4 * config.d_model}，"
            f"激活函数 GELU，dropout 为 0",
        ),
        ("Pre-LN 块", "x = x + attn(norm1(x))；x = x + mlp(norm2(x))"),
        ("Post-LN 块", "x = norm1(x + attn(x))；x = norm2(x + mlp(x))"),
        (
            "权重",
            f"每个模型 {pre.num_params():,} 个参数，两个模型的权重"
            f"{'完全相同' if same else '不同！'}（随机种子 {args.seed}）",
        ),
        (
            "输入",
            f"词元 id，形状 (B={args.batch}, T={args.seq_len})，词表大小 {config.vocab_size}，"
            f"设备 {device}",
        ),
    ]
    width = max(text_width(label) for label, _ in lines)
    for label, text in lines:
        print(f"  {pad(label, width)}：{text}")


def _print_table(results: dict, config: GPTConfig) -> None:
    pre, post = results["pre-LN"], results["post-LN"]
    rows = [
        (say("output shape", "输出形状"), str(pre["output_shape"]), str(post["output_shape"]), ""),
        (say("loss value", "损失值"), f"{pre['loss']:.4g}", f"{post['loss']:.4g}", ""),
    ]
    grads = [
        (say("grad norm at embedding", "嵌入层处的梯度范数"), pre["embedding"], post["embedding"])
    ]
    grads += [
        (
            say(f"grad norm, block {i + 1} params", f"第 {i + 1} 块参数的梯度范数"),
            pre["blocks"][i],
            post["blocks"][i],
        )
        for i in _shown_blocks(config.n_layers)
    ]
    rows += [
        (label, f"{a:.3g}", f"{b:.3g}", f"{a / b:.3g}" if b else "inf") for label, a, b in grads
    ]
    header = (
        ("测量项", "Pre-LN", "Post-LN", "Pre/Post")
        if current() == "zh"
        else ("", "pre-LN", "post-LN", "pre/post")
    )
    for label, a, b, ratio in [header, *rows]:
        print(f"  {pad(label, 28)}{pad(a, 16, '>')}{pad(b, 16, '>')}{pad(ratio, 10, '>')}")


def _shown_blocks(n_layers: int) -> list[int]:
    """Every block of a short stack; first, second, middle and last two of a deep one."""
    if n_layers <= 8:
        return list(range(n_layers))
    return sorted({0, 1, n_layers // 2, n_layers - 2, n_layers - 1})


def _compare(ratio: float) -> str:
    """Words for a pre/post ratio: same size within a factor 2, else which side is larger."""
    if 0.5 <= ratio <= 2.0:
        return say(
            f"about the same size in both stacks (pre/post = {ratio:.2f})",
            f"在两个堆叠中大小相当（Pre/Post = {ratio:.2f}）",
        )
    if ratio > 2.0:
        return say(
            f"{ratio:.3g}x larger in the pre-LN stack",
            f"在 Pre-LN 堆叠中是 Post-LN 堆叠的 {ratio:.3g} 倍",
        )
    return say(
        f"{1 / ratio:.3g}x larger in the post-LN stack",
        f"在 Post-LN 堆叠中是 Pre-LN 堆叠的 {1 / ratio:.3g} 倍",
    )


def _block_range(pre_blocks: list[float], post_blocks: list[float]) -> str:
    ratios = [a / b for a, b in zip(pre_blocks, post_blocks, strict=True)]
    low, high = min(ratios), max(ratios)
    if low > 2.0:
        return say(
            f"{low:.3g}x to {high:.3g}x larger in the pre-LN stack",
            f"在 Pre-LN 堆叠中是 Post-LN 堆叠的 {low:.3g} 到 {high:.3g} 倍",
        )
    if high < 0.5:
        return say(
            f"{1 / high:.3g}x to {1 / low:.3g}x larger in the post-LN stack",
            f"在 Post-LN 堆叠中是 Pre-LN 堆叠的 {1 / high:.3g} 到 {1 / low:.3g} 倍",
        )
    return say(
        f"between {low:.3g}x and {high:.3g}x as large in the pre-LN stack",
        f"在 Pre-LN 堆叠中是 Post-LN 堆叠的 {low:.3g} 到 {high:.3g} 倍",
    )


def _interpret_lm(results: dict, config: GPTConfig) -> str:
    pre, post = results["pre-LN"], results["post-LN"]
    log_vocab = math.log(config.vocab_size)
    near = all(abs(r["loss"] - log_vocab) < 0.5 for r in (pre, post))
    B, T = pre["output_shape"][:2]
    depth = {name: r["blocks"][0] / r["blocks"][-1] for name, r in results.items()}
    embedding = _compare(pre["embedding"] / post["embedding"])
    blocks = _block_range(pre["blocks"], post["blocks"])
    if current() == "zh":
        losses = (
            f"它们的损失都接近 ln(V) = {log_vocab:.3g}，即均匀猜测时的损失"
            if near
            else f"它们的损失可以与 ln(V) = {log_vocab:.3g}（均匀猜测时的损失）相比较"
        )
        return _paragraph(
            f"怎么读这张表：两个堆叠都把形状为 ({B}, {T}) 的词元 id 映射成形状为 "
            f"{pre['output_shape']} 的 logits；{losses}。在这个损失下，到达嵌入层的梯度"
            f"{embedding}。逐块比较，各块自身参数的梯度{blocks}。在同一个堆叠内部，第 1 块"
            f"参数的梯度是第 {config.n_layers} 块的 {depth['pre-LN']:.3g} 倍（Pre-LN），"
            f"在 Post-LN 中是 {depth['post-LN']:.3g} 倍。这些数字只是初始化时的一步；每个堆叠"
            f"训练得好不好、Post-LN 是否需要学习率预热，要靠一次训练来回答，"
            f"而不是看一次梯度。"
        )
    return _paragraph(
        f"Reading it: both stacks map ({B}, {T}) token ids to {pre['output_shape']} logits; "
        f"their losses are {'close to' if near else 'to be compared with'} ln(V) = "
        f"{log_vocab:.3g}, the loss of a uniform guess. With this loss the gradient reaching "
        f"the embedding is {embedding}. The blocks' own "
        f"parameter gradients are {blocks}, block by block. "
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
    text = say(
        "Why the numbers look like this: the post-LN stack ends with a LayerNorm. Each of "
        "its output vectors is normalized to mean 0, then scaled by weight and shifted by "
        "bias, so the sum over the D features of one token is D * mean(x_hat * weight) + "
        "sum(bias); with the initial weight = 1 and bias = 0 that is exactly 0 for every "
        "token, whatever the input. output.sum() is then a constant, and the gradient of a "
        "constant is zero.",
        "为什么会是这些数字：Post-LN 堆叠以一个 LayerNorm 结尾。它的每个输出向量先被归一化到"
        "均值为 0，再乘以 weight、加上 bias，所以一个词元在 D 个特征上的和是 "
        "D * mean(x_hat * weight) + sum(bias)；初始时 weight = 1、bias = 0，无论输入是什么，"
        "每个词元的这个和都恰好是 0。于是 output.sum() 是一个常数，而常数的梯度为零。",
    )
    if max(abs(post["loss"]), abs(other_sum)) < 1e-4 * n:
        ratio = pre["embedding"] / post["embedding"] if post["embedding"] else math.inf
        text += say(
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
            f"matters.)",
            f"实测：Post-LN 的输出在 {n:,} 个数上求和得 {post['loss']:.2g}，换一个输入则得 "
            f"{other_sum:.2g}：在浮点舍入误差范围内都是零。它的梯度范数 {post['embedding']:.2g} "
            f"只是这些舍入误差沿堆叠反向传回的结果，不是信号。Pre-LN 堆叠以残差相加结尾，所以它的 "
            f"output.sum() = {pre['loss']:.4g} 确实依赖输入，它的梯度（{pre['embedding']:.3g}）"
            f"是真实的。因此这 {ratio:.3g} 倍的差距衡量的是这个损失本身，而不是哪个堆叠更容易训练；"
            f"要比较两者，请用 --loss lm。（Post-LN 最后一个块自身的参数确实有梯度，为 "
            f"{post['blocks'][-1]:.3g}：这个和依赖该 LayerNorm 的 weight 和 bias，例如对每个"
            f"特征都有 d sum / d bias = B*T = {n // post['output_shape'][-1]}；只是它的输入"
            f"不再起作用。）",
        )
    else:
        text += say(
            f" Measured: the post-LN output sums to {post['loss']:.4g} (and {other_sum:.4g} "
            f"for a different input), so its LayerNorm's weight or bias is no longer at the "
            f"initial value and the sum is not constant here.",
            f"实测：Post-LN 的输出之和为 {post['loss']:.4g}（换一个输入为 {other_sum:.4g}），"
            f"说明它的 LayerNorm 的 weight 或 bias 已不是初始值，这里的和不是常数。",
        )
    return _paragraph(text)


def _paragraph(text: str, width: int = 96) -> str:
    """A blank line, then ``text`` as one indented paragraph (Chinese: ``_fill_chinese``)."""
    if current() == "zh":
        return "\n" + _fill_chinese(text, width=width, indent="  ")
    return "\n" + textwrap.fill(
        text, width=width, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False
    )


# Pieces a Chinese line breaks between: a run of spaces, a run of printable ASCII (a word, a
# number, code), or any other single character (a line may end after any Chinese one); an
# opening mark goes with what follows it and a closing one with what precedes it, so that no
# line ends with "（" or begins with "，".
_PIECES = re.compile(r"\s+|[（《「『“‘]*(?:[!-~]+|.)[，。；：、！？）》」』”’]*")


def _fill_chinese(text: str, width: int, indent: str) -> str:
    """``text`` in lines of at most ``width`` columns (a Chinese character takes two), each
    starting with ``indent``; an ASCII word or number is never split."""
    lines: list[str] = []
    line = indent
    for piece in _PIECES.findall(text):
        if piece.isspace():
            if line != indent:
                line += " "
            continue
        if line != indent and text_width(line) + text_width(piece) > width:
            lines.append(line.rstrip(" "))
            line = indent
        line += piece
    lines.append(line.rstrip(" "))
    return "\n".join(lines)
