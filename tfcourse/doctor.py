"""``tfcourse doctor``: check the installation and say how to fix what is wrong.

Looks at what the course needs, in the order a learner meets it: Python and
PyTorch (and which accelerator torch sees), the Jupyter pieces and their
versions, whether this interpreter is the project's environment, whether the
``python3`` kernel that JupyterLab starts runs an interpreter that has this
``tfcourse``, whether the widget frontend is installed, and whether the
notebooks match the installed package (version stamp, and ``notebooks/`` in
sync with ``solutions/``).

Each line is ``ok``, ``info``, ``warn`` or ``FAIL``; every warn/FAIL names a
fix. The exit status is 1 when a required piece is missing (a FAIL), else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from . import __version__

SETUP_FIX = "run `make setup` in the course folder (or `pip install -e '.[dev]'` in its environment)"
MIN_PYTHON = (3, 10)
# distribution name -> (required?, what it is for)
PACKAGES = {
    "jupyterlab": (True, "the course runs in JupyterLab 4"),
    "ipykernel": (True, "the notebooks' Python kernel"),
    "ipywidgets": (True, "the explorers (sliders, dropdowns)"),
    "jupyterlab_widgets": (True, "JupyterLab's frontend for ipywidgets"),
    "matplotlib": (True, "the plots"),
    "nbformat": (True, "reading and writing notebooks"),
    "nbclient": (True, "`tfcourse execute` / grading"),
    "nbval": (False, "`tfcourse grade` and `make test` (nbval runs the notebooks)"),
}
WIDGET_EXTENSION = "@jupyter-widgets/jupyterlab-manager"


@dataclass
class Finding:
    """One line of the report."""

    status: str            # "ok" | "info" | "warn" | "FAIL"
    topic: str
    detail: str
    fix: str = ""


def package_version(name: str) -> str | None:
    """The installed version of a distribution, or None (patched in tests)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def project_root() -> Path | None:
    """The course checkout this ``tfcourse`` was installed from (editable install), if any."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else None


# ------------------------------------------------------------------------- checks

def check_python() -> list[Finding]:
    version = platform.python_version()
    if sys.version_info[:2] < MIN_PYTHON:
        return [Finding("FAIL", "Python", f"{version} at {sys.executable}; the course needs "
                        f">= {'.'.join(map(str, MIN_PYTHON))}",
                        "install a newer Python and re-run `make setup PYTHON=python3.11`")]
    return [Finding("ok", "Python", f"{version} ({sys.executable})")]


def check_torch() -> list[Finding]:
    version = package_version("torch")
    if version is None:
        return [Finding("FAIL", "torch", "not installed", SETUP_FIX)]
    try:
        import torch
    except (ImportError, OSError, RuntimeError, AttributeError) as error:   # a broken wheel
        return [Finding("FAIL", "torch", f"{version} is installed but does not import: {error}",
                        "reinstall it: `make clean setup` (see docs/troubleshooting.md, 'Setup')")]
    findings = [Finding("ok", "torch", f"{torch.__version__}")]
    if torch.cuda.is_available():
        names = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        findings.append(Finding("info", "CUDA", f"available: {names} (CUDA {torch.version.cuda})"))
    else:
        built = f"torch built with CUDA {torch.version.cuda}" if torch.version.cuda else "CPU build of torch"
        findings.append(Finding("info", "CUDA", f"not available ({built})"))
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        findings.append(Finding("info", "MPS", "available (Apple GPU); small numeric differences "
                                "from CPU are expected, the checks allow for them"))
    else:
        findings.append(Finding("info", "MPS", "not available"))
    from .runtime import DEVICE_ENV, default_device

    try:
        device = default_device()
    except ValueError as error:
        findings.append(Finding("FAIL", "device", str(error),
                                f"unset {DEVICE_ENV} or set it to an available device (cpu, cuda, mps)"))
    else:
        findings.append(Finding("ok", "device", f"notebooks will run on {device}"
                                + (f" ({DEVICE_ENV}={os.environ[DEVICE_ENV]})" if os.environ.get(DEVICE_ENV) else "")))
    return findings


def check_packages() -> list[Finding]:
    findings = []
    for name, (required, purpose) in PACKAGES.items():
        version = package_version(name)
        if version is None:
            findings.append(Finding("FAIL" if required else "warn", name,
                                    f"not installed ({purpose})", SETUP_FIX))
        else:
            findings.append(Finding("ok", name, version))
    findings += _check_version_pairs()
    return findings


def _major(version: str | None) -> int | None:
    try:
        return int(version.split(".")[0]) if version else None
    except ValueError:
        return None


def _check_version_pairs() -> list[Finding]:
    """Versions that must go together: JupyterLab 4, ipywidgets 8 with jupyterlab_widgets 3."""
    findings = []
    lab, widgets, frontend = (package_version(n) for n in ("jupyterlab", "ipywidgets", "jupyterlab_widgets"))
    if lab and _major(lab) != 4:
        findings.append(Finding("FAIL", "jupyterlab", f"{lab} installed; the course needs JupyterLab 4",
                                "`pip install 'jupyterlab>=4,<5'` (or `make setup`)"))
    if widgets and _major(widgets) != 8:
        findings.append(Finding("FAIL", "ipywidgets", f"{widgets} installed; the course needs ipywidgets 8",
                                "`pip install 'ipywidgets>=8,<9'` (or `make setup`)"))
    if widgets and frontend and _major(widgets) == 8 and _major(frontend) != 3:
        findings.append(Finding("FAIL", "jupyterlab_widgets",
                                f"{frontend} does not match ipywidgets {widgets} (needs 3.x)",
                                "`pip install 'jupyterlab_widgets>=3,<4'`"))
    return findings


def check_environment(root: Path | None) -> list[Finding]:
    """Is this interpreter the project's ``.venv``? Which ``jupyter`` is on the PATH?"""
    findings = []
    prefix = Path(sys.prefix).resolve()
    venv = (root / ".venv").resolve() if root else None
    if venv is None:
        findings.append(Finding("info", "environment", f"{sys.prefix} (tfcourse is not an editable "
                                "install from a checkout)"))
    elif prefix == venv:
        findings.append(Finding("ok", "environment", f"the project's environment ({sys.prefix})"))
    elif venv.is_dir():
        findings.append(Finding("warn", "environment",
                                f"running from {sys.prefix}, not the project's {venv}",
                                f"use the project's interpreter: `{venv / 'bin' / 'tfcourse'} doctor`, "
                                "or `make lab` (it always uses .venv)"))
    else:
        findings.append(Finding("info", "environment", f"{sys.prefix} (no .venv in {root}; fine for a "
                                "conda environment made from environment.yml)"))
    jupyter = shutil.which("jupyter-lab") or shutil.which("jupyter")
    if jupyter and not Path(jupyter).resolve().is_relative_to(prefix) and \
            not Path(jupyter).absolute().is_relative_to(Path(sys.prefix).absolute()):
        findings.append(Finding("warn", "jupyter on PATH",
                                f"`jupyter lab` from the shell runs {jupyter}, which is not this environment",
                                "start the course with `make lab` or `tfcourse lab`, or activate the "
                                "environment first (`. .venv/bin/activate`)"))
    return findings


