"""The course in a real JupyterLab, driven by headless Chromium (Playwright).

Starts JupyterLab from this environment on a free localhost port with a token, quiet as
``tfcourse lab`` makes it (its labconfig and options), opens a notebook with an explorer,
runs all cells, waits for the widget, changes a dropdown and asserts that the picture
changed in place. A learner's notebook with a wrong implementation and an unsolved stub:
Run All reaches the last cell, the failing check shows a short verdict, no news toast
covers it. A shipped learner notebook, before anything runs: its check cells show no
execution count, and the reference's verdict said to be the reference's. The site opened from
disk: a Chinese page with its figure (and the figure's alt text), its learner notebook and
its solution download as zips of different names. Screenshots go to
``artifacts/`` (git-ignored). Select with ``-m browser``; skipped when the
``playwright`` package or a Chromium executable is missing.

Chromium: ``$TFCOURSE_CHROMIUM``, else ``chromium`` / ``chromium-browser`` on the
PATH (Debian: ``apt-get install chromium chromium-driver``). Nothing is
downloaded: Playwright drives the system browser.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import nbformat
import pytest

from tfcourse.authoring.site import build_site
from tfcourse.course import launch
from tfcourse.course.stubs import stub_message

from helpers import CHROMIUM_FLAGS, ROOT, chromium_executable

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.notebooks]

ARTIFACTS = ROOT / "artifacts"
REAL_NOTEBOOKS = ["02_multi_head_attention.ipynb", "06_stacks_and_gradients.ipynb"]
FRESH_LEARNER = "03_norms.ipynb"  # a shipped learner notebook, opened as a learner gets it
SERVER_START_S = 90
KERNEL_WORK_S = 240  # kernel start + imports + every cell, on a slow shared CPU

sync_api = pytest.importorskip(
    "playwright.sync_api",
    reason="the browser test needs the `playwright` package (pip install -e '.[dev]')",
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _fixture_notebook(path: Path):
    """The smallest notebook with an explorer, in the course's format."""
    nb = nbformat.v4.new_notebook(
        metadata={
            "kernelspec": {
                "name": "python3",
                "display_name": "Python 3 (ipykernel)",
                "language": "python",
            },
            "language_info": {"name": "python"},
        }
    )
    nb.cells = [
        nbformat.v4.new_code_cell("import tfcourse as tc", id="setup"),
        nbformat.v4.new_code_cell(
            "tc.widgets.attention_explorer()",
            id="explorer",
            metadata={"tags": ["nbval-ignore-output"]},
        ),
    ]
    nbformat.write(nb, path)


def _learner_notebook(path: Path):
    """A learner mid-course: an unsolved stub, called; a figure and a line after it; last, a
    LayerNorm that doubles its input, checked (a real error ends Run All, as it should)."""
    nb = nbformat.v4.new_notebook(
        metadata={
            "kernelspec": {
                "name": "python3",
                "display_name": "Python 3 (ipykernel)",
                "language": "python",
            },
            "language_info": {"name": "python"},
        }
    )
    wrong = (
        "import torch\n\nclass Doubles(torch.nn.Module):\n"
        "    def __init__(self, d_model, eps=1e-5):\n        super().__init__()\n"
        "        self.weight = torch.nn.Parameter(torch.ones(d_model))\n"
        "        self.bias = torch.nn.Parameter(torch.zeros(d_model))\n\n"
        "    def forward(self, x):\n        return x * 2"
    )
    stub = f"def attention(q, k, v):\n    raise NotImplementedError({stub_message('attention')!r})"
    nb.cells = [
        nbformat.v4.new_code_cell(source, id=cell_id)
        for cell_id, source in [
            (
                "setup",
                "import tfcourse as tc\ntc.runtime.setup_notebook(written_for=tc.__version__)",
            ),
            ("stub", stub),
            ("called", "attention(1, 2, 3)"),
            (
                "plot",
                "import torch\n"
                "fig = tc.plots.attention_heatmap(torch.softmax(torch.randn(6, 6), -1))\n"
                "display(fig)",
            ),
            ("after", "print('the cells after the stub ran')"),
            ("wrong", wrong),
            ("check", "tc.checks.check_layernorm(Doubles)"),
        ]
    ]
    nbformat.write(nb, path)


