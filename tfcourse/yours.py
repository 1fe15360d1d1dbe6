"""``tc.yours()``: the model and the loop the learner built, read from their own notebooks.

For every part the capstone runs (``PARTS``, in the order they build on each other), this
finds the learner's copy of the part's notebook in their folder, runs the notebook's imports
and the learner's cells from the exercise cell down to its check cell (a solution typed in a
new cell below the stub counts, as in grading), then the check the course wrote for it. A
part that passes is the learner's; a part that is missing, unsolved or failing is the
reference's, and the table says why. Parts compose (``compose.py``): the learner's block (their
``LlamaBlock`` where the config is LLaMA's, else their ``TransformerBlock``) is built from the
learner's norm, attention and MLP, their GPT from their blocks, their loop asks their ``lr_at``
and trains with the optimizer their ``configure_optimizer`` builds, and ``tokenizer(merges)``
cuts, encodes and decodes with their ``pre_split``, ``bpe_encode`` and ``bpe_decode``.

This is the learner's own code on their own machine, run in this process as their notebooks
run it: nothing is sealed. Nothing is written; their notebooks are read as last saved.
"""

from __future__ import annotations

import ast
import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

import torch

from .checks._harness import first_line
from .course import notebook_format
from .course.restamp import restamp
from .course.screen import one_line
from .course.stubs import is_stub_message
from .grade.progress import learner_folder_and_solutions
from .grade.sealed.session import checks_of
from .language import pad, say, text_width
from .train import compose
from .train.your_bpe import YourByteBPE


def _train_loop(model, optimizer, batches, *, max_lr, warmup_steps, max_norm=1.0):
    from .checks.train_loop import _loop

    return _loop(
        model, optimizer, batches, max_lr=max_lr, warmup_steps=warmup_steps, max_norm=max_norm
    )[0]


def _estimate_loss(model, batches):
    from .checks.evaluation import _estimate

    return _estimate(model, batches)


def _get_batch(data, batch_size, seq_len, *, generator=None):
    from .checks.batching import _batch

    return _batch(data, batch_size, seq_len, generator)


def _generate(
    model, idx, max_new_tokens, *, temperature=1.0, top_k=None, top_p=None, generator=None
):
    from .checks.generate import _sample

    return _sample(model, idx, max_new_tokens, temperature, top_k, generator, top_p=top_p)


def _rotary_attention(
    d_model, n_heads, *, max_seq_len, n_kv_heads=None, rope_base=10000.0, dropout=0.0, bias=False
):
    """Notebook 10's ``RotaryAttention`` as the package builds it: dropout on the output only."""
    import tfcourse

    attention = tfcourse.MultiHeadAttention(
        d_model,
        n_heads,
        max_seq_len=max_seq_len,
        n_kv_heads=n_kv_heads,
        rope_base=rope_base,
        dropout=dropout,
        bias=bias,
    )
    attention.dropout = 0.0  # the weights' dropout; resid_dropout keeps p
    return attention


def _llama_block(d_model, n_heads, *, max_seq_len, n_kv_heads=None, rope_base=10000.0, dropout=0.0):
    """Notebook 10's ``LlamaBlock`` as the package builds it (its check's reference)."""
    import tfcourse

    block = tfcourse.TransformerBlock(
        d_model,
        n_heads,
        max_seq_len=max_seq_len,
        n_kv_heads=n_kv_heads,
        rope_base=rope_base,
        dropout=dropout,
        norm="rmsnorm",
        mlp="swiglu",
        bias=False,
    )
    block.attn.dropout = 0.0  # the weights' dropout; each sublayer still drops its output
    return block


