"""`help(check_xxx)` in the reader's language: the Chinese edition's first cell makes every
check's docstring Chinese, with the English docstring's code, shapes and numbers unchanged."""

from __future__ import annotations

import inspect
import pydoc
import re

import pytest

from tfcourse import checks, language, runtime
from tfcourse.checks.docs_zh import DOCS_ZH

CHINESE = re.compile(r"[\u4e00-\u9fff]")
CODE = re.compile(r"``(.+?)``", re.S)  # a span may break across lines
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e-?\d+)?")


@pytest.fixture
def english_again(monkeypatch):
    # The Chinese edition's setup also installs the Chinese fonts for the whole process:
    # not this test's subject, and other tests expect matplotlib's own.
    from tfcourse.lab import fonts

    monkeypatch.setattr(fonts, "use_chinese_fonts", lambda: None)
    yield
    runtime.setup_notebook("0.1.0")
    language.use(None)


def english_docs() -> dict[str, str]:
    return {name: inspect.cleandoc(doc) for name, doc in checks._ENGLISH_DOCS.items()}


def test_every_check_has_a_chinese_docstring():
    assert sorted(DOCS_ZH) == sorted(checks.__all__)


@pytest.mark.parametrize("name", sorted(DOCS_ZH))
def test_the_chinese_docstring_keeps_the_code_and_the_numbers(name):
    english, chinese = english_docs()[name], inspect.cleandoc(DOCS_ZH[name])
    assert set(CODE.findall(english)) <= set(CODE.findall(chinese)), name
    assert sorted(set(NUMBER.findall(english))) == sorted(set(NUMBER.findall(chinese))), name
    assert CHINESE.search(chinese.splitlines()[0]), "the summary line is Chinese"


def test_the_chinese_edition_makes_help_chinese_and_the_english_one_english(english_again):
    runtime.setup_notebook("0.1.0", language="zh")
    shown = pydoc.render_doc(checks.check_layernorm, renderer=pydoc.plaintext)
    assert "子检查" in shown and "y = (x - mean) / sqrt(var + eps)" in shown, shown
    runtime.setup_notebook("0.1.0", language="en")
    shown = pydoc.render_doc(checks.check_layernorm, renderer=pydoc.plaintext)
    assert "Sub-checks (6)" in shown and not CHINESE.search(shown), shown
