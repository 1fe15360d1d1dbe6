"""Check for notebook 06: a gradient-norm probe of a GPT (pre-LN vs post-LN)."""

from __future__ import annotations

import torch

from ..lab.probes import gradient_probe, twin_models
from ..language import say
from ..nn.config import GPTConfig
from ._harness import Checker, mistake
from .cases import case_seed

PROBE_CONFIG = GPTConfig(vocab_size=40, max_seq_len=12, n_layers=3, n_heads=2, d_model=16)


def check_grad_norm_probe(fn) -> None:
    """Check a gradient probe against ``tfcourse.lab.probes.gradient_probe(..., loss="lm")``.

    Interface: ``fn(model, idx, targets) -> (embedding_grad_norm, block_grad_norms)`` for
    a ``tfcourse.GPT`` ``model``, token ids ``idx (B, T)`` and ``targets (B, T)``: one
    forward and backward pass of the mean next-token cross-entropy of
    ``model(idx)``, with the model's old gradients cleared first. Returns

    - ``embedding_grad_norm`` (float): the L2 norm of d loss / d (the embedding output,
      i.e. the first block's input, shape (B, T, D)),
    - ``block_grad_norms`` (list of floats, first block first): for each block, the
      L2 norm of the gradients of all its parameters taken together.

    The model arrives with stale gradients in ``.grad``. Leave no hooks behind.

    Sub-checks (4): a pre-LN model with (2, 12) tokens; its post-LN twin; batch 1, T=1;
    no hooks left on the model and idx/targets not modified.
    """
    with Checker("grad_norm_probe") as chk:
        gen = chk.generator(9)
        pre, post = (
            m.to(chk.device, chk.dtype) for m in twin_models(PROBE_CONFIG, seed=case_seed(9))
        )
        inputs = []
        for model, kind, shape in (
            (pre, "pre-LN", (2, 12)),
            (post, "post-LN", (2, 12)),
            (pre, "pre-LN", (1, 1)),
        ):
            n = PROBE_CONFIG.n_layers
            case = say(
                f"{kind} GPT ({n} blocks), idx {shape}", f"{kind} GPT（{n} 个块），idx {shape}"
            ) + (say(": batch 1, T=1", "：批大小 1，T=1") if shape == (1, 1) else "")
            idx, targets = (
                torch.randint(PROBE_CONFIG.vocab_size, shape, generator=gen).to(chk.device)
                for _ in range(2)
            )
            want = gradient_probe(model, idx, targets, "lm")  # leaves its gradients behind
            want.update(_wrong_quantities(model, idx))
            seen = (idx.clone(), targets.clone())
            name = getattr(fn, "__name__", "fn")
            result = chk.call(
                case,
                say(
                    f"calling your {name}(model, idx, targets)",
                    f"调用你的 {name}(model, idx, targets)",
                ),
                fn,
                model,
                *seen,
            )
            emb, blocks = _unpack(chk, case, result)
            _compare(chk, case, model, idx, targets, want, emb, blocks)
            inputs.append((case, idx, targets, seen))
            chk.ok()

        for name, module in pre.named_modules():
            for kind in (
                "_forward_hooks",
                "_forward_pre_hooks",
                "_backward_hooks",
                "_backward_pre_hooks",
            ):
                if getattr(module, kind, None):
                    where, hook = f"model.{name or '(root)'}", kind.strip("_")
                    chk.fail(
                        say("after the calls", "所有调用结束之后"),
                        say(
                            f"a hook is still registered on {where} ({hook})",
                            f"{where} 上仍注册着一个钩子（{hook}）",
                        ),
                        hint=say(
                            "keep the handle and call handle.remove() in a finally: block",
                            "保存注册时返回的 handle，并在 finally: 块中调用 handle.remove()",
                        ),
                    )
        for case, idx, targets, (idx_seen, targets_seen) in inputs:
            chk.unchanged(case, "idx", idx, idx_seen)
            chk.unchanged(case, "targets", targets, targets_seen)
        chk.ok()


def _unpack(chk: Checker, case: str, result):
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        chk.fail(
            case,
            say(
                f"returned a {type(result).__name__}, expected a tuple "
                "(embedding_grad_norm, block_grad_norms)",
                f"返回了 {type(result).__name__}，应返回元组 "
                "(embedding_grad_norm, block_grad_norms)",
            ),
        )
    emb, blocks = result
    try:
        emb = float(emb)
    except (TypeError, ValueError, RuntimeError):
        chk.fail(
            case,
            say(
                f"embedding_grad_norm is a {type(emb).__name__}, expected a float",
                f"embedding_grad_norm 是 {type(emb).__name__}，应为 float",
            ),
        )
    n = PROBE_CONFIG.n_layers
    if isinstance(blocks, torch.Tensor):
        blocks = blocks.tolist()
    if not isinstance(blocks, (list, tuple)) or len(blocks) != n:
        chk.fail(
            case,
            say(
                f"block_grad_norms must be a list with one float per block ({n}), "
                f"got {type(blocks).__name__}",
                f"block_grad_norms 必须是列表，每个块一个 float（共 {n} 个），"
                f"实际得到 {type(blocks).__name__}",
            )
            + (
                say(f" of length {len(blocks)}", f"，长度为 {len(blocks)}")
                if hasattr(blocks, "__len__")
                else ""
            ),
        )
    try:
        blocks = [float(b) for b in blocks]
    except (TypeError, ValueError, RuntimeError):
        chk.fail(
            case,
            say(
                "block_grad_norms must hold floats (or 0-d tensors)",
                "block_grad_norms 里必须是 float（或 0 维张量）",
            ),
        )
    return emb, blocks


