"""Every diagnosis a check can give is met by a wrong implementation in the tests.

A check names the likely mistake behind a failure ("looks like: the variance is
unbiased"). Each such diagnosis is written in ``tfcourse/checks`` as ``mistake(english,
chinese)``; CONTRIBUTING asks for a wrong implementation that makes a check give it, so
that no diagnosis is dead text. This test finds every ``mistake(...)`` in the checks,
runs the check tests again in a process that records the diagnoses failing checks give
(``TFCOURSE_RECORD_DIAGNOSES``, see ``conftest.py``), and requires each diagnosis to have
been given at least once.

Not covered here: the causes read from torch's own error messages (``_torch_errors.py``),
which ``tests/test_checks.py`` meets with the messages themselves.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import pytest

from helpers import ROOT

CHECKS = ROOT / "tfcourse" / "checks"
# The test files whose wrong implementations meet the checks (their fast tests).
CHECK_TESTS = [
    "tests/test_mutants.py",
    "tests/test_mutants_gqa.py",
    "tests/test_mutants_norm_backward.py",
    "tests/test_mutants_optimizer.py",
    "tests/test_mutants_rotary_attention.py",
    "tests/test_mutants_llama_block.py",
    "tests/test_mutants_claims.py",
    "tests/test_mutants_block.py",
    "tests/test_checks.py",
    "tests/test_checks_diagnosis.py",
    "tests/test_checks_modern.py",
    "tests/test_checks_production.py",
    "tests/test_tokenizer_check.py",
    "tests/test_bpe_codec_check.py",
    "tests/test_pre_split_check.py",
    "tests/test_special_tokens_check.py",
    "tests/test_train_loop_check.py",
    "tests/test_generate_check.py",
    "tests/test_batch_and_eval_checks.py",
    "tests/test_training.py",
    "tests/test_model.py",
]


def diagnoses(source: str, filename: str) -> dict[str, re.Pattern]:
    """``{"file:line": pattern}`` for each ``mistake(english, ...)`` in ``source``; an
    f-string's fields match any text."""
    found = {}
    for node in ast.walk(ast.parse(source, filename=filename)):
        if not (
            isinstance(node, ast.Call) and getattr(node.func, "id", None) == "mistake" and node.args
        ):
            continue
        english = node.args[0]
        if isinstance(english, ast.Constant) and isinstance(english.value, str):
            pattern = re.escape(english.value)
        elif isinstance(english, ast.JoinedStr):
            pattern = "".join(
                re.escape(part.value) if isinstance(part, ast.Constant) else ".+?"
                for part in english.values
            )
        else:
            raise AssertionError(f"{filename}:{node.lineno}: mistake() of a computed text")
        found[f"{filename}:{node.lineno}"] = re.compile(pattern)
    return found


def every_diagnosis() -> dict[str, re.Pattern]:
    found: dict[str, re.Pattern] = {}
    for path in sorted(CHECKS.glob("*.py")):
        found |= diagnoses(path.read_text(encoding="utf-8"), path.name)
    return found


def test_the_inventory_reads_plain_and_formatted_diagnoses():
    source = (
        "x = mistake('the bias is not added', '没有加上偏置')\n"
        "y = mistake(f'repeated along {axis} instead of dim 1', f'沿着 {axis} 重复')\n"
        "z = say('not a diagnosis', '不是诊断')\n"
    )
    found = diagnoses(source, "demo.py")
    assert sorted(found) == ["demo.py:1", "demo.py:2"]
    assert found["demo.py:2"].search("repeated along the batch axis (dim 0) instead of dim 1")
    assert not found["demo.py:1"].search("the bias is added")


def test_the_checks_write_their_diagnoses_with_mistake():
    assert len(every_diagnosis()) >= 150


@pytest.mark.slow
def test_every_diagnosis_is_met_by_a_wrong_implementation(tmp_path):
    record = tmp_path / "diagnoses.txt"
    record.touch()
    env = {**os.environ, "TFCOURSE_RECORD_DIAGNOSES": str(record), "TFCOURSE_LANG": "en"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
        + ["-m", "not slow", *CHECK_TESTS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    given = record.read_text(encoding="utf-8").splitlines()
    never = sorted(
        f"{where}: {pattern.pattern}"
        for where, pattern in every_diagnosis().items()
        if not any(pattern.search(text) for text in given)
    )
    assert never == [], (
        "no wrong implementation in the tests makes a check give these diagnoses; add one "
        "(tests/mutants/ or the check's test file):\n" + "\n".join(never)
    )
