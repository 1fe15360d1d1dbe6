"""Matplotlib figures the course draws: attention heatmaps and gradient-norm curves.

Every function takes an optional ``ax``. Without one it builds a standalone
``matplotlib.figure.Figure`` that pyplot does not know about: it is never shown
by accident at the end of a cell, never stacks up in pyplot's registry, and
needs no ``plt.close``. Show it with ``display(fig)``, or turn it into PNG bytes
with ``figure_to_png``. With an ``ax`` (e.g. from ``plt.subplots``) the function
draws into it and returns its figure, so pyplot users keep their usual flow.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

# Values below this are drawn at this height on a log axis (a log axis cannot show 0).
LOG_FLOOR = 1e-12


def _as_array(name: str, values, ndim: int) -> np.ndarray:
    """A float NumPy array of ``ndim`` dimensions from a tensor, array or nested list."""
    if hasattr(values, "detach"):                     # a torch tensor, on any device
        values = values.detach().float().cpu().numpy()
    array = np.asarray(values, dtype=float)
    if array.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {array.shape}")
    return array


def figure_to_png(fig: Figure, dpi: int = 90) -> bytes:
    """The figure as PNG bytes (the figure is left open; standalone figures need no closing)."""
    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def _new_axes(ax, figsize):
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=figsize)
    return fig, fig.add_subplot()


def _label_tokens(ax, tokens: Sequence[str] | None, n_queries: int, n_keys: int):
    if tokens is None:
        ax.set_xlabel("key position")
        ax.set_ylabel("query position")
        return
    if len(tokens) != n_keys or n_keys != n_queries:
        raise ValueError(f"tokens must have one label per position ({n_keys}), got {len(tokens)}")
    # Spaces and newlines would be invisible tick labels; show them as symbols.
    labels = [{" ": "␣", "\n": "⏎"}.get(t, t) for t in tokens]
    ax.set_xticks(range(n_keys), labels, fontsize=8, fontfamily="monospace")
    ax.set_yticks(range(n_queries), labels, fontsize=8, fontfamily="monospace")
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")


def attention_heatmap(weights, tokens: Sequence[str] | None = None, *, ax=None,
                      title: str | None = None, colorbar: bool = True) -> Figure:
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
    _label_tokens(ax, tokens, *weights.shape)
    if title:
        ax.set_title(title, fontsize=10)
    if colorbar:
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="weight")
    return fig


def attention_heads_grid(weights, tokens: Sequence[str] | None = None, *,
                         title: str | None = None) -> Figure:
    """One small heatmap per head, side by side.

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
        attention_heatmap(weights[head], tokens, ax=ax, title=f"head {head}", colorbar=False)
        if head:
            ax.set_ylabel("")
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def gradient_norms(series: Mapping[str, Sequence[float]], *, embedding: Mapping[str, float] | None = None,
                   ax=None, title: str | None = None, log: bool = True) -> Figure:
    """Gradient norm per block, one line per model (e.g. ``{"pre-LN": [...], "post-LN": [...]}``).

    Args:
        series: name -> one gradient norm per block, first block first.
        embedding: optional name -> gradient norm at the embedding output, drawn
            at position 0 (the input of the first block).
        ax: draw into this axes instead of a new standalone figure.
        title: axes title.
        log: logarithmic y axis (values below ``LOG_FLOOR`` are drawn at it).
    """
    if not isinstance(series, Mapping) or not series:
        raise ValueError(f"series must be a non-empty mapping name -> norms, got {series!r}")
    fig, ax = _new_axes(ax, (6.0, 3.4))
    markers = iter("os^Dv")
    for name, norms in series.items():
        values = _as_array(f"series[{name!r}]", list(norms), 1)
        positions = np.arange(1, len(values) + 1)
        if embedding is not None and name in embedding:
            positions = np.concatenate([[0], positions])
            values = np.concatenate([[float(embedding[name])], values])
        if log:
            values = np.maximum(values, LOG_FLOOR)
        ax.plot(positions, values, marker=next(markers, "o"), markersize=4, label=name)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("block (0 = embedding output)" if embedding else "block")
    ax.set_ylabel("gradient norm")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    return fig
