"""Shared pytest fixtures and the check-test helpers ``passes`` / ``fails``.

Keep this file small: helpers used by one test file live in that file; what several share
is in ``helpers.py`` (and the catalogue of wrong implementations in ``mutants/``). The test
files import them with ``from conftest import passes, fails`` and ``from helpers import
...`` (``tests/`` is on ``sys.path`` because it has no ``__init__.py``); never from
another test file.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest
import torch

from tfcourse import language

# Hugging Face models in the tests are built from configs with random weights;
# nothing may be downloaded, so make any accidental hub access fail fast.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Notebook 12 trains for about ten minutes; the tests run it in its short mode (a few
# steps, which proves every cell runs). Kernels inherit this environment.
os.environ.setdefault("TFCOURSE_CAPSTONE", "short")
# The grader's secret (it draws each learner's cases) lives in a folder of the test run's
# own, never in the developer's config folder, removed when the run ends (the processes the
# run starts inherit it).
if "TFCOURSE_GRADING_SECRET" not in os.environ:
    _SECRET_FOLDER = tempfile.mkdtemp(prefix="tfcourse-tests-")
    atexit.register(shutil.rmtree, _SECRET_FOLDER, True)
    os.environ["TFCOURSE_GRADING_SECRET"] = os.path.join(_SECRET_FOLDER, "grading-secret")

# The tests use tiny tensors: one intra-op thread is as fast, and on a busy or
# small machine it avoids OpenMP threads spinning against each other (measured
# here: a test module took 54 s with 2 threads under load, 2.7 s with 1).
# Notebook kernels run in their own processes and are not affected.
torch.set_num_threads(1)


# tests/test_diagnoses.py runs the check tests again with this set: every diagnosis a failing
# check gives ("looks like: ...") is appended to the file it names.
if os.environ.get("TFCOURSE_RECORD_DIAGNOSES"):
    from tfcourse.checks._harness import Checker

    _fail = Checker.fail

    def _recording_fail(self, case, problem, *, looks_like=None, **rest):
        if looks_like:
            with open(os.environ["TFCOURSE_RECORD_DIAGNOSES"], "a", encoding="utf-8") as record:
                record.write(looks_like.replace("\n", " ") + "\n")
        return _fail(self, case, problem, looks_like=looks_like, **rest)

    Checker.fail = _recording_fail  # type: ignore[method-assign]


def pytest_collection_modifyitems(items):
    """The tests marked ``long(seconds)`` first, longest first, and those marked ``last``
    last (the rest keep their order between them). ``make test``
    runs the slow set with ``--dist load --maxschedchunk 1``: pytest-xdist then hands out the
    tests in this order, a test at a time, to whichever worker is free. Started first, the
    longest tests end before the short ones run out; a long test started last keeps the run
    going while the other worker idles. (``--dist worksteal`` would hand one worker the first
    half of the list, every long test included.)"""

    def place(item) -> tuple[int, float]:
        if long := item.get_closest_marker("long"):
            return 0, -long.args[0]
        return (2 if item.get_closest_marker("last") else 1), 0

    items.sort(key=place)


def pytest_terminal_summary(terminalreporter):
    """Skipped tests, one line per reason with their number (pytest's own ``-rs`` would
    give one line per test function: dozens for a machine without the sandbox)."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    for reason, count in sorted(reasons.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"SKIPPED {count} test{'s' * (count > 1)}: {reason}")


def _python_passable() -> None:
    """Root starts bubblewrap (and a worker of ``--sandbox users``) as a fresh unprivileged
    uid, which must be able to start this Python: make the folders above it passable, not
    listable, by other users, as docs/grading.md asks of a grading machine."""
    import stat
    import sys
    from pathlib import Path

    for path in (os.path.realpath(sys.executable), os.path.realpath(sys.prefix)):
        for folder in Path(path).parents:
            mode = folder.stat().st_mode
            if not mode & stat.S_IXOTH:
                folder.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)


