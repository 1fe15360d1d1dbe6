"""The capstone's shared data and scoring (notebook 12, benchmarks/capstone_budget.py)."""

import pytest
import torch

from tfcourse.train import capstone
from tfcourse.train.data import TextDataset, stdlib_docstrings


@pytest.fixture(scope="module")
def small_data():
    return TextDataset(stdlib_docstrings(30_000), val_block=2000)


def _brute_force_held_out(model, tokens, context):
    """Each target scored by its own forward pass, the window the rule gives it."""
    import torch.nn.functional as F

    stride, total = context // 2, 0.0
    for j in range(1, len(tokens)):
        # held_out_loss: windows start at 0, stride, 2*stride, ... (and the tail); target j
        # is scored by the first window that reaches it and has not scored it before.
        start = (
            0
            if j <= context
            else min(((j - context - 1) // stride + 1) * stride, len(tokens) - 1 - context)
        )
        logits = model(tokens[None, start:j])[0, -1]
        total += float(F.cross_entropy(logits[None], tokens[j : j + 1]))
    return total / (len(tokens) - 1)


@pytest.mark.parametrize("n", [17, 40, 61])
def test_held_out_loss_scores_every_character_once_with_its_context(n):
    import torch

    import tfcourse as tc

    torch.manual_seed(0)
    model = tc.GPT(
        tc.GPTConfig(vocab_size=11, max_seq_len=16, n_layers=1, n_heads=2, d_model=16)
    ).eval()
    tokens = torch.randint(0, 11, (n,))
    with torch.no_grad():
        expected = _brute_force_held_out(model, tokens, 16)
    assert capstone.held_out_loss(model, tokens, batch_size=3) == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="context must be in"):
        capstone.held_out_loss(model, tokens, context=32)
    with pytest.raises(ValueError, match="1-D long tensor"):
        capstone.held_out_loss(model, tokens.float())


def test_byte_pair_text_holds_the_same_split_in_fewer_tokens(small_data):
    pairs = capstone.BytePairText(small_data, 60)
    val_text = small_data.tokenizer.decode(small_data.val)
    assert pairs.tokenizer.decode(pairs.val.tolist()) == val_text  # the same held-out text
    assert pairs.tokenizer.decode(pairs.train.tolist()) == small_data.tokenizer.decode(
        small_data.train
    )
    assert len(pairs.val) < len(small_data.val) and pairs.vocab_size == 256 + 60
    # The held-out text encoded afresh is the split itself (notebook 12 scores it so).
    assert torch.equal(torch.tensor(pairs.tokenizer.encode(val_text)), pairs.val)
    x, y = pairs.batch(2, 16)
    assert x.shape == y.shape == (2, 16) and int(x.max()) < pairs.vocab_size
    other = capstone.BytePairText.encoded(pairs.tokenizer, "the train zorblax", "the val")
    assert other.tokenizer is pairs.tokenizer and other.vocab_size == pairs.vocab_size
    assert pairs.tokenizer.decode(other.train.tolist()) == "the train zorblax"
    assert pairs.tokenizer.decode(other.val.tolist()) == "the val"
