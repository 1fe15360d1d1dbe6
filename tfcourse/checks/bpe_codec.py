"""Checks for notebook 12: the tokenizer's two directions, written by the learner.

- ``bpe_encode(text, merges)``: GPT-2's chunks (the learner's ``pre_split``; the reference
  is ``tfcourse.train.bpe.PATTERN``), each
  chunk's UTF-8 bytes, then the learned merges applied by *rank*: while the chunk holds a
  pair that was learned, merge the one learned first (``merges[i]`` becomes id ``256 + i``);
- ``bpe_decode(ids, merges)``: each id's bytes (a byte for ids below 256, the two halves'
  bytes joined for a merge), all of them joined, then decoded once: an incomplete character
  becomes U+FFFD, as Python's ``errors="replace"`` makes it.

The reference is the course tokenizer (``tfcourse.train.bpe.ByteBPE``), which
``tests/test_bpe.py`` holds to Hugging Face ``tokenizers``. The cases come in an order that
lets each classic mistake fail first on a case built for it (two merges in one chunk, a merge
of merges, a later merge that occurs more often, a later merge that is the smaller pair, a
merge that would cross a chunk boundary, a character of three bytes; for decoding, a character
split across two tokens and one cut off at the end); when the learner's answer differs, the
same function with a known mistake is run too, and the one that gives the learner's answer is
named. Everything crosses the sealed grader's boundary as plain strings, lists and tuples.
"""

from __future__ import annotations

import itertools
import random
import string

from ..language import say
from ..train.bpe import N_BYTES, PATTERN, ByteBPE, _merge
from ._harness import Checker, mistake, require_function
from .cases import case_seed

Merges = list[tuple[int, int]]

# ---------------------------------------------------------------------------- encoding


def _reference_encode(text: str, merges: Merges) -> list[int]:
    return ByteBPE(merges).encode(text)


def _utf8(chunk: str) -> list[int]:
    return list(chunk.encode("utf-8"))


def _by_choice(
    text: str, merges: Merges, choose, *, chunks=True, once=False, offset=N_BYTES, ids_of=_utf8
):
    """Encode, merging at each step the learned pair ``choose(present, rank)`` picks among
    those present in the chunk (``ids_of(chunk)``, its UTF-8 bytes)."""
    rank = {pair: i for i, pair in enumerate(merges)}
    out: list[int] = []
    for chunk in PATTERN.findall(text) if chunks else [text]:
        ids = ids_of(chunk)
        while present := [p for p in itertools.pairwise(ids) if p in rank]:
            pair = choose(present, rank)
            ids = _merge(ids, pair, offset + rank[pair])
            if once:
                break
        out += ids
    return out


def _earliest(present, rank):
    return min(present, key=rank.__getitem__)


def _most_frequent(present, rank):
    return min(present, key=lambda p: (-present.count(p), rank[p]))


def _smallest(present, rank):
    return min(present)


def _reversed_once(text: str, merges: Merges) -> list[int]:
    out: list[int] = []
    for chunk in PATTERN.findall(text):
        ids = _utf8(chunk)
        for i in reversed(range(len(merges))):
            ids = _merge(ids, merges[i], N_BYTES + i)
        out += ids
    return out


