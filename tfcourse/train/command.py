"""``tfcourse train``: the notebook's training loop from the shell.

    tfcourse train --dataset markov --steps 300 --out runs/markov
    tfcourse train --dataset text --preset tiny --n-layers 4 --steps 2000 --out runs/text
    tfcourse train --dataset text --preset capstone --out runs/capstone   # notebook 12's run
    tfcourse train --out runs/text --resume                 # continue where it stopped
    torchrun --standalone --nproc_per_node 2 -m tfcourse train --dataset markov --out runs/ddp

The model comes from a ``GPTConfig`` preset plus flags; the vocabulary size and
context length always follow the dataset and ``--seq-len``. A checkpoint
(``OUT/checkpoint.pt``) holds ``{model, optimizer, step, config, rng, history}`` as
tensors and plain containers, saved with ``torch.save`` and read back with
``torch.load(weights_only=True)``. ``--resume`` restores all of it, so the
resumed run computes exactly the losses an uninterrupted run would (on CPU).

Under ``torchrun`` every process trains a replica wrapped in
``DistributedDataParallel`` (gloo on CPU, nccl on GPU) on its own batches;
gradients are averaged across processes. Only rank 0 prints and checkpoints. A
collective that waits longer than ``--collective-timeout`` (a frozen or dead process)
ends the job with a message instead of hanging.

Before any work (``preflight.py``) every flag is range-checked, ``--out`` is created and
written to, a ``--resume`` checkpoint is read and compared with the flags, the device is
looked up, and the run's memory is estimated and refused when it exceeds what is
available (``--no-memory-check`` to try anyway), the text's splits must hold a
``--seq-len`` sequence, and ``--out`` must have room for a checkpoint. With ``--resume``,
a ``--steps`` below the saved step, or a training or data flag that differs from the
checkpoint's, is refused (``--steps``, ``--eval-every`` and ``--eval-batches`` may change,
with a warning). Each refusal is one line, exit status 2.

Ctrl-C (SIGINT) or SIGTERM during training finishes the step, saves a checkpoint, prints
where and how to resume, and exits 130 (143 for SIGTERM); a second one stops at once,
without saving. A checkpoint that cannot be written (disk full) ends the run with one
line, exit status 1, and the previous checkpoint is left as it was.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import sys
import time

import torch

from ..lab.language import real_word_fraction, vocabulary
from ..language import say
from ..nn.config import PRESETS, GPTConfig
from ..nn.model import GPT
from ..runtime import default_device
from . import interrupt, preflight
from .checkpoint import CHECKPOINT_NAME, CheckpointSaveError, save_checkpoint
from .data import DATASETS, TEXT_SOURCES, CopyTask, MarkovChain, TextDataset, make_dataset
from .loop import TrainConfig, Trainer, held_out_loss
from .preflight import PreflightError
from .presets import training_defaults
from .sample import sample_text

# Model flags: (flag, GPTConfig field, type).
_MODEL_FLAGS = (("--n-layers", "n_layers", int), ("--n-heads", "n_heads", int),
                ("--n-kv-heads", "n_kv_heads", int), ("--d-model", "d_model", int),
                ("--dropout", "dropout", float))
# Defaults of flags that are None in the parser, so --resume can tell a flag given from a default.
_FLAG_DEFAULTS = {"vocab_size": 32, "weight_decay": 0.1, "grad_clip": 1.0, "eval_every": 100,
                  "eval_batches": 4, "seed": 0}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = __doc__
    data = parser.add_argument_group("data")
    data.add_argument("--dataset", choices=DATASETS, default=None,
                      help="markov: random Markov chain with a known loss floor; copy: copy a "
                           "random string; text: English from Python's own documentation "
                           "(default: markov, or the preset's)")
    data.add_argument("--text-source", choices=TEXT_SOURCES, default=None,
                      help="text: stdlib docstrings, or the capstone corpus (the reference "
                           "manual's topics + docstrings) (default: docstrings, or the preset's)")
    data.add_argument("--vocab-size", type=int, default=None,
                      help="markov: number of states; copy: number of symbols (default: 32)")
    data.add_argument("--max-chars", type=int, default=None,
                      help="text: characters to gather (default: 200000; capstone: all)")
    data.add_argument("--val-block", type=int, default=None, metavar="N",
                      help="text: hold out one block of N characters in ten for validation "
                           "(default: the last tenth; capstone: 5000, notebook 12's split)")
    model = parser.add_argument_group("model")
    model.add_argument("--preset", choices=sorted(PRESETS), default="tiny",
                       help="GPTConfig preset the flags below override (default: tiny)")
    for flag, field, kind in _MODEL_FLAGS:
        model.add_argument(flag, type=kind, default=None, help=f"override {field}")
    model.add_argument("--post-ln", action="store_true", help="post-LN blocks (default: pre-LN)")
    loop = parser.add_argument_group("training")
    loop.add_argument("--steps", type=int, default=None,
                      help="total optimizer steps (default: 300 or the preset's; the "
                           "checkpoint's with --resume)")
    loop.add_argument("--batch-size", type=int, default=None,
                      help="sequences per step and process (default: 16 or the preset's)")
    loop.add_argument("--seq-len", type=int, default=None,
                      help="tokens per sequence (default: 64 or the preset's)")
    loop.add_argument("--lr", type=float, default=None,
                      help="peak learning rate (default: 3e-3 or the preset's)")
    loop.add_argument("--min-lr", type=float, default=None, help="final learning rate (default: lr/10)")
    loop.add_argument("--warmup", type=int, default=None,
                      help="linear warmup steps (default: 10%% of --steps)")
    loop.add_argument("--weight-decay", type=float, default=None,
                      help="AdamW decay of 2-D weights (default: 0.1)")
    loop.add_argument("--grad-clip", type=float, default=None,
                      help="clip the gradient norm to this (0 = off; default: 1.0)")
    loop.add_argument("--eval-every", type=int, default=None,
                      help="validate every N steps (0 = at the end; default: 100)")
    loop.add_argument("--eval-batches", type=int, default=None, help="(default: 4)")
    loop.add_argument("--seed", type=int, default=None, help="(default: 0)")
    loop.add_argument("--device", default=None,
                      help="cpu, cuda, mps (default: $TFCOURSE_DEVICE, else the best available)")
    run = parser.add_argument_group("checkpoints and runs")
    run.add_argument("--out", default=None,
                     help=f"directory for {CHECKPOINT_NAME} (default: no checkpoints)")
    run.add_argument("--save-every", type=int, default=0,
                     help="also checkpoint every N steps (default: only at the end)")
    run.add_argument("--resume", nargs="?", const="auto", default=None, metavar="CHECKPOINT",
                     help=f"continue from CHECKPOINT (default: OUT/{CHECKPOINT_NAME}); the run's "
                          "config comes from the checkpoint, --steps may extend it")
    run.add_argument("--stop-after", type=int, default=None, metavar="N",
                     help="stop after N steps of this invocation (checkpoint, then --resume later)")
    run.add_argument("--sample", type=int, default=200, metavar="N",
                     help="generate N tokens at the end (0 = none; default: 200)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--no-memory-check", action="store_true",
                     help="start even when the memory estimate exceeds what is available")
    run.add_argument("--memory-limit", type=float, default=None, metavar="GIB",
                     help="refuse runs estimated above GIB (default: the memory available)")
    run.add_argument("--collective-timeout", type=float, default=300, metavar="SECONDS",
                     help="under torchrun, end the job when a collective waits longer than "
                          "this for a frozen or dead process (at most 86400; default: 300)")


def apply_preset(args) -> None:
    """Fill every flag left unset with the value the ``--preset`` implies; ``args.given``
    names the flags given on the command line (``--resume`` compares only those)."""
    args.given = {name for name, value in vars(args).items() if value is not None}
    args.steps_given = args.steps              # --resume keeps the checkpoint's unless given
    for name, value in {**_FLAG_DEFAULTS, **training_defaults(args.preset)}.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)


def _dataset_spec(args) -> dict:
    if args.dataset == "markov":
        return {"name": "markov", "kwargs": {"vocab_size": args.vocab_size, "seed": 0}}
    if args.dataset == "copy":
        return {"name": "copy", "kwargs": {"n_symbols": args.vocab_size}}
    return {"name": "text", "kwargs": {"max_chars": args.max_chars, "source": args.text_source,
                                       "val_block": args.val_block}}


def _model_config(args, vocab_size: int) -> GPTConfig:
    overrides = {field: getattr(args, field) for _, field, _ in _MODEL_FLAGS
                 if getattr(args, field) is not None}
    if args.post_ln:
        overrides["pre_ln"] = False
    return GPTConfig.preset(args.preset, vocab_size=vocab_size, max_seq_len=args.seq_len,
                            **overrides)


def _train_config(args) -> TrainConfig:
    steps = 300 if args.steps is None else args.steps
    warmup = steps // 10 if args.warmup is None else args.warmup
    return TrainConfig(steps=steps, batch_size=args.batch_size, seq_len=args.seq_len,
                       max_lr=args.lr, min_lr=args.min_lr, warmup_steps=warmup,
                       weight_decay=args.weight_decay,
                       grad_clip=args.grad_clip if args.grad_clip > 0 else None,
                       eval_every=args.eval_every, eval_batches=args.eval_batches, seed=args.seed)


class _Distributed:
    """``torch.distributed`` set up from torchrun's environment, or a single process."""

    def __init__(self, device: torch.device, timeout_seconds: float):
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.timeout_seconds = timeout_seconds
        if self.world_size > 1:
            import torch.distributed as dist

            if device.type == "cuda":
                device = torch.device("cuda", local_rank)
                torch.cuda.set_device(device)
            backend = "nccl" if device.type == "cuda" else "gloo"
            # Without a timeout, a frozen process leaves the others waiting forever.
            dist.init_process_group(backend=backend,
                                    timeout=datetime.timedelta(seconds=timeout_seconds))
            self.backend = backend
        self.device = device
        self.enabled = self.world_size > 1

    def close(self, clean: bool = True):
        if self.enabled and not clean:
            import torch.distributed as dist

            dist.destroy_process_group()        # no barrier: a peer is gone or frozen
        elif self.enabled:
            import torch.distributed as dist

            # Tear down together: rank 0 hosts the rendezvous store, and a rank that
            # destroys its group while rank 0 has already exited can abort at exit.
            # (If a rank failed, torchrun stops the others, so this cannot hang.)
            try:
                dist.barrier()
            finally:
                dist.destroy_process_group()


