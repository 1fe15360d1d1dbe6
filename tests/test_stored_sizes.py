"""The corpus and split sizes a notebook's stored outputs print are what its code builds today.

nbval does not compare these cells (their other lines are timings or losses), so a change to
the corpus could leave a stale size in a stored output with nothing to notice it. Here every
cell of notebooks 08-12 (both editions) that builds a text dataset is read: the dataset is
built again from the same expression, and its stored output must show it as it is now, either
as its ``repr`` or as its sizes (characters, train and val, with thousands separators); a
``TextDataset(...)`` in an output must be one the cell builds.
"""

from __future__ import annotations

import ast
import functools
import re

import pytest

import tfcourse
from tfcourse.course import notebook_format
from tfcourse.train import capstone, corpus

from helpers import ROOT

NOTEBOOKS = ("08_training", "09_production", "10_modern_block", "11_claims_tested", "12_capstone")
BUILDERS = ("TextDataset", "capstone_data")
DATASET = re.compile(r"TextDataset\(chars=\d+, vocab_size=\d+, train=\d+, val=\d+\)")


def _builder_calls(source: str) -> list[str]:
    """The source of every call that builds a dataset in a cell (``data.TextDataset(...)``,
    ``capstone.capstone_data()``)."""
    calls = []
    for node in ast.walk(notebook_format.parse_python(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in BUILDERS:
                calls.append(ast.get_source_segment(source, node))
    return calls


@functools.cache
def _build(expression: str):
    namespace = {"tc": tfcourse, "data": tfcourse.data, "capstone": capstone, "corpus": corpus}
    return eval(expression, namespace)  # our own notebooks' source, not a learner's


def _cells():
    for name in NOTEBOOKS:
        for edition in ("", "zh/"):
            path = ROOT / "solutions" / f"{edition}{name}.ipynb"
            nb = notebook_format.read_notebook(path)
            for cell in nb.cells:
                if cell.get("cell_type") == "code" and _builder_calls(cell.source):
                    yield pytest.param(cell, id=f"{edition}{name}:{cell.get('id')}")


def _shows(output: str, dataset) -> bool:
    sizes = (len(dataset.text), len(dataset.train), len(dataset.val))
    return repr(dataset) in output or all(f"{n:,}" in output for n in sizes)


@pytest.mark.parametrize("cell", list(_cells()))
def test_stored_sizes_are_todays(cell):
    output = "".join(notebook_format.text_of_outputs(cell.get("outputs", [])))
    datasets = [_build(expression) for expression in _builder_calls(cell.source)]
    if not output.strip():
        return  # nothing stored (an unexecuted cell prints nothing to compare)
    for dataset in datasets:
        assert _shows(output, dataset), f"stored output does not show {dataset!r}:\n{output}"
    for shown in DATASET.findall(output):
        assert shown in {repr(d) for d in datasets}, f"stale: {shown} is not {datasets}"


def test_a_stale_size_fails():
    """The check above is real: yesterday's corpus in a stored output is caught."""
    dataset = _build("capstone.capstone_data()")
    stale = repr(dataset).replace(f"train={len(dataset.train)}", "train=649143")
    assert not _shows(stale, dataset)
    assert _shows(repr(dataset), dataset)
