"""The training loop: AdamW, warmup + cosine learning rate, gradient clipping, evaluation.

``train(model, dataset, ...)`` is the one-call version the notebooks use;
``Trainer`` is the same loop as an object whose state (model, optimizer, step,
history, RNG) can be saved with ``save_checkpoint`` and restored with
``load_checkpoint`` / ``Trainer.load_state_dict``, which is what ``tfcourse train``
uses for checkpoints, resume and data-parallel training.

Determinism: the batch of step ``s`` on rank ``r`` comes from a generator seeded
with ``(seed, r, s)`` alone, so a run resumed at step ``s`` sees exactly the
batches an uninterrupted run would have seen, and on CPU produces the same
losses bit for bit.
"""

from __future__ import annotations

import hashlib
import math
import sys
from dataclasses import asdict, dataclass, field, fields

import torch
import torch.nn.functional as F
from torch import nn

from ..language import current, say
from ..nn import validate
from . import memo
from .checkpoint import CHECKPOINT_FORMAT
from .data import IGNORE_INDEX
from .optim import configure_optimizer, lr_at


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits (B, T, V)`` against ``targets (B, T)``.

    Targets equal to ``IGNORE_INDEX`` (-100) are skipped (the copy task's random half).
    """
    if logits.dim() != 3 or targets.shape != logits.shape[:2]:
        got = f"{tuple(logits.shape)} and {tuple(targets.shape)}"
        got_zh = f"{tuple(logits.shape)} 和 {tuple(targets.shape)}"
        raise ValueError(
            say(
                f"expected logits (B, T, V) and targets (B, T), got {got}",
                f"logits 的形状应为 (B, T, V)，targets 的形状应为 (B, T)，实际是 {got_zh}",
            )
        )
    return F.cross_entropy(
        logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE_INDEX
    )


def step_generator(seed: int, rank: int, step: int | str) -> torch.Generator:
    """A CPU generator that depends on ``(seed, rank, step)`` only (the batch of one step)."""
    digest = hashlib.blake2b(f"{seed}:{rank}:{step}".encode(), digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little") & (2**63 - 1))


@torch.no_grad()
def evaluate(
    model: nn.Module,
    dataset,
    *,
    batch_size: int,
    seq_len: int,
    n_batches: int = 4,
    seed: int = 0,
    split: str = "val",
    device=None,
) -> float:
    """Mean loss over ``n_batches`` fixed batches (the same batches at every call)."""
    validate.positive_int("n_batches", n_batches)
    device = next(model.parameters()).device if device is None else torch.device(device)
    was_training = model.training
    model.eval()
    total = 0.0
    for i in range(n_batches):
        x, y = dataset.batch(
            batch_size, seq_len, generator=step_generator(seed, -1, f"{split}{i}"), split=split
        )
        total += float(lm_loss(model(x.to(device)), y.to(device)))
    model.train(was_training)
    return total / n_batches


@torch.no_grad()
def held_out_loss(
    model: nn.Module, tokens: torch.Tensor, *, context: int | None = None, batch_size: int = 32
) -> float:
    """Mean loss (nats/char) over every token of ``tokens (N,)`` but the first, each scored
    once with at least ``context // 2`` tokens before it (all of them near the start).

    Windows of ``context`` tokens (default: the model's ``max_seq_len``) advance by half a
    window; each window scores only its second half, the first window all of it. That is
    how a character n-gram is scored too (every character, with its context), whereas
    random windows would score a sixty-fourth of the characters with almost none.
    """
    return float(held_out_losses(model, tokens, context=context, batch_size=batch_size).mean())


@torch.no_grad()
def held_out_losses(
    model: nn.Module, tokens: torch.Tensor, *, context: int | None = None, batch_size: int = 32
) -> torch.Tensor:
    """The loss of every token of ``tokens (N,)`` but the first, ``(N - 1,)`` on the CPU in
    float64: entry ``i`` is ``-log P(tokens[i + 1] | what precedes it)``, scored as
    ``held_out_loss`` describes."""
    if tokens.dim() != 1 or tokens.dtype != torch.long or len(tokens) < 2:
        got = f"{tuple(tokens.shape)} {tokens.dtype}"
        raise ValueError(
            say(
                f"tokens must be a 1-D long tensor of 2 or more ids, got {got}",
                f"tokens 必须是至少含 2 个 id 的一维 long 张量，实际是 {got}",
            )
        )
    context = model.config.max_seq_len if context is None else context
    if not 2 <= context <= model.config.max_seq_len:
        bounds = f"[2, max_seq_len={model.config.max_seq_len}]"
        raise ValueError(
            say(
                f"context must be in {bounds}, got {context}",
                f"context 必须在 {bounds} 中，实际是 {context}",
            )
        )
    device = next(model.parameters()).device
    stride = context // 2
    last = max(len(tokens) - 1 - context, 0)
    starts = list(range(0, last + 1, stride))
    if starts[-1] != last:
        starts.append(last)  # the tail, scored from where the others stop
    was_training = model.training
    model.eval()
    scored = torch.empty(len(tokens) - 1, dtype=torch.float64)
    scored_to = 0  # targets before it are scored
    window = min(context, len(tokens) - 1)
    for i in range(0, len(starts), batch_size):
        chunk = starts[i : i + batch_size]
        seq = torch.stack([tokens[s : s + window + 1] for s in chunk]).to(device)
        losses = (
            F.cross_entropy(
                model(seq[:, :-1]).float().transpose(1, 2), seq[:, 1:], reduction="none"
            )
            .cpu()
            .double()
        )  # (B, window)
        for row, s in zip(losses, chunk, strict=True):
            first = max(scored_to - s, 0)  # skip the targets an earlier window scored
            scored[s + first : s + window] = row[first:]
            scored_to = s + window
    model.train(was_training)
    return scored


# --------------------------------------------------------------------------- config and history


@dataclass
class TrainConfig:
    """Everything the loop needs besides the model and the data.

    ``batch_size`` is per process: under ``torchrun`` with N processes one step
    sees ``N * batch_size`` sequences. ``min_lr=None`` means ``max_lr / 10``.
    ``eval_every=0`` evaluates only after the last step.
    """

    steps: int = 200
    batch_size: int = 16
    seq_len: int = 32
    max_lr: float = 3e-3
    min_lr: float | None = None
    warmup_steps: int = 20
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float | None = 1.0
    eval_every: int = 0
    eval_batches: int = 4
    seed: int = 0
    stop_on_divergence: bool = True

    def __post_init__(self):
        for name in ("steps", "batch_size", "seq_len", "eval_batches"):
            validate.positive_int(name, getattr(self, name))
        for name in ("warmup_steps", "eval_every", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(
                    say(
                        f"{name} must be an int >= 0, got {value!r}",
                        f"{name} 必须是 >= 0 的 int，实际是 {value!r}",
                    )
                )
        if self.warmup_steps > self.steps:
            raise ValueError(
                say(
                    f"warmup_steps ({self.warmup_steps}) must be <= steps ({self.steps})",
                    f"预热步数 warmup_steps（{self.warmup_steps}）不能超过总步数 steps"
                    f"（{self.steps}）",
                )
            )
        validate.positive_float("max_lr", self.max_lr)
        if self.min_lr is not None and not 0 <= self.min_lr <= self.max_lr:
            bounds = f"[0, max_lr={self.max_lr}]"
            raise ValueError(
                say(
                    f"min_lr must be in {bounds}, got {self.min_lr}",
                    f"min_lr 必须在 {bounds} 中，实际是 {self.min_lr}",
                )
            )
        if self.grad_clip is not None:
            validate.positive_float("grad_clip", self.grad_clip)
        for name in ("beta1", "beta2"):
            validate.probability(name, getattr(self, name))

    @property
    def final_lr(self) -> float:
        return self.max_lr / 10 if self.min_lr is None else self.min_lr

    def lr(self, step: int) -> float:
        return lr_at(
            step,
            max_lr=self.max_lr,
            warmup_steps=self.warmup_steps,
            total_steps=self.steps,
            min_lr=self.final_lr,
        )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class History:
    """What one run measured. ``loss[i]``, ``lr[i]``, ``grad_norm[i]`` belong to ``step[i]``
    (the loss is the training loss of that step's batch, before its update);
    ``val_loss[j]`` was measured after ``val_step[j]`` updates."""

    step: list = field(default_factory=list)
    loss: list = field(default_factory=list)
    lr: list = field(default_factory=list)
    grad_norm: list = field(default_factory=list)
    val_step: list = field(default_factory=list)
    val_loss: list = field(default_factory=list)
    diverged: bool = False

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> History:
        return cls(**d)

    def final_loss(self, last: int = 10) -> float:
        """Mean training loss of the last ``last`` steps (inf if the run diverged)."""
        if self.diverged or not self.loss:
            return float("inf")
        tail = self.loss[-last:]
        return sum(tail) / len(tail)


# --------------------------------------------------------------------------- the loop


class _Progress:
    """tqdm when it is installed (text bar, not a widget), else a line every ``every`` steps."""

    def __init__(self, total: int, initial: int, enabled: bool):
        self.bar, self.enabled, self.total = None, enabled, total
        self.every = max(1, total // 10)
        if enabled:
            try:
                from tqdm.std import tqdm
            except ImportError:
                return
            self.bar = tqdm(
                total=total,
                initial=initial,
                desc=say("train", "训练"),
                dynamic_ncols=True,
                file=sys.stderr,
                # tqdm's own layout, with a full-width colon after a Chinese description
                bar_format="{desc}：{percentage:3.0f}%|{bar}{r_bar}" if current() == "zh" else None,
            )

    def update(self, step: int, loss: float, lr: float, val_loss: float | None):
        if not self.enabled:
            return
        if self.bar is not None:
            info = {say("loss", "损失"): f"{loss:.4f}", say("lr", "学习率"): f"{lr:.2e}"}
            if val_loss is not None:
                info[say("val", "验证损失")] = f"{val_loss:.4f}"
            self.bar.set_postfix(info, refresh=False)
            self.bar.update(1)
        elif (step + 1) % self.every == 0 or step + 1 == self.total:
            print(
                say(
                    f"step {step + 1:>6}/{self.total}  loss {loss:.4f}  lr {lr:.2e}",
                    f"第 {step + 1:>6}/{self.total} 步  损失 {loss:.4f}  学习率 {lr:.2e}",
                )
                + (
                    say(f"  val {val_loss:.4f}", f"  验证损失 {val_loss:.4f}")
                    if val_loss is not None
                    else ""
                ),
                flush=True,
            )

    def close(self):
        if self.bar is not None:
            self.bar.close()


class Trainer:
    """The loop as an object: ``fit()`` runs it, ``state_dict()`` captures it.

    Args:
        model: a module mapping token ids ``(B, T)`` to logits ``(B, T, V)`` (a ``GPT``).
        dataset: anything with ``batch(batch_size, seq_len, *, generator, split)``
            (see ``tfcourse.data``).
        config: a ``TrainConfig``.
        device: where to train (default: where the model is).
        distributed: wrap the model in ``DistributedDataParallel`` (needs an
            initialized process group, e.g. under ``torchrun``); each rank then
            draws its own batches and gradients are averaged across ranks.
        progress: show a progress bar (or lines if ``tqdm`` is missing).
        amp: run the forward pass and the loss under bf16 autocast (on a CUDA GPU; the
            weights, gradients and optimizer stay float32).
        compile: wrap the model in ``torch.compile`` (the saved module stays the bare one).
    """

    def __init__(
        self,
        model: nn.Module,
        dataset,
        config: TrainConfig,
        *,
        device=None,
        distributed: bool = False,
        progress: bool = False,
        amp: bool = False,
        compile: bool = False,
    ):
        if not isinstance(config, TrainConfig):
            got = type(config).__name__
            raise TypeError(
                say(
                    f"config must be a TrainConfig, got {got}",
                    f"config 必须是 TrainConfig，实际是 {got}",
                )
            )
        if not hasattr(dataset, "batch"):
            method, got = "batch(batch_size, seq_len, *, generator, split)", type(dataset).__name__
            raise TypeError(
                say(
                    f"dataset must have a {method} method, got {got}",
                    f"dataset 必须有 {method} 方法，实际是 {got}",
                )
            )
        self.config = config
        self.dataset = dataset
        self.device = (
            torch.device(device) if device is not None else next(model.parameters()).device
        )
        self.module = model.to(self.device)  # the bare model: what gets saved
        self.rank, self.world_size = 0, 1
        self.model = self.module  # what the forward pass goes through
        if distributed:
            import torch.distributed as dist
            from torch.nn.parallel import DistributedDataParallel

            if not dist.is_initialized():
                raise RuntimeError(
                    say(
                        "distributed=True needs torch.distributed.init_process_group() "
                        "first (run under torchrun)",
                        "distributed=True 需要先调用 torch.distributed.init_process_group()"
                        "（用 torchrun 运行）",
                    )
                )
            self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.model = DistributedDataParallel(self.module, device_ids=ids)
        self.optimizer = configure_optimizer(
            self.module,
            lr=config.max_lr,
            weight_decay=config.weight_decay,
            betas=(config.beta1, config.beta2),
        )
        if compile:
            self.model = torch.compile(self.model)
        self.amp = bool(amp)
        self.step = 0
        self.history = History()
        self.progress = progress and self.rank == 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def _mean_over_ranks(self, value: torch.Tensor) -> float:
        value = value.detach()
        if self.world_size > 1:
            import torch.distributed as dist

            value = value.clone()
            dist.all_reduce(value)
            value /= self.world_size
        return float(value)

    def train_step(self) -> float:
        """One optimizer update on the batch of ``self.step``; returns the loss before it."""
        cfg = self.config
        lr = cfg.lr(self.step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        x, y = self.dataset.batch(
            cfg.batch_size, cfg.seq_len, generator=step_generator(cfg.seed, self.rank, self.step)
        )
        x, y = x.to(self.device), y.to(self.device)
        self.model.train()
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.amp):
            loss = lm_loss(self.model(x), y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        # clip_grad_norm_ returns the norm *before* clipping: what the history shows.
        if cfg.grad_clip is not None:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.module.parameters(), cfg.grad_clip)
        else:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.module.parameters(), float("inf"))
        self.optimizer.step()
        loss_value = self._mean_over_ranks(loss)
        h = self.history
        h.step.append(self.step)
        h.loss.append(loss_value)
        h.lr.append(lr)
        h.grad_norm.append(float(grad_norm))
        self.step += 1
        return loss_value

    def evaluate(self) -> float:
        cfg = self.config
        return evaluate(
            self.module,
            self.dataset,
            batch_size=cfg.batch_size,
            seq_len=cfg.seq_len,
            n_batches=cfg.eval_batches,
            seed=cfg.seed,
            device=self.device,
        )

    def fit(self, until: int | None = None, callback=None) -> History:
        """Train from ``self.step`` up to step ``until`` (default: ``config.steps``).

        ``callback(trainer)`` runs after every step (e.g. to save a checkpoint); a
        non-finite loss stops the run and sets ``history.diverged`` when
        ``config.stop_on_divergence``.
        """
        cfg = self.config
        until = cfg.steps if until is None else min(int(until), cfg.steps)
        bar = _Progress(cfg.steps, self.step, self.progress)
        try:
            while self.step < until:
                loss = self.train_step()
                val = None
                last = self.step == cfg.steps
                if self.is_main and ((cfg.eval_every and self.step % cfg.eval_every == 0) or last):
                    val = self.evaluate()
                    self.history.val_step.append(self.step)
                    self.history.val_loss.append(val)
                bar.update(self.step - 1, loss, self.history.lr[-1], val)
                if not math.isfinite(loss):
                    self.history.diverged = True
                    if cfg.stop_on_divergence:
                        break
                if callback is not None:
                    callback(self)
        finally:
            bar.close()
        return self.history

    # ----------------------------------------------------------------- state

    def _rng_states(self) -> dict:
        """Global RNG states (dropout draws from them), one per rank: tensors only."""
        cpu = torch.get_rng_state()
        cuda = torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None
        if self.world_size == 1:
            return {"cpu": [cpu], "cuda": [cuda] if cuda is not None else []}
        import torch.distributed as dist

        gathered = [None] * self.world_size
        dist.all_gather_object(gathered, (cpu, cuda))
        return {"cpu": [c for c, _ in gathered], "cuda": [g for _, g in gathered if g is not None]}

    def state_dict(self) -> dict:
        """Plain containers and tensors only, so ``torch.load(weights_only=True)`` can read it.

        Collective under ``torch.distributed``: every rank must call it.
        """
        return {
            "format": CHECKPOINT_FORMAT,
            "model": self.module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "step": self.step,
            "config": {"train": self.config.to_dict()},
            "history": self.history.to_dict(),
            "rng": self._rng_states(),
            "world_size": self.world_size,
        }

    def load_state_dict(self, state: dict) -> None:
        if state.get("format") != CHECKPOINT_FORMAT:
            got = state.get("format")
            raise ValueError(
                say(
                    f"unknown checkpoint format {got!r}, expected {CHECKPOINT_FORMAT}",
                    f"未知的检查点格式 {got!r}，应为 {CHECKPOINT_FORMAT}",
                )
            )
        self.module.load_state_dict(state["model"], strict=True)
        self.optimizer.load_state_dict(state["optimizer"])
        self.step = int(state["step"])
        self.history = History.from_dict(state["history"])
        rng = state.get("rng", {})
        # Each rank restores its own RNG; with a different world size, ranks
        # beyond the saved ones keep their fresh seeds.
        if self.rank < len(rng.get("cpu", [])):
            torch.set_rng_state(rng["cpu"][self.rank])
        if self.device.type == "cuda" and self.rank < len(rng.get("cuda", [])):
            torch.cuda.set_rng_state(rng["cuda"][self.rank], self.device)


# --------------------------------------------------------------------------- one call


def train(
    model: nn.Module, dataset, *, device=None, progress: bool = False, callback=None, **config
) -> History:
    """Train ``model`` on ``dataset`` and return its ``History``.

    Keyword arguments are ``TrainConfig`` fields (``steps``, ``batch_size``,
    ``seq_len``, ``max_lr``, ``warmup_steps``, ``grad_clip``, ``seed``, ...). The
    model is trained in place, on ``device`` (default: where it is).
    """
    settings = TrainConfig(**config)
    # The test suite's memo (memo.py): None unless TFCOURSE_TRAIN_MEMO is set.
    kept = memo.key(model, dataset, settings.to_dict(), device) if callback is None else None
    remembered = memo.recall(kept, model)
    if remembered is not None:
        return History.from_dict(remembered)
    trainer = Trainer(model, dataset, settings, device=device, progress=progress)
    history = trainer.fit(callback=callback)
    memo.remember(kept, model, history.to_dict())
    return history
