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


# The front door: what a learner needs on one screen, the guides a link away.
GUIDES = {
    "README.md": ["docs/setup.md", "docs/grading.md", "docs/troubleshooting.md", "CONTRIBUTING.md"],
    "README.zh.md": ["docs/setup.zh.md", "docs/grading.md", "docs/troubleshooting.md"],
}


@pytest.mark.parametrize("readme", sorted(GUIDES))
def test_the_front_door_fits_a_screen_and_links_the_guides(readme):
    text = _readme(readme)
    assert len(text.splitlines()) <= 150, f"{readme}: {len(text.splitlines())} lines"
    links = set(re.findall(r"\]\(([^)#]+)", text))
    assert set(GUIDES[readme]) <= links, set(GUIDES[readme]) - links
    assert all((ROOT / link).exists() for link in links if "://" not in link), links
    # The two commands, set up and open; run the tests.
    assert "make lab" in text and "make test" in text
    # Every notebook's row, with its run time.
    rows = [line for line in text.splitlines() if re.match(r"\| \[?`\d\d_", line)]
    assert len(rows) == 13 and all(re.search(r"\d+ (s|秒|min|分钟)", row) for row in rows), rows


def test_the_chinese_front_door_opens_with_the_mirrors():
    """A learner in mainland China reads the mirror route first, in this environment only."""
    quick = _readme("README.zh.md").split("## 快速开始", 1)[1]
    first = _blocks(quick)[0]
    assert "pip config set --site global.index-url" in first and "pytorch-wheels/cpu" in first
    assert "python scripts/install.py" in first  # ends in one line saying what to do
    assert "tfcourse lab --language zh" in first
