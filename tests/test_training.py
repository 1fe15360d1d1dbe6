"""The training loop: schedule, optimizer groups, loss, determinism, resume, the lr check."""

import itertools
import math

import pytest
import torch

import tfcourse as tc
from tfcourse.checks import check_lr_schedule
from tfcourse.train.checkpoint import load_checkpoint, save_checkpoint
from tfcourse.train.data import IGNORE_INDEX, MarkovChain
from tfcourse.train.loop import History, TrainConfig, Trainer, evaluate, lm_loss, train
from tfcourse.train.optim import configure_optimizer, lr_at

from conftest import verdict_lines

CPU = torch.device("cpu")


def tiny_gpt(vocab_size=16, seq_len=16, n_layers=1, d_model=32, seed=0, **over):
    torch.manual_seed(seed)
    return tc.GPT(
        tc.GPTConfig(
            vocab_size=vocab_size,
            max_seq_len=seq_len,
            n_layers=n_layers,
            n_heads=4,
            d_model=d_model,
            **over,
        )
    )


# --------------------------------------------------------------------------- schedule


def test_lr_at_key_values():
    kw = dict(max_lr=1.0, warmup_steps=4, total_steps=14, min_lr=0.1)
    assert lr_at(0, **kw) == pytest.approx(1 / 5)  # (step + 1) / (warmup + 1)
    assert lr_at(3, **kw) == pytest.approx(4 / 5)
    assert lr_at(4, **kw) == pytest.approx(1.0)  # peak at warmup_steps
    assert lr_at(9, **kw) == pytest.approx(0.55)  # half way: (max + min) / 2
    assert lr_at(14, **kw) == pytest.approx(0.1)  # min_lr at total_steps
    assert lr_at(100, **kw) == pytest.approx(0.1)  # and after


def test_lr_at_shape_of_the_curve():
    kw = dict(max_lr=3e-3, warmup_steps=10, total_steps=60, min_lr=3e-4)
    lrs = [lr_at(s, **kw) for s in range(70)]
    assert all(a < b for a, b in itertools.pairwise(lrs[:11]))  # rises during warmup
    assert all(a >= b for a, b in itertools.pairwise(lrs[10:]))  # never rises afterwards
    assert min(lrs) > 0
    # cosine, not linear: a quarter of the way into the decay it is above the straight line
    quarter = lr_at(10 + 50 // 4, **kw)
    assert quarter > 3e-4 + 0.75 * (3e-3 - 3e-4) - 1e-12


def test_lr_at_without_warmup_starts_at_max():
    assert lr_at(0, max_lr=0.5, warmup_steps=0, total_steps=10) == 0.5
    assert lr_at(10, max_lr=0.5, warmup_steps=0, total_steps=10) == 0.0


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(step=-1),
        dict(step=1.5),
        dict(warmup_steps=11),
        dict(total_steps=0),
        dict(min_lr=2.0),
        dict(min_lr=-0.1),
    ],
)
def test_lr_at_validates(kwargs):
    args = dict(step=0, max_lr=1.0, warmup_steps=2, total_steps=10, min_lr=0.0)
    args.update(kwargs)
    step = args.pop("step")
    with pytest.raises((ValueError, TypeError)):
        lr_at(step, **args)


# --------------------------------------------------------------------------- check_lr_schedule


def test_check_lr_schedule_passes_the_reference(capsys):
    check_lr_schedule(lr_at)
    assert capsys.readouterr().out == "lr_at: 3/3 checks passed\n"


def test_check_lr_schedule_passes_an_alternative_correct_implementation(capsys):
    def schedule(step, *, max_lr, warmup_steps, total_steps, min_lr=0.0):
        if step < warmup_steps:
            return torch.tensor(max_lr * (step + 1) / (warmup_steps + 1))  # a 0-d tensor is fine
        t = min(step, total_steps) - warmup_steps
        span = max(total_steps - warmup_steps, 1)
        return min_lr + (max_lr - min_lr) * (math.cos(math.pi * t / span) + 1) / 2

    check_lr_schedule(schedule)
    assert "3/3 checks passed" in capsys.readouterr().out


def _wrong(warmup, decay):
    def schedule(step, *, max_lr, warmup_steps, total_steps, min_lr=0.0):
        if step < warmup_steps:
            return warmup(step, max_lr, warmup_steps)
        return decay(step, max_lr, warmup_steps, total_steps, min_lr)

    return schedule


def _good_warmup(s, m, w):
    return m * (s + 1) / (w + 1)


def _cosine(s, m, w, t, lo):
    p = min(s - w, t - w) / (t - w)
    return lo + 0.5 * (m - lo) * (1 + math.cos(math.pi * p))


