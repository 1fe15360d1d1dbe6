"""English text that every Python installation ships: the capstone's corpus.

Nothing is downloaded. Two sources, both part of CPython and under the Python
Software Foundation License (PSF-2.0):

- ``pydoc_data.topics``: the reference manual's topics as plain text (what
  ``help("if")`` shows): about 465,000 characters of technical English on Python 3.11;
- the docstrings of standard-library modules (``stdlib_docstrings``).

``more_stdlib_docstrings`` reads the docstrings of every other standard-library module from
its source (nothing is imported): more training text, for the sweep's question whether text
is what the capstone's GPT lacks.

The text depends on the Python version (the manual is revised between releases),
not on what else is installed.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
import sysconfig
import warnings
from pathlib import Path

from ..language import say
from ..nn import validate

CORPUS_SOURCE = (
    "Python's own documentation: the reference manual's topics "
    "(pydoc_data.topics) and standard-library docstrings"
)
CORPUS_LICENCE = "Python Software Foundation License (PSF-2.0), shipped with CPython"


def describe_source() -> str:
    """Where the capstone's text comes from and its licence, two lines in the reader's language."""
    return say(
        f"{CORPUS_SOURCE}\nlicence: {CORPUS_LICENCE}",
        "Python 自带的文档：参考手册的各个主题（pydoc_data.topics）和标准库的 docstring\n"
        "许可证：Python 软件基金会许可证（PSF-2.0），随 CPython 一同发布",
    )


# Fixed, sorted list: the text changes only with the Python version, never with
# what else happens to be installed or imported.
STDLIB_MODULES = tuple(
    sorted(
        [
            "abc",
            "argparse",
            "array",
            "base64",
            "bisect",
            "calendar",
            "collections",
            "colorsys",
            "contextlib",
            "copy",
            "csv",
            "dataclasses",
            "datetime",
            "decimal",
            "difflib",
            "enum",
            "fnmatch",
            "fractions",
            "functools",
            "glob",
            "hashlib",
            "heapq",
            "html",
            "inspect",
            "io",
            "itertools",
            "json",
            "logging",
            "math",
            "operator",
            "os",
            "pathlib",
            "pickle",
            "pprint",
            "queue",
            "random",
            "re",
            "sched",
            "secrets",
            "shlex",
            "shutil",
            "statistics",
            "string",
            "struct",
            "subprocess",
            "tempfile",
            "textwrap",
            "threading",
            "time",
            "timeit",
            "typing",
            "unittest",
            "urllib",
            "uuid",
            "warnings",
            "weakref",
            "zipfile",
        ]
    )
)


def _ascii(text: str) -> str:
    return text.encode("ascii", "ignore").decode()


def stdlib_docstrings(max_chars: int = 200_000, modules: tuple[str, ...] = STDLIB_MODULES) -> str:
    """English text from the installed Python: docstrings of standard-library modules.

    For each module (in sorted order): the module docstring, then the docstrings
    of its public functions and classes defined in that module, in name order.
    Non-ASCII characters are dropped (keeps the vocabulary small) and the result
    is cut at ``max_chars``. Deterministic for a given Python version; a module
    that fails to import is skipped.
    """
    validate.positive_int("max_chars", max_chars)
    pieces: list[str] = []
    total = 0
    for name in sorted(modules):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        docs = [inspect.getdoc(module) or ""]
        with warnings.catch_warnings():  # typing.io and friends warn when looked at
            warnings.simplefilter("ignore", DeprecationWarning)
            for attr in sorted(vars(module)):
                obj = vars(module)[attr]
                if attr.startswith("_") or getattr(obj, "__module__", None) != name:
                    continue
                if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.isbuiltin(obj):
                    docs.append(inspect.getdoc(obj) or "")
        for doc in docs:
            doc = _ascii(doc).strip()
            if doc:
                pieces.append(doc)
                total += len(doc) + 2
        if total >= max_chars:
            break
    return "\n\n".join(pieces)[:max_chars]


def reference_topics() -> str:
    """The reference manual's topics (``pydoc_data.topics``), in sorted topic order,
    ASCII only, runs of blank lines collapsed to one."""
    from pydoc_data.topics import topics

    text = "\n\n".join(_ascii(topics[name]).strip() for name in sorted(topics))
    return re.sub(r"\n{3,}", "\n\n", text)


def without_repeated_paragraphs(text: str, min_chars: int = 40) -> str:
    """``text`` with every paragraph (text between blank lines) of at least ``min_chars``
    characters kept only where it first occurs.

    Why: the manual's topics repeat whole sections (several keywords share one), and a
    docstring can repeat another. A paragraph that occurs twice can land on both sides
    of a train/validation split, and then the held-out score rewards memorising the
    training text rather than modelling English. Short paragraphs (a lone heading, a
    one-line example) are kept: they are the language's own repetitions.
    """
    validate.positive_int("min_chars", min_chars)
    seen: set[str] = set()
    kept = []
    for paragraph in text.split("\n\n"):
        key = paragraph.strip()
        if len(key) >= min_chars and key in seen:
            continue
        seen.add(key)
        kept.append(paragraph)
    return "\n\n".join(kept)


def capstone_text(max_chars: int | None = None) -> str:
    """The capstone corpus: the reference topics, then all of ``STDLIB_MODULES``'
    docstrings, each repeated paragraph kept once (``without_repeated_paragraphs``); cut
    at ``max_chars`` (default: all of it)."""
    if max_chars is not None:
        validate.positive_int("max_chars", max_chars)
    text = without_repeated_paragraphs(reference_topics() + "\n\n" + stdlib_docstrings(10**9))
    return text if max_chars is None else text[:max_chars]


def more_stdlib_docstrings(exclude: tuple[str, ...] = STDLIB_MODULES) -> str:
    """The docstrings of the standard library's public modules outside ``exclude``, read from
    their source files with ``ast`` (no module is imported, so none runs): each file's module
    docstring, then its classes', functions' and methods' (breadth first, ``ast.walk``). Files in
    test packages and IDLE's are left out; ASCII only. About 1.1 million characters on Python
    3.11; deterministic for a given Python version."""
    root = Path(sysconfig.get_paths()["stdlib"])
    pieces: list[str] = []
    for name in sorted(n for n in sys.stdlib_module_names if not n.startswith("_")):
        if name in exclude or name == "idlelib":
            continue
        module = root / f"{name}.py"
        files = [module] if module.exists() else sorted((root / name).rglob("*.py"))
        for path in files:
            if {"test", "tests"} & set(path.relative_to(root).parts):
                continue
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue
            nodes = [tree] + [
                node
                for node in ast.walk(tree)
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            ]
            for node in nodes:
                doc = _ascii(ast.get_docstring(node) or "").strip()
                if doc:
                    pieces.append(doc)
    return "\n\n".join(pieces)
