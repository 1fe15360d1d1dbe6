"""`tfcourse doctor`: healthy here, and a precise message plus exit 1 when a piece is missing."""

import argparse
import json
import os
import stat
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tfcourse import __version__, cli, doctor
from tfcourse.doctor import jupyter as doctor_jupyter


def _run(capsys, root=None) -> tuple[int, str]:
    status = doctor.run(argparse.Namespace(root=str(root) if root else None))
    return status, capsys.readouterr().out


def _finding(findings, topic):
    return next(f for f in findings if f.topic == topic)


def test_healthy_here(capsys):
    status, out = _run(capsys)
    assert status == 0, out
    assert "Healthy" in out and "FAIL" not in out
    for piece in (
        "Python",
        "torch",
        "CUDA",
        "MPS",
        "jupyterlab",
        "ipywidgets",
        "jupyterlab_widgets",
        "nbval",
        "transformers",
        "matplotlib",
        "environment",
        "kernel",
        "widget frontend",
    ):
        assert f" {piece} " in out, f"the report does not mention {piece}:\n{out}"


def test_missing_package_is_a_failure_with_the_fix(capsys, monkeypatch):
    real = doctor.package_version
    monkeypatch.setattr(
        doctor, "package_version", lambda name: None if name == "ipywidgets" else real(name)
    )
    status, out = _run(capsys)
    assert status == 1
    line = next(line for line in out.splitlines() if "ipywidgets" in line and "FAIL" in line)
    assert "not installed" in line
    assert "fix: run `make setup`" in out
    assert "required piece(s) missing" in out


def test_optional_package_missing_is_only_a_warning(capsys, monkeypatch):
    real = doctor.package_version
    monkeypatch.setattr(
        doctor, "package_version", lambda name: None if name == "nbval" else real(name)
    )
    finding = _finding(doctor.check_packages(), "nbval")
    assert finding.status == "warn" and "make test" in finding.detail and finding.fix
    # Installed from the wheel, without a checkout: the test tools are no concern of a learner.
    monkeypatch.setattr(doctor, "project_root", lambda: None)
    finding = _finding(doctor.check_packages(), "nbval")
    assert finding.status == "info" and not finding.fix


def test_wrong_major_versions_are_failures(monkeypatch):
    versions = {"jupyterlab": "3.6.0", "ipywidgets": "8.1.0", "jupyterlab_widgets": "1.1.0"}
    monkeypatch.setattr(doctor, "package_version", lambda name: versions.get(name, "1.0"))
    details = {f.detail for f in doctor.check_packages() if f.status == "FAIL"}
    assert any("needs JupyterLab 4" in d for d in details)
    assert any("does not match ipywidgets" in d for d in details)


def test_missing_widget_frontend(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(doctor_jupyter, "_labextension_dirs", lambda: [tmp_path])
    status, out = _run(capsys)
    assert status == 1
    assert "@jupyter-widgets/jupyterlab-manager is not installed" in out
    assert "jupyterlab_widgets" in out and "restart JupyterLab" in out


@pytest.mark.skipif(os.name != "posix", reason="uses a shell script as a fake interpreter")
def test_kernel_from_the_wrong_environment(monkeypatch, tmp_path):
    # An interpreter that cannot see this environment's packages: no site, isolated.
    fake = tmp_path / "python-elsewhere"
    fake.write_text(f"#!/bin/sh\nexec '{sys.executable}' -I -S \"$@\"\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    spec = SimpleNamespace(
        argv=[str(fake), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        resource_dir=str(tmp_path),
    )
    monkeypatch.setattr(doctor_jupyter, "_kernel_spec", lambda: spec)
    (finding,) = doctor_jupyter.check_kernel()
    assert finding.status == "FAIL"
    assert "cannot import tfcourse" in finding.detail and "wrong environment" in finding.detail
    assert "ipykernel install" in finding.fix


def test_kernel_that_does_not_start(monkeypatch, tmp_path):
    spec = SimpleNamespace(
        argv=[str(tmp_path / "missing-python"), "-m", "ipykernel_launcher"],
        resource_dir=str(tmp_path),
    )
    monkeypatch.setattr(doctor_jupyter, "_kernel_spec", lambda: spec)
    (finding,) = doctor_jupyter.check_kernel()
    assert finding.status == "FAIL" and "missing-python" in finding.detail


def _notebook(path: Path, version):
    metadata = {"kernelspec": {"name": "python3"}}
    if version is not None:
        metadata["tfcourse"] = {"version": version}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"cells": [], "metadata": metadata, "nbformat": 4, "nbformat_minor": 5})
    )


