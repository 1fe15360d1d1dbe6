"""Checks for notebook 12: the two steps of byte-pair encoding the learner writes.

- ``most_frequent_pair(ids)``: the pair of neighbouring ids that occurs most often, ties
  going to the smaller pair (so a corpus always learns the same merges);
- ``merge_pair(ids, pair, new_id)``: ``ids`` with every occurrence of ``pair``, read left to
  right, replaced by ``new_id``.

The references are the course tokenizer's own (``tfcourse.train.bpe``). Each case is a list
of ids built to expose one classic mistake (overlapping runs such as ``a a a``, a pair at the
very end, ties); when the learner's answer differs, the same function with a known mistake
(``_pair_mistakes``, ``_merge_mistakes``) is run too, and the one that gives the learner's
answer is named. Everything crosses the sealed grader's boundary as plain lists and tuples.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter

from ..language import say
from ..train.bpe import _merge
from ._harness import Checker, mistake, require_function
from .cases import case_int, case_seed


def _reference_pair(ids: list[int]) -> tuple[int, int]:
    counts = Counter(itertools.pairwise(ids))
    return min(counts, key=lambda pair: (-counts[pair], pair))


def _first_seen(ids):
    counts = Counter(itertools.pairwise(ids))
    return counts.most_common(1)[0][0]  # ties: the pair seen first


def _largest(ids):
    counts = Counter(itertools.pairwise(ids))
    return max(counts, key=lambda pair: (counts[pair], pair))


def _no_overlap(ids):
    counts, i = Counter(), 0
    while i + 1 < len(ids):
        counts[ids[i], ids[i + 1]] += 1
        i += 2 if ids[i] == ids[i + 1] else 1  # "a a a" counted as one (a, a)
    return min(counts, key=lambda pair: (-counts[pair], pair))


def _skips_last(ids):
    return _reference_pair(ids[:-1])  # range(len(ids) - 2): the last pair missed


def _pair_mistakes():
    """Known mistakes: (description, the wrong function)."""
    return (
        (
            mistake(
                "ties go to the pair seen first (Counter.most_common), not to the smaller pair",
                "并列时选了最先出现的那一对（Counter.most_common），而不是较小的那一对",
            ),
            _first_seen,
        ),
        (
            mistake(
                "ties go to the larger pair (max over the pairs), not to the smaller one",
                "并列时选了较大的那一对（对所有对取 max），而不是较小的那一对",
            ),
            _largest,
        ),
        (
            mistake(
                "a run such as a a a counts (a, a) once: every neighbouring position is a pair, "
                "so it holds two",
                "像 a a a 这样的连续段只算了一次 (a, a)：每两个相邻位置都是一对，所以它含有两对",
            ),
            _no_overlap,
        ),
        (
            mistake(
                "the last pair of the list is never counted (the loop stops one position early)",
                "列表最后一对从未被计入（循环提前一个位置停下了）",
            ),
            _skips_last,
        ),
    )


def _merge_from_right(ids, pair, new_id):
    return _merge(ids[::-1], pair[::-1], new_id)[::-1]


def _merge_first_only(ids, pair, new_id):
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == pair:
            return ids[:i] + [new_id] + ids[i + 2 :]
    return list(ids)


def _merge_no_skip(ids, pair, new_id):
    out = []
    for i, token in enumerate(ids):  # a match does not skip its second id
        out.append(new_id if (token, ids[i + 1] if i + 1 < len(ids) else None) == pair else token)
    return out


def _merge_drops_tail(ids, pair, new_id):
    out, i = [], 0
    while i + 1 < len(ids):  # the last id is lost when it is not merged
        if (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _merge_mistakes():
    """Known mistakes: (description, the wrong function)."""
    return (
        (
            mistake(
                "overlapping occurrences are merged from the right: in a a a with pair (a, a) the "
                "first two ids merge, not the last two",
                "重叠的出现是从右往左合并的：在 a a a 中合并 "
                "(a, a) 时，应合并前两个 id，而不是后两个",
            ),
            _merge_from_right,
        ),
        (mistake("only the first occurrence is merged", "只合并了第一次出现"), _merge_first_only),
        (
            mistake(
                "after a match the second id of the pair is kept too: skip past both ids",
                "匹配之后，这一对的第二个 id 也被保留了：应一次跳过两个 id",
            ),
            _merge_no_skip,
        ),
        (
            mistake(
                "the last id is lost when it is not part of a merge",
                "最后一个 id 不参与合并时被丢掉了",
            ),
            _merge_drops_tail,
        ),
    )


def _case_ids(seed: int) -> list[int]:
    """A random list of ids with runs and repeats (a few distinct values, so pairs repeat)."""
    rng = random.Random(case_seed(seed))
    return [rng.choice((3, 7, 7, 9, 12, 40)) for _ in range(rng.randint(18, 30))]


def _ids_abc() -> tuple[int, int, int]:
    """Three ids a < b < c: 5, 8, 11 in the public cases, drawn for each learner in grading
    (the order, which decides ties, stays)."""
    a = case_int(11, 5, 0, 200)
    b = a + case_int(12, 3, 1, 50)
    return a, b, b + case_int(13, 3, 1, 50)


def _pair_cases():
    a, b, c = _ids_abc()
    return (
        (say("a clear winner", "有一对明显最多"), [a, b, c, a, b, a, b, c]),
        (say("a tie: three pairs as frequent", "并列：三对一样多"), [b, a, c, b, a, c, b]),
        (say("a run c c c c", "连续段 c c c c"), [a, b, c, c, c, c, a, b]),
        (
            say("the deciding pair at the end", "决定胜负的一对在末尾"),
            [c, b, a, b, c, b, c, a, c, b],
        ),
        (say("two ids", "两个 id"), [c, a]),
        (say("random ids (1)", "随机 id（1）"), _case_ids(1)),
        (say("random ids (2)", "随机 id（2）"), _case_ids(2)),
    )


def _merge_cases():
    (a, b, c), new = _ids_abc(), case_int(14, 256, 256, 5000)
    return (
        (say("two occurrences", "出现两次"), [a, b, c, a, b], (a, b), new),
        (say("an overlapping run a a a", "重叠的连续段 a a a"), [c, a, a, a, b], (a, a), new),
        (say("the pair at the end", "这一对在末尾"), [c, c, a, b], (a, b), new),
        (say("the last id unmerged", "最后一个 id 不参与合并"), [a, b, c, a, b, c], (a, b), new),
        (say("no occurrence", "一次也没出现"), [a, c, b, a], (b, c), new),
        (say("random ids", "随机 id"), _case_ids(3), (7, 7), new + 1),
    )


def _as_ids(chk: Checker, case: str, value, kind: str) -> list[int] | tuple[int, int]:
    """The learner's answer as plain ints, or a failure saying what came back."""
    if isinstance(value, (list, tuple)) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in value
    ):
        return tuple(value) if kind == "pair" else list(value)
    expected = (
        say("a tuple of two ints", "由两个 int 组成的元组")
        if kind == "pair"
        else say("a list of ints", "由 int 组成的列表")
    )
    chk.fail(
        case,
        say(
            f"your function returned {type(value).__name__} {value!r:.80}, expected {expected}",
            f"你的函数返回了 {type(value).__name__} {value!r:.80}，应返回{expected}",
        ),
    )


