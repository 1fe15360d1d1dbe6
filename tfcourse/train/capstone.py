"""The capstone run of notebook 12, as functions the notebook and the budget benchmark share.

``capstone_data()`` is the corpus with its held-out blocks; ``train_capstone(config, steps)``
trains a fresh ``GPT`` with the capstone schedule (``presets.TRAINING_PRESETS["capstone"]``)
and returns a ``CapstoneRun``; ``final_loss`` and ``write`` measure it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


from ..nn.config import GPTConfig
from ..nn.model import GPT
from ..runtime import seed_everything
from .data import TextDataset
from .loop import History, TrainConfig, Trainer, evaluate, held_out_loss  # noqa: F401
from .presets import TRAINING_PRESETS
from .sample import sample_text

SCHEDULE = TRAINING_PRESETS["capstone"]
VAL_BLOCK = SCHEDULE["val_block"]    # characters per held-out block (one block in ten)


@dataclass
class CapstoneRun:
    """A trained model, its history, the wall time of training, and samples along the way."""

    model: GPT
    history: History
    seconds: float
    samples: dict[int, str] = field(default_factory=dict)

    @property
    def tokens_per_second(self) -> float:
        steps = self.history.step[-1] + 1 if self.history.step else 0
        return steps * SCHEDULE["batch_size"] * SCHEDULE["seq_len"] / max(self.seconds, 1e-9)


def capstone_data() -> TextDataset:
    """The capstone corpus (``corpus.capstone_text``), characters as tokens, one block of
    ``VAL_BLOCK`` characters in ten held out."""
    return TextDataset(source=SCHEDULE["text_source"], max_chars=SCHEDULE["max_chars"],
                       val_block=VAL_BLOCK)


def capstone_config(data: TextDataset, **changes) -> GPTConfig:
    """The ``capstone`` model preset sized for ``data``, with ``changes`` applied."""
    return GPTConfig.preset("capstone", vocab_size=data.vocab_size,
                            max_seq_len=SCHEDULE["seq_len"], **changes)


def write(model: GPT, data: TextDataset, n_chars: int, *, temperature: float = 0.8,
          seed: int = 0, prompt: str = "\n") -> str:
    """``n_chars`` characters sampled after ``prompt`` (not repeated in the result)."""
    return sample_text(model, data.tokenizer, prompt, n_chars, temperature=temperature,
                       top_k=None, seed=seed)


def train_capstone(data: TextDataset, config: GPTConfig, steps: int, *, seed: int = 0,
                   device=None, samples_at=(), eval_every: int | None = None,
                   eval_batches: int = 8, amp: bool = False, compile: bool = False
                   ) -> CapstoneRun:
    """Train a fresh ``GPT(config)`` for ``steps`` steps of the capstone schedule (the
    warmup shortened to a tenth of a short run). ``samples_at``: steps after which 200
    characters are written (temperature 0.8, seed 0); ``eval_every``: validation every so
    many steps (default: eight times per run)."""
    seed_everything(seed)
    model = GPT(config)
    train_config = TrainConfig(
        steps=steps, batch_size=SCHEDULE["batch_size"], seq_len=SCHEDULE["seq_len"],
        max_lr=SCHEDULE["lr"], min_lr=SCHEDULE["min_lr"],
        warmup_steps=min(SCHEDULE["warmup"], steps // 10),
        eval_every=max(1, steps // 8) if eval_every is None else eval_every,
        eval_batches=eval_batches, seed=seed)
    trainer = Trainer(model, data, train_config, device=device, amp=amp, compile=compile)
    samples: dict[int, str] = {}

    def sample_along_the_way(t: Trainer) -> None:
        if t.step in samples_at:
            samples[t.step] = write(t.module, data, 200)

    started = time.perf_counter()
    history = trainer.fit(callback=sample_along_the_way)
    return CapstoneRun(model, history, time.perf_counter() - started, samples)


def final_loss(model: GPT, data: TextDataset, n_batches: int = 40) -> float:
    """Validation loss (nats/char) on ``n_batches`` fixed held-out batches of the schedule's
    shape: more than the run's own checkpoints use."""
    return evaluate(model, data, batch_size=SCHEDULE["batch_size"], seq_len=SCHEDULE["seq_len"],
                    n_batches=n_batches, seed=1)
