"""check_train_loop (notebook 08): passes correct loops, names each usual mistake.

Every wrong loop here is written as a learner would write it, independently of the
check's own list of mistakes (``MISTAKES``): each entry of that list has one here.
"""

from __future__ import annotations

import fnmatch
import threading

import pytest
import torch
import torch.nn.functional as F

from tfcourse import training
from tfcourse.authoring.build import make_learner, solve
from tfcourse.checks import check_train_loop
from tfcourse.checks import train_loop as train_loop_check
from tfcourse.checks.train_loop import MISTAKES
from tfcourse.course import notebook_format
from tfcourse.grade import references

from conftest import fails, named_mistake, passes
from helpers import ROOT


def make_loop(
    *,
    zero_grad="step",
    clip="before",
    lr="every step",
    average=True,
    report_mean=True,
    train_mode=True,
    optimizer_from=None,
):
    """A learner's loop; each keyword moves one line (the defaults are right).
    ``optimizer_from(model, max_lr)``: the loop builds its own optimizer so."""

    def train_loop(model, optimizer, batches, *, max_lr, warmup_steps, max_norm=1.0):
        steps, n_micro = batches.shape[:2]
        if optimizer_from is not None:
            optimizer = optimizer_from(model, max_lr)
        if train_mode:
            model.train()

        def rate(step):
            return training.lr_at(
                step,
                max_lr=max_lr,
                warmup_steps=warmup_steps,
                total_steps=steps,
                min_lr=max_lr / 10,
            )

        if lr == "once":
            for group in optimizer.param_groups:
                group["lr"] = rate(0)
        losses = []
        for step in range(steps):
            if lr == "every step":
                for group in optimizer.param_groups:
                    group["lr"] = rate(step)
            if lr == "first group":
                optimizer.param_groups[0]["lr"] = rate(step)
            if zero_grad == "step":
                optimizer.zero_grad()
            losses_here = []
            for micro in batches[step]:
                if zero_grad == "micro":
                    optimizer.zero_grad()
                logits = model(micro[:, :-1])
                loss = F.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), micro[:, 1:].reshape(-1)
                )
                (loss / n_micro if average else loss).backward()
                losses_here.append(loss.item())
            if zero_grad == "after backward":
                optimizer.zero_grad()
            if clip == "before":
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            if clip == "by value":
                torch.nn.utils.clip_grad_value_(model.parameters(), max_norm)
            optimizer.step()
            if clip == "after":
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            if zero_grad == "after step":
                optimizer.zero_grad()
            losses.append(sum(losses_here) / (n_micro if report_mean else 1))
        return torch.tensor(losses)  # a tensor of losses is fine too

    return train_loop


def test_a_correct_loop_passes(capsys):
    passes(check_train_loop, make_loop(), capsys, "train_loop")


def plain_step_loop(model, optimizer, batches, *, max_lr, warmup_steps, max_norm=1.0):
    """Another correct loop, written differently: model.zero_grad() with zeros kept, the
    targets' loss through log_softmax, the losses summed after the fact."""
    model.train()
    steps = len(batches)
    per_step = []
    for step, micro_batches in enumerate(batches):
        for group in optimizer.param_groups:
            group["lr"] = training.lr_at(
                step,
                max_lr=max_lr,
                warmup_steps=warmup_steps,
                total_steps=steps,
                min_lr=0.1 * max_lr,
            )
        model.zero_grad(set_to_none=False)
        losses = []
        for micro in micro_batches:
            logp = model(micro[:, :-1]).log_softmax(-1)
            loss = -logp.gather(-1, micro[:, 1:, None]).mean()
            (loss / len(micro_batches)).backward()
            losses.append(loss.detach())
        torch.nn.utils.clip_grad_norm_(list(model.parameters()), max_norm=max_norm)
        optimizer.step()
        per_step.append(torch.stack(losses).mean())
    return per_step


def test_a_loop_written_differently_passes(capsys):
    passes(check_train_loop, plain_step_loop, capsys, "train_loop")


def test_a_neighbours_draws_never_change_the_weights(monkeypatch, capsys):
    """In a class run, other learners' checks draw from the process-wide generator at any
    moment. Here each model the check builds is preceded by a different number of such
    draws: the weights are drawn once per case and copied, so a correct loop still passes
    (a check that drew them again for the learner's copy would fail)."""
    real, built = train_loop_check.GPT, []

    def gpt_after_a_neighbour(config):
        built.append(1)
        torch.randn(len(built))  # another thread's draw, between the seed and the weights
        return real(config)

    monkeypatch.setattr(train_loop_check, "GPT", gpt_after_a_neighbour)
    passes(check_train_loop, make_loop(), capsys, "train_loop")
    assert len(built) == 3  # one model per case