def _encode_mistakes():
    """Known mistakes: (description, the wrong function). Listed in the reverse order of
    the cases built to expose them: a mistake meets its own case after passing every earlier
    one, so among the mistakes that give a learner's wrong answer, the first listed is the
    one whose case this is."""
    return (
        (
            mistake(
                "a character becomes its code point (ord): the ids start from the UTF-8 bytes "
                "(chunk.encode('utf-8'))",
                "一个字符变成了它的码位（ord）：id 应从 UTF-8 字节开始（chunk.encode('utf-8')）",
            ),
            lambda text, merges: _by_choice(
                text, merges, _earliest, ids_of=lambda chunk: [ord(c) for c in chunk]
            ),
        ),
        (
            mistake(
                "merges cross chunk boundaries: cut the text into GPT-2's chunks first "
                "(pre_split), and merge inside each chunk",
                "合并跨过了块的边界：先把文本切成 GPT-2 的块（pre_split），只在每个块内部合并",
            ),
            lambda text, merges: _by_choice(text, merges, _earliest, chunks=False),
        ),
        (
            mistake(
                "the pair merged first is the smallest pair of ids: merge by rank, the pair "
                "learned first",
                "先合并的是 id 最小的那一对：应按排名合并，先合并最早学到的那一对",
            ),
            lambda text, merges: _by_choice(text, merges, _smallest),
        ),
        (
            mistake(
                "the pair merged first is the most frequent one in the chunk: encoding merges by "
                "rank, the pair learned first",
                "先合并的是块里出现次数最多的那一对：编码时按排名合并，先合并最早学到的那一对",
            ),
            lambda text, merges: _by_choice(text, merges, _most_frequent),
        ),
        (
            mistake(
                "each merge is applied once, latest first: a merge can build on an earlier one, "
                "so apply them earliest first",
                "每次合并只用了一遍，而且从最后学到的开始：后学的合并可能建立在先学的合并之上，"
                "所以要从最先学到的开始",
            ),
            _reversed_once,
        ),
        (
            mistake(
                "only one merge is made in each chunk: keep merging while a learned pair is left",
                "每个块只做了一次合并：只要还剩学过的相邻对，就要继续合并",
            ),
            lambda text, merges: _by_choice(text, merges, _earliest, once=True),
        ),
        (
            mistake(
                "merge i becomes id i: the first 256 ids are the bytes, so merge i is id 256 + i",
                "第 i 次合并成了 id i：前 256 个 id 是字节本身，所以第 i 次合并是 id 256 + i",
            ),
            lambda text, merges: _by_choice(text, merges, _earliest, offset=0),
        ),
    )


def _letters() -> tuple[str, str, str, str]:
    """Four lowercase letters in alphabetical order: a, b, c, d in the public cases, drawn
    for each learner in grading (their order, which the cases rely on, stays)."""
    salted = case_seed(21)
    if salted == 21:
        return "a", "b", "c", "d"
    return tuple(sorted(random.Random(salted).sample(string.ascii_lowercase, 4)))  # type: ignore[return-value]


def _random_text(rng: random.Random, n_words: int) -> str:
    """Words of a few letters, numbers, punctuation, newlines and a word in Chinese: text of
    every kind GPT-2's pattern cuts."""
    words = []
    for _ in range(n_words):
        kind = rng.random()
        if kind < 0.75:
            words.append("".join(rng.choice("etaoinshrdl") for _ in range(rng.randint(1, 6))))
        elif kind < 0.85:
            words.append(str(rng.randint(0, 999)))
        elif kind < 0.93:
            words.append(rng.choice(("注意力", "模型", "词元", "é")))
        else:
            words.append(rng.choice((",", ".", "!?", "\n", "  ")))
    return " ".join(words)


def _trained(seed: int) -> tuple[Merges, str]:
    """Merges learned from one random text, and another text to encode with them."""
    rng = random.Random(case_seed(seed))
    merges = ByteBPE.train(_random_text(rng, 300), 40).merges
    return merges, _random_text(rng, 40)


def _encode_cases():
    a, b, c, d = _letters()
    o = {ch: ord(ch) for ch in (a, b, c, d, " ")}
    first = N_BYTES
    zhu = "注".encode()  # three bytes
    return (
        (
            say("two merges in one chunk", "一个块里两次合并"),
            a + b + c + d,
            [(o[a], o[b]), (o[c], o[d])],
        ),
        (say("a merge of merges", "合并之上的合并"), a * 5, [(o[a], o[a]), (first, first)]),
        (
            say("a later merge occurs more often", "后学的合并出现得更多"),
            a + b + c + b + c,
            [(o[a], o[b]), (o[b], o[c])],
        ),
        (
            say("a later merge is the smaller pair", "后学的合并是更小的一对"),
            a + b + c,
            [(o[b], o[c]), (o[a], o[b])],
        ),
        (
            say("a merge across chunks", "跨块的合并"),
            f"{a}{b} {c}{d}",
            [(o[b], o[" "]), (o[a], o[b])],
        ),
        (
            say("a character of three bytes", "三个字节的字符"),
            f"注意 {a}{b}",
            [(zhu[0], zhu[1]), (first, zhu[2]), (o[a], o[b])],
        ),
        (say("empty text", "空文本"), "", [(o[a], o[b])]),
        (say("merges learned from random text", "从随机文本学到的合并"), *_trained(22)[::-1]),
    )


