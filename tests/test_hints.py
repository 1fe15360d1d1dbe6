"""A hint points the way; it never contains the solution.

For every exercise of every solution notebook, the hint (metadata ``tfcourse.hint``,
shown to the learner above the stub) must not contain any statement of the code between
``### BEGIN SOLUTION`` and ``### END SOLUTION``, nor a sizeable expression of it: a call
with arguments, or an expression with two operators or more (calls, subscripts,
arithmetic, comparisons, boolean and unary operators; ``-1`` is a number, not an operator).

The solution is parsed with ``ast`` and each piece is written back with ``ast.unparse``,
so spacing, quotes and redundant parentheses have one spelling. Pieces and hint are then
compared as sequences of tokens, with ``self.`` dropped from both: a hint cannot hide a
copy behind other spacing, other quotes or a missing ``self.``.
"""

from __future__ import annotations

import ast
import re
import textwrap

import pytest

from tfcourse.authoring.build import solution_regions
from tfcourse.course import notebook_format

from helpers import ROOT

COURSE = sorted((ROOT / "solutions").glob("*.ipynb"))

# Statements shorter than this many tokens (``return x``, ``x = y``) say nothing a hint
# could give away, and would match ordinary prose.
MIN_STATEMENT_TOKENS = 4
MIN_OPERATORS = 2
_COMPOUND = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Match,
)
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+|\*\*|//|[^\s\w]")


# ---------------------------------------------------------------------------------------------
# Solution pieces


def solution_code(source: str) -> list[str]:
    """The code of each solution region of an exercise cell, dedented."""
    lines = source.split("\n")
    return [
        textwrap.dedent("\n".join(lines[region.begin + 1 : region.end]))
        for region in solution_regions(source)
    ]


def parse_region(code: str) -> ast.Module:
    """Parse one region; a region that is not a module on its own goes into a function."""
    try:
        return ast.parse(code)
    except SyntaxError:
        return ast.parse("def _region():\n" + textwrap.indent(code or "pass", "    "))


def count_operators(node: ast.AST) -> int:
    """Calls, subscripts and arithmetic/comparison/boolean/unary operators under ``node``."""
    total = 0
    for child in ast.walk(node):
        if isinstance(child, (ast.BinOp, ast.Call, ast.Subscript)):
            total += 1
        elif isinstance(child, ast.BoolOp):
            total += len(child.values) - 1
        elif isinstance(child, ast.Compare):
            total += len(child.ops)
        elif isinstance(child, ast.UnaryOp) and not (
            isinstance(child.op, (ast.USub, ast.UAdd)) and isinstance(child.operand, ast.Constant)
        ):
            total += 1
    return total


def is_sizeable(node: ast.expr) -> bool:
    """A call with arguments, or an expression with ``MIN_OPERATORS`` operators or more."""
    if isinstance(node, ast.Call) and (node.args or node.keywords):
        return True
    if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Starred, ast.Slice)):
        return False  # only a container of pieces, which are checked themselves
    return count_operators(node) >= MIN_OPERATORS


def solution_pieces(source: str) -> set[str]:
    """Every simple statement and every sizeable expression of the cell's solution regions."""
    pieces = set()
    for code in solution_code(source):
        for node in ast.walk(parse_region(code)):
            if isinstance(node, ast.stmt) and not isinstance(node, _COMPOUND):
                text = ast.unparse(node)
                if len(tokens(text)) >= MIN_STATEMENT_TOKENS:
                    pieces.add(text)
            elif isinstance(node, ast.expr) and is_sizeable(node):
                pieces.add(ast.unparse(node))
    return pieces


# ---------------------------------------------------------------------------------------------
# Comparing


def tokens(text: str) -> list[str]:
    """Code-like tokens of ``text``: one kind of quote, no ``self.``."""
    found = _TOKEN.findall(text.replace("'", '"'))
    out = []
    for i, token in enumerate(found):
        if token == "self" and found[i + 1 : i + 2] == ["."]:
            continue
        if token == "." and i and found[i - 1] == "self":
            continue
        out.append(token)
    return out


