"""The sealed grader: the wire, the stand-ins, and verdicts that learner code cannot reach.

The protocol tests are fast. The rest start real workers (a Python process that imports
torch: about two seconds each) and are marked slow.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import math
import os
import struct
import sys
import time

import pytest
import torch
from nbformat.v4 import new_code_cell

import tfcourse as tc
from tfcourse import checks
from tfcourse.authoring.build import make_learner, solve
from tfcourse.course import notebook_format
from tfcourse.course.restamp import restamp
from tfcourse.grade import records, references
from tfcourse.grade.notebook import grade
from tfcourse.grade.sealed import channel, pool, protocol, proxy, session
from tfcourse.grade.sealed.session import Setup, check_calls, grading_env

from helpers import FIXTURE, ROOT, cells_for, grade_exercise

# --- the wire (fast) -------------------------------------------------------------------------


def _round_trip(header, tensors=None):
    stream = io.BytesIO()
    protocol.write_message(stream, header, tensors)
    stream.seek(0)
    return protocol.read_message(stream)


def test_values_round_trip_with_their_tensors():
    value = {
        "x": torch.arange(6.0).reshape(2, 3).t(),
        "pair": (1, 2.5, None, "s"),
        "items": [True, float("inf"), torch.float64, torch.device("cpu")],
        "mask": torch.ones(2, 2, dtype=torch.bool),
    }
    encoder = protocol.Encoder()
    header, tensors = _round_trip({"v": encoder(value)}, encoder.tensors)
    back = protocol.decode(header["v"], tensors)
    assert torch.equal(back["x"], value["x"]) and back["pair"] == (1, 2.5, None, "s")
    assert back["items"] == [True, float("inf"), torch.float64, torch.device("cpu")]
    assert back["mask"].dtype == torch.bool


def test_requires_grad_crosses_and_objects_do_not():
    encoder = protocol.Encoder()
    tree = encoder(torch.ones(2, requires_grad=True))
    assert protocol.decode(tree, encoder.tensors).requires_grad
    with pytest.raises(TypeError, match="cannot send a object"):
        protocol.Encoder()(object())


@pytest.mark.parametrize(
    "tree, message",
    [
        ({"$tensor": "t9"}, "missing tensor"),
        ({"$dtype": "os.system"}, "unknown dtype"),
        ({"$pickle": "gASV"}, "unknown value node"),
        (["untagged"], "untagged list"),
        ({"$handle": 3}, "unknown value node"),  # the grader accepts no handles by default
        ({"$dataclass": "tfcourse.nn.config:GPTConfig", "fields": {"$dict": {}}}, "unknown value"),
        ({"$module": "os:system", "init": {"$dict": {}}}, "unknown value"),
    ],
)
def test_malformed_or_hostile_values_are_refused(tree, message):
    with pytest.raises(protocol.ProtocolError, match=message):
        protocol.decode(tree, {})


def test_oversized_or_broken_frames_are_refused():
    with pytest.raises(protocol.ProtocolError, match="header of"):
        protocol.read_message(io.BytesIO(struct.pack(">Q", protocol.MAX_HEADER + 1)))
    body = json.dumps({"a": 1}).encode()
    broken = struct.pack(">Q", len(body)) + body + struct.pack(">Q", 4) + b"junk"
    with pytest.raises(protocol.ProtocolError, match="not safetensors"):
        protocol.read_message(io.BytesIO(broken))
    with pytest.raises(EOFError):
        protocol.read_message(io.BytesIO(b"\x00\x00"))


def test_check_calls_are_parsed_from_our_check_cells():
    assert check_calls("check_rmsnorm(RMSNorm)") == [("check_rmsnorm", ["RMSNorm"])]
    assert check_calls("check_a(f(x), 3)\ncheck_b(g)") == [
        ("check_a", ["f(x)", "3"]),
        ("check_b", ["g"]),
    ]
    with pytest.raises(ValueError, match="not a plain check call"):
        check_calls("import os")


def test_the_worker_gets_no_demos_no_checks_and_nothing_after_the_check():
    solution = notebook_format.read_notebook(FIXTURE)
    learner, _ = restamp(solve(make_learner(solution, "99_fixture"), solution), solution)
    sent = cells_for(learner, solution, "Causal mask")
    assert sent[-1].startswith("def causal_mask(T):")
    assert not any("plt.subplots" in cell or "check_" in cell.split("\n")[-1] for cell in sent)
    assert any(
        cell.startswith("class RMSNorm(") for cell in cells_for(learner, solution, "RMSNorm")
    )


def test_a_cell_between_the_stub_and_its_check_is_sent():
    """A solution typed into a new cell right below the untouched stub counts."""
    solution = notebook_format.read_notebook(FIXTURE)
    nb = make_learner(solution, "99_fixture")
    index = next(i for i, c in enumerate(nb.cells) if c.get("id") == "ex-rmsnorm")
    nb.cells.insert(index + 1, new_code_cell("class RMSNorm: pass  # mine", id="below"))
    learner, _ = restamp(nb, solution)
    assert cells_for(learner, solution, "RMSNorm")[-1] == "class RMSNorm: pass  # mine"
    assert "# mine" not in "".join(cells_for(learner, solution, "Causal mask"))


# --- verdicts from real workers (slow) ---------------------------------------------------------


def _sealed(solution, nb, exercise, timeout=60):
    stamped, _ = restamp(nb, solution)
    return grade_exercise(stamped, solution, exercise, Setup(env=grading_env(1), timeout=timeout))


def _rmsnorm_replaced(solution, source, extra=None):
    nb = solve(make_learner(solution, "99_fixture"), solution)
    index = next(i for i, c in enumerate(nb.cells) if c.get("id") == "ex-rmsnorm")
    nb.cells[index].source = source
    if extra:
        nb.cells.insert(index, new_code_cell(extra, id="extra"))
    return nb


def test_the_worker_rebuilds_only_course_and_torch_modules():
    with pytest.raises(protocol.ProtocolError, match=r"not a module of torch\.nn or the course"):
        protocol.decode(
            {"$module": "os:system", "init": {"$dict": {}}}, {}, dataclasses_from_tfcourse=True
        )
    linear = torch.nn.Linear(3, 2)
    from tfcourse.grade.sealed.proxy import _module_by_value

    encoder = protocol.Encoder()
    node = _module_by_value(linear, encoder)
    rebuilt = protocol.decode(node, encoder.tensors, dataclasses_from_tfcourse=True)
    assert torch.equal(rebuilt.weight, linear.weight) and torch.equal(rebuilt.bias, linear.bias)


def test_a_module_on_the_meta_device_crosses_as_its_arguments_only():
    """Notebook 07's counting checks hand the learner's function GPT-2 small on meta: no
    tensor crosses, and the worker rebuilds it on meta with the same shapes."""
    from tfcourse.grade.sealed.channel import SealedUnsupported
    from tfcourse.grade.sealed.proxy import _module_by_value

    with torch.device("meta"):
        gpt2 = tc.GPT(tc.GPTConfig.preset("gpt2-small"))
    encoder = protocol.Encoder()
    node = _module_by_value(gpt2, encoder)
    assert node["meta"] is True and encoder.tensors == {}
    rebuilt = protocol.decode(node, encoder.tensors, dataclasses_from_tfcourse=True)
    assert all(p.is_meta for p in rebuilt.parameters())
    assert {n: p.shape for n, p in rebuilt.named_parameters()} == {
        n: p.shape for n, p in gpt2.named_parameters()
    }
    assert rebuilt.num_params() == 124_439_808
    partly = torch.nn.Linear(3, 2)
    partly.bias = torch.nn.Parameter(torch.empty(2, device="meta"))
    with pytest.raises(SealedUnsupported, match="partly on the meta device"):
        _module_by_value(partly, protocol.Encoder())


def test_an_optimizer_crosses_by_value_over_the_module_sent_before_it():
    """``train_loop(model, optimizer, ...)``: the worker rebuilds the optimizer's class, its
    groups (by parameter name) and their settings over its copy of the model."""
    from tfcourse.grade.sealed.proxy import _send_handle
    from tfcourse.train.optim import configure_optimizer

    model = torch.nn.Linear(3, 2)
    sent: list = []
    encoder = protocol.Encoder()
    encoder.handle = lambda value: _send_handle(value, encoder, sent)
    optimizer = configure_optimizer(model, lr=0.5, weight_decay=0.2, betas=(0.8, 0.9))
    tree = encoder((model, optimizer))
    rebuilt: list = []
    copy, twin = protocol.decode(
        tree, encoder.tensors, dataclasses_from_tfcourse=True, by_value=rebuilt
    )
    assert type(twin) is torch.optim.AdamW and rebuilt == [copy]
    names = {id(p): n for n, p in copy.named_parameters()}
    assert [[names[id(p)] for p in g["params"]] for g in twin.param_groups] == [
        ["weight"],
        ["bias"],
    ]
    assert [(g["lr"], g["betas"], g["weight_decay"]) for g in twin.param_groups] == [
        (0.5, (0.8, 0.9), 0.2),
        (0.5, (0.8, 0.9), 0.0),
    ]


@pytest.mark.parametrize(
    "node, message",
    [
        ({"$optimizer": "LBFGS", "module": 0, "groups": {"$list": []}}, "malformed optimizer"),
        ({"$optimizer": "SGD", "module": 1, "groups": {"$list": []}}, "malformed optimizer"),
        (
            {
                "$optimizer": "SGD",
                "module": 0,
                "groups": {
                    "$list": [
                        {
                            "$dict": {
                                "params": {"$list": ["weight", "os.system"]},
                                "settings": {"$dict": {}},
                            }
                        }
                    ]
                },
            },
            "malformed optimizer",
        ),
        (
            {
                "$optimizer": "SGD",
                "module": 0,
                "groups": {
                    "$list": [
                        {
                            "$dict": {
                                "params": {"$list": ["weight"]},
                                "settings": {"$dict": {"lr": {"$dict": {"x": 1}}}},
                            }
                        }
                    ]
                },
            },
            "malformed optimizer",
        ),
    ],
)
def test_a_hostile_optimizer_node_is_refused(node, message):
    module = torch.nn.Linear(3, 2)
    with pytest.raises(protocol.ProtocolError, match=message):
        protocol.decode(node, {}, dataclasses_from_tfcourse=True, by_value=[module])
    with pytest.raises(protocol.ProtocolError, match="unknown value"):
        protocol.decode(node, {})  # the grader's side rebuilds nothing


def test_an_optimizer_with_state_or_foreign_parameters_is_not_sent():
    from tfcourse.grade.sealed.proxy import SealedUnsupported, _send_handle

    model, other = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    encoder = protocol.Encoder()
    with pytest.raises(SealedUnsupported, match="not those of a module"):
        _send_handle(torch.optim.SGD(other.parameters(), lr=1.0), encoder, [model])
    used = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    used.step()
    with pytest.raises(SealedUnsupported, match="without state"):
        _send_handle(used, encoder, [model])


def test_an_optimizer_the_learner_returns_comes_back_over_the_checks_own_module():
    """``configure_optimizer(model, ...)``: the worker names each parameter of the optimizer it
    got back in the copy of the check's model, and the grader rebuilds the optimizer over the
    model itself, so a check compares parameters by identity. A parameter the copy does not
    hold (a detached copy) comes back as a tensor of its own; frozen parameters stay frozen."""
    from tfcourse.grade.sealed.proxy import _send_handle

    model = torch.nn.Linear(3, 2)
    model.bias.requires_grad_(False)
    sent: list = []
    encoder = protocol.Encoder()
    encoder.handle = lambda value: _send_handle(value, encoder, sent)
    tree = encoder((model,))
    copies: list = []
    (copy,) = protocol.decode(
        tree, encoder.tensors, dataclasses_from_tfcourse=True, by_value=copies
    )
    assert not copy.bias.requires_grad and copy.weight.requires_grad  # frozen crosses

    # In the worker: the learner's optimizer over the copy, with a stray tensor of its own.
    stray = copy.weight.detach()
    with pytest.warns(UserWarning, match="duplicate parameters"):
        answer = torch.optim.Adam(
            [{"params": [copy.weight, copy.weight], "weight_decay": 0.3}, {"params": [stray]}],
            lr=0.25,
            betas=(0.8, 0.9),
        )
    back = protocol.Encoder()
    node = protocol.optimizer_node(answer, copies, back)
    header, tensors = _round_trip({"v": node}, back.tensors)
    rebuilt = protocol.decode(header["v"], tensors, optimizers_over=[model])
    assert type(rebuilt) is torch.optim.Adam
    first, second = rebuilt.param_groups
    assert [p is model.weight for p in first["params"]] == [True, True]  # the duplicate kept
    assert second["params"][0] is not model.weight and second["params"][0].shape == (2, 3)
    assert (first["weight_decay"], first["lr"], first["betas"]) == (0.3, 0.25, (0.8, 0.9))
    # Without the grader's modules to rebuild over, an optimizer node is refused.
    with pytest.raises(protocol.ProtocolError, match="unknown value node"):
        protocol.decode(header["v"], tensors)
    # Only copies: they come back as tensors, over the first module; no module: no node.
    only_copies = protocol.optimizer_node(torch.optim.SGD([stray], lr=1.0), copies, back)
    assert only_copies is not None and only_copies["module"] == 0
    assert protocol.optimizer_node(torch.optim.SGD([stray], lr=1.0), [], back) is None


@pytest.mark.slow
@pytest.mark.sandbox
def test_solved_and_unsolved_exercises(solution):
    solved = solve(make_learner(solution, "99_fixture"), solution)
    for exercise, line in (
        ("Causal mask", "causal_mask: 4/4 checks passed"),
        ("RMSNorm", "RMSNorm: 6/6 checks passed"),
    ):
        verdict = _sealed(solution, solved, exercise)
        assert (verdict.status, verdict.output) == ("passed", line)
    verdict = _sealed(solution, make_learner(solution, "99_fixture"), "RMSNorm")
    assert verdict.status == "failed" and "NotImplementedError" in verdict.output


def _dead_workers(monkeypatch, how_many: int) -> list[int]:
    """Make the next ``how_many`` workers taken from the pool already gone (their end of the
    channel closed before they read a byte); the pids of the workers taken."""
    real_start, taken = pool.start, []

    def start(env, hide):
        worker = real_start(env, hide)
        taken.append(worker.process.pid)
        if len(taken) > how_many:
            return worker
        read, write = os.pipe()
        os.close(read)
        worker.stdin, worker.stdout = os.fdopen(write, "wb"), open(os.devnull, "rb")  # noqa: SIM115
        return worker

    monkeypatch.setattr(pool, "start", start)
    return taken


@pytest.mark.slow
@pytest.mark.sandbox
def test_a_worker_gone_before_its_first_message_is_replaced_by_a_fresh_one(solution, monkeypatch):
    solved = solve(make_learner(solution, "99_fixture"), solution)
    assert _sealed(solution, solved, "RMSNorm").status == "passed"  # leaves spare workers
    taken = _dead_workers(monkeypatch, 1)
    verdict = _sealed(solution, solved, "RMSNorm")
    assert (verdict.status, verdict.output) == ("passed", "RMSNorm: 6/6 checks passed")
    assert len(taken) == 2 and taken[0] != taken[1], taken


@pytest.mark.slow
@pytest.mark.sandbox
def test_a_worker_that_never_starts_fails_the_exercise_and_says_so(solution, monkeypatch):
    _dead_workers(monkeypatch, 2)
    verdict = _sealed(solution, solve(make_learner(solution, "99_fixture"), solution), "RMSNorm")
    assert verdict.status == "failed" and "ended before it started" in verdict.output, verdict


@pytest.mark.slow
@pytest.mark.sandbox
def test_the_reference_is_out_of_reach_even_by_a_route_no_scan_sees(solution):
    nb = _rmsnorm_replaced(solution, "RMSNorm = getattr(tc, 'RMS' + 'Norm')")
    verdict = _sealed(solution, nb, "RMSNorm")
    assert verdict.status == "failed" and "sealed" in verdict.output, verdict
    nb = _rmsnorm_replaced(
        solution, "import importlib\nRMSNorm = importlib.import_module('tfcourse.nn.norms').RMSNorm"
    )
    assert _sealed(solution, nb, "RMSNorm").status == "failed"


@pytest.mark.slow
@pytest.mark.sandbox
def test_a_hidden_builtin_is_seen_running(solution):
    source = (
        "class RMSNorm(torch.nn.Module):\n    def __init__(self, d, eps=1e-6):\n"
        "        super().__init__()\n        self.eps = eps\n"
        "        self.weight = torch.nn.Parameter(torch.ones(d))\n"
        "    def forward(self, x):\n"
        "        f = getattr(torch.nn.functional, 'rms' + '_norm')\n"
        "        return f(x, x.shape[-1:], self.weight, self.eps)"
    )
    verdict = _sealed(solution, _rmsnorm_replaced(solution, source), "RMSNorm")
    assert verdict.status == "shortcut" and "rms_norm" in verdict.output


@pytest.mark.slow
def test_patching_the_checks_in_the_learners_process_changes_nothing(solution):
    """The check runs in the grader: a replaced check function in the worker is never called."""
    extra = (
        "import tfcourse.checks as C\n"
        "C.check_rmsnorm = lambda cls: print('RMSNorm: 6/6 checks passed')\n"
        "check_rmsnorm = C.check_rmsnorm"
    )
    nb = _rmsnorm_replaced(solution, "class RMSNorm(torch.nn.Module):\n    pass", extra)
    verdict = _sealed(solution, nb, "RMSNorm")
    assert verdict.status == "failed", verdict


RMSNORM_THAT_PRINTS = """class RMSNorm(torch.nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        print("RMSNorm: 6/6 checks passed")
        return {body}
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "body, status",
    [
        ("x", "failed"),  # wrong: the print must not pass it
        ("self.weight * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)", "passed"),
    ],
)
@pytest.mark.sandbox
def test_what_the_learners_code_prints_never_reaches_the_verdict(solution, body, status):
    """The learner's prints go to the worker's own log, never into what the grader compares
    (the checks' own output): a wrong RMSNorm that prints the pass line fails, and a right one
    that prints it passes with exactly the check's one line (a leak would be a mismatch)."""
    source = RMSNORM_THAT_PRINTS.format(body=body)
    verdict = _sealed(solution, _rmsnorm_replaced(solution, source), "RMSNorm")
    assert verdict.status == status, verdict
    if status == "passed":
        assert verdict.output == "RMSNorm: 6/6 checks passed"
    else:
        assert "checks passed" not in verdict.output, verdict.output


