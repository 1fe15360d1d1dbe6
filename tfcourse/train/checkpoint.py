"""Checkpoint files: written atomically, read back as tensors and plain containers only."""

from __future__ import annotations

import os

import torch

CHECKPOINT_NAME = "checkpoint.pt"      # the file a run directory holds

# Bumped when the layout of ``Trainer.state_dict()`` changes; ``Trainer.load_state_dict`` refuses others.
CHECKPOINT_FORMAT = 1


def save_checkpoint(path, state: dict) -> None:
    """``torch.save`` to a temporary file, then rename: a crash never leaves half a checkpoint."""
    path = os.fspath(path)
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)


def load_checkpoint(path, map_location="cpu") -> dict:
    """``torch.load(path, weights_only=True)``: tensors and plain containers, no arbitrary code."""
    return torch.load(os.fspath(path), map_location=map_location, weights_only=True)