def test_a_thread_building_layers_meanwhile_costs_no_point(capsys):
    """The same with a real neighbour: a thread that builds nn.Linear layers all along."""
    done = threading.Event()

    def neighbour():
        while not done.is_set():
            torch.nn.Linear(16, 16)

    thread = threading.Thread(target=neighbour)
    thread.start()
    try:
        passes(check_train_loop, make_loop(), capsys, "train_loop")
    finally:
        done.set()
        thread.join()


def test_the_cases_hand_the_loop_every_usual_optimizer():
    """The check's cases pass AdamW in decay groups, a plain AdamW and SGD with momentum, so
    a correct loop is judged with each (and passes: the tests above)."""
    seen = []

    def spy(model, optimizer, batches, **setting):
        seen.append((type(optimizer).__name__, len(optimizer.param_groups)))
        return make_loop()(model, optimizer, batches, **setting)

    check_train_loop(spy)
    assert seen == [("AdamW", 2), ("AdamW", 1), ("SGD", 1)]


# Each known mistake, and the words its diagnosis must contain.
WRONG = {
    "no-zero-grad": ({"zero_grad": "never"}, "no optimizer.zero_grad()"),
    "zero-grad-per-micro-batch": ({"zero_grad": "micro"}, "inside the loop over micro-batches"),
    "zero-grad-after-backward": (
        {"zero_grad": "after backward"},
        "between backward() and optimizer.step()",
    ),
    "zero-grad-after-step": ({"zero_grad": "after step"}, "after optimizer.step() instead of"),
    "clip-after-step": ({"clip": "after"}, "clipped after optimizer.step()"),
    "clip-by-value": ({"clip": "by value"}, "clipped by value (clip_grad_value_"),
    "per-epoch": ({"lr": "once"}, "the learning rate is set once"),
    "no-schedule": ({"lr": "never"}, "the learning rate is never set"),
    "sum": ({"average": False, "report_mean": False}, "summed, not averaged"),
    "sum-backward": ({"average": False}, "whole loss is backpropagated"),
    "first-group-only": ({"lr": "first group"}, "param_groups[0] only"),
    "own-optimizer": (
        {"optimizer_from": lambda model, lr: torch.optim.AdamW(model.parameters(), lr=lr)},
        "builds its own AdamW",
    ),
}


def test_every_known_mistake_has_a_wrong_loop_here():
    assert sorted(WRONG) == sorted(MISTAKES)


@pytest.mark.parametrize("mistake", sorted(WRONG))
def test_each_mistake_fails_and_is_named(mistake):
    changes, words = WRONG[mistake]
    message = fails(check_train_loop, make_loop(**changes), "train_loop: ")
    assert words in named_mistake(message), message


@pytest.mark.parametrize(
    "changes",
    [
        {"clip": "never"},  # the same effect as clipping after the step
        {"report_mean": False},  # the mean backpropagated, the sum reported
    ],
    ids=str,
)
def test_related_mistakes_fail_too(changes):
    fails(check_train_loop, make_loop(**changes), "train_loop: ")


def test_a_model_left_in_eval_mode_fails_with_the_fix():
    fails(check_train_loop, make_loop(train_mode=False), "still in eval mode", "model.train()")


def test_wrong_returns_are_named():
    fails(check_train_loop, lambda model, opt, batches, **kw: None, "expected a list of")
    fails(
        check_train_loop,
        lambda model, opt, batches, **kw: ["a"] * batches.shape[0],
        "must be numbers",
    )
    with pytest.raises(TypeError, match="expects a function"):
        check_train_loop(3)


# --------------------------------------------------------------------------- the grader's view


def _solved_08():
    solution = notebook_format.read_notebook(ROOT / "solutions" / "08_training.ipynb")
    return solution, solve(make_learner(solution, "08_training"), solution)


def test_the_course_loop_is_a_shortcut_while_train_loop_is_graded():
    """``training.train`` does the exercise's whole job: the grading worker watches for it
    (``training.configure_optimizer`` is a helper the solution uses, not watched)."""
    solution, _ = _solved_08()
    assert "train_loop" in references.reference_names(solution, "train_loop")
    watched = references.shortcuts(solution, "train_loop")

    def seen(ran):
        return any(fnmatch.fnmatchcase(ran, pattern) for pattern in watched)

    assert seen("tfcourse.train.loop.train") and seen("tfcourse.train.loop.Trainer.step")
    assert not seen("tfcourse.train.loop.configure_optimizer")