def _kernel_spec():
    """The ``python3`` kernelspec JupyterLab started from this interpreter would use (patched in tests)."""
    from jupyter_client.kernelspec import KernelSpecManager

    return KernelSpecManager().get_kernel_spec("python3")


def _probe_interpreter(executable: str) -> dict:
    """``sys.prefix`` of ``executable`` and where it finds ``tfcourse`` (without importing it)."""
    code = ("import sys, json, importlib.util as u; s = u.find_spec('tfcourse'); "
            "print(json.dumps({'prefix': sys.prefix, 'tfcourse': s.origin if s else None}))")
    result = subprocess.run([executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=False)
    if result.returncode:
        raise RuntimeError(result.stderr.strip().splitlines()[-1] if result.stderr.strip() else
                           f"exit status {result.returncode}")
    return json.loads(result.stdout)


def check_kernel() -> list[Finding]:
    fix = ("register this environment's kernel: `python -m ipykernel install --user --name python3 "
           "--display-name 'Python 3 (ipykernel)'` run with the project's interpreter "
           "(or remove the stale one: `jupyter kernelspec remove python3`)")
    try:
        spec = _kernel_spec()
    except ImportError:
        return [Finding("FAIL", "kernel", "jupyter_client is not installed", SETUP_FIX)]
    except (KeyError, OSError, ValueError) as error:      # NoSuchKernel is a KeyError
        return [Finding("FAIL", "kernel", f"no `python3` kernelspec: {error}", fix)]
    command = list(spec.argv)
    # jupyter_client runs a bare `python` as the server's own interpreter.
    bare = {"python", f"python{sys.version_info[0]}", f"python{sys.version_info[0]}.{sys.version_info[1]}"}
    executable = sys.executable if command and command[0] in bare else (command[0] if command else "")
    where = f"kernelspec {spec.resource_dir}"
    try:
        probe = _probe_interpreter(executable)
    except (OSError, RuntimeError, subprocess.TimeoutExpired, ValueError) as error:
        return [Finding("FAIL", "kernel", f"{where} runs {executable!r}, which fails: {error}", fix)]
    ours = str(Path(__file__).resolve().parent / "__init__.py")
    if probe["tfcourse"] is None:
        return [Finding("FAIL", "kernel", f"{where} runs {executable}, which cannot import tfcourse "
                        "(the kernel is from the wrong environment)", fix)]
    if Path(probe["prefix"]).resolve() != Path(sys.prefix).resolve() or \
            Path(probe["tfcourse"]).resolve() != Path(ours):
        return [Finding("warn", "kernel", f"{where} runs {executable} (environment {probe['prefix']}, "
                        f"tfcourse from {probe['tfcourse']}), not this environment", fix)]
    return [Finding("ok", "kernel", f"`python3` runs this interpreter ({where})")]


def _labextension_dirs() -> list[Path]:
    """Folders JupyterLab searches for prebuilt extensions (patched in tests)."""
    from jupyter_core.paths import jupyter_path

    return [Path(p) for p in jupyter_path("labextensions")]


def check_widget_frontend() -> list[Finding]:
    try:
        folders = _labextension_dirs()
    except ImportError:
        folders = []
    for folder in folders:
        package = folder / WIDGET_EXTENSION / "package.json"
        if package.is_file():
            version = json.loads(package.read_text(encoding="utf-8")).get("version", "?")
            return [Finding("ok", "widget frontend", f"{WIDGET_EXTENSION} {version} ({folder})")]
    return [Finding("FAIL", "widget frontend",
                    f"{WIDGET_EXTENSION} is not installed: explorers show a static picture, or "
                    "'Error displaying widget', instead of controls",
                    "`pip install 'jupyterlab_widgets>=3,<4'` in the environment that runs "
                    "JupyterLab, then restart JupyterLab and reload the page")]


def notebook_versions(folder: Path) -> dict[str, str | None]:
    """``{notebook name: metadata.tfcourse.version}`` for the notebooks in ``folder``."""
    versions = {}
    for path in sorted(folder.glob("*.ipynb")):
        try:
            meta = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
        except (OSError, ValueError):
            versions[path.name] = None
            continue
        versions[path.name] = (meta.get("tfcourse") or {}).get("version")
    return versions


def check_notebooks(root: Path | None) -> list[Finding]:
    if root is None:
        return [Finding("info", "notebooks", "no course checkout found; pass --root FOLDER to check one")]
    findings = []
    for name in ("notebooks", "solutions"):
        folder = root / name
        if not folder.is_dir():
            continue
        versions = notebook_versions(folder)
        stale = {n: v for n, v in versions.items() if v != __version__}
        if not versions:
            continue
        if stale:
            listed = ", ".join(f"{n} ({v or 'no version'})" for n, v in sorted(stale.items())[:5])
            findings.append(Finding("FAIL", f"{name}/ version",
                                    f"{len(stale)} of {len(versions)} written for another tfcourse than "
                                    f"the installed {__version__}: {listed}",
                                    "update both together: `git pull` in the course folder, then "
                                    "`make setup` (reinstalls the package)"))
        else:
            findings.append(Finding("ok", f"{name}/ version",
                                    f"{len(versions)} notebooks written for tfcourse {__version__}"))
    findings += _check_sync(root)
    return findings or [Finding("info", "notebooks", f"no notebooks/ or solutions/ in {root}")]


def _check_sync(root: Path) -> list[Finding]:
    solutions, learner = root / "solutions", root / "notebooks"
    if not (solutions.is_dir() and learner.is_dir()):
        return []
    try:
        from .course.build import build
    except ImportError:
        return [Finding("info", "notebooks/ sync", "the generator (tfcourse.course.build) is not installed")]
    report = build(solutions, learner, check=True)
    if report.ok:
        return [Finding("ok", "notebooks/ sync", "notebooks/ match solutions/")]
    parts = []
    if report.out_of_sync:
        parts.append("out of date: " + ", ".join(p.name for p in report.out_of_sync[:5]))
    if report.orphans:
        parts.append("no solution for: " + ", ".join(p.name for p in report.orphans[:5]))
    if report.problems:
        parts.append(f"{len(report.problems)} solution problem(s), first: {report.problems[0]}")
    return [Finding("warn", "notebooks/ sync", "; ".join(parts),
                    "maintainers: `tfcourse build-notebooks`; learners: `git pull` (keep your own "
                    "work in a copy of the notebook)")]


def collect(root: Path | None) -> list[Finding]:
    """Every finding, in report order."""
    return (check_python() + check_torch() + check_packages() + check_environment(root)
            + check_kernel() + check_widget_frontend() + check_notebooks(root))


# ------------------------------------------------------------------------- command

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", metavar="FOLDER", default=None,
                        help="course folder to check (default: the checkout tfcourse was installed from)")


def run(args: argparse.Namespace) -> int:
    root = Path(args.root).resolve() if getattr(args, "root", None) else project_root()
    findings = collect(root)
    print(f"tfcourse {__version__} doctor" + (f" — course folder {root}" if root else ""))
    width = max(len(f.topic) for f in findings)
    for finding in findings:
        print(f"  {finding.status:<4}  {finding.topic:<{width}}  {finding.detail}")
        if finding.fix:
            print(f"  {'':<4}  {'':<{width}}  fix: {finding.fix}")
    failures = [f for f in findings if f.status == "FAIL"]
    warnings = [f for f in findings if f.status == "warn"]
    if failures:
        print(f"{len(failures)} required piece(s) missing or broken, {len(warnings)} warning(s): "
              "apply the fixes above, then run `tfcourse doctor` again.")
        return 1
    print("Healthy: everything the course needs is in place"
          + (f" ({len(warnings)} warning(s) above)." if warnings else "."))
    return 0
