"""Check for notebook 08: ``get_batch``, random windows of a token stream as inputs and targets.

The learner's ``get_batch(data, batch_size, seq_len, *, generator)`` and the reference draw
their window starts from twin ``torch.Generator``s, one ``torch.randint`` call per batch, so a
correct function returns exactly the reference's ``(x, y)``. When they differ, the same
function with one known mistake (``MISTAKES``) is run with a fresh twin, and the one that
reproduces the learner's batch is named.
"""

from __future__ import annotations

import torch

from ..language import say
from ._harness import Checker, Mistakes, mistake, require_function
from .cases import case_int, case_seed


def _past_the_end() -> str:
    return mistake(
        "the starts can run past the end of the data (torch.randint(0, len(data) - seq_len + "
        "1, ...) or len(data)): a window takes seq_len + 1 tokens (y's last one too), so the "
        "last start is len(data) - seq_len - 1; torch.randint's upper bound is already "
        "exclusive",
        "起点可能越过数据的末尾（torch.randint(0, len(data) - seq_len + 1, ...) 或 "
        "len(data)）：一个窗口要占 seq_len + 1 个词元（包括 y 的最后一个），所以最后一个起点是 "
        "len(data) - seq_len - 1；torch.randint 的上界本来就不包含在内",
    )


def _mistakes() -> dict[str, str]:
    return {
        "targets-not-shifted": mistake(
            "the targets are the inputs themselves: y is the window shifted by one token, "
            "data[s + 1 : s + seq_len + 1]",
            "目标就是输入本身：y 应该是错开一个词元的窗口，data[s + 1 : s + seq_len + 1]",
        ),
        "last-window-never-drawn": mistake(
            "the starts stop one short (torch.randint(0, len(data) - seq_len - 1, ...)): the "
            "last window is never drawn; torch.randint's upper bound is already exclusive",
            "起点的范围少了一个（torch.randint(0, len(data) - seq_len - 1, ...)）：最后一个窗口"
            "永远抽不到；torch.randint 的上界本来就不包含在内",
        ),
        "one-start-for-all": mistake(
            "one start is drawn for the whole batch: every row is the same window",
            "整个批次只抽了一个起点：每一行都是同一个窗口",
        ),
        "separate-draws": mistake(
            "x and y come from two separate draws of starts: y must be x's own window shifted by "
            "one, so draw the starts once",
            "x 和 y 分别抽了两次起点：y 必须是 x 自己的窗口错开一位，所以起点只抽一次",
        ),
        "start-past-the-end": _past_the_end(),
        "start-anywhere": _past_the_end(),
    }


MISTAKES = Mistakes(_mistakes)
# The mistakes whose starts may leave no room for a window, each with the bound its
# torch.randint draws below, given len(data) and seq_len.
PAST_THE_END = {
    "start-past-the-end": lambda n, seq_len: n - seq_len + 1,
    "start-anywhere": lambda n, seq_len: n,
}
# What the learner's code raises when a window runs past the end: an index out of range
# (data[starts[:, None] + offsets], unfold), windows of unequal length (torch.stack of
# slices, torch.tensor of lists), a failed device-side assert (the same index on a GPU).
PAST_THE_END_ERRORS = (
    "out of bounds",
    "stack expects each tensor to be equal size",
    "expected sequence of length",
    "device-side assert",
)


def _high(n: int, seq_len: int, mistake_key: str = "") -> int:
    """The exclusive upper bound of the starts: ``n - seq_len``, or a mistake's."""
    if mistake_key in PAST_THE_END:
        return PAST_THE_END[mistake_key](n, seq_len)
    return n - seq_len - (mistake_key == "last-window-never-drawn")


def _batch(data, batch_size, seq_len, generator, mistake_key=""):
    """The reference batch, or the same with one of ``MISTAKES`` (by key) made; None where
    a start leaves no room for its window (the learner's code could not have returned)."""
    high = _high(len(data), seq_len, mistake_key)
    size = (1,) if mistake_key == "one-start-for-all" else (batch_size,)
    starts = torch.randint(0, high, size, generator=generator, device=data.device)
    if mistake_key in PAST_THE_END and int(starts.max()) > len(data) - seq_len - 1:
        return None
    starts = starts.expand(batch_size)
    offsets = torch.arange(seq_len, device=data.device)
    x = data[starts[:, None] + offsets]  # (B, T)
    if mistake_key == "separate-draws":
        starts = torch.randint(0, high, size, generator=generator, device=data.device)
    y = data[starts[:, None] + offsets + (mistake_key != "targets-not-shifted")]  # (B, T)
    return x, y


def _hint() -> str:
    return say(
        "starts = torch.randint(0, len(data) - seq_len, (batch_size,), generator=generator, "
        "device=data.device); x stacks data[s : s + seq_len], y data[s + 1 : s + seq_len + 1]",
        "starts = torch.randint(0, len(data) - seq_len, (batch_size,), generator=generator, "
        "device=data.device)；x 由 data[s : s + seq_len] 堆叠而成，"
        "y 由 data[s + 1 : s + seq_len + 1] 堆叠而成",
    )


