"""What ``tfcourse train`` checks before it does any work, each failure in one line.

A bad flag, an unwritable or full ``--out``, an unreadable or mismatched checkpoint (or
flags that contradict it), a device that is not there, a text too short for ``--seq-len``,
or a run that cannot fit in memory is reported at once, as a
``PreflightError`` whose message names the flag or file and the problem, never after
minutes of training or as a traceback from deep inside torch.
"""

from __future__ import annotations

import math
import os
import shutil
import zipfile

import torch

from ..language import say
from ..nn.config import GPTConfig
from .checkpoint import CHECKPOINT_FORMAT, load_checkpoint
from .data import MarkovChain


class PreflightError(ValueError):
    """A run that cannot start; the message is the one line to show."""


# (flag, attribute, smallest allowed value): counts are ints, checked when given.
_COUNTS = (
    ("--steps", "steps", 1),
    ("--batch-size", "batch_size", 1),
    ("--seq-len", "seq_len", 1),
    ("--warmup", "warmup", 0),
    ("--eval-every", "eval_every", 0),
    ("--eval-batches", "eval_batches", 1),
    ("--seed", "seed", 0),
    ("--save-every", "save_every", 0),
    ("--stop-after", "stop_after", 1),
    ("--sample", "sample", 0),
    ("--vocab-size", "vocab_size", 2),
    ("--max-chars", "max_chars", 1),
    ("--val-block", "val_block", 1),
    ("--n-layers", "n_layers", 1),
    ("--n-heads", "n_heads", 1),
    ("--n-kv-heads", "n_kv_heads", 1),
    ("--d-model", "d_model", 1),
)
# Counts above these overflow torch's sizes (int32 kernels) or its generator seeds (int64).
MAX_COUNT, MAX_SEED = 2**31 - 1, 2**63 - 1
# A day: a collective that waits longer is a frozen job, and torch needs a finite timeout.
MAX_COLLECTIVE_TIMEOUT = 86400


def check_arguments(args) -> None:
    """Every numeric flag in range: finite positive rates, clipping >= 0 (0 = off),
    non-negative counts. Raises ``PreflightError`` naming the first bad flag."""
    for flag, name, smallest in _COUNTS:
        value = getattr(args, name, None)
        largest = MAX_SEED if name == "seed" else MAX_COUNT
        if value is not None and value < smallest:
            raise PreflightError(
                say(
                    f"{flag} must be >= {smallest}, got {value}",
                    f"{flag} 必须 >= {smallest}，实际是 {value}",
                )
            )
        if value is not None and value > largest:
            raise PreflightError(
                say(
                    f"{flag} must be in [{smallest}, {largest}], got {value}",
                    f"{flag} 必须在 [{smallest}, {largest}] 区间内，实际是 {value}",
                )
            )
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise PreflightError(
            say(
                f"--lr must be a finite number > 0, got {args.lr}",
                f"--lr 必须是大于 0 的有限数，实际是 {args.lr}",
            )
        )
    if args.min_lr is not None and not (math.isfinite(args.min_lr) and 0 <= args.min_lr <= args.lr):
        raise PreflightError(
            say(
                f"--min-lr must be a finite number in [0, --lr={args.lr}], got {args.min_lr}",
                f"--min-lr 必须是 [0, --lr={args.lr}] 区间内的有限数，实际是 {args.min_lr}",
            )
        )
    if not (math.isfinite(args.weight_decay) and args.weight_decay >= 0):
        raise PreflightError(
            say(
                f"--weight-decay must be a finite number >= 0, got {args.weight_decay}",
                f"--weight-decay 必须是 >= 0 的有限数，实际是 {args.weight_decay}",
            )
        )
    if not (math.isfinite(args.grad_clip) and args.grad_clip >= 0):
        raise PreflightError(
            say(
                f"--grad-clip must be a finite number >= 0 (0 = off), got {args.grad_clip}",
                f"--grad-clip 必须是 >= 0 的有限数（0 表示不裁剪），实际是 {args.grad_clip}",
            )
        )
    if args.dropout is not None and not 0 <= args.dropout < 1:
        raise PreflightError(
            say(
                f"--dropout must be in [0, 1), got {args.dropout}",
                f"--dropout 必须在 [0, 1) 区间内，实际是 {args.dropout}",
            )
        )
    if args.memory_limit is not None and not (
        math.isfinite(args.memory_limit) and args.memory_limit > 0
    ):
        raise PreflightError(
            say(
                f"--memory-limit must be a finite number of GiB > 0, got {args.memory_limit}",
                f"--memory-limit 必须是大于 0 的有限 GiB 数，实际是 {args.memory_limit}",
            )
        )
    if not 0 < args.collective_timeout <= MAX_COLLECTIVE_TIMEOUT:  # False for nan
        raise PreflightError(
            say(
                f"--collective-timeout must be > 0 seconds and at most "
                f"{MAX_COLLECTIVE_TIMEOUT} (a day), got {args.collective_timeout}",
                f"--collective-timeout 必须大于 0 秒且不超过 "
                f"{MAX_COLLECTIVE_TIMEOUT} 秒（一天），实际是 {args.collective_timeout}",
            )
        )


