"""The names ``tfcourse train`` and ``tfcourse sample`` offer on the command line, without
the machinery behind them, so that their ``--help`` imports no torch: the datasets, the
text sources and the checkpoint's file name (``data.py`` and ``checkpoint.py`` use them)."""

from __future__ import annotations

DATASETS = ("markov", "copy", "text")
TEXT_SOURCES = ("docstrings", "capstone")
CHECKPOINT_NAME = "checkpoint.pt"  # the file a run directory holds