def test_notebooks_written_for_another_version(capsys, tmp_path):
    _notebook(tmp_path / "notebooks" / "01_attention.ipynb", "0.0.1")
    _notebook(tmp_path / "notebooks" / "02_multi_head_attention.ipynb", __version__)
    _notebook(tmp_path / "notebooks" / "03_norms.ipynb", None)
    status, out = _run(capsys, root=tmp_path)
    assert status == 1
    assert "2 of 3 written for another tfcourse" in out
    assert "01_attention.ipynb (0.0.1)" in out and "03_norms.ipynb (no version)" in out
    assert "git pull" in out


def test_bad_device_setting(monkeypatch):
    monkeypatch.setenv("TFCOURSE_DEVICE", "gpu")
    finding = _finding(doctor.check_torch(), "device")
    assert finding.status == "FAIL" and "TFCOURSE_DEVICE" in finding.fix


def test_cli_runs_doctor(capsys, tmp_path):
    _notebook(tmp_path / "solutions" / "01_attention.ipynb", __version__)
    assert cli.main(["doctor", "--root", str(tmp_path)]) == 0
    assert "solutions/ version" in capsys.readouterr().out


def test_the_grading_sandbox_is_reported_with_its_fix(monkeypatch):
    from tfcourse.grade.sealed import sandbox

    (here,) = doctor.check_grading_sandbox()
    assert here.status in ("ok", "info")
    monkeypatch.setattr(sandbox, "_found", sandbox.Sandbox(None, "bubblewrap is not installed"))
    (missing,) = doctor.check_grading_sandbox()
    assert (missing.status, missing.detail) == ("info", "bubblewrap is not installed")
    assert "apt-get install bubblewrap" in missing.fix and "--unsealed" in missing.fix


def test_packages_in_the_user_site_are_named_as_invisible_to_the_grader(monkeypatch):
    import site

    import torch

    assert doctor.check_grading_imports() == []  # this environment: a venv, or a system install
    user_site = Path(torch.__file__).resolve().parents[1]  # where torch is, as if --user
    monkeypatch.setattr(site, "ENABLE_USER_SITE", True)
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(user_site))
    (found,) = doctor.check_grading_imports()
    assert found.status == "warn" and found.detail.startswith("torch, numpy, safetensors installed")
    assert "python -I" in found.detail and "virtual environment" in found.fix


def test_a_missing_chinese_font_warns_a_chinese_reader(monkeypatch):
    from tfcourse.lab import fonts
    from tfcourse.language import speaking

    monkeypatch.setattr(fonts, "installed_cjk_fonts", lambda: ["Noto Sans CJK SC"])
    (found,) = doctor.check_chinese_font()
    assert (found.status, found.detail) == ("ok", "Noto Sans CJK SC")
    monkeypatch.setattr(fonts, "installed_cjk_fonts", list)
    with speaking("zh"):
        (missing,) = doctor.check_chinese_font()
    assert missing.status == "warn" and "方框" in missing.detail
    assert "tfcourse/lab/fonts/" in missing.fix and "重新安装" in missing.fix
    with speaking("en"):
        assert doctor.check_chinese_font()[0].status == "info"
