"""A sealed copy of ``tfcourse``: the package with some references replaced by stubs.

The worker that runs a learner's code receives the folder built here as a tar archive
(``sealed_archive``), unpacks it into its own folder and puts that first on ``sys.path``,
so ``import tfcourse`` (and ``import tfcourse.nn.norms``, and everything inside the package
that imports the hidden name) finds this copy, in which:

- each **module-level** ``def NAME`` / ``class NAME`` / ``NAME = ...`` with ``NAME`` in
  ``hide`` is a stub of the same kind (a function taking anything; a class whose
  ``__new__`` refuses; an assignment becomes a class stub, or a function stub where the
  value was a ``lambda``) that raises ``RuntimeError("sealed: ...")`` when called. The
  original body, decorators and docstring are gone from the copy, not merely shadowed.
  "Module level" includes definitions inside module-level ``if``/``try``/``with``/loops;
  methods of other classes are left alone (``GPT.num_params`` stays whatever ``hide``
  says), since a method is reached through its class and the class is what a hide names;
- ``tfcourse.checks`` is a stub package: ``check_xxx`` names are silent no-ops (so a
  learner's setup cell ``from tfcourse.checks import check_rmsnorm`` still runs) and the
  submodules (``tfcourse.checks.norms``: the reference again, and the known mistakes)
  do not exist;
- only ``.py`` files are copied (no ``__pycache__`` of the real package, no ``site.css``).

The source of the real package is found from this module's own ``__file__``
(``tfcourse/grade/sealed/seal.py`` -> ``parents[2]``), never by importing it: it is the
very package the grader runs. (``importlib.util.find_spec("tfcourse")`` would not execute
the package either, but it answers with whatever ``tfcourse`` is first on ``sys.path``.)

Rewriting keeps line structure where it can: a hidden definition's lines are replaced by
the stub padded with blank lines, so tracebacks elsewhere in the module keep their line
numbers; only when a definition shares a line with another statement does the module go
through ``ast.unparse`` (losing comments, which is harmless in a sealed copy).

``sealed_package(hide)`` builds once per distinct ``hide`` in a temporary folder kept for
the process's lifetime (removed at exit); it is safe to call from several threads.
"""

from __future__ import annotations

import ast
import atexit
import compileall
import hashlib
import io
import re
import shutil
import tarfile
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

from ...course import notebook_format
from ...language import current, say
from . import undertaker

PACKAGE_NAME = "tfcourse"

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_BLOCKS: tuple[type[ast.stmt], ...] = (
    ast.If,
    ast.Try,
    ast.With,
    ast.AsyncWith,
    ast.For,
    ast.AsyncFor,
    ast.While,
)
if hasattr(ast, "TryStar"):  # Python 3.11+
    _BLOCKS = (*_BLOCKS, ast.TryStar)


def package_dir() -> Path:
    """The real ``tfcourse`` package folder (with ``__init__.py``), found without importing it."""
    root = Path(__file__).resolve().parents[2]
    if root.name != PACKAGE_NAME or not (root / "__init__.py").is_file():
        raise RuntimeError(f"seal.py is not inside a {PACKAGE_NAME} package: {root}")
    return root


# --------------------------------------------------------------------------- stubs


# How every sealed stub's message begins, in each language (``met_the_seal``).
SEALED = ("sealed: the course's reference ", "sealed：为这个练习评分期间，课程的参考实现 ")


def _message(name: str) -> str:
    """The stub's message, as Python source, in the language of the grade being built."""
    return repr(
        say(
            f"{SEALED[0]}{name} is not available while this exercise is graded; write your own",
            f"{SEALED[1]}{name} 不可用；请自己实现",
        )
    )


def met_the_seal(output: str) -> bool:
    """Whether a verdict's output holds a sealed stub's message: the learner's code called
    the course's reference (or printed those words, which earns nothing either)."""
    return any(start in output for start in SEALED)


def stub_lines(kind: str, name: str, indent: str = "") -> list[str]:
    """The stub for ``name``: ``kind`` is ``"class"`` or ``"def"``. Lines without newlines."""
    if kind == "def":
        return [
            f"{indent}def {name}(*args, **kwargs):",
            f"{indent}    raise RuntimeError({_message(name)})",
        ]
    return [
        f"{indent}class {name}:",
        f"{indent}    def __new__(cls, *args, **kwargs):",
        f"{indent}        raise RuntimeError({_message(name)})",
    ]


