"""The Chinese edition's figures draw every Chinese character they use (no boxes)."""

import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

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
    """The course's own font file, inside the package (no font package to install), with its
    licence beside it, is the one matplotlib uses for its family."""
    from matplotlib import font_manager

    path = fonts.packaged_font_file()
    assert path is not None and path.is_relative_to(Path(fonts.__file__).parent)
    assert (path.parent / "OFL.txt").is_file(), "the OFL asks for the licence with the font"
    assert path.stat().st_size < 5_000_000, "a subset: scripts/subset_font.py"
    assert fonts.register_packaged_font()
    assert fonts.installed_cjk_fonts()[0] == fonts.PACKAGED_FONT
    properties = font_manager.FontProperties(family=[fonts.PACKAGED_FONT])
    assert Path(font_manager.findfont(properties, fallback_to_default=False)) == path


def test_the_packaged_font_needs_no_font_package():
    """Found and registered in a process where mplfonts (the old dependency, 103 MB) cannot
    be imported or found."""
    code = (
        "import importlib.util, sys\n"
        "sys.modules['mplfonts'] = None\n"
        "from tfcourse.lab import fonts\n"
        "assert importlib.util.find_spec('mplfonts') is None\n"
        "print(fonts.installed_cjk_fonts()[0])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, encoding="utf-8", cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == fonts.PACKAGED_FONT


def test_the_packaged_font_covers_gb2312():
    """Every character of GB 2312 (6,763 hanzi and 682 others), ASCII and the full-width
    forms: what a learner plausibly writes in a label of their own."""
    from fontTools.ttLib import TTFont

    path = fonts.packaged_font_file()
    assert path is not None
    cmap = TTFont(path).getBestCmap()
    gb2312 = set()
    for row in range(0xA1, 0xF8):
        for cell in range(0xA1, 0xFF):
            try:
                gb2312.add(ord(bytes((row, cell)).decode("gb2312")))
            except UnicodeDecodeError:
                continue  # an unassigned position
    hanzi = {point for point in gb2312 if 0x4E00 <= point <= 0x9FFF}
    assert (len(gb2312), len(hanzi)) == (7445, 6763)
    wanted = gb2312 | set(range(0x20, 0x7F)) | set(range(0xFF01, 0xFF5F)) | {0x2212}
    assert not sorted(wanted - set(cmap)), [chr(p) for p in sorted(wanted - set(cmap))]


def test_every_chinese_character_of_the_course_has_a_glyph():
    characters = "".join(sorted(chinese_characters()))
    assert len(characters) > 500, "the collection found the Chinese edition's text"
    assert missing_glyphs(characters) == []


def test_a_character_outside_the_subset_falls_back_per_glyph():
    """The subset lacks U+2318 (a symbol) and U+20000 (a rare hanzi): the first is drawn with
    DejaVu Sans, after the CJK fonts in the family list; the second shows as a box unless the
    machine has a fuller CJK font (the list's next fonts)."""
    from fontTools.ttLib import TTFont

    path = fonts.packaged_font_file()
    assert path is not None
    cmap = TTFont(path).getBestCmap()
    assert 0x2318 not in cmap and 0x20000 not in cmap
    assert missing_glyphs("注意力\u2318") == []
    if fonts.installed_cjk_fonts() == [fonts.PACKAGED_FONT]:  # no CJK font of the machine
        assert missing_glyphs("注意力\U00020000"), "the glyph test still sees a missing glyph"


def test_the_glyph_test_sees_a_missing_font(monkeypatch):
    """Without a CJK font, the same drawing reports the missing glyphs (so the test above
    can fail)."""
    monkeypatch.setattr(fonts, "installed_cjk_fonts", list)
    # The family too: a Chinese notebook set up earlier in this process names the CJK font
    # there (use_chinese_fonts), and that would draw the glyphs.
    plain = {"font.family": ["sans-serif"], "font.sans-serif": ["DejaVu Sans"]}
    with matplotlib.rc_context(plain):
        assert missing_glyphs("注意力"), "DejaVu Sans has no Chinese glyphs"
