"""Notebook 12's run: the learner's GPT trained by the learner's loop on the learner's batches.

``train_yours(parts, data, config, steps)`` takes the parts of ``tc.yours()`` (the learner's, or
the reference's where theirs is missing or failing) and does what the capstone schedule says
with them: ``parts.gpt(config)`` as the learner's ``GPT`` initializes itself (notebook 07 has
them write GPT-2's initialization, and its check refuses PyTorch's default),
``parts.get_batch`` drawing every step's batch, AdamW in two groups built by
``parts.configure_optimizer``, and one call of ``parts.train_loop`` for the whole run. The loop is
not changed or wrapped: an optimizer step hook watches it, and at the checkpoints measures the
held-out loss with ``parts.estimate_loss``, calls the caller's ``watch`` and writes with
``parts.generate``. The time those take is left out of the run's training time.

The run is a number of steps, never a time, and on a CPU it computes with one thread
(``THREADS``): the round-off of a matrix product depends on how many threads share it, and over
thousands of steps a different round-off trains a different model. So with the same seed the
same parts give the same losses on a busy machine as on an idle one, with any number of cores.
A CPU with other vector instructions (AVX2 rather than AVX-512) rounds differently still.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import torch

from ..runtime import seed_everything
from .data import TextDataset
from .presets import TRAINING_PRESETS

SCHEDULE = TRAINING_PRESETS["capstone"]
THREADS = 1  # a CPU's threads for the run: the stored runs of notebook 12 were computed with one


@dataclass
class YourRun:
    """What ``train_yours`` returns: the trained model, the loss of every step, the held-out
    loss at each checkpoint as ``(step, minutes of training, loss)``, the training time,
    samples written along the way (step -> text), and the training time after each step."""

    model: torch.nn.Module
    loss: list[float]
    val: list[tuple[int, float, float]]
    seconds: float
    samples: dict[int, str] = field(default_factory=dict)
    clock: list[float] = field(default_factory=list)


def stacked_batches(
    get_batch, data: torch.Tensor, n: int, *, seed: int, schedule: dict | None = None
) -> torch.Tensor:
    """``n`` batches of the schedule's shape drawn by ``get_batch`` from ``data`` (a token
    stream), each ``x`` with the last target appended: ``(n, B, T + 1)``."""
    schedule = SCHEDULE if schedule is None else schedule
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        x, y = get_batch(data, schedule["batch_size"], schedule["seq_len"], generator=generator)
        rows.append(torch.cat([x, y[:, -1:]], dim=1))
    return torch.stack(rows)


def write(
    generate, model, tokenizer, n: int, *, temperature: float = 0.8, seed: int = 0, prompt="\n"
) -> str:
    """``n`` tokens sampled by ``generate`` (the learner's sampler, notebook 08) after ``prompt``,
    decoded without the prompt."""
    device = next(model.parameters()).device
    idx = torch.tensor([tokenizer.encode(prompt)], device=device)
    generator = torch.Generator(device).manual_seed(seed)
    ids = generate(model, idx, n, temperature=temperature, generator=generator)
    return tokenizer.decode(ids[0, idx.shape[1] :].tolist())


def train_yours(
    parts,
    data: TextDataset,
    config,
    steps: int,
    *,
    seed: int = 0,
    eval_every: int = 0,
    eval_batches: int = 8,
    samples_at: tuple[int, ...] = (),
    watch=None,
    schedule: dict | None = None,
    device=None,
) -> YourRun:
    """Train ``parts.gpt(config)`` for ``steps`` steps of ``schedule`` (default: the capstone
    schedule; a dict of its keys) with ``parts.train_loop`` (see the module docstring).
    ``eval_every``: held-out loss every so many steps (0: only after the last one), and
    ``watch(step, model)`` called then too; ``samples_at``: steps after which 200 tokens are
    written (prompt a newline, temperature 0.8, the step as the seed: each sample opens its
    own way)."""
    schedule = SCHEDULE if schedule is None else schedule
    device = torch.device(device or "cpu")
    with threads_of(device, THREADS):
        seed_everything(seed)
        model = parts.gpt(config).to(device)
        batches = stacked_batches(parts.get_batch, data.train, steps, seed=seed, schedule=schedule)
        val_batches = stacked_batches(
            parts.get_batch, data.val, eval_batches, seed=1, schedule=schedule
        ).to(device)
        # The learner's groups (the reference's where theirs fails its check, as every part).
        optimizer = parts.configure_optimizer(
            model, lr=schedule["lr"], weight_decay=schedule.get("weight_decay", 0.1)
        )
        val: list[tuple[int, float, float]] = []
        samples: dict[int, str] = {}
        clock = {"started": time.perf_counter(), "paused": 0.0}
        after_step: list[float] = []  # seconds of training after each step

        def after_each_step(*_) -> None:
            now = time.perf_counter()
            after_step.append(now - clock["started"] - clock["paused"])
            step = len(after_step)
            due = step == steps or (eval_every and step % eval_every == 0)
            if due:
                val.append(
                    (step, after_step[-1] / 60, float(parts.estimate_loss(model, val_batches)))
                )
                if watch is not None:
                    watch(step, model)
            if step in samples_at:
                samples[step] = write(parts.generate, model, data.tokenizer, 200, seed=step)
            clock["paused"] += time.perf_counter() - now

        hook = optimizer.register_step_post_hook(after_each_step)
        try:
            loss = parts.train_loop(
                model,
                optimizer,
                batches[:, None].to(device),
                max_lr=schedule["lr"],
                warmup_steps=min(schedule["warmup"], steps // 10),
                max_norm=1.0,
            )
        finally:
            hook.remove()
        seconds = time.perf_counter() - clock["started"] - clock["paused"]
        return YourRun(model, [float(v) for v in loss], val, seconds, samples, after_step)


@contextlib.contextmanager
def threads_of(device: torch.device, threads: int):
    """Within the block, a CPU computes with ``threads`` threads (another device: as it is);
    the process's own number is restored after."""
    before = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