def check_get_batch(fn) -> None:
    """Check ``fn(data, batch_size, seq_len, *, generator=None) -> (x, y)``.

    ``data (N,)`` holds token ids. One call draws ``batch_size`` window starts with
    ``torch.randint(0, N - seq_len, (batch_size,), generator=generator, device=data.device)``
    and returns ``x (B, T)``, the windows ``data[s : s + T]``, and ``y (B, T)``, the same
    windows shifted by one, ``data[s + 1 : s + T + 1]``: ``y[:, t]`` is the token after
    ``x[:, t]``. Both on ``data``'s device; ``data`` unchanged.

    Sub-checks (3): a stream of a few hundred tokens; a stream of exactly ``seq_len + 1``
    tokens (one window only, start 0); ``data`` unchanged. Names the mistake when it is a
    known one (``MISTAKES``).
    """
    require_function("check_get_batch", fn)
    name = getattr(fn, "__name__", "fn")
    with Checker("get_batch") as chk:
        gen = chk.generator(80)
        seen_all = []
        for number, (n_tokens, batch_size, seq_len) in enumerate(
            (
                (case_int(81, 300, 200, 400), 8, case_int(82, 16, 8, 24)),
                (13, 4, 12),  # one window only: start 0
            )
        ):
            case = say(
                f"{n_tokens} tokens, batch {batch_size}, seq_len {seq_len}",
                f"{n_tokens} 个词元，批大小 {batch_size}，seq_len {seq_len}",
            )
            data = torch.randint(50, (n_tokens,), generator=gen).to(chk.device)
            seed = case_seed(83 + number)

            def twin(seed=seed):
                return torch.Generator(chk.device).manual_seed(seed)

            want = _batch(data, batch_size, seq_len, twin())
            seen = data.clone()
            known = {}
            if n_tokens == seq_len + 1:  # one window only: a bound one short draws nothing
                known["to be less than"] = MISTAKES["last-window-never-drawn"]
            if _runs_past_the_end(data, batch_size, seq_len, twin):
                known |= dict.fromkeys(PAST_THE_END_ERRORS, _past_the_end())
            got = chk.call(
                case,
                say(
                    f"calling your {name}(data, {batch_size}, {seq_len}, ...)",
                    f"调用你的 {name}(data, {batch_size}, {seq_len}, ...)",
                ),
                fn,
                seen,
                batch_size,
                seq_len,
                generator=twin(),
                known=known,
                hint=_hint(),
            )
            if not (
                isinstance(got, (tuple, list))
                and len(got) == 2
                and all(
                    isinstance(t, torch.Tensor) and tuple(t.shape) == (batch_size, seq_len)
                    for t in got
                )
            ):
                chk.fail(
                    case,
                    say(
                        f"returned {type(got).__name__}, expected (x, y), two tensors of "
                        f"shape {(batch_size, seq_len)}",
                        f"返回了 {type(got).__name__}，应返回 (x, y)：两个形状为 "
                        f"{(batch_size, seq_len)} 的张量",
                    ),
                    hint=_hint(),
                )
            x, y = (t.to(chk.device).long() for t in got)
            if not (torch.equal(x, want[0]) and torch.equal(y, want[1])):
                looks = next(
                    (
                        text
                        for key, text in MISTAKES.items()
                        if _equal((x, y), _replay(data, batch_size, seq_len, twin(), key))
                    ),
                    None,
                )
                part = "x" if not torch.equal(x, want[0]) else "y"
                chk.fail(
                    case,
                    say(
                        f"{part} differs from the reference's (both drew from twin generators)",
                        f"{part} 与参考实现不同（两个生成器给出的随机数相同）",
                    ),
                    looks_like=looks,
                    hint=_hint(),
                )
            seen_all.append((case, data, seen))
            chk.ok()
        for case, data, seen in seen_all:
            chk.unchanged(case, "data", data, seen)
        chk.ok()


def _runs_past_the_end(data, batch_size, seq_len, twin) -> bool:
    """Whether a mistake of ``PAST_THE_END``, drawing from ``twin()``, would draw a start
    that leaves no room for its window: the learner's code making it then raises."""
    return any(_batch(data, batch_size, seq_len, twin(), key) is None for key in PAST_THE_END)


def _replay(data, batch_size, seq_len, generator, key):
    """``_batch`` with mistake ``key``, or None where that mistake cannot even draw."""
    try:
        return _batch(data, batch_size, seq_len, generator, key)
    except RuntimeError:
        return None


def _equal(a, b) -> bool:
    return b is not None and all(torch.equal(p, q) for p, q in zip(a, b, strict=True))
