"""What a bigger training budget buys the capstone model (a benchmark, not a test).

    python benchmarks/capstone_budget.py                        # 0.5x, 1x, 2x the preset's steps
    python benchmarks/capstone_budget.py --factors 1 4 --device cuda
    python benchmarks/capstone_budget.py --factors 1.6 --dropout 0   # without dropout

Trains the capstone preset (notebook 12, ``tfcourse train --preset capstone``) from scratch
for each multiple of the preset's step count, on the same data and schedule shape, and
prints one row per budget: the wall time, the validation loss over every held-out character
(``capstone.held_out_loss``, as notebook 12 reports it), and the share of real words in 500
characters sampled at temperature 0.8 (seeds 0, 1, 2: their mean). Times
depend on the machine and its load; the losses and word shares do not, up to round-off.
"""

from __future__ import annotations

import argparse

import torch

from tfcourse.lab.language import real_word_fraction, vocabulary
from tfcourse.train import capstone


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--factors",
        type=float,
        nargs="+",
        default=[0.5, 1.0, 2.0],
        help="multiples of the preset's steps (default: 0.5 1 2)",
    )
    parser.add_argument(
        "--dropout", type=float, default=None, help="the model's dropout (default: the preset's)"
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    data = capstone.capstone_data()
    known = vocabulary(data.tokenizer.decode(data.train))
    config = (
        capstone.capstone_config(data)
        if args.dropout is None
        else capstone.capstone_config(data, dropout=args.dropout)
    )
    print(
        f"# capstone preset, {capstone.SCHEDULE['steps']} steps = 1x, dropout "
        f"{config.dropout:g}; device {device}, {torch.get_num_threads()} threads"
    )
    print(f"{'budget':>7} {'steps':>6} {'minutes':>8} {'val loss':>9} {'real words':>11}")
    for factor in args.factors:
        steps = max(1, round(factor * capstone.SCHEDULE["steps"]))
        run = capstone.train_capstone(
            data, config, steps, device=device, eval_every=steps, amp=device.type == "cuda"
        )
        loss = capstone.held_out_loss(run.model, data.val)
        words = (
            sum(
                real_word_fraction(capstone.write(run.model, data, 500, seed=seed), known)
                for seed in range(3)
            )
            / 3
        )
        print(
            f"{factor:>6g}x {steps:>6} {run.seconds / 60:>8.1f} {loss:>9.3f} {words:>10.0%}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