@pytest.mark.slow
@pytest.mark.sandbox
def test_a_check_that_breaks_on_its_own_is_reported_as_the_courses_bug(solution, monkeypatch):
    from tfcourse import checks

    def broken_check(cls):
        return {}["a key the check forgot"]  # a bug in the check, not in RMSNorm

    monkeypatch.setattr(checks, "check_rmsnorm", broken_check)
    solved = solve(make_learner(solution, "99_fixture"), solution)
    verdict = _sealed(solution, solved, "RMSNorm")
    assert (verdict.status, verdict.reason) == ("failed", "check-bug")
    assert "KeyError" in verdict.output and "a bug in tfcourse" in verdict.output


@pytest.mark.slow
@pytest.mark.parametrize(
    "source",
    [
        "pass",  # RMSNorm never defined: evaluating the check's argument raises NameError
        "class RMSNorm(torch.nn.Module):\n    def __init__(self, *a, **k):\n        1 / 0\n",
    ],
)
@pytest.mark.sandbox
def test_the_learners_own_errors_stay_the_learners(solution, source):
    verdict = _sealed(solution, _rmsnorm_replaced(solution, source), "RMSNorm")
    assert (verdict.status, verdict.reason) == ("failed", "error")


def test_errors_from_the_worker_are_told_from_the_checks_own():
    from_worker = RuntimeError("the learner's")
    setattr(from_worker, channel.FROM_WORKER, True)
    try:
        try:
            raise from_worker
        except RuntimeError as error:
            raise ValueError("a check re-raised it") from error
    except ValueError as chained:
        assert channel.from_worker(chained)
    assert channel.from_worker(channel.TimedOut("no answer"))
    assert channel.from_worker(protocol.ProtocolError("bad frame"))
    assert not channel.from_worker(KeyError("the check's own"))
    assert not channel.from_worker(None)


