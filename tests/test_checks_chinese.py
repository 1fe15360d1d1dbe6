"""The checks speak Chinese when asked (``TFCOURSE_LANG=zh``), and English stays as it was.

Every diagnosis a check raises is written as a pair, ``mistake("english", "中文")`` (``say``
for other messages), at the place it is raised (``tfcourse/language.py``). These tests run
real wrong implementations (the catalogue in ``tests/mutants/``) under both languages: the Chinese
message must be Chinese, name the same numbers and shapes as the English one, and the
English message must not change. A source scan keeps future messages bilingual.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch.nn.functional as F

from tfcourse import checks, language
from tfcourse.checks import (
    check_configure_optimizer,
    check_layernorm_backward,
    check_llama_block,
    check_permute_qk_rows,
    check_repeat_kv,
    check_rotary_attention,
)

from mutants.claims import MUTANTS as CLAIMS_MUTANTS
from mutants.core import MUTANTS as MAIN_MUTANTS
from mutants.core import (
    LearnerBlock,
    LearnerFeedForward,
    LearnerLayerNorm,
    LearnerMHA,
    LearnerRMSNorm,
    make_sdpa,
    mask_diagonal_excluded,
    mask_triu,
    variant,
)
from mutants.gqa import MUTANTS as GQA_MUTANTS
from mutants.gqa import make_repeat_kv
from mutants.llama_block import MUTANTS as LLAMA_BLOCK_MUTANTS
from mutants.norm_backward import MUTANTS as NORM_BACKWARD_MUTANTS
from mutants.optimizer import MUTANTS as OPTIMIZER_MUTANTS
from mutants.rotary_attention import MUTANTS as ROTARY_ATTENTION_MUTANTS

CHECKS_DIR = Path(__file__).resolve().parents[1] / "tfcourse" / "checks"
CJK = re.compile(r"[\u4e00-\u9fff]")
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
SHAPE = re.compile(r"\(\d+(?:, \d+)+\)")

pytestmark = pytest.mark.usefixtures("english_first")


def failure(check, implementation, monkeypatch, lang: str) -> str:
    """The message of the ``AssertionError`` that ``check(implementation)`` raises in ``lang``."""
    if lang == "zh":
        monkeypatch.setenv("TFCOURSE_LANG", "zh")
    else:
        monkeypatch.delenv("TFCOURSE_LANG", raising=False)
    language.use(None)
    try:
        with pytest.raises(AssertionError) as info:
            check(implementation)
    finally:
        monkeypatch.delenv("TFCOURSE_LANG", raising=False)
        language.use(None)
    return str(info.value)


def both(check, implementation, monkeypatch) -> tuple[str, str]:
    """English, Chinese, and English again: the language must not leak from one run to the next."""
    english = failure(check, implementation, monkeypatch, "en")
    chinese = failure(check, implementation, monkeypatch, "zh")
    assert failure(check, implementation, monkeypatch, "en") == english
    return english, chinese


def assert_same_facts(english: str, chinese: str) -> None:
    """Chinese text that names exactly the numbers and shapes the English one names."""
    assert not CJK.search(english), english
    assert CJK.search(chinese.splitlines()[0]), chinese
    assert sorted(NUMBER.findall(chinese)) == sorted(NUMBER.findall(english)), (english, chinese)
    assert sorted(SHAPE.findall(chinese)) == sorted(SHAPE.findall(english)), (english, chinese)
    # Same layout: the check's name first, then the case, the difference, the diagnosis and
    # the hint, each on its line.
    assert chinese.split("：", 1)[0] == english.split(": ", 1)[0]
    assert len(chinese.splitlines()) == len(english.splitlines())


# The checks named in the task, each with a real wrong implementation: (check, wrong code,
# part of the English message, part of the Chinese message).
CASES = [
    pytest.param(
        checks.check_causal_mask,
        mask_diagonal_excluded,
        "causal_mask: mask differs from the reference (check 1 of 4)\n"
        "  case: causal_mask(5)\n"
        "  5 of 25 entries differ; first at [0, 0]: expected True, got False\n"
        "  looks like: the diagonal is excluded (tril(diagonal=-1))",
        "causal_mask：掩码与参考实现不一致（第 1 项检查，共 4 项）\n"
        "  用例：causal_mask(5)\n"
        "  25 个元素中有 5 个不同；第一个在 [0, 0]：应为 True，实际为 False\n"
        "  可能的原因：排除了对角线（tril(diagonal=-1)）",
        id="causal-mask",
    ),
    pytest.param(
        checks.check_causal_mask,
        mask_triu,
        "the upper triangle (triu)",
        "用了上三角（triu）而不是下三角（tril）",
        id="causal-mask-triu",
    ),
    pytest.param(
        checks.check_attention,
        make_sdpa("no_scale"),
        "output differs from the reference (check 2 of 7)\n  case: q, k, v (2, 5, 8), no mask\n"
        "  max |diff| = ",
        "输出与参考实现不一致（第 2 项检查，共 7 项）\n  用例：q, k, v (2, 5, 8)，无掩码\n"
        "  max |diff| = ",
        id="attention",
    ),
    pytest.param(
        checks.check_multi_head_attention,
        variant(LearnerMHA, "NoMaskMHA", mask_mode="none"),
        "output differs from the reference (check 3 of 7)\n  case: x (2, 5, 24), 4 heads",
        "没有施加因果掩码（词元关注到了它后面的词元）",
        id="multi-head-attention",
    ),
    pytest.param(
        checks.check_layernorm,
        variant(LearnerLayerNorm, "EpsOutsideLayerNorm", mistake="eps_outside"),
        "eps is added outside the square root",
        "eps 加在了平方根外面",
        id="layernorm",
    ),
    pytest.param(
        checks.check_rmsnorm,
        variant(LearnerRMSNorm, "MeanAbsRMSNorm", mistake="mean_abs"),
        "divides by the mean of |x|",
        "除以的是 |x| 的均值",
        id="rmsnorm",
    ),
    pytest.param(
        checks.check_feedforward,
        variant(LearnerFeedForward, "ReluFeedForward", activation=staticmethod(F.relu)),
        "ReLU instead of the exact GELU",
        "用了 ReLU，而不是精确的 GELU",
        id="mlp",
    ),
    pytest.param(
        checks.check_feedforward,
        variant(LearnerFeedForward, "NarrowFeedForward", default_width=2),
        "parameter fc_in.weight has shape (32, 16), expected (64, 16)",
        "参数 fc_in.weight 的形状是 (32, 16)，应为 (64, 16)",
        id="mlp-width",
    ),
    pytest.param(
        checks.check_transformer_block,
        variant(LearnerBlock, "AlwaysPostBlock", mistake="always_post"),
        "post-LN was written where pre-LN was asked",
        "要求的是前置层归一化（Pre-LN，pre_ln=True），却写成了后置层归一化（Post-LN）",
        id="block",
    ),
    pytest.param(
        checks.check_transformer_block,
        variant(LearnerBlock, "InplaceBlock", mistake="inplace"),
        "your code modified its input x in place",
        "你的代码原地修改了它的输入 x",
        id="block-inplace",
    ),
    pytest.param(
        check_repeat_kv,
        make_repeat_kv("tiled"),
        "tiled instead of grouped (kv.repeat(1, n_rep, 1, 1))",
        "整体平铺而不是分组（kv.repeat(1, n_rep, 1, 1)）",
        id="gqa-repeat-kv",
    ),
    pytest.param(
        check_repeat_kv,
        make_repeat_kv("seq_axis"),
        "output has shape (2, 2, 15, 4), expected (2, 6, 5, 4)",
        "输出的形状是 (2, 2, 15, 4)，应为 (2, 6, 5, 4)",
        id="gqa-repeat-kv-axis",
    ),
]


@pytest.mark.parametrize("check, wrong, english_part, chinese_part", CASES)
def test_a_wrong_implementation_is_diagnosed_in_chinese(
    check, wrong, english_part, chinese_part, monkeypatch
):
    english, chinese = both(check, wrong, monkeypatch)
    assert english_part in english, english
    assert chinese_part in chinese, chinese
    assert_same_facts(english, chinese)


# Every mutant of the catalogues, in both languages: nothing is left in English only.
SWEEP = (
    [(f"main-{name}", check, wrong) for name, check, wrong, _ in MAIN_MUTANTS]
    + [(f"gqa-{name}", check_repeat_kv, wrong) for name, wrong, _ in GQA_MUTANTS]
    + [(name, check_rotary_attention, wrong) for name, wrong, _ in ROTARY_ATTENTION_MUTANTS]
    + [(name, check_llama_block, wrong) for name, wrong, _ in LLAMA_BLOCK_MUTANTS]
    + [(f"claims-{name}", check_permute_qk_rows, wrong) for name, wrong, _ in CLAIMS_MUTANTS]
    + [(name, check_layernorm_backward, wrong) for name, wrong, _ in NORM_BACKWARD_MUTANTS]
    + [(name, check_configure_optimizer, wrong) for name, wrong, _ in OPTIMIZER_MUTANTS]
)


@pytest.mark.parametrize("check, wrong", [pytest.param(*row[1:], id=row[0]) for row in SWEEP])
def test_every_catalogued_mistake_reads_in_chinese(check, wrong, monkeypatch):
    english, chinese = both(check, wrong, monkeypatch)
    assert_same_facts(english, chinese)
    # Only code, names and numbers stay in Latin letters: no English sentence survives
    # (apart from the error text of the learner's own code, quoted on its line as it was
    # raised: "  RuntimeError: ...").
    ours = re.sub(r"(?m)^  \w+: .*$", "", chinese)
    assert not re.search(r"\b(?:the|is|are|of|instead|expected|looks like|hint)\b", ours), chinese


def test_the_pass_line_speaks_the_language_with_the_same_count(monkeypatch, capsys):
    """The line a Chinese solution's check cell stores (and the grader compares with)."""
    right = lambda T: mask_diagonal_excluded(T) | mask_triu(T).tril()  # noqa: E731
    for lang, line in (
        ("en", "causal_mask: 4/4 checks passed\n"),
        ("zh", "causal_mask：4/4 项检查通过\n"),
    ):
        monkeypatch.setenv("TFCOURSE_LANG", lang)
        checks.check_causal_mask(right)
        assert capsys.readouterr().out == line