class Lab:
    """A JupyterLab server in its own process group, isolated from the user's Jupyter config."""

    def __init__(self, root: Path, home: Path):
        self.port, self.token = _free_port(), secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ)
        for var, sub in (
            ("JUPYTER_CONFIG_DIR", "config"),
            ("JUPYTER_DATA_DIR", "data"),
            ("JUPYTER_RUNTIME_DIR", "runtime"),
            ("IPYTHONDIR", "ipython"),
            ("JUPYTERLAB_SETTINGS_DIR", "settings"),
            ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
        ):
            env[var] = str(home / sub)  # the `python3` kernel is then this environment's
        # A setting a fresh user would click through: start the notebook's kernel without
        # a "Select Kernel" dialog. The news prompt is kept away as `tfcourse lab` does it.
        env = launch.quiet_environment(launch.write_quiet_config(home / "quiet"), env)
        for plugin, settings in (("notebook-extension/tracker", {"autoStartDefaultKernel": True}),):
            path = home / "settings" / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(settings))
        self.log = open(home / "jupyterlab.log", "w")  # noqa: SIM115 - lives as long as the server
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyterlab",
                "--no-browser",
                "--ip=127.0.0.1",
                f"--port={self.port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={root}",
                # Nothing that reaches the internet: no news feed, update check or extension index.
                *launch.QUIET_OPTIONS,
                "--LabApp.extension_manager=readonly",
                # CI containers run as root; the server refuses that without the flag.
                *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),
            ],
            cwd=root,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._wait_until_up(home / "jupyterlab.log")

    def _wait_until_up(self, log: Path):
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"JupyterLab exited with {self.process.returncode}:\n{log.read_text()[-3000:]}"
                )
            try:
                with urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=2):
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
        raise RuntimeError(
            f"JupyterLab did not answer within {SERVER_START_S} s:\n{log.read_text()[-3000:]}"
        )

    def shut_down_kernels(self):
        """End every notebook session (and its kernel), so the next notebook has the CPU."""
        headers = {"Authorization": f"token {self.token}"}
        with urllib.request.urlopen(
            urllib.request.Request(f"{self.url}/api/sessions", headers=headers), timeout=10
        ) as response:
            sessions = json.load(response)
        for session in sessions:
            urllib.request.urlopen(
                urllib.request.Request(
                    f"{self.url}/api/sessions/{session['id']}", method="DELETE", headers=headers
                ),
                timeout=30,
            ).close()

    def stop(self):
        """Ask the server to shut down (kernels included), then end its process group."""
        try:
            request = urllib.request.Request(
                f"{self.url}/api/shutdown",
                method="POST",
                headers={"Authorization": f"token {self.token}"},
            )
            urllib.request.urlopen(request, timeout=5).close()
            self.process.wait(timeout=15)
        except (OSError, subprocess.TimeoutExpired):  # ended below whatever went wrong here
            pass
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        else:  # kernels are in the server's group; make sure none outlives it
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab-root")
    home = tmp_path_factory.mktemp("lab-home")
    _fixture_notebook(root / "explorer.ipynb")
    _learner_notebook(root / "learner.ipynb")
    for name in REAL_NOTEBOOKS:
        if (ROOT / "solutions" / name).exists():
            shutil.copy(ROOT / "solutions" / name, root / name)
    if (ROOT / "notebooks" / FRESH_LEARNER).exists():
        shutil.copy(ROOT / "notebooks" / FRESH_LEARNER, root / f"fresh-{FRESH_LEARNER}")
    server = Lab(root, home)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory):
    chromium = chromium_executable()
    profile = tmp_path_factory.mktemp("chromium-profile")  # a fresh user-data-dir
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 1000},
        )
        try:
            yield context
        finally:
            context.close()


def _open_and_run_all(page, lab: Lab, notebook: str) -> None:
    """Open ``notebook`` in a fresh workspace and start Run All once its kernel is idle."""
    # A workspace of its own, reset: JupyterLab would otherwise reopen (and start kernels
    # for) the notebooks of the previous test.
    workspace = notebook.removesuffix(".ipynb").replace("_", "-")
    page.goto(f"{lab.url}/lab/workspaces/{workspace}/tree/{notebook}?reset&token={lab.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", state="attached", timeout=SERVER_START_S * 1000)
    # "Run All" is dropped while the kernel is still starting: wait until the status
    # bar names the kernel and says Idle, then check the cells were queued (retry if not).
    page.wait_for_function(
        "() => { const bar = document.querySelector('.jp-StatusBar-Widget');"
        " return bar && /\\| Idle/.test(bar.innerText) && !/No Kernel/.test(bar.innerText); }",
        timeout=KERNEL_WORK_S * 1000,
    )
    for attempt in range(3):
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.locator("li.lm-Menu-item[data-command='runmenu:run-all']").click()
        # Should a kernel dialog appear (other JupyterLab settings), accept the preferred kernel.
        dialog = page.locator(".jp-Dialog", has_text="Select Kernel")
        if dialog.count():
            dialog.locator("button.jp-mod-accept").click()
        try:
            page.wait_for_function(
                "() => [...document.querySelectorAll('.jp-Notebook .jp-InputArea-prompt')]"
                ".some(p => /\\[(\\*|\\d+)\\]/.test(p.innerText))",
                timeout=15_000,
            )
            break
        except sync_api.TimeoutError:
            if attempt == 2:
                raise


