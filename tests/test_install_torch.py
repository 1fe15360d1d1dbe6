"""scripts/install_torch.py: which index torch comes from, and the fallback when it is unreachable.

Nothing here touches the network or installs anything: pip runs through a recording stand-in.
"""

import importlib.util
import os
import re
import shlex
import shutil
import socket
import subprocess
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
    assert (
        install_torch.choose_index("Linux", False)[1]
        == f"Linux, no NVIDIA GPU -> CPU wheel from {CPU}"
    )
    assert "NVIDIA GPU" in install_torch.choose_index("Linux", True)[1]
    assert "macOS" in install_torch.choose_index("Darwin", False)[1]


def test_pip_command():
    python = "/venv/bin/python"
    assert install_torch.pip_command(python, "torch==2.13.0", None) == [
        python,
        "-m",
        "pip",
        "install",
        "torch==2.13.0",
    ]
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


def test_main_falls_back_to_the_cpu_build_by_name_when_the_cpu_index_is_unreachable(
    monkeypatch, capsys, pip_calls
):
    """The default index (PIP_INDEX_URL, pip's find-links) may hold the CPU wheel; asked for
    by name, the CUDA build cannot be what it installs."""
    machine(monkeypatch, "Linux", False)
    unreachable = closed_port_url()
    monkeypatch.setattr(install_torch, "CPU_INDEX", unreachable)
    start = time.monotonic()
    status = install_torch.main(["--python", "py", "--torch", "torch==2.13.0"])
    assert time.monotonic() - start < 5
    assert status == 0
    assert pip_calls == [["py", "-m", "pip", "install", "torch==2.13.0+cpu"]]  # no --index-url
    out = capsys.readouterr().out
    assert f"Linux, no NVIDIA GPU -> CPU wheel from {unreachable}" in out
    assert f"the PyTorch CPU index {unreachable} cannot be used" in out
    assert "torch==2.13.0+cpu on the default index" in out


@pytest.mark.parametrize(
    "spec, pip_fails, pip_runs",
    [
        ("torch==2.13.0", True, True),  # the default index has no CPU build (PyPI)
        ("torch>=2.4,<3", False, False),  # a range names no build: nothing to ask for
    ],
)
def test_without_a_cpu_wheel_setup_stops_and_says_how_to_choose(
    monkeypatch, capsys, spec, pip_fails, pip_runs
):
    machine(monkeypatch, "Linux", False)
    monkeypatch.setattr(install_torch, "installed_version", lambda python, spec: None)
    monkeypatch.setattr(install_torch, "reachable", lambda *a, **k: (False, "no route"))
    calls = []
    monkeypatch.setattr(
        install_torch, "run_pip", lambda command: calls.append(command) or (1 if pip_fails else 0)
    )
    assert install_torch.main(["--python", "py", "--torch", spec]) != 0
    assert [c[4] for c in calls] == (["torch==2.13.0+cpu"] if pip_runs else [])
    err = capsys.readouterr().err
    assert "setup stops here rather than install the\n  CUDA build" in err
    for choice in (
        "TORCH_FIND_LINKS=https://mirrors.aliyun.com/pytorch-wheels/cpu/",
        "TORCH_INDEX=<url>",
        "TORCH_INDEX=default",
    ):
        assert choice in err


@pytest.mark.parametrize(
    "spec, cpu",
    [
        ("torch==2.13.0", "torch==2.13.0+cpu"),
        ("torch == 2.13.0+cpu", "torch==2.13.0+cpu"),
        ("torch===2.5.1", "torch==2.5.1+cpu"),
        ("torch>=2.4,<3", None),
        ("torch", None),
        ("torch==2.13.0+cu121", None),
        ("numpy==2.0", None),
    ],
)
def test_cpu_spec_names_the_cpu_build_of_a_pinned_version(spec, cpu):
    assert install_torch.cpu_spec(spec) == cpu


@pytest.mark.parametrize(
    "system, has_gpu, spec",
    [
        ("Linux", False, "torch==2.13.0+cpu"),  # the CPU build by name: never the CUDA one
        ("Linux", True, "torch==2.13.0"),  # a GPU machine's mirror may hold the CUDA build
        ("Darwin", False, "torch==2.13.0"),
    ],
)
def test_find_links_takes_torch_from_a_mirror_of_wheels(
    monkeypatch, capsys, pip_calls, system, has_gpu, spec
):
    machine(monkeypatch, system, has_gpu)
    monkeypatch.setattr(install_torch, "reachable", lambda *a, **k: pytest.fail("probed"))
    mirror = "https://mirrors.aliyun.com/pytorch-wheels/cpu/"
    assert (
        install_torch.main(["--python", "py", "--torch", "torch==2.13.0", "--find-links", mirror])
        == 0
    )
    assert pip_calls == [
        ["py", "-m", "pip", "install", spec, "--find-links", mirror, *install_torch.FAIL_FAST]
    ]
    assert mirror in capsys.readouterr().out


def test_index_and_find_links_exclude_each_other(pip_calls):
    with pytest.raises(SystemExit):
        install_torch.main(
            [
                "--torch",
                "torch==2.13.0",
                "--index",
                "https://a.example/simple",
                "--find-links",
                "https://b.example/cpu/",
            ]
        )
    assert pip_calls == []


