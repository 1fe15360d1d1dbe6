"""What ``tfcourse train`` says about a run: its opening line (data, model, device), the
closing losses and speed, and what the trained model does (held-out loss and real words
for text, copy accuracy, a Markov sample scored under the true chain)."""

from __future__ import annotations

import torch

from ..lab.language import real_word_fraction, vocabulary
from ..language import current, say
from ..nn.config import GPTConfig
from .data import CopyTask, MarkovChain, TextDataset
from .loop import History, TrainConfig, held_out_loss
from .sample import sample_text


def opening_line(dataset_name: str, dataset, model, model_config: GPTConfig, env) -> str:
    """The data (with its loss floor, where known), the model's size and norm placement, the
    device, and under torchrun the processes."""
    floor = getattr(dataset, "loss_floor", None)
    if current() == "zh":
        return (
            f"tfcourse train：{dataset_name} 数据（词表 {dataset.vocab_size}"
            + (f"，损失下限 {floor:.4f} nats" if floor is not None else "")
            + "），"
            f"{model.num_params():,} 个参数，{model_config.n_layers} 层，"
            f"{'Pre' if model_config.pre_ln else 'Post'}-LN，设备 {env.device}"
            + (f"，{env.world_size} 个进程（{env.backend}）" if env.enabled else "")
        )
    return (
        f"tfcourse train: {dataset_name} data (vocab {dataset.vocab_size}"
        + (f", loss floor {floor:.4f} nats" if floor is not None else "")
        + "), "
        f"{model.num_params():,} parameters, {model_config.n_layers} "
        f"layer{'s' if model_config.n_layers != 1 else ''}, "
        f"{'pre' if model_config.pre_ln else 'post'}-LN, device {env.device}"
        + (f", {env.world_size} processes ({env.backend})" if env.enabled else "")
    )


def summary_lines(
    history: History,
    step: int,
    first_step: int,
    seconds: float,
    floor,
    train_config: TrainConfig,
    world_size: int,
) -> list[str]:
    """The losses at ``step`` (train: the mean of the last ten; val, when measured there; the
    floor) and the speed of the ``step - first_step`` steps this invocation trained."""
    tail = history.loss[-10:]
    line = say(
        f"step {step}: train loss {sum(tail) / len(tail):.4f} (mean of last {len(tail)})",
        f"第 {step} 步：训练损失 {sum(tail) / len(tail):.4f}（最近 {len(tail)} 步的平均）",
    )
    if history.val_loss and history.val_step[-1] == step:
        line += say(
            f", val loss {history.val_loss[-1]:.4f}", f"，验证损失 {history.val_loss[-1]:.4f}"
        )
    if floor is not None:
        line += say(f", floor {floor:.4f}", f"，下限 {floor:.4f}")
    tokens = (step - first_step) * train_config.batch_size * train_config.seq_len
    return [
        line,
        say(
            f"trained {step - first_step} steps in {seconds / 60:.1f} min "
            f"({tokens * world_size / max(seconds, 1e-9):,.0f} tokens/s)",
            f"训练 {step - first_step} 步，用时 {seconds / 60:.1f} 分钟"
            f"（每秒 {tokens * world_size / max(seconds, 1e-9):,.0f} 个词元）",
        ),
    ]


def report_sample(model, dataset, dataset_spec, n_tokens: int, device, seed: int) -> None:
    """Print what the trained model does on ``dataset``: for text, the held-out loss and a
    sample with its share of real words; for the copy task, greedy copy accuracy on 64
    strings; for a Markov chain, 4 rows of up to ``n_tokens`` tokens scored under the true chain."""
    generator = torch.Generator().manual_seed(seed)
    if isinstance(dataset, TextDataset):
        # What notebook 12 measures: every held-out character scored once, and the real
        # words in a sample at temperature 0.8 (`tfcourse sample DIR` writes more).
        loss = held_out_loss(model, dataset.val)
        text = sample_text(
            model, dataset.tokenizer, "\n", n_tokens, temperature=0.8, top_k=None, seed=seed
        )
        known = vocabulary(dataset.tokenizer.decode(dataset.train))
        print(
            say(
                f"held-out loss: {loss:.3f} nats/char over all {len(dataset.val):,} validation "
                f"characters",
                f"留出集损失：{loss:.3f} nats/字符（全部 {len(dataset.val):,} 个验证字符）",
            )
        )
        real = real_word_fraction(text, known)
        print(
            say(
                f"--- sample (temperature 0.8): {real:.0%} real words ---",
                f"--- 采样（温度 0.8）：真实单词占 {real:.0%} ---",
            )
        )
        print("\n" + text)
        print("---")
        return
    if isinstance(dataset, CopyTask):
        x, _ = dataset.batch(64, model.config.max_seq_len, generator=generator)
        n = (x.shape[1] + 1) // 2  # symbols, then the separator at index n
        copied = model.generate(x[:, : n + 1].to(device), n - 1, temperature=0).cpu()[:, n + 1 :]
        accuracy = (copied == x[:, : n - 1]).double().mean()
        print(
            say(
                f"copy task, greedy decoding: {accuracy:.1%} of {copied.numel()} symbols "
                f"copied right",
                f"复制任务，贪心解码：{copied.numel()} 个符号中复制正确的占 {accuracy:.1%}",
            )
        )
        return
    x, _ = dataset.batch(4, 1, generator=generator)
    n_tokens = min(n_tokens, model.config.max_seq_len - 1)
    out = model.generate(x.to(device), n_tokens, generator=generator).cpu()
    print(say("sample (first row): ", "采样（第一行）：") + f"{out[0, :24].tolist()}")
    if isinstance(dataset, MarkovChain):
        nll, impossible = dataset.transition_nll(out), dataset.impossible_fraction(out)
        print(
            say(
                f"generated {n_tokens} tokens x 4: -log P under the true chain "
                f"{nll:.4f} nats/token (entropy rate "
                f"{dataset.entropy_rate:.4f}); impossible transitions "
                f"{impossible:.1%}",
                f"生成了 4 行、每行 {n_tokens} 个词元：在真实的马尔可夫链下 -log P 为 "
                f"{nll:.4f} nats/词元（熵率 {dataset.entropy_rate:.4f}）；"
                f"不可能出现的转移占 {impossible:.1%}",
            )
        )
