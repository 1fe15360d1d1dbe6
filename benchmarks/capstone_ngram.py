"""The capstone's counting model: a character n-gram swept over order and discount.

    python benchmarks/capstone_ngram.py --orders 16 24 32            # the capstone's split
    python benchmarks/capstone_ngram.py --orders 16 24 32 --more-text

A benchmark, not a test. Each order is counted once on the training text of notebook 12's split
(with ``--more-text``, also on ``capstone.more_training_text``, as ``budget.Setting(more_text=
True)`` trains the GPT) and scored with each discount on both parts of the held-out text
(``capstone.held_out_parts``): the validation part chooses the order and the discount, the test
part is the verdict's. The counts of an order grow with it and with the text: order 32 on the
1.58 M characters of ``--more-text`` held about 12 GB at its peak here, order 48 on the 0.56 M
characters of the split 7.5 GB.
"""

from __future__ import annotations

import argparse
import gc
import time

from tfcourse.lab.language import CharNGram
from tfcourse.train import capstone


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, nargs="+", default=[8, 16, 24, 32])
    parser.add_argument("--discounts", type=float, nargs="+", default=[0.9, 0.95, 0.98])
    parser.add_argument("--more-text", action="store_true", help="train on more text too")
    args = parser.parse_args()
    chars = capstone.capstone_data()
    parts = capstone.held_out_parts(chars.tokenizer.decode(chars.val.tolist()))
    if args.more_text:
        chars = capstone.with_more_training_text(chars)
    train = chars.tokenizer.decode(chars.train.tolist())
    print(
        f"# {len(train):,} training characters; {len(parts['validation']):,} validation, "
        f"{len(parts['test']):,} test"
    )
    for order in args.orders:
        started = time.perf_counter()
        model = CharNGram(train, order=order)
        for discount in args.discounts:
            model.discount = discount
            scores = {name: model.nats_per_char(text) for name, text in parts.items()}
            print(
                f"order {order:>2}, discount {discount}: validation {scores['validation']:.4f}, "
                f"test {scores['test']:.4f} nats/char ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
        del model
        gc.collect()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