def _reference(name: str):
    """The course's own version of the part ``name``, with the exercise's signature."""
    import tfcourse

    from .nn.attention import repeat_kv
    from .train.bpe import PATTERN, ByteBPE, _merge
    from .train.optim import configure_optimizer, lr_at

    own = {
        "repeat_kv": repeat_kv,
        "RotaryAttention": _rotary_attention,
        "LlamaBlock": _llama_block,
        "lr_at": lr_at,
        "configure_optimizer": configure_optimizer,
        "train_loop": _train_loop,
        "estimate_loss": _estimate_loss,
        "get_batch": _get_batch,
        "generate": _generate,
        "merge_pair": _merge,
        "pre_split": PATTERN.findall,
        "bpe_encode": lambda text, merges: ByteBPE(merges).encode(text),
        "bpe_decode": lambda ids, merges: ByteBPE(merges).decode(ids),
    }
    return own[name] if name in own else getattr(tfcourse, name)


@dataclass(frozen=True)
class Part:
    """One exercise the capstone runs: its notebook, its id, and the name its cell defines
    (also the name of the reference it stands in for)."""

    notebook: str
    exercise: str
    name: str


# In the order they build on each other: a part's check runs with the parts above it.
PARTS = (
    Part("02_multi_head_attention", "MultiHeadAttention", "MultiHeadAttention"),
    Part("03_norms", "LayerNorm", "LayerNorm"),
    Part("03_norms", "RMSNorm", "RMSNorm"),
    Part("04_mlp", "FeedForward", "FeedForward"),
    Part("04_mlp", "swiglu_hidden_dim", "swiglu_hidden_dim"),
    Part("10_modern_block", "SwiGLU", "SwiGLU"),
    Part("10_modern_block", "rotary_cos_sin", "rotary_cos_sin"),
    Part("10_modern_block", "apply_rotary", "apply_rotary"),
    Part("10_modern_block", "repeat_kv", "repeat_kv"),
    Part("10_modern_block", "RotaryAttention", "RotaryAttention"),
    Part("10_modern_block", "LlamaBlock", "LlamaBlock"),
    Part("05_block", "TransformerBlock", "TransformerBlock"),
    Part("07_gpt", "GPT", "GPT"),
    Part("08_training", "lr_at", "lr_at"),
    Part("08_training", "configure_optimizer", "configure_optimizer"),
    Part("08_training", "train_loop", "train_loop"),
    Part("08_training", "estimate_loss", "estimate_loss"),
    Part("08_training", "get_batch", "get_batch"),
    Part("08_training", "generate", "generate"),
    # The tokenizer: the merges are learned by the course (the same two steps, at the speed a
    # million characters need); your merge_pair and pre_split serve your bpe_encode.
    Part("12_capstone", "merge_pair", "merge_pair"),
    Part("12_capstone", "pre_split", "pre_split"),
    Part("12_capstone", "bpe_encode", "bpe_encode"),
    Part("12_capstone", "bpe_decode", "bpe_decode"),
)


@dataclass
class Loaded:
    """One part as read: the object that runs, and why it is the reference's ("" if yours)."""

    part: Part
    value: object
    why: str = ""

    @property
    def yours(self) -> bool:
        return not self.why


def _imports(source: str) -> str:
    """Only the import statements of a cell (a setup cell also seeds, and sets the notebook's
    language: not what the capstone's kernel should get)."""
    try:
        tree = notebook_format.parse_python(source)
    except SyntaxError:
        return ""
    kept: list[ast.stmt] = [
        node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
    ]
    return ast.unparse(ast.Module(body=kept, type_ignores=[]))


def _exercise_cells(learner, exercise: str) -> list[str]:
    """The learner's code cells from ``exercise``'s exercise cell down to its check cell."""
    cells, inside = [], False
    for cell in learner.cells:
        mine = notebook_format.exercise_name(cell) == exercise
        if notebook_format.is_check(cell) and mine:
            break
        if notebook_format.is_exercise(cell) and mine:
            inside = True
        if inside and cell.get("cell_type") == "code" and not notebook_format.is_check(cell):
            cells.append(cell.get("source", ""))
    return cells


