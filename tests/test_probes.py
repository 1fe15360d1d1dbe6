"""The round-off level of a gradient probe and how the gradient plot marks it (notebook 06)."""

from __future__ import annotations

import pytest
import torch

import tfcourse as tc
from tfcourse.lab import plots, probes, widgets

CONFIG = tc.GPTConfig(vocab_size=16, max_seq_len=8, n_layers=2, n_heads=2, d_model=16)


def _tokens():
    generator = torch.Generator().manual_seed(0)
    return [torch.randint(0, CONFIG.vocab_size, (2, 8), generator=generator) for _ in range(2)]


def test_roundoff_level_covers_a_zero_gradient_and_is_small_for_a_real_one():
    idx, targets = _tokens()
    pre, _ = probes.twin_models(CONFIG, seed=0)
    summed = probes.gradient_probe(pre, idx, targets, "sum")
    level = probes.roundoff_level(pre, idx, targets, "sum")
    # The sum through the final norm is constant: every float32 norm is round-off, under the level.
    assert max([summed["embedding"], *summed["blocks"]]) <= level * (1 + 1e-6)
    lm = probes.gradient_probe(pre, idx, targets, "lm")
    assert probes.roundoff_level(pre, idx, targets, "lm") < 1e-4 * min(lm["blocks"])


def test_roundoff_level_validates_its_model():
    idx, targets = _tokens()
    with pytest.raises(TypeError, match="tfcourse GPT"):
        probes.roundoff_level(torch.nn.Linear(2, 2), idx, targets)
    with pytest.raises(ValueError, match="must be float32"):
        probes.roundoff_level(tc.GPT(CONFIG).double(), idx, targets)


def test_the_sum_view_carries_a_roundoff_level_and_the_lm_view_does_not():
    assert "round_off" in widgets.gradient_flow(depth=2, loss="sum")["pre-LN"]
    assert "round_off" not in widgets.gradient_flow(depth=2, loss="lm")["pre-LN"]


def test_gradient_plot_draws_embedding_apart_and_the_roundoff_line():
    fig = plots.gradient_norms({"pre-LN": [1.0, 0.5]}, embedding={"pre-LN": 0.7}, round_off=1e-6)
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert "pre-LN: block parameters" in labels and "pre-LN: embedding output" in labels
    assert any(label.startswith("float32 round-off") for label in labels)
    block_line = fig.axes[0].get_lines()[0]
    assert list(block_line.get_xdata()) == [1, 2]  # block 0 is not on the line
    with pytest.raises(ValueError, match="round_off must be"):
        plots.gradient_norms({"pre-LN": [1.0]}, round_off=-1.0)
