"""What the learner's code calls while the grader's request runs it, seen from inside the
worker (``worker.py``): for the teacher's report, and for the shortcuts that earn nothing.

Three views of one call, all in the learner's own process (so best effort: SECURITY.md):
torch's function layer (``Watch.__torch_function__``: every torch function and tensor
method), Python's profile hook (every Python function, by module and qualified name), and
torch's dispatcher (``Kernels``: every kernel, and whether it was reached through torch's
functions at all).
"""

import fnmatch
import inspect
import os
import sys
import threading
from typing import Any

from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

_HERE = os.path.dirname(os.path.abspath(__file__))
# The worker's own files, never the learner's (pool.WORKER_FILES; a worker of its own user
# runs in the folder of its files, where the learner's %%writefile modules are too).
OWN = {os.path.join(_HERE, name) for name in ("worker.py", "watch.py", "protocol.py")}
SEEN: list[str] = []  # the shortcuts seen running, in order (reported with every reply)
SHORTCUTS: dict[str, tuple[str, ...]] = {}  # exercise -> its patterns (the first message)
FOLDER = ""  # the worker's own, where the learner's %%writefile modules are (worker.serve)


class Kernels(TorchDispatchMode):
    """Every kernel the learner's code reaches without passing torch's Python functions
    (``Watch.__torch_function__`` is not on the stack): a TorchScript function,
    ``torch._C._dispatch_call_boxed``, a mode turned off. Honest code never does (measured
    on every solved notebook); an exercise that does earns nothing (its ``ns::name`` in
    SEEN)."""

    def __init__(self, watch: "Watch"):
        super().__init__()
        self.watch = watch

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Left as is, torch wraps this mode in a "never compile" guard whose first call
        # imports torch._dynamo: 1.4 s on every worker (and a cache folder in /tmp).
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if threading.current_thread() is threading.main_thread():  # not autograd's threads
            frame: Any = sys._getframe(1)
            while frame is not None and frame.f_code is not _HANDLER:
                frame = frame.f_back
            name = str(func.name()).split(".")[0]  # aten::native_layer_norm
            if frame is None and name not in _LIFTS:
                self.watch.record(name)
        return func(*args, **(kwargs or {}))


class Watch(TorchFunctionMode):
    """While a request of the grader runs the learner's code, what that code called: each
    torch function and method (``torch.<name>``) and course function (``<module>.<qualified
    name>``) it called itself (``called``, for the teacher's report), each kernel it reached
    past torch's functions (``Kernels``), and each function that ran and matches one of the
    exercise's shortcut patterns (``references.py``): these go to SEEN, once per request."""

    def __init__(self, patterns: tuple[str, ...]):
        super().__init__()
        self.patterns = patterns
        # what each code object or torch name ran as, if it matches (kept per exercise)
        self.matches = _MATCHES.setdefault(self.patterns, {})
        self.seen: set[str] = set()
        self.called: set[str] = set()
        self.kernels = Kernels(self)

    def record(self, name: str) -> None:
        if name not in self.seen:
            self.seen.add(name)
            SEEN.append(name)
        self._call(name)

    def _call(self, name: str) -> None:
        if len(self.called) < MAX_CALLED:
            self.called.add(name)

    def _match(self, key, name_of) -> None:
        found = self.matches.get(key, _UNSEEN)
        if found is _UNSEEN:
            name = name_of()
            found = self.matches[key] = (
                name if any(fnmatch.fnmatchcase(name, p) for p in self.patterns) else None
            )
        if found is not None:
            self.record(found)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = str(getattr(func, "__name__", ""))
        if name == "__get__":  # a tensor's property (x.shape), by the property's name
            name = str(getattr(getattr(func, "__self__", None), "__name__", name))
        name = "torch." + name.split(".")[0]
        self._match(name, lambda: name)
        if _learners(sys._getframe(1)):
            self._call(name)
        return func(*args, **(kwargs or {}))

    def _profile(self, frame, event, arg):
        # Functions only: a module or class body runs once, when imported (a lazy import inside
        # torch runs ``layer_norm_expanded_weights``'s body), and does no exercise's work.
        if event == "call" and frame.f_code.co_flags & inspect.CO_OPTIMIZED:
            self._match(frame.f_code, lambda: _name(frame))
            if _course(frame) and _learners(frame.f_back):
                self._call(_name(frame))

    def __enter__(self):
        super().__enter__()
        self.kernels.__enter__()
        self.previous = sys.getprofile()
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self.previous)
        self.kernels.__exit__(*exc)
        return super().__exit__(*exc)


_HANDLER = Watch.__torch_function__.__code__
# Creating a tensor from Python data (torch.tensor, torch.from_numpy) lifts it at the
# dispatcher after torch's function has returned: not a kernel reached past it.
_LIFTS = {"aten::lift", "aten::lift_fresh", "aten::lift_fresh_copy"}
MAX_CALLED = 200  # names per request in the teacher's report
_UNSEEN = object()
_MATCHES: dict[tuple[str, ...], dict] = {}


def _name(frame) -> str:
    """A Python function as the patterns name it: ``<module>.<qualified name>``."""
    code = frame.f_code
    # co_qualname: Python 3.11 (3.10 gives a method by its name alone)
    return f"{frame.f_globals.get('__name__', '')}.{getattr(code, 'co_qualname', code.co_name)}"


def _course(frame) -> bool:
    return frame is not None and frame.f_globals.get("__name__", "").startswith("tfcourse")


def _learners(frame) -> bool:
    """Whether the call made from ``frame`` is the learner's: the first frame up that is the
    learner's (a cell, a module the cells wrote), the course's or this worker's is the
    learner's; torch's and other libraries' frames between are passed over."""
    while frame is not None and not _course(frame):
        filename = frame.f_code.co_filename
        path = os.path.abspath(filename)
        if path in OWN:
            return False
        if filename.startswith("<ipython-input-") or os.path.dirname(path) == FOLDER:
            return True
        frame = frame.f_back
    return False


def for_request(header: dict) -> Watch:
    """The watch for the exercise a request of the grader serves."""
    return Watch(SHORTCUTS.get(str(header.get("exercise", "")), ()))
