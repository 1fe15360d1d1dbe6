"""What does an exercise for the learner: the two lists the grader keeps.

For each exercise:

- its **reference names** are sealed: in the grading worker's copy of ``tfcourse`` each is
  a stub that refuses to run (``seal.py``). They are what the solution's exercise cell
  defines and the solution's metadata ``tfcourse.reference`` (a teacher's own exercise).
  This holds whatever the learner's code does: the reference's code is not there.
- its **shortcuts** are watched: patterns of the functions that would do the whole job
  (``SHORTCUTS`` below, and the solution's metadata ``tfcourse.shortcuts``). While the
  check calls the learner's code the worker records every function that runs and matches
  one, whatever the spelling that reached it, and the exercise then earns nothing. This is
  best effort: the worker is the learner's process, which can turn the watch off.

A pattern is matched (``fnmatch``, case-sensitive, ``*`` also crosses dots) against what
runs: a torch operator or C function as ``torch.<its name>`` (``torch.native_layer_norm``
whether called as ``torch.native_layer_norm``, ``torch._C._VariableFunctions....`` or
``torch.ops.aten.native_layer_norm.default``), and Python code as ``<module>.<qualified
name>`` (``torch._refs.native_layer_norm``, ``tfcourse.nn.positional.RotaryEmbedding.forward``).
So ``torch.*layer_norm*`` covers every namespace of torch, decompositions and references
included. Course code that builds on an exercise's reference needs no entry: it calls the
stub and fails too (``TransformerBlock`` builds a sealed ``MultiHeadAttention``).
"""

from __future__ import annotations

from ..course import notebook_format
from ..language import say

# Every normalization torch has: a learner's norm computes the statistics itself.
_NORMS = (
    "torch.*layer_norm*",
    "torch.*rms_norm*",
    "torch.*group_norm*",
    "torch.*instance_norm*",
    "torch.*batch_norm*",
)
# Every fused or module attention torch has (the math kernel, flash, memory-efficient, cuDNN,
# their decompositions, nn.MultiheadAttention).
_ATTENTION = (
    "torch.*scaled_dot_product*",
    "torch.*flash_attention*",
    "torch.*efficient_attention*",
    "torch.*cudnn_attention*",
    "torch.*multi_head_attention*",
    "torch.*MultiheadAttention.*",
)
_TORCH_MODULES = ("torch.*MultiheadAttention.*", "torch.*multi_head_attention*")
_TORCH_BLOCKS = ("torch.nn.modules.transformer.*",)

