"""Exit 0 with the CUDA device's name if torch sees one; else say why and exit 1.

``make test-gpu`` runs this first, so that on a machine without a GPU it stops at once with
a reason instead of running every test on a device that is not there.
"""

from __future__ import annotations

import sys

import torch


def main() -> int:
    if torch.cuda.is_available():
        print(f"CUDA device: {torch.cuda.get_device_name(0)} (torch {torch.__version__})")
        return 0
    print(
        f"no CUDA device: torch {torch.__version__} (CUDA build: {torch.version.cuda}) sees no "
        "GPU. make test-gpu needs an NVIDIA GPU and a CUDA build of torch (PyPI's Linux torch "
        "is one: make clean setup, without a CPU TORCH_INDEX)."
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
