"""The grader's end of a worker: its messages, its replies, its time, and the ways it fails.

``Channel`` writes a request and waits for the reply, never longer than a cell's timeout
nor past the notebook's ``Budget``; a reply that does not add up, a worker that dies or
does not answer, each becomes one of the errors below, and the report's reason for it
(``reason_of``). The stand-ins that make the learner's code look local to a check are
``proxy.py``.
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import select
import signal
import threading
import time
import weakref
from dataclasses import dataclass
from typing import ClassVar

from ...language import say
from ..records import Reason
from . import protocol

# Exceptions a learner's code may raise that a check treats by type; others arrive as
# RuntimeError("TypeName: message").
_BUILTIN_ERRORS = {
    cls.__name__: cls
    for cls in (
        ValueError,
        TypeError,
        RuntimeError,
        NotImplementedError,
        AssertionError,
        IndexError,
        KeyError,
        AttributeError,
        ZeroDivisionError,
        ArithmeticError,
        OverflowError,
    )
}


class WorkerFailed(Exception):
    """The worker died or stopped answering (not the learner's exception). ``reason`` is
    the report's word for it."""

    reason: ClassVar[Reason] = "worker-died"


class TimedOut(WorkerFailed):
    """The worker did not answer in time (the learner's code hung or ran too long)."""

    reason = "timeout"


class OutOfTime(TimedOut):
    """The notebook's budget of wall time (``Budget``) ran out while the worker ran."""


class ProtocolBroken(WorkerFailed):
    """A reply that does not add up (counts, shapes, dtypes, sizes): data from an adversary."""

    reason = "protocol"


class SealedUnsupported(WorkerFailed):
    """The check asked for something the stand-ins cannot forward: the exercise cannot be
    judged sealed, so it earns nothing (there is no other way to judge it)."""

    reason = "not-gradeable"


def reason_of(error: BaseException | None) -> Reason:
    """The report's reason for a failed check: the worker's failure found anywhere in the
    exception's chain, else "error" (the check's own verdict)."""
    while error is not None:
        if isinstance(error, WorkerFailed):
            return error.reason
        if isinstance(error, protocol.ProtocolError):
            return ProtocolBroken.reason
        error = error.__cause__ or error.__context__
    return "error"


FROM_WORKER = "tfcourse_raised_in_worker"


def from_worker(error: BaseException | None) -> bool:
    """Whether ``error``, or an exception in its chain, came from the worker: the learner's
    code raised it, or the worker failed. A check that raises anything else has a bug."""
    while error is not None:
        if getattr(error, FROM_WORKER, False) or isinstance(
            error, (WorkerFailed, protocol.ProtocolError)
        ):
            return True
        error = error.__cause__ or error.__context__
    return False


def broken(english: str, chinese: str) -> ProtocolBroken:
    return ProtocolBroken(
        say(f"the worker's reply does not add up: {english}", f"隔离进程的应答对不上：{chinese}")
    )


@dataclass(frozen=True)
class Budget:
    """A notebook's wall time for its workers, all of them together: ``seconds`` in all,
    until ``at`` (``time.monotonic``). Unbounded by default."""

    seconds: float = math.inf
    at: float = math.inf

    @classmethod
    def starting_now(cls, seconds: float) -> Budget:
        return cls(seconds, time.monotonic() + seconds)


# The names the learner's code called, kept per exercise for the report (the worker sends
# at most 200 per request): the report stays readable whatever a worker sends.
MAX_CALLED, MAX_NAME = 200, 120

# How often a wait for a reply looks whether the channel's reader is still there.
READER_CHECK_SECONDS = 0.5


# Every channel whose worker may still run, so that a grader told to stop ends them all.
_open: weakref.WeakSet = weakref.WeakSet()
_stopping = False


def stop() -> None:
    """Kill every channel's worker, and open no more: the grader was told to stop (a signal
    handler: ``command.run``). It waits for nothing, so it may interrupt anything: each
    session then fails at once and cleans up after itself in its own thread (``kill``), as
    at a normal end."""
    global _stopping
    _stopping = True
    while True:
        try:
            channels = list(_open)
            break
        except RuntimeError:  # a channel opened during the copy: copy again
            continue
    for channel in channels:
        with contextlib.suppress(OSError):
            channel.process.send_signal(signal.SIGKILL)


def resume() -> None:
    """Open channels again after ``stop``, once every session has ended (``command.run``)."""
    global _stopping
    _stopping = False


class Channel:
    """The grader's end of one worker process: messages out and replies in. Every wait (a
    reply, or a message the worker is slow to read) lasts at most ``timeout`` seconds, and
    ends when the notebook's ``budget`` does. Raises ``WorkerFailed`` (the process killed)
    when the grader is stopping (``stop``)."""

    def __init__(self, process, timeout: float, budget: Budget = Budget()):
        self.process, self.timeout, self.budget = process, timeout, budget
        _open.add(self)
        if _stopping:
            self.kill()
            raise WorkerFailed(say("the grader is stopping", "评分器正在停止"))
        self.seen: list[str] = []  # the shortcuts the worker saw running (references.py)
        self.called: set[str] = set()  # what the learner's code called (the teacher's report)
        self.exercise = ""  # the exercise its requests serve: the one its watch looks for
        self._replies: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _wait(self, timeout: float | None) -> tuple[float, bool]:
        """``(seconds to wait, whether the notebook's budget is what ends the wait)``."""
        timeout = self.timeout if timeout is None else timeout
        left = max(0.0, self.budget.at - time.monotonic())
        return min(timeout, left), left < timeout

    def _late(self, seconds: float, out_of_budget: bool) -> TimedOut:
        """Kill the worker; the error that says why."""
        self.kill()
        if out_of_budget:
            return OutOfTime(
                say(
                    f"the notebook's time ran out ({self.budget.seconds:g} s of wall time for "
                    "all of its cells and checks)",
                    f"这个 notebook 的时间用完了（它的全部单元格和检查一共只有 "
                    f"{self.budget.seconds:g} 秒）",
                )
            )
        return TimedOut(
            say(
                f"no answer within {seconds:g} s (the learner's code hung or ran too long)",
                f"{seconds:g} 秒内没有应答（学员的代码卡住了或运行时间过长）",
            )
        )

    def send(self, header: dict, tensors: dict | None = None) -> None:
        """Write one message. Non-blocking, so that a worker that stops reading (a stopped
        process, a cell that took over the channel) holds the grader no longer than a
        reply may take. Raises ``WorkerFailed``."""
        data = memoryview(protocol.encode_message(header, tensors))
        seconds, out_of_budget = self._wait(None)
        end = time.monotonic() + seconds
        try:
            fd = self.process.stdin.fileno()
            os.set_blocking(fd, False)
            writable = select.poll()  # not select(): a grader with many jobs has high fds
            writable.register(fd, select.POLLOUT)
            while data:
                left = end - time.monotonic()
                if left <= 0 or not writable.poll(left * 1000):
                    raise self._late(seconds, out_of_budget)
                try:
                    data = data[os.write(fd, data) :]
                except BlockingIOError:
                    continue
        except (OSError, ValueError) as error:  # ValueError: the channel was closed here
            raise WorkerFailed(
                say(f"the worker stopped ({error})", f"隔离进程已停止（{error}）")
            ) from None

    def _read(self) -> None:
        try:
            while True:
                self._replies.put(protocol.read_message(self.process.stdout))
        except BaseException as error:  # noqa: BLE001 - reported to the waiting request
            self._replies.put(error)

    def receive(self, timeout: float | None = None) -> tuple[dict, dict]:
        seconds, out_of_budget = self._wait(timeout)
        end = time.monotonic() + seconds
        while True:
            # In slices: a channel whose reader has stopped (the worker's end was reported
            # to an earlier request) will never answer, and waiting out the timeout on it
            # would hold the notebook for nothing.
            try:
                reply = self._replies.get(timeout=min(READER_CHECK_SECONDS, seconds))
                break
            except queue.Empty:
                if not self._reader.is_alive() and self._replies.empty():
                    raise WorkerFailed(
                        say(
                            "the worker stopped (its channel is closed)",
                            "隔离进程已停止（它的通道已关闭）",
                        )
                    ) from None
                if time.monotonic() >= end:
                    raise self._late(seconds, out_of_budget) from None
        if isinstance(reply, protocol.ProtocolError):
            self.kill()
            raise broken(str(reply), str(reply))
        if isinstance(reply, BaseException):
            raise WorkerFailed(
                say(
                    f"the worker stopped ({type(reply).__name__}: {reply})",
                    f"隔离进程已停止（{type(reply).__name__}: {reply}）",
                )
            )
        header, tensors = reply
        seen, called = header.get("seen", []), header.get("called", [])
        if not (isinstance(seen, list) and all(isinstance(t, str) for t in seen)):
            raise broken("the shortcuts seen", "看到的捷径")
        if not (isinstance(called, list) and all(isinstance(t, str) for t in called)):
            raise broken("what was called", "调用过的函数")
        self.seen = seen
        room = max(0, MAX_CALLED - len(self.called))  # per exercise (session._judge clears it)
        self.called.update(name[:MAX_NAME] for name in called[:room])
        return header, tensors

    def request(self, header: dict, tensors: dict | None = None) -> tuple[dict, dict]:
        self.send(dict(header, exercise=self.exercise), tensors)
        reply, blob = self.receive()
        if "bad_request" in reply:  # the worker could not read the request; it goes on
            said = str(reply["bad_request"])[:200]
            raise ProtocolBroken(
                say(
                    f"the worker could not read the check's request: {said}",
                    f"隔离进程读不懂检查发来的请求：{said}",
                )
            )
        if "error" in reply:
            raised = reply["error"]
            if not isinstance(raised, dict):
                raise broken("an error that is not an object", "错误信息不是一个对象")
            kind = _BUILTIN_ERRORS.get(str(raised.get("type")))
            message = str(raised.get("message", ""))
            learners = (
                RuntimeError(f"{raised.get('type')}: {message}") if kind is None else kind(message)
            )
            # Marked: the grader tells the learner's errors from a bug in its own checks.
            setattr(learners, FROM_WORKER, True)
            raise learners
        return reply, blob

    def kill(self) -> None:
        """End the worker and what it leaves (its sandbox's folder and control group, its
        user's processes and files), even when its process has already ended: each kind's
        ``kill`` does only what is left to do."""
        self.process.kill()
