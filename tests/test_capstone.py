"""The capstone's shared functions (notebook 12, benchmarks/capstone_budget.py) on a tiny run."""

import math

import pytest

from tfcourse.train import capstone
from tfcourse.train.data import TextDataset, stdlib_docstrings


@pytest.fixture(scope="module")
def small_data():
    return TextDataset(stdlib_docstrings(30_000), val_block=2000)


def test_a_short_capstone_run_trains_samples_and_measures(small_data):
    config = capstone.capstone_config(small_data, n_layers=1, d_model=48, n_heads=4)
    run = capstone.train_capstone(small_data, config, 3, samples_at=(1, 3), eval_every=3,
                                  eval_batches=1)
    assert run.history.step == [0, 1, 2] and run.history.val_step == [3]
    assert sorted(run.samples) == [1, 3] and all(len(s) == 200 for s in run.samples.values())
    assert run.tokens_per_second > 0
    assert math.isfinite(capstone.final_loss(run.model, small_data, n_batches=1))
    text = capstone.write(run.model, small_data, 50, prompt="The ")
    assert len(text) == 50 and set(text) <= set(small_data.tokenizer.chars)


def test_the_capstone_config_follows_the_data_and_the_schedule(small_data):
    config = capstone.capstone_config(small_data)
    assert config.vocab_size == small_data.vocab_size
    assert config.max_seq_len == capstone.SCHEDULE["seq_len"]
    assert (config.attn_impl, config.fused_norms) == ("sdpa", True)