def _params_in_sync(module) -> float:
    """Largest difference between this rank's parameters and rank 0's (collective)."""
    import torch.distributed as dist

    flat = torch.cat([p.detach().flatten() for p in module.parameters()])
    reference = flat.clone()
    dist.broadcast(reference, src=0)
    diff = (flat - reference).abs().max()
    dist.all_reduce(diff, op=dist.ReduceOp.MAX)
    return float(diff)


def _report_sample(model, dataset, dataset_spec, n_tokens: int, device, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    if isinstance(dataset, TextDataset):
        # What notebook 12 measures: every held-out character scored once, and the real
        # words in a sample at temperature 0.8 (`tfcourse sample DIR` writes more).
        loss = held_out_loss(model, dataset.val)
        text = sample_text(model, dataset.tokenizer, "\n", n_tokens, temperature=0.8,
                           top_k=None, seed=seed)
        known = vocabulary(dataset.tokenizer.decode(dataset.train))
        print(say(f"held-out loss: {loss:.3f} nats/char over all {len(dataset.val):,} validation "
                  f"characters", f"留出集损失：{loss:.3f} 奈特/字符（全部 {len(dataset.val):,} 个"
                  f"验证字符）"))
        print(say(f"--- sample (temperature 0.8): {real_word_fraction(text, known):.0%} real words ---",
                  f"--- 采样（温度 0.8）：真实单词占 {real_word_fraction(text, known):.0%} ---"))
        print("\n" + text)
        print("---")
        return
    if isinstance(dataset, CopyTask):
        x, _ = dataset.batch(64, model.config.max_seq_len, generator=generator)
        n = (x.shape[1] + 1) // 2                       # symbols, then the separator at index n
        copied = model.generate(x[:, :n + 1].to(device), n - 1, temperature=0).cpu()[:, n + 1:]
        accuracy = (copied == x[:, :n - 1]).double().mean()
        print(f"copy task, greedy decoding: {accuracy:.1%} of {copied.numel()} symbols copied right")
        return
    x, _ = dataset.batch(4, 1, generator=generator)
    n_tokens = min(n_tokens, model.config.max_seq_len - 1)
    out = model.generate(x.to(device), n_tokens, generator=generator).cpu()
    print(f"sample (first row): {out[0, :24].tolist()}")
    if isinstance(dataset, MarkovChain):
        print(f"generated {n_tokens} tokens x 4: -log P under the true chain "
              f"{dataset.transition_nll(out):.4f} nats/token (entropy rate "
              f"{dataset.entropy_rate:.4f}); impossible transitions "
              f"{dataset.impossible_fraction(out):.1%}")


def run(args) -> int:
    with interrupt.Signals() as signals:
        return _run_checked(args, signals)


def _run_checked(args, signals: interrupt.Signals) -> int:
    quiet = int(os.environ.get("RANK", "0")) != 0       # under torchrun, rank 0 speaks
    try:
        apply_preset(args)
        preflight.check_arguments(args)
        device = preflight.resolve_device(args.device, default_device)
        env = _Distributed(device, args.collective_timeout)
    except (PreflightError, ValueError, RuntimeError) as error:
        if not quiet:
            print(say(f"error: {error}", f"错误：{error}"), file=sys.stderr)
        return 2
    except (interrupt.Interrupted, KeyboardInterrupt) as stop:
        return interrupt.interrupted(stop, quiet)
    clean = True
    try:
        code = _run(args, env, signals)
    except (interrupt.Interrupted, KeyboardInterrupt) as stop:
        code, clean = interrupt.interrupted(stop, env.rank != 0), False    # peers may be mid-collective
    except CheckpointSaveError as error:
        if env.rank == 0:
            print(say(f"error: could not write the checkpoint {error.path} ({error.reason}); "
                      f"no partial file was left, and a checkpoint saved there before is unchanged",
                      f"错误：无法写入检查点 {error.path}（{error.reason}）；没有留下写了一半的文件，"
                      f"之前保存在那里的检查点也没有改动"), file=sys.stderr)
        code, clean = 1, False                      # the other ranks are still training
    except (ValueError, TypeError) as error:        # a bad flag value: say which, no traceback
        if env.rank == 0:
            print(say(f"error: {error}", f"错误：{error}"), file=sys.stderr)
        code = 2
    except (MemoryError, RuntimeError) as error:
        if _is_out_of_memory(error):
            print(_out_of_memory_line(error, args.no_memory_check), file=sys.stderr)
            code = 1
        elif not (env.enabled and _is_collective_failure(error)):
            raise
        else:
            detail = re.sub(r"^\[[^\]]*\]\s*", "", str(error).splitlines()[0])[:160]
            print(say(f"error: rank {env.rank}: a collective operation failed or waited more than "
                      f"--collective-timeout={env.timeout_seconds:g} s for another process (frozen "
                      f"or dead); stopping ({detail})",
                      f"错误：rank {env.rank}：一次集合通信操作失败，或等待另一个进程（已卡死或已退出）"
                      f"超过了 --collective-timeout={env.timeout_seconds:g} 秒；停止运行（{detail}）"),
                  file=sys.stderr)
            code, clean = 3, False
    finally:
        env.close(clean)
    if env.enabled:
        # Under torchrun, a worker occasionally aborted *after* a clean teardown
        # ("terminate called without an active exception": a c10d/gloo thread still
        # alive while the interpreter exits). The work is done and saved, so leave
        # without running the interpreter's exit-time destructors.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _is_out_of_memory(error: BaseException) -> bool:
    text = str(error).lower()
    return isinstance(error, MemoryError) or "can't allocate memory" in text or "out of memory" in text


def _out_of_memory_line(error: BaseException, unchecked: bool) -> str:
    detail = re.sub(r"^\[[^\]]*\]\s*(err == 0\.\s*)?", "", (str(error) or "MemoryError").splitlines()[0])[:160]
    hint = say(" (--no-memory-check skipped the estimate that refuses such runs)",
               "（--no-memory-check 跳过了本会拒绝这种运行的内存估算）") if unchecked else ""
    return say(f"error: out of memory ({detail}); lower --batch-size, --seq-len or --vocab-size{hint}",
               f"错误：内存不足（{detail}）；请调小 --batch-size、--seq-len 或 --vocab-size{hint}")


def _is_collective_failure(error: RuntimeError) -> bool:
    text = f"{type(error).__name__}: {error}".lower()
    return any(word in text for word in ("timed out", "timeout", "connection closed",
                                         "connection reset", "distbackenderror", "gloo", "nccl"))


def _resumed(args, path: str):
    """The checkpoint at ``path`` and the run it continues, once the flags agree with it:
    ``(state, dataset_spec, model_config, train_config, warnings)``."""
    state = preflight.read_checkpoint(path)
    config = state["config"]
    mismatch = preflight.mismatched_flags(args, config["model"], _MODEL_FLAGS)
    if mismatch:
        raise PreflightError(say(f"{path}: {mismatch}", f"{path}：{mismatch}"))
    warnings = preflight.check_resume_flags(args, args.given, config, int(state["step"]), path)
    # Extending (or shortening) a run changes the schedule's length from here on.
    changed = {field: getattr(args, name) for _, name, field in preflight.CHANGEABLE_FLAGS
               if name in args.given}
    train_config = TrainConfig.from_dict({**config["train"], **changed})
    return state, config["data"], GPTConfig(**config["model"]), train_config, warnings


def _spec_vocab(spec: dict) -> int | None:
    """The Markov chain's vocabulary, known before it builds its V x V tables; the other
    datasets are cheap to build and say theirs (None)."""
    return spec["kwargs"]["vocab_size"] if spec["name"] == "markov" else None


def _check_resources(args, env, model_config, train_config, spec, checkpoint_path) -> None:
    """Memory (the dataset's tables included) and, on rank 0, disk room for a checkpoint."""
    if not args.no_memory_check:
        preflight.check_memory(model_config, train_config.batch_size, train_config.seq_len,
                               env.device, args.memory_limit, preflight.dataset_bytes(spec))
    if checkpoint_path and env.rank == 0:
        need = preflight.checkpoint_bytes(preflight.estimate_params(model_config),
                                          train_config.steps)
        preflight.check_disk(os.path.dirname(checkpoint_path), need)


def _run(args, env: _Distributed, signals: interrupt.Signals) -> int:
    main = env.rank == 0
    log = print if main else (lambda *a, **k: None)
    checkpoint_path = os.path.join(args.out, CHECKPOINT_NAME) if args.out else None
    if args.out and main:
        preflight.prepare_out(args.out)
    state = path = model_config = None
    if args.resume:
        path = checkpoint_path if args.resume == "auto" else args.resume
        if path is None:
            raise PreflightError(say("--resume needs a checkpoint path or --out DIR",
                                     "--resume 需要一个检查点路径，或者 --out DIR"))
        state, dataset_spec, model_config, train_config, warnings = _resumed(args, path)
        for warning in warnings if main else ():
            print(warning, file=sys.stderr)
        checkpoint_path = checkpoint_path or path
    else:
        dataset_spec, train_config = _dataset_spec(args), _train_config(args)
        if _spec_vocab(dataset_spec) is not None:
            model_config = _model_config(args, _spec_vocab(dataset_spec))
    if model_config is not None:                 # before the dataset builds its tables
        _check_resources(args, env, model_config, train_config, dataset_spec, checkpoint_path)
    dataset = make_dataset(dataset_spec["name"], **dataset_spec["kwargs"])
    if model_config is None:                     # copy, text: the dataset's vocabulary
        model_config = _model_config(args, dataset.vocab_size)
        _check_resources(args, env, model_config, train_config, dataset_spec, checkpoint_path)
    preflight.check_splits(dataset, train_config.seq_len)
    torch.manual_seed(train_config.seed)          # same initial weights on every rank
    model = GPT(model_config)
    trainer = Trainer(model, dataset, train_config, device=env.device, distributed=env.enabled,
                      progress=not args.no_progress)
    torch.manual_seed(train_config.seed + 1 + env.rank)   # dropout: each rank its own stream
    if state is not None:
        preflight.restore(path, lambda: trainer.load_state_dict(state))
        log(f"resuming from {path} at step {state['step']}")
    config = {"model": model_config.to_dict(), "data": dataset_spec}
    if isinstance(dataset, TextDataset):       # what `tfcourse sample` needs to write text
        config["tokenizer"] = "".join(dataset.tokenizer.chars)

    def save():
        snapshot = trainer.state_dict()              # collective: every rank takes part
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
    log(f"tfcourse train: {dataset_spec['name']} data (vocab {dataset.vocab_size}"
        + (f", loss floor {floor:.4f} nats" if floor is not None else "") + "), "
        f"{model.num_params():,} parameters, {model_config.n_layers} "
        f"layer{'s' if model_config.n_layers != 1 else ''}, "
        f"{'pre' if model_config.pre_ln else 'post'}-LN, device {env.device}"
        + (f", {env.world_size} processes ({env.backend})" if env.enabled else ""))
    until = train_config.steps
    if args.stop_after is not None:
        until = min(until, trainer.step + args.stop_after)
    started, first_step = time.perf_counter(), trainer.step
    signals.phase = "training"                     # from here a signal ends with a checkpoint
    try:
        history = trainer.fit(until=until, callback=every_step)
    except interrupt.Stop:
        history = trainer.history
    seconds = time.perf_counter() - started
    if checkpoint_path:
        save()
    stopped = interrupt.agreed_signal(signals.signum, env)    # also one during the last step or the save
    signals.phase = "done"
    if stopped:
        if main:
            print(interrupt.interrupt_line(stopped, trainer.step, train_config.steps, checkpoint_path,
                                  args, env), file=sys.stderr)
        return 128 + stopped
    if checkpoint_path:
        log(f"saved {checkpoint_path} at step {trainer.step}")
    if history.diverged:
        log(say(f"diverged at step {trainer.step}: loss {history.loss[-1]}",
                f"训练在第 {trainer.step} 步发散：loss {history.loss[-1]}"))
        return 1
    if history.loss:
        tail = history.loss[-10:]
        line = f"step {trainer.step}: train loss {sum(tail) / len(tail):.4f} (mean of last {len(tail)})"
        if history.val_loss and history.val_step[-1] == trainer.step:
            line += f", val loss {history.val_loss[-1]:.4f}"
        if floor is not None:
            line += f", floor {floor:.4f}"
        log(line)
        tokens = (trainer.step - first_step) * train_config.batch_size * train_config.seq_len
        log(say(f"trained {trainer.step - first_step} steps in {seconds / 60:.1f} min "
                f"({tokens * env.world_size / max(seconds, 1e-9):,.0f} tokens/s)",
                f"训练 {trainer.step - first_step} 步，用时 {seconds / 60:.1f} 分钟"
                f"（每秒 {tokens * env.world_size / max(seconds, 1e-9):,.0f} 个词元）"))
    if env.enabled:
        diff = _params_in_sync(trainer.module)
        log(f"ranks in sync: max |parameter difference| across {env.world_size} processes = {diff:.3g}")
    if main and args.sample and trainer.step == train_config.steps:
        _report_sample(trainer.module, dataset, dataset_spec, args.sample, env.device,
                       train_config.seed)
    return 0
