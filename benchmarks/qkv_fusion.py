"""One fused ``Linear(D, 3D)`` vs three ``Linear(D, D)`` for q, k, v (the lesson's note 1).

    python benchmarks/qkv_fusion.py
    python benchmarks/qkv_fusion.py --device cpu --threads 1 --sizes 8x64 1024x512

Each size is ``TOKENSxD`` (tokens = batch * sequence). Prints the median time of each
layout and ``speedup = separate / fused`` from the same run (above 1: fused is faster),
and the largest difference between their outputs.
"""

from __future__ import annotations

from _bench import parser, setup, table

from tfcourse.lab.production import measure_qkv_fusion
from tfcourse.lab.timing import format_seconds

if __name__ == "__main__":
    p = parser(__doc__.splitlines()[0], repeats=50)
    p.add_argument(
        "--sizes", nargs="+", default=["8x64", "64x256", "512x512", "2048x768", "4096x1024"]
    )
    args = p.parse_args()
    device = setup(args)
    rows = []
    for size in args.sizes:
        n_tokens, d_model = (int(v) for v in size.lower().split("x"))
        r = measure_qkv_fusion(
            n_tokens, d_model, device=device, repeats=args.repeats, seed=args.seed
        )
        rows.append(
            {
                **r,
                "fused": format_seconds(r["fused_s"]),
                "separate": format_seconds(r["separate_s"]),
            }
        )
    table(
        rows,
        [
            ("n_tokens", "tokens", "d"),
            ("d_model", "D", "d"),
            ("fused", "fused", "s"),
            ("separate", "3 separate", "s"),
            ("speedup", "separate/fused", ".2f"),
            ("max_diff", "max |diff|", ".1e"),
        ],
    )
