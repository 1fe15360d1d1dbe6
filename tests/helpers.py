"""What several test files share: the fixture's paths, small notebooks to build, the
`tfcourse train` command lines and how a refused one must look, and the browser tests'
Chromium.

Test files import from here (``from helpers import BASE``), never from one another; a
helper used by one test file lives in that file. ``tests/mutants/`` holds the catalogue
of wrong implementations the check tests share.
"""

from __future__ import annotations

import os
import re
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tfcourse.authoring.sanitize import sanitize
from tfcourse.cli import main
from tfcourse.course import notebook_format
from tfcourse.language import say

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SOLUTIONS = TESTS / "fixtures" / "solutions"
FIXTURE = SOLUTIONS / "99_fixture.ipynb"

# --------------------------------------------------------------------------- small notebooks

FUNCTION = '''def causal_mask(T):
    """(T, T) bool."""
    ### BEGIN SOLUTION
    return torch.tril(torch.ones(T, T, dtype=torch.bool))
    ### END SOLUTION'''


METHOD = '''class Norm(torch.nn.Module):
    def forward(self, x):
        """x: (B, T, D)."""
        ### BEGIN SOLUTION
        rms = x.pow(2).mean(-1, keepdim=True).sqrt()
        return x / rms
        ### END SOLUTION
        # code after the region stays'''


def code(cell_id, source, tags=(), outputs=None, count=None, **course):
    cell = new_code_cell(source, id=cell_id)
    if tags:
        cell.metadata["tags"] = list(tags)
    if course:
        cell.metadata["tfcourse"] = course
    if outputs is not None:
        cell.outputs, cell.execution_count = outputs, count
    return cell


def verdict(text):
    return [new_output("stream", name="stdout", text=text + "\n")]


def tiny_solution():
    """A valid two-exercise solution notebook, in memory."""
    nb = new_notebook(
        cells=[
            new_markdown_cell("# Tiny", id="title"),
            code("setup", "import torch", outputs=[], count=1),
            code(
                "ex-mask",
                FUNCTION,
                ["exercise"],
                outputs=[],
                count=2,
                exercise="Mask",
                hint="keep the lower triangle",
            ),
            code(
                "check-mask",
                "check_mask(causal_mask)",
                ["check", "nbval-check-output"],
                outputs=verdict("Mask: 3/3 checks passed"),
                count=3,
                exercise="Mask",
            ),
            code("demo", "print(1)", ["nbval-ignore-output"], outputs=verdict("1"), count=4),
            code("ex-norm", METHOD, ["exercise"], outputs=[], count=5, exercise="Norm", hint="rms"),
            code(
                "check-norm",
                "check_norm(Norm)",
                ["check", "nbval-check-output"],
                outputs=verdict("Norm: 2/2 checks passed"),
                count=6,
                exercise="Norm",
            ),
        ]
    )
    nb.metadata = {
        "kernelspec": dict(notebook_format.KERNELSPEC),
        "language_info": {"name": "python"},
        "tfcourse": {"version": "0.1.0"},
    }
    return nb


# --------------------------------------------------------------------------- tfcourse train


# Small and fast; --device cpu so resumed runs are bit-for-bit comparable everywhere.
BASE = [
    "train",
    "--dataset",
    "markov",
    "--vocab-size",
    "16",
    "--d-model",
    "32",
    "--n-layers",
    "1",
    "--seq-len",
    "16",
    "--batch-size",
    "4",
    "--steps",
    "8",
    "--warmup",
    "2",
    "--lr",
    "1e-2",
    "--eval-every",
    "4",
    "--eval-batches",
    "1",
    "--sample",
    "0",
    "--no-progress",
    "--device",
    "cpu",
    "--seed",
    "3",
]


def with_flags(args, **flags):
    """``args`` with the value of each ``--flag`` replaced (underscores become dashes)."""
    args = list(args)
    for name, value in flags.items():
        args[args.index("--" + name.replace("_", "-")) + 1] = str(value)
    return args


def refused(args, capsys, status=2) -> str:
    """Run ``args``; assert exit ``status`` with one line on stderr and no traceback; return it."""
    code = main(args)
    err = capsys.readouterr().err.strip()
    assert code == status, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def resume_args(path):
    return ["train", "--resume", str(path), "--no-progress", "--sample", "0", "--device", "cpu"]