@pytest.mark.slow
@pytest.mark.sandbox
def test_a_hanging_exercise_times_out_and_the_grade_says_so(solution):
    source = (
        "class RMSNorm(torch.nn.Module):\n    def __init__(self, *a, **k):\n"
        "        super().__init__()\n        while True:\n            pass\n"
    )
    verdict = _sealed(solution, _rmsnorm_replaced(solution, source), "RMSNorm", timeout=3)
    assert (verdict.status, verdict.reason) == ("failed", "timeout")


@pytest.mark.slow
@pytest.mark.sandbox
def test_grade_is_sealed_and_reports_its_isolation(solution, tmp_path):
    result = grade(
        solve(make_learner(solution, "99_fixture"), solution),
        solution,
        Setup(env=grading_env(1), timeout=60),
    )
    assert [(e.name, e.passed, e.sealed) for e in result.exercises] == [
        ("Causal mask", True, True),
        ("RMSNorm", True, True),
    ]
    assert any("bubblewrap" in measure for measure in result.isolation), result.isolation


# A learner's cell that rewrites the worker's replies on their way out: the worker runs in
# the learner's process, so the protocol module is theirs to patch. The grader must notice.
LIE = """
import sys
_protocol = sys.modules["protocol"]
_write = _protocol.write_message
def _lie(stream, header, tensors=None):
    CHANGE
    return _write(stream, header, tensors)
_protocol.write_message = _lie
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "change",
    [
        'header["leaves"] = -1 if "leaves" in header else None',  # what needs a gradient
        'header.update(grads=["g0"] * 7) if "grads" in header else None',  # gradient count
        # a module that declares a huge parameter and sends no tensor for it
        'header.get("params") and header["params"][0].update(shape=[2**20, 2**20], value="nope")',
        'header.update(cells="all fine") if "cells" in header else None',  # the cells' report
    ],
)
@pytest.mark.sandbox
def test_a_worker_that_lies_fails_the_exercise_with_protocol_broken(solution, change):
    nb = solve(make_learner(solution, "99_fixture"), solution)
    nb = _rmsnorm_replaced(
        solution,
        nb.cells[next(i for i, c in enumerate(nb.cells) if c.get("id") == "ex-rmsnorm")].source,
        LIE.replace("CHANGE", change),
    )
    verdict = _sealed(solution, nb, "RMSNorm")
    assert (verdict.status, verdict.reason) == ("failed", "protocol"), verdict


def test_huge_declared_shapes_allocate_nothing():
    """A module description is refused before anything is allocated from it."""

    class FakeWorker:
        def request(self, header, tensors=None):
            return {
                "params": [
                    {
                        "name": "w",
                        "shape": [2**30, 2**30],
                        "tie": 1,
                        "requires_grad": True,
                        "value": "t0",
                    }
                ],
                "buffers": {},
                "training": True,
            }, {}

    with pytest.raises(channel.ProtocolBroken, match="does not add up"):
        proxy.RemoteModule(FakeWorker(), {"$handle": 1, "kind": "module"})


@pytest.mark.parametrize(
    "buffers, transient",
    [({}, ["mask"]), ({}, "mask"), ([], []), ({}, [0])],
    ids=["an unknown name", "not a list", "buffers not a dict", "not a name"],
)
def test_a_description_whose_buffers_do_not_add_up_is_refused(buffers, transient):
    class FakeWorker:
        def request(self, header, tensors=None):
            return {"params": [], "buffers": buffers, "transient": transient, "training": True}, {}

    with pytest.raises(channel.ProtocolBroken, match="does not add up"):
        proxy.RemoteModule(FakeWorker(), {"$handle": 1, "kind": "module"})


# The gradient probe's check hands the learner's function its own model, with stale
# gradients, and then looks for hooks left behind: the worker gets a copy with those
# gradients, and what the learner's code left on the copy is mirrored back.
PROBE = ROOT / "solutions" / "06_stacks_and_gradients.ipynb"
_PROBE_SOLUTION = """\
    model.zero_grad(set_to_none=True)
    captured = {}

    def keep(module, args):
        args[0].retain_grad()
        captured["x"] = args[0]

    handle = model.blocks[0].register_forward_pre_hook(keep)
    logits = model(idx)
    HANDLE_REMOVE
    F.cross_entropy(logits.flatten(0, 1), targets.flatten()).backward()
    norms = [torch.cat([p.grad.flatten() for p in b.parameters()]).norm().item()
             for b in model.blocks]
    return captured["x"].grad.norm().item(), norms
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "body, expected",
    [
        (_PROBE_SOLUTION.replace("HANDLE_REMOVE", "handle.remove()"), "passed"),
        (
            _PROBE_SOLUTION.replace("HANDLE_REMOVE", "handle.remove()").replace(
                "model.zero_grad(set_to_none=True)", "pass"
            ),
            "old gradients were not cleared",
        ),
        (_PROBE_SOLUTION.replace("HANDLE_REMOVE", "pass"), "a hook is still registered"),
        (
            "    r = tc.probes.gradient_probe(model, idx, targets, 'lm')\n"
            "    return r['embedding'], r['blocks']\n",
            "sealed",
        ),
    ],
)
@pytest.mark.sandbox
def test_the_gradient_probe_is_judged_sealed_with_its_side_effects(body, expected):
    solution = notebook_format.read_notebook(PROBE)
    nb = solve(make_learner(solution, PROBE.stem), solution)
    cell = next(c for c in nb.cells if notebook_format.is_exercise(c))
    cell.source = "def grad_norm_probe(model, idx, targets):\n" + body
    verdict = _sealed(solution, nb, "grad_norm_probe")
    if expected == "passed":
        assert verdict.status == "passed", verdict
    else:
        assert verdict.status == "failed" and expected in verdict.output, verdict


