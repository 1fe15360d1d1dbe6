"""The causal mask sliced from a registered buffer vs built on every call (the lesson's note 2).

    python benchmarks/mask_buffer.py
    python benchmarks/mask_buffer.py --device cuda --lengths 1024 4096 8192

For each sequence length T: the time to get the mask (slice vs ``ones(T, T).tril()``),
the time of a whole explicit-attention forward with each, the bytes the per-call mask
allocates next to the ``(B, H, T, T)`` scores the explicit path allocates anyway, and on
CUDA the measured peak memory of one forward with each. Ratios are per-call / buffer.
"""

from __future__ import annotations

from _bench import parser, setup, table

from tfcourse.lab.production import measure_mask_buffer
from tfcourse.lab.timing import format_bytes, format_seconds


def peak(n_bytes):
    return format_bytes(n_bytes) if n_bytes is not None else None


if __name__ == "__main__":
    p = parser(__doc__.splitlines()[0], repeats=10)
    p.add_argument("--lengths", nargs="+", type=int, default=[256, 1024, 2048, 4096])
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=2)
    args = p.parse_args()
    device = setup(args)
    rows = []
    for T in args.lengths:
        r = measure_mask_buffer(
            T,
            d_model=args.d_model,
            n_heads=args.heads,
            device=device,
            repeats=args.repeats,
            seed=args.seed,
        )
        rows.append(
            {
                **r,
                "mask_b": format_seconds(r["mask_buffer_s"]),
                "mask_p": format_seconds(r["mask_per_call_s"]),
                "fwd_b": format_seconds(r["forward_buffer_s"]),
                "fwd_p": format_seconds(r["forward_per_call_s"]),
                "mask_mem": format_bytes(r["mask_bytes"]),
                "scores_mem": format_bytes(r["scores_bytes"]),
                "peak_b": peak(r["peak_buffer_bytes"]),
                "peak_p": peak(r["peak_per_call_bytes"]),
            }
        )
    table(
        rows,
        [
            ("T", "T", "d"),
            ("mask_b", "mask: slice", "s"),
            ("mask_p", "mask: build", "s"),
            ("mask_speedup", "build/slice", ".0f"),
            ("fwd_b", "fwd: buffer", "s"),
            ("fwd_p", "fwd: per call", "s"),
            ("forward_speedup", "per-call/buffer", ".3f"),
            ("mask_mem", "mask bytes", "s"),
            ("scores_mem", "scores bytes", "s"),
            ("peak_b", "peak: buffer", "s"),
            ("peak_p", "peak: per call", "s"),
        ],
    )