def test_a_chinese_notebook_chooses_chinese_without_the_environment(monkeypatch):
    english = failure(checks.check_causal_mask, mask_triu, monkeypatch, "en")
    language.use("zh")  # what setup_notebook(..., language="zh") does
    try:
        with pytest.raises(AssertionError) as info:
            checks.check_causal_mask(mask_triu)
    finally:
        language.use(None)
    assert_same_facts(english, str(info.value))


def test_a_type_error_is_bilingual_too(monkeypatch):
    with pytest.raises(TypeError) as english:
        check_repeat_kv(3)
    monkeypatch.setenv("TFCOURSE_LANG", "zh")
    with pytest.raises(TypeError) as chinese:
        check_repeat_kv(3)
    assert str(english.value) == "check_repeat_kv expects a function, got int"
    assert str(chinese.value) == "check_repeat_kv 需要传入一个函数，实际得到 int"


# ------------------------------------------------------------------ no English-only message


# Learner-facing texts: what raise and assert say, and what the harness shows from a check
# (``chk.fail(case, problem, looks_like=..., hint=...)``, ``chk.call(case, what, ...)``,
# ``chk.compare(case, what, ..., hint=...)``). Positions are those of the text arguments.
HARNESS_CALLS = {"fail": (0, 1), "call": (0, 1), "compare": (0, 1), "unchanged": (0,)}
HARNESS_KEYWORDS = {"looks_like", "hint"}

