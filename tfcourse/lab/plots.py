"""Matplotlib figures the course draws: attention heatmaps and gradient-norm curves.

Every function takes an optional ``ax``. Without one it builds a standalone
``matplotlib.figure.Figure`` that pyplot does not know about: it is never shown
by accident at the end of a cell, never stacks up in pyplot's registry, and
needs no ``plt.close``. Show it with ``display(fig)``, or turn it into PNG bytes
with ``figure_to_png``. With an ``ax`` (e.g. from ``plt.subplots``) the function
draws into it and returns its figure, so pyplot users keep their usual flow.

Axes that count (positions, blocks, steps, heads) carry whole-number ticks only,
through ``integer_ticks``; use it on your own figures too.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, NullLocator

from ..language import say
from .figure_text import png_metadata

# Values below this are drawn at this height on a log axis (a log axis cannot show 0).
LOG_FLOOR = 1e-12


def _as_array(name: str, values, ndim: int) -> np.ndarray:
    """A float NumPy array of ``ndim`` dimensions from a tensor, array or nested list."""
    if hasattr(values, "detach"):  # a torch tensor, on any device
        values = values.detach().float().cpu().numpy()
    array = np.asarray(values, dtype=float)
    if array.ndim != ndim:
        raise ValueError(
            say(
                f"{name} must have {ndim} dimensions, got shape {array.shape}",
                f"{name} 必须是 {ndim} 维的，实际的形状是 {array.shape}",
            )
        )
    return array


def figure_to_png(fig: Figure, dpi: int = 90) -> bytes:
    """The figure as PNG bytes (the figure is left open; standalone figures need no closing)."""
    if not isinstance(fig, Figure):
        got = type(fig).__name__
        raise TypeError(
            say(
                f"fig must be a matplotlib Figure, got {got}",
                f"fig 必须是 matplotlib 的 Figure，实际是 {got}",
            )
        )
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight", metadata=png_metadata(fig))
    return buffer.getvalue()


def integer_ticks(ax, axis: str = "both"):
    """Ticks at whole numbers only on an axis that counts (positions, blocks, steps, heads).

    Matplotlib picks "nice" tick values, and on a short axis those are halves
    (0, 0.5, 1, 1.5): a learner reads a position 0.5 that does not exist. This puts the
    major ticks on integers (``MaxNLocator(integer=True)``, still thinned on a long axis;
    ``min_n_ticks=1`` keeps that true when the axis spans a single integer, one position
    or one block) and removes minor ticks, which would fall between the integers.

    Args:
        ax: a matplotlib axes.
        axis: ``"x"``, ``"y"`` or ``"both"``.

    Returns:
        ``ax``, so that it can be chained.
    """
    if axis not in ("x", "y", "both"):
        raise ValueError(
            say(
                f"axis must be 'x', 'y' or 'both', got {axis!r}",
                f"axis 必须是 'x'、'y' 或 'both'，实际是 {axis!r}",
            )
        )
    for name in ("x", "y") if axis == "both" else (axis,):
        target = ax.xaxis if name == "x" else ax.yaxis
        target.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        target.set_minor_locator(NullLocator())
    return ax


def _new_axes(ax, figsize):
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=figsize)
    return fig, fig.add_subplot()


# Tick labels: font size (points), longest label (characters), room per label (in font sizes).
TICK_FONTSIZE = 8
MAX_LABEL_CHARS = 6
_LABEL_SPACING = 1.4


def _tick_label(token: str) -> str:
    """A short, visible label: spaces and newlines as symbols, long tokens cut with '…'."""
    label = "".join({" ": "␣", "\n": "⏎", "\t": "⇥"}.get(ch, ch) for ch in str(token))
    return label if len(label) <= MAX_LABEL_CHARS else label[: MAX_LABEL_CHARS - 1] + "…"


def _label_step(ax, n_positions: int, axis: str) -> int:
    """Label every ``step``-th position so that labels one font size high never overlap.

    The room is the axes' side in points (on the x axis labels are turned upright when
    longer than one character, so their height is what must fit there too).
    """
    ax.apply_aspect()  # imshow keeps squares: the drawn box is smaller
    box = ax.get_position()
    inches = (
        box.width * ax.figure.get_figwidth()
        if axis == "x"
        else box.height * ax.figure.get_figheight()
    )
    fits = max(1, int(inches * 72 / (TICK_FONTSIZE * _LABEL_SPACING)))
    return max(1, -(-n_positions // fits))  # ceil division


def _label_tokens(ax, tokens: Sequence[str] | None, n_queries: int, n_keys: int):
    """Token tick labels, thinned to what fits and cut short; unlabelled positions keep a tick.

    Without tokens the axes show position numbers: whole numbers only (``integer_ticks``).
    With tokens every tick sits on a position (0..T-1) by construction.
    """
    if tokens is None:
        integer_ticks(ax)
        ax.set_xlabel(say("key position", "键的位置"))
        ax.set_ylabel(say("query position", "查询的位置"))
        return
    if len(tokens) != n_keys or n_keys != n_queries:
        got = len(tokens)
        raise ValueError(
            say(
                f"tokens must have one label per position ({n_keys}), got {got}",
                f"tokens 必须为每个位置各给一个标签（共 {n_keys} 个），实际是 {got} 个",
            )
        )
    labels = [_tick_label(t) for t in tokens]
    upright = max(len(label) for label in labels) > 1 if labels else False
    for axis, n in (("x", n_keys), ("y", n_queries)):
        shown = range(0, n, _label_step(ax, n, axis))
        set_ticks = ax.set_xticks if axis == "x" else ax.set_yticks
        set_ticks(
            shown,
            [labels[i] for i in shown],
            fontsize=TICK_FONTSIZE,
            fontfamily="monospace",
            rotation=90 if axis == "x" and upright else 0,
        )
        set_ticks(range(n), minor=True)  # every position keeps a small tick
    ax.set_xlabel(say("key (attended to)", "键（被关注的）"))
    ax.set_ylabel(say("query (attending)", "查询（发出关注的）"))


def attention_heatmap(
    weights,
    tokens: Sequence[str] | None = None,
    *,
    ax=None,
    title: str | None = None,
    colorbar: bool = True,
) -> Figure:
    """Heatmap of one head's attention weights.

    Args:
        weights: ``(T_q, T_k)`` tensor or array; row ``i`` is how query ``i``
            spreads its attention over the keys (each row sums to 1).
        tokens: optional ``T`` labels for the positions (``T_q == T_k``).
        ax: draw into this axes instead of a new standalone figure.
        title: axes title.
        colorbar: add a colorbar.

    Returns:
        The figure drawn into.
    """
    weights = _as_array("weights", weights, 2)
    fig, ax = _new_axes(ax, (4.6, 4.0))
    # vmin/vmax fixed to [0, 1] so that colours mean the same on every redraw.
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest")
    if title:
        ax.set_title(title, fontsize=10)
    if colorbar:
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label=say("weight", "权重"))
    _label_tokens(ax, tokens, *weights.shape)  # after the colorbar took its room
    return fig


def attention_heads_grid(
    weights, tokens: Sequence[str] | None = None, *, title: str | None = None
) -> Figure:
    """One small heatmap per head, side by side, with one colorbar for all.

    Tick labels are thinned to what fits (every k-th position) and long tokens cut short,
    so the figure stays readable at any text length.

    Args:
        weights: ``(H, T, T)`` attention weights of one layer.
        tokens: optional ``T`` position labels.
        title: figure title.
    """
    weights = _as_array("weights", weights, 3)
    n_heads = weights.shape[0]
    fig = Figure(figsize=(2.6 * n_heads + 0.6, 3.0))
    axes = fig.subplots(1, n_heads, squeeze=False)[0]
    for head, ax in enumerate(axes):
        attention_heatmap(
            weights[head], tokens, ax=ax, title=say(f"head {head}", f"头 {head}"), colorbar=False
        )
        if head:
            ax.set_ylabel("")
    # Every head is drawn on the same fixed [0, 1] scale, so one colorbar serves them all.
    fig.colorbar(
        axes[-1].images[0], ax=list(axes), fraction=0.03, pad=0.02, label=say("weight", "权重")
    )
    if tokens is not None:  # the colorbar took room: thin the labels again
        for head, ax in enumerate(axes):
            _label_tokens(ax, tokens, *weights.shape[1:])
            if head:  # the queries are the same for every head
                ax.set_ylabel("")
                ax.tick_params(axis="y", labelleft=False)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def gradient_norms(
    series: Mapping[str, Sequence[float]],
    *,
    embedding: Mapping[str, float] | None = None,
    ax=None,
    title: str | None = None,
    log: bool = True,
    round_off: float | None = None,
) -> Figure:
    """Gradient norm per block, one line per model (e.g. ``{"pre-LN": [...], "post-LN": [...]}``).

    Args:
        series: name -> one gradient norm per block, first block first.
        embedding: optional name -> gradient norm at the embedding output, drawn
            at position 0 (the input of the first block) as an open marker apart from
            the line: it is the gradient of an activation, blocks 1..N are parameter gradients.
        ax: draw into this axes instead of a new standalone figure.
        title: axes title.
        log: logarithmic y axis (values below ``LOG_FLOOR`` are drawn at it).
        round_off: optional float32 round-off level (``probes.roundoff_level``), drawn as
            a dashed line: points at or below it are noise, not gradients.
    """
    if round_off is not None and not (isinstance(round_off, (int, float)) and round_off >= 0):
        raise ValueError(
            say(
                f"round_off must be a number >= 0 or None, got {round_off!r}",
                f"round_off 必须是 >= 0 的数或 None，实际是 {round_off!r}",
            )
        )
    if not isinstance(series, Mapping) or not series:
        raise ValueError(
            say(
                f"series must be a non-empty mapping name -> norms, got {series!r}",
                f"series 必须是非空的映射（名称 -> 范数），实际是 {series!r}",
            )
        )
    fig, ax = _new_axes(ax, (6.0, 3.4))
    markers = iter("os^Dv")
    for name, norms in series.items():
        values = _as_array(f"series[{name!r}]", list(norms), 1)
        floor = LOG_FLOOR if log else -np.inf
        marker = next(markers, "o")
        (line,) = ax.plot(
            np.arange(1, len(values) + 1),
            np.maximum(values, floor),
            marker=marker,
            markersize=4,
            label=say(f"{name}: block parameters", f"{name}：块的参数"),
        )
        if embedding is not None and name in embedding:  # an activation's gradient: apart
            ax.plot(
                [0],
                [max(float(embedding[name]), floor)],
                marker=marker,
                markersize=7,
                linestyle="none",
                markerfacecolor="none",
                color=line.get_color(),
                label=say(f"{name}: embedding output", f"{name}：嵌入层的输出"),
            )
    if embedding:
        ax.axvline(0.5, color="0.6", linewidth=0.8, linestyle=":")
    if round_off is not None:
        ax.axhline(
            max(round_off, LOG_FLOOR if log else 0.0),
            color="0.3",
            linestyle="--",
            linewidth=1,
            label=say(
                "float32 round-off (largest |float32 - float64|)",
                "float32 舍入误差（|float32 - float64| 的最大值）",
            ),
        )
    if log:
        ax.set_yscale("log")
    ax.set_xlabel(
        say(
            "0: d loss / d embedding output;  1..N: d loss / d block parameters",
            "0：损失对嵌入层输出的梯度；1..N：损失对各块参数的梯度",
        )
        if embedding
        else say("block", "块")
    )
    ax.set_ylabel(say("gradient norm", "梯度范数"))
    integer_ticks(ax, "x")  # x counts blocks: no block 1.5
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    return fig
