"""Every error message the package raises at a learner is said in the reader's language.

Messages are written as pairs where they are raised, ``raise ValueError(say(english,
chinese))``. The scan below reads (with ``ast``) every module a learner's code calls into,
``tfcourse/nn``, ``tfcourse/lab``, ``tfcourse/train``, ``tfcourse/runtime.py`` and
``tfcourse/yours.py``, and names each ``raise <X>Error(...)`` (and ``warnings.warn(...)``)
whose message is a string written there but not wrapped in ``say(...)``. A raise of a
variable, of an exception built elsewhere, or of an exception with no argument is not ours
to translate there.
"""

from __future__ import annotations

import ast
import re

import pytest
import torch

import tfcourse as tc
from tfcourse import language

from helpers import ROOT

PACKAGE = ROOT / "tfcourse"
SCANNED = (
    *sorted((PACKAGE / "nn").rglob("*.py")),
    *sorted((PACKAGE / "lab").rglob("*.py")),
    *sorted((PACKAGE / "train").rglob("*.py")),
    PACKAGE / "runtime.py",
    PACKAGE / "yours.py",
)
CHINESE = re.compile(r"[\u4e00-\u9fff]")


def _name(func: ast.expr) -> str:
    """``ValueError`` for ``ValueError`` and ``errors.ValueError``, else ``""``."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _written_here(message: ast.expr) -> bool:
    """True if ``message`` is text written at this place: a string literal, an f-string, or
    one of them concatenated, ``%``-formatted or ``.format``-ed."""
    if isinstance(message, ast.Constant):
        return isinstance(message.value, str)
    if isinstance(message, ast.JoinedStr):
        return True
    if isinstance(message, ast.BinOp) and isinstance(message.op, (ast.Add, ast.Mod)):
        return _written_here(message.left) or _written_here(message.right)
    if isinstance(message, ast.Call) and isinstance(message.func, ast.Attribute):
        return message.func.attr == "format" and _written_here(message.func.value)
    return False


def _is_warn(call: ast.Call) -> bool:
    """``warnings.warn(...)`` or a bare ``warn(...)``."""
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr == "warn" and isinstance(func.value, ast.Name)
    return isinstance(func, ast.Name) and func.id == "warn"


def english_only(source: str, filename: str = "<source>") -> list[str]:
    """``file:line`` of each raised error or warning in ``source`` whose message is written
    there and not wrapped in ``say(...)``."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            call = node.exc
            if not _name(call.func).endswith("Error"):
                continue
        elif isinstance(node, ast.Call) and _is_warn(node):
            call = node
        else:
            continue
        if call.args and _written_here(call.args[0]):
            found.append(f"{filename}:{node.lineno}")
    return found


def test_the_scan_reads_every_module_it_names():
    assert len(SCANNED) > 30
    assert all(path.is_file() for path in SCANNED)
    names = {path.relative_to(PACKAGE).as_posix() for path in SCANNED}
    assert {"nn/validate.py", "lab/widgets.py", "train/data.py", "runtime.py"} <= names


def test_every_message_raised_at_a_learner_is_a_pair():
    found = [
        place
        for path in SCANNED
        for place in english_only(
            path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix()
        )
    ]
    assert not found, "English-only messages (write them as say(english, chinese)):\n" + "\n".join(
        found
    )


SLIPS = """
from ..language import say
import warnings

def f(x, error):
    if x == 1:
        raise ValueError(f"x must be 0, got {x}")
    if x == 2:
        raise TypeError("x must be an int")
    if x == 3:
        raise errors.KeyError("no key " + str(x))
    if x == 4:
        raise RuntimeError("step {} failed".format(x))
    if x == 5:
        warnings.warn(f"x is {x}")
    if x == 6:
        raise ValueError(say(f"x must be 0, got {x}", f"x 必须是 0，实际是 {x}"))
    if x == 7:
        raise ValueError(str(error)) from error
    if x == 8:
        raise error
    if x == 9:
        raise IndexError
    if x == 10:
        raise IndexError()
    if x == 11:
        raise Interrupted(f"signal {x}")
    warnings.warn(say("x is big", "x 很大"))
"""


def test_the_scan_names_each_english_only_message_and_nothing_else():
    assert english_only(SLIPS, "slips.py") == [
        "slips.py:7",
        "slips.py:9",
        "slips.py:11",
        "slips.py:13",
        "slips.py:15",
    ]


@pytest.fixture
def reader(monkeypatch):
    """Choose the language with ``language.use``; back to the environment's afterwards."""
    monkeypatch.delenv("TFCOURSE_LANG", raising=False)
    try:
        yield language.use
    finally:
        language.use(None)


def _small(**overrides) -> tc.GPTConfig:
    sizes = {"vocab_size": 16, "max_seq_len": 8, "n_layers": 1, "n_heads": 4, "d_model": 32}
    return tc.GPTConfig(**{**sizes, **overrides})


CASES = {
    "n_kv_heads": (lambda: _small(n_kv_heads=3), ValueError, "n_kv_heads=3 must divide n_heads=4"),
    "rope": (
        lambda: _small(d_model=36, positional="rope"),
        ValueError,
        "rotary embeddings need an even head_dim, got 9",
    ),
    "config": (lambda: tc.GPT("small"), TypeError, "config must be a GPTConfig, got str"),
    "generate": (
        lambda: tc.GPT(_small()).generate(torch.zeros(1, 2, dtype=torch.long), -1),
        ValueError,
        "max_new_tokens must be an int >= 0, got -1",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_wrong_argument_is_refused_in_the_readers_language(reader, case):
    build, error, english = CASES[case]
    reader("en")
    with pytest.raises(error) as raised:
        build()
    assert str(raised.value) == english
    reader("zh")
    with pytest.raises(error) as raised:
        build()
    assert CHINESE.search(str(raised.value)), str(raised.value)
    assert str(raised.value) != english
