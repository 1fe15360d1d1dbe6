"""Explicit attention (the lesson's step-by-step path) vs ``F.scaled_dot_product_attention``.

    python benchmarks/attention_impl.py
    python benchmarks/attention_impl.py --device cuda --lengths 1024 4096 --batch 4 --heads 12

Three candidates on the same causal problem, timed interleaved: ``explicit``
(``tc.scaled_dot_product_attention`` with a bool mask), ``sdpa_mask`` (PyTorch's function
given the same mask) and ``sdpa_causal`` (``is_causal=True``, no mask tensor). Prints
medians, ``speedup = explicit / candidate`` and the largest output difference.
"""

from __future__ import annotations

from _bench import parser, setup, table

from tfcourse.lab.production import measure_attention_impls
from tfcourse.lab.timing import format_bytes, format_seconds

if __name__ == "__main__":
    p = parser(__doc__.splitlines()[0], repeats=10)
    p.add_argument("--lengths", nargs="+", type=int, default=[128, 512, 1024, 2048])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=64)
    args = p.parse_args()
    device = setup(args)
    rows = []
    for T in args.lengths:
        r = measure_attention_impls(
            T,
            batch=args.batch,
            n_heads=args.heads,
            head_dim=args.head_dim,
            device=device,
            repeats=args.repeats,
            seed=args.seed,
        )
        rows.append(
            {
                **r,
                **{
                    k: format_seconds(r[f"{k}_s"]) for k in ("explicit", "sdpa_mask", "sdpa_causal")
                },
                "scores": format_bytes(r["scores_bytes"]),
            }
        )
    table(
        rows,
        [
            ("T", "T", "d"),
            ("explicit", "explicit", "s"),
            ("sdpa_mask", "sdpa+mask", "s"),
            ("sdpa_causal", "sdpa is_causal", "s"),
            ("speedup_sdpa_mask", "x (mask)", ".2f"),
            ("speedup_sdpa_causal", "x (is_causal)", ".2f"),
            ("max_diff_sdpa_causal", "max |diff|", ".1e"),
            ("scores", "explicit scores", "s"),
        ],
    )