def _kind_of(node: ast.stmt) -> str:
    if isinstance(node, ast.ClassDef):
        return "class"
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return "def"
    value = getattr(node, "value", None)
    return "def" if isinstance(value, ast.Lambda) else "class"


def _assigned(node: ast.stmt) -> list[str]:
    """Names bound by an assignment statement (``a = b = ...``, ``a, b = ...``, ``a: T = ...``)."""
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AugAssign) or (
        isinstance(node, ast.AnnAssign) and node.value is not None
    ):
        targets = [node.target]
    else:
        return []
    names = []
    for target in targets:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name):
                names.append(sub.id)
    return names


def _bodies(node: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists of a module-level block statement (still module scope)."""
    bodies = [getattr(node, field, None) for field in ("body", "orelse", "finalbody")]
    for handler in getattr(node, "handlers", []) or []:
        bodies.append(handler.body)
    return [body for body in bodies if body]


def _hidden_statements(body: list[ast.stmt], hide: set[str]):
    """``(statement, names, whole, body)`` for each module-scope statement defining a hidden
    name. ``whole``: the statement binds exactly one name, so it can be replaced outright."""
    for node in body:
        if isinstance(node, _DEFS):
            if node.name in hide:
                yield node, [node.name], True, body
        elif isinstance(node, _BLOCKS):
            for inner in _bodies(node):
                yield from _hidden_statements(inner, hide)
        else:
            names = _assigned(node)
            hidden = [name for name in names if name in hide]
            if hidden:
                whole = (
                    len(names) == 1
                    and isinstance(node, (ast.Assign, ast.AnnAssign))
                    and isinstance(
                        node.targets[0] if isinstance(node, ast.Assign) else node.target, ast.Name
                    )
                )
                yield node, hidden, whole, body


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno] + [d.lineno for d in decorators])


def _last_line(node: ast.stmt) -> int:
    return node.end_lineno if node.end_lineno is not None else node.lineno


def _shares_a_line(node: ast.stmt, body: list[ast.stmt]) -> bool:
    index = next(i for i, other in enumerate(body) if other is node)
    before = body[index - 1] if index > 0 else None
    after = body[index + 1] if index + 1 < len(body) else None
    return (before is not None and _last_line(before) >= _first_line(node)) or (
        after is not None and after.lineno <= _last_line(node)
    )


def _rewrite_lines(text: str, found: list) -> str | None:
    """Replace hidden definitions line by line, keeping the line count where the stub fits.
    ``None`` when some definition shares a line with another statement."""
    lines = text.splitlines()
    edits = []
    for node, names, whole, body in found:
        if _shares_a_line(node, body):
            return None
        indent = " " * node.col_offset
        if whole:
            start, end = _first_line(node), node.end_lineno
            new = stub_lines(_kind_of(node), names[0], indent)
        else:
            # `a, NAME = ...`: keep the statement, rebind the hidden names right after it.
            start = end = node.end_lineno
            new = [lines[end - 1]] + [
                line for name in names for line in stub_lines("class", name, indent)
            ]
        new = new + [""] * max(0, end - start + 1 - len(new))
        edits.append((start, end, new))
    for start, end, new in sorted(edits, key=lambda edit: edit[0], reverse=True):
        lines[start - 1 : end] = new
    return "\n".join(lines) + "\n"


def _unparse(tree: ast.Module, found: list) -> str:
    """The module with each hidden definition replaced by its stub in the tree itself (the
    same statements ``_hidden_statements`` found), unparsed: comments and line numbers
    are lost, which is harmless in a sealed copy."""
    for node, names, whole, body in found:
        index = next(i for i, other in enumerate(body) if other is node)
        kind = _kind_of(node) if whole else "class"
        stubs = [
            notebook_format.parse_python("\n".join(stub_lines(kind, name))).body[0]
            for name in names
        ]
        body[index : index + 1] = stubs if whole else [node, *stubs]
    return ast.unparse(tree) + "\n"


def seal_source(text: str, hide: set[str], filename: str = "<module>") -> str:
    """``text`` with each module-level definition of a name in ``hide`` replaced by a stub."""
    names = "|".join(map(re.escape, sorted(hide)))
    if not hide or not re.search(rf"\b(?:{names})\b", text):
        return text
    tree = notebook_format.parse_python(text, filename=filename)
    found = list(_hidden_statements(tree.body, hide))
    if not found:
        return text
    sealed = _rewrite_lines(text, found)
    if sealed is not None:
        try:
            notebook_format.parse_python(sealed, filename=filename)
            return sealed
        except SyntaxError:
            pass
    return _unparse(tree, found)


# --------------------------------------------------------------------------- checks stub


def check_names(checks_init: Path) -> list[str]:
    """The ``check_xxx`` names the real ``tfcourse.checks`` exports (read, not imported)."""
    tree = notebook_format.parse_python(checks_init.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
    return sorted(name for name in names if name.startswith("check_"))


def checks_stub(names: Iterable[str]) -> str:
    """Source of the stand-in ``tfcourse/checks/__init__.py``."""
    return f'''"""Sealed stand-in for ``tfcourse.checks``: every ``check_xxx`` is a silent no-op.

The grade of this exercise is decided by the grader, outside this process; the checks
(and the references and known mistakes they hold) are not here.
"""

CHECKS = {tuple(sorted(names))!r}


def _silent(name):
    def check(*args, **kwargs):
        return None

    check.__name__ = check.__qualname__ = name
    return check


globals().update((name, _silent(name)) for name in CHECKS)
__all__ = list(CHECKS)


def __getattr__(name):
    if name.startswith("check_"):
        return _silent(name)
    raise AttributeError(f"module {{__name__!r}} has no attribute {{name!r}}")
'''


# --------------------------------------------------------------------------- building


def build_sealed_package(dest: Path, hide: set[str] | frozenset[str]) -> Path:
    """Write the sealed ``tfcourse`` into ``dest/tfcourse`` and return ``dest``.

    ``dest`` is the folder to put first on the worker's ``sys.path``. ``dest/tfcourse``
    must not exist yet.
    """
    source = package_dir()
    dest = Path(dest)
    target = dest / PACKAGE_NAME
    if target.exists():
        raise FileExistsError(f"{target} exists; build into a fresh folder")
    hide = set(hide)
    for path in sorted(source.rglob("*.py")):
        relative = path.relative_to(source)
        if "__pycache__" in relative.parts or relative.parts[0] == "checks":
            continue
        out = target / relative
        out.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text(encoding="utf-8")
        sealed = seal_source(text, hide, filename=str(relative))
        if sealed is text:
            shutil.copyfile(path, out)
        else:
            out.write_text(sealed, encoding="utf-8")
    checks = target / "checks"
    checks.mkdir(parents=True, exist_ok=True)
    (checks / "__init__.py").write_text(
        checks_stub(check_names(source / "checks" / "__init__.py")), encoding="utf-8"
    )
    return dest


_lock = threading.Lock()
_built: dict[tuple[frozenset[str], str], Path] = {}
_archives: dict[tuple[frozenset[str], str], bytes] = {}
_root: Path | None = None


def _cleanup() -> None:
    global _root
    with _lock:
        if _root is not None:
            shutil.rmtree(_root, ignore_errors=True)
            undertaker.done("path", str(_root))
        _root = None
        _built.clear()
        _archives.clear()


def sealed_package(hide: frozenset[str] | Iterable[str]) -> Path:
    """The sealed package for ``hide``, built on first request and reused for the process's
    lifetime (removed at exit). Byte-compiled once here, so a worker whose file system is
    read-only does not compile it again on every import. Thread-safe. One per language:
    the stubs' message is in the language of the grade (``language.current()``)."""
    global _root
    hide = frozenset(hide)
    key = (hide, current())
    with _lock:
        if key in _built:
            return _built[key]
        if _root is None:
            _root = Path(tempfile.mkdtemp(prefix="tfcourse-sealed-pkg-"))
            undertaker.keep("path", str(_root))
            atexit.register(_cleanup)
        digest = hashlib.sha256("\0".join(sorted(hide)).encode()).hexdigest()[:16]
        if key[1] != "en":
            digest += f"-{key[1]}"
        dest = build_sealed_package(_root / digest, hide)
        compileall.compile_dir(dest, quiet=2, workers=1)
        _built[key] = dest
        return dest


def sealed_archive(hide: frozenset[str] | Iterable[str]) -> bytes:
    """``sealed_package(hide)`` as an uncompressed tar archive (``tfcourse/...``, byte code
    included), the form in which a worker receives it: a worker sees no folder of the
    grader's, only its own copy. Built once per ``hide`` and language."""
    hide = frozenset(hide)
    key = (hide, current())
    folder = sealed_package(hide)
    with _lock:
        if key not in _archives:
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w") as tar:
                tar.add(folder / PACKAGE_NAME, arcname=PACKAGE_NAME)
            _archives[key] = buffer.getvalue()
        return _archives[key]
