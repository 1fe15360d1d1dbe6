"""scripts/install_torch.py: which index torch comes from, and the fallback when it is unreachable.

Nothing here touches the network or installs anything: pip runs through a recording stand-in.
"""

import importlib.util
import socket
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "install_torch.py"
_spec = importlib.util.spec_from_file_location("install_torch", SCRIPT)
install_torch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(install_torch)

CPU = "https://download.pytorch.org/whl/cpu"


def closed_port_url() -> str:
    """An http URL on localhost where nothing listens: bind a free port, then close it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/whl/cpu"


@pytest.mark.parametrize(
    "system, has_gpu, explicit, index",
    [
        ("Linux", False, None, CPU),
        ("Linux", True, None, None),
        ("Darwin", False, None, None),
        ("Windows", False, None, None),
        ("Linux", False, "https://example.org/simple", "https://example.org/simple"),
        ("Linux", True, "https://example.org/simple", "https://example.org/simple"),
        ("Darwin", False, CPU, CPU),
        ("Linux", False, "default", None),
    ],
)
def test_choose_index(system, has_gpu, explicit, index):
    chosen, why = install_torch.choose_index(system, has_gpu, explicit)
    assert chosen == index
    assert why and "->" in why


def test_the_reason_names_the_machine():
    assert install_torch.choose_index("Linux", False)[1] == f"Linux, no NVIDIA GPU -> CPU wheel from {CPU}"
    assert "NVIDIA GPU" in install_torch.choose_index("Linux", True)[1]
    assert "macOS" in install_torch.choose_index("Darwin", False)[1]


def test_pip_command():
    python = "/venv/bin/python"
    assert install_torch.pip_command(python, "torch==2.13.0", None) == [
        python, "-m", "pip", "install", "torch==2.13.0"]
    command = install_torch.pip_command(python, "torch==2.13.0", CPU)
    assert command[:7] == [python, "-m", "pip", "install", "torch==2.13.0", "--index-url", CPU]
    # pip may not spend minutes retrying an index that stopped answering
    timeout = int(command[command.index("--timeout") + 1])
    retries = int(command[command.index("--retries") + 1])
    assert timeout <= 15 and retries <= 2


def test_an_unreachable_index_is_reported_within_seconds():
    start = time.monotonic()
    ok, why = install_torch.reachable(closed_port_url() + "/torch/", timeout=5.0)
    assert time.monotonic() - start < 2.5
    assert ok is False and "refused" in why.lower()


def test_a_probe_that_hangs_is_cut_at_the_timeout():
    # A listening socket that never answers: the probe must give up at the timeout.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        start = time.monotonic()
        ok, why = install_torch.reachable(f"http://127.0.0.1:{port}/torch/", timeout=0.5)
        assert time.monotonic() - start < 2.0
    assert ok is False and why


@pytest.fixture
def pip_calls(monkeypatch):
    """Nothing installed yet; the pip commands main() runs are recorded instead of run."""
    calls = []
    monkeypatch.setattr(install_torch, "installed_version", lambda python, spec: None)
    monkeypatch.setattr(install_torch, "run_pip", lambda command: calls.append(command) or 0)
    return calls


def machine(monkeypatch, system, has_gpu):
    monkeypatch.setattr(install_torch.platform, "system", lambda: system)
    monkeypatch.setattr(install_torch, "has_nvidia_gpu", lambda: has_gpu)


def test_main_falls_back_to_the_default_index_when_the_cpu_index_is_unreachable(
        monkeypatch, capsys, pip_calls):
    machine(monkeypatch, "Linux", False)
    unreachable = closed_port_url()
    monkeypatch.setattr(install_torch, "CPU_INDEX", unreachable)
    start = time.monotonic()
    status = install_torch.main(["--python", "py", "--torch", "torch==2.13.0"])
    assert time.monotonic() - start < 5
    assert status == 0
    assert pip_calls == [["py", "-m", "pip", "install", "torch==2.13.0"]]    # no --index-url
    out = capsys.readouterr().out
    assert f"Linux, no NVIDIA GPU -> CPU wheel from {unreachable}" in out
    assert f"the PyTorch CPU index {unreachable} cannot be reached" in out
    assert "from the default index instead" in out and "CUDA build" in out


def test_main_uses_the_cpu_index_when_it_answers(monkeypatch, capsys, pip_calls):
    machine(monkeypatch, "Linux", False)
    probed = []
    monkeypatch.setattr(install_torch, "reachable",
                        lambda url, timeout=5.0: probed.append(url) or (True, "HTTP 200"))
    assert install_torch.main(["--python", "py", "--torch", "torch==2.13.0"]) == 0
    assert probed == [f"{CPU}/torch/"]
    assert pip_calls[0][4:7] == ["torch==2.13.0", "--index-url", CPU]
    assert "cannot be reached" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "system, has_gpu, extra, index",
    [
        ("Linux", True, [], None),
        ("Darwin", False, [], None),
        ("Linux", False, ["--index", "default"], None),
        ("Linux", False, ["--index", "https://example.org/simple"], "https://example.org/simple"),
    ],
)
def test_main_does_not_probe_without_the_automatic_cpu_choice(
        monkeypatch, pip_calls, system, has_gpu, extra, index):
    machine(monkeypatch, system, has_gpu)
    monkeypatch.setattr(install_torch, "reachable", lambda *a, **k: pytest.fail("probed"))
    assert install_torch.main(["--python", "py", "--torch", "torch", *extra]) == 0
    (command,) = pip_calls
    assert (command[command.index("--index-url") + 1] if "--index-url" in command else None) == index


def test_main_does_nothing_when_torch_is_already_installed(monkeypatch, capsys):
    monkeypatch.setattr(install_torch, "installed_version", lambda python, spec: "2.13.0+cpu")
    monkeypatch.setattr(install_torch, "run_pip", lambda command: pytest.fail("pip ran"))
    monkeypatch.setattr(install_torch, "reachable", lambda *a, **k: pytest.fail("probed"))
    assert install_torch.main(["--python", "py", "--torch", "torch==2.13.0"]) == 0
    assert "2.13.0+cpu is already installed" in capsys.readouterr().out


def test_installed_version_reads_the_target_interpreter():
    import torch

    version = torch.__version__
    base = version.split("+")[0]
    assert install_torch.installed_version(sys.executable, f"torch=={base}") == version
    assert install_torch.installed_version(sys.executable, "torch<1") is None
    assert install_torch.installed_version(sys.executable, "./torch-2.13.0.whl") is None
    assert install_torch.installed_version("/nonexistent/python", "torch") is None


@pytest.mark.parametrize(
    "smi, listed_gpu, has_gpu",
    [
        (None, False, False),
        ("echo 'GPU 0: NVIDIA H100 (UUID: GPU-0)'", False, True),
        ("echo 'NVIDIA-SMI has failed' >&2; exit 9", False, False),
        (None, True, True),
    ],
)
def test_has_nvidia_gpu(tmp_path, monkeypatch, smi, listed_gpu, has_gpu):
    """nvidia-smi that lists a GPU, or a GPU under /proc/driver/nvidia/gpus, counts; else not."""
    bin_dir, gpus = tmp_path / "bin", tmp_path / "gpus"
    bin_dir.mkdir()
    gpus.mkdir()
    if smi is not None:
        (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\n{smi}\n")
        (bin_dir / "nvidia-smi").chmod(0o755)
    if listed_gpu:
        (gpus / "0000:01:00.0").mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    assert install_torch.has_nvidia_gpu(gpus) is has_gpu