# --------------------------------------------------------------------------- the browser tests


# Chromium on a machine without network access: no background connections, no sandbox (root in CI).
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-dev-shm-usage",
]


def chromium_executable() -> str:
    for candidate in (
        os.environ.get("TFCOURSE_CHROMIUM"),
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
        "/usr/bin/chromium",
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.skip(
        "the browser test needs a Chromium executable: apt-get install chromium "
        "chromium-driver, or set TFCOURSE_CHROMIUM=/path/to/chromium"
    )


REQUIRE_SANDBOX_ENV = "TFCOURSE_REQUIRE_SANDBOX"  # .ci/run sets it: there a missing sandbox fails


def needs_sandbox() -> None:
    """Skip where ``tfcourse grade`` cannot seal a worker here (bubblewrap, and the worker's
    system-call filter); fail instead where ``TFCOURSE_REQUIRE_SANDBOX=1`` (CI). Every test
    marked ``sandbox`` calls it (conftest.py), so pytest's summary says in one line how many
    were skipped and what to install."""
    from tfcourse.grade.sealed import sandbox, syscalls

    found = sandbox.sandbox()
    why = found.reason if found.bwrap is None else syscalls.unavailable()
    if not why:
        return
    why = (
        "needs the grading sandbox: apt-get install bubblewrap libseccomp2 "
        f"(here: {why.splitlines()[0]})"
    )
    if os.environ.get(REQUIRE_SANDBOX_ENV) == "1":
        pytest.fail(why)
    pytest.skip(why)


# --- English left in what a Chinese reader reads

# Words a Chinese text keeps in English: the glossary's bracketed terms, the names of tools,
# libraries, models and fonts, and units.
KEPT_IN_ENGLISH = frozenset(
    """
    pre post ln layernorm rmsnorm batchnorm dropout softmax token tokens batch buffer
    logits notebook notebooks torch pytorch tfcourse make pip uv python jupyter
    jupyterlab lab gpt llama qwen mistral nanogpt gelu silu swiglu relu rope gqa mqa kv
    qkv bpe adamw adam sgd cuda mps cpu gpu nccl gloo torchrun sdpa flash nbval
    gradescope colab ipywidgets matplotlib transformers hugging face windows macos linux
    powershell conda n-gram gram unigram bigram top-k top-p nats nat ms us kib mib gib kb mb
    gb none true false attn mlp yarn ntk-aware ntk idx noto sans subset
    """.split()  # noqa: SIM905 (a list of words reads best as words)
)
# What is code, not prose: `code`, URLs, paths and file names, flags, identifiers (with _,
# digits or inner capitals), ALL-CAPS names, calls, quoted strings, $math$, key=value.
_CODE = re.compile(
    r"`[^`]*`|\$[^$]*\$|https?://\S+|\S*[/\\]\S*|\S+\.\w{1,5}\b|(?<!\w)--?[\w-]+|\b\w+=\S+"
    r"|\b\w*[_\d]\w*\b|\b[A-Z]{2,}\w*\b|\b[a-z]+[A-Z]\w*\b|\b[A-Z][a-z]+[A-Z]\w*\b"
    r"|\b\w+(?:\.\w+)+\b|\w+\(\S*\)|'[^'\n]*'|\"[^\"\n]*\""
)
_CJK = re.compile(r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]")
# A command line shown as an example ("tfcourse train --steps 300"), not a sentence.
_COMMAND_LINE = re.compile(r"^\s*(\$ )?(tfcourse|torchrun|make|python|pip|uv|jupyter) (?!\S*:)")
# A printed formula or setting ("scores = q @ k^T / sqrt(d_k)", "config.n_layers = 2"), or a
# shape trace: an expression, then a shape ("weights @ v      (2, 4, 5, 4)").
_ASSIGNMENT = re.compile(r"^\s*[\w.\[\]]+ = |^\s*[\w.@()*, /+-]+?\s{2,}\(\d+(?:, \d+)*\)")
_WORD = re.compile(r"\(?([A-Za-z]+(?:-[A-Za-z]+)*)[,.;:!?)]*")


def english_sentences(text: str) -> list[str]:
    """The lines of ``text`` that hold English prose: two or more English words in a row, or
    one in a line without Chinese, that are not code, names or terms Chinese keeps in
    English. Example command lines, and lines of a sample of
    generated text (after a ``--- ...`` heading, up to a line ``---``) are the model's
    English, not ours, and are left out."""
    found, sample = [], False
    for line in text.splitlines():
        if line.strip() == "---":
            sample = False
            continue
        if line.startswith("--- "):
            sample = True
            continue
        if sample or _COMMAND_LINE.match(line) or _ASSIGNMENT.match(line):
            continue
        run, enough = 0, 2 if _CJK.search(line) else 1
        for piece in _CODE.sub(" | ", line).split():
            match = _WORD.fullmatch(piece)
            word = match.group(1).lower() if match else ""
            run = run + 1 if len(word) > 1 and word not in KEPT_IN_ENGLISH else 0
            if run == enough:
                found.append(line.strip())
                break
    return found


# --- stored and fresh outputs, as nbval compares them

# Output fields nbval does not compare (nbval's skip list, without --nbdime): pictures,
# widget model ids, tracebacks, counters and the like.
_SKIP = {
    "metadata",
    "traceback",
    "prompt_number",
    "output_type",
    "name",
    "execution_count",
    notebook_format.WIDGET_MIME,
    "image/png",
    "image/jpeg",
}


def comparable(outputs) -> dict[str, list]:
    """The outputs as nbval compares them: streams merged per name (``\\r`` and ``\\b``
    applied), data flattened per MIME type, skipped fields dropped, text sanitized."""
    merged: list[dict] = []
    streams: dict[str, dict] = {}
    for output in outputs:
        if output.get("output_type") == "stream":
            name = output.get("name", "stdout")
            if name in streams:
                streams[name]["text"] += output.get("text", "")
            else:
                streams[name] = {
                    "output_type": "stream",
                    "name": name,
                    "text": output.get("text", ""),
                }
                merged.append(streams[name])
        else:
            merged.append(output)
    fields = defaultdict(list)
    for output in merged:
        if output.get("output_type") == "stream":
            fields[output["name"]].append(sanitize(_terminal(output["text"])))
            continue
        for key, value in output.items():
            if key in _SKIP:
                continue
            if key == "data":
                for mime, content in value.items():
                    if mime not in _SKIP:
                        fields[mime].append(
                            sanitize(content) if isinstance(content, str) else content
                        )
            else:
                fields[key].append(sanitize(value) if isinstance(value, str) else value)
    return dict(fields)


def _terminal(text: str) -> str:
    """Apply backspaces and carriage returns the way a terminal (and nbval) does."""
    previous = None
    while previous != text:
        previous, text = text, re.sub("[^\n]\x08", "", text)
    return re.sub(r"^.*\r(?=[^\n])", "", text, flags=re.MULTILINE)


def describe_outputs(fields: dict[str, list]) -> str:
    """Outputs (as from ``comparable``) in words: the printed text, other fields named."""
    parts = []
    for key, values in fields.items():
        text = "".join(str(value) for value in values).rstrip("\n")
        if key == "stdout":
            parts.append(text)
        elif key == "stderr":
            parts.append(say(f"(on stderr) {text}", f"（标准错误输出）{text}"))
        elif key == "text/plain":
            parts.append(say(f"(displayed) {text}", f"（显示的值）{text}"))
        else:
            parts.append(say(f"({key}) {text[:200]}", f"（{key}）{text[:200]}"))
    return "\n".join(parts) if parts else say("(no output)", "（没有输出）")


# --- the sealed path, one exercise at a time


def grade_exercise(learner, solution, exercise: str, setup, identity: str = ""):
    """The sealed verdict on ``exercise`` alone, in a worker sealed for it only."""
    from tfcourse.grade.sealed import session

    return session.grade_exercises(learner, solution, [exercise], setup, identity)[exercise]


def cells_for(learner, solution, exercise: str) -> list[str]:
    """The sources of the learner's cells a worker runs for ``exercise``."""
    from tfcourse.grade.sealed import session

    return [source for _, source in session._cells_for(learner, solution, exercise)]
