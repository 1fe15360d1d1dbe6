"""The worker on its own: the script that runs a learner's cells, spoken to over its wire.

``worker.py`` is started here as the unsealed grader starts it (``python -I worker.py`` in
a folder of its own, the protocol on stdin and stdout), with no proxy and no session in
between, so each of its duties is checked where it is done: running cells one by one (a
raising cell does not stop the next, IPython syntax is noted and not run), each cell's time
limit, its own resource limits, the ops a check uses (evaluate, describe, call, backward),
and refusing what is not the protocol.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tfcourse.grade.sealed import channel, pool, protocol, proxy
from tfcourse.grade.sealed.seal import sealed_archive
from tfcourse.grade.sealed.session import grading_env

pytestmark = pytest.mark.slow
HERE = Path(protocol.__file__).resolve().parent
CELLS = [
    "import torch\nx = torch.arange(6.0).reshape(2, 3)",
    "raise ValueError('a learner mistake')",
    "y = x * 2\n!ls /\n%timeit x + 1\n%time z = y + 1\n%matplotlib inline\n%load_ext foo",
    "import resource\nlimit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]",
    "while True:\n    pass",
    "after = 'the cell after a timeout still runs'",
    "double = torch.nn.Linear(3, 2)",
]


def start(folder: Path, cells: list[str]) -> tuple[subprocess.Popen, dict]:
    """A worker in ``folder`` that ran ``cells`` (one second per cell); its first report."""
    for name in pool.WORKER_FILES:
        shutil.copyfile(HERE / name, folder / name)
    env = dict(grading_env(1), MPLBACKEND="Agg", HOME=str(folder), TMPDIR=str(folder))
    process = subprocess.Popen(
        [sys.executable, "-I", str(folder / "worker.py")],
        cwd=folder,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    package = torch.frombuffer(bytearray(sealed_archive(set())), dtype=torch.uint8)
    protocol.write_message(
        process.stdin,
        {
            "cells": cells,
            "builtins": [],
            "watch": [],
            "threads": 1,
            "cell_seconds": 1,
            "limits": {"file_bytes": 10_000_000},
        },
        {"package": package},
    )
    process.stdin.flush()
    report, _ = protocol.read_message(process.stdout)
    return process, report


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    """A worker that ran ``CELLS``; ``(process, its report)``."""
    process, report = start(tmp_path_factory.mktemp("worker"), CELLS)
    yield process, report
    process.kill()
    process.wait()


def ask(worker, header: dict, tensors: dict | None = None) -> tuple[dict, dict]:
    process, _ = worker
    protocol.write_message(process.stdin, header, tensors)
    process.stdin.flush()
    return protocol.read_message(process.stdout)


def test_every_cell_runs_in_order_and_a_raising_cell_does_not_stop_the_next(worker):
    ran = worker[1]["cells"]
    assert [r["ok"] for r in ran] == [True, False, True, True, False, True, True]
    assert ran[1]["error"] == "ValueError: a learner mistake"
    assert ran[4]["error"].startswith("CellTimeout")


def test_ipython_syntax_is_noted_and_not_run(worker):
    notes = {note["kind"]: note["line"] for note in worker[1]["cells"][2]["notes"]}
    assert notes == {"shell": "!ls /", "timing": "%timeit x + 1", "magic": "%load_ext foo"}
    reply, blob = ask(worker, {"op": "evaluate", "expression": "z"})
    assert protocol.decode(reply["value"], blob).tolist() == [[1, 3, 5], [7, 9, 11]]  # %time ran


def test_the_worker_sets_its_own_limits(worker):
    assert ask(worker, {"op": "evaluate", "expression": "limit"})[0]["value"] == 10_000_000


def test_a_module_is_described_called_and_differentiated(worker):
    handle = ask(worker, {"op": "evaluate", "expression": "double"})[0]["value"]
    assert handle["kind"] == "module"
    described, tensors = ask(worker, {"op": "describe", "target": handle})
    assert [p["name"] for p in described["params"]] == ["weight", "bias"]
    weight = torch.ones(2, 3, requires_grad=True)
    encoder = protocol.Encoder()
    header = {
        "op": "call",
        "target": handle,
        "training": False,
        "grad": True,
        "args": encoder((torch.tensor([[1.0, 2.0, 3.0]]),)),
        "kwargs": encoder({}),
        "params": encoder({"weight": weight, "bias": torch.zeros(2)}),
        "buffers": encoder({}),
    }
    reply, blob = ask(worker, header, encoder.tensors)
    result = protocol.decode(reply["result"], blob)
    assert result.tolist() == [[6.0, 6.0]]  # the grader's weights, not the learner's
    grads, blob = ask(worker, {"op": "backward", "graph": reply["graph"]}, {"g0": torch.ones(1, 2)})
    assert blob[grads["grads"][0]].tolist() == [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]


def test_a_learners_error_is_an_answer_and_so_is_an_unknown_op(worker):
    """Neither ends the worker: an unknown op is a request it cannot read, said in a reply
    (the grader reports the protocol's failure), and the next request is answered."""
    reply, _ = ask(worker, {"op": "evaluate", "expression": "1 / 0"})
    assert reply["error"]["type"] == "ZeroDivisionError"
    reply, _ = ask(worker, {"op": "format the disk"})
    assert "unknown op" in reply["bad_request"] and "error" not in reply
    reply, _ = ask(worker, {"op": "evaluate", "expression": "6 * 7"})
    assert reply["value"] == 42


MASKED = """\
class Masked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.ones(3))
        self.register_buffer("mask", torch.tensor([True, False, True]), persistent=False)

    def forward(self, x):
        return (x * self.scale).masked_fill(~self.mask, 0.0)

masked = Masked()
"""


def test_non_persistent_buffers_are_mirrored_and_the_call_uses_the_mirrors(tmp_path):
    """A check moves the learner's module with ``.to(device)``; its causal mask (a buffer
    kept out of the state dict) must move too, as it does in a kernel. Unmirrored, the
    worker used its own CPU copy with the GPU's inputs and the solution failed on CUDA."""
    process, _ = start(tmp_path, ["import torch", MASKED])
    worker = proxy.Worker(process, timeout=30)
    try:
        mirror = worker.evaluate("masked")
        assert isinstance(mirror, proxy.RemoteModule)
        assert list(mirror.state_dict()) == ["scale"]  # the learner's keys, no more
        assert set(dict(mirror.named_buffers())) == {"scale", "mask"}
        mirror.double()
        mirror.mask.fill_(True)  # what the call sees is the mirror's, moved and changed
        x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
        assert mirror(x).tolist() == [1.0, 2.0, 3.0]
    finally:
        worker.kill()
        process.wait()


SPRAY = """
import types
import torch

def spray(first):
    # 300 functions whose module claims to be the course's, each with a long name of its own
    scope, code = {"__name__": "tfcourse.\\x1b[31m"}, (lambda: 1).__code__
    for i in range(first, first + 300):
        types.FunctionType(code.replace(co_qualname=f"f{i}" + "x" * 300), scope)()
    return torch.ones(1).sum().item()
"""


def test_what_the_learners_code_called_is_bounded_whatever_it_names(tmp_path):
    """The report's list of what the learner's code called comes from the worker, so the
    learner shapes it: at most ``channel.MAX_CALLED`` names per exercise (each request sends
    as many, all different), each cut short."""
    process, _ = start(tmp_path, [SPRAY])
    worker = proxy.Worker(process, timeout=30)
    try:
        assert worker.evaluate("spray(0)") == worker.evaluate("spray(300)") == 1.0
        assert len(worker.called) == channel.MAX_CALLED
        assert max(map(len, worker.called)) == channel.MAX_NAME
    finally:
        worker.kill()
        process.wait()
