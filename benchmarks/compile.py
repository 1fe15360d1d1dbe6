"""``torch.compile`` on a Transformer block: compile time, then eager vs compiled speed.

    python benchmarks/compile.py
    python benchmarks/compile.py --device cuda --backend inductor --d-model 512

The first call of a compiled module compiles it (inductor generates and builds C++ or
Triton code), so it is timed on its own. Then eager and compiled forwards are timed
interleaved, and ``speedup = eager / compiled`` is printed. If compilation fails (no C++
compiler, unsupported platform), the reason is printed and the script exits 0.
"""

from __future__ import annotations

import torch
from _bench import parser, setup

import tfcourse as tc
from tfcourse.lab.production import try_compile
from tfcourse.lab.timing import compare_times, format_seconds

if __name__ == "__main__":
    p = parser(__doc__.splitlines()[0], repeats=20)
    p.add_argument("--backend", default="inductor")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    args = p.parse_args()
    device = setup(args)
    block = tc.TransformerBlock(args.d_model, args.heads, max_seq_len=args.seq).to(device).eval()
    x = torch.randn(args.batch, args.seq, args.d_model, device=device)
    result = try_compile(block, x, backend=args.backend)
    if not result.compiled:
        print(f"torch.compile unavailable here, eager only: {result.reason}")
        raise SystemExit(0)
    print(f"{result.reason}: first call (compilation) {format_seconds(result.first_call_s)}")
    with torch.no_grad():
        diff = float((result.module(x) - block(x)).abs().max())
        t = compare_times(
            {"eager": lambda: block(x), "compiled": lambda: result.module(x)},
            repeats=args.repeats,
            device=device,
        )
    print(
        f"eager {format_seconds(t['eager'])}, compiled {format_seconds(t['compiled'])}, "
        f"speedup eager/compiled {t['eager'] / t['compiled']:.2f}, max |diff| {diff:.1e}"
    )
