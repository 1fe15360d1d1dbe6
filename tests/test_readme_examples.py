"""The READMEs show what a learner really sees: the stub of notebook 01's first exercise as the
learner notebook holds it, a check's pass line as the solution printed it, and a failing check
as the check words it today, in each README's language."""

from __future__ import annotations

import json
import re

import pytest

from tfcourse import checks, language
from tfcourse.course import notebook_format

from helpers import ROOT
from mutants.core import LearnerLayerNorm, variant

EDITIONS = [("README.md", "", "en"), ("README.zh.md", "zh", "zh")]


def _blocks(text: str) -> list[str]:
    """The fenced blocks of a Markdown text, each without its fence and list indentation."""
    blocks = []
    for match in re.finditer(r"^( *)```\w*\n(.*?)^\1```", text, re.S | re.M):
        indent = len(match.group(1))
        blocks.append("\n".join(line[indent:] for line in match.group(2).splitlines()))
    return blocks


def _readme(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(("readme", "folder", "lang"), EDITIONS)
def test_the_stub_shown_is_the_learner_notebooks(readme, folder, lang):
    notebook = notebook_format.read_notebook(ROOT / "notebooks" / folder / "01_attention.ipynb")
    (stub,) = [c.source for c in notebook.cells if c.source.startswith("def causal_mask")]
    assert stub in _blocks(_readme(readme)), f"{readme}: the causal_mask stub is not\n{stub}"


@pytest.mark.parametrize(("readme", "folder", "lang"), EDITIONS)
def test_the_pass_line_shown_is_a_stored_verdict(readme, folder, lang):
    solution = json.loads((ROOT / "solutions" / folder / "03_norms.ipynb").read_text("utf-8"))
    printed = {
        line
        for cell in solution["cells"]
        for output in cell.get("outputs", [])
        for line in "".join(output.get("text", "")).splitlines()
    }
    shown = re.findall(r"`(RMSNorm[:：] ?6/6[^`]*)`", _readme(readme))
    assert shown and set(shown) <= printed, (shown, readme)


@pytest.mark.parametrize(("readme", "folder", "lang"), EDITIONS)
def test_the_failure_shown_is_what_the_check_says(readme, folder, lang):
    """The README's example is the check's message for LayerNorm with eps outside the root,
    its last line cut with "..."."""
    wrong = variant(LearnerLayerNorm, "EpsOutsideLayerNorm", mistake="eps_outside")
    language.use(lang)
    try:
        with pytest.raises(AssertionError) as failure:
            checks.check_layernorm(wrong)
    finally:
        language.use(None)
    message = str(failure.value).splitlines()
    (shown,) = [b for b in _blocks(_readme(readme)) if b.startswith("LayerNorm")]
    shown = shown.splitlines()
    assert shown[:-1] == message[: len(shown) - 1]
    assert shown[-1].endswith("...") and message[len(shown) - 1].startswith(shown[-1][:-3])
