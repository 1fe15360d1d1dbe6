"""What ``tfcourse train`` checks before it does any work, each failure in one line.

A bad flag, an unwritable ``--out``, an unreadable or mismatched checkpoint, a device
that is not there, or a run that cannot fit in memory is reported at once, as a
``PreflightError`` whose message names the flag or file and the problem, never after
minutes of training or as a traceback from deep inside torch.
"""

from __future__ import annotations

import math
import os
import zipfile

import torch

from ..nn.config import GPTConfig
from .checkpoint import CHECKPOINT_FORMAT, load_checkpoint


class PreflightError(ValueError):
    """A run that cannot start; the message is the one line to show."""


# (flag, attribute, smallest allowed value): counts are ints, checked when given.
_COUNTS = (("--steps", "steps", 1), ("--batch-size", "batch_size", 1), ("--seq-len", "seq_len", 1),
           ("--warmup", "warmup", 0), ("--eval-every", "eval_every", 0),
           ("--eval-batches", "eval_batches", 1), ("--seed", "seed", 0),
           ("--save-every", "save_every", 0), ("--stop-after", "stop_after", 1),
           ("--sample", "sample", 0), ("--vocab-size", "vocab_size", 2),
           ("--max-chars", "max_chars", 1), ("--n-layers", "n_layers", 1),
           ("--n-heads", "n_heads", 1), ("--n-kv-heads", "n_kv_heads", 1),
           ("--d-model", "d_model", 1))


def check_arguments(args) -> None:
    """Every numeric flag in range: finite positive rates, clipping >= 0 (0 = off),
    non-negative counts. Raises ``PreflightError`` naming the first bad flag."""
    for flag, name, smallest in _COUNTS:
        value = getattr(args, name, None)
        if value is not None and value < smallest:
            raise PreflightError(f"{flag} must be >= {smallest}, got {value}")
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise PreflightError(f"--lr must be a finite number > 0, got {args.lr}")
    if args.min_lr is not None and not (math.isfinite(args.min_lr) and 0 <= args.min_lr <= args.lr):
        raise PreflightError(f"--min-lr must be a finite number in [0, --lr={args.lr}], "
                             f"got {args.min_lr}")
    if not (math.isfinite(args.weight_decay) and args.weight_decay >= 0):
        raise PreflightError(f"--weight-decay must be a finite number >= 0, got {args.weight_decay}")
    if not (math.isfinite(args.grad_clip) and args.grad_clip >= 0):
        raise PreflightError(f"--grad-clip must be a finite number >= 0 (0 = off), "
                             f"got {args.grad_clip}")
    if args.dropout is not None and not 0 <= args.dropout < 1:
        raise PreflightError(f"--dropout must be in [0, 1), got {args.dropout}")
    if args.memory_limit is not None and not (math.isfinite(args.memory_limit)
                                              and args.memory_limit > 0):
        raise PreflightError(f"--memory-limit must be a finite number of GiB > 0, "
                             f"got {args.memory_limit}")
    if args.collective_timeout <= 0:
        raise PreflightError(f"--collective-timeout must be > 0 seconds, "
                             f"got {args.collective_timeout}")


def prepare_out(directory: str) -> None:
    """Create ``directory`` and prove that a file can be written there."""
    probe = os.path.join(directory, ".tfcourse-write-test")
    try:
        os.makedirs(directory, exist_ok=True)
        with open(probe, "wb") as file:
            file.write(b"ok")
        os.remove(probe)
    except OSError as error:
        raise PreflightError(f"--out {directory}: cannot write there "
                             f"({error.strerror or error})") from None


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
        raise PreflightError(f"--device {flag!r} is not a device torch knows "
                             f"(try cpu, cuda, cuda:1, mps)") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            build = (f"a CUDA {torch.version.cuda} build that sees no GPU" if torch.version.cuda
                     else "a CPU-only build")
            raise PreflightError(f"--device {flag}: this torch {torch.__version__} is {build}")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise PreflightError(f"--device {flag}: only {torch.cuda.device_count()} CUDA "
                                 f"device(s) here")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise PreflightError(f"--device {flag}: Apple's MPS backend is not available here")
    elif device.type not in ("cpu", "cuda", "mps"):
        raise PreflightError(f"--device {flag}: tfcourse trains on cpu, cuda or mps")
    return device


