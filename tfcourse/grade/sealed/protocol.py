"""The wire between the grader and a worker: JSON headers and tensors as safetensors.

Nothing that crosses can run code: a message is a JSON header plus, optionally, one
safetensors blob (tensors only, no pickle). Values are encoded as a JSON tree with tagged
nodes for what JSON lacks: tuples, dicts, non-finite floats, dtypes, devices, tensors
(``{"$tensor": key}``, the key into the blob), objects that stay on the worker's side
(``{"$handle": n}``), and the check's own modules and optimizers, sent by value and rebuilt
in the worker (``{"$module": ...}``, ``{"$optimizer": ...}``, from allowed classes only), and
random-number generators by their state (``{"$generator": ...}``). An optimizer the learner's
code returns over such a module comes back the same way (``optimizer_node``), rebuilt by the
grader over its own module: which parameter is in which group is what a check judges.

This file is also copied beside the worker script and imported there by file, so it
imports nothing but the standard library, torch and safetensors.

Frame: 8-byte big-endian length + header (UTF-8 JSON), 8-byte length + blob (may be 0).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import struct
import warnings

import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

# The module hooks a worker reports back on the check's own modules (a leftover hook is a
# mistake some checks look for); the grader re-creates each kind it hears of.
HOOK_KINDS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
# Bounds on what a peer may send, so that a hostile worker's reply costs the grader at most
# this much memory and parsing. Measured while grading every solved notebook: the largest
# reply had a header of 4,188 bytes and tensors of 1 MiB; the largest request after the first
# 6,634 bytes and 122 KB. The grader's first request carries the learner's cells, which the
# worker (and only the worker) reads up to a notebook's own limit.
MAX_HEADER = 2**20  # bytes: a reply's header bigger than this is a broken or hostile peer
MAX_REQUEST_HEADER = 64 * 2**20  # bytes: the grader's requests (notebook.MAX_NOTEBOOK_BYTES)
MAX_BLOB = 64 * 2**20  # bytes: every tensor a check exchanges is far smaller


# The optimizers a check may hand the learner's code (sent by value, rebuilt in the worker).
OPTIMIZERS = {cls.__name__: cls for cls in (torch.optim.AdamW, torch.optim.Adam, torch.optim.SGD)}


class ProtocolError(Exception):
    """The peer sent something that is not a well-formed message."""


def encode_message(header: dict, tensors: dict[str, torch.Tensor] | None = None) -> bytes:
    """One message as bytes: the header's length and JSON, the tensors' length and blob."""
    body = json.dumps(header, allow_nan=False).encode()
    blob = save_tensors(tensors) if tensors else b""
    return struct.pack(">Q", len(body)) + body + struct.pack(">Q", len(blob)) + blob


def write_message(stream, header: dict, tensors: dict[str, torch.Tensor] | None = None) -> None:
    stream.write(encode_message(header, tensors))
    stream.flush()


def _read_exactly(stream, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError("the peer closed the channel")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_message(stream, max_header: int = MAX_HEADER) -> tuple[dict, dict[str, torch.Tensor]]:
    """One message from ``stream``; a header over ``max_header`` bytes or tensors over
    ``MAX_BLOB`` raise ``ProtocolError`` before they are read."""
    (size,) = struct.unpack(">Q", _read_exactly(stream, 8))
    if size > max_header:
        raise ProtocolError(f"header of {size} bytes (limit {max_header})")
    try:
        header = json.loads(_read_exactly(stream, size))
    except ValueError as error:
        raise ProtocolError(f"header is not JSON: {error}") from None
    if not isinstance(header, dict):
        raise ProtocolError("header is not a JSON object")
    (size,) = struct.unpack(">Q", _read_exactly(stream, 8))
    if size > MAX_BLOB:
        raise ProtocolError(f"tensor blob of {size} bytes (limit {MAX_BLOB})")
    try:
        tensors = load_tensors(_read_exactly(stream, size)) if size else {}
    except Exception as error:  # noqa: BLE001 - any malformed blob is the peer's fault
        raise ProtocolError(f"tensor blob is not safetensors: {error}") from None
    return header, tensors


class Encoder:
    """Turns a value into a JSON tree, collecting its tensors (moved to the CPU) by key."""

    def __init__(self, handle=None):
        self.tensors: dict[str, torch.Tensor] = {}
        self.handle = handle  # callable(object) -> dict, for what cannot cross

    def tensor(self, value: torch.Tensor) -> dict:
        key = f"t{len(self.tensors)}"
        # safetensors wants dense, contiguous, unshared storage.
        self.tensors[key] = value.detach().to("cpu").contiguous().clone()
        return {"$tensor": key, "requires_grad": bool(value.requires_grad)}

    def __call__(self, value):
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else {"$float": repr(value)}
        if isinstance(value, torch.Tensor):
            return self.tensor(value)
        if isinstance(value, torch.dtype):
            return {"$dtype": str(value).removeprefix("torch.")}
        if isinstance(value, torch.device):
            return {"$device": str(value)}
        if isinstance(value, torch.Generator):
            # A twin of the check's generator: the same state, so the same random numbers.
            return {"$generator": self.tensor(value.get_state()), "device": str(value.device)}
        if isinstance(value, tuple):
            return {"$tuple": [self(item) for item in value]}
        if isinstance(value, list):
            return {"$list": [self(item) for item in value]}
        if isinstance(value, dict) and all(isinstance(key, str) for key in value):
            return {"$dict": {key: self(item) for key, item in value.items()}}
        if (
            dataclasses.is_dataclass(value)
            and not isinstance(value, type)
            and type(value).__module__.startswith("tfcourse.")
        ):
            # A course config (GPTConfig): sent as its fields, rebuilt from the worker's copy.
            return {
                "$dataclass": f"{type(value).__module__}:{type(value).__qualname__}",
                "fields": self(
                    {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
                ),
            }
        if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
            return self(value.item())  # a numpy scalar (np.float32, np.int64, ...): its number
        if self.handle is not None:
            return self.handle(value)
        raise TypeError(f"cannot send a {type(value).__name__} to the worker")


def decode(
    tree,
    tensors: dict[str, torch.Tensor],
    *,
    device=None,
    handle=None,
    requires_grad: bool = True,
    dataclasses_from_tfcourse: bool = False,
    by_value: list | None = None,
    optimizers_over: list | None = None,
):
    """The value a JSON tree stands for; tensors go to ``device``; ``handle(node)`` turns
    a ``{"$handle": ...}`` node into an object (refused when ``handle`` is None). Course
    dataclasses and modules are rebuilt only where ``dataclasses_from_tfcourse`` (the
    worker side); each module rebuilt is appended to ``by_value`` when given. Optimizers are
    rebuilt over the modules of ``by_value`` on the worker side, and over
    ``optimizers_over`` (the grader's modules sent in the same call) on the grader's."""
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return tree
    if isinstance(tree, list):
        raise ProtocolError("untagged list")
    if not isinstance(tree, dict) or len(tree) < 1:
        raise ProtocolError("malformed value")

    def again(node):
        return decode(
            node,
            tensors,
            device=device,
            handle=handle,
            requires_grad=requires_grad,
            dataclasses_from_tfcourse=dataclasses_from_tfcourse,
            by_value=by_value,
            optimizers_over=optimizers_over,
        )

    if "$tensor" in tree:
        if tree["$tensor"] not in tensors:
            raise ProtocolError(f"missing tensor {tree['$tensor']!r}")
        value = tensors[tree["$tensor"]]
        value = value.to(device) if device is not None else value
        if requires_grad and tree.get("requires_grad") and value.is_floating_point():
            value = value.requires_grad_(True)
        return value
    if "$float" in tree:
        return float(tree["$float"])
    if "$dtype" in tree:
        dtype = getattr(torch, str(tree["$dtype"]), None)
        if not isinstance(dtype, torch.dtype):
            raise ProtocolError(f"unknown dtype {tree['$dtype']!r}")
        return dtype
    if "$device" in tree:
        return torch.device(str(tree["$device"]))
    if "$tuple" in tree:
        return tuple(again(item) for item in tree["$tuple"])
    if "$list" in tree:
        return [again(item) for item in tree["$list"]]
    if "$dict" in tree:
        return {str(key): again(item) for key, item in tree["$dict"].items()}
    if "$dataclass" in tree and dataclasses_from_tfcourse:
        module, _, name = str(tree["$dataclass"]).partition(":")
        if not module.startswith("tfcourse."):
            raise ProtocolError(f"not a course dataclass: {tree['$dataclass']!r}")
        cls = getattr(importlib.import_module(module), name, None)
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise ProtocolError(f"not a course dataclass: {tree['$dataclass']!r}")
        return cls(**again(tree["fields"]))
    if "$module" in tree and dataclasses_from_tfcourse:
        module, _, name = str(tree["$module"]).partition(":")
        if not module.startswith(("torch.nn.", "tfcourse.")):
            raise ProtocolError(f"not a module of torch.nn or the course: {tree['$module']!r}")
        cls = getattr(importlib.import_module(module), name, None)
        if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
            raise ProtocolError(f"not a module class: {tree['$module']!r}")
        if tree.get("meta") is True:  # shapes only: nothing to load, nothing allocated
            with torch.device("meta"):
                built = cls(**again(tree["init"]))
            built = built.train(bool(tree.get("training")))
            if by_value is not None:
                by_value.append(built)
            return built
        built = cls(**again(tree["init"]))
        if tree.get("dtype"):
            built = built.to(dtype=getattr(torch, str(tree["dtype"])))
        built.load_state_dict(
            decode(tree["state"], tensors, device=device, requires_grad=False), strict=True
        )
        built = built.to(device).train(bool(tree.get("training")))
        parameters = dict(built.named_parameters())
        frozen = tree.get("frozen", [])  # parameters the check froze (requires_grad=False)
        if not (
            isinstance(frozen, list)
            and all(isinstance(name, str) and name in parameters for name in frozen)
        ):
            raise ProtocolError("malformed frozen parameters")
        for name in frozen:
            parameters[name].requires_grad_(False)
        for name, grad in decode(
            tree.get("grads", {"$dict": {}}), tensors, device=device, requires_grad=False
        ).items():
            if name not in parameters or parameters[name].shape != grad.shape:
                raise ProtocolError(f"gradient for unknown parameter {name!r}")
            parameters[name].grad = grad.to(parameters[name].dtype)
        if by_value is not None:
            by_value.append(built)
        return built
    if "$generator" in tree and dataclasses_from_tfcourse:
        state = again(tree["$generator"])
        if not (isinstance(state, torch.Tensor) and state.dtype == torch.uint8 and state.ndim == 1):
            raise ProtocolError("malformed generator")
        twin = torch.Generator(torch.device(str(tree.get("device", "cpu"))))
        try:
            twin.set_state(state.cpu())
        except (RuntimeError, ValueError):
            raise ProtocolError("malformed generator") from None
        return twin
    if "$optimizer" in tree:
        over = by_value if dataclasses_from_tfcourse else optimizers_over
        if over is not None:
            return _optimizer(tree, tensors, over)
    if "$handle" in tree and handle is not None:
        return handle(tree)
    raise ProtocolError(f"unknown value node {sorted(tree)[:3]}")


def optimizer_node(optimizer, modules: list, encoder: Encoder) -> dict | None:
    """``optimizer`` as a ``{"$optimizer": ...}`` node over the first of ``modules`` that holds
    any of its parameters (the first module where none does): its class and, per param group,
    its parameters (by name in that module; one the module does not hold, a copy, as a tensor)
    and its settings. None where the class is not an allowed one or there is no module."""
    cls = type(optimizer)
    if OPTIMIZERS.get(cls.__name__) is not cls or not modules:
        return None
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    named = [{id(p): name for name, p in module.named_parameters()} for module in modules]
    index = next((i for i, names in enumerate(named) if held & names.keys()), 0)
    groups = [
        {
            "params": [named[index].get(id(p), p) for p in group["params"]],
            "settings": {k: v for k, v in group.items() if k in optimizer.defaults},
        }
        for group in optimizer.param_groups
    ]
    return {"$optimizer": cls.__name__, "module": index, "groups": encoder(groups)}


def _setting(value) -> bool:
    """A param group's setting as it may cross: a number, a flag, None, a tuple of numbers
    (``betas``) or a one-number tensor (a learning rate given as a tensor)."""
    if isinstance(value, torch.Tensor):
        return value.numel() == 1
    if isinstance(value, tuple):
        return all(isinstance(item, (int, float)) for item in value)
    return value is None or isinstance(value, (bool, int, float))


def _optimizer(tree: dict, tensors, by_value: list) -> torch.optim.Optimizer:
    """A fresh optimizer of an allowed class over a module rebuilt earlier in this call (or,
    on the grader's side, over its own module sent in the call): a parameter is named in the
    module, or is a tensor of its own (a copy, not the module's)."""
    cls = OPTIMIZERS.get(str(tree["$optimizer"]))
    index = tree.get("module")
    if cls is None or not isinstance(index, int) or not 0 <= index < len(by_value):
        raise ProtocolError("malformed optimizer")
    parameters = dict(by_value[index].named_parameters())
    groups = decode(tree.get("groups"), tensors, requires_grad=False)
    if not isinstance(groups, list):
        raise ProtocolError("malformed optimizer")
    built = []
    for group in groups:
        names = group.get("params") if isinstance(group, dict) else None
        settings = group.get("settings") if isinstance(group, dict) else None
        if not (
            isinstance(names, list)
            and all(
                (isinstance(name, str) and name in parameters) or isinstance(name, torch.Tensor)
                for name in names
            )
            and isinstance(settings, dict)
            and all(_setting(value) for value in settings.values())
        ):
            raise ProtocolError("malformed optimizer")
        params = [parameters[name] if isinstance(name, str) else name for name in names]
        built.append({"params": params, **settings})
    try:
        with warnings.catch_warnings():  # a parameter twice in a group: the check says so
            warnings.simplefilter("ignore")
            return cls(built)
    except (TypeError, ValueError) as error:
        raise ProtocolError(f"malformed optimizer ({type(error).__name__})") from None


def tensors_of(value):
    """The tensors in a value, depth first, in the order ``Encoder`` numbers them: both
    sides use it to match outputs, inputs and gradients up by position."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors_of(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_of(item)