@pytest.mark.parametrize(
    "variables, passed",
    [
        ([], []),
        (
            ["TORCH_INDEX=https://mirror.example/whl/cpu"],
            ["--index", "https://mirror.example/whl/cpu"],
        ),
        (
            ["TORCH_FIND_LINKS=https://mirror.example/cpu/"],
            ["--find-links", "https://mirror.example/cpu/"],
        ),
    ],
)
def test_make_setup_passes_the_mirror_variables_on(variables, passed):
    """`make setup TORCH_INDEX=... / TORCH_FIND_LINKS=...` (or the same environment
    variables) reach install_torch.py; PIP_INDEX_URL is pip's own and needs no passing."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make")
    root = SCRIPT.parents[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_")}
    for how in ("arguments", "environment"):
        command = [make, "-n", "-B", "-C", str(root), "setup"]
        run_env = (
            dict(env, **dict(v.split("=", 1) for v in variables)) if how == "environment" else env
        )
        if how == "arguments":
            command += variables
        out = subprocess.run(
            command, capture_output=True, text=True, env=run_env, check=True
        ).stdout
        (line,) = [line for line in out.splitlines() if "install_torch.py" in line]
        words = shlex.split(line)
        after = words[words.index("--torch") + 2 :]
        assert after == passed, (how, line)


def test_main_uses_the_cpu_index_when_it_answers(monkeypatch, capsys, pip_calls):
    machine(monkeypatch, "Linux", False)
    probed = []
    monkeypatch.setattr(
        install_torch,
        "reachable",
        lambda url, timeout=5.0: probed.append(url) or (True, "HTTP 200"),
    )
    assert install_torch.main(["--python", "py", "--torch", "torch==2.13.0"]) == 0
    assert probed == [f"{CPU}/torch/"]
    assert pip_calls[0][4:7] == ["torch==2.13.0", "--index-url", CPU]
    assert "cannot be used" not in capsys.readouterr().out


@pytest.mark.parametrize("mirror_has_it", [True, False])
def test_an_index_that_answers_then_stalls_falls_back_with_the_mirror_hint(
    monkeypatch, capsys, mirror_has_it
):
    """The probe gets its answer, the download stalls (pip gives up, FAIL_FAST): the CPU build
    is asked for by name on the default index, and where that fails too, the hint follows."""
    machine(monkeypatch, "Linux", False)
    monkeypatch.setattr(install_torch, "installed_version", lambda python, spec: None)
    monkeypatch.setattr(install_torch, "reachable", lambda *a, **k: (True, "HTTP 200"))
    calls = []

    def pip(command):
        calls.append(command)
        return 0 if (mirror_has_it and "--index-url" not in command) else 1

    monkeypatch.setattr(install_torch, "run_pip", pip)
    status = install_torch.main(["--python", "py", "--torch", "torch==2.13.0"])
    assert [c[4:] for c in calls] == [
        ["torch==2.13.0", "--index-url", CPU, *install_torch.FAIL_FAST],
        ["torch==2.13.0+cpu"],
    ]
    captured = capsys.readouterr()
    assert "it answered, but pip could not download torch from it" in captured.out
    assert (status == 0) is mirror_has_it
    assert ("TORCH_FIND_LINKS=https://mirrors.aliyun.com/pytorch-wheels/cpu/" in captured.err) is (
        not mirror_has_it
    )


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
    monkeypatch, pip_calls, system, has_gpu, extra, index
):
    machine(monkeypatch, system, has_gpu)
    monkeypatch.setattr(install_torch, "reachable", lambda *a, **k: pytest.fail("probed"))
    assert install_torch.main(["--python", "py", "--torch", "torch", *extra]) == 0
    (command,) = pip_calls
    assert (
        command[command.index("--index-url") + 1] if "--index-url" in command else None
    ) == index


def test_main_does_nothing_when_torch_is_already_installed(monkeypatch, capsys):
    monkeypatch.setattr(install_torch, "installed_version", lambda python, spec: "2.13.0+cpu")
    monkeypatch.setattr(install_torch, "run_pip", lambda command: pytest.fail("pip ran"))
    monkeypatch.setattr(install_torch, "reachable", lambda *a, **k: pytest.fail("probed"))
    assert install_torch.main(["--python", "py", "--torch", "torch==2.13.0"]) == 0
    assert "2.13.0+cpu is already installed" in capsys.readouterr().out


def test_installed_version_reads_the_target_interpreter():
    from importlib.metadata import version as distribution_version

    version = distribution_version("torch")  # what pip sees; torch.__version__ may differ
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


def test_setup_speaks_chinese_to_a_chinese_reader(monkeypatch, capsys):
    """TFCOURSE_LANG=zh: the lines setup prints about torch are Chinese, the hint included."""
    monkeypatch.setenv("TFCOURSE_LANG", "zh")
    machine(monkeypatch, "Linux", False)
    monkeypatch.setattr(install_torch, "installed_version", lambda python, spec: None)
    monkeypatch.setattr(install_torch, "reachable", lambda *a, **k: (False, "no route"))
    monkeypatch.setattr(install_torch, "run_pip", lambda command: 1)
    assert install_torch.main(["--python", "py", "--torch", "torch==2.13.0"]) != 0
    captured = capsys.readouterr()
    prose = [
        line
        for line in (captured.out + captured.err).splitlines()
        if line.strip() and "make setup" not in line
    ]
    assert prose and all(re.search("[\u4e00-\u9fff]", line) for line in prose), prose
    assert "安装到此为止" in captured.err
