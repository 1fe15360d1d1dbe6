"""One training step of the production GPT against Hugging Face's GPT-2 (a benchmark, not a test).

    python benchmarks/train_step.py                     # CPU (and CUDA if present)
    python benchmarks/train_step.py --device cuda --repeats 50
    python benchmarks/train_step.py --profile           # where tfcourse's step spends its time

The step is what training does: zero the gradients, forward, mean next-token
cross-entropy, backward, AdamW. Both models have the same shape: 6 layers, D=384,
6 heads, T=256, B=8, vocab 4096, tied embeddings, tanh GELU, dropout 0.

- tfcourse ``GPT`` with the production settings: ``attn_impl="sdpa"``, ``fused_norms=True``;
- ``transformers.GPT2LMHeadModel`` with ``attn_implementation="sdpa"``, given ``labels``
  (its own loss, which shifts the logits by one inside the model).

Both run interleaved in one process (``tfcourse.lab.timing.compare_times``), so the
printed ratio (tfcourse / Hugging Face) compares like with like; the target is <= 0.80.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _bench import parser, setup

import tfcourse as tc

TARGET = 0.80


def build(device, vocab: int, T: int, D: int, H: int, layers: int):
    """``{name: (model, step())}``: each step is one whole training step."""
    from transformers import GPT2Config, GPT2LMHeadModel

    ours = tc.GPT(
        tc.GPTConfig(
            vocab_size=vocab,
            max_seq_len=T,
            n_layers=layers,
            n_heads=H,
            d_model=D,
            attn_impl="sdpa",
            fused_norms=True,
        )
    ).to(device)
    theirs = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=vocab,
            n_positions=T,
            n_embd=D,
            n_layer=layers,
            n_head=H,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            activation_function="gelu_new",
            attn_implementation="sdpa",
        )
    ).to(device)
    return {"tfcourse GPT (sdpa, fused norms)": ours, "HF GPT2LMHeadModel (sdpa)": theirs}


def make_step(model, idx, targets, hf: bool):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    model.train()

    def step():
        optimizer.zero_grad(set_to_none=True)
        if hf:
            # HF's labels are the inputs: it shifts by one internally (T-1 predictions).
            loss = model(input_ids=idx, labels=idx).loss
        else:
            logits = model(idx)
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()

    return step


def main() -> int:
    p = parser(__doc__.splitlines()[0], repeats=20)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--d-model", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument(
        "--profile",
        action="store_true",
        help="also print torch.profiler's top operators of tfcourse's step",
    )
    args = p.parse_args()
    device = setup(args)
    models = build(device, args.vocab, args.seq_len, args.d_model, args.heads, args.layers)
    generator = torch.Generator().manual_seed(args.seed)
    idx = torch.randint(args.vocab, (args.batch, args.seq_len), generator=generator).to(device)
    targets = torch.roll(idx, -1, dims=1)
    steps = {
        name: make_step(model, idx, targets, hf=name.startswith("HF"))
        for name, model in models.items()
    }
    print(
        f"# one training step: B={args.batch}, T={args.seq_len}, D={args.d_model}, "
        f"H={args.heads}, {args.layers} layers, vocab {args.vocab}; forward, loss, backward, "
        f"AdamW"
    )
    medians = tc.timing.compare_times(steps, repeats=args.repeats, warmup=3, device=device)
    ours, theirs = medians.values()
    for name, seconds in medians.items():
        print(f"{name:<36} {seconds * 1e3:8.1f} ms")
    ratio = ours / theirs
    print(
        f"ratio tfcourse / HF: {ratio:.2f}x (target <= {TARGET:.2f}x: "
        f"{'met' if ratio <= TARGET else 'NOT met'})"
    )
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        step = next(iter(steps.values()))
        activities = [ProfilerActivity.CPU] + (
            [ProfilerActivity.CUDA] if device.type == "cuda" else []
        )
        with profile(activities=activities) as prof:
            for _ in range(3):
                step()
        key = "cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
        print(prof.key_averages().table(sort_by=key, row_limit=25))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
