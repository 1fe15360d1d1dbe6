"""A font with Chinese glyphs for the Chinese edition's figures.

The course depends on ``mplfonts``, a maintained package that ships Noto Sans CJK SC, so a
fresh setup draws Chinese labels on any operating system without a system font. The font
file is registered with matplotlib directly (``font_manager.fontManager.addfont``); the
package's own ``mplfonts init``, which copies fonts into matplotlib's data folder and edits
the ``matplotlibrc``, is not needed and not run. A CJK font installed on the machine is used
where the packaged one is missing.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

# Fonts with Chinese glyphs on Windows, macOS and Linux, and the packaged one; matplotlib
# takes the first one present for each character and falls back to DejaVu Sans for the rest.
PACKAGED_FONT = "Noto Sans CJK SC"
CJK_FONTS = (
    PACKAGED_FONT,
    "Microsoft YaHei",
    "PingFang SC",
    "Hiragino Sans GB",
    "Source Han Sans SC",
    "WenQuanYi Micro Hei",
    "SimHei",
)
_PACKAGED_FILE = ("fonts", "NotoSansCJKsc-Regular.otf")


def packaged_font_file() -> Path | None:
    """The Noto Sans CJK SC file that ``mplfonts`` ships, or ``None`` without the package.
    Found without importing ``mplfonts`` (its import pulls in its command-line tools)."""
    spec = importlib.util.find_spec("mplfonts")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder).joinpath(*_PACKAGED_FILE)
        if path.is_file():
            return path
    return None


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
    """Put the CJK fonts first in matplotlib's sans-serif list and draw minus signs as
    hyphens (the CJK fonts lack U+2212). Returns the fonts found; without one, Chinese
    labels show as boxes, so say once how to get one instead of a warning per glyph."""
    import sys
    import warnings

    import matplotlib

    found = installed_cjk_fonts()
    rest = [name for name in matplotlib.rcParams["font.sans-serif"] if name not in found]
    matplotlib.rcParams["font.sans-serif"] = found + rest
    matplotlib.rcParams["axes.unicode_minus"] = False
    if not found:
        warnings.filterwarnings("ignore", message="Glyph .* missing from")
        print(
            "提示：没有找到中文字体，图中的中文会显示成方框。请在课程的环境里执行 "
            "`pip install mplfonts`（或安装系统字体 Noto Sans CJK SC），然后重启内核。",
            file=sys.stderr,
        )
    return found