def check_bpe_encode(fn) -> None:
    """Check ``fn(text: str, merges: list[tuple[int, int]]) -> list[int]``: the text cut into
    GPT-2's chunks (``pre_split``, the reference ``PATTERN.findall``), each chunk's UTF-8
    bytes merged by rank (while a
    learned pair is left in the chunk, the one learned first; ``merges[i]`` becomes id
    ``256 + i``). Eight texts (two merges in one chunk, a merge of merges, a later merge that
    occurs more often, a later merge that is the smaller pair, a merge across chunks, a
    character of three bytes, empty text, merges learned from random text); the mistake is
    named when it is a known one."""
    require_function("check_bpe_encode", fn)
    with Checker("bpe_encode") as chk:
        for case, text, merges in _encode_cases():
            got = chk.call(case, say("your function", "运行你的函数"), fn, text, list(merges))
            got = _as_ids(chk, case, got)
            want = _reference_encode(text, merges)
            if got != want:
                looks = next(
                    (txt for txt, wrong in _encode_mistakes() if wrong(text, merges) == got),
                    None,
                )
                chk.fail(
                    case,
                    say(
                        f"{text!r:.60} with merges {merges!r:.80} gave {got!r:.80}, "
                        f"expected {want!r:.80}",
                        f"{text!r:.60} 按合并 {merges!r:.80} 编码得到 {got!r:.80}，"
                        f"应为 {want!r:.80}",
                    ),
                    looks_like=looks,
                    hint=_encode_hint(),
                )
            chk.ok()


# ---------------------------------------------------------------------------- decoding


def _reference_decode(ids: list[int], merges: Merges) -> str:
    return ByteBPE(merges).decode(ids)


def _token_bytes(merges: Merges, *, swapped=False) -> list[bytes]:
    table = [bytes([i]) for i in range(N_BYTES)]
    for left, right in merges:
        table.append(table[right] + table[left] if swapped else table[left] + table[right])
    return table


def _decode_mistakes():
    """Known mistakes: (description, the wrong function), in the reverse order of the cases
    built to expose them (see ``_encode_mistakes``)."""
    return (
        (
            mistake(
                "an incomplete character is dropped (errors='ignore'): errors='replace' shows "
                "it as U+FFFD, as the course's tokenizer does",
                "不完整的字符被丢掉了（errors='ignore'）：应使用 errors='replace'，"
                "像课程的分词器那样显示为 U+FFFD",
            ),
            lambda ids, merges: b"".join(_token_bytes(merges)[t] for t in ids).decode(
                "utf-8", errors="ignore"
            ),
        ),
        (
            mistake(
                "each byte became a character (chr, or Latin-1): the bytes are UTF-8, decode "
                "them with .decode('utf-8', errors='replace')",
                "每个字节变成了一个字符（chr 或 Latin-1）：这些字节是 UTF-8，"
                "要用 .decode('utf-8', errors='replace') 解码",
            ),
            lambda ids, merges: b"".join(_token_bytes(merges)[t] for t in ids).decode("latin-1"),
        ),
        (
            mistake(
                "each token is decoded on its own: a character can be split across tokens, so "
                "join all the bytes first, then decode once",
                "每个词元单独解码了：一个字符的字节可能分在几个词元里，所以要先把所有字节连起来，"
                "再解码一次",
            ),
            lambda ids, merges: "".join(
                _token_bytes(merges)[t].decode("utf-8", errors="replace") for t in ids
            ),
        ),
        (
            mistake(
                "a merge's bytes are its two halves the other way round: merge (a, b) is the "
                "bytes of a, then those of b",
                "合并的字节把两半的顺序弄反了：合并 (a, b) 是 a 的字节在前、b 的字节在后",
            ),
            lambda ids, merges: b"".join(_token_bytes(merges, swapped=True)[t] for t in ids).decode(
                "utf-8", errors="replace"
            ),
        ),
    )


def _decode_known() -> dict[str, str]:
    """Words of an exception's message and the mistake they mean."""
    return {
        "can't decode": mistake(
            "strict decoding raised on an incomplete character: pass errors='replace'",
            "严格解码遇到不完整的字符就抛出了异常：应传入 errors='replace'",
        ),
        "bytes must be in range(0, 256)": mistake(
            "a merge's bytes were made with bytes([a, b]): a half can itself be a merge, so "
            "join the halves' bytes (table[a] + table[b])",
            "合并的字节是用 bytes([a, b]) 做的：其中一半本身可能就是一次合并，"
            "所以要把两半的字节连起来（table[a] + table[b]）",
        ),
    }