def _wait_for_every_cell(page) -> None:
    page.wait_for_function(
        "() => ![...document.querySelectorAll('.jp-Notebook .jp-InputArea-prompt')]"
        ".some(p => p.innerText.includes('[*]'))",
        timeout=KERNEL_WORK_S * 1000,
    )


def _run_all_and_change_a_dropdown(page, lab: Lab, notebook: str, shot: str) -> dict:
    """Open ``notebook``, run all cells, change the first explorer's last dropdown.

    Returns timings (seconds) and the picture's ``src`` before and after.
    """
    started = time.monotonic()
    _open_and_run_all(page, lab, notebook)
    explorer = page.locator(
        ".jupyter-widgets.widget-vbox", has=page.locator(".widget-output img")
    ).first
    picture = explorer.locator(".widget-output img")
    # "attached", then scrolled to: JupyterLab skips rendering cells outside the
    # viewport (content-visibility), and Run All scrolls to the last cell.
    picture.first.wait_for(state="attached", timeout=KERNEL_WORK_S * 1000)
    # Let every cell finish first: a change made while later cells still run waits for them.
    _wait_for_every_cell(page)
    explorer.scroll_into_view_if_needed()
    picture.first.wait_for(state="visible", timeout=30_000)
    rendered = time.monotonic()
    assert picture.count() == 1, f"expected one picture in the explorer, found {picture.count()}"
    before = picture.first.get_attribute("src")
    page.screenshot(path=str(ARTIFACTS / f"{shot}-before.png"))

    dropdown = explorer.locator("select").last
    options = dropdown.locator("option").all_text_contents()
    current = dropdown.evaluate("select => select.options[select.selectedIndex].text")
    target = next(text for text in options if text != current)
    dropdown.select_option(label=target)
    page.wait_for_function(
        "([root, before]) => { const img = root.querySelector('.widget-output img');"
        " return img && img.getAttribute('src') !== before; }",
        arg=[explorer.element_handle(), before],
        timeout=60_000,
    )
    changed = time.monotonic()
    after = picture.first.get_attribute("src")
    assert picture.count() == 1, (
        f"pictures stacked up: {picture.count()} in the explorer after a change"
    )
    explorer.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / f"{shot}-after.png"))
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    tracebacks = [t for t in errors.all_inner_texts() if "Traceback" in t or "Error" in t]
    return {
        "before": before,
        "after": after,
        "changed_to": target,
        "tracebacks": tracebacks,
        "open_to_all_cells_run_s": round(rendered - started, 1),
        "change_to_redraw_s": round(changed - rendered, 1),
    }


def _record(name: str, result: dict, started: float):
    timing = {k: v for k, v in result.items() if k.endswith("_s")}
    timing["total_s"] = round(time.monotonic() - started, 1)
    (ARTIFACTS / f"{name}-timing.json").write_text(json.dumps(timing, indent=1) + "\n")
    print(f"{name}: {timing}")


def test_attention_explorer_in_jupyterlab(lab, browser_context):
    started = time.monotonic()
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser_context.new_page()
    try:
        result = _run_all_and_change_a_dropdown(
            page, lab, "explorer.ipynb", "browser-attention-explorer"
        )
    finally:
        page.close()
        lab.shut_down_kernels()
    assert result["before"].startswith("data:image/png;base64,")
    assert result["after"] != result["before"], (
        "the picture did not change after the dropdown moved"
    )
    assert not result["tracebacks"], result["tracebacks"]
    _record("browser-attention-explorer", result, started)


@pytest.mark.parametrize("notebook", REAL_NOTEBOOKS)
def test_course_notebook_explorer_in_jupyterlab(lab, browser_context, notebook):
    if not (ROOT / "solutions" / notebook).exists():
        pytest.skip(f"solutions/{notebook} does not exist yet")
    started = time.monotonic()
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser_context.new_page()
    name = "browser-" + notebook.removesuffix(".ipynb")
    try:
        result = _run_all_and_change_a_dropdown(page, lab, notebook, name)
    finally:
        page.close()
        lab.shut_down_kernels()
    assert result["after"] != result["before"], (
        "the picture did not change after the dropdown moved"
    )
    assert not result["tracebacks"], result["tracebacks"]
    _record(name, result, started)


