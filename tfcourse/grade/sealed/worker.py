"""The sealed worker: runs a learner's cells, then their code on what the grader sends.

Started by the grader in its own empty folder (``python -I worker.py``), or ahead of its
session in a sandbox of its own (``pool.py``: ``python -I worker.py FOLDER``, a folder it
makes in the sandbox's private ``/tmp``). Its first message from the grader carries the
learner's code and the sealed copy of ``tfcourse`` (``seal.py``), unpacked here and put
first on ``sys.path``: it never imports the real ``tfcourse``, and in the sealed copy the
reference of the exercise under test is a stub. It never judges anything: it answers requests (build
this, call that, backpropagate this) with tensors, and the grader compares them with
the reference; and it reports what the learner's code called and the shortcuts it saw
running (``watch.py``).

The protocol runs on copies of the channel's file descriptors; the learner's prints go
to a log file, so no print can corrupt the channel.
"""

import contextlib
import io
import itertools
import os
import signal
import sys
import tarfile
import traceback
from typing import Any, cast

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # protocol.py beside us

import protocol
import syscalls
import torch
import watch as watching

PACKAGE = "sealed"  # where the sealed tfcourse is unpacked, in the worker's folder

_CHANNEL_IN = _CHANNEL_OUT = None  # the protocol's channel (take_channel)
_objects: dict[int, object] = {}
_graphs: dict[int, tuple[list, list]] = {}
_graph_keys = itertools.count(1)
_cell_seconds = 120.0


def _say(english: str, chinese: str) -> str:
    """``tfcourse.language.say`` for this file, which runs without the real package: the
    grader sets ``TFCOURSE_LANG=zh`` for a notebook of the Chinese edition."""
    chosen = os.environ.get("TFCOURSE_LANG", "").strip().lower()
    return chinese if chosen.startswith("zh") else english


def _handle(value) -> dict:
    key = len(_objects) + 1
    _objects[key] = value
    if isinstance(value, torch.nn.Module):
        kind = "module"
    elif isinstance(value, type):
        kind = "class"
    elif callable(value):
        kind = "function"
    else:
        kind = "object"
    return {"$handle": key, "kind": kind, "name": getattr(value, "__name__", type(value).__name__)}


def _lookup(node):
    key = node.get("$handle")
    if key not in _objects:
        raise protocol.ProtocolError(f"unknown handle {key!r}")
    return _objects[key]


def _describe(module: torch.nn.Module) -> tuple[dict, dict]:
    encoder = protocol.Encoder()
    params = [
        {
            "name": name,
            "shape": list(p.shape),
            "dtype": str(p.dtype).removeprefix("torch."),
            "requires_grad": p.requires_grad,
            "tie": id(p),
            "value": encoder(p)["$tensor"],
        }
        for name, p in module.named_parameters(remove_duplicate=False)
    ]
    # Every buffer, the non-persistent ones too (a causal mask, rotary tables): the grader's
    # mirror moves them with .to(device) and .double() as a kernel would, and each call
    # sends them back; left here, they stayed on the CPU while the inputs came on the GPU.
    state = module.state_dict(keep_vars=True)
    buffers = {name: encoder(b) for name, b in module.named_buffers(remove_duplicate=False)}
    transient = [name for name in buffers if name not in state]
    return {
        "params": params,
        "buffers": buffers,
        "transient": transient,
        "training": module.training,
    }, encoder.tensors


