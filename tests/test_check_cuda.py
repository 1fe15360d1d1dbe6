"""``scripts/check_cuda.py``, the first step of ``make test-gpu``: one line and exit 1
without a GPU (it was once a Makefile one-liner that Python could not even parse)."""

import subprocess
import sys

import pytest
import torch

from helpers import ROOT


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_a_gpu_it_says_why_and_fails():
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_cuda.py")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 1, run.stderr
    assert run.stdout.startswith("no CUDA device: torch ") and "make test-gpu needs" in run.stdout


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_with_a_gpu_it_names_it():
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_cuda.py")], capture_output=True, text=True
    )
    assert run.returncode == 0 and run.stdout.startswith("CUDA device: ")
