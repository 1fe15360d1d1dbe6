"""The "prose (words)" column of the README's notebook table: words in markdown cells.

Code blocks, inline code and formulas ($...$, $$...$$) are left out; a word is a run of
Latin letters, with inner apostrophes or hyphens (``don't``, ``pre-LN``). For the English
solution notebooks.

    python scripts/prose_words.py            # every notebook in solutions/
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tfcourse.course import notebook_format

ROOT = Path(__file__).resolve().parents[1]
LEFT_OUT = [
    re.compile(r"```.*?```", re.S),
    re.compile(r"\$\$.*?\$\$", re.S),
    re.compile(r"\$[^$\n]*\$"),
    re.compile(r"`[^`]*`"),
]
WORD = re.compile(r"[A-Za-z]+(?:['’-][A-Za-z]+)*")


def prose_words(path: Path) -> int:
    total = 0
    for cell in notebook_format.read_notebook(path).cells:
        if cell.cell_type == "markdown":
            text = cell.source
            for pattern in LEFT_OUT:
                text = pattern.sub(" ", text)
            total += len(WORD.findall(text))
    return total


if __name__ == "__main__":
    paths = [Path(p) for p in sys.argv[1:]] or sorted((ROOT / "solutions").glob("*.ipynb"))
    for path in paths:
        print(f"{path.stem:28s} {prose_words(path):6,d}")
