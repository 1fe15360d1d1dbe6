"""Shared command line and printing for the production benchmarks (not a benchmark itself).

Every script times its candidates interleaved in one run (``tfcourse.timing``) and
prints medians and the ratios computed from them; nothing is compared across runs.
"""

from __future__ import annotations

import argparse
import platform

import torch

import tfcourse as tc


def parser(description: str, *, repeats: int) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--device",
        default=None,
        help="cpu, cuda, mps (default: TFCOURSE_DEVICE, else cuda, else mps, else cpu)",
    )
    p.add_argument("--repeats", type=int, default=repeats, help="timed calls per candidate")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    p.add_argument("--seed", type=int, default=0)
    return p


def setup(args) -> torch.device:
    """Apply --threads/--seed, print what the numbers were measured on, return the device."""
    if args.threads:
        torch.set_num_threads(args.threads)
    tc.seed_everything(args.seed)
    device = torch.device(args.device) if args.device else tc.default_device()
    name = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else platform.processor() or platform.machine()
    )
    print(
        f"# torch {torch.__version__}, device {device} ({name}), "
        f"{torch.get_num_threads()} CPU threads, {args.repeats} repeats, medians"
    )
    return device


def table(rows: list[dict], columns: list[tuple[str, str, str]]) -> None:
    """Print ``rows`` as an aligned table; ``columns`` are ``(key, header, format)``."""
    cells = [
        [format(row[key], fmt) if row[key] is not None else "-" for key, _, fmt in columns]
        for row in rows
    ]
    headers = [header for _, header, _ in columns]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print("  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)))
    for r in cells:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
