"""tfcourse: reference implementations of a decoder-only Transformer, one idea per module.

Every module takes and returns ``(batch, seq, d_model)`` tensors and validates
its input with a ``ValueError``/``TypeError`` that names what it expected.
"""

from .attention import KVCache, MultiHeadAttention, causal_mask, scaled_dot_product_attention
from .block import TransformerBlock, TransformerStack
from .config import PRESETS, GPTConfig
from .mlp import FeedForward, SwiGLU, swiglu_hidden_dim
from .model import GPT
from .norms import LayerNorm, RMSNorm
from .positional import (LearnedPositionalEmbedding, RotaryEmbedding, apply_rotary,
                         rotary_cos_sin, sinusoidal_encoding)
from .runtime import default_device, fmt, seed_everything

__version__ = "0.1.0"

# `tc.widgets.attention_explorer()` etc. work after a plain `import tfcourse as tc`,
# without paying for ipywidgets/matplotlib on every import (PEP 562).
_LAZY_SUBMODULES = ("checks", "data", "experiments", "plots", "production", "training", "widgets")


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "GPT", "GPTConfig", "PRESETS", "FeedForward", "KVCache", "LayerNorm",
    "LearnedPositionalEmbedding", "MultiHeadAttention", "RMSNorm", "RotaryEmbedding", "SwiGLU",
    "TransformerBlock", "TransformerStack", "apply_rotary", "causal_mask", "default_device", "fmt",
    "rotary_cos_sin", "scaled_dot_product_attention", "seed_everything", "sinusoidal_encoding",
    "swiglu_hidden_dim", "__version__",
]