def _call(header, tensors, watch):
    device = torch.device(header.get("device", "cpu"))
    target = _lookup(header["target"])
    by_value: list = []  # copies of the grader's own modules

    def decode(node):
        return protocol.decode(
            node,
            tensors,
            device=device,
            handle=_lookup,
            dataclasses_from_tfcourse=True,
            by_value=by_value,
        )

    args, kwargs = decode(header["args"]), decode(header["kwargs"])
    leaves = [t for t in protocol.tensors_of((args, kwargs)) if t.requires_grad]
    if isinstance(target, torch.nn.Module):
        # The grader's values stand in for the learner's parameters and buffers for this
        # call only (functional_call): nothing is modified in place, so a graph kept from
        # an earlier call still backpropagates through the values it saw.
        sent = protocol.decode(header["params"], tensors, device=device)
        state = protocol.decode(header["buffers"], tensors, device=device, requires_grad=False)
        state.update(sent)
        # One tensor under two names (a buffer registered twice) is given under its first name
        # only: functional_call ties the names and refuses two values for them.
        named = [*target.named_parameters(), *target.named_buffers()]
        state = {name: value for name, value in state.items() if name in dict(named)}
        leaves += [t for t in sent.values() if t.requires_grad]
        target.train(bool(header["training"]))

        def method(*args, **kwargs):
            return torch.func.functional_call(target, state, args, kwargs, strict=False)
    else:
        method = target
    with torch.set_grad_enabled(bool(header.get("grad"))), watch:
        result = method(*args, **kwargs)
    encoder = protocol.Encoder()
    # An optimizer over a module the grader sent goes back by value (its groups, by parameter
    # name), anything else the grader cannot rebuild stays here behind a handle.
    encoder.handle = lambda value: (
        protocol.optimizer_node(value, by_value, encoder) or _handle(value)
    )
    reply = {"result": encoder(result)}
    # The inputs as the call left them: the grader sees an input modified in place.
    reply["inputs_after"] = encoder(tuple(protocol.tensors_of((args, kwargs))))
    # ... and what it left on the grader's modules: their mode and leftover hooks.
    reply["modules_after"] = [
        {
            "training": m.training,
            "hooks": [
                [name, kind]
                for name, sub in m.named_modules()
                for kind in protocol.HOOK_KINDS
                if getattr(sub, kind, None)
            ],
        }
        for m in by_value
    ]
    produced = list(protocol.tensors_of(result))
    differentiable = [
        i for i, t in enumerate(produced) if t.requires_grad and t.grad_fn is not None
    ]
    if header.get("grad") and differentiable:
        key = next(_graph_keys)
        _graphs[key] = ([produced[i] for i in differentiable], leaves)
        reply["graph"], reply["differentiable"] = key, differentiable
        reply["leaves"] = len(leaves)
    return reply, encoder.tensors


def _backward(header, tensors):
    outputs, leaves = _graphs.pop(header["graph"])
    grads = [tensors.get(f"g{i}") for i in range(len(outputs))]
    pairs = [(o, g) for o, g in zip(outputs, grads, strict=True) if g is not None]
    found = (
        torch.autograd.grad(
            [o for o, _ in pairs],
            leaves,
            [g.to(o.device, o.dtype) for o, g in pairs],
            allow_unused=True,
        )
        if pairs
        else [None] * len(leaves)
    )
    blob = {
        f"g{i}": g.detach().to("cpu").contiguous() for i, g in enumerate(found) if g is not None
    }
    return {"grads": [f"g{i}" if g is not None else None for i, g in enumerate(found)]}, blob