# Literal texts allowed outside ``say``: (file, text), each with the reason.
ALLOWED: set[tuple[str, str]] = set()


def _is_text(node) -> bool:
    """A string literal, an f-string, or a concatenation of them, holding at least one word."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _is_text(node.left) or _is_text(node.right)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return bool(re.search(r"[A-Za-z]{2,}", node.value))
    if isinstance(node, ast.JoinedStr):
        return any(_is_text(part) for part in node.values if isinstance(part, ast.Constant))
    return False


def english_only_messages(source: str, filename: str = "<source>") -> list[str]:
    """``file:line: text`` for each learner-facing literal not wrapped in ``say(...)``."""
    found = []

    def check(node, where):
        if node is not None and _is_text(node):
            text = ast.unparse(node)
            if (Path(filename).name, text) not in ALLOWED:
                found.append(f"{Path(filename).name}:{node.lineno}: {where}: {text}")

    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            for arg in node.exc.args:
                check(arg, "raise")
        elif isinstance(node, ast.Assert):
            check(node.msg, "assert")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in HARNESS_CALLS
        ):
            for i in HARNESS_CALLS[node.func.attr]:
                if i < len(node.args):
                    check(node.args[i], node.func.attr)
            for keyword in node.keywords:
                if keyword.arg in HARNESS_KEYWORDS:
                    check(keyword.value, f"{node.func.attr}({keyword.arg}=)")
    return found


def test_no_check_raises_an_english_only_message():
    found = [
        problem
        for path in sorted(CHECKS_DIR.glob("*.py"))
        for problem in english_only_messages(path.read_text(), str(path))
    ]
    assert found == [], "wrap these in say(english, chinese):\n" + "\n".join(found)


def test_the_scan_finds_an_english_only_message():
    source = """