def test_a_learners_screen_in_jupyterlab(lab, browser_context):
    """Run All on a notebook with a wrong implementation and an unsolved stub: every cell
    runs, the failing check fits in a few lines without the course's frames, the stub says
    so in one line, and no JupyterLab news toast covers the outputs."""
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser_context.new_page()
    try:
        _open_and_run_all(page, lab, "learner.ipynb")
        _wait_for_every_cell(page)
        outputs = page.locator(".jp-Notebook .jp-OutputArea-output")
        outputs.filter(has_text="LayerNorm").first.wait_for(state="attached", timeout=60_000)
        outputs.last.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "browser-learner-screen.png"))
        texts = outputs.all_inner_texts()
        verdict = next(text for text in texts if "LayerNorm" in text and "Error" in text)
        unsolved = [text for text in texts if "not solved yet" in text]
        figures = page.locator(".jp-Notebook .jp-OutputArea-output img").count()
        toasts = page.locator(".Toastify__toast").all_inner_texts()
    finally:
        page.close()
        lab.shut_down_kernels()
    assert len(verdict.strip().splitlines()) <= 10, verdict
    assert "_harness" not in verdict and "File " not in verdict and "Traceback" not in verdict
    assert "tc.checks.full_traceback()" in verdict
    assert len(unsolved) == 1 and len(unsolved[0].strip().splitlines()) == 1, unsolved
    assert any("the cells after the stub ran" in text for text in texts) and figures == 1, (
        texts,
        figures,
    )
    assert not [t for t in toasts if "news" in t.lower()], toasts


def test_a_fresh_learner_notebook_shows_no_verdict_that_did_not_run(lab, browser_context):
    """Opened, not run: a check cell's prompt is empty ("[ ]:", not "[4]:"), and what it
    shows is the reference's verdict, said to be the reference's."""
    if not (ROOT / "notebooks" / FRESH_LEARNER).exists():
        pytest.skip(f"notebooks/{FRESH_LEARNER} does not exist yet")
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser_context.new_page()
    try:
        page.goto(
            f"{lab.url}/lab/workspaces/fresh/tree/fresh-{FRESH_LEARNER}?reset&token={lab.token}"
        )
        checks = page.locator(".jp-Notebook .jp-CodeCell", has_text="expected (the reference's")
        checks.first.wait_for(state="attached", timeout=SERVER_START_S * 1000)
        checks.first.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "browser-fresh-learner.png"))
        # textContent, not innerText: JupyterLab leaves a cell below the fold unrendered
        # (content-visibility), and innerText of an unrendered cell is empty.
        prompts = checks.locator(".jp-InputArea-prompt").all_text_contents()
        shown = checks.locator(".jp-OutputArea-output").all_text_contents()
    finally:
        page.close()
        lab.shut_down_kernels()
    assert prompts and all(re.fullmatch(r"\[ \]:", p.strip()) for p in prompts), prompts
    assert all(
        text.startswith("expected (the reference's output): ") and "checks passed" in text
        for text in shown
    ), shown


def test_the_site_from_disk_shows_chinese_figures_and_downloads_the_notebook(
    browser_context, tmp_path
):
    """A page of the Chinese edition opened as a file: its figures are there (the screenshot
    shows their Chinese labels), and the learner-notebook link saves a zip."""
    ARTIFACTS.mkdir(exist_ok=True)
    out = tmp_path / "site"
    build_site(ROOT, out, ["01_attention"])
    page = browser_context.new_page()
    try:
        page.goto((out / "zh" / "01_attention.html").as_uri())
        figures = page.locator("img[src^='data:image/png']")
        assert figures.count() > 0
        alts = [figures.nth(i).get_attribute("alt") for i in range(figures.count())]
        figures.first.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "browser-site-zh-figure.png"))
        saved = []
        for link in page.locator("p.downloads a[download]").all():  # learner's, solution
            with page.expect_download(timeout=30_000) as download:
                link.click()
            saved.append(tmp_path / download.value.suggested_filename)
            download.value.save_as(saved[-1])
    finally:
        page.close()
    assert all(alt and alt.startswith("图：") for alt in alts), alts
    assert [path.name for path in saved] == ["01_attention.zip", "01_attention.solution.zip"]
    for path, inside in zip(
        saved, ["01_attention.ipynb", "01_attention.solution.ipynb"], strict=True
    ):
        with zipfile.ZipFile(path) as bundle:
            assert bundle.namelist() == [inside]
            assert json.loads(bundle.read(inside))["metadata"]["tfcourse"]["language"] == "zh"
