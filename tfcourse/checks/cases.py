"""Public cases and grading cases: which numbers a check draws.

In a notebook every check draws its inputs and weights from fixed seeds, so a learner
sees the same cases on every run and can reproduce a failure. Fixed seeds also mean
the cases can be recorded: run the reference on them at home, store its outputs, and
an "implementation" that looks its inputs up in that table passes without computing
anything. The grader therefore runs the checks inside ``grading_cases(salt)`` with a
salt the learner does not know. Every seed a check asks for is then mixed with the
salt: the shapes, settings and sub-checks stay the same (so does the line a passing
check prints), the numbers are new.

The salt lives in a ``contextvars.ContextVar``: the grader runs several checks at once,
each in its own thread and context, each with its own salt.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
from collections.abc import Iterator

from ..language import say

_salt: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "tfcourse_grading_salt", default=None
)


@contextlib.contextmanager
def grading_cases(salt: int | None) -> Iterator[None]:
    """Within the block, in this context only, checks draw salted cases (``None``: public ones).

    A thread started inside the block does not inherit the salt unless it runs in a copy
    of this context (``contextvars.copy_context().run``).
    """
    if salt is not None and (isinstance(salt, bool) or not isinstance(salt, int)):
        raise TypeError(
            say(
                f"the grading salt must be an int or None, got {type(salt).__name__}",
                f"评分盐值必须是 int 或 None，实际得到 {type(salt).__name__}",
            )
        )
    token = _salt.set(salt)
    try:
        yield
    finally:
        _salt.reset(token)


def current_salt() -> int | None:
    """The salt of the enclosing ``grading_cases`` block, or None (the public cases)."""
    return _salt.get()


def case_seed(seed: int) -> int:
    """The seed a check uses for its ``seed``: ``seed`` itself for the public cases, else
    63 bits of SHA-256 of the salt and ``seed`` (fits ``torch.manual_seed``)."""
    salt = _salt.get()
    if salt is None:
        return seed
    # The prefix keeps these hashes apart from any other use of SHA-256 on two numbers.
    digest = hashlib.sha256(f"tfcourse.checks.case_seed/{salt}/{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def case_int(seed: int, public: int, low: int, high: int) -> int:
    """An argument of a check whose cases hold no random numbers (a size, a step count):
    ``public`` for the public cases, an int in ``[low, high]`` drawn from the salted
    ``seed`` in grading, so that a table of the reference's answers recorded at home does
    not cover it."""
    if _salt.get() is None:
        return public
    return low + case_seed(seed) % (high - low + 1)
