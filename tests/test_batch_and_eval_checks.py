"""check_get_batch and check_estimate_loss (notebook 08): correct code passes, each usual
mistake fails and is named.

Every wrong implementation here is written as a learner would write it, independently of
the checks' replays (``MISTAKES``) and of the probe's refusals (``REFUSALS``): each entry of
those lists has one here.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tfcourse.checks import (
    batching,
    check_estimate_loss,
    check_get_batch,
    evaluation,
    grading_cases,
)
from tfcourse.grade.sealed import protocol
from tfcourse.grade.sealed.proxy import _send_handle
from tfcourse.train.data import TextDataset
from tfcourse.train.inference_probe import GRADIENTS_ON, TRAINING_MODE, InferenceProbe

from conftest import fails, named_mistake, passes

# --------------------------------------------------------------------------- get_batch


def make_get_batch(*, shift=1, high_cut=0, one_start=False, draws=1):
    """A learner's get_batch; each keyword moves one line (the defaults are right)."""

    def get_batch(data, batch_size, seq_len, *, generator=None):
        high = len(data) if high_cut == "all" else len(data) - seq_len - high_cut
        starts = torch.randint(
            0, high, (1 if one_start else batch_size,), generator=generator, device=data.device
        ).repeat(batch_size if one_start else 1)
        x = torch.stack([data[s : s + seq_len] for s in starts.tolist()])
        if draws == 2:
            starts = torch.randint(0, high, (batch_size,), generator=generator, device=data.device)
        y = torch.stack([data[s + shift : s + shift + seq_len] for s in starts.tolist()])
        return x, y

    return get_batch


def test_a_correct_get_batch_passes(capsys):
    passes(check_get_batch, make_get_batch(), capsys, "get_batch")


def test_the_course_datasets_batch_is_a_correct_get_batch(capsys):
    """``TextDataset.batch`` draws the same windows: the course's data and the exercise agree."""

    def get_batch(data, batch_size, seq_len, *, generator=None):
        dataset = TextDataset.__new__(TextDataset)
        dataset.train = data
        return dataset.batch(batch_size, seq_len, generator=generator)

    passes(check_get_batch, get_batch, capsys, "get_batch")


GET_BATCH_WRONG = {
    "targets-not-shifted": ({"shift": 0}, "the targets are the inputs themselves"),
    "last-window-never-drawn": ({"high_cut": 1}, "the last window is never drawn"),
    "one-start-for-all": ({"one_start": True}, "every row is the same window"),
    "separate-draws": ({"draws": 2}, "two separate draws"),
    "start-past-the-end": ({"high_cut": -1}, "the starts can run past the end"),
    "start-anywhere": ({"high_cut": "all"}, "the starts can run past the end"),
}


def test_every_get_batch_mistake_has_a_wrong_function_here():
    assert sorted(GET_BATCH_WRONG) == sorted(batching.MISTAKES)


@pytest.mark.parametrize("key", sorted(GET_BATCH_WRONG))
@pytest.mark.parametrize("salt", [None, 1, 2**62 + 12345])
def test_each_get_batch_mistake_fails_and_is_named(key, salt):
    changes, words = GET_BATCH_WRONG[key]
    if salt is None:
        message = fails(check_get_batch, make_get_batch(**changes), "get_batch: ")
    else:
        with grading_cases(salt):
            message = fails(check_get_batch, make_get_batch(**changes), "get_batch: ")
    assert words in named_mistake(message), message


def test_get_batch_wrong_returns_are_named():
    fails(check_get_batch, lambda data, b, t, **kw: data, "expected (x, y)")


# --------------------------------------------------------------------------- estimate_loss