SHORTCUTS: dict[str, tuple[str, ...]] = {
    "scaled_dot_product_attention": (*_ATTENTION, "tfcourse.*.MultiHeadAttention.*"),
    "MultiHeadAttention": _TORCH_MODULES,
    # The module's own forward with return_weights=True hands back every head's weights.
    "first_head_weights": (
        "tfcourse.*.MultiHeadAttention.forward",
        "tfcourse.*.MultiHeadAttention._attend",
    ),
    "LayerNorm": _NORMS,
    # By hand: no norm of torch's to differentiate, no autograd of any kind.
    "layernorm_backward": (*_NORMS, "torch.autograd.*", "torch.*backward*"),
    # RMSNorm from a LayerNorm of [x, -x] (mean zero, so its variance is the mean square):
    # torch's, or the course's own where LayerNorm is not sealed (a worker for RMSNorm alone).
    "RMSNorm": (*_NORMS, "tfcourse.*.LayerNorm.*", "transformers.*RMSNorm*"),
    "TransformerBlock": _TORCH_BLOCKS,
    "GPT": _TORCH_BLOCKS,
    # The course's attention takes rotary positions and fewer key/value heads too.
    "RotaryAttention": (*_TORCH_MODULES, "tfcourse.*.MultiHeadAttention.*"),
    # The course's block does it all; its attention would stand in for the learner's own.
    "LlamaBlock": (
        *_TORCH_BLOCKS,
        "tfcourse.*.TransformerBlock.*",
        "tfcourse.*.MultiHeadAttention.*",
    ),
    # kv.repeat_interleave(n_rep, dim=1) is an honest answer (a copy where expand makes
    # none), and the notebook's own check accepts it; transformers' own is not.
    "repeat_kv": ("transformers.*repeat_kv",),
    # The rotation itself, and the course's tools that rotate queries and keys.
    "apply_rotary": (
        "tfcourse.*.rotate_half",
        "tfcourse.*.RotaryEmbedding.*",
        "tfcourse.*.rotary_scores",
        "tfcourse.*.context_extension",
    ),
    # The course's other ways to build the same tables (sin/cos of position x frequency).
    "rotary_cos_sin": (
        "tfcourse.*.RotaryEmbedding.*",
        "tfcourse.*.rounded_rotary_tables",
        "tfcourse.*.rotary_scores",
        "tfcourse.*.context_extension",
        "tfcourse.*.sinusoidal_encoding",
        "tfcourse.*.rotary_inv_freq",
    ),
    # Cached attention: the course's attention module does it with its KV cache.
    "attend_with_cache": ("tfcourse.*.MultiHeadAttention.*", "tfcourse.*.KVCache.*"),
    # The course's own groups (sealed as the reference), wherever they are reached from.
    "configure_optimizer": ("tfcourse.*.configure_optimizer",),
    "train_loop": ("tfcourse.*.train", "tfcourse.*.Trainer.*"),
    "generate": (
        "tfcourse.*.sample_text",
        "tfcourse.*.GPT.generate",
        "tfcourse.*.GPT._sample",
        "tfcourse.*.GPT._next_token",
    ),
    # The course's datasets draw batches, and its training loop estimates the loss.
    "get_batch": ("tfcourse.train.data.*.batch",),
    "estimate_loss": ("tfcourse.*.evaluate",),
    # The course's tokenizer counts and merges pairs itself.
    "most_frequent_pair": ("tfcourse.*.ByteBPE.*",),
    "merge_pair": ("tfcourse.*.ByteBPE.*", "tfcourse.train.bpe._merge"),
    # The course's tokenizer encodes and decodes itself.
    "bpe_encode": ("tfcourse.*.ByteBPE.*",),
    "bpe_decode": ("tfcourse.*.ByteBPE.*",),
}


def _metadata(cell) -> dict:
    meta = cell.metadata.get("tfcourse", {}) if cell is not None else {}
    return meta if isinstance(meta, dict) else {}


def reference_names(solution, exercise: str) -> frozenset[str]:
    """The names sealed away for ``exercise`` (see the module docstring)."""
    cell = notebook_format.exercise_cell(solution, exercise)
    if cell is None:
        return frozenset()
    return frozenset(
        notebook_format.defined_names(cell.source) | set(_metadata(cell).get("reference", []))
    )


def shortcuts(solution, exercise: str) -> tuple[str, ...]:
    """The patterns of the functions that would do ``exercise``'s whole job."""
    meta = _metadata(notebook_format.exercise_cell(solution, exercise))
    listed = [*SHORTCUTS.get(exercise, ()), *map(str, meta.get("shortcuts", []))]
    return tuple(dict.fromkeys(listed))


def shortcut_said(seen: list[str]) -> str:
    """Why an exercise earned nothing: the shortcuts that ran, and the kernels reached past
    torch's functions (named ``aten::...`` by ``sealed/watch.py``'s ``Kernels``, whatever
    the patterns)."""
    kernels = ", ".join(sorted({name for name in seen if "::" in name}))
    called = ", ".join(sorted({name for name in seen if "::" not in name}))
    said = []
    if called:
        said.append(
            say(
                f"called {called}, which does the whole exercise",
                f"调用了 {called}，它包办了整个练习",
            )
        )
    if kernels:
        said.append(
            say(
                f"reached torch's kernels ({kernels}) past its Python functions (a TorchScript "
                f"function, torch._C's dispatcher), which an exercise may not do",
                f"绕过 torch 的 Python 函数直接用到了底层算子（{kernels}，例如通过 TorchScript "
                f"函数或 torch._C 的分派器），练习里不允许这样做",
            )
        )
    return say("; ", "；").join(said)
