"""tfcourse: build a decoder-only Transformer from scratch, with graded reference implementations.

This module is the public face: what the notebooks use as ``tc.X``. The package's wings
that notebooks meet (CONTRIBUTING.md lists them all):

- ``tfcourse.nn``      the reference model (attention, norms, MLPs, positions, block, GPT, config)
- ``tfcourse.checks``  ``check_xxx(your_code)``: one module per topic
- ``tfcourse.lab``     what notebooks show: widgets, plots, gradient probes, timing, production
                       demos
- ``tfcourse.train``   data sets, the optimizer and schedule, the training loop, checkpoints
- ``tfcourse.course``  notebooks as files, and the learner's commands on them

Every model module takes and returns ``(batch, seq, d_model)`` tensors and
validates its input with a ``ValueError``/``TypeError`` that names what it expected.
"""

from typing import TYPE_CHECKING

from .version import __version__

# What notebooks use as `tc.<name>`, imported on first use (PEP 562): `import tfcourse`
# imports no torch, so `tfcourse --help` and the grader's command line answer at once, and
# `import tfcourse as tc` does not pay for ipywidgets/matplotlib. The wings themselves
# (`tc.nn`, `tc.lab`, `tc.train`, `tc.course`, `tc.checks`) load the same way.
_MODULES = {
    "checks": "tfcourse.checks",
    "widgets": "tfcourse.lab.widgets",
    "plots": "tfcourse.lab.plots",
    "probes": "tfcourse.lab.probes",
    "timing": "tfcourse.lab.timing",
    "production": "tfcourse.lab.production",
    "data": "tfcourse.train.data",
    "training": "tfcourse.train.loop",
    "runtime": "tfcourse.runtime",
    **{wing: f"tfcourse.{wing}" for wing in ("nn", "lab", "train", "course")},
}
_NAMES = {
    "tfcourse.nn.attention": (
        "KVCache",
        "MultiHeadAttention",
        "causal_mask",
        "scaled_dot_product_attention",
    ),
    "tfcourse.nn.block": ("TransformerBlock", "TransformerStack"),
    "tfcourse.nn.config": ("PRESETS", "GPTConfig"),
    "tfcourse.nn.mlp": ("FeedForward", "SwiGLU", "swiglu_hidden_dim"),
    "tfcourse.nn.model": ("GPT",),
    "tfcourse.nn.norms": ("LayerNorm", "RMSNorm", "layernorm_backward", "make_norm"),
    "tfcourse.nn.positional": (
        "LearnedPositionalEmbedding",
        "RotaryEmbedding",
        "apply_rotary",
        "rotary_cos_sin",
        "sinusoidal_encoding",
    ),
    "tfcourse.runtime": ("default_device", "fmt", "seed_everything"),
    "tfcourse.language": ("pad", "yes_no"),
}
_HOME = {name: module for module, names in _NAMES.items() for name in names}

if TYPE_CHECKING:  # what type checkers and editors see, without the lazy import
    from .language import pad, yes_no
    from .nn.attention import KVCache, MultiHeadAttention, causal_mask, scaled_dot_product_attention
    from .nn.block import TransformerBlock, TransformerStack
    from .nn.config import PRESETS, GPTConfig
    from .nn.mlp import FeedForward, SwiGLU, swiglu_hidden_dim
    from .nn.model import GPT
    from .nn.norms import LayerNorm, RMSNorm, layernorm_backward, make_norm
    from .nn.positional import (
        LearnedPositionalEmbedding,
        RotaryEmbedding,
        apply_rotary,
        rotary_cos_sin,
        sinusoidal_encoding,
    )
    from .runtime import default_device, fmt, seed_everything


def progress(folder=".") -> None:
    """Print every exercise of the course as it stands in ``folder`` (default: the folder this
    notebook runs in): passed, failing with the mistake its check named, not started, or
    without a notebook. The same table as ``tfcourse progress``; your notebooks are read, as
    you last saved them, and never changed."""
    from .grade.progress import progress as rows_of
    from .grade.progress import table

    print(table(rows_of(folder)))


def yours(folder="."):
    """The model and the loop you built, read from your notebooks in ``folder`` (default: the
    folder this notebook runs in): each part that passes its check is yours, the others are
    the reference's, and ``print(tc.yours())`` says which and why. ``.gpt(config)`` builds your
    GPT from your blocks, built from your attention, norms and MLPs
    (``tfcourse/yours.py``)."""
    from .yours import yours as read

    return read(folder)


def __getattr__(name):
    import importlib

    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    if name in _HOME:
        value = getattr(importlib.import_module(_HOME[name]), name)
        globals()[name] = value  # looked up once
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_HOME, *_MODULES})


__all__ = [
    "GPT",
    "PRESETS",
    "FeedForward",
    "GPTConfig",
    "KVCache",
    "LayerNorm",
    "LearnedPositionalEmbedding",
    "MultiHeadAttention",
    "RMSNorm",
    "RotaryEmbedding",
    "SwiGLU",
    "TransformerBlock",
    "TransformerStack",
    "__version__",
    "apply_rotary",
    "causal_mask",
    "default_device",
    "fmt",
    "layernorm_backward",
    "make_norm",
    "pad",
    "progress",
    "rotary_cos_sin",
    "scaled_dot_product_attention",
    "seed_everything",
    "sinusoidal_encoding",
    "swiglu_hidden_dim",
    "yes_no",
    "yours",
]
