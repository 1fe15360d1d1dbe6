"""One ``tfcourse train`` run, once its flags are checked: the run it starts or resumes,
the dataset and model (each refused first when memory or disk cannot hold it), the
training with its checkpoints, and what it reports at the end.

A signal during training is only recorded by ``interrupt.Signals``; the run ends after the
step in progress (``interrupt.Stop``), saves, and returns 128 + the signal.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

import torch

from ..language import say
from ..nn.config import GPTConfig
from ..nn.model import GPT
from . import flags, interrupt, preflight, report
from .checkpoint import CHECKPOINT_NAME, save_checkpoint
from .data import TextDataset, make_dataset
from .distributed import Distributed, params_in_sync
from .loop import TrainConfig, Trainer
from .preflight import PreflightError


@dataclass
class _Plan:
    """What a run starts or continues from, before any data or model is built."""

    dataset_spec: dict
    train_config: TrainConfig
    model_config: GPTConfig | None  # None: the dataset's vocabulary decides it
    checkpoint_path: str | None
    state: dict | None = None  # the checkpoint a --resume continues
    path: str | None = None  # where that checkpoint was read


def _resumed(args, path: str):
    """The checkpoint at ``path`` and the run it continues, once the flags agree with it:
    ``(state, dataset_spec, model_config, train_config, warnings)``."""
    state = preflight.read_checkpoint(path)
    config = state["config"]
    mismatch = preflight.mismatched_flags(args, config["model"], flags.MODEL_FLAGS)
    if mismatch:
        raise PreflightError(say(f"{path}: {mismatch}", f"{path}：{mismatch}"))
    warnings = preflight.check_resume_flags(args, args.given, config, int(state["step"]), path)
    # Extending (or shortening) a run changes the schedule's length from here on.
    changed = {
        field: getattr(args, name)
        for _, name, field in preflight.CHANGEABLE_FLAGS
        if name in args.given
    }
    train_config = TrainConfig.from_dict({**config["train"], **changed})
    return state, config["data"], GPTConfig(**config["model"]), train_config, warnings


def _spec_vocab(spec: dict) -> int | None:
    """The Markov chain's vocabulary, known before it builds its V x V tables; the other
    datasets are cheap to build and say theirs (None)."""
    return spec["kwargs"]["vocab_size"] if spec["name"] == "markov" else None


def _check_resources(args, env, model_config, train_config, spec, checkpoint_path) -> None:
    """Memory (the dataset's tables included) and, on rank 0, disk room for a checkpoint."""
    if not args.no_memory_check:
        preflight.check_memory(
            model_config,
            train_config.batch_size,
            train_config.seq_len,
            env.device,
            args.memory_limit,
            preflight.dataset_bytes(spec),
        )
    if checkpoint_path and env.rank == 0:
        need = preflight.checkpoint_bytes(
            preflight.estimate_params(model_config), train_config.steps
        )
        preflight.check_disk(os.path.dirname(checkpoint_path), need)


def _plan(args, main: bool) -> _Plan:
    """The run from the flags, or with ``--resume`` from its checkpoint (rank 0 prints the
    warnings about flags that change it); ``--out`` is prepared first."""
    checkpoint_path = os.path.join(args.out, CHECKPOINT_NAME) if args.out else None
    if args.out and main:
        preflight.prepare_out(args.out)
    if args.resume:
        path = checkpoint_path if args.resume == "auto" else args.resume
        if path is None:
            raise PreflightError(
                say(
                    "--resume needs a checkpoint path or --out DIR",
                    "--resume 需要一个检查点路径，或者 --out DIR",
                )
            )
        state, dataset_spec, model_config, train_config, warnings = _resumed(args, path)
        for warning in warnings if main else ():
            print(warning, file=sys.stderr)
        return _Plan(dataset_spec, train_config, model_config, checkpoint_path or path, state, path)
    dataset_spec, train_config = flags.dataset_spec(args), flags.train_config(args)
    model_config = None
    if _spec_vocab(dataset_spec) is not None:
        model_config = flags.model_config(args, _spec_vocab(dataset_spec))
    return _Plan(dataset_spec, train_config, model_config, checkpoint_path)


def _dataset(args, env: Distributed, plan: _Plan):
    """The dataset and the model's config, ``(dataset, model_config)``; the resources are
    checked before the dataset is built where its vocabulary is known beforehand (a Markov
    chain's tables can be large), otherwise right after."""
    model_config = plan.model_config
    if model_config is not None:  # before the dataset builds its tables
        _check_resources(
            args, env, model_config, plan.train_config, plan.dataset_spec, plan.checkpoint_path
        )
    dataset = make_dataset(plan.dataset_spec["name"], **plan.dataset_spec["kwargs"])
    if model_config is None:  # copy, text: the dataset's vocabulary
        model_config = flags.model_config(args, dataset.vocab_size)
        _check_resources(
            args, env, model_config, plan.train_config, plan.dataset_spec, plan.checkpoint_path
        )
    preflight.check_splits(dataset, plan.train_config.seq_len)
    return dataset, model_config


def _trainer(args, env: Distributed, plan: _Plan, model_config: GPTConfig, dataset, log):
    """The model and its ``Trainer``, ``(model, trainer)``, restored from the checkpoint
    when the run resumes."""
    train_config = plan.train_config
    torch.manual_seed(train_config.seed)  # same initial weights on every rank
    model = GPT(model_config)
    trainer = Trainer(
        model,
        dataset,
        train_config,
        device=env.device,
        distributed=env.enabled,
        progress=not args.no_progress,
    )
    torch.manual_seed(train_config.seed + 1 + env.rank)  # dropout: each rank its own stream
    if plan.state is not None:
        preflight.restore(plan.path, lambda: trainer.load_state_dict(plan.state))
        step = plan.state["step"]
        log(
            say(
                f"resuming from {plan.path} at step {step}",
                f"从 {plan.path} 的第 {step} 步继续训练",
            )
        )
    return model, trainer


def _train(
    args, trainer: Trainer, train_config: TrainConfig, signals: interrupt.Signals, every_step
):
    """Train to the last step, or ``--stop-after`` steps from here: ``(history, seconds)``.
    A signal recorded meanwhile ends it after the step in progress (``every_step`` raises
    ``interrupt.Stop``)."""
    until = train_config.steps
    if args.stop_after is not None:
        until = min(until, trainer.step + args.stop_after)
    started = time.perf_counter()
    signals.phase = "training"  # from here a signal ends with a checkpoint
    try:
        history = trainer.fit(until=until, callback=every_step)
    except interrupt.Stop:
        history = trainer.history
    return history, time.perf_counter() - started


def run_training(args, env: Distributed, signals: interrupt.Signals) -> int:
    """Train, checkpoint and report; the exit status (0; 1 when the loss diverged; 128 + the
    signal that stopped it). Only rank 0 prints and writes checkpoints."""
    main = env.rank == 0
    log = print if main else (lambda *a, **k: None)
    plan = _plan(args, main)
    checkpoint_path, train_config = plan.checkpoint_path, plan.train_config
    dataset, model_config = _dataset(args, env, plan)
    model, trainer = _trainer(args, env, plan, model_config, dataset, log)
    config = {"model": model_config.to_dict(), "data": plan.dataset_spec}
    if isinstance(dataset, TextDataset):  # what `tfcourse sample` needs to write text
        config["tokenizer"] = "".join(dataset.tokenizer.chars)

    def save():
        snapshot = trainer.state_dict()  # collective: every rank takes part
        snapshot["config"].update(config)
        if main and checkpoint_path:
            save_checkpoint(checkpoint_path, snapshot)

    def every_step(t):
        signum = interrupt.agreed_signal(signals.signum, env)
        if signum:
            raise interrupt.Stop(signum)
        if args.save_every and t.step % args.save_every == 0 and t.step < train_config.steps:
            save()

    floor = getattr(dataset, "loss_floor", None)
    log(report.opening_line(plan.dataset_spec["name"], dataset, model, model_config, env))
    first_step = trainer.step
    history, seconds = _train(args, trainer, train_config, signals, every_step)
    if checkpoint_path:
        save()
    stopped = interrupt.agreed_signal(
        signals.signum, env
    )  # also one during the last step or the save
    signals.phase = "done"
    if stopped:
        if main:
            print(
                interrupt.interrupt_line(
                    stopped, trainer.step, train_config.steps, checkpoint_path, args, env
                ),
                file=sys.stderr,
            )
        return 128 + stopped
    if checkpoint_path:
        log(
            say(
                f"saved {checkpoint_path} at step {trainer.step}",
                f"已保存第 {trainer.step} 步的检查点：{checkpoint_path}",
            )
        )
    if history.diverged:
        log(
            say(
                f"diverged at step {trainer.step}: loss {history.loss[-1]}",
                f"训练在第 {trainer.step} 步发散：损失为 {history.loss[-1]}",
            )
        )
        return 1
    if history.loss:
        for line in report.summary_lines(
            history, trainer.step, first_step, seconds, floor, train_config, env.world_size
        ):
            log(line)
    if env.enabled:
        diff = params_in_sync(trainer.module)
        log(
            say(
                f"ranks in sync: max |parameter difference| across {env.world_size} processes "
                f"= {diff:.3g}",
                f"各进程的模型副本保持一致：{env.world_size} 个进程之间参数的最大差值 "
                f"|Δ| = {diff:.3g}",
            )
        )
    if main and args.sample and trainer.step == train_config.steps:
        report.report_sample(
            trainer.module, dataset, plan.dataset_spec, args.sample, env.device, train_config.seed
        )
    return 0