def make_estimate(
    *, eval_mode=True, no_grad=True, average="mean", shift=1, reduction="mean", restore=True
):
    """A learner's estimate_loss; each keyword moves one line (the defaults are right)."""

    def estimate_loss(model, batches):
        was_training = model.training
        if eval_mode:
            model.eval()
        total, last = 0.0, None
        with torch.no_grad() if no_grad else torch.enable_grad():
            for batch in batches:
                x, y = batch[:, :-1], batch[:, shift : shift + batch.shape[1] - 1]
                logits = model(x)
                loss = F.cross_entropy(logits.transpose(1, 2), y, reduction=reduction)
                total, last = total + loss.item(), loss.item()
        if restore:
            model.train(was_training)
        return {"mean": total / len(batches), "sum": total, "last": last}[average]

    return estimate_loss


def test_a_correct_estimate_loss_passes(capsys):
    passes(check_estimate_loss, make_estimate(), capsys, "estimate_loss")


def test_a_tensor_result_passes(capsys):
    def estimate_loss(model, batches):
        was_training = model.training
        model.eval()
        with torch.no_grad():
            losses = torch.stack(
                [
                    F.cross_entropy(model(b[:, :-1]).flatten(0, 1), b[:, 1:].flatten())
                    for b in batches
                ]
            )
        model.train(was_training)
        return losses.mean()

    passes(check_estimate_loss, estimate_loss, capsys, "estimate_loss")


ESTIMATE_WRONG = {
    "sum": ({"average": "sum"}, "summed, not averaged"),
    "last-batch": ({"average": "last"}, "only the last batch"),
    "targets-not-shifted": ({"shift": 0}, "the targets are the inputs"),
    "token-sum": ({"reduction": "sum"}, "summed over its tokens"),
}
ESTIMATE_REFUSED = {
    TRAINING_MODE: ({"eval_mode": False}, "model.eval() is never called"),
    GRADIENTS_ON: ({"no_grad": False}, "no torch.no_grad()"),
}


def test_every_estimate_mistake_has_a_wrong_function_here():
    assert sorted(ESTIMATE_WRONG) == sorted(evaluation.MISTAKES)
    assert sorted(ESTIMATE_REFUSED) == sorted(evaluation.REFUSALS)


@pytest.mark.parametrize("key", sorted(ESTIMATE_WRONG))
def test_each_estimate_mistake_fails_and_is_named(key):
    changes, words = ESTIMATE_WRONG[key]
    message = fails(check_estimate_loss, make_estimate(**changes), "estimate_loss: ")
    assert words in named_mistake(message), message


@pytest.mark.parametrize("key", sorted(ESTIMATE_REFUSED))
def test_each_estimate_refusal_fails_and_is_named(key):
    changes, words = ESTIMATE_REFUSED[key]
    message = fails(check_estimate_loss, make_estimate(**changes), "estimate_loss: ", key)
    assert words in named_mistake(message), message


def test_an_estimate_that_leaves_the_mode_changed_fails():
    fails(check_estimate_loss, make_estimate(restore=False), "model.train(was_training)")


def test_estimate_wrong_returns_are_named():
    fails(check_estimate_loss, lambda model, batches: [1.0], "expected one number")


def test_the_probe_speaks_of_evaluating_the_loss_in_the_sealed_worker_too():
    """The probe ``check_estimate_loss`` hands over says "evaluating the loss", not
    "sampling"; the worker's copy, rebuilt from its constructor's arguments, says the same."""
    probe = InferenceProbe(evaluation.CONFIG, purpose="evaluating").train()
    encoder, sent = protocol.Encoder(), []
    encoder.handle = lambda value: _send_handle(value, encoder, sent)
    tree = encoder(probe)
    twin = protocol.decode(tree, encoder.tensors, dataclasses_from_tfcourse=True, by_value=[])
    idx = torch.zeros(1, 3, dtype=torch.long)
    for model in (probe, twin):
        with pytest.raises(RuntimeError, match="before evaluating the loss"):
            model(idx)
    with torch.no_grad(), pytest.raises(RuntimeError, match="before sampling"):
        InferenceProbe(evaluation.CONFIG).train()(idx)
    with pytest.raises(ValueError, match="purpose must be one of"):
        InferenceProbe(evaluation.CONFIG, purpose="training")