class CellTimeout(Exception):
    """A cell (or a check's argument) ran longer than the grader allows."""


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Interrupt the code inside after ``seconds`` (the grader's per-cell timeout)."""

    def interrupt(signum, frame):
        raise CellTimeout(
            _say(f"did not finish within {seconds:g} s", f"没有在 {seconds:g} 秒内运行完")
        )

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# IPython syntax in the learner's cells, as grading treats it (``_hook_ipython``): what
# shapes the learner's names runs as in the notebook; nothing runs outside Python.
_RUN_LINE_MAGICS = {"time", "config"}
_SETTING_MAGICS = {"config"}  # one that fails is noted; the cell goes on
# Their body is the learner's: Python run once, or (``writefile``) a file written into the
# worker's own folder, private and gone with the session, to import in a later cell.
_RUN_CELL_MAGICS = {"time", "capture", "writefile"}
# Where figures are shown: the worker shows none (matplotlib draws with Agg), and IPython
# without a kernel cannot switch to ``inline``, so ``%matplotlib`` is accepted and does
# nothing, without a note.
_NO_OP_MAGICS = {"matplotlib"}
# Timing only: the statement runs in a function of its own, so it defines nothing, and a
# slow one would run 7 x N times against the grader's clock. Skipped, with a note.
_TIMING_MAGICS = {"timeit"}
# Magics that hand their text to a shell or another interpreter: never run, like ``!cmd``.
_SHELL_MAGICS = set(
    "sx system pip conda mamba micromamba uv bash sh script "  # noqa: SIM905 - words
    "perl ruby python python2 python3 pypy".split()
)
_MAX_NOTES = 20  # per cell: enough to tell the story
_cell_notes: list[dict] = []


def _note(kind: str, line: str, error: str = "") -> None:
    """Record for the report that a line of the current cell did not run as written.
    ``kind``: shell | timing | magic | failed (a setting that raised). A line in a loop is
    recorded once."""
    first = (line.strip().splitlines() or [""])[0]
    note = {"kind": kind, "line": first[:120], "error": error[:200]}
    if len(_cell_notes) < _MAX_NOTES and note not in _cell_notes:
        _cell_notes.append(note)


def _hook_ipython(shell) -> None:
    """Make the shell's IPython syntax behave for grading (see the sets above).

    IPython turns ``!cmd`` into ``get_ipython().system(cmd)``, ``x = !cmd`` and ``!!cmd``
    into ``getoutput``, ``%name`` and ``%%name`` into ``run_line_magic`` and
    ``run_cell_magic`` (automagic, ``obj?`` and aliases such as ``ls`` too), wherever the
    line is in the cell. Replacing these four on the instance covers every route; a
    learner's code that calls ``os.system`` itself meets the sandbox instead.
    """
    from IPython.utils.text import SList

    run_line, run_cell = shell.run_line_magic, shell.run_cell_magic

    def system(cmd):
        _note("shell", f"!{cmd}")

    def getoutput(cmd, split=True, depth=0):
        _note("shell", f"!{cmd}")
        return SList() if split else ""

    def skipped(name: str, shown: str) -> None:
        if name in _TIMING_MAGICS:
            _note("timing", shown)
        elif name in _SHELL_MAGICS or shell.alias_manager.is_alias(name):
            _note("shell", shown)
        else:
            _note("magic", shown)

    def run_line_magic(magic_name, line, _stack_depth=1):
        shown = f"%{magic_name} {line}".rstrip()
        if magic_name in _NO_OP_MAGICS:
            return None
        if magic_name not in _RUN_LINE_MAGICS:
            return skipped(magic_name, shown)
        # One frame more between the learner's code and IPython's: ``%time`` inside a
        # function finds that function's names this many frames up.
        depth = _stack_depth + 1
        if magic_name not in _SETTING_MAGICS:
            return run_line(magic_name, line, _stack_depth=depth)  # its errors are the cell's
        try:
            return run_line(magic_name, line, _stack_depth=depth)
        except Exception as error:  # noqa: BLE001 - a display setting must not stop the cell
            _note("failed", shown, f"{type(error).__name__}: {error}")
            return None

    def run_cell_magic(magic_name, line, cell):
        if magic_name in _RUN_CELL_MAGICS:
            return run_cell(magic_name, line, cell)
        if magic_name not in _NO_OP_MAGICS:
            skipped(magic_name, f"%%{magic_name} {line}".rstrip())
        return None

    shell.system, shell.getoutput = system, getoutput
    shell.run_line_magic, shell.run_cell_magic = run_line_magic, run_cell_magic


def _run_cells(cells: list[str]) -> list[dict]:
    """Run the learner's cells in one IPython shell, in order; a cell that raises does not
    stop the next. Each result: ``ok``, ``error``, and ``notes`` (``_note``) on the lines
    of IPython syntax that did not run as written."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    _hook_ipython(shell)
    _objects[0] = shell.user_ns
    if "" not in sys.path:  # the folder the cells run in, importable as in a Jupyter kernel
        sys.path.insert(0, "")
    results = []
    for source in cells:
        _cell_notes.clear()
        with _time_limit(_cell_seconds):
            outcome = shell.run_cell(source, store_history=False, silent=True)
        error = outcome.error_before_exec or outcome.error_in_exec
        results.append(
            {
                "ok": error is None,
                # Bounded like a note: the reply's header is (protocol.MAX_HEADER).
                "error": "" if error is None else f"{type(error).__name__}: {error}"[:300],
                "notes": list(_cell_notes),
            }
        )
    return results


def _limit(limits: dict) -> None:
    """The grader's resource limits, set before any learner code runs; soft = hard, so the
    learner's code (unprivileged in the sandbox) cannot raise them again. Not
    ``RLIMIT_AS``: the CUDA driver reserves far more address space than it uses, while
    ``RLIMIT_DATA`` (private writable memory) stops a runaway allocation and leaves that
    reservation alone. ``RLIMIT_NPROC`` counts every process of the uid: only a worker
    running as a user of its own (``users.py``) gets one."""
    try:
        import resource
    except ImportError:  # Windows: no rlimits (grading there is --unsealed anyway)
        return
    wanted = [
        (getattr(resource, name), int(limits[key]))
        for name, key in (
            ("RLIMIT_CPU", "cpu_seconds"),
            ("RLIMIT_DATA", "memory_bytes"),
            ("RLIMIT_FSIZE", "file_bytes"),
            ("RLIMIT_NPROC", "processes"),
        )
        if key in limits
    ]
    for which, value in [*wanted, (resource.RLIMIT_NOFILE, 256), (resource.RLIMIT_CORE, 0)]:
        _, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)  # never raise
        resource.setrlimit(which, (value, value))
    try:  # no setuid program can give the learner's code privileges
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    except (OSError, AttributeError):
        pass


def take_channel(fd_in: int, fd_out: int) -> None:
    """Speak the protocol on copies of ``fd_in``/``fd_out``; from now on fd 0 reads
    nothing and fds 1 and 2 (the learner's prints, any library's noise) go to
    ``worker.log`` in the current folder."""
    global _CHANNEL_IN, _CHANNEL_OUT
    _CHANNEL_IN = os.fdopen(os.dup(fd_in), "rb")
    _CHANNEL_OUT = os.fdopen(os.dup(fd_out), "wb")
    log = os.open("worker.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - the learner's stdin, open while the worker runs
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)


def _unpack(tensors: dict) -> None:
    """Put the sealed ``tfcourse`` of the first message (a tar archive, as bytes) first on
    ``sys.path``. The archive is the grader's own, built by ``seal.sealed_archive``."""
    archive = tensors["package"].numpy().tobytes()
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        if hasattr(tarfile, "tar_filter"):  # Python 3.12, and the 3.10/3.11 security releases
            tar.extractall(PACKAGE, filter="tar")
        else:
            tar.extractall(PACKAGE)
    sys.path.insert(0, os.path.abspath(PACKAGE))


def serve() -> None:
    """Answer the grader on the channel (``take_channel``) until it closes."""
    header, tensors = protocol.read_message(_CHANNEL_IN, protocol.MAX_REQUEST_HEADER)
    _unpack(tensors)
    _limit(header.get("limits", {}))
    try:
        syscalls.deny()
    except (ImportError, OSError) as error:
        if header.get("sealed", True):  # the grader probed it (syscalls.unavailable)
            raise SystemExit(f"cannot filter system calls: {error}") from None
    global _cell_seconds
    _cell_seconds, watching.FOLDER = float(header.get("cell_seconds", 120)), os.getcwd()
    torch.set_num_threads(int(header.get("threads", 1)))
    watching.SHORTCUTS.update(
        {str(name): tuple(map(str, found)) for name, found in header.get("shortcuts", {}).items()}
    )
    cells = _run_cells(header.get("cells", []))
    protocol.write_message(_CHANNEL_OUT, {"cells": cells, "seen": watching.SEEN})
    while True:
        try:
            header, tensors = protocol.read_message(_CHANNEL_IN, protocol.MAX_REQUEST_HEADER)
        except EOFError:
            return
        op, watch = header.get("op"), watching.for_request(header)
        try:
            if op == "evaluate":  # an argument of a check call, e.g. RMSNorm
                encoder = protocol.Encoder(handle=_handle)
                with _time_limit(_cell_seconds), watch:
                    namespace = cast(dict[str, Any], _objects[0])
                    value = eval(
                        compile(header["expression"], "<check argument>", "eval"), namespace
                    )
                reply, blob = {"value": encoder(value)}, encoder.tensors
            elif op == "describe":
                reply, blob = _describe(_lookup(header["target"]))
            elif op == "call":
                reply, blob = _call(header, tensors, watch)
            elif op == "backward":
                reply, blob = _backward(header, tensors)
            elif op == "getattr":
                encoder = protocol.Encoder(handle=_handle)
                with watch:
                    value = getattr(_lookup(header["target"]), header["name"])
                reply, blob = {"value": encoder(value)}, encoder.tensors
            else:
                raise protocol.ProtocolError(f"unknown op {op!r}")
        except protocol.ProtocolError as error:  # a request it cannot read: said, not fatal
            reply, blob = {"bad_request": str(error)[:500]}, {}
        except BaseException as error:  # noqa: BLE001 - the learner's error is the answer
            reply, blob = (
                {
                    "error": {
                        "type": type(error).__name__,
                        "message": str(error),
                        "traceback": traceback.format_exc(limit=-8),
                    }
                },
                {},
            )
        reply["seen"], reply["called"] = watching.SEEN, sorted(watch.called)
        protocol.write_message(_CHANNEL_OUT, reply, blob)


def _start_ahead(folder: str) -> None:
    """Started ahead of its session (``pool.py``): make ``folder`` (in the sandbox's private
    ``/tmp``) and work there, import what every session needs (paid for before a session
    takes this worker), and say so on the channel: the pool takes only a ready worker."""
    os.mkdir(folder, 0o700)
    os.chdir(folder)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot
    from IPython.core.interactiveshell import InteractiveShell  # noqa: F401

    take_channel(0, 1)
    protocol.write_message(_CHANNEL_OUT, {"ready": True})


if __name__ == "__main__":
    if len(sys.argv) > 1:
        _start_ahead(sys.argv[1])
    else:
        take_channel(0, 1)
    serve()
