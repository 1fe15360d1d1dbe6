"""The capstone's budget sweep (``tfcourse.train.budget``, ``benchmarks/capstone_budget.py``):
settings, the recorded rows, the table notebook 12 prints from them."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from tfcourse.language import speaking
from tfcourse.nn.attention import MultiHeadAttention
from tfcourse.train import budget, capstone
from tfcourse.train.loop import held_out_loss


def test_a_setting_names_what_differs_from_the_preset():
    assert budget.Setting().describe() == "tokens=chars"
    words = budget.Setting(tokens="bpe1024", dropout=0.1, lr=2e-3, more_text=True)
    assert words.label() == "1,024 byte-pair merges, dropout 0.1, learning rate 0.002"
    with speaking("zh"):
        assert words.label() == "1,024 次合并的字节对，dropout 0.1，学习率 0.002"
    assert budget.Setting(dropout=0.3).describe() == "tokens=chars, dropout=0.3"
    setting = budget.Setting(tokens="bpe512", dropout=0.2, lr=1e-3)
    assert setting.describe() == "tokens=bpe512, dropout=0.2, lr=0.001"
    assert setting.schedule["lr"] == 1e-3 and setting.schedule["min_lr"] == 1e-4
    assert setting.schedule["seq_len"] == capstone.SCHEDULE["seq_len"]
    with pytest.raises(ValueError, match="tokens must be 'chars' or 'bpeN'"):
        budget.Setting(tokens="words")


def test_attention_dropout_is_set_apart_from_residual_dropout():
    data = capstone.capstone_data()
    model = budget.build_model(data, budget.Setting(dropout=0.2, attn_dropout=0.0), seed=0)
    attention = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    assert attention and all(m.dropout == 0.0 and m.resid_dropout.p == 0.2 for m in attention)
    assert model.config.dropout == 0.2


def test_byte_pair_losses_convert_to_nats_per_character():
    chars = capstone.capstone_data()
    pairs = capstone.BytePairText(chars, 20)
    ratio = budget.chars_per_token(pairs)
    assert ratio > 1 and budget.chars_per_token(chars) == 1.0
    assert round(ratio * len(pairs.val)) == len(chars.val)  # the same held-out text


def _row(seed, loss, steps=capstone.BUDGET_STEPS, test=(), **setting):
    return budget.RecordedRun(
        setting=budget.Setting(**setting),
        steps=steps,
        minutes=1.5,
        losses=(loss,),
        seeds=(seed,),
        test_losses=test,
    )


def test_seeds_recorded_apart_join_one_row(tmp_path):
    path = tmp_path / "runs.json"
    budget.record_run(_row(0, 1.30, dropout=0.1), path)
    budget.record_run(_row(1, 1.20, dropout=0.1), path)
    budget.record_run(_row(0, 1.25, dropout=0.2), path)
    budget.record_run(_row(1, 9.99, dropout=0.1), path)  # a seed already there is kept once
    runs = budget.recorded_runs(path)
    assert [(r.setting.dropout, r.seeds, r.losses) for r in runs] == [
        (0.1, (0, 1), (1.30, 1.20)),
        (0.2, (0,), (1.25,)),
    ]
    assert math.isclose(runs[0].mean, 1.25) and math.isclose(runs[0].spread, 0.05 * math.sqrt(2))
    assert runs[1].spread == 0.0  # one seed: no spread to show


def test_the_table_is_best_first_with_its_margin_in_the_readers_language():
    runs = [_row(0, 1.30, dropout=0.1, more_text=True), _row(0, 1.20, dropout=0.2, more_text=True)]
    lines = budget.recorded_runs_table(1.25, runs).splitlines()
    assert lines[0].split() == [
        "setting",
        "steps",
        "time",
        "seeds",
        "validation",
        "nats/char",
        "margin",
    ]
    assert lines[1].startswith("characters, dropout 0.2") and lines[1].endswith("+0.050")
    assert lines[2].endswith("-0.050")
    with speaking("zh"):
        assert "分钟" in budget.recorded_runs_table(1.25, runs)


def test_the_best_run_is_the_lowest_mean_at_the_budget_and_sets_notebook_12s_model(tmp_path):
    runs = [
        _row(0, 1.30, dropout=0.1),
        _row(0, 1.20, dropout=0.2, tokens="bpe20"),
        _row(0, 1.10, steps=2 * capstone.BUDGET_STEPS, dropout=0.1),  # more steps: frontier only
        _row(0, 1.00, dropout=0.1, more_text=True),  # another text: compared apart
    ]
    best = budget.best_run(runs, more_text=False)
    assert best.setting.dropout == 0.2
    assert len(budget.recorded_runs_table(1.25, runs, more_text=False).splitlines()) == 3
    # Notebook 12's text is the corpus with more text: by default only its runs compete.
    assert capstone.MORE_TEXT and budget.best_run(runs).setting.more_text
    assert len(budget.recorded_runs_table(1.25, runs).splitlines()) == 2
    with pytest.raises(ValueError, match="no run is recorded"):
        budget.best_run(runs[2:3])
    recorded = budget.best_run()  # the shipped file has rows at the budget
    assert recorded.steps == capstone.BUDGET_STEPS and recorded.setting.more_text
    assert recorded.mean == min(r.mean for r in budget.budget_runs())
    assert len(recorded.seeds) >= 3  # the finalist: three seeds or more
    chars = capstone.capstone_data()
    data = budget.setting_data(best.setting, chars)
    config = budget.model_config(data, best.setting)
    assert (config.vocab_size, config.dropout) == (256 + 20, 0.2)
    assert config.max_seq_len == capstone.SCHEDULE["seq_len"]
    assert (config.attn_impl, config.fused_norms, config.positional) == ("sdpa", True, "rope")
    assert budget.setting_data(budget.Setting(), chars) is chars


def test_the_frontier_gives_the_settings_test_margin_per_number_of_steps():
    setting = dict(dropout=0.3)
    two_seeds = dataclasses.replace(
        _row(0, 1.1, test=(1.20,), **setting),
        seeds=(0, 1),
        losses=(1.1, 1.1),
        test_losses=(1.20, 1.22),
    )
    runs = [
        _row(0, 1.2, steps=200, test=(1.30,), **setting),
        two_seeds,
        _row(0, 1.0, steps=100, test=(1.40,), **setting),
        _row(0, 0.9, steps=100, test=(1.00,), dropout=0.1),  # another setting
        _row(0, 0.9, steps=50, dropout=0.3),  # no test loss
    ]
    rows = budget.frontier(budget.Setting(**setting), runs)
    assert [r.steps for r in rows] == [100, 200, capstone.BUDGET_STEPS]
    lines = budget.frontier_table(budget.Setting(**setting), 1.25, runs).splitlines()
    assert lines[1].split()[:4] == ["100", "1.5", "min", "-0.150"]
    assert lines[3].split()[3:] == ["+0.050", "+0.030", "+0.040", "±", "0.014"]
    with speaking("zh"):
        assert "各种子的差距" in budget.frontier_table(budget.Setting(**setting), 1.25, runs)


def test_the_held_out_text_splits_into_alternate_blocks_for_validation_and_test():
    blocks = [chr(ord("a") + i) * capstone.VAL_BLOCK for i in range(5)]
    parts = capstone.held_out_parts("".join(blocks) + "z" * 10)
    assert parts["validation"] == blocks[0] + blocks[2] + blocks[4]
    assert parts["test"] == blocks[1] + blocks[3] + "z" * 10


def test_a_run_is_scored_on_each_part_per_character():
    data = capstone.capstone_data()
    trainer = budget.train_setting(data, budget.Setting(n_layers=1, d_model=48), 2)
    scores = budget.part_scores(trainer.module, data)
    assert sorted(scores) == ["test", "validation"]
    held_out = data.tokenizer.decode(data.val.tolist())
    validation = capstone.held_out_parts(held_out)["validation"]
    ids = torch.tensor(data.tokenizer.encode(validation))
    assert scores["validation"] == pytest.approx(held_out_loss(trainer.module, ids))


def test_each_seed_gets_its_own_test_margin():
    row = budget.RecordedRun(
        setting=budget.Setting(),
        steps=10,
        minutes=1.0,
        losses=(1.1, 1.2),
        seeds=(0, 1),
        test_losses=(1.20, 1.26),
    )
    assert row.test_margins(1.27) == pytest.approx([0.07, 0.01])


def test_the_shipped_rows_carry_a_test_loss_per_seed():
    """Notebook 12's headline reads each seed's test loss from the shipped file."""
    for row in budget.recorded_runs():
        assert len(row.test_losses) == len(row.seeds) == len(row.losses)


@pytest.mark.slow  # reads the standard library's sources and learns byte pairs: ~20 s
def test_more_training_text_adds_only_new_paragraphs_and_keeps_the_held_out_text():
    chars = capstone.capstone_data()
    more = capstone.with_more_training_text(chars)
    assert torch.equal(more.val, chars.val) and more.tokenizer is chars.tokenizer
    assert torch.equal(more.train[: len(chars.train)], chars.train)
    assert len(more.train) > 2 * len(chars.train)  # about 1.0 M characters more on 3.11
    extra = capstone.more_training_text(chars)
    corpus_paragraphs = {p.strip() for p in chars.text.split("\n\n")}
    paragraphs = [p.strip() for p in extra.split("\n\n")]
    assert not corpus_paragraphs & set(paragraphs)  # nothing of the held-out text again
    assert len(set(paragraphs)) == len(paragraphs)
    assert set(extra) <= set(chars.tokenizer.chars)
    setting = budget.Setting(tokens="bpe64", more_text=True)
    assert setting.describe() == "tokens=bpe64, more_text=True"
    data = budget.setting_data(setting, chars)
    assert len(data.tokenizer.decode(data.train.tolist())) == len(more.train)