class _Unread:
    """A worker's process that never reads its channel nor answers (a stopped process)."""

    def __init__(self):
        into, self._out = os.pipe(), os.pipe()
        self.stdin, self._into = os.fdopen(into[1], "wb"), into[0]
        self.stdout = os.fdopen(self._out[0], "rb")
        self.killed = False

    def poll(self):
        return 0 if self.killed else None

    def kill(self):
        self.killed = True


@pytest.mark.parametrize("budget, error", [(math.inf, channel.TimedOut), (0.5, channel.OutOfTime)])
def test_a_worker_that_stops_reading_holds_the_grader_no_longer_than_its_time(budget, error):
    """A message larger than the pipe, to a worker that reads nothing: the grader gives up
    after a reply's timeout, or sooner when the notebook's budget ends first."""
    process = _Unread()
    worker = proxy.Worker(process, timeout=1.0, budget=channel.Budget.starting_now(budget))
    started = time.monotonic()
    with pytest.raises(error):
        worker.send({"op": "call"}, {"x": torch.zeros(2**20)})
    assert time.monotonic() - started < 5 and process.killed


def test_a_request_to_a_worker_already_gone_fails_at_once():
    """The worker's end is reported to the request that was waiting; a later request on the
    same channel (the next exercise's check) fails at once instead of waiting out its
    timeout on a channel that has no reader left."""
    process = _Unread()
    os.close(process._out[1])  # the worker's end of its replies: gone
    worker = proxy.Worker(process, timeout=60.0)
    with pytest.raises(channel.WorkerFailed, match="EOFError"):
        worker.receive()
    started = time.monotonic()
    with pytest.raises(channel.WorkerFailed, match="channel is closed"):
        worker.receive()
    assert time.monotonic() - started < 5


@pytest.mark.slow
@pytest.mark.sandbox
def test_a_cell_that_sleeps_deaf_to_alarms_costs_its_notebook_only_its_budget(solution):
    """The red team's stall: a cell that ignores the per-cell alarm and sleeps (so no CPU
    limit fires either), padded with hundreds of cells. The notebook's budget
    (``Setup.notebook_seconds``, whatever its number of cells) ends it, and says so."""
    nb = solve(make_learner(solution, "99_fixture"), solution)
    index = next(i for i, c in enumerate(nb.cells) if c.get("id") == "ex-rmsnorm")
    deaf = "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\ntime.sleep(3600)"
    nb.cells[index:index] = [
        new_code_cell(deaf, id="deaf"),
        *(new_code_cell(f"pad = {n}", id=f"pad-{n}") for n in range(300)),
    ]
    setup = Setup(env=grading_env(1), timeout=2)
    started = time.monotonic()
    verdict = grade_exercise(restamp(nb, solution)[0], solution, "RMSNorm", setup)
    assert (verdict.status, verdict.reason) == ("failed", "timeout"), verdict
    assert "time ran out" in verdict.output, verdict.output
    assert time.monotonic() - started < setup.notebook_seconds + 30


DENIED_CALLS = """
import ctypes, errno, pyseccomp, syscalls
libc = ctypes.CDLL(None, use_errno=True)
made = [
    name
    for name in syscalls.DENIED
    if libc.syscall(pyseccomp.resolve_syscall(pyseccomp.system_arch(), name), 0, 0, 0, 0, 0) != -1
    or ctypes.get_errno() != errno.EPERM
]
assert not made, made
"""


@pytest.mark.slow
@pytest.mark.sandbox
@pytest.mark.parametrize("kind", ["bubblewrap", "users"])
def test_what_would_outlive_a_learner_cannot_be_made_in_either_set_up(solution, kind, request):
    """Keys, System V IPC, message queues, another process's memory: refused in the
    learner's cells (``syscalls.DENIED``), as a fresh user (as root) as under bubblewrap."""
    if kind == "users":
        request.getfixturevalue("separate_users")
    nb = solve(make_learner(solution, "99_fixture"), solution)
    index = next(i for i, c in enumerate(nb.cells) if c.get("id") == "ex-rmsnorm")
    nb.cells.insert(index, new_code_cell(DENIED_CALLS, id="denied"))
    setup = Setup(env=grading_env(1), timeout=60, sandbox=kind)
    verdict = grade_exercise(restamp(nb, solution)[0], solution, "RMSNorm", setup)
    assert verdict.status == "passed", verdict
    assert not any("'denied'" in note for note in verdict.notes), verdict.notes


