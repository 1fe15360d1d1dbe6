"""``InferenceProbe``: the language model the checks hand a learner's sampler and evaluation.

A stand-in for a GPT, small and fast, whose next-token logits depend on every token of its
context and on their positions (so a context cropped at the wrong end, or logits read at the
wrong position, change what is sampled). It refuses the two things inference must not do to
a model, each with a message the checks (``check_generate``, ``check_estimate_loss``) turn
into a named mistake: run it in training mode (dropout would be on) and run it with
gradients on (a graph built for nothing); each refusal speaks of what the learner's code
was doing (``purpose``: sampling, or evaluating the loss). Like a GPT it has
``config.max_seq_len`` and refuses longer inputs. It has no ``generate``: a sampler under test
has nothing to delegate to.

It lives outside ``tfcourse.checks`` because the sealed grader rebuilds it in the worker,
where the checks do not exist.
"""

from __future__ import annotations

import torch
from torch import nn

from ..language import say
from ..nn import validate
from ..nn.config import GPTConfig

# The words the check recognises in the learner's traceback (sealed or not): English in
# both languages, so the check finds them whatever language the probe spoke.
TRAINING_MODE = "InferenceProbe ran in training mode"
GRADIENTS_ON = "InferenceProbe ran with gradients enabled"
TOO_LONG = "InferenceProbe got a context longer than max_seq_len"
# What the code handed the probe does with it: the words of its refusals.
PURPOSES = ("sampling", "evaluating")


class InferenceProbe(nn.Module):
    """``forward(idx (B, T) long) -> logits (B, T, V)``, causal: position ``t`` sees
    ``idx[:, :t + 1]``. The logits at ``t`` are a linear readout of the running mean of
    ``tok_emb(idx) + pos_emb(position)`` up to ``t``, scaled by 3 so that sampling is
    neither uniform nor greedy.

    Parameters: ``tok_emb (V, D)``, ``pos_emb (max_seq_len, D)``, ``head (V, D)``, with
    ``D = config.d_model``. ``purpose`` (one of ``PURPOSES``) words its refusals: ``"sampling"``
    for a sampler (``check_generate``), ``"evaluating"`` for a loss estimate
    (``check_estimate_loss``). It is kept as an attribute, so the sealed grader's copy in the
    worker speaks alike.
    """

    def __init__(self, config: GPTConfig, purpose: str = "sampling"):
        super().__init__()
        if purpose not in PURPOSES:
            raise ValueError(
                say(
                    f"purpose must be one of {PURPOSES}, got {purpose!r}",
                    f"purpose 必须是 {PURPOSES} 之一，实际是 {purpose!r}",
                )
            )
        self.purpose = purpose
        if not isinstance(config, GPTConfig):
            got = type(config).__name__
            raise TypeError(
                say(
                    f"config must be a GPTConfig, got {got}",
                    f"config 必须是 GPTConfig，实际是 {got}",
                )
            )
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.max_seq_len, config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        sampling = self.purpose == "sampling"
        if self.training:
            raise RuntimeError(
                say(
                    f"{TRAINING_MODE}: call model.eval() before sampling",
                    f"{TRAINING_MODE}：采样前请先调用 model.eval()",
                )
                if sampling
                else say(
                    f"{TRAINING_MODE}: call model.eval() before evaluating the loss",
                    f"{TRAINING_MODE}：评估损失前请先调用 model.eval()",
                )
            )
        if torch.is_grad_enabled():
            raise RuntimeError(
                say(
                    f"{GRADIENTS_ON}: sample under torch.no_grad()",
                    f"{GRADIENTS_ON}：请在 torch.no_grad() 下采样",
                )
                if sampling
                else say(
                    f"{GRADIENTS_ON}: evaluate the loss under torch.no_grad()",
                    f"{GRADIENTS_ON}：请在 torch.no_grad() 下评估损失",
                )
            )
        validate.token_ids(idx, self.config.vocab_size)
        length = idx.shape[1]
        if length > self.config.max_seq_len:
            got = f"T={length} > {self.config.max_seq_len}"
            raise ValueError(
                say(
                    f"{TOO_LONG}: {got}; crop idx to its last max_seq_len tokens",
                    f"{TOO_LONG}：{got}；请把 idx 裁剪为最后 max_seq_len 个词元",
                )
            )
        positions = torch.arange(length, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(positions)  # (B, T, D)
        counts = (positions + 1).to(x.dtype)[:, None]
        running_mean = x.cumsum(dim=1) / counts  # (B, T, D): position t averages 0..t
        return 3.0 * self.head(running_mean)  # (B, T, V)