def _joined(parts: list[str]) -> str:
    return "\x00" + "\x00".join(parts) + "\x00"


def leaked_pieces(hint: str, source: str) -> list[str]:
    """The solution pieces of ``source`` that ``hint`` contains, longest first."""
    hint_tokens = _joined(tokens(hint))
    leaked = [piece for piece in solution_pieces(source) if _joined(tokens(piece)) in hint_tokens]
    return sorted(leaked, key=lambda piece: (-len(piece), piece))


# ---------------------------------------------------------------------------------------------
# The course's hints


def course_exercises():
    for path in COURSE:
        nb = notebook_format.read_notebook(path)
        for cell in nb.cells:
            if notebook_format.is_exercise(cell):
                name = notebook_format.exercise_name(cell)
                hint = cell.metadata.get("tfcourse", {}).get("hint")
                yield pytest.param(hint, cell.source, id=f"{path.stem}-{name}")


@pytest.mark.parametrize("hint, source", list(course_exercises()))
def test_hint_points_the_way_without_the_solution(hint, source):
    assert isinstance(hint, str) and hint.strip(), "every exercise needs a one-line hint"
    leaked = leaked_pieces(hint, source)
    assert not leaked, f"the hint contains solution code: {leaked}"


# ---------------------------------------------------------------------------------------------
# The test itself can fail

SOLUTION = """class SwiGLU(nn.Module):
    def __init__(self, d_model, d_hidden=None):
        super().__init__()
        ### BEGIN SOLUTION
        self.gate_proj = nn.Linear(d_model, d_hidden, bias=False)
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(~mask, float("-inf"))
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        ### END SOLUTION
"""


@pytest.mark.parametrize(
    "hint, leak",
    [
        pytest.param(
            "Write scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) first.",
            "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
            id="a-statement",
        ),
        pytest.param(
            "scores=q@k.transpose(-2,-1)/math.sqrt(q.shape[-1])",
            "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
            id="a-statement-without-spaces",
        ),
        pytest.param(
            "forward is down_proj(F.silu(gate_proj(x)) * up_proj(x)).",
            "self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))",
            id="an-expression-without-self",
        ),
        pytest.param(
            "fill with scores.masked_fill(~mask, float('-inf'))",
            "scores.masked_fill(~mask, float('-inf'))",
            id="other-quotes",
        ),
        pytest.param(
            "divide by math.sqrt(q.shape[-1])", "math.sqrt(q.shape[-1])", id="a-call-with-arguments"
        ),
        pytest.param(
            "gate_proj = nn.Linear(d_model, d_hidden, bias=False)",
            "self.gate_proj = nn.Linear(d_model, d_hidden, bias=False)",
            id="an-init-statement",
        ),
    ],
)
def test_a_hint_that_copies_the_solution_is_caught(hint, leak):
    assert leak in leaked_pieces(hint, SOLUTION)


@pytest.mark.parametrize(
    "hint",
    [
        "Scale the scores by one over the square root of the key width, fill blocked scores "
        "with minus infinity, softmax over the keys (dim=-1), then weight the values.",
        "Use .transpose(-2, -1) on the keys and nn.Linear layers without a bias.",
        "The gate goes through F.silu; multiply it elementwise with the up projection.",
    ],
)
def test_a_hint_that_points_the_way_passes(hint):
    assert leaked_pieces(hint, SOLUTION) == []


def test_the_pieces_are_statements_and_sizeable_expressions():
    pieces = solution_pieces(SOLUTION)
    assert "scores = scores.masked_fill(~mask, float('-inf'))" in pieces
    assert "k.transpose(-2, -1)" in pieces  # a call with arguments
    assert "q @ k.transpose(-2, -1)" in pieces  # two operators
    assert "q.shape[-1]" not in pieces  # one operator: too small
    assert "(-2, -1)" not in pieces and "-1" not in pieces
