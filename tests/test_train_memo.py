"""The test suite's memo of training runs (tfcourse/train/memo.py): a recalled run is the run,
bit for bit; whatever a run depends on changes its key; what cannot be described is trained."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn

import tfcourse as tc
from tfcourse import data, training
from tfcourse.train import loop, memo

SETTINGS = dict(steps=4, batch_size=4, seq_len=8, max_lr=1e-2, warmup_steps=1, eval_batches=1)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(memo.MEMO_ENV, str(tmp_path))
    return tmp_path


def chain():
    return data.MarkovChain(vocab_size=16, n_successors=3, seed=0)


def gpt(dropout: float = 0.1) -> tc.GPT:
    torch.manual_seed(0)
    config = tc.GPTConfig(
        vocab_size=16, max_seq_len=8, n_layers=2, n_heads=2, d_model=16, dropout=dropout
    )
    return tc.GPT(config)


def key(model=None, dataset=None, **changes):
    model = gpt() if model is None else model
    return memo.key(model, chain() if dataset is None else dataset, {**SETTINGS, **changes}, None)


def trained(monkeypatch=None):
    """A fresh model trained (or recalled) from global seed 1: (model, history, RNG after)."""
    model = gpt()
    torch.manual_seed(1)  # dropout draws from the global generator
    history = training.train(model, chain(), **SETTINGS)
    return model, history, torch.get_rng_state()


def test_a_recalled_run_is_the_run_bit_for_bit(folder, monkeypatch):
    model, history, rng = trained()
    assert len(list(folder.iterdir())) == 1

    def no_training(*args, **kwargs):
        raise AssertionError("the second, identical run trained again")

    monkeypatch.setattr(loop.Trainer, "fit", no_training)
    again, recalled, rng_again = trained()
    assert recalled == history
    assert torch.equal(rng_again, rng)
    assert again.training == model.training
    for (name, kept), (_, fresh) in zip(
        again.named_parameters(), model.named_parameters(), strict=True
    ):
        assert torch.equal(kept, fresh), name
        assert torch.equal(kept.grad, fresh.grad), name


def test_without_the_variable_nothing_is_kept(tmp_path, monkeypatch):
    monkeypatch.delenv(memo.MEMO_ENV, raising=False)
    assert key() is None


def unbiased(model):
    model.blocks[0].attn.out_proj.bias.requires_grad_(False)
    return model


def unmasked(model):
    model.blocks[0].attn.causal = False
    return model


def nudged(model):
    with torch.no_grad():
        weight = model.blocks[1].mlp.fc_in.weight
        weight[0, 0] = torch.nextafter(weight[0, 0], torch.tensor(1.0))
    return model


@pytest.mark.usefixtures("folder")
def test_whatever_a_run_depends_on_changes_its_key(monkeypatch):
    base = key()
    assert base is not None and key() == base  # the same run, the same key
    changed = {
        "a setting": key(seed=1),
        "a weight, by one ulp": key(nudged(gpt())),
        "a weight frozen": key(unbiased(gpt())),
        "an attribute (the causal mask off)": key(unmasked(gpt())),
        "the mode": key(gpt().eval()),
        "the data set": key(dataset=data.MarkovChain(vocab_size=16, n_successors=3, seed=1)),
    }
    model = gpt()
    torch.manual_seed(123)  # gpt() seeded it with 0
    changed["the global RNG state"] = key(model)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 7)
    changed["the thread count"] = key()
    assert {name for name, path in changed.items() if path in (None, base)} == set()
    assert len(set(changed.values())) == len(changed)


class NotebooksOwnBlock(nn.Module):  # a class from outside the package: its code is unknown
    def forward(self, x):
        return x


@pytest.mark.usefixtures("folder")
def test_what_cannot_be_described_is_not_kept():
    hooked = gpt()
    hooked.blocks[0].register_forward_hook(lambda module, args, out: None)
    assert key(hooked) is None
    foreign = gpt()
    foreign.blocks[0].extra = NotebooksOwnBlock()
    assert key(foreign) is None
    with_generator = chain()
    with_generator.generator = torch.Generator()
    assert key(dataset=with_generator) is None


def test_a_run_with_a_callback_trains_and_is_not_kept(folder):
    steps = []
    training.train(gpt(), chain(), callback=lambda trainer: steps.append(trainer.step), **SETTINGS)
    assert steps == [1, 2, 3, 4]
    assert list(folder.iterdir()) == []


@pytest.mark.slow
def test_the_markov_chain_is_the_same_chain_in_every_process():
    """Its stationary distribution was solved by LAPACK, whose last bits moved from one process
    to the next; then the memo never met the other edition's runs."""
    program = (
        "import sys, hashlib, torch; from tfcourse import data\n"
        "junk = [torch.empty(int(sys.argv[1]) + i, dtype=torch.uint8) for i in range(9)]\n"
        "c = data.MarkovChain(vocab_size=32, n_successors=4, seed=0)\n"
        "print(hashlib.sha256(c.stationary.numpy().tobytes()).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", program, str(offset)], capture_output=True, text=True, check=True
        ).stdout
        for offset in (1, 100, 1001)
    }
    assert len(digests) == 1, digests


@pytest.mark.usefixtures("folder")
def test_a_function_is_described_by_what_it_closes_over():
    def act(x):
        return x * scale

    act.__module__ = "tfcourse.nn.made_up"  # one of the package's: named, and its closure read
    model = gpt()
    model.act = act
    assert key(model) is None  # `scale` is not assigned yet: no key, and no error
    scale = 2.0
    doubled = key(model)
    scale = 3.0
    tripled = key(model)
    assert doubled is not None and tripled is not None and doubled != tripled
