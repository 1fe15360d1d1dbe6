"""Check for notebook 12: GPT-2's pre-splitting, written by the learner as a regular expression.

``pre_split(text)`` cuts text into the chunks that byte-pair merges never cross, as GPT-2
does (Radford et al., 2019): the contractions ``'s 't 're 've 'm 'll 'd``, a run of letters
with an optional leading space, a run of digits likewise, a run of other symbols likewise,
and whitespace, a run of which leaves its last space to the word that follows. The chunks
join back into the text. The reference is the course tokenizer's ``PATTERN`` (sealed in
grading); each case is built so that one classic mistake fails first on it, and the mistake
is named by running the same pattern with that mistake.
"""

from __future__ import annotations

import random

import regex

from ..language import say
from ..train.bpe import PATTERN
from ._harness import Checker, mistake, require_function
from .cases import case_seed

_CONTRACTIONS = r"'s|'t|'re|'ve|'m|'ll|'d|"


def _wrong(pattern: str):
    compiled = regex.compile(pattern)
    return lambda text: compiled.findall(text)


def _mistakes():
    """Known mistakes: (description, the wrong function), in the reverse order of the cases
    built to expose them (see ``bpe_codec._encode_mistakes``)."""
    return (
        (
            mistake(
                "letters are only a-z and A-Z: \\p{L} is a letter of any script (é, 注), and it "
                "needs the regex module (Python's re has no \\p{...})",
                "字母只算了 a-z 和 A-Z：\\p{L} 是任何文字的字母（é、注），"
                "而且要用 regex 模块（Python 的 re 不支持 \\p{...}）",
            ),
            _wrong(_CONTRACTIONS + r" ?[a-zA-Z]+| ?[0-9]+| ?[^\sa-zA-Z0-9]+|\s+(?!\S)|\s+"),
        ),
        (
            mistake(
                "a run of spaces before a word is one chunk: it leaves its last space to the "
                "word (\\s+(?!\\S) before \\s+)",
                "单词前的一串空格成了一个块：它应把最后一个空格留给后面的单词"
                "（在 \\s+ 之前先写 \\s+(?!\\S)）",
            ),
            _wrong(_CONTRACTIONS + r" ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+"),
        ),
        (
            mistake(
                "contractions are split: 's 't 're 've 'm 'll 'd are chunks of their own, tried "
                "first",
                "缩写被拆开了：'s 't 're 've 'm 'll 'd 各自是一个块，要最先匹配",
            ),
            _wrong(r" ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"),
        ),
        (
            mistake(
                "letters and digits share a chunk (\\w+): a run of letters (\\p{L}+) and a run "
                "of digits (\\p{N}+) are chunks of their own",
                "字母和数字放进了同一个块（\\w+）：一串字母（\\p{L}+）和一串数字（\\p{N}+）"
                "各自成块",
            ),
            _wrong(_CONTRACTIONS + r" ?[\p{L}\p{N}]+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"),
        ),
        (
            mistake(
                "the space goes after the word: GPT-2 gives a word the space before it "
                "(' ?\\p{L}+'), so ' cat' is one token wherever it stands",
                "空格放在了单词后面：GPT-2 把单词前面的空格归给这个单词（' ?\\p{L}+'），"
                "这样 ' cat' 不论出现在哪里都是同一个词元",
            ),
            _wrong(_CONTRACTIONS + r"\p{L}+ ?|\p{N}+ ?|[^\s\p{L}\p{N}]+ ?|\s+(?!\S)|\s+"),
        ),
        (
            mistake(
                "the spaces are dropped (text.split()): the chunks must join back into the text",
                "空格被丢掉了（text.split()）：这些块连起来必须正好是原文",
            ),
            _wrong(r"\S+"),
        ),
    )


def _random_text(seed: int) -> str:
    """Words, numbers, contractions, punctuation and runs of whitespace, mixed."""
    rng = random.Random(case_seed(seed))
    pieces = []
    for _ in range(40):
        pieces.append(
            rng.choice(
                (
                    "".join(rng.choice("etaoinshrdlu") for _ in range(rng.randint(1, 7))),
                    str(rng.randint(0, 99999)),
                    rng.choice(("don't", "we're", "it's", "I'll", "you've", "I'm", "he'd")),
                    rng.choice(("(", "),", "...", "!?", "==", "#", "-->")),
                    rng.choice(("注意力", "naïve", "über", "模型")),
                )
            )
        )
        pieces.append(rng.choice((" ", " ", " ", "  ", "\n", "\n\n   ", "\t", "")))
    return "".join(pieces)


def _cases():
    return (
        (say("words and a full stop", "单词和句点"), "the cat sat on the mat."),
        (say("letters next to digits", "字母紧挨着数字"), "abc123 x1 version2"),
        (say("contractions", "缩写"), "isn't it? we'll see, they've gone"),
        (say("runs of spaces", "成串的空格"), "a  b\n\n    indented   c"),
        (say("letters beyond ASCII", "ASCII 以外的字母"), "café naïve 注意力。über"),
        (say("random text", "随机文本"), _random_text(31)),
        (say("empty text", "空文本"), ""),
    )


def check_pre_split(fn) -> None:
    """Check ``fn(text: str) -> list[str]``: GPT-2's chunks of ``text`` (contractions; a run of
    letters, of digits or of other symbols, each with an optional leading space; whitespace,
    whose run leaves its last space to the next word), joining back into ``text``. Seven texts
    (words, letters next to digits, contractions, runs of spaces, letters beyond ASCII, random
    text, empty text); the mistake is named when it is a known one."""
    require_function("check_pre_split", fn)
    with Checker("pre_split") as chk:
        for case, text in _cases():
            got = chk.call(case, say("your function", "运行你的函数"), fn, text, hint=_hint())
            if not (isinstance(got, (list, tuple)) and all(isinstance(c, str) for c in got)):
                chk.fail(
                    case,
                    say(
                        f"your function returned {type(got).__name__} {got!r:.80}, expected a "
                        "list of strings",
                        f"你的函数返回了 {type(got).__name__} {got!r:.80}，"
                        "应返回由字符串组成的列表",
                    ),
                    hint=_hint(),
                )
            got, want = list(got), PATTERN.findall(text)
            if got != want:
                first = next(
                    (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                    min(len(got), len(want)),
                )
                looks = next((txt for txt, wrong in _mistakes() if wrong(text) == got), None)
                chk.fail(
                    case,
                    say(
                        f"chunk {first} is {_at(got, first)}, expected {_at(want, first)}",
                        f"第 {first} 个块是 {_at(got, first)}，应为 {_at(want, first)}",
                    ),
                    detail=say(
                        f"text {text!r:.60}: your chunks {got!r:.70}",
                        f"文本 {text!r:.60}：你的块是 {got!r:.70}",
                    ),
                    looks_like=looks,
                    hint=_hint(),
                )
            chk.ok()


def _at(chunks: list[str], index: int) -> str:
    return repr(chunks[index]) if index < len(chunks) else say("missing", "缺失")


def _hint() -> str:
    return say(
        "one regex.findall whose alternatives are tried in order: the contractions first; a "
        "run of letters, of digits or of other symbols, each with an optional space before "
        "it; whitespace last, a run that stops short of its last space when a word follows "
        "(a lookahead)",
        "用一次 regex.findall，各个分支按顺序尝试：先是缩写；然后是一串字母、一串数字或一串"
        "其他符号，前面各可带一个空格；最后是空白：后面跟着单词时，这串空白在最后一个空格之前"
        "停下（用前瞻）",
    )