def f(chk, case, x, n):
    if x:
        raise ValueError(f"x must be positive, got {x}")
    assert n, "n is missing"
    chk.fail(case, "the output " + "is wrong", hint="fix it")
    chk.compare(case, "output", x, x, looks_like=f"looks odd: {n}")
    chk.call("a case", "calling your code", print)
"""
    found = english_only_messages(source)
    assert len(found) == 8, found
    wrapped = """
def f(chk, case, x, n):
    if x:
        raise ValueError(say(f"x must be positive, got {x}", f"x 必须为正，实际得到 {x}"))
    assert n, say("n is missing", "缺少 n")
    chk.fail(case, say("the output is wrong", "输出不对"), hint=say("fix it", "改一下"))
    chk.unchanged(case, "x", x, x)
    raise TypeError(message)
"""
    assert english_only_messages(wrapped) == []


# Prose anywhere in the checks' code (two English words in a row), outside say(...) and
# docstrings, is a message someone forgot: a variant description, a case name, a hint.
PROSE = re.compile(r"[A-Za-z]{2,}[ ,;:]+(?:[A-Za-z]{2,})")
ALLOWED_PROSE = {
    # An unused description of the MHA layout; no check shows it to a learner.
    ("multi_head.py", "MHA_LAYOUT"),
    # The checks' Chinese docstrings: code and formulas inside Chinese prose.
    ("docs_zh.py", "DOCS_ZH"),
}
ALLOWED_PROSE_TEXTS = {
    # The pass line, "<Name>: n/n checks passed", is the same in both languages (nbval).
    ("_harness.py", " checks passed"),
    # Looked for in torch's own error messages, to diagnose them; never shown.
    ("_torch_errors.py", "same device"),
    ("_torch_errors.py", "same dtype"),
    ("_torch_errors.py", "scalar type"),
    ("_torch_errors.py", "does not require grad"),
    ("_torch_errors.py", "view size is not compatible"),
    ("batching.py", "to be less than"),  # torch.randint's, for an empty range of starts
    # torch's, for a window past the end of the data (an index, a stack, a list, a GPU's)
    ("batching.py", "out of bounds"),
    ("batching.py", "stack expects each tensor to be equal size"),
    ("batching.py", "expected sequence of length"),
    ("batching.py", "device-side assert"),
    # torch.multinomial's, for weights below 0 (the logits instead of the probabilities)
    ("generate.py", "probability tensor contains either"),
    ("norm_backward.py", "does not require grad"),  # autograd's, when a learner calls it
    ("norm_backward.py", "(grad_x, grad_weight, grad_bias)"),  # names of code
    # torch.optim's, for a parameter in two param groups (the tied weight counted twice)
    ("optimizer.py", "more than one parameter group"),
    # A key of the gradients' dict; the harness shows it as "输入 kv" in Chinese.
    ("gqa.py", "input kv"),
    # Python's own messages: strict UTF-8 decoding, and bytes() given an id past a byte
    ("bpe_codec.py", "can't decode"),
    ("bpe_codec.py", "bytes must be in range(0, 256)"),
    # English text that pre_split's cases cut into chunks: data, never a message
    ("pre_split.py", "the cat sat on the mat."),
    ("pre_split.py", "isn't it? we'll see, they've gone"),
}


def english_prose(source: str, filename: str) -> list[str]:
    tree = ast.parse(source, filename=filename)
    skip = set()
    for node in ast.walk(tree):
        # mistake(english, chinese) is say() for a diagnosis (checks/_harness.py).
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("say", "mistake"):
            skip.update(id(n) for n in ast.walk(node))
        if (
            isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        ):
            skip.add(id(node.body[0].value))  # a docstring
        if isinstance(node, ast.Assign) and any(
            (Path(filename).name, getattr(t, "id", None)) in ALLOWED_PROSE for t in node.targets
        ):
            skip.update(id(n) for n in ast.walk(node.value))
    return [
        f"{Path(filename).name}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and PROSE.search(node.value)
        and (Path(filename).name, node.value) not in ALLOWED_PROSE_TEXTS
    ]


def test_no_english_prose_outside_say():
    found = [
        problem
        for path in sorted(CHECKS_DIR.glob("*.py"))
        for problem in english_prose(path.read_text(), str(path))
    ]
    assert found == [], "wrap these in say(english, chinese):\n" + "\n".join(found)
    assert english_prose('x = ("the mask is ignored", 1)\n', "new.py") != []
