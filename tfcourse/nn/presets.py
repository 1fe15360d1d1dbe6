"""The ``GPTConfig`` presets by name: data only, so that ``tfcourse train --help`` can list
them without importing torch (``GPTConfig.preset`` builds one)."""

from __future__ import annotations

PRESETS: dict[str, dict] = {
    # OpenAI GPT-2 sizes (vocab 50257, context 1024, tanh GELU, tied head).
    "gpt2-small": dict(n_layers=12, n_heads=12, d_model=768),
    "gpt2-medium": dict(n_layers=24, n_heads=16, d_model=1024),
    "gpt2-large": dict(n_layers=36, n_heads=20, d_model=1280),
    "gpt2-xl": dict(n_layers=48, n_heads=25, d_model=1600),
    # The lesson's block: exact GELU, 12 layers of width 768.
    "lesson": dict(n_layers=12, n_heads=12, d_model=768, activation="gelu"),
    # LLaMA-style: RMSNorm, SwiGLU, rotary positions, no biases, untied head.
    "llama-tiny": dict(
        vocab_size=512,
        max_seq_len=256,
        n_layers=4,
        n_heads=4,
        d_model=128,
        norm="rmsnorm",
        mlp="swiglu",
        bias=False,
        positional="rope",
        tie_weights=False,
    ),
    # Small enough to train in seconds on a laptop CPU.
    "tiny": dict(vocab_size=64, max_seq_len=64, n_layers=2, n_heads=4, d_model=64),
    # The capstone (notebook 12, `tfcourse train --preset capstone`): a character model
    # that writes English after minutes on a laptop CPU; notebook 10's modern block, the
    # production code paths (why this block: tfcourse/train/presets.py).
    "capstone": dict(
        vocab_size=96,
        max_seq_len=128,
        n_layers=4,
        n_heads=6,
        d_model=192,
        norm="rmsnorm",
        mlp="swiglu",
        positional="rope",
        bias=False,
        attn_impl="sdpa",
        fused_norms=True,
    ),
}
