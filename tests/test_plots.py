"""The attention figures stay readable: tick labels that never overlap, and a colorbar."""

from __future__ import annotations

import itertools

import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg

from tfcourse.lab import plots


def _weights(n_heads: int, T: int) -> torch.Tensor:
    """Causal attention-like weights (H, T, T): each row sums to 1 over its allowed keys."""
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(n_heads, T, T, generator=gen)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    return scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)


def _tick_boxes(fig, ax, axis: str):
    renderer = fig.canvas.get_renderer()
    labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    return [label.get_window_extent(renderer) for label in labels if label.get_text()]


def _overlapping(boxes, axis: str) -> list[tuple[int, int]]:
    """Pairs of neighbouring labels whose boxes overlap along ``axis``."""
    key = (lambda b: b.x0) if axis == "x" else (lambda b: b.y0)
    boxes = sorted(boxes, key=key)
    if axis == "x":
        return [(i, i + 1) for i in range(len(boxes) - 1) if boxes[i].x1 > boxes[i + 1].x0]
    return [(i, i + 1) for i in range(len(boxes) - 1) if boxes[i].y1 > boxes[i + 1].y0]


TEXTS = {
    "widget-maximum": list("the quick brown fox jumps over the lazy dog. abc"),  # 48
    "long-characters": list("a long text, one character a token, " * 6),  # 216
    "long-words": (
        "tokenization internationalization of extraordinarily long words " * 8
    ).split(),  # 40
}


@pytest.mark.parametrize("tokens", list(TEXTS.values()), ids=list(TEXTS))
def test_all_heads_view_has_a_colorbar_and_tick_labels_that_do_not_overlap(tokens):
    n_heads = 2
    fig = plots.attention_heads_grid(_weights(n_heads, len(tokens)), tokens, title="layer 0")
    FigureCanvasAgg(fig).draw()
    heads, extra = fig.axes[:n_heads], fig.axes[n_heads:]
    assert len(extra) == 1 and extra[0].get_ylabel() == "weight"  # one colorbar
    for ax in heads:
        for axis in "xy":
            boxes = _tick_boxes(fig, ax, axis)
            assert not _overlapping(boxes, axis), f"overlapping {axis} tick labels"
        assert _tick_boxes(fig, ax, "x"), "some keys keep a label"
    y_labels = [_tick_boxes(fig, ax, "y") for ax in heads]
    assert y_labels[0] and not any(y_labels[1:]), "query labels once, left of the first head"
    # No label reaches into the heatmap on its left.
    for left, right in itertools.pairwise(heads):
        image_right_edge = left.get_window_extent(fig.canvas.get_renderer()).x1
        assert all(box.x0 >= image_right_edge for box in _tick_boxes(fig, right, "x"))
    for ax in heads:  # every head's labels are cut short
        shown = [label.get_text() for label in ax.get_xticklabels() if label.get_text()]
        assert shown and all(len(label) <= plots.MAX_LABEL_CHARS for label in shown)
    assert plots.figure_to_png(fig).startswith(b"\x89PNG")


def test_every_position_is_labelled_when_the_text_is_short():
    tokens = ["a", " ", "\n", "b"]
    fig = plots.attention_heads_grid(_weights(2, 4), tokens)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "␣", "⏎", "b"]
    assert fig.axes[-1].get_ylabel() == "weight"


def test_single_head_heatmap_thins_long_texts_too():
    tokens = list("x" * 200)
    fig = plots.attention_heatmap(_weights(1, 200)[0], tokens)
    FigureCanvasAgg(fig).draw()
    ax = fig.axes[0]
    for axis in "xy":
        boxes = _tick_boxes(fig, ax, axis)
        assert 1 < len(boxes) < 200 and not _overlapping(boxes, axis)
    # Thinned labels, but every position keeps a (minor) tick.
    assert len(ax.get_xticks()) + len(ax.get_xticks(minor=True)) == 200
    assert fig.axes[1].get_ylabel() == "weight"


def test_long_tokens_are_cut_with_an_ellipsis():
    assert plots._tick_label("internationalization") == "inter…"
    assert plots._tick_label(" ") == "␣" and plots._tick_label("ab") == "ab"
