"""A font with Chinese glyphs for the Chinese edition's figures.

The package ships one: ``fonts/NotoSansCJKscSubset-Regular.otf``, Noto Sans CJK SC Regular
(Noto CJK, SIL Open Font License 1.1; the licence is ``fonts/OFL.txt``) cut down to GB 2312
(6,763 hanzi and its punctuation, pinyin, Greek and Cyrillic), ASCII and Latin, CJK
punctuation, full-width forms and every Chinese character the course writes: 1.9 MB, where the
package it replaces (``mplfonts``, six whole CJK fonts) took 103 MB. ``scripts/subset_font.py``
rebuilds it from the full font. Its family is "Noto Sans CJK SC Subset", so a full CJK font
installed on the machine (``CJK_FONTS``) is not shadowed by it: matplotlib draws each character
with the first font of the list that has it, the packaged subset first, so a character outside
the subset still shows where the machine has a CJK font. The file is registered with matplotlib
directly (``font_manager.fontManager.addfont``); nothing is copied or configured.
"""

from __future__ import annotations

from pathlib import Path

# Fonts with Chinese glyphs: the packaged subset, then those of Linux (Noto CJK, from
# fonts-noto-cjk), Windows and macOS; matplotlib takes the first one present for each
# character and falls back to DejaVu Sans for the rest.
PACKAGED_FONT = "Noto Sans CJK SC Subset"
CJK_FONTS = (
    PACKAGED_FONT,
    "Noto Sans CJK SC",
    "Microsoft YaHei",
    "PingFang SC",
    "Hiragino Sans GB",
    "Source Han Sans SC",
    "WenQuanYi Micro Hei",
    "SimHei",
)
PACKAGED_FILE = Path(__file__).with_name("fonts") / "NotoSansCJKscSubset-Regular.otf"


def packaged_font_file() -> Path | None:
    """The packaged font's file, or ``None`` where it is missing (a broken install)."""
    return PACKAGED_FILE if PACKAGED_FILE.is_file() else None


def register_packaged_font() -> bool:
    """Make matplotlib know the packaged font (once per process). Returns whether it could."""
    from matplotlib import font_manager

    path = packaged_font_file()
    if path is None:
        return False
    if not any(Path(font.fname) == path for font in font_manager.fontManager.ttflist):
        font_manager.fontManager.addfont(str(path))
    return True


def installed_cjk_fonts() -> list[str]:
    """The fonts of ``CJK_FONTS`` that matplotlib can use here (the packaged one registered
    first), in that order."""
    from matplotlib import font_manager

    register_packaged_font()
    installed = {font.name for font in font_manager.fontManager.ttflist}
    return [name for name in CJK_FONTS if name in installed]


def use_chinese_fonts() -> list[str]:
    """Draw text with the CJK fonts first (matplotlib's font family, and its sans-serif list)
    and minus signs as hyphens (some system CJK fonts lack U+2212). Returns the fonts found;
    without one, Chinese labels show as boxes, so say once how to get one instead of a
    warning per glyph."""
    import sys
    import warnings

    import matplotlib

    found = installed_cjk_fonts()
    rest = [name for name in matplotlib.rcParams["font.sans-serif"] if name not in found]
    matplotlib.rcParams["font.sans-serif"] = found + rest
    matplotlib.rcParams["axes.unicode_minus"] = False
    if found:
        # Each character from the first of these that has it (matplotlib's font fallback; a
        # generic family such as sans-serif stands for one font only): the packaged subset,
        # the machine's CJK fonts (a rare hanzi outside the subset), then DejaVu Sans, which
        # comes with matplotlib (a symbol no CJK font has).
        matplotlib.rcParams["font.family"] = [*found, "DejaVu Sans"]
    else:
        warnings.filterwarnings("ignore", message="Glyph .* missing from")
        print(
            f"提示：没有找到中文字体，图中的中文会显示成方框。课程自带的 {PACKAGED_FILE.name} "
            "不见了：请按 README 的步骤重新安装课程，或安装系统字体 Noto Sans CJK SC，"
            "然后重启内核。",
            file=sys.stderr,
        )
    return found
