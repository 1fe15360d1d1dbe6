"""check_generate (notebook 08): passes correct samplers, names each usual mistake.

Every wrong sampler here is written as a learner would write it, independently of the
check's own replays (``MISTAKES``) and of the probe's refusals (``REFUSALS``): each entry of
those lists has one here.
"""

from __future__ import annotations

import pytest
import torch

from tfcourse.checks import check_generate, grading_cases
from tfcourse.checks.generate import MISTAKES, REFUSALS
from tfcourse.grade.sealed import protocol
from tfcourse.train.inference_probe import GRADIENTS_ON, TOO_LONG, TRAINING_MODE

from conftest import fails, named_mistake, passes


def make_sampler(
    *,
    eval_mode=True,
    no_grad=True,
    crop="last",
    position=-1,
    temperature_at="logits",
    top_k_extra=0,
    use_top_k=True,
    draw="multinomial",
    restore=True,
    use_top_p=True,
    top_p_first=False,
    descending=True,
    keep="before below p",
):
    """A learner's sampler; each keyword moves one line (the defaults are right).
    ``temperature_at="draw"``: the logits divided just before the softmax, after top-k and
    top-p (right for top-k alone, whose order it keeps); ``keep``: which sorted tokens top-p
    keeps: those with less than p before them (right), those with a cumulative mass <= p and
    at least the first (``"cumulative <= p"``), or the same without the first
    (``"cumulative <= p, maybe none"``)."""

    def nucleus(logits, top_p):
        probs = torch.softmax(logits, dim=-1)
        sorted_probs, order = torch.sort(probs, dim=-1, descending=descending)
        cumulative = torch.cumsum(sorted_probs, dim=-1)
        if keep == "before below p":
            remove = cumulative - sorted_probs >= top_p
        else:
            remove = cumulative > top_p
            if keep == "cumulative <= p":
                remove[:, 0] = False
        remove = torch.zeros_like(remove).scatter(1, order, remove)
        return logits.masked_fill(remove, float("-inf"))

    def top_k_cut(logits, top_k):
        values, _ = torch.sort(logits, dim=-1, descending=True)
        kth = values[:, top_k - 1 + top_k_extra].unsqueeze(-1)
        return torch.where(logits < kth, float("-inf"), logits)

    def generate(
        model, idx, max_new_tokens, *, temperature=1.0, top_k=None, top_p=None, generator=None
    ):
        was_training = model.training
        if eval_mode:
            model.eval()
        context_manager = torch.no_grad() if no_grad else torch.enable_grad()
        L = model.config.max_seq_len
        with context_manager:
            for _ in range(max_new_tokens):
                context = {"last": idx[:, -L:], "first": idx[:, :L], "none": idx}[crop]
                logits = model(context)[:, position, :]
                if temperature_at == "logits":
                    logits = logits / temperature
                if top_p is not None and use_top_p and top_p_first:
                    logits = nucleus(logits, top_p)
                if top_k is not None and use_top_k:
                    logits = top_k_cut(logits, top_k)
                if top_p is not None and use_top_p and not top_p_first:
                    logits = nucleus(logits, top_p)
                if temperature_at == "draw":
                    logits = logits / temperature
                probs = torch.softmax(logits, dim=-1)
                if temperature_at == "probs":
                    probs = probs / temperature
                if draw == "argmax":
                    next_id = probs.argmax(dim=-1, keepdim=True)
                else:
                    next_id = torch.multinomial(probs, num_samples=1, generator=generator)
                idx = torch.cat((idx, next_id), dim=-1)
        if restore:
            model.train(was_training)
        return idx

    return generate


def test_a_correct_sampler_passes(capsys):
    passes(check_generate, make_sampler(), capsys, "generate")


def test_the_solution_style_sampler_passes(capsys):
    def generate(
        model, idx, max_new_tokens, *, temperature=1.0, top_k=None, top_p=None, generator=None
    ):
        was_training = model.training
        model.eval()
        with torch.no_grad():
            for _ in range(max_new_tokens):
                logits = model(idx[:, -model.config.max_seq_len :])[:, -1, :] / temperature
                if top_k is not None:
                    kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                if top_p is not None:
                    probs = logits.softmax(dim=-1)
                    ordered = probs.sort(dim=-1, descending=True).values
                    kept = ((ordered.cumsum(dim=-1) - ordered) < top_p).sum(dim=-1, keepdim=True)
                    smallest = ordered.gather(-1, kept - 1)
                    logits = logits.masked_fill(probs < smallest, float("-inf"))
                next_id = torch.multinomial(logits.softmax(dim=-1), 1, generator=generator)
                idx = torch.cat([idx, next_id], dim=1)
        model.train(was_training)
        return idx

    passes(check_generate, generate, capsys, "generate")


def test_an_ascending_cut_at_one_minus_p_passes(capsys):
    """Hugging Face's way: sort ascending, drop while the cumulative mass is <= 1 - p."""

    def nucleus(logits, top_p):
        sorted_logits, order = torch.sort(logits, descending=False)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        remove = cumulative <= 1 - top_p
        remove[..., -1:] = False
        return logits.masked_fill(remove.scatter(1, order, remove), float("-inf"))

    def generate(model, idx, max_new_tokens, *, top_p=None, **settings):
        was_training = model.training
        model.eval()
        with torch.no_grad():
            for _ in range(max_new_tokens):
                logits = model(idx[:, -model.config.max_seq_len :])[:, -1, :]
                logits = logits / settings.get("temperature", 1.0)
                if settings.get("top_k") is not None:
                    kth = torch.topk(logits, settings["top_k"]).values[:, -1:]
                    logits[logits < kth] = float("-inf")
                if top_p is not None:
                    logits = nucleus(logits, top_p)
                probs = torch.softmax(logits, dim=-1)
                next_id = torch.multinomial(probs, 1, generator=settings.get("generator"))
                idx = torch.cat((idx, next_id), dim=1)
        model.train(was_training)
        return idx

    passes(check_generate, generate, capsys, "generate")


