"""Greedy generation with and without a KV cache: speedup, and identical tokens.

    python benchmarks/kv_cache.py
    python benchmarks/kv_cache.py --device cuda --new-tokens 64 256 --d-model 256 --layers 6

For each number of new tokens, runs ``GPT.generate(temperature=0)`` with
``use_cache=False`` and ``use_cache=True`` interleaved and prints the medians,
``speedup = without / with`` and whether the two produced the same tokens.
"""

from __future__ import annotations

import torch
from _bench import parser, setup, table

import tfcourse as tc
from tfcourse.lab.timing import compare_times, format_seconds

if __name__ == "__main__":
    p = parser(__doc__.splitlines()[0], repeats=3)
    p.add_argument("--new-tokens", nargs="+", type=int, default=[32, 128, 480])
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    args = p.parse_args()
    device = setup(args)
    config = tc.GPTConfig.preset(
        "tiny",
        vocab_size=256,
        max_seq_len=args.prompt + max(args.new_tokens),
        d_model=args.d_model,
        n_layers=args.layers,
        n_heads=args.heads,
    )
    model = tc.GPT(config).to(device).eval()
    prompt = torch.randint(
        0, 256, (1, args.prompt), generator=torch.Generator().manual_seed(args.seed)
    ).to(device)
    print(
        f"# GPT: {args.layers} layers, D={args.d_model}, prompt {args.prompt} tokens, "
        f"{model.num_params():,} parameters"
    )
    rows = []
    for n in args.new_tokens:
        same = torch.equal(
            model.generate(prompt, n, temperature=0),
            model.generate(prompt, n, temperature=0, use_cache=True),
        )
        t = compare_times(
            {
                "no_cache": lambda n=n: model.generate(prompt, n, temperature=0),
                "cache": lambda n=n: model.generate(prompt, n, temperature=0, use_cache=True),
            },
            repeats=args.repeats,
            warmup=1,
            device=device,
        )
        rows.append(
            {
                "n": n,
                "no_cache": format_seconds(t["no_cache"]),
                "cache": format_seconds(t["cache"]),
                "speedup": t["no_cache"] / t["cache"],
                "same": str(same),
            }
        )
    table(
        rows,
        [
            ("n", "new tokens", "d"),
            ("no_cache", "no cache", "s"),
            ("cache", "KV cache", "s"),
            ("speedup", "speedup", ".2f"),
            ("same", "same tokens", "s"),
        ],
    )
