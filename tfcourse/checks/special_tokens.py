"""Check for notebook 12: special tokens, written by the learner.

``encode_with_special(text, merges, special)``: each string of ``special`` (a dict such as
``{"<|endoftext|>": 1280}``) that occurs in ``text`` is one token, its id, never split and
never merged with its neighbours; the text between them is encoded by the learner's
``bpe_encode``; where two special strings start at the same place, the longer one wins.
This is how GPT-2's ``<|endoftext|>`` separates documents: no text can produce its id, and
its own characters never become ordinary tokens.

The reference cuts the text with a regular expression of the escaped special strings,
longest first, and encodes the rest with the course tokenizer. Each case is built so that
one classic mistake fails first on it (the special strings encoded as text, written into a
pattern unescaped, or tried shortest first), and the mistake is named.
"""

from __future__ import annotations

import regex

from ..language import say
from ..train.bpe import ByteBPE
from ._harness import Checker, mistake, require_function
from .cases import case_int

Merges = list[tuple[int, int]]


def _split(text: str, special: dict[str, int], *, longest_first=True, escape=True):
    """``text`` cut into ordinary pieces and special strings (special ones at odd indices)."""
    strings = sorted(special, key=len, reverse=True) if longest_first else list(special)
    pattern = "|".join(regex.escape(s) if escape else s for s in strings)
    return regex.split(f"({pattern})", text)


def _encode(text: str, merges: Merges, special: dict[str, int], **split) -> list[int]:
    if not special:
        return ByteBPE(merges).encode(text)
    tokenizer, ids = ByteBPE(merges), []
    for index, piece in enumerate(_split(text, special, **split)):
        if piece is None or piece == "":
            continue
        ids += [special[piece]] if index % 2 and piece in special else tokenizer.encode(piece)
    return ids


def _mistakes():
    """Known mistakes: (description, the wrong function), in the reverse order of the cases
    built to expose them (see ``bpe_codec._encode_mistakes``)."""
    return (
        (
            mistake(
                "the shorter special string won where a longer one starts at the same place: "
                "try the special strings longest first",
                "在同一位置开始时，较短的特殊字符串胜出了：应先尝试最长的特殊字符串",
            ),
            lambda text, merges, special: _encode(text, merges, special, longest_first=False),
        ),
        (
            mistake(
                "the special strings went into the pattern unescaped: | and other characters "
                "mean something to a regular expression (regex.escape)",
                "特殊字符串没有转义就放进了模式：| 等字符在正则表达式里有特殊含义"
                "（用 regex.escape）",
            ),
            lambda text, merges, special: _encode(text, merges, special, escape=False),
        ),
        (
            mistake(
                "the special strings were encoded as text: cut them out first, each becomes "
                "its own id",
                "特殊字符串被当成普通文本编码了：要先把它们切出来，每个变成它自己的 id",
            ),
            lambda text, merges, special: ByteBPE(merges).encode(text),
        ),
    )


def _cases():
    """(case, text, merges, special): the merges glue "<|" and "|>", so a special string
    encoded as text or cut by an unescaped pattern gives other ids than its own."""
    lt, bar, gt = (ord(c) for c in "<|>")
    merges = [(lt, bar), (bar, gt), (ord("h"), ord("i"))]
    eot = case_int(41, 1280, 300, 5000)
    start, user = eot + 1, eot + 2
    return (
        (
            say("one special token", "一个特殊词元"),
            "hi<|endoftext|>hi",
            merges,
            {"<|endoftext|>": eot},
        ),
        (
            say("two specials, one starting the other", "两个特殊词元，一个是另一个的开头"),
            "<|start|><|start|>user|>hi",
            merges,
            {"<|start|>": start, "<|start|>user|>": user, "<|endoftext|>": eot},
        ),
        (
            say("specials side by side, at both ends", "首尾相接的特殊词元"),
            "<|endoftext|><|endoftext|>hi <|endoftext|>",
            merges,
            {"<|endoftext|>": eot},
        ),
        (
            say("text that looks like a special token but is not one", "像特殊词元却不是的文本"),
            "<|endoftext| and <|hi|>",
            merges,
            {"<|endoftext|>": eot},
        ),
        (say("no special strings", "没有特殊字符串"), "hi <|endoftext|>", merges, {}),
        (say("no text", "没有文本"), "", merges, {"<|endoftext|>": eot}),
    )


def check_encode_with_special(fn) -> None:
    """Check the encoding with special tokens,
    ``fn(text: str, merges: list[tuple[int, int]], special: dict[str, int]) -> list[int]``:
    each special string in ``text`` is its id, whole (the longer one where two
    start at the same place), and the text between them is encoded by ``bpe_encode``. Six
    texts (one special token, one special string starting another, specials side by side and
    at both ends, text that looks like a special token, no special strings, no text); the
    mistake is named when it is a known one."""
    require_function("check_encode_with_special", fn)
    with Checker("encode_with_special") as chk:
        for case, text, merges, special in _cases():
            got = chk.call(
                case,
                say("your function", "运行你的函数"),
                fn,
                text,
                list(merges),
                dict(special),
                hint=_hint(),
            )
            if not (
                isinstance(got, (list, tuple))
                and all(isinstance(t, int) and not isinstance(t, bool) for t in got)
            ):
                chk.fail(
                    case,
                    say(
                        f"your function returned {type(got).__name__} {got!r:.80}, expected a "
                        "list of ints",
                        f"你的函数返回了 {type(got).__name__} {got!r:.80}，应返回由 int 组成的列表",
                    ),
                    hint=_hint(),
                )
            got, want = list(got), _encode(text, merges, special)
            if got != want:
                looks = next(
                    (txt for txt, wrong in _mistakes() if wrong(text, merges, special) == got),
                    None,
                )
                chk.fail(
                    case,
                    say(
                        f"{text!r:.50} gave {got!r:.70}, expected {want!r:.70}",
                        f"{text!r:.50} 编码得到 {got!r:.70}，应为 {want!r:.70}",
                    ),
                    detail=say(f"special: {special!r:.90}", f"特殊词元：{special!r:.90}"),
                    looks_like=looks,
                    hint=_hint(),
                )
            chk.ok()


def _hint() -> str:
    return say(
        "cut the text with regex.split on a group of the escaped special strings, longest "
        "first; a piece that is a special string is its id, any other piece goes through "
        "bpe_encode",
        "用 regex.split 按一个分组切分文本，分组里是转义后的特殊字符串，最长的在前；"
        "是特殊字符串的片段变成它的 id，其他片段交给 bpe_encode",
    )