WRONG = {
    "no warmup": _wrong(lambda s, m, w: m, _cosine),
    "off by one: lr 0 at step 0": _wrong(lambda s, m, w: m * s / w, _cosine),
    "off by one: peak one step early": _wrong(lambda s, m, w: m * (s + 1) / w, _cosine),
    "does not reach min_lr": _wrong(_good_warmup, lambda s, m, w, t, lo: _cosine(s, m, w, t, 0.0)),
    "linear decay instead of cosine": _wrong(
        _good_warmup, lambda s, m, w, t, lo: lo + (m - lo) * (1 - min(s - w, t - w) / (t - w))
    ),
    "does not stay at min_lr": _wrong(
        _good_warmup,
        lambda s, m, w, t, lo: lo + 0.5 * (m - lo) * (1 + math.cos(math.pi * (s - w) / (t - w))),
    ),
    "a cosine from step 0": lambda step, *, max_lr, warmup_steps, total_steps, min_lr=0.0: (
        min_lr
        + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * min(step, total_steps) / total_steps))
    ),
    "decay spread over total_steps": _wrong(
        _good_warmup,
        lambda s, m, w, t, lo: (
            lo if s >= t else lo + 0.5 * (m - lo) * (1 + math.cos(math.pi * (s - w) / t))
        ),
    ),
    "a division by zero": _wrong(_good_warmup, lambda s, m, w, t, lo: math.inf),
}
EXPECTED_MESSAGE = {
    "no warmup": "looks like: no warmup",
    "off by one: lr 0 at step 0": "warmup off by one: max_lr * step / warmup_steps",
    "off by one: peak one step early": "reaches max_lr one step early",
    "does not reach min_lr": "cosine does not reach min_lr",
    "linear decay instead of cosine": "linear decay instead of cosine",
    "does not stay at min_lr": "rises again",
    "a cosine from step 0": "no warmup: a cosine over all steps",
    "decay spread over total_steps": "the decay is spread over total_steps",
    "a division by zero": "a division by zero or an overflow",
}


@pytest.mark.parametrize("name", sorted(WRONG))
def test_check_lr_schedule_names_the_mistake(name):
    with pytest.raises(AssertionError) as info:
        check_lr_schedule(WRONG[name])
    assert EXPECTED_MESSAGE[name] in verdict_lines(str(info.value)), str(info.value)


def test_check_lr_schedule_wrong_default_and_wrong_type():
    def default_tenth(step, *, max_lr, warmup_steps, total_steps, min_lr=None):
        return lr_at(
            step,
            max_lr=max_lr,
            warmup_steps=warmup_steps,
            total_steps=total_steps,
            min_lr=max_lr / 10 if min_lr is None else min_lr,
        )

    with pytest.raises(AssertionError, match=r"min_lr does not default to 0\.0"):
        check_lr_schedule(default_tenth)
    with pytest.raises(AssertionError, match="expected a float"):
        check_lr_schedule(lambda step, **kw: "0.1")
    with pytest.raises(NotImplementedError):
        check_lr_schedule(lambda step, **kw: (_ for _ in ()).throw(NotImplementedError("lr_at")))
    with pytest.raises(TypeError):
        check_lr_schedule(3)


# --------------------------------------------------------------------------- pieces


def test_weight_decay_only_on_2d_weights():
    model = tiny_gpt()
    opt = configure_optimizer(model, lr=1e-3, weight_decay=0.1)
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() == 2 for p in decay["params"])
    assert all(p.dim() == 1 for p in no_decay["params"])
    ids = [id(p) for g in opt.param_groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))  # tied head: once
    assert any(p is model.tok_emb.weight for p in decay["params"])


def test_lm_loss_skips_ignored_targets():
    logits = torch.randn(2, 3, 5)
    targets = torch.tensor([[1, IGNORE_INDEX, 2], [IGNORE_INDEX, 4, 0]])
    keep = targets != IGNORE_INDEX
    expected = torch.nn.functional.cross_entropy(logits[keep], targets[keep])
    torch.testing.assert_close(lm_loss(logits, targets), expected)
    with pytest.raises(ValueError, match="expected logits"):
        lm_loss(logits, targets[:, :2])


def test_train_config_validates():
    with pytest.raises(ValueError, match="warmup_steps"):
        TrainConfig(steps=5, warmup_steps=6)
    with pytest.raises(ValueError):
        TrainConfig(max_lr=0.0)
    assert TrainConfig(max_lr=1e-3).final_lr == pytest.approx(1e-4)
    assert TrainConfig.from_dict({**TrainConfig().to_dict(), "unknown": 1}) == TrainConfig()


# --------------------------------------------------------------------------- the loop