def _decode_cases():
    a, b, c, d = _letters()
    o = {ch: ord(ch) for ch in (a, b, c, d)}
    first = N_BYTES
    e_acute, zhu = "é".encode(), "注".encode()
    merges, text = _trained(23)
    return (
        (
            say("bytes and merges of bytes", "字节和字节的合并"),
            [first, o[c], first + 1],
            [(o[a], o[b]), (o[c], o[d])],
        ),
        (
            say("a merge of merges", "合并之上的合并"),
            [first + 1, o[a]],
            [(o[a], o[b]), (first, first)],
        ),
        (
            say("a character split across two tokens", "一个字符分在两个词元里"),
            [o[a], e_acute[0], e_acute[1]],
            [],
        ),
        (say("a character cut off at the end", "末尾的字符不完整"), [o[a], zhu[0], zhu[1]], []),
        (say("empty", "空列表"), [], [(o[a], o[b])]),
        (
            say("a round trip through random text", "随机文本的往返"),
            ByteBPE(merges).encode(text),
            merges,
        ),
    )


def check_bpe_decode(fn) -> None:
    """Check ``fn(ids: list[int], merges: list[tuple[int, int]]) -> str``: each id's bytes (a
    byte below 256; the two halves' bytes joined for ``256 + i``, ``merges[i]``), all joined
    and decoded once as UTF-8, an incomplete character replaced by U+FFFD. Six lists (bytes
    and merges, a merge of merges, a character split across two tokens, one cut off at the
    end, an empty list, a round trip through random text); the mistake is named when it is a
    known one."""
    require_function("check_bpe_decode", fn)
    with Checker("bpe_decode") as chk:
        for case, ids, merges in _decode_cases():
            got = chk.call(
                case,
                say("your function", "运行你的函数"),
                fn,
                list(ids),
                list(merges),
                known=_decode_known(),
                hint=_decode_hint(),
            )
            want = _reference_decode(ids, merges)
            if not isinstance(got, str):
                chk.fail(
                    case,
                    say(
                        f"your function returned {type(got).__name__} {got!r:.80}, expected a str",
                        f"你的函数返回了 {type(got).__name__} {got!r:.80}，应返回 str",
                    ),
                    hint=_decode_hint(),
                )
            if got != want:
                looks = next(
                    (txt for txt, wrong in _decode_mistakes() if wrong(ids, merges) == got),
                    None,
                )
                chk.fail(
                    case,
                    say(
                        f"ids {ids!r:.60} gave {got!r:.60}, expected {want!r:.60}",
                        f"ids {ids!r:.60} 解码得到 {got!r:.60}，应为 {want!r:.60}",
                    ),
                    looks_like=looks,
                    hint=_decode_hint(),
                )
            chk.ok()


# ---------------------------------------------------------------------------- shared


def _as_ids(chk: Checker, case: str, value) -> list[int]:
    """The learner's answer as a list of plain ints, or a failure saying what came back."""
    if isinstance(value, (list, tuple)) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in value
    ):
        return list(value)
    chk.fail(
        case,
        say(
            f"your function returned {type(value).__name__} {value!r:.80}, expected a list of ints",
            f"你的函数返回了 {type(value).__name__} {value!r:.80}，应返回由 int 组成的列表",
        ),
        hint=_encode_hint(),
    )
    raise AssertionError  # not reached: fail raises


def _encode_hint() -> str:
    return say(
        "cut the text with pre_split; each chunk starts as its UTF-8 bytes; while a "
        "neighbouring pair of the chunk was learned, merge the one learned first (lowest index "
        "i in merges) into 256 + i; the chunks' ids, one after another, are the result",
        "用 pre_split 切分文本；每个块从它的 UTF-8 字节开始；只要块里还有学过的相邻对，"
        "就把最早学到的那一对（在 merges 中下标 i 最小）合并成 256 + i；"
        "各块的 id 依次连起来就是结果",
    )


def _decode_hint() -> str:
    return say(
        "give every id its bytes (a byte below 256; for 256 + i, the bytes of merges[i]'s "
        "first half, then its second's), join the bytes of all the ids, and decode them once "
        "as UTF-8 with errors='replace'",
        "给每个 id 找出它的字节（小于 256 的就是一个字节；256 + i 是 merges[i] 前一半的字节接上"
        "后一半的字节），把所有 id 的字节连起来，再用 errors='replace' 按 UTF-8 解码一次",
    )