@pytest.mark.slow
@pytest.mark.sandbox
def test_the_workers_limits_hold_and_cannot_be_raised(solution):
    """The worker sets its limits before any learner code runs; the learner's code can
    neither raise them nor write past them."""
    nb = solve(make_learner(solution, "99_fixture"), solution)
    index = next(i for i, c in enumerate(nb.cells) if c.get("id") == "ex-rmsnorm")
    for number, code in enumerate(
        (
            "import resource\nresource.setrlimit(resource.RLIMIT_CPU, (10**6, 10**6))",
            "import resource\nresource.setrlimit(resource.RLIMIT_DATA, (2**45, 2**45))",
            "with open('big.bin', 'wb') as f:\n    f.write(b'x' * (65 * 2**20))",
        )
    ):
        nb.cells.insert(index, new_code_cell(code, id=f"limit-{number}"))
    verdict = _sealed(solution, nb, "RMSNorm")
    assert verdict.status == "passed", verdict  # the learner's own code still runs
    raised = "\n".join(verdict.notes)
    assert raised.count("raised ValueError") == 2, raised  # not allowed to raise a limit
    assert "File too large" in raised or "Errno 27" in raised, raised


@pytest.mark.slow
@pytest.mark.sandbox
def test_a_neighbours_seal_never_costs_a_point(solution, grading_setup):
    """RMSNorm that (oddly, but legitimately) uses the course's causal_mask: sealed away in
    the worker shared by both exercises, so RMSNorm is judged again alone and passes. The
    unsolved causal_mask is not retried: its own check failed without meeting a seal."""
    nb = solve(make_learner(solution, "99_fixture"), solution)
    nb = _rmsnorm_replaced(
        solution,
        next(c.source for c in nb.cells if c.get("id") == "ex-rmsnorm").replace(
            "super().__init__()", "super().__init__()\n        tc.causal_mask(2)"
        ),
    )
    mask = next(c for c in nb.cells if c.get("id") == "ex-causal-mask")
    mask.source = "def causal_mask(T):\n    raise NotImplementedError('mine')"
    stamped, _ = restamp(nb, solution)
    sessions = []
    real = session._session
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(session, "_session", lambda *a: sessions.append(a[3]) or real(*a))
        verdicts = session.grade_exercises(
            stamped, solution, ["Causal mask", "RMSNorm"], grading_setup
        )
    assert verdicts["RMSNorm"].status == "passed", verdicts["RMSNorm"]
    assert verdicts["Causal mask"].status == "failed"
    assert sessions == [["Causal mask", "RMSNorm"], ["RMSNorm"]]


# Shortcuts: functions that do an exercise's whole job, in whatever namespace (the red
# team's spellings among them). The table is tfcourse/grade/references.py; the worker
# watches what runs, per exercise, so the shared worker and a worker of the exercise's own
# agree.
# The attention exercise handed to a kernel of torch's ({}), its boolean mask made additive.
_ATTENTION_BY = (
    "def scaled_dot_product_attention(q, k, v, mask=None):\n"
    "    if mask is not None:\n"
    "        mask = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill(\n"
    "            ~mask, float('-inf'))\n"
    "    return {}"
)
_LAYERNORM = (
    "class LayerNorm(nn.Module):\n    def __init__(self, d_model, eps=1e-5):\n"
    "        super().__init__()\n        self.eps = eps\n"
    "        self.weight = nn.Parameter(torch.ones(d_model))\n"
    "        self.bias = nn.Parameter(torch.zeros(d_model))\n"
    "    def forward(self, x):\n        return SHORTCUT\n"
)
_RMSNORM = (
    "class RMSNorm(nn.Module):\n    def __init__(self, d_model, eps=1e-6):\n"
    "        super().__init__()\n        self.eps = eps\n"
    "        self.weight = nn.Parameter(torch.ones(d_model))\n"
    "    def forward(self, x):\n        return SHORTCUT\n"
)
SHORTCUTS = [
    (
        "10_modern_block",
        "ex-apply-rotary",
        "apply_rotary",
        "from tfcourse.nn.positional import rotate_half\n\n"
        "def apply_rotary(x, cos, sin):\n    return x * cos + rotate_half(x) * sin",
    ),
    (
        "10_modern_block",
        "ex-rotary-tables",
        "rotary_cos_sin",
        "def rotary_cos_sin(T, head_dim, base=10000.0):\n"
        "    return tc.lab.rope.rounded_rotary_tables(torch.arange(T), head_dim, base)",
    ),
    (
        "10_modern_block",
        "ex-rotary-tables",
        "rotary_cos_sin",
        "def rotary_cos_sin(T, head_dim, base=10000.0):\n"
        "    pe = tc.nn.positional.sinusoidal_encoding(T, head_dim, base, dtype=torch.float64)\n"
        "    cos, sin = pe[:, 1::2], pe[:, 0::2]\n"
        "    return torch.cat([cos, cos], -1).float(), torch.cat([sin, sin], -1).float()",
    ),
    (
        "03_norms",
        "ex-layernorm-backward",
        "layernorm_backward",
        "def layernorm_backward(x, weight, grad_out, eps=1e-5):\n"
        "    with torch.enable_grad():\n"
        "        x, weight = x.clone().requires_grad_(), weight.clone().requires_grad_()\n"
        "        bias = torch.zeros_like(weight, requires_grad=True)\n"
        "        y = torch.nn.functional.layer_norm(x, x.shape[-1:], weight, bias, eps)\n"
        "        return torch.autograd.grad(y, (x, weight, bias), grad_out)",
    ),
    (
        "02_multi_head_attention",
        "ex-first-head",
        "first_head_weights",
        "def first_head_weights(mha, x):\n    return mha(x, return_weights=True)[1][:, 0]",
    ),
    (
        "01_attention",
        "ex-attention",
        "scaled_dot_product_attention",
        _ATTENTION_BY.format(
            "torch.ops.aten._scaled_dot_product_attention_math(q, k, v, attn_mask=mask)"
        ),
    ),
    (
        "03_norms",
        "ex-layernorm",
        "LayerNorm",
        _LAYERNORM.replace(
            "SHORTCUT",
            "torch.ops.aten.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)",
        ),
    ),
    (
        "03_norms",
        "ex-layernorm",
        "LayerNorm",
        _LAYERNORM.replace(
            "SHORTCUT",
            "torch.nn.functional.instance_norm(x, eps=self.eps) * self.weight + self.bias",
        ),
    ),
    (
        "03_norms",
        "ex-layernorm",
        "LayerNorm",
        "import torch._refs\n"
        + _LAYERNORM.replace(
            "SHORTCUT",
            "torch._refs.native_layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)[0]",
        ),
    ),
    (
        "03_norms",
        "ex-rmsnorm",
        "RMSNorm",
        _RMSNORM.replace(
            "SHORTCUT",
            "torch._C._VariableFunctions.rms_norm(x, x.shape[-1:], self.weight, self.eps)",
        ),
    ),
    (
        "03_norms",
        "ex-rmsnorm",
        "RMSNorm",
        "import torch._decomp.decompositions as decompositions\n"
        + _RMSNORM.replace(
            "SHORTCUT",
            "decompositions._fused_rms_norm(x, list(x.shape[-1:]), self.weight, self.eps)[0]",
        ),
    ),
    (
        "03_norms",
        "ex-rmsnorm",
        "RMSNorm",
        _RMSNORM.replace(
            "SHORTCUT",
            "nn.functional.layer_norm(torch.cat([x, -x], -1), (2 * x.shape[-1],), "
            "eps=self.eps)[..., : x.shape[-1]] * self.weight",
        ),
    ),
    (
        "12_capstone",
        "ex-bpe-encode",
        "bpe_encode",
        "def bpe_encode(text, merges):\n    return ByteBPE(merges).encode(text)",
    ),
    (
        "12_capstone",
        "ex-bpe-decode",
        "bpe_decode",
        "def bpe_decode(ids, merges):\n    return ByteBPE(merges).decode(ids)",
    ),
]


