"""What a check saves and restores around itself: random-number state and TF32 matmuls.

Split from ``_harness``, whose ``Checker`` uses these on entry and exit.
"""

from __future__ import annotations

import torch


def _save_rng(device: torch.device):
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda" and torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if device.type == "mps" and torch.backends.mps.is_available():
        state["mps"] = torch.mps.get_rng_state()
    return state


def _restore_rng(state) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])
    if "mps" in state:
        torch.mps.set_rng_state(state["mps"])


def _disable_tf32():
    """Full float32 matmuls during a check (TF32 needs 1e-3 tolerances); return what to restore.

    ``set_float32_matmul_precision("highest")`` always works and sets the legacy and the
    per-backend (torch >= 2.9) flags alike. The old setting is read from both APIs:
    ``get_float32_matmul_precision()`` raises once TF32 was set through the new one.
    """
    new = getattr(torch.backends.cuda.matmul, "fp32_precision", None)  # torch >= 2.9
    try:
        legacy = torch.get_float32_matmul_precision()
    except RuntimeError:  # TF32 set with the new API: the legacy getter refuses
        legacy = None
    torch.set_float32_matmul_precision("highest")
    return legacy, new


def _restore_tf32(previous) -> None:
    legacy, new = previous
    if legacy is not None:
        torch.set_float32_matmul_precision(legacy)
    if new is not None:
        torch.backends.cuda.matmul.fp32_precision = new
