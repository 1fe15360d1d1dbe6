"""A Transformer block in float32 vs under ``torch.autocast`` (bfloat16, or float16 on old GPUs).

    python benchmarks/autocast.py
    python benchmarks/autocast.py --device cuda --dtypes bfloat16 float16 --d-model 1024

Prints, per autocast dtype: the medians, ``speedup = float32 / autocast`` from the same
run, the output dtype (the residual stream stays float32), and the error relative to the
float32 output's largest value. CPUs without native bfloat16 support are often *slower*
under autocast; the ratio shows it.
"""

from __future__ import annotations

import torch
from _bench import parser, setup, table

import tfcourse as tc
from tfcourse.lab.production import autocast_dtype, measure_autocast
from tfcourse.lab.timing import format_seconds

if __name__ == "__main__":
    p = parser(__doc__.splitlines()[0], repeats=10)
    p.add_argument("--dtypes", nargs="+", default=None, help="default: the device's autocast dtype")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    args = p.parse_args()
    device = setup(args)
    block = tc.TransformerBlock(args.d_model, args.heads, max_seq_len=args.seq, attn_impl="sdpa")
    block = block.to(device).eval()
    x = torch.randn(args.batch, args.seq, args.d_model, device=device)
    dtypes = [getattr(torch, d) for d in args.dtypes] if args.dtypes else [autocast_dtype(device)]
    rows = []
    for dtype in dtypes:
        r = measure_autocast(block, x, dtype=dtype, repeats=args.repeats)
        rows.append(
            {**r, "f32": format_seconds(r["float32_s"]), "low": format_seconds(r["autocast_s"])}
        )
    table(
        rows,
        [
            ("dtype", "autocast", "s"),
            ("f32", "float32", "s"),
            ("low", "autocast", "s"),
            ("speedup", "speedup", ".2f"),
            ("output_dtype", "output dtype", "s"),
            ("rel_err", "rel. error", ".1e"),
            ("finite", "finite", ""),
        ],
    )
