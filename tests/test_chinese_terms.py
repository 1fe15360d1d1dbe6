"""One term per concept in the Chinese a reader reads (docs/glossary.md; CONTRIBUTING.md, "The
Chinese edition"): the notebooks' Chinese sections (``solutions/*.zh.md``), ``README.zh.md``,
``docs/*.zh.md`` and the package's Chinese strings (messages, docstrings, printed text).

What is scanned is the prose: Markdown without its inline code and HTML comments; of a code
block, the Chinese strings and comments of its Python (a figure's labels, printed text) or, in
another block, the Chinese lines (a command's comment, an example of output). Code names stay
as they are (`TFCOURSE_CAPSTONE`, ``--preset capstone``, ``runs/capstone``). Each variant
found is named with its file, its line and what to write instead.
"""

from __future__ import annotations

import io
import itertools
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import ROOT

_CJK = re.compile(r"[\u4e00-\u9fff]")
_A = r"A-Za-z0-9_"  # ASCII word characters (a Chinese character is a word character to \b)


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern
    instead: str
    allowed: int = 0  # how many a document may hold (a first use glossed)
    prose_only: bool = False  # not in a hint, a string or a comment, which name code bare


RULES = (
    Rule(
        "GELU 激活函数",
        re.compile(r"GELU\s*激活函数"),
        "GELU (激活函数 once, where the sentence needs it)",
        allowed=1,
    ),
    Rule(
        "随机失活（dropout）",
        re.compile(r"随机失活\s*[（(]\s*dropout\s*[）)]", re.IGNORECASE),
        "dropout, glossed at most once, at the first use: dropout（随机失活）",
    ),
    Rule(
        "随机失活",
        re.compile(r"(?<!dropout（)(?<!dropout\()随机失活(?!\s*[（(]\s*dropout)", re.IGNORECASE),
        "dropout (注意力 dropout, 残差 dropout, 嵌入 dropout)",
    ),
    Rule(
        "dropout（随机失活）",
        re.compile(r"dropout\s*[（(]随机失活[）)]", re.IGNORECASE),
        "bare dropout after the first use",
        allowed=1,
    ),
    Rule(
        "capstone",
        re.compile(rf"(?<![{_A}/.-])capstone(?![{_A}/.-])", re.IGNORECASE),
        "综合项目 (a code name stays, as `code`)",
    ),
    Rule("奈特", re.compile("奈特"), "nats, a unit symbol like bits (nats/字符)"),
    Rule("在 shell 中", re.compile(r"在\s*shell\s*中", re.IGNORECASE), "在命令行里"),
    Rule("et al.", re.compile(r"(?<![A-Za-z])et\s+al\b\.?"), "等 (Xiong 等人（2020）)"),
    Rule(
        "LM head",
        re.compile(r"(?<!语言模型头（)(?<!语言模型头\()(?<![A-Za-z])LM head(?![A-Za-z])"),
        "语言模型头",
    ),
    Rule(
        "语言模型头（LM head）",
        re.compile(r"语言模型头\s*[（(]LM head[）)]"),
        "语言模型头 after the first use",
        allowed=1,
    ),
    Rule("看起来像是", re.compile("看起来像是"), "可能的原因"),
    Rule(
        "False/None/True in prose",
        re.compile(r"(?<![A-Za-z_`])(?:False|None|True)(?![A-Za-z_`])"),
        "the words of the sentence (否、没有、成立); Python's value in `code`",
        prose_only=True,
    ),
)


# Code inside a Chinese string or comment: `spans`, f-string fields, a command line.
_CODE_IN_TEXT = re.compile(
    rf"`[^`\n]*`|\{{[^{{}}\n]*\}}|(?<![{_A}-])(?:make|tfcourse|python|torchrun|pip)\s+[^，。；：、）”\n]*"
)
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_INLINE_CODE = re.compile(r"``.+?``|`[^`\n]+`")
_FENCE = re.compile(r"^([ \t]*)```([\w+-]*)[^\n]*\n(.*?)^\1```[ \t]*$", re.DOTALL | re.MULTILINE)


def _blank(match: re.Match) -> str:
    """The matched text as spaces, its line breaks kept (so lines keep their numbers)."""
    return re.sub(r"[^\n]", " ", match.group(0))


# A text: (line, text, is it Markdown prose).
Text = tuple[int, str, bool]


