"""Rebuild the Chinese font the course ships: a subset of Noto Sans CJK SC Regular.

    python scripts/subset_font.py SOURCE [--font-number N] [--out PATH]

The Chinese edition's figures draw their labels with ``tfcourse/lab/fonts/``'s
``NotoSansCJKscSubset-Regular.otf`` (registered by ``tfcourse/lab/fonts.py``). It is cut from
Noto Sans CJK SC Regular (Noto CJK, https://github.com/notofonts/noto-cjk, SIL Open Font
License 1.1, copyright Adobe) with fontTools' subsetter, and keeps the characters a learner
plausibly draws:

- GB 2312, whole: its 6,763 hanzi and its 682 other characters (CJK punctuation, full-width
  forms, pinyin, Greek and Cyrillic letters, kana, box drawing, numbered symbols);
- ASCII and Latin-1, Latin Extended-A and -B (pinyin with tones), Greek and Cyrillic, the
  general punctuation, arrows, mathematical operators, enclosed numbers, box drawing,
  geometric shapes and miscellaneous symbols (as far as the source font has them);
- CJK Symbols and Punctuation (U+3000-303F) and Halfwidth and Fullwidth Forms (U+FF00-FFEF);
- every CJK character the course itself writes (the package's code, the Chinese notebooks and
  the translation sources), even outside GB 2312; ``tests/test_fonts.py`` checks that each has
  a glyph.

The output keeps the source's CFF outlines and hints (readable at figure sizes; a TrueType
conversion was larger, 2.2 MB without hints) and the OpenType features HarfBuzz applies to
horizontal text (kerning, ligatures, marks), but not the regional alternates (``locl``: the
figures always show the Simplified Chinese forms), vertical forms or the other optional
features, whose glyphs nearly double the size. It is renamed "Noto Sans CJK SC Subset"
(PostScript name ``NotoSansCJKscSubset-Regular``) so that it neither shadows nor is shadowed
by a full Noto Sans CJK SC installed on the machine, which matplotlib then uses for any
character the subset lacks. The licence allows this: the OFL permits subsetting and
redistribution of a Modified Version under the OFL, and "Noto" is not a Reserved Font Name
(noto-cjk's licence reserves none; the copyright notice of its 2.x releases reserves Adobe's
"Source", which this name does not use). ``tfcourse/lab/fonts/OFL.txt``, next to the font,
carries the copyright notice and the licence.

The file shipped today was made from NotoSansCJKsc-Regular.otf version 1.004 (name table:
"Version 1.004;PS 1.004;hotconv 1.0.82;makeotf.lib2.5.63406"; 16,412,332 bytes, SHA-256
1652500938055a232cfbfa321de6ebaadfc5635dd9f75e369bc991d14a6512dd), noto-cjk's 1.004 release as
the ``mplfonts`` 0.0.11 package carried it, with fontTools 4.68.0: 1.94 MB (1,942,656
bytes), 8,185 characters, 8,184 glyphs. A newer source
(``Sans/OTF/SimplifiedChinese/NotoSansCJKsc-Regular.otf`` of a noto-cjk release, or
``NotoSansCJK-Regular.ttc`` with ``--font-number 2``) works the same; update the version named
here and in OFL.txt (and its copyright line, from the font's name table). The output is
deterministic: the source's timestamps are kept.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from fontTools import subset, version
from fontTools.ttLib import TTFont

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tfcourse" / "lab" / "fonts" / "NotoSansCJKscSubset-Regular.otf"
FAMILY = ("Noto Sans CJK SC", "Noto Sans CJK SC Subset")
POSTSCRIPT = ("NotoSansCJKsc", "NotoSansCJKscSubset")
# The name table's records that name the font: family, unique ID, full name, PostScript name,
# typographic family and subfamily, WWS family, variations prefix.
NAMES = {1, 3, 4, 6, 16, 17, 21, 25}

# Unicode blocks kept besides GB 2312 (inclusive ranges): what a figure's label may hold.
RANGES = (
    (0x0020, 0x007E),  # ASCII
    (0x00A0, 0x024F),  # Latin-1 Supplement, Latin Extended-A and -B (pinyin: ǎ, ǚ)
    (0x0370, 0x03FF),  # Greek (α, β, θ, σ)
    (0x0400, 0x04FF),  # Cyrillic
    (0x2000, 0x206F),  # General Punctuation (— “ ” … ‰)
    (0x2070, 0x209F),  # Superscripts and Subscripts
    (0x20A0, 0x20CF),  # Currency Symbols
    (0x2100, 0x218F),  # Letterlike Symbols, Number Forms (℃ № Ⅰ Ⅱ)
    (0x2190, 0x21FF),  # Arrows
    (0x2200, 0x22FF),  # Mathematical Operators (− × ÷ ≈ ≤ ∞ ∑ √)
    (0x2460, 0x24FF),  # Enclosed Alphanumerics (① ⑴)
    (0x2500, 0x257F),  # Box Drawing
    (0x25A0, 0x25FF),  # Geometric Shapes (■ □ ▲ ●)
    (0x2600, 0x26FF),  # Miscellaneous Symbols (★ ☆)
    (0x3000, 0x303F),  # CJK Symbols and Punctuation (、 。 「 」 【 】)
    (0xFF00, 0xFFEF),  # Halfwidth and Fullwidth Forms (， ！ （ ）)
)
# The OpenType features HarfBuzz (matplotlib's text layout) applies to horizontal text.
FEATURES = ["ccmp", "mark", "mkmk", "liga", "calt", "clig", "rlig", "rclt", "kern"]
CJK = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff]")


def gb2312() -> set[str]:
    """Every character of GB 2312: 6,763 hanzi and 682 others (rows 1-9)."""
    characters = set()
    for row in range(0xA1, 0xF8):
        for cell in range(0xA1, 0xFF):
            try:
                characters.add(bytes((row, cell)).decode("gb2312"))
            except UnicodeDecodeError:
                continue  # an unassigned position
    return characters


def course_characters(root: Path = ROOT) -> set[str]:
    """The CJK characters the course writes: in the package's code, the Chinese notebooks
    (every cell) and the translation sources (``solutions/*.zh.md``)."""
    texts = [path.read_text(encoding="utf-8") for path in (root / "tfcourse").rglob("*.py")]
    texts += [path.read_text(encoding="utf-8") for path in (root / "solutions").glob("*.zh.md")]
    for folder in (root / "notebooks" / "zh", root / "solutions" / "zh"):
        for path in sorted(folder.glob("*.ipynb")):
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            texts += ["".join(cell["source"]) for cell in cells]
    return {char for text in texts for char in CJK.findall(text)}


def wanted(root: Path = ROOT) -> set[int]:
    """The code points the subset keeps (those the source font has)."""
    points = {ord(char) for char in gb2312() | course_characters(root)}
    for first, last in RANGES:
        points.update(range(first, last + 1))
    return points


def rename(font: TTFont) -> None:
    """Give the subset its own family and PostScript names, in the name table and the CFF
    table, and say in its version string what it is."""
    for record in font["name"].names:
        if record.nameID == 5:
            record.string = f"{record.toUnicode()}; tfcourse subset (fontTools {version})"
        elif record.nameID in NAMES:
            record.string = record.toUnicode().replace(*FAMILY).replace(*POSTSCRIPT)
    cff = font["CFF "].cff
    cff.fontNames = [name.replace(*POSTSCRIPT) for name in cff.fontNames]
    top = cff.topDictIndex[0]
    for key in ("FullName", "FamilyName"):
        if hasattr(top, key):
            setattr(top, key, getattr(top, key).replace(*FAMILY))
    for sub in getattr(top, "FDArray", []):
        if hasattr(sub, "FontName"):
            sub.FontName = sub.FontName.replace(*POSTSCRIPT)


def make_subset(source: Path, out: Path, font_number: int = -1) -> TTFont:
    """Subset ``source`` to ``wanted()``, rename it and save it as ``out``."""
    font = TTFont(source, fontNumber=font_number, recalcTimestamp=False)
    if "CFF " not in font:
        sys.exit(f"subset_font: {source} has no CFF outlines: give the .otf (or .otc/.ttc) font")
    options = subset.Options()
    options.layout_features = FEATURES
    options.name_IDs = ["*"]  # the licence (13, 14), trademark (7) and typographic names too
    options.name_languages = ["*"]
    options.desubroutinize = True  # the same size, and it compresses better (git, the wheel)
    options.notdef_outline = True  # a missing character shows as a box, not as nothing
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=wanted())
    subsetter.subset(font)
    rename(font)
    out.parent.mkdir(parents=True, exist_ok=True)
    font.save(out)
    return font


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="Noto Sans CJK SC Regular (.otf, .otc, .ttc)")
    parser.add_argument(
        "--font-number", type=int, default=-1, help="the font's index in a .ttc/.otc collection"
    )
    parser.add_argument("--out", type=Path, default=OUT, help=f"default: {OUT.relative_to(ROOT)}")
    args = parser.parse_args()
    font = make_subset(args.source, args.out, args.font_number)
    cmap = font.getBestCmap()
    lacking = sorted((gb2312() | course_characters()) - {chr(point) for point in cmap})
    print(
        f"{args.out}: {args.out.stat().st_size / 1e6:.2f} MB, {len(cmap):,} characters, "
        f"{font['maxp'].numGlyphs:,} glyphs; {font['name'].getDebugName(4)}"
    )
    if lacking:
        sys.exit(f"subset_font: the source lacks {len(lacking)} characters: {''.join(lacking)}")


if __name__ == "__main__":
    main()
