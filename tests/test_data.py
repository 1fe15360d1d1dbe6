"""Datasets that need no download: Markov chain, copy task, standard-library text."""

import math

import pytest
import torch

from tfcourse.train import data
from tfcourse.train.data import IGNORE_INDEX, CharTokenizer, CopyTask, MarkovChain, TextDataset


@pytest.fixture(scope="module")
def chain():
    return MarkovChain(16, 3, seed=0)


def test_markov_transition_is_a_sparse_stochastic_matrix(chain):
    P = chain.transition
    assert P.shape == (16, 16)
    torch.testing.assert_close(P.sum(dim=1), torch.ones(16, dtype=torch.float64))
    assert ((P > 0).sum(dim=1) == 3).all()


def test_markov_stationary_distribution_is_stationary(chain):
    pi = chain.stationary
    assert pi.min() > 0  # the built-in cycle makes the chain irreducible
    torch.testing.assert_close(pi @ chain.transition, pi, rtol=0, atol=1e-12)
    assert math.isclose(float(pi.sum()), 1.0, abs_tol=1e-12)


def test_markov_entropy_rate_is_the_mean_nll_of_its_own_samples(chain):
    assert 0 < chain.entropy_rate < math.log(3)
    samples = chain.sample(2048, 64, generator=torch.Generator().manual_seed(1))
    # 2048 * 63 transitions: the standard error of the mean is well below 0.02 nats.
    assert abs(chain.transition_nll(samples) - chain.entropy_rate) < 0.02
    assert chain.impossible_fraction(samples) == 0.0
    assert chain.loss_floor == chain.entropy_rate


def test_markov_same_seed_same_chain_and_samples():
    a, b = MarkovChain(8, 2, seed=3), MarkovChain(8, 2, seed=3)
    assert torch.equal(a.transition, b.transition)
    assert not torch.equal(a.transition, MarkovChain(8, 2, seed=4).transition)
    xa = a.sample(4, 10, generator=torch.Generator().manual_seed(0))
    xb = b.sample(4, 10, generator=torch.Generator().manual_seed(0))
    assert torch.equal(xa, xb)


def test_markov_batch_targets_are_inputs_shifted(chain):
    x, y = chain.batch(4, 12, generator=torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 12) and x.dtype == torch.long
    assert torch.equal(x[:, 1:], y[:, :-1])


def test_markov_impossible_fraction_sees_wrong_transitions(chain):
    P = chain.transition
    i = 0
    impossible = int((P[i] == 0).nonzero()[0])
    assert chain.impossible_fraction(torch.tensor([[i, impossible]])) == 1.0
    assert chain.transition_nll(torch.tensor([[i, impossible]])) == math.inf


@pytest.mark.parametrize(
    "kwargs, error",
    [
        (dict(vocab_size=1), ValueError),
        (dict(vocab_size=4, n_successors=5), ValueError),
        (dict(vocab_size=4.0), TypeError),
        (dict(n_successors=0), ValueError),
    ],
)
def test_markov_validates(kwargs, error):
    with pytest.raises(error):
        MarkovChain(**kwargs)


def test_batch_arguments_are_validated(chain):
    with pytest.raises(ValueError, match="split"):
        chain.batch(2, 4, split="test")
    with pytest.raises(TypeError, match="generator"):
        chain.batch(2, 4, generator=0)
    with pytest.raises(ValueError, match="seq_len"):
        chain.batch(2, 0)


@pytest.mark.parametrize("seq_len", [3, 8, 9, 16])
def test_copy_task_layout(seq_len):
    task = CopyTask(5)
    assert task.vocab_size == 6 and task.loss_floor == 0.0
    x, y = task.batch(3, seq_len, generator=torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (3, seq_len)
    n = (seq_len + 1) // 2
    assert (x[:, n] == task.separator).all()
    assert (x[:, :n] < 5).all()
    assert torch.equal(x[:, n + 1 :], x[:, : seq_len - n - 1])  # the copy
    assert (y[:, :n] == IGNORE_INDEX).all()  # random half: not scored
    assert torch.equal(y[:, n:], x[:, : seq_len - n])  # scored targets: the symbols


def test_stdlib_docstrings_deterministic_ascii_and_capped():
    text = data.stdlib_docstrings(20_000)
    assert text == data.stdlib_docstrings(20_000)
    assert 0 < len(text) <= 20_000
    assert text.isascii()
    assert "Return" in text  # it is English prose


def test_char_tokenizer_round_trip_and_errors():
    tok = CharTokenizer.from_text("hello world")
    assert tok.vocab_size == len(set("hello world"))
    assert tok.chars == sorted(tok.chars)
    ids = tok.encode("hello")
    assert tok.decode(ids) == "hello"
    assert tok.decode(torch.tensor(ids)) == "hello"
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tok.encode("hex!")
    with pytest.raises(ValueError, match=r"\[0, 8\)"):
        tok.decode([99])
    with pytest.raises(TypeError):
        tok.encode(42)


def test_train_val_split_is_contiguous():
    tokens = torch.arange(100)
    train, val = data.train_val_split(tokens, 0.1)
    assert torch.equal(train, torch.arange(90)) and torch.equal(val, torch.arange(90, 100))
    with pytest.raises(ValueError):
        data.train_val_split(tokens.view(10, 10))


def test_text_dataset_batches_come_from_their_split():
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))  # abc...zabc...
    ds = TextDataset(text, val_fraction=0.2)
    assert ds.vocab_size == 26 and ds.loss_floor is None
    assert len(ds.train) == 800 and len(ds.val) == 200
    x, y = ds.batch(4, 10, generator=torch.Generator().manual_seed(0), split="val")
    assert x.shape == (4, 10)
    assert torch.equal(x[:, 1:], y[:, :-1])
    assert ((y - x) % 26 == 1).all()  # next letter
    with pytest.raises(ValueError, match="fewer than seq_len"):
        ds.batch(1, 300, split="val")


def test_make_dataset():
    assert isinstance(data.make_dataset("copy", n_symbols=4), CopyTask)
    assert isinstance(data.make_dataset("markov", vocab_size=8), MarkovChain)
    with pytest.raises(ValueError, match="dataset must be one of"):
        data.make_dataset("imagenet")
    assert math.isclose(data.uniform_loss(32), math.log(32))


def test_markov_unigram_entropy_is_between_floor_and_uniform(chain):
    assert chain.entropy_rate < chain.unigram_entropy <= math.log(chain.vocab_size) + 1e-12


def test_a_block_split_holds_out_whole_blocks_from_all_over():
    tokens = torch.arange(100)
    train, val = data.train_val_split(tokens, 0.2, block=10)
    assert val.tolist() == list(range(40, 50)) + list(range(90, 100))
    assert sorted(train.tolist() + val.tolist()) == list(range(100))
    with pytest.raises(ValueError, match="nothing left for val"):
        data.train_val_split(torch.arange(30), 0.2, block=10)