def python_pieces(source: str, first_line: int = 1) -> list[list[Text]]:
    """The Chinese strings and comments of Python ``source``, each as its lines, its code
    (`spans`, f-string fields, commands) set aside; IPython's ``%magic`` and ``!shell`` lines
    are skipped. Where it does not tokenize, its Chinese lines as they are."""
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")]
    pieces = []
    try:
        for token in tokenize.generate_tokens(io.StringIO("\n".join(lines)).readline):
            if token.type in (tokenize.STRING, tokenize.COMMENT) and _CJK.search(token.string):
                text = _CODE_IN_TEXT.sub(" ", token.string)
                start = first_line + token.start[0] - 1
                pieces.append([(start + i, line, False) for i, line in enumerate(text.split("\n"))])
    except (tokenize.TokenError, SyntaxError):
        return [
            [(first_line + i, line, False)] for i, line in enumerate(lines) if _CJK.search(line)
        ]
    return pieces


def python_texts(source: str, first_line: int = 1) -> list[Text]:
    return [text for piece in python_pieces(source, first_line) for text in piece]


def markdown_texts(text: str, first_line: int = 1) -> list[Text]:
    """Markdown's prose lines without inline code, and of its code blocks what a reader reads
    as Chinese: ``python_texts`` of Python; of another block, its Chinese lines (the comment
    of a line that has one)."""
    found = []
    text = _HTML_COMMENT.sub(_blank, text)
    for fence in _FENCE.finditer(text):
        first = first_line + text.count("\n", 0, fence.start(3))
        if fence.group(2) in ("python", "py", "python3", "ipython"):
            found += python_texts(fence.group(3), first)
            continue
        for i, line in enumerate(fence.group(3).split("\n")):
            if _CJK.search(line):
                comment = re.search(r"(?:^|\s)#\s(.*)$", line)
                shown = comment.group(1) if comment else line
                found.append((first + i, _CODE_IN_TEXT.sub(" ", shown), False))
    prose = _INLINE_CODE.sub(_blank, _FENCE.sub(_blank, text)).split("\n")
    found += [
        # A block quote is a source's own words (the lesson's `bias=False`, bare).
        (first_line + i, line, not line.lstrip().startswith(">"))
        for i, line in enumerate(prose)
        if line.strip()
    ]
    return sorted(found)


_SECTION = re.compile(r"^<!-- (cell|hint): [A-Za-z0-9_-]+ · en: [0-9a-f]{10} -->$", re.MULTILINE)


def twin_texts(text: str) -> list[Text]:
    """A ``.zh.md`` file's texts: each cell's section as Markdown (a code cell's is one Python
    block), each hint as a line of text that names code bare (``keepdim=True``)."""
    found = []
    heads = list(_SECTION.finditer(text)) + [None]
    for head, after in itertools.pairwise(heads):
        body = text[head.end() : after.start() if after else len(text)]
        first = text.count("\n", 0, head.end()) + 1
        if head.group(1) == "cell":
            found += markdown_texts(body, first)
        else:
            lines = body.split("\n")
            found += [
                (first + i, _CODE_IN_TEXT.sub(" ", line), False)
                for i, line in enumerate(lines)
                if line.strip()
            ]
    return found


def package_texts(source: str) -> list[list[Text]]:
    """One document per Chinese string of a module (a message or a docstring is read on its
    own, so a first use glossed counts per string); comments are the maintainers'."""
    return [piece for piece in python_pieces(source) if not piece[0][1].lstrip().startswith("#")]


def variants(documents: list[list[Text]]) -> list[tuple[int, Rule, str]]:
    """``(line, rule, matched text)`` of every forbidden variant, past what each rule allows
    in a document."""
    found = []
    for document in documents:
        for rule in RULES:
            hits = [
                (line, match.group(0))
                for line, text, prose in document
                if prose or not rule.prose_only
                for match in rule.pattern.finditer(text)
            ]
            found += [(line, rule, text) for line, text in hits[rule.allowed :]]
    return sorted(found, key=lambda hit: hit[0])


def _documents(path: Path) -> list[list[Text]]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return package_texts(text)
    if path.name.endswith(".zh.md") and path.parent.name == "solutions":
        return [twin_texts(text)]
    return [markdown_texts(text)]


