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

from .flags import add_flags, describe

# The command's help for a Chinese reader: what the module's docstring says, in short.
DESCRIPTION_ZH = """tfcourse train：在命令行里运行 notebook 中的训练循环。

    tfcourse train --dataset markov --steps 300 --out runs/markov
    tfcourse train --dataset text --preset tiny --n-layers 4 --steps 2000 --out runs/text
    tfcourse train --dataset text --preset capstone --out runs/capstone   # notebook 12 的训练
    tfcourse train --out runs/text --resume                 # 从上次停下的地方继续
    torchrun --standalone --nproc_per_node 2 -m tfcourse train --dataset markov --out runs/ddp

模型由 GPTConfig 预设加上命令行参数决定；词表大小和上下文长度总是由数据集和
--seq-len 决定。检查点（OUT/checkpoint.pt）保存模型、优化器、步数、配置、随机数状态
和训练记录，--resume 会把它们全部恢复，所以断点续训算出的损失与一次不中断的训练
完全相同（在 CPU 上）。

在 torchrun 下，每个进程训练一个用 DistributedDataParallel 包装的模型副本（CPU 上用
gloo，GPU 上用 nccl），各自处理自己的批次，梯度在进程之间取平均；只有 rank 0 打印
输出和保存检查点。某次集合通信等待超过 --collective-timeout（有进程卡死或已退出）时，
任务会带着一条说明结束，而不会一直挂起。

开始之前（preflight.py）会检查每个参数的取值范围、--out 能否写入、--resume 的检查点
能否读取并与参数一致、设备是否存在，并估算内存，超出可用内存时拒绝运行（加上
--no-memory-check 可以强行一试）；文本的训练集和验证集都要能容纳一条 --seq-len 长的
序列，--out 也要有足够的空间存放检查点。续训时，--steps 小于已保存的步数，或者训练、
数据参数与检查点不一致，都会被拒绝（--steps、--eval-every 和 --eval-batches 可以改，
但会给出警告）。每种拒绝只打印一行，退出码为 2。

训练中按 Ctrl-C（SIGINT）或发送 SIGTERM，会先做完当前这一步，保存检查点，告诉你
检查点在哪里、怎样继续，然后以退出码 130（SIGTERM 为 143）退出；再按一次则立即停止，
不再保存。检查点写不进去（例如磁盘已满）时，训练以一行说明结束，退出码为 1，之前的
检查点保持原样。
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's help (this module's docstring) and its flags (``flags.py``)."""
    describe(parser, __doc__, DESCRIPTION_ZH)
    add_flags(parser)


def run(args) -> int:
    """Train (``command.py``: imported here, so that ``--help`` needs no torch)."""
    from .command import run as train

    return train(args)