def test_training_is_deterministic_and_lowers_the_loss():
    chain = MarkovChain(16, 3, seed=0)
    kw = dict(steps=30, batch_size=8, seq_len=16, max_lr=1e-2, warmup_steps=3, seed=1)
    a = train(tiny_gpt(), chain, **kw)
    b = train(tiny_gpt(), chain, **kw)
    assert a.loss == b.loss and a.val_loss == b.val_loss
    assert len(a.loss) == 30 and a.step == list(range(30))
    assert a.lr == [TrainConfig(**kw).lr(s) for s in range(30)]
    assert sum(a.loss[-5:]) / 5 < sum(a.loss[:5]) / 5 - 0.5
    assert a.val_step == [30]
    c = train(tiny_gpt(), chain, **{**kw, "seed": 2})
    assert c.loss != a.loss  # the seed picks the batches


def test_gradient_clipping_records_the_norm_before_clipping():
    chain = MarkovChain(16, 3, seed=0)
    h = train(
        tiny_gpt(),
        chain,
        steps=3,
        batch_size=8,
        seq_len=16,
        max_lr=1e-3,
        warmup_steps=0,
        grad_clip=1e-3,
    )
    assert all(g > 1e-3 for g in h.grad_norm)


@pytest.mark.slow
def test_markov_loss_approaches_the_entropy_floor():
    chain = MarkovChain(32, 4, seed=0)
    model = tiny_gpt(vocab_size=32, seq_len=32, n_layers=1, d_model=32)
    h = train(
        model,
        chain,
        steps=200,
        batch_size=16,
        seq_len=32,
        max_lr=1e-2,
        warmup_steps=20,
        eval_batches=8,
    )
    floor = chain.entropy_rate
    assert h.loss[0] > floor + 2.0  # starts near log(32) = 3.47
    assert floor - 0.05 < h.val_loss[-1] < floor + 0.15
    # the floor is a floor: evaluate on many fresh batches
    fresh = evaluate(model, chain, batch_size=64, seq_len=32, n_batches=8, seed=123)
    assert fresh > floor - 0.03


def test_divergence_stops_the_run():
    model = tiny_gpt()
    with torch.no_grad():
        model.lm_head.weight[0, 0] = float("nan")
    h = train(model, MarkovChain(16, 3), steps=10, batch_size=4, seq_len=8, warmup_steps=0)
    assert h.diverged and len(h.loss) == 1 and math.isinf(h.final_loss())


def test_evaluate_is_repeatable_and_keeps_the_mode():
    model = tiny_gpt()
    model.train()
    chain = MarkovChain(16, 3)
    a = evaluate(model, chain, batch_size=4, seq_len=8, n_batches=2)
    b = evaluate(model, chain, batch_size=4, seq_len=8, n_batches=2)
    assert a == b and model.training


def test_checkpoint_resume_gives_the_same_losses(tmp_path):
    chain = MarkovChain(16, 3, seed=0)
    config = TrainConfig(
        steps=12, batch_size=4, seq_len=8, max_lr=1e-2, warmup_steps=2, eval_every=4, seed=5
    )
    first = Trainer(tiny_gpt(dropout=0.1), chain, config, device=CPU)
    torch.manual_seed(0)
    first.fit(until=6)
    save_checkpoint(tmp_path / "ckpt.pt", first.state_dict())
    torch.manual_seed(999)  # whatever happens in between
    state = load_checkpoint(tmp_path / "ckpt.pt")  # weights_only=True
    resumed = Trainer(tiny_gpt(seed=42, dropout=0.1), chain, config, device=CPU)
    resumed.load_state_dict(state)
    assert resumed.step == 6
    resumed.fit()

    full = Trainer(tiny_gpt(dropout=0.1), chain, config, device=CPU)
    torch.manual_seed(0)  # the uninterrupted run, same dropout stream
    full.fit()
    assert resumed.history.loss == full.history.loss
    assert resumed.history.val_loss == full.history.val_loss
    for (name, p), q in zip(
        full.module.named_parameters(), resumed.module.parameters(), strict=True
    ):
        assert torch.equal(p, q), name


def test_history_round_trip():
    h = History(step=[0], loss=[1.0], lr=[0.1], grad_norm=[2.0], val_step=[1], val_loss=[0.9])
    assert History.from_dict(h.to_dict()) == h
    assert h.final_loss() == 1.0


def test_amp_runs_the_forward_pass_in_bf16_and_keeps_float32_weights():
    def first_losses(amp):
        torch.manual_seed(0)
        model = tc.GPT(tc.GPTConfig.preset("tiny", vocab_size=32, max_seq_len=16))
        trainer = Trainer(
            model,
            MarkovChain(),
            TrainConfig(steps=2, seq_len=16, batch_size=4, warmup_steps=0),
            amp=amp,
        )
        return trainer.fit().loss, next(model.parameters()).dtype

    (full, dtype_full), (mixed, dtype_mixed) = first_losses(False), first_losses(True)
    assert dtype_full == dtype_mixed == torch.float32
    assert full[0] != mixed[0] and abs(full[0] - mixed[0]) < 0.05  # bf16 rounding, same loss