def read_checkpoint(path: str) -> dict:
    """A checkpoint written by ``tfcourse train``, or a ``PreflightError`` naming the file
    and what is wrong with it (empty, truncated, not a checkpoint, another format)."""
    if not os.path.isfile(path):
        raise PreflightError(f"no checkpoint at {path}")
    if os.path.getsize(path) == 0:
        raise PreflightError(f"checkpoint {path} is empty (0 bytes)")
    try:
        state = load_checkpoint(path, map_location="cpu")
    except Exception as error:  # noqa: BLE001 - torch.load raises anything on a bad file
        kind = ("truncated or corrupt" if zipfile.is_zipfile(path) or "zip" in str(error)
                else "not a torch checkpoint")
        raise PreflightError(f"checkpoint {path} is {kind} ({type(error).__name__})") from None
    if not isinstance(state, dict) or not {"model", "optimizer", "step", "config"} <= set(state):
        raise PreflightError(f"checkpoint {path} was not written by tfcourse train "
                             f"(no model/optimizer/step/config entries)")
    if state.get("format") != CHECKPOINT_FORMAT:
        raise PreflightError(f"checkpoint {path} has format {state.get('format')!r}; this "
                             f"version reads format {CHECKPOINT_FORMAT}")
    try:
        GPTConfig(**state["config"]["model"])
    except (KeyError, TypeError, ValueError) as error:
        raise PreflightError(f"checkpoint {path} holds no valid model config ({error})") from None
    return state


def restore(path: str, load) -> None:
    """Run ``load()`` (a ``load_state_dict``); weights that do not fit the model the
    checkpoint's own config builds become a ``PreflightError`` naming the file."""
    try:
        load()
    except (RuntimeError, KeyError, ValueError) as error:
        raise PreflightError(f"checkpoint {path} does not fit its own model config "
                             f"({str(error).splitlines()[0][:200]})") from None


def mismatched_flags(args, model: dict, flags) -> str | None:
    """With ``--resume``, model flags that disagree with the checkpoint's config, said as
    "checkpoint was written for n_layers=2, d_model=64; this run asks for n_layers=4"."""
    asked = {field: getattr(args, field) for _, field, _ in flags
             if getattr(args, field) is not None and getattr(args, field) != model.get(field)}
    if args.post_ln and model.get("pre_ln", True):
        asked["pre_ln"] = False
    if not asked:
        return None
    written = ", ".join(f"{k}={model.get(k)}" for k in ("n_layers", "n_heads", "d_model", "pre_ln"))
    wanted = ", ".join(f"{k}={v}" for k, v in asked.items())
    return f"checkpoint was written for {written}; this run asks for {wanted}"


# ------------------------------------------------------------------------- memory


def estimate_training_bytes(config: GPTConfig, batch_size: int, seq_len: int) -> int:
    """Rough float32 bytes of one training step: weights, gradients and AdamW's two
    moments (4 copies of the parameters), plus the activations backward keeps.

    Per block and token the estimate keeps ~34·D values (the MLP's 4D hidden twice,
    the norms', q/k/v and the residual stream) and, per head, the T attention scores
    three times (scores, weights, dropout); plus the logits with their softmax and
    gradient (3·V per token). An estimate for refusing hopeless runs, not a budget.
    """
    d, t, b = config.d_model, seq_len, batch_size
    params = config.vocab_size * d + config.max_seq_len * d + config.n_layers * 12 * d * d
    per_block = b * t * 34 * d + 3 * b * config.n_heads * t * t
    activations = config.n_layers * per_block + 3 * b * t * config.vocab_size
    mask = config.n_layers * config.max_seq_len ** 2         # bool causal masks, 1 byte each
    return 4 * (4 * params + activations) + mask


def available_bytes(device: torch.device) -> int | None:
    """Memory the run can use on ``device``: free GPU memory, or the host's available
    memory (Linux /proc/meminfo); None when unknown."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_memory(config: GPTConfig, batch_size: int, seq_len: int, device: torch.device,
                 limit_gib: float | None = None) -> None:
    """Refuse a run whose estimate exceeds the memory available (or ``limit_gib``)."""
    need = estimate_training_bytes(config, batch_size, seq_len)
    have = int(limit_gib * 2**30) if limit_gib is not None else available_bytes(device)
    if have is not None and need > have:
        raise PreflightError(
            f"this run needs about {need / 2**30:.1f} GiB (batch {batch_size} x seq-len "
            f"{seq_len}, {config.n_layers} layers of width {config.d_model}) but "
            f"{have / 2**30:.1f} GiB is available on {device}; lower --batch-size or "
            f"--seq-len, or pass --no-memory-check to try anyway")
