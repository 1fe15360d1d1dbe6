"""The Chinese edition's figures draw every Chinese character they use (no boxes)."""

import json
import re
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from tfcourse.lab import fonts

from helpers import ROOT

CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


def chinese_characters() -> set[str]:
    """Every Chinese character a figure of the course can show: those written in the Chinese
    notebooks' code cells and in the package (plots, widgets, messages). Read from the
    source text, so a regex range written as escapes (``"\\u9fff"``) is not a label."""
    sources = [path.read_text(encoding="utf-8") for path in (ROOT / "tfcourse").rglob("*.py")]
    for path in sorted((ROOT / "solutions" / "zh").glob("*.ipynb")):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        sources += [
            "".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code"
        ]
    return {char for source in sources for char in CJK.findall(source)}


def missing_glyphs(text: str) -> list[str]:
    """The warnings matplotlib gives while drawing ``text`` with the course's Chinese fonts."""
    with matplotlib.rc_context(), warnings.catch_warnings(record=True) as caught:
        fonts.use_chinese_fonts()
        warnings.simplefilter("always")
        figure, ax = plt.subplots()
        ax.set_title(text[:40])
        ax.text(0, 0, "\n".join(text[i : i + 60] for i in range(0, len(text), 60)))
        figure.canvas.draw()
        plt.close(figure)
    return [str(w.message) for w in caught if "missing from" in str(w.message)]


def test_the_packaged_font_is_found_and_registered():
    path = fonts.packaged_font_file()
    assert path is not None and path.name.endswith(".otf"), "mplfonts (a dependency) ships it"
    assert fonts.register_packaged_font()
    assert fonts.installed_cjk_fonts()[0] == fonts.PACKAGED_FONT


def test_every_chinese_character_of_the_course_has_a_glyph():
    characters = "".join(sorted(chinese_characters()))
    assert len(characters) > 500, "the collection found the Chinese edition's text"
    assert missing_glyphs(characters) == []


def test_the_glyph_test_sees_a_missing_font(monkeypatch):
    """Without a CJK font, the same drawing reports the missing glyphs (so the test above
    can fail)."""
    monkeypatch.setattr(fonts, "installed_cjk_fonts", list)
    with matplotlib.rc_context({"font.sans-serif": ["DejaVu Sans"]}):
        assert missing_glyphs("注意力"), "DejaVu Sans has no Chinese glyphs"
