"""Notebook 12's run: the learner's GPT, trained by the learner's loop on the learner's batches."""

from __future__ import annotations

import math

import pytest

from tfcourse.train import budget, capstone
from tfcourse.train.your_run import SCHEDULE, stacked_batches, steps_that_fit, train_yours
from tfcourse.yours import yours

from helpers import ROOT


@pytest.fixture(scope="module")
def parts():
    return yours(ROOT / "solutions", solutions_dir=ROOT / "solutions")


@pytest.fixture(scope="module")
def data():
    return capstone.capstone_data()


def small(data):
    return budget.model_config(data, budget.Setting(n_layers=1, d_model=48, n_heads=2, dropout=0.3))


def test_batches_are_windows_of_the_stream_with_their_next_token(parts, data):
    batches = stacked_batches(parts.get_batch, data.train, 3, seed=0)
    assert batches.shape == (3, SCHEDULE["batch_size"], SCHEDULE["seq_len"] + 1)
    row = batches[1, 0].tolist()
    text = data.train.tolist()
    assert any(text[i : i + len(row)] == row for i in range(len(text) - len(row) + 1))


def test_watching_the_loop_does_not_change_what_it_trains(parts, data):
    """Held-out losses and samples taken from the optimizer's step hook leave every step's
    loss as it is without them; the run starts at about ln V (the reference initialization)."""
    seen = []
    watched = train_yours(
        parts,
        data,
        small(data),
        6,
        eval_every=2,
        eval_batches=2,
        samples_at=(3, 6),
        watch=lambda step, model: seen.append((step, model.training)),
    )
    alone = train_yours(parts, data, small(data), 6, eval_batches=2)
    assert watched.loss == alone.loss and len(watched.loss) == 6
    assert [step for step, _, _ in watched.val] == [2, 4, 6]
    assert [step for step, _ in seen] == [2, 4, 6]
    assert [step for step, _, _ in alone.val] == [6]
    assert watched.val[-1][2] == alone.val[-1][2]
    assert sorted(watched.samples) == [3, 6] and all(watched.samples.values())
    assert abs(watched.loss[0] - math.log(data.vocab_size)) < 0.2
    assert watched.model.training  # the learner's loop leaves it training; evaluation restores


def test_the_clock_counts_training_time_only_and_sizes_a_budget(parts, data):
    run = train_yours(parts, data, small(data), 4, eval_every=1, eval_batches=2)
    assert len(run.clock) == 4 and run.clock == sorted(run.clock)
    assert run.clock[-1] <= run.seconds
    assert run.val[-1][1] == pytest.approx(run.clock[-1] / 60)
    per_step = (run.clock[-1] - run.clock[0]) / 3
    fit = steps_that_fit(parts, data, small(data), 100 * per_step, probe_steps=3)
    assert 20 <= fit <= 500  # about 100 steps: a probe is noisy, not ten times off