CHINESE_FILES = sorted(
    [
        *ROOT.glob("solutions/*.zh.md"),
        ROOT / "README.zh.md",
        *ROOT.glob("docs/*.zh.md"),
        *(p for p in ROOT.glob("tfcourse/**/*.py") if _CJK.search(p.read_text(encoding="utf-8"))),
    ]
)


def _shown(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("path", CHINESE_FILES, ids=_shown)
def test_the_chinese_uses_one_term_per_concept(path):
    wrong = [
        f"{_shown(path)}:{line}: {text!r} ({rule.name}): write {rule.instead}"
        for line, rule, text in variants(_documents(path))
    ]
    assert not wrong, "\n".join(wrong)


# Each variant, and a text that says the same the right way.
CAUGHT = [
    (
        "GELU 激活函数",
        "带 GELU 激活函数的 MLP。GELU 激活函数很平滑。",
        "带 GELU 激活函数的 MLP。GELU 很平滑。",
    ),
    ("随机失活（dropout）", "最后做随机失活（dropout）。", "最后做 dropout（随机失活）。"),
    ("随机失活", "## 注意力随机失活与残差随机失活", "## 注意力 dropout 与残差 dropout"),
    (
        "dropout（随机失活）",
        "dropout（随机失活）在前；dropout（随机失活）在后。",
        "dropout（随机失活）在前；dropout 在后。",
    ),
    (
        "capstone",
        "之后 capstone 会用它。",
        "之后综合项目会用它（`--preset capstone`，runs/capstone）。",
    ),
    ("奈特", "损失 1.25 奈特/字符", "损失 1.25 nats/字符"),
    ("在 shell 中", "在 shell 中运行 `tfcourse train`", "在命令行里运行 `tfcourse train`"),
    ("et al.", "旋转位置编码（Su et al., 2021）", "旋转位置编码（Su 等，2021）"),
    ("LM head", "经过 LM head 之后", "经过语言模型头（`lm_head`）之后"),
    (
        "语言模型头（LM head）",
        "语言模型头（LM head）；语言模型头（LM head）",
        "语言模型头（LM head）；语言模型头",
    ),
    ("看起来像是", "  看起来像是：eps 加在了平方根外面", "  可能的原因：eps 加在了平方根外面"),
    ("False/None/True in prose", "判定为 False 时", "判定为“不成立”时（`False`）"),
]


@pytest.mark.parametrize(("name", "wrong", "right"), CAUGHT, ids=[c[0] for c in CAUGHT])
def test_each_variant_is_caught_in_prose_and_in_a_message(name, wrong, right):
    twin = f"<!-- cell: x · en: 0123456789 -->\n{wrong}\n"
    found = variants([twin_texts(twin)])
    assert found and {(line, rule.name) for line, rule, _ in found} == {(2, name)}, found
    assert variants([twin_texts(twin.replace(wrong, right))]) == []
    rule = next(rule for rule in RULES if rule.name == name)
    if not rule.prose_only:  # in a message too
        found = variants(package_texts(f"MESSAGE = {wrong!r}\n"))
        assert found and {rule.name for _, rule, _ in found} == {name}, found
        assert variants(package_texts(f"MESSAGE = {right!r}\n")) == []


def test_every_rule_is_shown_to_catch_its_variant():
    assert [rule.name for rule in RULES] == [name for name, _, _ in CAUGHT]


def test_code_is_not_prose():
    markdown = (
        "<!-- cell: x · en: 0123456789 -->\n"
        "`TFCOURSE_CAPSTONE=short` 与 `capstone.BEST_NGRAM` 都是代码：\n"
        "```python\n"
        "note = '' if FULL else '（简短模式：请运行 make capstone）'\n"
        "capstone.run(None)  # 综合项目\n"
        "```\n"
        "```bash\n"
        "tfcourse train --preset capstone --out runs/capstone   # 训练综合项目的模型\n"
        "```\n"
    )
    assert variants([twin_texts(markdown)]) == []
    # The line numbers are the file's: the variant in a code block's string is on line 4.
    wrong = markdown.replace("（简短模式：", "（capstone 的简短模式：")
    assert [(line, rule.name) for line, rule, _ in variants([twin_texts(wrong)])] == [
        (4, "capstone")
    ]
    # A hint names code bare: None there is Python's.
    hint = "<!-- hint: x · en: 0123456789 -->\nd_hidden 为 None 时，用 tc.swiglu_hidden_dim。\n"
    assert variants([twin_texts(hint)]) == []
