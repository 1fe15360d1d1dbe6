"""The worker's watch (``tfcourse/grade/sealed/watch.py``) in this process: what honest code
does never counts as reaching torch's kernels past its functions, and each way past them
does. The same watch judges real workers in tests/test_sealed.py."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tfcourse.grade.sealed import watch


class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def _train_step():
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(3, 4)
    loss = F.cross_entropy(model(x), torch.tensor([0, 1, 1]))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return copy.deepcopy(model).double()


HONEST = {
    "python data": lambda: torch.tensor([[1.0, 2.0]]) @ torch.ones(2, 1),
    "numpy": lambda: torch.from_numpy(np.arange(4.0)).sum().item(),
    "a training step": _train_step,
    "an autograd.Function": lambda: (
        _Double.apply(torch.ones(3, requires_grad=True)).sum().backward()
    ),
    "indexing and in place": lambda: torch.zeros(4, 4).masked_fill_(
        torch.eye(4, dtype=torch.bool), 1
    )[1:, :2],
    "attention": lambda: F.scaled_dot_product_attention(
        *torch.randn(3, 1, 2, 4, 8), is_causal=True
    ),
    "functional_call": lambda: torch.func.functional_call(
        nn.Linear(2, 2), {"weight": torch.eye(2), "bias": torch.zeros(2)}, (torch.ones(1, 2),)
    ),
    "no_grad": lambda: torch.no_grad()(lambda: torch.ones(2).exp())(),
}


def _layer_norm(x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:])


def _boxed_rms_norm(x):
    schema = torch._C._dispatch_find_schema_or_throw("aten::rms_norm", "")
    return torch._C._dispatch_call_boxed(schema, x, [x.shape[-1]], None, 1e-6)


def _functions_off(x):
    with torch._C.DisableTorchFunction():
        return F.layer_norm(x, x.shape[-1:])


def _rms_norm(x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


# Each way: (what the learner's code runs, the honest function it equals, a kernel it reaches)
PAST = {
    "TorchScript": (
        lambda x: torch.jit.script(_layer_norm)(x),
        _layer_norm,
        "aten::native_layer_norm",
    ),
    "the dispatcher, boxed": (_boxed_rms_norm, _rms_norm, "aten::rsqrt"),
    "torch's functions switched off": (_functions_off, _layer_norm, "aten::native_layer_norm"),
}


def _watched(run):
    watch.SEEN.clear()
    seen = watch.Watch(())
    with seen:
        run()
    return list(watch.SEEN), seen


@pytest.mark.parametrize("name", HONEST)
def test_honest_code_never_reaches_a_kernel_past_torchs_functions(name):
    assert _watched(HONEST[name])[0] == []


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit.script
@pytest.mark.parametrize("name", PAST)
def test_each_way_past_torchs_functions_is_seen(name):
    run, honest, kernel = PAST[name]
    x = torch.randn(2, 8)
    assert torch.allclose(run(x), honest(x), atol=1e-5)  # it does the work...
    assert kernel in _watched(lambda: run(x))[0]  # ...and is seen
    assert _watched(lambda: honest(x))[0] == []  # where the honest way is not


def test_the_report_names_what_the_learners_own_code_called(monkeypatch):
    """Only calls made from the learner's frames: here, this file stands for the learner's
    folder."""
    monkeypatch.setattr(watch, "FOLDER", str(Path(__file__).parent))
    _, seen = _watched(lambda: torch.ones(2).exp())
    assert {"torch.ones", "torch.exp"} <= seen.called
    monkeypatch.setattr(watch, "FOLDER", "/nowhere")
    assert _watched(lambda: torch.ones(2).exp())[1].called == set()
