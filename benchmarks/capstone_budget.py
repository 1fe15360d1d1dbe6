"""The capstone's training budget: which settings beat counting within ten minutes of a CPU.

    python benchmarks/capstone_budget.py --probe                      # ms per step, these settings
    python benchmarks/capstone_budget.py --minutes 10 --seeds 0 1     # train, score, print a row
    python benchmarks/capstone_budget.py --steps 2408 --tokens bpe1024 --dropout 0.3 --record r.json

A benchmark, not a test. Each run trains the capstone model (notebook 12) from scratch on the
capstone corpus and split, for the number of steps that fits in ``--minutes`` on this machine,
and scores it on each part of the held-out text (``budget.part_scores``; byte-pair losses
converted to nats per character): the loss over every character of the validation part, by
which settings are compared, and of the test part, which is meant for one reading only, the
verdict on the setting chosen. One row per setting: the settings, the steps, the
minutes (steps times the time of one step, measured by a probe run alone, or given with
``--step-ms`` from such a probe), each seed's losses. ``--record FILE`` appends the row to
FILE (``budget.record_run``; seeds recorded apart join their row). Notebook 12 prints
``tfcourse/train/capstone_runs.json`` and trains its row with the lowest mean validation loss,
for that row's steps.

The step time depends on the machine and its load, so measure it on an idle machine
(``--probe``); the losses depend only on the steps and the seed (up to round-off), so the runs
themselves may share the machine (``--threads 1``, two at a time on two cores).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from tfcourse.train import budget


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = parser.add_argument_group("the setting")
    what.add_argument("--tokens", default="chars", help="chars, or bpeN for N byte-pair merges")
    what.add_argument("--n-layers", type=int, default=None)
    what.add_argument("--d-model", type=int, default=None)
    what.add_argument("--n-heads", type=int, default=None)
    what.add_argument("--dropout", type=float, default=0.0, help="residual dropout")
    what.add_argument(
        "--attn-dropout", type=float, default=0.0, help="dropout on the attention weights"
    )
    what.add_argument("--seq-len", type=int, default=None)
    what.add_argument("--batch-size", type=int, default=None)
    what.add_argument("--lr", type=float, default=None)
    what.add_argument("--weight-decay", type=float, default=None)
    what.add_argument(
        "--more-text",
        action="store_true",
        help="train on the rest of the standard library's docstrings too (same held-out text)",
    )
    how = parser.add_argument_group("the budget")
    how.add_argument("--minutes", type=float, default=10.0)
    how.add_argument("--steps", type=int, default=None, help="instead of --minutes")
    how.add_argument("--step-ms", type=float, default=None, help="skip the probe: ms per step")
    how.add_argument("--probe", action="store_true", help="only measure the time of a step")
    how.add_argument("--seeds", type=int, nargs="+", default=[0])
    how.add_argument("--threads", type=int, default=None)
    how.add_argument("--device", default="cpu")
    how.add_argument("--record", type=Path, default=None, help="append the row to this JSON file")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    setting = budget.Setting(
        tokens=args.tokens,
        n_layers=args.n_layers,
        d_model=args.d_model,
        n_heads=args.n_heads,
        dropout=args.dropout,
        attn_dropout=args.attn_dropout,
        seq_len=args.seq_len,
        batch_size=args.batch_size,
        lr=args.lr,
        weight_decay=args.weight_decay,
        more_text=args.more_text,
    )
    data = budget.setting_data(setting)
    device = torch.device(args.device)
    if args.step_ms is not None:
        step_ms = args.step_ms
    elif args.steps is None or args.probe:
        step_ms = 1000 * budget.seconds_per_step(data, setting, device=device)
    else:
        step_ms = float("nan")
    print(f"# {setting.describe()}: {step_ms:.1f} ms a step, {torch.get_num_threads()} threads")
    if args.probe:
        return 0
    steps = args.steps or int(args.minutes * 60_000 / step_ms)
    losses, test_losses, curves = [], [], []
    for seed in args.seeds:
        started = time.perf_counter()
        run = budget.train_setting(data, setting, steps, seed=seed, device=device)
        scores = budget.part_scores(run.module, data)
        losses.append(scores["validation"])
        test_losses.append(scores["test"])
        curves.append(list(zip(run.history.val_step, run.history.val_loss, strict=True)))
        print(
            f"seed {seed}: {steps} steps in {(time.perf_counter() - started) / 60:.1f} min "
            f"(wall), validation {losses[-1]:.4f} nats/char",
            flush=True,
        )
    row = budget.RecordedRun(
        setting=setting,
        steps=steps,
        minutes=round(steps * step_ms / 60_000, 2),
        losses=tuple(round(x, 4) for x in losses),
        seeds=tuple(args.seeds),
        test_losses=tuple(round(x, 4) for x in test_losses),
        curves=tuple(tuple((s, round(v, 4)) for s, v in c) for c in curves),
    )
    print(json.dumps(row.to_dict()["summary"]))
    if args.record:
        budget.record_run(row, args.record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