class _Notebook:
    """A learner notebook (restamped), its solution, and its namespace: its imports, ``tc``
    and ``training`` as overlays."""

    def __init__(self, learner, solution, overrides: dict[str, dict[str, object]]):
        import tfcourse

        from .train import loop

        self.learner, self.solution = learner, solution
        code = next((c for c in learner.cells if c.get("cell_type") == "code"), None)
        self.namespace: dict = {"__name__": "__yours__", "device": tfcourse.default_device()}
        exec(_imports(code.get("source", "")) if code else "", self.namespace)
        self.namespace["tc"] = compose.Overlay(tfcourse, overrides["tc"])
        self.namespace["training"] = compose.Overlay(loop, overrides["training"])


class Yours:
    """The parts of ``PARTS`` as read from one learner's folder (see the module docstring).

    ``yours.GPT``, ``yours.train_loop``, ...: the object that runs for that part.
    ``yours.gpt(config)``: the learner's GPT built for ``config`` from their parts.
    ``print(yours)``: which parts are the learner's, and why the others are not.
    """

    def __init__(self, folder: str | Path = ".", *, solutions_dir: str | Path | None = None):
        folder = Path(folder)
        solutions = learner_folder_and_solutions(folder, solutions_dir)
        self.folder = folder
        self.loaded: dict[str, Loaded] = {}
        self.used: list[compose.Used] = []  # what filled the slots of the last gpt(config)
        self._overrides: dict[str, dict[str, object]] = {"tc": {}, "training": {}}
        self._overrides["tc"]["make_norm"] = compose.norm_factory(self._pick, self.used)
        notebooks: dict[str, _Notebook | str] = {}
        for part in PARTS:
            if part.notebook not in notebooks:
                notebooks[part.notebook] = self._open(part.notebook, solutions)
            self._load(part, notebooks[part.notebook])

    # ------------------------------------------------------------------ reading

    def _open(self, name: str, solutions: Path) -> _Notebook | str:
        """The learner's notebook ``name``, or why it cannot be read."""
        path = self.folder / f"{name}.ipynb"
        if not path.is_file():
            return say(f"no {path.name} in this folder", f"这个文件夹里没有 {path.name}")
        try:
            solution = notebook_format.read_notebook(solutions / f"{name}.ipynb")
            learner, _ = restamp(notebook_format.read_notebook(path, require_ids=False), solution)
        except (ValueError, SyntaxError) as error:
            return say(f"{path.name} cannot be read: {error}", f"{path.name} 无法读取：{error}")
        try:
            return _Notebook(learner, solution, self._overrides)
        except Exception as error:  # noqa: BLE001 - the learner's imports: anything may fail
            return say(
                f"the imports of {path.name} fail: {first_line(error)}",
                f"{path.name} 的 import 失败：{first_line(error)}",
            )

    def _load(self, part: Part, notebook: _Notebook | str) -> None:
        reference = _reference(part.name)
        why = notebook if isinstance(notebook, str) else self._run(part, notebook)
        value = reference if why else notebook.namespace[part.name]  # type: ignore[union-attr]
        self.loaded[part.exercise] = Loaded(part, value, why)
        if why:
            if not isinstance(notebook, str):  # the notebook's later cells get the reference
                notebook.namespace[part.name] = reference
            return
        if part.name in ("TransformerBlock", "LlamaBlock"):
            factory = compose.block_factory(self._pick, self.used)
            self._overrides["tc"]["TransformerBlock"] = factory
        elif part.name == "lr_at":
            self._overrides["training"][part.name] = value
        elif part.notebook not in ("08_training", "12_capstone"):
            self._overrides["tc"][part.name] = value

    def _run(self, part: Part, notebook: _Notebook) -> str:
        """Run the learner's cells of ``part`` and its check; "" if it passed, else why not."""
        cells = _exercise_cells(notebook.learner, part.exercise)
        if not cells:
            return say("no exercise cell for it", "找不到它的练习单元格")
        calls, _ = checks_of(notebook.solution, part.exercise)
        from . import checks

        shown = io.StringIO()
        try:
            with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(shown):
                for source in cells:
                    exec(source, notebook.namespace)
                for check, args in calls:
                    values = [eval(arg, notebook.namespace) for arg in args]
                    getattr(checks, check)(*values)
        except Exception as error:  # noqa: BLE001 - the learner's code: anything may be raised
            text = one_line(str(error)) if isinstance(error, AssertionError) else first_line(error)
            if is_stub_message(str(error)) or isinstance(error, NotImplementedError):
                return say("not started", "尚未开始")
            if isinstance(error, AssertionError):
                return say(f"its check fails: {text}", f"没有通过检查：{text}")
            return say(
                f"its cell raises {type(error).__name__}: {text}",
                f"它的单元格抛出了 {type(error).__name__}：{text}",
            )
        if part.name not in notebook.namespace:
            return say(f"the cell defines no {part.name}", f"单元格里没有定义 {part.name}")
        return ""

    # ------------------------------------------------------------------ composing

    def _pick(self, name: str) -> tuple[object, str]:
        loaded = self.loaded.get(name)
        if loaded is None:  # a part not read yet: its check runs with the reference
            return _reference(name), say("not read yet", "尚未读取")
        return loaded.value, loaded.why

    def gpt(self, config) -> torch.nn.Module:
        """The learner's ``GPT(config)`` built from the learner's parts (the reference's where
        theirs is missing or failing; ``self.used`` then lists what filled each slot)."""
        self.used.clear()
        return self.GPT(config)

    def tokenizer(self, merges: list[tuple[int, int]]) -> YourByteBPE:
        """A byte-pair tokenizer of ``merges`` that cuts with the learner's ``pre_split``,
        encodes with their ``bpe_encode`` and decodes with their ``bpe_decode`` (the
        reference's where theirs fails)."""
        return YourByteBPE(merges, self.bpe_encode, self.bpe_decode, self.pre_split)

    def __getattr__(self, name: str):
        for loaded in self.__dict__.get("loaded", {}).values():
            if loaded.part.name == name:
                return loaded.value
        raise AttributeError(name)

    # ------------------------------------------------------------------ the table

    def rows(self) -> list[tuple[str, str, str, str]]:
        """``(part, notebook, whose, why)`` per part: the learner's or the reference's."""
        rows = []
        for loaded in self.loaded.values():
            whose = say("yours", "你的") if loaded.yours else say("reference", "参考实现")
            rows.append((loaded.part.name, loaded.part.notebook[:2], whose, loaded.why))
        return rows

    def slots(self) -> list[tuple[str, str, str, str]]:
        """``(slot, part, whose, why)`` for each distinct slot of the last ``gpt(config)``."""
        seen: dict[tuple[str, str], tuple[str, str, str, str]] = {}
        for used in self.used:
            whose = say("yours", "你的") if used.yours else say("reference", "参考实现")
            seen.setdefault((used.slot, used.part), (used.slot, used.part, whose, used.why))
        return list(seen.values())

    def __str__(self) -> str:
        header = (say("part", "部分"), "notebook", say("runs", "运行的是"), say("why", "原因"))
        lines = [header, *self.rows()]
        widths = [max(text_width(line[i]) for line in lines) for i in range(3)]
        out = [
            "  ".join([*(pad(line[i], widths[i]) for i in range(3)), line[3]]).rstrip()
            for line in lines
        ]
        mine = sum(loaded.yours for loaded in self.loaded.values())
        out.append(
            say(
                f"{mine} of {len(self.loaded)} parts are yours",
                f"{len(self.loaded)} 个部分中有 {mine} 个是你的",
            )
        )
        return "\n".join(out)


def yours(folder: str | Path = ".", *, solutions_dir: str | Path | None = None) -> Yours:
    """The parts the capstone runs, as the learner's notebooks in ``folder`` hold them."""
    return Yours(folder, solutions_dir=solutions_dir)
