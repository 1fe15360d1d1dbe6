"""Training settings that go with a model preset: ``tfcourse train --preset NAME`` and
the notebooks use the same numbers.

Each entry holds ``TrainConfig`` fields plus the data (``dataset``, ``text_source``,
``max_chars``, ``val_block``). A flag given on the command line always wins over the preset.
"""

from __future__ import annotations

# Flags of `tfcourse train` when the preset has no entry here.
GENERIC = {
    "steps": 300,
    "batch_size": 16,
    "seq_len": 64,
    "lr": 3e-3,
    "dataset": "markov",
    "text_source": "docstrings",
    "max_chars": 200_000,
    "val_block": None,
}

TRAINING_PRESETS: dict[str, dict] = {
    # The capstone schedule: the whole capstone corpus (repeated paragraphs kept once), one
    # block of 5,000 characters in ten held out, context 128, AdamW with warmup and cosine,
    # batches of 16 x 128 tokens. `tfcourse train --preset capstone` trains characters for
    # "steps" steps (the model: nn/config.py "capstone", no dropout), about 3.3 minutes on an
    # idle 2-core CPU with the reference parts; more steps without dropout overfit. Notebook 12
    # keeps the batches, rates and warmup but takes its tokens, dropout and steps from the
    # sweep's best row: benchmarks/capstone_budget.py, tfcourse/train/capstone_runs.json.
    "capstone": {
        "steps": 1300,
        "batch_size": 16,
        "seq_len": 128,
        "lr": 3e-3,
        "warmup": 100,
        "min_lr": 3e-4,
        "dataset": "text",
        "text_source": "capstone",
        "max_chars": None,
        "val_block": 5000,
    },
}


def training_defaults(preset: str) -> dict:
    """The flag values ``preset`` implies (``GENERIC`` overlaid with its entry)."""
    return {**GENERIC, **TRAINING_PRESETS.get(preset, {})}
