"""Speed of one Transformer block, forward + backward: tfcourse vs PyTorch vs Hugging Face.

Usage (from the course folder; not a test):

    python benchmarks/block_speed.py                  # CPU, and CUDA if present
    python benchmarks/block_speed.py --device cpu --rounds 30 --threads 1

Times one pre-LN block (B=8, T=256, D=384, H=6, MLP 4D, GELU, dropout 0) doing a
forward and a backward pass (input gradient included, as inside a model) for:

- tfcourse ``TransformerBlock`` with ``attn_impl="explicit"`` (attention written out),
- tfcourse ``TransformerBlock`` with ``attn_impl="sdpa"`` (``F.scaled_dot_product_attention``),
  both with ``fused_norms=True`` (norms as ``F.layer_norm``, the production setting),
- ``nn.TransformerEncoderLayer(norm_first=True, batch_first=True, activation="gelu")``
  given a causal mask with ``is_causal=True``,
- Hugging Face ``GPT2Block`` (SDPA attention), if ``transformers`` is installed,
- a diagnostic row: the tfcourse SDPA block with its LayerNorm written from
  primitives (the teaching default), to show what the fused norms are worth.

The candidates run interleaved, round after round, in a rotating order, so a
burst of load on a shared machine hits all of them rather than one. It prints
the median wall-clock time per step (and, on CPU, the median process CPU time,
which load from other programs disturbs less), the ratios to
``nn.TransformerEncoderLayer``, and whether the targets are met: SDPA path
<= 0.90x nn.TransformerEncoderLayer, explicit path <= 1.3x SDPA path.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch
from torch import nn

import tfcourse as tc

REFERENCE = "nn.TransformerEncoderLayer"
PRIMITIVE_NORMS = "(tfcourse sdpa, norms from primitives)"
TARGETS = (  # (label, numerator, denominator, max ratio)
    ("SDPA path vs nn.TransformerEncoderLayer", "tfcourse sdpa", REFERENCE, 0.90),
    ("explicit path vs SDPA path", "tfcourse explicit", "tfcourse sdpa", 1.30),
)


def build_candidates(B: int, T: int, D: int, H: int, device: torch.device) -> dict:
    """name -> (module, forward(x) -> y); every module has the same parameter shapes."""
    candidates = {}
    for impl in ("explicit", "sdpa"):
        # fused_norms=True: the norms run as F.layer_norm (the production setting);
        # the attention path is what the two rows compare.
        block = tc.TransformerBlock(
            D, H, max_seq_len=T, pre_ln=True, activation="gelu", attn_impl=impl, fused_norms=True
        ).to(device)
        candidates[f"tfcourse {impl}"] = (block, block)

    # Diagnostic, not a target: the SDPA block with the LayerNorm written from
    # primitives (the teaching default, several kernels per norm).
    primitive = tc.TransformerBlock(
        D, H, max_seq_len=T, pre_ln=True, activation="gelu", attn_impl="sdpa"
    ).to(device)
    candidates[PRIMITIVE_NORMS] = (primitive, primitive)

    layer = nn.TransformerEncoderLayer(
        D,
        H,
        dim_feedforward=4 * D,
        dropout=0.0,
        activation="gelu",
        batch_first=True,
        norm_first=True,
    ).to(device)
    # The float mask is what nn.Transformer expects; is_causal=True lets it skip
    # the mask and select SDPA's causal kernel.
    mask = nn.Transformer.generate_square_subsequent_mask(T, device=device)
    candidates[REFERENCE] = (layer, lambda x: layer(x, src_mask=mask, is_causal=True))

    try:
        from transformers import GPT2Config
        from transformers.models.gpt2.modeling_gpt2 import GPT2Block
    except ImportError:
        print("transformers not installed: skipping GPT2Block")
    else:
        config = GPT2Config(
            n_embd=D,
            n_head=H,
            n_positions=T,
            resid_pdrop=0.0,
            attn_pdrop=0.0,
            embd_pdrop=0.0,
            activation_function="gelu",
            attn_implementation="sdpa",
        )
        gpt2 = GPT2Block(config, layer_idx=0).to(device)
        # Without an attention_mask, HF's SDPA attention runs with is_causal=True.
        candidates["HF GPT2Block (sdpa)"] = (gpt2, lambda x: _first(gpt2(x)))
    for module, _ in candidates.values():
        module.train()
    return candidates


def _first(output):
    return output[0] if isinstance(output, tuple) else output


def step(module: nn.Module, forward, x: torch.Tensor) -> None:
    """One forward + backward; gradients are dropped so every step does the same work."""
    module.zero_grad(set_to_none=True)
    x.grad = None
    forward(x).square().mean().backward()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_device(device: torch.device, args) -> dict[str, dict[str, float]]:
    """name -> {"wall": median s/step, "cpu": median process CPU s/step}."""
    torch.manual_seed(0)
    candidates = build_candidates(args.batch, args.seq_len, args.d_model, args.heads, device)
    x = torch.randn(args.batch, args.seq_len, args.d_model, device=device, requires_grad=True)
    names = list(candidates)
    for name in names:  # warm-up: allocator, kernel selection, caches
        for _ in range(args.warmup):
            step(*candidates[name], x)
    sync(device)
    wall = {name: [] for name in names}
    cpu = {name: [] for name in names}
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]  # rotate who goes first
        for name in order:
            sync(device)
            start_wall, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(args.steps):
                step(*candidates[name], x)
            sync(device)
            wall[name].append((time.perf_counter() - start_wall) / args.steps)
            cpu[name].append((time.process_time() - start_cpu) / args.steps)
    return {
        name: {"wall": statistics.median(wall[name]), "cpu": statistics.median(cpu[name])}
        for name in names
    }


def report(device: torch.device, medians: dict[str, dict[str, float]]) -> None:
    kinds = ["wall", "cpu"] if device.type == "cpu" else ["wall"]
    header = f"{'block':<30}" + "".join(f"{k + ' ms':>10}{'ratio':>8}" for k in kinds)
    print(f"\n{header}   (ratio = time / {REFERENCE})")
    for name, times in medians.items():
        cells = "".join(
            f"{times[k] * 1e3:>10.1f}{times[k] / medians[REFERENCE][k]:>7.2f}x" for k in kinds
        )
        print(f"{name:<30}{cells}")
    for kind in kinds:
        print(
            f"\ntargets ({kind}-clock medians):"
            if kind == "wall"
            else "\ntargets (CPU-time medians):"
        )
        for label, num, den, limit in TARGETS:
            ratio = medians[num][kind] / medians[den][kind]
            verdict = "met" if ratio <= limit else "NOT met"
            print(f"  {label:<42} {ratio:5.2f}x  (target <= {limit:.2f}x)  {verdict}")
        print(
            f"  diagnostic: with the norms written from primitives (fused_norms=False), the "
            f"SDPA block is {medians[PRIMITIVE_NORMS][kind] / medians[REFERENCE][kind]:.2f}x "
            f"{REFERENCE}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--device",
        action="append",
        help="cpu, cuda, ... (repeatable; default: cpu, plus cuda if available)",
    )
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--d-model", type=int, default=384)
    parser.add_argument("--heads", type=int, default=6)
    parser.add_argument(
        "--rounds",
        type=int,
        default=15,
        help="interleaved rounds; medians are taken over these (default 15)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=2,
        help="forward+backward steps per candidate per round (default 2)",
    )
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)"
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    devices = args.device or (["cpu"] + (["cuda"] if torch.cuda.is_available() else []))

    print(
        f"one pre-LN block, forward + backward: B={args.batch}, T={args.seq_len}, "
        f"D={args.d_model}, H={args.heads}, MLP {4 * args.d_model}, GELU, dropout 0"
    )
    print(
        f"torch {torch.__version__}, tfcourse {tc.__version__}, "
        f"python {platform.python_version()}, {torch.get_num_threads()} CPU threads; "
        f"{args.rounds} interleaved rounds x {args.steps} steps"
    )
    for name in devices:
        device = torch.device(name)
        label = (
            torch.cuda.get_device_name(device)
            if device.type == "cuda"
            else platform.processor() or platform.machine()
        )
        print(f"\n=== {device} ({label})")
        report(device, bench_device(device, args))
    print("\nTimings on a shared or busy machine vary: compare the ratios of one interleaved run.")
    return 0  # a benchmark, not a test: a missed target is reported, not an error


if __name__ == "__main__":
    raise SystemExit(main())