def prepare_out(directory: str) -> None:
    """Create ``directory`` and prove that a file can be written there."""
    probe = os.path.join(directory, ".tfcourse-write-test")
    try:
        os.makedirs(directory, exist_ok=True)
        with open(probe, "wb") as file:
            file.write(b"ok")
        os.remove(probe)
    except OSError as error:
        raise PreflightError(
            say(
                f"--out {directory}: cannot write there ({error.strerror or error})",
                f"--out {directory}：无法写入该位置（{error.strerror or error}）",
            )
        ) from None


def resolve_device(flag: str | None, fallback) -> torch.device:
    """The device ``--device`` names (else ``fallback()``), if this machine has it."""
    if not flag:
        try:
            return fallback()
        except ValueError as error:
            raise PreflightError(str(error)) from None
    try:
        device = torch.device(flag)
    except RuntimeError:
        raise PreflightError(
            say(
                f"--device {flag!r} is not a device torch knows (try cpu, cuda, cuda:1, mps)",
                f"--device {flag!r} 不是 torch 认识的设备（可以试试 cpu、cuda、cuda:1、mps）",
            )
        ) from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            cuda = torch.version.cuda
            raise PreflightError(
                say(
                    f"--device {flag}: this torch {torch.__version__} is "
                    + (f"a CUDA {cuda} build that sees no GPU" if cuda else "a CPU-only build"),
                    f"--device {flag}：当前的 torch {torch.__version__} "
                    + (f"是 CUDA {cuda} 版本，但没有检测到 GPU" if cuda else "是仅支持 CPU 的版本"),
                )
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise PreflightError(
                say(
                    f"--device {flag}: only {torch.cuda.device_count()} CUDA device(s) here",
                    f"--device {flag}：这台机器只有 {torch.cuda.device_count()} 个 CUDA 设备",
                )
            )
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise PreflightError(
            say(
                f"--device {flag}: Apple's MPS backend is not available here",
                f"--device {flag}：这台机器上无法使用 Apple 的 MPS 后端",
            )
        )
    elif device.type not in ("cpu", "cuda", "mps"):
        raise PreflightError(
            say(
                f"--device {flag}: tfcourse trains on cpu, cuda or mps",
                f"--device {flag}：tfcourse 只能在 cpu、cuda 或 mps 上训练",
            )
        )
    return device


def read_checkpoint(path: str) -> dict:
    """A checkpoint written by ``tfcourse train``, or a ``PreflightError`` naming the file
    and what is wrong with it (empty, truncated, not a checkpoint, another format)."""
    if not os.path.isfile(path):
        raise PreflightError(say(f"no checkpoint at {path}", f"{path} 处没有检查点"))
    if os.path.getsize(path) == 0:
        raise PreflightError(
            say(f"checkpoint {path} is empty (0 bytes)", f"检查点 {path} 是空文件（0 字节）")
        )
    try:
        state = load_checkpoint(path, map_location="cpu")
    except Exception as error:  # noqa: BLE001 - torch.load raises anything on a bad file
        broken = zipfile.is_zipfile(path) or "zip" in str(error)
        kind = say(
            "truncated or corrupt" if broken else "not a torch checkpoint",
            "不完整或已损坏" if broken else "不是 torch 检查点",
        )
        raise PreflightError(
            say(
                f"checkpoint {path} is {kind} ({type(error).__name__})",
                f"检查点 {path} {kind}（{type(error).__name__}）",
            )
        ) from None
    if not isinstance(state, dict) or not {"model", "optimizer", "step", "config"} <= set(state):
        raise PreflightError(
            say(
                f"checkpoint {path} was not written by tfcourse train "
                f"(no model/optimizer/step/config entries)",
                f"检查点 {path} 不是 tfcourse train 写的（没有 model/optimizer/step/config 条目）",
            )
        )
    if state.get("format") != CHECKPOINT_FORMAT:
        raise PreflightError(
            say(
                f"checkpoint {path} has format {state.get('format')!r}; this "
                f"version reads format {CHECKPOINT_FORMAT}",
                f"检查点 {path} 的格式是 {state.get('format')!r}；当前版本只能"
                f"读取格式 {CHECKPOINT_FORMAT}",
            )
        )
    try:
        GPTConfig(**state["config"]["model"])
    except (KeyError, TypeError, ValueError) as error:
        raise PreflightError(
            say(
                f"checkpoint {path} holds no valid model config ({error})",
                f"检查点 {path} 中没有有效的模型配置（{error}）",
            )
        ) from None
    return state


def restore(path: str, load) -> None:
    """Run ``load()`` (a ``load_state_dict``); weights that do not fit the model the
    checkpoint's own config builds become a ``PreflightError`` naming the file."""
    try:
        load()
    except (RuntimeError, KeyError, ValueError) as error:
        detail = str(error).splitlines()[0][:200]
        raise PreflightError(
            say(
                f"checkpoint {path} does not fit its own model config ({detail})",
                f"检查点 {path} 与它自己的模型配置不符（{detail}）",
            )
        ) from None


def mismatched_flags(args, model: dict, flags) -> str | None:
    """With ``--resume``, model flags that disagree with the checkpoint's config, said as
    "checkpoint was written for n_layers=2, d_model=64; this run asks for n_layers=4"."""
    asked = {
        field: getattr(args, field)
        for _, field, _ in flags
        if getattr(args, field) is not None and getattr(args, field) != model.get(field)
    }
    if args.post_ln and model.get("pre_ln", True):
        asked["pre_ln"] = False
    if not asked:
        return None
    written = ", ".join(f"{k}={model.get(k)}" for k in ("n_layers", "n_heads", "d_model", "pre_ln"))
    wanted = ", ".join(f"{k}={v}" for k, v in asked.items())
    return say(
        f"checkpoint was written for {written}; this run asks for {wanted}",
        f"检查点是按 {written} 写的；这次运行要求的是 {wanted}",
    )


# Flags --resume compares with what the checkpoint was trained with:
# (flag, attribute, the key under the checkpoint's config["train"] or its data kwargs).
_TRAIN_FLAGS = (
    ("--batch-size", "batch_size", "batch_size"),
    ("--seq-len", "seq_len", "seq_len"),
    ("--lr", "lr", "max_lr"),
    ("--min-lr", "min_lr", "min_lr"),
    ("--warmup", "warmup", "warmup_steps"),
    ("--weight-decay", "weight_decay", "weight_decay"),
    ("--grad-clip", "grad_clip", "grad_clip"),
    ("--seed", "seed", "seed"),
)
# Changing these continues the same run legitimately (a longer schedule, other evaluations).
CHANGEABLE_FLAGS = (
    ("--steps", "steps", "steps"),
    ("--eval-every", "eval_every", "eval_every"),
    ("--eval-batches", "eval_batches", "eval_batches"),
)
_DATA_FLAGS = (
    ("--vocab-size", "vocab_size", "vocab_size"),
    ("--vocab-size", "vocab_size", "n_symbols"),
    ("--max-chars", "max_chars", "max_chars"),
    ("--text-source", "text_source", "source"),
    ("--val-block", "val_block", "val_block"),
)


def _differences(args, given, stored: dict, flags) -> list[str]:
    """ "--lr 0.5 (checkpoint: 0.01)" for each given flag whose value differs from ``stored``."""
    out = []
    for flag, name, key in flags:
        if name not in given or key not in stored:
            continue
        value = getattr(args, name)
        if name == "grad_clip" and value == 0:
            value = None  # 0 = off, stored as None
        if value != stored[key]:
            out.append(
                say(
                    f"{flag} {value} (checkpoint: {stored[key]})",
                    f"{flag} {value}（检查点：{stored[key]}）",
                )
            )
    return out


def check_resume_flags(args, given, config: dict, step: int, path: str) -> list[str]:
    """Refuse ``--steps`` below the saved ``step`` and training or data flags that differ
    from the checkpoint's; return a warning for each changeable flag that differs."""
    if "steps" in given and args.steps < step:
        raise PreflightError(
            say(
                f"{path}: --steps {args.steps} is below the checkpoint's step "
                f"{step}; a resumed run cannot go back (to train fewer steps, "
                f"start a new run in another --out)",
                f"{path}：--steps {args.steps} 小于检查点已训练到的第 {step} 步；"
                f"续训不能倒退（想少训练几步，请换一个 --out 开始新的运行）",
            )
        )
    data = config["data"]
    differ = _differences(args, given, config["train"], _TRAIN_FLAGS)
    if "dataset" in given and args.dataset != data["name"]:
        differ.insert(
            0,
            say(
                f"--dataset {args.dataset} (checkpoint: {data['name']})",
                f"--dataset {args.dataset}（检查点：{data['name']}）",
            ),
        )
    differ += _differences(args, given, data["kwargs"], _DATA_FLAGS)
    if differ:
        raise PreflightError(
            say(
                f"{path}: these flags differ from the checkpoint's settings: "
                f"{'; '.join(differ)}; drop them to resume, or start a new run "
                f"in another --out",
                f"{path}：这些参数与检查点的设置不一致：{'；'.join(differ)}；"
                f"去掉它们即可续训，或者换一个 --out 开始新的运行",
            )
        )
    return [
        say(
            f"warning: {change}: the resumed run uses the new value",
            f"警告：{change}：续训将使用新的值",
        )
        for change in _differences(args, given, config["train"], CHANGEABLE_FLAGS)
    ]


# ------------------------------------------------------------------------- data


def check_splits(dataset, seq_len: int) -> None:
    """Both splits hold a sequence of ``seq_len + 1`` tokens, so neither the first step nor
    the final evaluation fails after the work is done."""
    for split, name in (("train", say("training", "训练")), ("val", say("validation", "验证"))):
        tokens = getattr(dataset, split, None)  # text: a tensor per split
        if tokens is not None and len(tokens) < seq_len + 1:
            raise PreflightError(
                say(
                    f"--seq-len {seq_len} needs a {name} split of at least {seq_len + 1} "
                    f"characters, but this text's has {len(tokens)}; lower --seq-len or give "
                    "more text (--max-chars, --val-block)",
                    f"--seq-len {seq_len} 要求{name}集至少有 {seq_len + 1} 个字符，"
                    f"但这份文本的{name}集只有 {len(tokens)} 个；请调小 --seq-len，"
                    "或者提供更多文本（--max-chars、--val-block）",
                )
            )
        try:
            dataset.batch(1, seq_len, split=split)  # e.g. the copy task's seq_len >= 3
        except ValueError as error:
            raise PreflightError(
                say(f"--seq-len {seq_len}: {error}", f"--seq-len {seq_len}：{error}")
            ) from None


def dataset_bytes(spec: dict) -> int:
    """Bytes a dataset builds before training: the Markov chain's V x V tables; the others
    are small."""
    if spec["name"] != "markov":
        return 0
    return MarkovChain.table_bytes(spec["kwargs"]["vocab_size"])


# ------------------------------------------------------------------------- disk


def checkpoint_bytes(n_params: int, steps: int) -> int:
    """Rough size of one checkpoint: float32 weights and AdamW's two moments (12 bytes a
    parameter), the history (a few floats a step) and the RNG states."""
    return 12 * n_params + 64 * steps + 2**20


def check_disk(directory: str, need: int) -> None:
    """Refuse a run whose checkpoint cannot fit where it is saved: the new file is written
    beside the old one before replacing it, so the whole size must be free."""
    free = shutil.disk_usage(directory or ".").free
    if need > free:
        raise PreflightError(
            say(
                f"--out {directory}: a checkpoint of this run takes about "
                f"{need / 2**20:,.1f} MiB but only {free / 2**20:,.1f} MiB is "
                f"free there; free some space or choose another --out",
                f"--out {directory}：这次运行的一个检查点大约需要 "
                f"{need / 2**20:,.1f} MiB，但那里只剩 {free / 2**20:,.1f} MiB；"
                f"请腾出空间，或者换一个 --out",
            )
        )


# ------------------------------------------------------------------------- memory


def estimate_params(config: GPTConfig) -> int:
    """Rough parameter count without building the model: the embeddings (the LM head too
    when untied) and 12·D² per block (attention 4·D², the MLP 8·D²)."""
    d = config.d_model
    head = 0 if config.tie_weights else config.vocab_size * d
    return config.vocab_size * d + head + config.max_seq_len * d + config.n_layers * 12 * d * d


def estimate_training_bytes(config: GPTConfig, batch_size: int, seq_len: int) -> int:
    """Rough float32 bytes of one training step: weights, gradients and AdamW's two
    moments (4 copies of the parameters), plus the activations backward keeps.

    Per block and token the estimate keeps ~34·D values (the MLP's 4D hidden twice,
    the norms', q/k/v and the residual stream) and, per head, the T attention scores
    three times (scores, weights, dropout); plus the logits with their softmax and
    gradient (3·V per token). An estimate for refusing hopeless runs, not a budget.
    """
    d, t, b = config.d_model, seq_len, batch_size
    params = estimate_params(config)
    per_block = b * t * 34 * d + 3 * b * config.n_heads * t * t
    activations = config.n_layers * per_block + 3 * b * t * config.vocab_size
    mask = config.n_layers * config.max_seq_len**2  # bool causal masks, 1 byte each
    return 4 * (4 * params + activations) + mask


def available_bytes(device: torch.device) -> int | None:
    """Memory the run can use on ``device``: free GPU memory, or the host's available
    memory (Linux /proc/meminfo); None when unknown."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo", encoding="utf-8") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_memory(
    config: GPTConfig,
    batch_size: int,
    seq_len: int,
    device: torch.device,
    limit_gib: float | None = None,
    data_bytes: int = 0,
) -> None:
    """Refuse a run whose estimate (plus the dataset's ``data_bytes``) exceeds the memory
    available (or ``limit_gib``)."""
    need = estimate_training_bytes(config, batch_size, seq_len) + data_bytes
    have = int(limit_gib * 2**30) if limit_gib is not None else available_bytes(device)
    if have is not None and need > have:
        raise PreflightError(
            say(
                f"this run needs about {need / 2**30:.1f} GiB (batch {batch_size} x seq-len "
                f"{seq_len}, vocab {config.vocab_size}, {config.n_layers} layers of width "
                f"{config.d_model}) but {have / 2**30:.1f} GiB is available on {device}; lower "
                f"--batch-size, --seq-len or --vocab-size, or pass --no-memory-check to try anyway",
                f"这次运行大约需要 {need / 2**30:.1f} GiB（batch {batch_size} x seq-len {seq_len}，"
                f"词表 {config.vocab_size}，{config.n_layers} 层，宽度 {config.d_model}），"
                f"但 {device} 上只有 {have / 2**30:.1f} GiB 可用；"
                "请调小 --batch-size、--seq-len 或 --vocab-size，或加上 --no-memory-check 强行一试",
            )
        )
