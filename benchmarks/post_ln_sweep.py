"""Where does post-LN break? A learning-rate sweep of pre-LN vs post-LN GPTs.

Trains tiny GPTs on the Markov-chain task (known loss floor) for every
combination of depth, learning rate, LN placement and warmup, and prints one
row per run: the mean training loss of the last steps, its gap to the floor,
and a verdict. A run "breaks" when it diverges (non-finite loss) or gets
stuck at the loss of a model that ignores the context (the unigram entropy).

Notebook 08 runs a few of these cells at its own (smaller) scale; this script
runs the full grid from the shell (several minutes on one CPU core):

    python benchmarks/post_ln_sweep.py
    python benchmarks/post_ln_sweep.py --layers 6 12 --lrs 1e-3 1e-2 3e-2 --steps 150 --seeds 0 1
    python benchmarks/post_ln_sweep.py --csv sweep.csv
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time

import torch

import tfcourse as tc
from tfcourse.train.data import MarkovChain
from tfcourse.train.loop import train


def verdict(final: float, floor: float, unigram: float) -> str:
    """ "diverged" (non-finite loss), "stuck" (no better than token frequencies),
    "partial" (learned part of the chain) or "trained" (within a quarter of the way)."""
    if not math.isfinite(final):
        return "diverged"
    fraction = (final - floor) / (unigram - floor)  # 0 at the floor, 1 at the unigram loss
    if fraction >= 0.9:
        return "stuck"
    return "partial" if fraction > 0.25 else "trained"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[6, 12])
    parser.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 3e-3, 1e-2, 3e-2, 1e-1])
    parser.add_argument(
        "--warmups", type=int, nargs="+", default=[0, 30], help="warmup steps to try (0 = none)"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--n-heads", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--vocab-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--csv", help="also write the rows to this CSV file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    chain = MarkovChain(args.vocab_size, 4, seed=0)
    floor, unigram = chain.entropy_rate, chain.unigram_entropy
    print(
        f"Markov chain: floor (entropy rate) {floor:.4f} nats, unigram entropy {unigram:.4f} nats"
    )
    header = [
        "layers",
        "ln",
        "warmup",
        "lr",
        "seed",
        "final_loss",
        "gap",
        "max_grad_norm",
        "verdict",
        "seconds",
    ]
    print(" ".join(f"{h:>13}" for h in header))
    rows = []
    for n_layers in args.layers:
        for warmup in args.warmups:
            for lr in args.lrs:
                for pre_ln in (True, False):
                    for seed in args.seeds:
                        config = tc.GPTConfig(
                            vocab_size=args.vocab_size,
                            max_seq_len=args.seq_len,
                            n_layers=n_layers,
                            n_heads=args.n_heads,
                            d_model=args.d_model,
                            pre_ln=pre_ln,
                        )
                        torch.manual_seed(seed)
                        model = tc.GPT(config)
                        start = time.perf_counter()
                        history = train(
                            model,
                            chain,
                            steps=args.steps,
                            batch_size=args.batch_size,
                            seq_len=args.seq_len,
                            max_lr=lr,
                            warmup_steps=warmup,
                            seed=seed,
                            eval_batches=1,
                        )
                        seconds = time.perf_counter() - start
                        final = history.final_loss()
                        row = dict(
                            layers=n_layers,
                            ln="pre" if pre_ln else "post",
                            warmup=warmup,
                            lr=lr,
                            seed=seed,
                            final_loss=final,
                            gap=final - floor,
                            max_grad_norm=max(history.grad_norm),
                            verdict=verdict(final, floor, unigram),
                            seconds=seconds,
                        )
                        rows.append(row)
                        print(
                            " ".join(
                                f"{v:>13.4g}" if isinstance(v, float) else f"{v!s:>13}"
                                for v in row.values()
                            ),
                            flush=True,
                        )
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=header)
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