# Course code that does an exercise, reached where that exercise is judged alone (the retry
# worker, where nothing else of its notebook is sealed).
COURSE_SHORTCUTS = [
    (
        "10_modern_block",
        "ex-rotary-tables",
        "rotary_cos_sin",
        """\
from tfcourse.nn.positional import rotary_inv_freq

def rotary_cos_sin(T, head_dim, base=10000.0):
    positions = torch.arange(T, dtype=torch.float64)
    angles = torch.outer(positions, rotary_inv_freq(head_dim, base))
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()
""",
    ),
    (
        "10_modern_block",
        "ex-rotary-attention",
        "RotaryAttention",
        """\
import tfcourse as tc

class RotaryAttention(tc.MultiHeadAttention):
    def __init__(self, d_model, n_heads, *, max_seq_len, n_kv_heads=None, rope_base=10000.0,
                 dropout=0.0, bias=False):
        super().__init__(d_model, n_heads, max_seq_len=max_seq_len, dropout=dropout, bias=bias,
                         rope_base=rope_base, n_kv_heads=n_kv_heads)
""",
    ),
    (
        "03_norms",
        "ex-rmsnorm",
        "RMSNorm",
        """\
import tfcourse as tc

class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
    def forward(self, x):
        d = x.shape[-1]
        norm = tc.LayerNorm(2 * d, eps=self.eps).to(x.device, x.dtype)
        return norm(torch.cat([x, -x], -1))[..., :d] * self.weight
""",
    ),
    (
        "08_training",
        "ex-get-batch",
        "get_batch",
        """\
from types import SimpleNamespace
from tfcourse.train.data import TextDataset

def get_batch(data, batch_size, seq_len, *, generator=None):
    dataset = SimpleNamespace(train=data)
    return TextDataset.batch(dataset, batch_size, seq_len, generator=generator)
""",
    ),
    (
        "08_training",
        "ex-estimate-loss",
        "estimate_loss",
        """\
from tfcourse.train.loop import evaluate

class _Fixed:
    def __init__(self, batches):
        self.batches = list(batches)
    def batch(self, batch_size, seq_len, *, generator=None, split="val"):
        b = self.batches.pop(0)
        return b[:, :-1], b[:, 1:]

def estimate_loss(model, batches):
    return evaluate(model, _Fixed(batches), batch_size=batches.shape[1],
                    seq_len=batches.shape[2] - 1, n_batches=len(batches))
""",
    ),
    (
        "08_training",
        "ex-generate",
        "generate",
        """\
import tfcourse as tc

def generate(model, idx, max_new_tokens, *, temperature=1.0, top_k=None, top_p=None,
             generator=None):
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for _ in range(max_new_tokens):
            logits = model(idx[:, -model.config.max_seq_len:])[:, -1, :]
            if top_p is None:
                pick = tc.GPT._next_token(logits, temperature, top_k, generator)
            else:
                logits = logits / temperature
                if top_k is not None:
                    kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                probs = logits.softmax(-1)
                ordered = probs.sort(dim=-1, descending=True).values
                kept = (ordered.cumsum(-1) - ordered < top_p).sum(-1, keepdim=True)
                smallest = ordered.gather(-1, kept - 1)
                logits = logits.masked_fill(probs < smallest, float("-inf"))
                pick = torch.multinomial(logits.softmax(-1), 1, generator=generator)
            idx = torch.cat([idx, pick], dim=1)
    model.train(was_training)
    return idx
""",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("notebook, cell_id, exercise, source", SHORTCUTS)
@pytest.mark.sandbox
def test_shortcuts_earn_nothing_in_the_shared_and_the_retry_worker(
    notebook, cell_id, exercise, source, tmp_path, monkeypatch
):
    solution = notebook_format.read_notebook(ROOT / "solutions" / f"{notebook}.ipynb")
    nb = solve(make_learner(solution, notebook), solution)
    next(c for c in nb.cells if c.get("id") == cell_id).source = source
    stamped, _ = restamp(nb, solution)
    # The shared worker, with the neighbour whose cells come before (or just after) its own.
    exercises = records.exercise_names(solution)
    at = exercises.index(exercise)
    shared = exercises[max(at - 1, 0) : max(at - 1, 0) + 2]
    setup = Setup(env=grading_env(1), timeout=60)
    together = session.grade_exercises(stamped, solution, shared, setup)[exercise]
    alone = grade_exercise(stamped, solution, exercise, setup)
    for verdict in (together, alone):
        assert verdict.status == "shortcut", verdict
    assert "which does the whole exercise" in alone.output
    # The attack is real: where nothing watches, it passes the check.
    assert _passes_where_nothing_watches(solution, exercise, source, tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.sandbox
def test_the_course_pattern_is_sealed_where_pre_split_is_graded(monkeypatch):
    """pre_split's reference is a compiled pattern, not a function a shortcut table can name:
    its exercise cell lists PATTERN among its references, and the worker's copy holds a stub."""
    solution = notebook_format.read_notebook(ROOT / "solutions" / "12_capstone.ipynb")
    nb = solve(make_learner(solution, "12_capstone"), solution)
    next(c for c in nb.cells if c.get("id") == "ex-pre-split").source = (
        "from tfcourse.train.bpe import PATTERN\n\n"
        "def pre_split(text):\n    return PATTERN.findall(text)"
    )
    stamped, _ = restamp(nb, solution)
    setup = Setup(env=grading_env(1), timeout=60)
    assert grade_exercise(stamped, solution, "pre_split", setup).status != "passed"
    # The attack is real: with nothing sealed, the course's pattern earns the points.
    monkeypatch.setattr(references, "reference_names", lambda solution, exercise: frozenset())
    assert grade_exercise(stamped, solution, "pre_split", setup).status == "passed"


# Honest work: other correct ways to write an exercise, which earn its points sealed as they
# pass its check in the notebook.
_CONFIGURE = (
    "def configure_optimizer(model, *, lr, weight_decay=0.1, betas=(0.9, 0.95), eps=1e-8):\n"
    "    if not isinstance(model, torch.nn.Module):\n"
    "        raise TypeError('model must be an nn.Module')\n"
    "    if not lr > 0 or weight_decay < 0:\n"
    "        raise ValueError('need lr > 0 and weight_decay >= 0')\n"
    "BODY"
)
HONEST = [
    (
        "10_modern_block",
        "ex-repeat-kv",
        "repeat_kv",
        "def repeat_kv(kv, n_rep):\n    return torch.repeat_interleave(kv, n_rep, dim=1)",
    ),
    # Split by name, rightly for the course's models (biases and every norm's parameters).
    (
        "08_training",
        "ex-configure-optimizer",
        "configure_optimizer",
        _CONFIGURE.replace(
            "BODY",
            "    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]\n"
            "    plain = [p for n, p in named if n.endswith('.bias') or 'norm' in n]\n"
            "    decay = [p for n, p in named if not (n.endswith('.bias') or 'norm' in n)]\n"
            "    return torch.optim.AdamW([{'params': decay, 'weight_decay': weight_decay},\n"
            "                              {'params': plain, 'weight_decay': 0.0}],\n"
            "                             lr=lr, betas=betas, eps=eps)\n",
        ),
    ),
    # Three groups, AdamW's own weight_decay for the two that decay.
    (
        "08_training",
        "ex-configure-optimizer",
        "configure_optimizer",
        _CONFIGURE.replace(
            "BODY",
            "    params = [p for p in model.parameters() if p.requires_grad]\n"
            "    groups = [{'params': [p for p in params if p.ndim >= 2 and p.shape[0] > 30]},\n"
            "              {'params': [p for p in params if p.ndim >= 2 and p.shape[0] <= 30]},\n"
            "              {'params': [p for p in params if p.ndim < 2], 'weight_decay': 0.0}]\n"
            "    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps,\n"
            "                             weight_decay=weight_decay)\n",
        ),
    ),
]


# lr_at computed with numpy in single precision: a numpy scalar is a number across the proxy.
_LR_AT_NUMPY = (
    "import numpy as np\n"
    "def lr_at(step, *, max_lr, warmup_steps, total_steps, min_lr=0.0):\n"
    "    if step < warmup_steps:\n"
    "        return np.float32(max_lr * (step + 1) / (warmup_steps + 1))\n"
    "    if step >= total_steps:\n"
    "        return np.float32(min_lr)\n"
    "    progress = (step - warmup_steps) / (total_steps - warmup_steps)\n"
    "    return np.float32(min_lr + 0.5 * (max_lr - min_lr) * (1 + np.cos(np.pi * progress)))\n"
)
HONEST.append(("08_training", "ex-lr-at", "lr_at", _LR_AT_NUMPY))


def _tied_mask_attention() -> tuple[str, str, str, str]:
    """The solution's attention with its mask registered under a second name too (one tensor,
    two buffers): functional_call must be given it once."""
    solution = notebook_format.read_notebook(ROOT / "solutions" / "02_multi_head_attention.ipynb")
    source = next(c for c in solution.cells if c.get("id") == "ex-mha").source
    line = '        self.register_buffer("mask", mask, persistent=False)\n'
    assert line in source
    tied = line + '        self.register_buffer("causal", mask, persistent=False)\n'
    return ("02_multi_head_attention", "ex-mha", "MultiHeadAttention", source.replace(line, tied))


HONEST.append(_tied_mask_attention())


@pytest.mark.slow
@pytest.mark.sandbox
def test_a_module_written_with_writefile_and_imported_earns_its_points():
    """As in the notebook: `%%writefile` puts the learner's code in a file of their folder,
    and the exercise cell imports it from there."""
    solution = notebook_format.read_notebook(ROOT / "solutions" / "08_training.ipynb")
    nb = solve(make_learner(solution, "08_training"), solution)
    at = next(i for i, c in enumerate(nb.cells) if c.get("id") == "ex-lr-at")
    body = _LR_AT_NUMPY.replace("def lr_at", "def my_lr_at")
    nb.cells.insert(at, new_code_cell("%%writefile schedule.py\n" + body, id="my-file"))
    nb.cells[at + 1].source = "from schedule import my_lr_at as lr_at"
    stamped, _ = restamp(nb, solution)
    setup = Setup(env=grading_env(1), timeout=60)
    assert grade_exercise(stamped, solution, "lr_at", setup).status == "passed"


@pytest.mark.slow
@pytest.mark.parametrize("notebook, cell_id, exercise, source", HONEST)
@pytest.mark.sandbox
def test_honest_work_earns_its_points_sealed(notebook, cell_id, exercise, source):
    solution = notebook_format.read_notebook(ROOT / "solutions" / f"{notebook}.ipynb")
    nb = solve(make_learner(solution, notebook), solution)
    next(c for c in nb.cells if c.get("id") == cell_id).source = source
    stamped, _ = restamp(nb, solution)
    setup = Setup(env=grading_env(1), timeout=60)
    assert grade_exercise(stamped, solution, exercise, setup).status == "passed"


# Wrong answers to configure_optimizer, judged sealed as in the notebook: the optimizer crosses
# back by value, so the same mistake is named (an error raised in the worker, a parameter
# twice in a group, a copy that is not the model's parameter, a frozen one, plain Adam).
SEALED_MISTAKES = [
    (
        "params = [p for p in model.parameters() if p.requires_grad]",
        "params = list(model.parameters())",
        "frozen parameters (requires_grad=False) are in the optimizer",
    ),
    (
        "params = [p for p in model.parameters() if p.requires_grad]",
        "params = [p for _, p in model.named_parameters(remove_duplicate=False) "
        "if p.requires_grad]",
        "a parameter is in the optimizer twice",
    ),
    (
        "params = [p for p in model.parameters() if p.requires_grad]",
        "params = [p.detach() for p in model.parameters() if p.requires_grad]",
        "not the model's parameters",
    ),
    (
        "return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)",
        "return torch.optim.Adam(groups, lr=lr, betas=betas, eps=eps)",
        "torch.optim.Adam instead of AdamW",
    ),
    (
        'groups = [{"params": decay, "weight_decay": weight_decay},',
        'groups = [{"params": decay + no_decay[:1], "weight_decay": weight_decay},',
        "a parameter is in the optimizer twice",
    ),
]


@pytest.mark.slow
@pytest.mark.sandbox
def test_configure_optimizers_mistakes_are_named_sealed():
    solution = notebook_format.read_notebook(ROOT / "solutions" / "08_training.ipynb")
    setup = Setup(env=grading_env(1), timeout=60)
    for old, new, cause in SEALED_MISTAKES:
        nb = solve(make_learner(solution, "08_training"), solution)
        cell = next(c for c in nb.cells if c.get("id") == "ex-configure-optimizer")
        assert old in cell.source, old
        cell.source = cell.source.replace(old, new)
        stamped, _ = restamp(nb, solution)
        verdict = grade_exercise(stamped, solution, "configure_optimizer", setup)
        assert verdict.status == "failed" and cause in verdict.output, (new, verdict)


@pytest.mark.slow
@pytest.mark.sandbox
def test_the_packages_configure_optimizer_earns_nothing():
    """Handing the job to the course's own function: it is sealed away in the worker."""
    solution = notebook_format.read_notebook(ROOT / "solutions" / "08_training.ipynb")
    nb = solve(make_learner(solution, "08_training"), solution)
    cell = next(c for c in nb.cells if c.get("id") == "ex-configure-optimizer")
    cell.source = (
        "def configure_optimizer(model, *, lr, weight_decay=0.1, betas=(0.9, 0.95), eps=1e-8):\n"
        "    return training.configure_optimizer(model, lr=lr, weight_decay=weight_decay,\n"
        "                                        betas=betas, eps=eps)"
    )
    stamped, _ = restamp(nb, solution)
    setup = Setup(env=grading_env(1), timeout=60)
    verdict = grade_exercise(stamped, solution, "configure_optimizer", setup)
    assert verdict.status != "passed", verdict


def _names_that_run() -> set[str]:
    """What the worker's watch could see, named as it names them: torch's operators and C
    functions as ``torch.<name>``, Python functions and methods of torch, tfcourse and
    transformers' LLaMA as ``<module>.<qualified name>``."""
    import inspect
    import sys

    import torch._decomp.decompositions
    import torch._refs
    import transformers.models.llama.modeling_llama  # noqa: F401

    import tfcourse.lab.rope
    import tfcourse.train.bpe
    import tfcourse.train.loop
    import tfcourse.train.sample  # noqa: F401

    names = {f"torch.{name}" for name in (*dir(torch.ops.aten), *dir(torch), *dir(torch.Tensor))}
    for module_name, module in list(sys.modules.items()):
        if module_name.split(".")[0] not in ("torch", "tfcourse", "transformers"):
            continue
        for value in list(vars(module).values()):
            found = [value, *vars(value).values()] if inspect.isclass(value) else [value]
            for item in found:
                function = inspect.unwrap(item) if callable(item) else None
                if inspect.isfunction(function):
                    module_of = function.__globals__.get("__name__")
                    names.add(f"{module_of}.{function.__code__.co_qualname}")
    return names


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_every_shortcut_pattern_matches_something_that_can_run():
    """A pattern that matches nothing is a typo or a name torch dropped: it would watch for
    nothing."""
    import fnmatch

    names = _names_that_run()
    patterns = {p for found in references.SHORTCUTS.values() for p in found}
    unmatched = sorted(p for p in patterns if not fnmatch.filter(names, p))
    assert not unmatched
    assert not fnmatch.filter(names, "torch.*no_such_norm*")  # the test can fail


def test_a_teachers_own_shortcuts_come_from_the_exercise_metadata(monkeypatch):
    solution = notebook_format.read_notebook(FIXTURE)
    monkeypatch.setattr(references, "SHORTCUTS", {})
    assert references.shortcuts(solution, "RMSNorm") == ("torch.*rms_norm*",)
    assert references.shortcuts(solution, "Causal mask") == ()


def test_a_request_the_worker_cannot_read_is_an_answer_and_the_worker_goes_on(tmp_path):
    """A check's value the worker cannot rebuild (here a bare list; in 02 and 07 it was a
    course class sealed in that worker) used to end the worker without a word. Now it is
    a reply that the grader reports as the protocol's failure, and the worker answers the
    next request."""
    setup = Setup(env=grading_env(1), timeout=60, sandbox="none")
    worker, ran = session._start_worker(
        ["x = 21"], frozenset(), {}, tmp_path, setup, channel.Budget.starting_now(300)
    )
    try:
        bad = {"op": "call", "target": {"$handle": 0}, "args": [], "kwargs": {"$dict": {}}}
        with pytest.raises(channel.ProtocolBroken, match="could not read the check's request"):
            worker.request(bad)
        reply, _ = worker.request({"op": "evaluate", "expression": "x * 2"})
        assert reply["value"] == 42 and worker.process.poll() is None
    finally:
        worker.kill()


def test_a_reply_over_the_bound_is_refused_unread_and_a_big_cell_still_travels(tmp_path):
    """A worker's reply costs the grader at most ``protocol.MAX_HEADER`` of header (hundreds
    of times the largest an honest notebook needs); the learner's cells travel the other way,
    bounded by the notebook's own limit."""
    # The bounds SECURITY.md states (what one reply can cost the grader).
    assert protocol.MAX_HEADER <= 2**20 and protocol.MAX_BLOB <= 64 * 2**20
    setup = Setup(env=grading_env(1), timeout=60, sandbox="none")
    big_cell = "x = 21\n" + "# a long comment\n" * (protocol.MAX_HEADER // 8)
    worker, ran = session._start_worker(
        [big_cell], frozenset(), {}, tmp_path, setup, channel.Budget.starting_now(300)
    )
    try:
        assert ran == [{"ok": True, "error": "", "notes": []}]
        reply, _ = worker.request({"op": "evaluate", "expression": "'a' * 1000"})
        assert reply["value"] == "a" * 1000
        too_big = f"'a' * {protocol.MAX_HEADER + 1}"
        with pytest.raises(channel.ProtocolBroken, match="header of"):
            worker.request({"op": "evaluate", "expression": too_big})
    finally:
        worker.kill()


# Ways to torch's kernels that pass none of its Python functions, so no pattern of the watch
# can name them: each is refused by the kernel it reaches (the worker's ``_Kernels``).
_BOXED = (
    "torch._C._dispatch_call_boxed(torch._C._dispatch_find_schema_or_throw('{op}', ''), {args})"
)
PAST_TORCH = [
    (
        "03_norms",
        "ex-layernorm",
        "LayerNorm",
        "def _scripted(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float):\n"
        "    return torch.nn.functional.layer_norm(x, x.shape[-1:], w, b, eps)\n"
        "_scripted = torch.jit.script(_scripted)\n"
        + _LAYERNORM.replace("SHORTCUT", "_scripted(x, self.weight, self.bias, self.eps)"),
    ),
    (
        "03_norms",
        "ex-layernorm",
        "LayerNorm",
        _LAYERNORM.replace(
            "return SHORTCUT",
            "with torch._C.DisableTorchFunction():\n"
            "            return nn.functional.layer_norm(x, x.shape[-1:], self.weight, "
            "self.bias, self.eps)",
        ),
    ),
    (
        "03_norms",
        "ex-rmsnorm",
        "RMSNorm",
        _RMSNORM.replace(
            "SHORTCUT",
            _BOXED.format(op="aten::rms_norm", args="x, list(x.shape[-1:]), self.weight, self.eps"),
        ),
    ),
    (
        "01_attention",
        "ex-attention",
        "scaled_dot_product_attention",
        _ATTENTION_BY.format(
            _BOXED.format(op="aten::_scaled_dot_product_attention_math", args="q, k, v, mask")
        ),
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("notebook, cell_id, exercise, source", PAST_TORCH)
@pytest.mark.sandbox
def test_a_kernel_reached_past_torchs_functions_earns_nothing(
    notebook, cell_id, exercise, source, tmp_path, monkeypatch
):
    solution, stamped = _with_cell(notebook, cell_id, source)
    verdict = grade_exercise(stamped, solution, exercise, Setup(env=grading_env(1), timeout=60))
    assert verdict.status == "shortcut" and "aten::" in verdict.output, verdict
    assert any(name.startswith("aten::") for name in verdict.calls), verdict.calls
    assert _passes_where_nothing_watches(solution, exercise, source, tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("notebook, cell_id, exercise, source", COURSE_SHORTCUTS)
@pytest.mark.sandbox
def test_course_code_that_does_an_exercise_earns_nothing_where_it_is_judged_alone(
    notebook, cell_id, exercise, source, tmp_path, monkeypatch
):
    """In a worker sealed for the exercise alone (the retry), nothing else of its notebook is
    sealed; the table's patterns name the course code. (The shared worker applies the same
    patterns: SHORTCUTS's cases show both.)"""
    solution, stamped = _with_cell(notebook, cell_id, source)
    verdict = grade_exercise(stamped, solution, exercise, Setup(env=grading_env(1), timeout=60))
    assert verdict.status == "shortcut" and "which does the whole exercise" in verdict.output
    assert _passes_where_nothing_watches(solution, exercise, source, tmp_path, monkeypatch)


def _with_cell(notebook: str, cell_id: str, source: str):
    """``(solution, the solved learner notebook with cell ``cell_id`` replaced, stamped)``."""
    solution = notebook_format.read_notebook(ROOT / "solutions" / f"{notebook}.ipynb")
    nb = solve(make_learner(solution, notebook), solution)
    next(c for c in nb.cells if c.get("id") == cell_id).source = source
    return solution, restamp(nb, solution)[0]


def _passes_where_nothing_watches(solution, exercise, source, folder, monkeypatch) -> bool:
    """Whether ``source`` passes the exercise's check run here, in this process, as the
    notebook would: the attack is real, only the watch stops it. (A module of its own:
    TorchScript reads a function's source from its file.)"""
    # The names the notebooks' set-up cells give the attacks (tc.lab.rope, ByteBPE).
    header = (
        "import torch\nfrom torch import nn\nimport torch.nn.functional as F\n"
        "import tfcourse as tc\nimport tfcourse.lab.rope\nfrom tfcourse.train.bpe import ByteBPE\n"
    )
    (folder / "answer.py").write_text(header + source)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "answer", raising=False)
    namespace = vars(importlib.import_module("answer"))
    calls, expected = session.checks_of(solution, exercise)
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        for function, args in calls:
            getattr(checks, function)(*[eval(arg, namespace) for arg in args])
    return printed.getvalue() == expected


@pytest.mark.slow
@pytest.mark.sandbox
def test_the_report_names_what_the_learners_code_called():
    """Per exercise, the torch and course functions the learner's own code called, for the
    teacher: the honest RMSNorm's operations, not the check's or the worker's."""
    solution = notebook_format.read_notebook(ROOT / "solutions" / "03_norms.ipynb")
    nb = solve(make_learner(solution, "03_norms"), solution)
    next(c for c in nb.cells if c.get("id") == "ex-rmsnorm").source = _RMSNORM.replace(
        "SHORTCUT", "self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)"
    )
    stamped, _ = restamp(nb, solution)
    result = grade(stamped, solution, Setup(env=grading_env(1), timeout=60))
    rms = next(r for r in result.exercises if r.name == "RMSNorm")
    assert rms.passed and {"torch.rsqrt", "torch.pow", "torch.mean"} <= set(rms.calls), rms
    assert not any(name.startswith(("aten::", "torch.func", "torch.set_")) for name in rms.calls)
