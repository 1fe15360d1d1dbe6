"""Shared pytest fixtures. Keep this file small: test-specific helpers live in their test files."""

from __future__ import annotations

import os

import pytest
import torch

# Hugging Face models in the tests are built from configs with random weights;
# nothing may be downloaded, so make any accidental hub access fail fast.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# The tests use tiny tensors: one intra-op thread is as fast, and on a busy or
# small machine it avoids OpenMP threads spinning against each other (measured
# here: a test module took 54 s with 2 threads under load, 2.7 s with 1).
# Notebook kernels run in their own processes and are not affected.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed_torch():
    """Every test starts from the same global RNG state, whatever ran before it."""
    torch.manual_seed(0)


@pytest.fixture
def tiny_config():
    """A GPT small enough for per-test use: 2 layers, width 32, 4 heads, vocab 50, context 16."""
    from tfcourse import GPTConfig

    return GPTConfig(vocab_size=50, max_seq_len=16, n_layers=2, n_heads=4, d_model=32)
