"""Notebook 12's run: the learner's GPT, trained by the learner's loop on the learner's batches."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tfcourse.nn.model import init_weights
from tfcourse.runtime import seed_everything
from tfcourse.train import budget, capstone
from tfcourse.train.your_run import SCHEDULE, stacked_batches, train_yours
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


def test_the_clock_counts_training_time_only(parts, data):
    run = train_yours(parts, data, small(data), 4, eval_every=1, eval_batches=2)
    assert len(run.clock) == 4 and run.clock == sorted(run.clock)
    assert run.clock[-1] <= run.seconds
    assert run.val[-1][1] == pytest.approx(run.clock[-1] / 60)


def test_the_learners_initialization_is_kept_and_samples_open_differently(parts, data):
    """Step 0's loss is that of the model as its own constructor built it (under the run's
    seed): nothing initializes it again. Each checkpoint's sample has its own seed."""
    config = budget.model_config(data, budget.Setting(n_layers=1, d_model=48, n_heads=2))
    assert config.dropout == 0  # so that step 0's loss depends on the weights alone
    run = train_yours(parts, data, config, 2, eval_batches=1, samples_at=(1, 2))
    seed_everything(0)
    built = parts.gpt(config)
    batch = stacked_batches(parts.get_batch, data.train, 1, seed=0)[0]
    with torch.no_grad():
        logits = built(batch[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
    assert float(loss) == pytest.approx(run.loss[0], abs=1e-5)
    init_weights(built, config.n_layers)  # what an initialization done twice would train
    with torch.no_grad():
        again = F.cross_entropy(built(batch[:, :-1]).flatten(0, 1), batch[:, 1:].flatten())
    assert float(again) != pytest.approx(run.loss[0], abs=1e-5)
    assert run.samples[1][:20] != run.samples[2][:20]


def test_the_run_computes_with_the_same_threads_on_any_machine(parts, data, monkeypatch):
    """The round-off of a product depends on the number of threads that share it; the run
    pins it (``THREADS``), whatever the process had, and gives the process its own back."""
    from types import SimpleNamespace

    from tfcourse.train import your_run

    seen = []

    def loop(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return parts.train_loop(*args, **kwargs)

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        names = ("gpt", "get_batch", "configure_optimizer", "estimate_loss", "generate")
        watched = SimpleNamespace(train_loop=loop, **{n: getattr(parts, n) for n in names})
        run = train_yours(watched, data, small(data), 2, eval_batches=1)
        assert seen == [your_run.THREADS] and torch.get_num_threads() == 2
        torch.set_num_threads(1)
        again = train_yours(parts, data, small(data), 2, eval_batches=1)
        assert again.loss == run.loss
    finally:
        torch.set_num_threads(before)


def test_the_run_builds_its_optimizer_with_the_learners_configure_optimizer(parts, data):
    """``parts.configure_optimizer`` (the learner's, read from notebook 08) builds the run's
    AdamW, with the schedule's rate and weight decay."""
    assert parts.loaded["configure_optimizer"].yours
    calls = []

    class Watched:
        def __getattr__(self, name):
            return getattr(parts, name)

        def configure_optimizer(self, model, **settings):
            calls.append(settings)
            return parts.configure_optimizer(model, **settings)

    train_yours(Watched(), data, small(data), 1, eval_batches=1)
    assert calls == [{"lr": SCHEDULE["lr"], "weight_decay": SCHEDULE.get("weight_decay", 0.1)}]
