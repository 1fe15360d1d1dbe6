"""The flags of ``tfcourse train``: the parser's groups, the values a ``--preset`` implies,
and the dataset, model and training configs the flags describe."""

from __future__ import annotations

import argparse

from ..nn.config import PRESETS, GPTConfig
from .checkpoint import CHECKPOINT_NAME
from .data import DATASETS, TEXT_SOURCES
from .loop import TrainConfig
from .presets import training_defaults

# Model flags: (flag, GPTConfig field, type).
MODEL_FLAGS = (
    ("--n-layers", "n_layers", int),
    ("--n-heads", "n_heads", int),
    ("--n-kv-heads", "n_kv_heads", int),
    ("--d-model", "d_model", int),
    ("--dropout", "dropout", float),
)
# Defaults of flags that are None in the parser, so --resume can tell a flag given from a default.
_FLAG_DEFAULTS = {
    "vocab_size": 32,
    "weight_decay": 0.1,
    "grad_clip": 1.0,
    "eval_every": 100,
    "eval_batches": 4,
    "seed": 0,
}


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The command's flags, in four groups: data, model, training, checkpoints and runs."""
    data = parser.add_argument_group("data")
    data.add_argument(
        "--dataset",
        choices=DATASETS,
        default=None,
        help="markov: random Markov chain with a known loss floor; copy: copy a "
        "random string; text: English from Python's own documentation "
        "(default: markov, or the preset's)",
    )
    data.add_argument(
        "--text-source",
        choices=TEXT_SOURCES,
        default=None,
        help="text: stdlib docstrings, or the capstone corpus (the reference "
        "manual's topics + docstrings) (default: docstrings, or the preset's)",
    )
    data.add_argument(
        "--vocab-size",
        type=int,
        default=None,
        help="markov: number of states; copy: number of symbols (default: 32)",
    )
    data.add_argument(
        "--max-chars",
        type=int,
        default=None,
        help="text: characters to gather (default: 200000; capstone: all)",
    )
    data.add_argument(
        "--val-block",
        type=int,
        default=None,
        metavar="N",
        help="text: hold out one block of N characters in ten for validation "
        "(default: the last tenth; capstone: 5000, notebook 12's split)",
    )
    model = parser.add_argument_group("model")
    model.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="tiny",
        help="GPTConfig preset the flags below override (default: tiny)",
    )
    for flag, field, kind in MODEL_FLAGS:
        model.add_argument(flag, type=kind, default=None, help=f"override {field}")
    model.add_argument("--post-ln", action="store_true", help="post-LN blocks (default: pre-LN)")
    loop = parser.add_argument_group("training")
    loop.add_argument(
        "--steps",
        type=int,
        default=None,
        help="total optimizer steps (default: 300 or the preset's; the checkpoint's with --resume)",
    )
    loop.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="sequences per step and process (default: 16 or the preset's)",
    )
    loop.add_argument(
        "--seq-len",
        type=int,
        default=None,
        help="tokens per sequence (default: 64 or the preset's)",
    )
    loop.add_argument(
        "--lr", type=float, default=None, help="peak learning rate (default: 3e-3 or the preset's)"
    )
    loop.add_argument(
        "--min-lr", type=float, default=None, help="final learning rate (default: lr/10)"
    )
    loop.add_argument(
        "--warmup", type=int, default=None, help="linear warmup steps (default: 10%% of --steps)"
    )
    loop.add_argument(
        "--weight-decay", type=float, default=None, help="AdamW decay of 2-D weights (default: 0.1)"
    )
    loop.add_argument(
        "--grad-clip",
        type=float,
        default=None,
        help="clip the gradient norm to this (0 = off; default: 1.0)",
    )
    loop.add_argument(
        "--eval-every",
        type=int,
        default=None,
        help="validate every N steps (0 = at the end; default: 100)",
    )
    loop.add_argument("--eval-batches", type=int, default=None, help="(default: 4)")
    loop.add_argument("--seed", type=int, default=None, help="(default: 0)")
    loop.add_argument(
        "--device",
        default=None,
        help="cpu, cuda, mps (default: $TFCOURSE_DEVICE, else the best available)",
    )
    run = parser.add_argument_group("checkpoints and runs")
    run.add_argument(
        "--out", default=None, help=f"directory for {CHECKPOINT_NAME} (default: no checkpoints)"
    )
    run.add_argument(
        "--save-every",
        type=int,
        default=0,
        help="also checkpoint every N steps (default: only at the end)",
    )
    run.add_argument(
        "--resume",
        nargs="?",
        const="auto",
        default=None,
        metavar="CHECKPOINT",
        help=f"continue from CHECKPOINT (default: OUT/{CHECKPOINT_NAME}); the run's "
        "config comes from the checkpoint, --steps may extend it",
    )
    run.add_argument(
        "--stop-after",
        type=int,
        default=None,
        metavar="N",
        help="stop after N steps of this invocation (checkpoint, then --resume later)",
    )
    run.add_argument(
        "--sample",
        type=int,
        default=200,
        metavar="N",
        help="generate N tokens at the end (0 = none; default: 200)",
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument(
        "--no-memory-check",
        action="store_true",
        help="start even when the memory estimate exceeds what is available",
    )
    run.add_argument(
        "--memory-limit",
        type=float,
        default=None,
        metavar="GIB",
        help="refuse runs estimated above GIB (default: the memory available)",
    )
    run.add_argument(
        "--collective-timeout",
        type=float,
        default=300,
        metavar="SECONDS",
        help="under torchrun, end the job when a collective waits longer than "
        "this for a frozen or dead process (at most 86400; default: 300)",
    )


def apply_preset(args) -> None:
    """Fill every flag left unset with the value the ``--preset`` implies; ``args.given``
    names the flags given on the command line (``--resume`` compares only those)."""
    args.given = {name for name, value in vars(args).items() if value is not None}
    args.steps_given = args.steps  # --resume keeps the checkpoint's unless given
    for name, value in {**_FLAG_DEFAULTS, **training_defaults(args.preset)}.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)


