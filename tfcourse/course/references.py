"""What does an exercise for the learner: the one list the grader keeps.

For each exercise, the **reference names** are sealed away in the grading worker (a stub
that refuses to run, in every module of the sealed package copy); the **built-ins** are
trapped in the worker:

- reference names: what the solution's exercise cell defines, the solution's metadata
  ``tfcourse.reference`` (a teacher's own exercise), and ``COURSE_HELPERS`` below: course
  code that would do the exercise's core for the learner;
- built-ins: the solution's metadata ``tfcourse.builtins`` and ``BUILTIN_ALIASES`` below:
  other spellings of the same whole-job built-in, trapped wherever torch's modules hold
  them;
- torch functions seen running: ``WATCHED`` below, the names of the torch functions that
  do the whole job. While the check calls the learner's code, the worker watches every
  torch function that runs (a ``TorchFunctionMode``, which sees each call whatever the
  spelling: ``F.rms_norm``, ``torch.rms_norm``, ``torch._C._VariableFunctions.rms_norm``,
  ``torch.ops.aten.rms_norm.default``) and records those named here.

Course code that builds on an exercise's reference needs no entry: it calls the stub and
fails too (``TransformerBlock`` builds a sealed ``MultiHeadAttention``). Traps and the
watch are best effort (the worker is the learner's process, which can undo both); the
sealed reference is not: it is absent.
"""

from __future__ import annotations

from . import notebook_format
from .restamp import defined_names

COURSE_HELPERS: dict[str, tuple[str, ...]] = {
    # It attends with the course's own attention (or PyTorch's fused one).
    "scaled_dot_product_attention": ("MultiHeadAttention",),
    # The rotation itself, and the course's tools that rotate queries and keys.
    "apply_rotary": ("rotate_half", "RotaryEmbedding", "rotary_scores", "context_extension"),
    # The course's other ways to build the same tables.
    "rotary_cos_sin": (
        "RotaryEmbedding",
        "rounded_rotary_tables",
        "rotary_scores",
        "context_extension",
    ),
    # Cached attention: the course's attention module does it with its KV cache.
    "attend_with_cache": ("MultiHeadAttention",),
    # The course's own training loop.
    "train_loop": ("train", "Trainer"),
    # The course's own sampling.
    "generate": ("sample_text",),
    # The course's tokenizer counts and merges pairs itself.
    "most_frequent_pair": ("ByteBPE",),
    "merge_pair": ("ByteBPE", "_merge"),
}

_ATTENTION = (
    "torch.ops.aten.scaled_dot_product_attention",
    "torch._C._nn.scaled_dot_product_attention",
)
BUILTIN_ALIASES: dict[str, tuple[str, ...]] = {
    "LayerNorm": (
        "torch.ops.aten.layer_norm",
        "torch.ops.aten.native_layer_norm",
        "torch.nn.functional.instance_norm",
        "torch.instance_norm",
        "torch.group_norm",
        "torch.native_group_norm",
        "torch.ops.aten.group_norm",
        "torch.ops.aten.instance_norm",
        "torch.nn.InstanceNorm1d",
    ),
    "RMSNorm": ("torch.ops.aten.rms_norm",),
    "scaled_dot_product_attention": _ATTENTION,
}

# Functions a learner's own implementation never calls (each does the whole job), by the
# name the function itself carries (an operator's overload suffix dropped).
_NORMS = (
    "layer_norm",
    "native_layer_norm",
    "group_norm",
    "native_group_norm",
    "instance_norm",
    "batch_norm",
    "native_batch_norm",
)
_FUSED_ATTENTION = (
    "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "multi_head_attention_forward",
    "_native_multi_head_attention",
)
WATCHED: dict[str, tuple[str, ...]] = {
    "LayerNorm": _NORMS,
    "RMSNorm": ("rms_norm", "_fused_rms_norm"),
    "scaled_dot_product_attention": _FUSED_ATTENTION,
    "MultiHeadAttention": ("multi_head_attention_forward", "_native_multi_head_attention"),
}


def exercise_cell(solution, exercise: str):
    """The solution's exercise cell of ``exercise``, or None."""
    return next(
        (
            cell
            for cell in solution.cells
            if notebook_format.is_exercise(cell) and notebook_format.exercise_name(cell) == exercise
        ),
        None,
    )


def reference_names(solution, exercise: str) -> frozenset[str]:
    """The names that count as ``exercise``'s reference (see the module docstring)."""
    cell = exercise_cell(solution, exercise)
    if cell is None:
        return frozenset()
    meta = cell.metadata.get("tfcourse", {})
    meta = meta if isinstance(meta, dict) else {}
    return frozenset(
        defined_names(cell.source)
        | set(meta.get("reference", []))
        | set(COURSE_HELPERS.get(exercise, ()))
    )


def builtins(solution, exercise: str) -> tuple[str, ...]:
    """The dotted names of the built-ins that do ``exercise``'s whole job."""
    cell = exercise_cell(solution, exercise)
    if cell is None:
        return ()
    meta = cell.metadata.get("tfcourse", {})
    meta = meta if isinstance(meta, dict) else {}
    listed = [*meta.get("builtins", []), *BUILTIN_ALIASES.get(exercise, ())]
    return tuple(dict.fromkeys(listed))


def watched(exercise: str) -> tuple[str, ...]:
    """The torch functions that, seen running during ``exercise``'s check, mean the learner
    handed the whole job to a built-in (``WATCHED``)."""
    return WATCHED.get(exercise, ())