def _wrong_quantities(model, idx) -> dict:
    """What common wrong probes measure, taken from the reference pass's gradients."""
    with torch.no_grad():
        x = model.tok_emb(idx) + model.pos_emb(idx.shape[1])
        return {
            "embedding_weight": float(model.tok_emb.weight.grad.norm()),
            "embedding_activation": float(x.norm()),
            "summed_parameter_norms": [
                sum(float(p.grad.norm()) for p in block.parameters() if p.grad is not None)
                for block in model.blocks
            ],
        }


def _summed_probe(model, idx, targets) -> dict:
    """The reference probe with loss="sum". Variants are computed under ``torch.no_grad()``
    (``Checker.diagnose``), and this one needs its backward pass."""
    with torch.enable_grad():
        return gradient_probe(model, idx, targets, "sum")


def _compare(chk: Checker, case, model, idx, targets, want, emb, blocks) -> None:
    def as_tensor(values):
        return torch.tensor(values, dtype=torch.float64)

    tokens = idx.numel()
    summed = mistake(
        "the cross-entropy is summed over tokens instead of averaged",
        "交叉熵在词元上求了和，而不是取平均",
    )
    loss_sum = mistake(
        "the loss is the sum of the final hidden states (loss='sum') instead of the "
        "next-token cross-entropy",
        "损失用的是最终隐藏状态之和（loss='sum'），而不是下一个词元预测的交叉熵",
    )
    chk.compare(
        case,
        say("embedding_grad_norm", "embedding_grad_norm 的值"),
        as_tensor([emb]),
        as_tensor([want["embedding"]]),
        variants=[
            (
                mistake(
                    "the norm of the token-embedding *weight* gradient (tok_emb.weight.grad) "
                    "instead of the gradient at the embedding output (the first block's input)",
                    "算的是词元嵌入*权重*梯度（tok_emb.weight.grad）的范数，而不是嵌入层输出处"
                    "（即第一个块的输入）的梯度的范数",
                ),
                lambda: as_tensor([want["embedding_weight"]]),
            ),
            (
                mistake(
                    "the norm of the embedding output itself (an activation), not of its gradient",
                    "算的是嵌入层输出本身（一个激活值）的范数，而不是它的梯度的范数",
                ),
                lambda: as_tensor([want["embedding_activation"]]),
            ),
            (summed, lambda: as_tensor([want["embedding"] * tokens])),
            # Last: it runs another backward pass (only ever on the way to a failure).
            (
                loss_sum,
                lambda: as_tensor([_summed_probe(model, idx, targets)["embedding"]]),
            ),
        ],
    )
    chk.compare(
        case,
        say("block_grad_norms list", "block_grad_norms 列表"),
        as_tensor(blocks),
        as_tensor(want["blocks"]),
        variants=[
            (
                mistake(
                    "the blocks are listed last first; list them first block first",
                    "块的顺序反了（最后一个块在前）；应从第一个块开始列出",
                ),
                lambda: as_tensor(want["blocks"][::-1]),
            ),
            (
                mistake(
                    "the old gradients were not cleared (call model.zero_grad() first): "
                    "they add up",
                    "没有清除旧的梯度（请先调用 model.zero_grad()）：新旧梯度累加在了一起",
                ),
                lambda: as_tensor([2 * b for b in want["blocks"]]),
            ),
            (
                mistake(
                    "each parameter's norm is summed instead of taking one norm over all of a "
                    "block's parameters together",
                    "把各个参数的范数加了起来，而不是对一个块的全部参数一起求一个范数",
                ),
                lambda: as_tensor(want["summed_parameter_norms"]),
            ),
            (
                mistake(
                    "the squared norms (sum of squares) without the square root",
                    "算的是范数的平方（平方和），没有开平方根",
                ),
                lambda: as_tensor([b * b for b in want["blocks"]]),
            ),
            (summed, lambda: as_tensor([b * tokens for b in want["blocks"]])),
            # Last: it runs another backward pass (only ever on the way to a failure).
            (loss_sum, lambda: as_tensor(_summed_probe(model, idx, targets)["blocks"])),
        ],
    )