def dataset_spec(args) -> dict:
    """The dataset the flags name: ``{name, kwargs}`` for ``make_dataset`` and the checkpoint."""
    if args.dataset == "markov":
        return {"name": "markov", "kwargs": {"vocab_size": args.vocab_size, "seed": 0}}
    if args.dataset == "copy":
        return {"name": "copy", "kwargs": {"n_symbols": args.vocab_size}}
    return {
        "name": "text",
        "kwargs": {
            "max_chars": args.max_chars,
            "source": args.text_source,
            "val_block": args.val_block,
        },
    }


def model_config(args, vocab_size: int) -> GPTConfig:
    """The ``--preset``'s ``GPTConfig`` with the model flags given, for ``vocab_size`` tokens."""
    overrides = {
        field: getattr(args, field)
        for _, field, _ in MODEL_FLAGS
        if getattr(args, field) is not None
    }
    if args.post_ln:
        overrides["pre_ln"] = False
    return GPTConfig.preset(
        args.preset, vocab_size=vocab_size, max_seq_len=args.seq_len, **overrides
    )


def train_config(args) -> TrainConfig:
    """The ``TrainConfig`` of the training flags (warmup: a tenth of the steps unless given)."""
    steps = 300 if args.steps is None else args.steps
    warmup = steps // 10 if args.warmup is None else args.warmup
    return TrainConfig(
        steps=steps,
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        max_lr=args.lr,
        min_lr=args.min_lr,
        warmup_steps=warmup,
        weight_decay=args.weight_decay,
        grad_clip=args.grad_clip if args.grad_clip > 0 else None,
        eval_every=args.eval_every,
        eval_batches=args.eval_batches,
        seed=args.seed,
    )