# Each known mistake, and the words its diagnosis must contain.
WRONG = {
    "temperature-after-softmax": ({"temperature_at": "probs"}, "after the softmax"),
    "top-k-plus-one": ({"top_k_extra": 1}, "keeps k + 1 tokens"),
    "no-top-k": ({"use_top_k": False}, "top_k is ignored"),
    "top-p-drops-crossing": ({"keep": "cumulative <= p"}, "drops the token that crosses p"),
    "top-p-ascending": ({"descending": False}, "ascending order"),
    "top-p-before-temperature": ({"temperature_at": "draw"}, "without the temperature"),
    "top-p-before-top-k": ({"top_p_first": True}, "before top-k's cut"),
    "no-top-p": ({"use_top_p": False}, "top_p is ignored"),
    "argmax": ({"draw": "argmax"}, "instead of sampling"),
    "first-position": ({"position": 0}, "first position"),
    "crop-first": ({"crop": "first"}, "keeps the first max_seq_len"),
}
REFUSED = {
    TRAINING_MODE: ({"eval_mode": False}, "model.eval() is never called"),
    GRADIENTS_ON: ({"no_grad": False}, "no torch.no_grad()"),
    TOO_LONG: ({"crop": "none"}, "the context is not cropped"),
}


def test_every_known_mistake_has_a_wrong_sampler_here():
    assert sorted(WRONG) == sorted(MISTAKES) and sorted(REFUSED) == sorted(REFUSALS)


@pytest.mark.parametrize("key", sorted(WRONG))
def test_each_mistake_fails_and_is_named(key):
    changes, words = WRONG[key]
    message = fails(check_generate, make_sampler(**changes), "generate: ")
    assert words in named_mistake(message), message


@pytest.mark.parametrize("key", sorted(REFUSED))
def test_each_refusal_fails_and_is_named(key):
    changes, words = REFUSED[key]
    message = fails(check_generate, make_sampler(**changes), "generate: ", key)
    assert words in named_mistake(message), message


@pytest.mark.parametrize("salt", [1, 2**62 + 12345, *range(100, 110)])
def test_the_mistakes_stay_named_under_grading_salts(salt):
    """Other prompts and other random numbers: each replayed mistake still shows."""
    with grading_cases(salt):
        for changes, words in WRONG.values():
            message = fails(check_generate, make_sampler(**changes), "generate: ")
            assert words in named_mistake(message), (salt, message)


def test_a_top_p_that_can_keep_no_token_is_named():
    """Dropping the token that crosses p, with no first token kept: where the most likely
    token alone crosses p (grading salt 104) the row is all -inf and torch.multinomial
    refuses its nan; elsewhere it draws as the replayed mistake."""
    sampler = make_sampler(keep="cumulative <= p, maybe none")
    message = fails(check_generate, sampler, "generate: ")
    assert "drops the token that crosses p" in named_mistake(message), message
    with grading_cases(104):
        message = fails(check_generate, sampler, "generate: ", "probability tensor")
    assert "top-p dropped every token of a row" in named_mistake(message), message


def test_older_samplers_without_top_p_fail_only_at_the_top_p_case():
    def generate(model, idx, max_new_tokens, *, temperature=1.0, top_k=None, generator=None):
        return make_sampler()(
            model, idx, max_new_tokens, temperature=temperature, top_k=top_k, generator=generator
        )

    message = fails(check_generate, generate, "(check 4 of 5)", "top_p 0.7")
    assert "unexpected keyword argument 'top_p'" in message, message


def test_a_mode_not_restored_fails():
    message = fails(check_generate, make_sampler(restore=False), "left in eval mode")
    assert "model.train(was_training)" in message


def test_a_mode_forced_to_training_fails():
    def always_train(model, idx, n, **kw):
        out = make_sampler()(model, idx, n, **kw)
        model.train()
        return out

    fails(check_generate, always_train, "arrived in eval mode and was left in training mode")


def test_wrong_returns_are_named():
    fails(check_generate, lambda model, idx, n, **kw: None, "expected token ids of shape")
    fails(
        check_generate,
        lambda model, idx, n, **kw: torch.zeros(idx.shape[0], idx.shape[1] + n, dtype=torch.long),
        "are not the prompt",
    )


def test_the_generator_crosses_to_the_worker_as_a_twin():
    """The sealed worker draws from a generator in the same state as the check's."""
    generator = torch.Generator().manual_seed(3)
    generator.manual_seed(3)
    encoder = protocol.Encoder()
    tree = encoder(generator)
    twin = protocol.decode(tree, encoder.tensors, dataclasses_from_tfcourse=True)
    assert torch.equal(torch.rand(5, generator=twin), torch.rand(5, generator=generator))
    with pytest.raises(protocol.ProtocolError, match="unknown value"):
        protocol.decode(tree, encoder.tensors)  # the grader's side rebuilds none
    encoder.tensors[tree["$generator"]["$tensor"]] = torch.zeros(3)
    with pytest.raises(protocol.ProtocolError, match="malformed generator"):
        protocol.decode(tree, encoder.tensors, dataclasses_from_tfcourse=True)
