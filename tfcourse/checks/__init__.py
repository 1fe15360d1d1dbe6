"""Checks for the course's exercises: ``check_xxx(your_code)`` judges one exercise.

Each check prints one stable line (``"LayerNorm: 6/6 checks passed"``) or raises
``AssertionError`` naming the failing case, the size of the difference and, where
it can tell, the likely mistake. Each check's docstring states the interface it
expects (constructor signature, parameter names and layout).

The cases are drawn from fixed seeds, the same on every run. The grader runs the checks
inside ``grading_cases(salt)``, which mixes a salt into every seed: same shapes, same
sub-checks, same success line, other numbers (see ``cases``).

In a notebook a failing check shows its verdict in a few lines, and an unsolved exercise
one line (``tfcourse.course.screen``): the checks exported here are wrapped by ``learner_facing``.
"""

# The imports below are re-exports, listed in the computed ``__all__`` at the end.
# ruff: noqa: F401
from ..course.screen import full_traceback, learner_facing
from ..language import current as _current_language
from ._harness import CheckArgumentError
from .attention import check_attention, check_causal_mask
from .batching import check_get_batch
from .block import check_transformer_block
from .bpe_codec import check_bpe_decode, check_bpe_encode
from .cases import grading_cases
from .claims import check_permute_qk_rows
from .counting import check_bias_savings, check_gpt2_small_params
from .evaluation import check_estimate_loss
from .generate import check_generate
from .gqa import check_repeat_kv
from .gradients import check_grad_norm_probe
from .llama_block import check_llama_block
from .mlp import check_feedforward, check_swiglu, check_swiglu_hidden_dim
from .model import check_gpt
from .modern import check_rotary, check_rotary_tables
from .multi_head import check_first_head_weights, check_multi_head_attention
from .norm_backward import check_layernorm_backward
from .norms import check_layernorm, check_rmsnorm
from .optimizer import check_configure_optimizer
from .pre_split import check_pre_split
from .production import check_fuse_qkv, check_kv_cache_attention
from .rotary_attention import check_rotary_attention
from .special_tokens import check_encode_with_special
from .tokenizer import check_merge_pair, check_most_frequent_pair
from .train_loop import check_train_loop
from .training import check_lr_schedule

for _name in [name for name in dir() if name.startswith("check_")]:
    globals()[_name] = learner_facing(globals()[_name])

_ENGLISH_DOCS = {name: globals()[name].__doc__ for name in dir() if name.startswith("check_")}


def localized_docs(language: str) -> None:
    """Give every check the docstring of ``language`` (``"en"`` or ``"zh"``), so that
    ``help(check_layernorm)`` reads Chinese in the Chinese edition, whose first cell chooses
    the language (``runtime.setup_notebook``). The Chinese docstrings are in ``docs_zh``."""
    from .docs_zh import DOCS_ZH

    for name, english in _ENGLISH_DOCS.items():
        globals()[name].__doc__ = DOCS_ZH[name] if language == "zh" else english


localized_docs(_current_language())

# Keep this last (add import lines above it): `from tfcourse.checks import *` then gives
# exactly the checks, not the submodule names (`model`, `block`, ...) a notebook also uses.
__all__ = sorted(name for name in dir() if name.startswith("check_"))
