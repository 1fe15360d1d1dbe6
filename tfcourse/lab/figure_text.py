"""The words a figure shows, stored beside its picture, so that a test can read them.

A figure is stored in a notebook as a PNG, and no test can read its labels back. In a
Jupyter kernel (the first cell's ``setup_notebook``), ``record_figure_texts`` wraps
IPython's PNG formatter for matplotlib figures: each picture's output then carries, in its
metadata, the texts the figure draws (titles, axis and tick labels, legend entries,
annotations) under ``TEXTS_KEY``. A picture the package draws itself (``plots.figure_to_png``,
the widgets' figures) carries them inside the PNG, as a text chunk of that name
(``png_metadata``). The Chinese edition's test reads them to find an English label in a
Chinese figure (``tests/test_chinese_everywhere.py``); JupyterLab ignores both.
"""

from __future__ import annotations

import json

TEXTS_KEY = "tfcourse_texts"


def figure_texts(figure) -> list[str]:
    """Every visible text of a matplotlib ``figure`` that has a letter (words, not tick
    numbers), once each, in drawing order."""
    from matplotlib.text import Text

    texts: list[str] = []
    for artist in figure.findobj(Text):
        text = artist.get_text().strip()
        if any(c.isalpha() for c in text) and artist.get_visible() and text not in texts:
            texts.append(text)
    return texts


def png_metadata(figure) -> dict[str, str]:
    """``savefig(metadata=...)`` for a PNG that keeps ``figure``'s texts (as JSON)."""
    return {TEXTS_KEY: json.dumps(figure_texts(figure), ensure_ascii=False)}


def record_figure_texts(shell) -> bool:
    """Make ``shell`` (an IPython shell whose inline backend is on) store each figure's texts
    in its picture's metadata. Returns whether it could (no PNG formatter for figures: no)."""
    from matplotlib.figure import Figure

    formatter = shell.display_formatter.formatters["image/png"]
    try:
        draw = formatter.lookup_by_type(Figure)
    except KeyError:
        return False
    if getattr(draw, "records_texts", False):
        return True

    def draw_with_texts(figure):
        data = draw(figure)
        return None if data is None else (data, {TEXTS_KEY: figure_texts(figure)})

    draw_with_texts.records_texts = True  # type: ignore[attr-defined]
    formatter.for_type(Figure, draw_with_texts)
    return True