def check_most_frequent_pair(fn) -> None:
    """Check ``fn(ids: list[int]) -> tuple[int, int]``: the most frequent pair of
    neighbouring ids, counted at every position (``a a a`` holds ``(a, a)`` twice), ties
    going to the smaller pair. Seven lists (ties, runs, the deciding pair last, two ids,
    random ids); the mistake is named when it is a known one."""
    require_function("check_most_frequent_pair", fn)
    with Checker("most_frequent_pair") as chk:
        for case, ids in _pair_cases():
            got = chk.call(case, say("your function", "运行你的函数"), fn, list(ids))
            got = _as_ids(chk, case, got, "pair")
            want = _reference_pair(ids)
            if got != want:
                looks = next(
                    (text for text, wrong in _pair_mistakes() if wrong(list(ids)) == got != want),
                    None,
                )
                chk.fail(
                    case,
                    say(
                        f"for ids {ids} your pair is {got}, expected {want} "
                        f"(it occurs {Counter(itertools.pairwise(ids))[want]} times)",
                        f"对 ids {ids}，你的结果是 {got}，应为 {want}（它出现了 "
                        f"{Counter(itertools.pairwise(ids))[want]} 次）",
                    ),
                    looks_like=looks,
                    hint=_pair_hint(),
                )
            chk.ok()


def check_merge_pair(fn) -> None:
    """Check ``fn(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]``: a new
    list in which every occurrence of ``pair``, read from the left, is replaced by
    ``new_id`` (``a a a`` merged on ``(a, a)`` gives ``new a``). Six lists (two
    occurrences, an overlapping run, the pair last, an unmerged last id, no occurrence,
    random ids); the mistake is named when it is a known one. Only the returned list is
    judged."""
    require_function("check_merge_pair", fn)
    with Checker("merge_pair") as chk:
        for case, ids, pair, new_id in _merge_cases():
            got = chk.call(case, say("your function", "运行你的函数"), fn, list(ids), pair, new_id)
            got = _as_ids(chk, case, got, "ids")
            want = _merge(list(ids), pair, new_id)
            if got != want:
                looks = next(
                    (
                        text
                        for text, wrong in _merge_mistakes()
                        if wrong(list(ids), pair, new_id) == got != want
                    ),
                    None,
                )
                chk.fail(
                    case,
                    say(
                        f"merging {pair} into {new_id} in {ids} gave {got}, expected {want}",
                        f"在 {ids} 中把 {pair} 合并为 {new_id}，得到 {got}，应为 {want}",
                    ),
                    looks_like=looks,
                    hint=_merge_hint(),
                )
            chk.ok()


def _pair_hint() -> str:
    return say(
        "count every neighbouring pair, at every position; among the pairs with the "
        "largest count take the smallest (tuples compare element by element)",
        "在每个位置都统计相邻的一对；在次数最多的那些对里取最小的一对（元组按元素逐个比较大小）",
    )


def _merge_hint() -> str:
    return say(
        "walk i from the left: where ids[i], ids[i + 1] is the pair, append new_id and "
        "move i by 2; otherwise append ids[i] and move by 1 (the last id too)",
        "让 i 从左往右走：若 ids[i], ids[i + 1] 正是这一对，就追加 new_id 并让 i 前进 2；"
        "否则追加 ids[i]，前进 1（最后一个 id 也一样）",
    )