def pytest_configure(config):
    """As root, prepare the machine before anything probes the sandbox: the probe is cached
    per process, and a test module may probe at collection."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        _python_passable()


@pytest.fixture(autouse=True)
def _sandbox(request):
    """A test marked ``sandbox`` runs only where the grader can seal a worker: elsewhere it
    is skipped, one line for all of them (``helpers.needs_sandbox``)."""
    if request.node.get_closest_marker("sandbox"):
        from helpers import needs_sandbox

        needs_sandbox()


@pytest.fixture(autouse=True)
def _seed_torch():
    """Every test starts from the same global RNG state, whatever ran before it."""
    torch.manual_seed(0)


@pytest.fixture
def english_first(monkeypatch):
    """The test starts in English (no TFCOURSE_LANG, nothing chosen) and leaves the process
    language as it found it (a test file of messages uses it for every test)."""
    monkeypatch.delenv("TFCOURSE_LANG", raising=False)
    language.use(None)
    yield
    language.use(None)


@pytest.fixture
def zh(monkeypatch, english_first):
    """The reader is Chinese: TFCOURSE_LANG=zh."""
    monkeypatch.setenv("TFCOURSE_LANG", "zh")
    language.use(None)


@pytest.fixture
def grading_setup():
    """How the tests start sealed workers: one thread, a 60 s limit per cell, the sandbox
    (skipped without it, ``helpers.needs_sandbox``)."""
    from tfcourse.grade.sealed.session import Setup, grading_env

    from helpers import needs_sandbox

    needs_sandbox()
    return Setup(env=grading_env(1), timeout=60)


@pytest.fixture(scope="module")
def solution():
    """The fixture course notebook (tests/fixtures/solutions/99_fixture.ipynb), read once per
    test module."""
    from tfcourse.course import notebook_format

    from helpers import FIXTURE

    return notebook_format.read_notebook(FIXTURE)


@pytest.fixture
def learner(solution):
    """The learner notebook generated from ``solution``: every exercise a stub."""
    from tfcourse.authoring.build import make_learner

    return make_learner(solution, "99_fixture")


@pytest.fixture
def tiny_config():
    """A GPT small enough for per-test use: 2 layers, width 32, 4 heads, vocab 50, context 16."""
    from tfcourse import GPTConfig

    return GPTConfig(vocab_size=50, max_seq_len=16, n_layers=2, n_heads=4, d_model=32)


def passes(check, obj, capsys, name):
    """``check(obj)`` prints exactly one line, ``"<name>: n/n checks passed"`` with n > 0."""
    check(obj)
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(f"{name}: ") and out[0].endswith("checks passed"), (
        out
    )
    n, m = out[0].split(": ")[1].split()[0].split("/")
    assert n == m and int(n) > 0


def fails(check, obj, *patterns):
    """``check(obj)`` raises ``AssertionError`` whose message contains every pattern; returns it."""
    with pytest.raises(AssertionError) as info:
        check(obj)
    message = str(info.value)
    for pattern in patterns:
        assert pattern in message, message
    return message


def named_mistake(message: str) -> str:
    """What a check's failure names as the likely mistake: its "looks like: " line."""
    for line in message.splitlines()[1:]:
        if line.startswith("  looks like: "):
            return line.removeprefix("  looks like: ")
    return ""


def verdict_lines(message: str) -> str:
    """A check's failure without its case and hint lines: what differed (the first line), by
    how much or what was raised, and the likely mistake ("looks like: ..."). Where a test
    looks for the cause, so that the case's own text cannot name it."""
    skip = ("  case: ", "  用例：", "  hint: ", "  提示：")
    return "\n".join(line for line in message.splitlines() if not line.startswith(skip))


@pytest.fixture(scope="session")
def separate_users():
    """The grader's second set-up, a fresh unprivileged user per worker (``--sandbox
    users``): skipped without root. Prepares the machine as a teacher's container must be
    (docs/grading.md) and leaves it so: the course's secret folders readable by root only,
    the folders above this Python passable (not listable) by other users, so that a fresh
    user can start it. Fails if the grader's own probe still finds a way in."""
    import stat
    from pathlib import Path

    from tfcourse.grade import command
    from tfcourse.grade.sealed import users
    from tfcourse.grade.sealed.seal import package_dir

    if why := users.available():
        pytest.skip(why)
    root = Path(__file__).resolve().parents[1]
    _python_passable()
    fixtures = root / "tests" / "fixtures" / "solutions"
    for path in (package_dir(), root / "solutions", root / ".git", fixtures):
        if path.exists():
            path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o077)
    with tempfile.TemporaryDirectory() as folder:
        why = users.probe(command.private_paths((fixtures,)), Path(folder))
    assert why == "", why
