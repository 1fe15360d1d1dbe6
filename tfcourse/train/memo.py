"""Training runs remembered within one run of the test suite (never for learners).

The English and Chinese editions of a notebook run the same code on the same seeds, so on
one machine their training runs are the same runs, bit for bit. When ``TFCOURSE_TRAIN_MEMO``
names a folder (``tests/test_notebooks.py`` gives the notebooks one per test run),
``train()`` keeps each run there under a digest of everything the run depends on, and an
identical call later loads the model's weights, gradients and modes, the global RNG state
and the history instead of training again. The digest covers the model (its classes, every
attribute, the weights and which of them train), the data set, the settings, the global RNG
state (dropout draws from it), and the versions, thread count and source of torch and this
package. Whatever it cannot describe exactly (a class or function of the notebook's own, a
hook, a tensor off the CPU, an object of another library) is trained as usual.
"""

from __future__ import annotations

import functools
import hashlib
import os
import types
from pathlib import Path

import torch
from torch import nn

from ..files import replaced_atomically

MEMO_ENV = "TFCOURSE_TRAIN_MEMO"
PACKAGE = Path(__file__).resolve().parents[1]
# Modules whose functions and classes are named, not described: their code is fixed by the
# versions and the package source in the digest.
KNOWN_MODULES = ("tfcourse", "torch", "math", "builtins", "collections", "typing")
ATOMS = (type(None), bool, int, float, complex, str, bytes)
GLOBAL_HOOKS = (
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
)


class Unknown(Exception):
    """Something the digest cannot describe exactly: the run is not remembered."""


def _known(thing) -> str:
    module = getattr(thing, "__module__", None) or ""
    if module.split(".")[0] not in KNOWN_MODULES:
        raise Unknown(f"{getattr(thing, '__qualname__', thing)!r} from module {module!r}")
    return f"{module}.{thing.__qualname__}"


def _describe(value, digest, seen: dict[int, int]) -> None:
    """Feed ``value`` to ``digest`` so that two values digest alike only if they are alike."""
    if isinstance(value, ATOMS):
        digest.update(f"{type(value).__name__}:{value!r};".encode())
        return
    if isinstance(value, (torch.dtype, torch.device, torch.Size)):
        digest.update(f"{type(value).__name__}:{value};".encode())
        return
    if isinstance(value, (type, types.BuiltinFunctionType)):
        digest.update(f"named:{_known(value)};".encode())
        return
    if isinstance(value, types.FunctionType):  # its name, and what it closes over
        digest.update(f"function:{_known(value)};".encode())
        try:
            cells = [cell.cell_contents for cell in value.__closure__ or ()]
        except ValueError:  # a variable it closes over is not assigned yet
            raise Unknown("a closure over an unassigned variable") from None
        _describe((value.__defaults__, value.__kwdefaults__, cells), digest, seen)
        return
    if isinstance(value, types.MethodType):
        _describe(("method", value.__func__, value.__self__), digest, seen)
        return
    if id(value) in seen:  # shared or cyclic: the same object again (tied weights, parents)
        digest.update(f"seen:{seen[id(value)]};".encode())
        return
    seen[id(value)] = len(seen)
    if isinstance(value, torch.Tensor):
        if value.device.type != "cpu" or value.layout != torch.strided:
            raise Unknown(f"a tensor on {value.device} ({value.layout})")
        flat = value.detach().contiguous().reshape(-1)
        digest.update(
            f"{type(value).__name__}:{value.dtype}:{tuple(value.shape)}:"
            f"{value.requires_grad};".encode()
        )
        digest.update(flat.view(torch.uint8).numpy().tobytes())
    elif isinstance(value, (list, tuple)):
        digest.update(f"{type(value).__name__}:{len(value)};".encode())
        for item in value:
            _describe(item, digest, seen)
    elif isinstance(value, dict):
        digest.update(f"{_known(type(value))}:{len(value)};".encode())
        for key, item in value.items():  # insertion order: the same code builds the same
            _describe(key, digest, seen)
            _describe(item, digest, seen)
    elif isinstance(value, (set, frozenset)):
        if not all(isinstance(item, ATOMS) for item in value):
            raise Unknown("a set of objects")
        digest.update(f"{type(value).__name__}:{sorted(map(repr, value))};".encode())
    elif hasattr(value, "__dict__") and not isinstance(value, types.ModuleType):
        digest.update(f"object:{_known(type(value))};".encode())
        _describe(vars(value), digest, seen)
    else:
        raise Unknown(f"a {type(value).__name__}")


@functools.cache
def _sources() -> str:
    """Digest of the package's source (its version included): an edited model or loop never
    meets an old run."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(PACKAGE).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def key(model: nn.Module, dataset, settings: dict, device) -> Path | None:
    """Where the run ``train(model, dataset, device=device, **settings)`` is kept, or None
    when runs are not remembered (no ``TFCOURSE_TRAIN_MEMO``) or this one cannot be."""
    folder = os.environ.get(MEMO_ENV)
    if not folder:
        return None
    digest = hashlib.sha256()
    try:
        if device is not None and torch.device(device).type != "cpu":
            raise Unknown(f"device {device}")
        if any(getattr(nn.modules.module, hooks) for hooks in GLOBAL_HOOKS):
            raise Unknown("a global module hook")
        context = (
            _sources(),  # the version too: it is written in tfcourse/__init__.py
            torch.__version__,
            torch.get_num_threads(),
            torch.get_default_dtype(),
            torch.is_grad_enabled(),
            torch.are_deterministic_algorithms_enabled(),
            torch.get_rng_state(),
        )
        _describe((context, model, dataset, settings), digest, {})
    except (Unknown, RecursionError, TypeError, AttributeError):  # never a reason to fail a run
        return None
    return Path(folder) / f"{digest.hexdigest()}.pt"


def recall(path: Path | None, model: nn.Module) -> dict | None:
    """The history of the run kept at ``path``, with ``model`` and the global RNG state put
    where that run left them; None if there is none."""
    if path is None or not path.is_file():
        return None
    kept = torch.load(path, weights_only=True)
    model.load_state_dict(kept["weights"])
    for name, parameter in model.named_parameters():
        parameter.grad = kept["grads"].get(name)
    for name, module in model.named_modules():
        module.training = kept["training"][name]
    torch.set_rng_state(kept["rng"])
    return kept["history"]


def remember(path: Path | None, model: nn.Module, history: dict) -> None:
    """Keep the run that just ended at ``path`` (nothing when ``path`` is None)."""
    if path is None:
        return
    kept = {
        "weights": model.state_dict(),
        "grads": {name: p.grad for name, p in model.named_parameters() if p.grad is not None},
        "training": {name: module.training for name, module in model.named_modules()},
        "rng": torch.get_rng_state(),
        "history": history,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with replaced_atomically(path) as temporary:
        torch.save(kept, temporary)
