"""Checkpoint files: written atomically, read back as tensors and plain containers only."""

from __future__ import annotations

import os

import torch

from ..files import replaced_atomically
from .names import CHECKPOINT_NAME  # noqa: F401 - re-exported

# Bumped when the layout of ``Trainer.state_dict()`` changes; ``Trainer.load_state_dict``
# refuses others.
CHECKPOINT_FORMAT = 1


class CheckpointSaveError(OSError):
    """A checkpoint could not be written; the file that was there before is untouched."""

    def __init__(self, path: str, reason: str):
        super().__init__(reason)
        self.path, self.reason = path, reason


def save_checkpoint(path, state: dict) -> None:
    """``torch.save`` to a temporary file, then rename: a crash never leaves half a checkpoint.

    A failed write (disk full, Ctrl-C) removes the temporary file; write errors become a
    ``CheckpointSaveError``."""
    path = os.fspath(path)
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with replaced_atomically(path, prefix=".checkpoint-") as temporary:
            torch.save(state, temporary)
    except BaseException as error:
        # torch.save reports a full disk as RuntimeError("... file write failed").
        if isinstance(error, (OSError, RuntimeError)):
            reason = getattr(error, "strerror", None) or str(error).splitlines()[0][:200]
            raise CheckpointSaveError(path, reason) from error
        raise


def load_checkpoint(path, map_location="cpu") -> dict:
    """``torch.load(path, weights_only=True)``: tensors and plain containers, no arbitrary code."""
    return torch.load(os.fspath(path), map_location=map_location, weights_only=True)
