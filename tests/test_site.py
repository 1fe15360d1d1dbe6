"""``tfcourse site``: the static HTML site of the course, built and checked offline.

The fast tests build a tiny course of their own (two notebooks, a README, a docs/ page; with
a Chinese edition of one notebook for the language switch) and two real notebooks, English
and Chinese. The browser test (``-m browser``) builds the whole site, serves it on
127.0.0.1 and reads it in headless Chromium, recording every request: nothing may leave the
machine. Screenshots go to ``artifacts/`` (git-ignored).
"""

from __future__ import annotations

import functools
import html
import http.server
import json
import posixpath
import re
import threading
import time
import zipfile
from pathlib import Path

import nbformat
import pytest

from tfcourse import cli
from tfcourse.authoring.offline import check_offline, external_resources
from tfcourse.authoring.site import SiteError, _title_and_goal, build_site

from helpers import CHROMIUM_FLAGS, ROOT, chromium_executable

ARTIFACTS = ROOT / "artifacts"
REAL = ["01_attention", "04_mlp"]  # math, figures, exercise and check cells
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5E"
    "rkJggg=="
)
# Independent of the implementation's own check: a tag that loads, with a remote address.
REMOTE_LOAD = re.compile(
    r"<(script|link|img|iframe|source|embed|object|video|audio)\b[^>]*"
    r"\b(src|href|data)\s*=\s*[\"']?(https?:)?//",
    re.IGNORECASE,
)


def _notebook(path: Path, cells):
    nb = nbformat.v4.new_notebook(
        metadata={
            "kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}
        }
    )
    nb.cells = cells
    nbformat.write(nb, path)


@pytest.fixture
def course(tmp_path) -> Path:
    """A two-notebook course with links of every kind, a figure, math and a widget output."""
    root = tmp_path / "course"
    for folder in ("solutions", "notebooks", "docs"):
        (root / folder).mkdir(parents=True)
    figure = nbformat.v4.new_output(
        "display_data", data={"image/png": PNG, "text/plain": "<Figure>"}
    )
    widget = nbformat.v4.new_output(
        "display_data",
        data={
            "application/vnd.jupyter.widget-view+json": {
                "model_id": "abc",
                "version_major": 2,
                "version_minor": 0,
            },
            "text/plain": "VBox(children=(Dropdown(...),))",
        },
    )
    script = nbformat.v4.new_output(
        "display_data",
        data={"application/javascript": "fetch('https://example.com/track')", "text/plain": "<JS>"},
    )
    _notebook(
        root / "solutions" / "01_first.ipynb",
        [
            nbformat.v4.new_markdown_cell(
                "# 01 · First steps\n\n**Goal:** meet $\\sqrt{d_k}$ and the mask. More text.\n\n"
                "See [the guide](../docs/guide.md#part-two), [the next notebook](02_second.ipynb), "
                "[the learner copy](../notebooks/02_second.ipynb), [the README](../README.md) and "
                "[a paper](https://arxiv.org/abs/1706.03762).\n\n"
                "$$\\frac{q k^\\top}{\\sqrt{d_k}}$$",
                id="intro",
            ),
            nbformat.v4.new_code_cell("plot()", id="plot", outputs=[figure]),
            nbformat.v4.new_code_cell("explorer()", id="explorer", outputs=[widget, script]),
        ],
    )
    _notebook(
        root / "solutions" / "02_second.ipynb",
        [
            nbformat.v4.new_markdown_cell(
                "# 02 · Second steps\n\nBack to [01](01_first.ipynb).", id="intro"
            ),
            nbformat.v4.new_code_cell(
                "print('hello')",
                id="hello",
                outputs=[nbformat.v4.new_output("stream", text="hello\n")],
            ),
        ],
    )
    for name in ("01_first.ipynb", "02_second.ipynb"):
        (root / "notebooks" / name).write_text((root / "solutions" / name).read_text())
    (root / "README.md").write_text(
        "# A tiny course\n\nIt has [a guide](docs/guide.md#part-two) "
        "and [notebook 01](notebooks/01_first.ipynb).\n\n"
        "## Part two\n\n[Up](#a-tiny-course)\n"
    )
    (root / "docs" / "guide.md").write_text(
        "# Guide\n\n[Home](../README.md), [a sibling](other.md), "
        "[notebook 02](../solutions/02_second.ipynb).\n\n"
        "## Part two\n\nText.\n"
    )
    (root / "docs" / "other.md").write_text("# Other\n")
    return root


@pytest.fixture
def bilingual(course) -> Path:
    """The course, with a Chinese edition of notebook 01 (02 has none) and a README.zh.md."""
    widget = nbformat.v4.new_output(
        "display_data",
        data={
            "application/vnd.jupyter.widget-view+json": {
                "model_id": "abc",
                "version_major": 2,
                "version_minor": 0,
            },
            "text/plain": "VBox()",
        },
    )
    for folder in ("solutions/zh", "notebooks/zh"):
        (course / folder).mkdir()
        _notebook(
            course / folder / "01_first.ipynb",
            [
                nbformat.v4.new_markdown_cell(
                    "# 01 · 第一步\n\n**目标：** 认识 $\\sqrt{d_k}$ 和\n掩码。后面的句子。\n\n"
                    "见[学员版](../../notebooks/zh/01_first.ipynb)、[下一个](02_second.ipynb)、"
                    "[指南](../docs/guide.md)和[说明](../../README.zh.md)。",
                    id="intro",
                ),
                nbformat.v4.new_code_cell("explorer()", id="explorer", outputs=[widget]),
            ],
        )
    (course / "README.zh.md").write_text(
        "# 一门小课程\n\n[English](README.md)\n\n它有一\n个[指南](docs/guide.md)和"
        "[第 01 个 notebook](notebooks/zh/01_first.ipynb)。\n",
        encoding="utf-8",
    )
    return course


def _pages(out: Path) -> dict[str, str]:
    return {
        p.relative_to(out).as_posix(): p.read_text(encoding="utf-8") for p in out.rglob("*.html")
    }


def _switch(pages: dict[str, str], page: str) -> str | None:
    """The site path the header's language switch of ``page`` leads to (None: no switch)."""
    header = re.search(r'<header class="site-header">.*?</header>', pages[page], re.DOTALL).group(0)
    found = re.findall(r'<a class="switch" href="([^"]+)"', header)
    assert len(found) <= 1, (page, found)
    return posixpath.normpath(posixpath.join(posixpath.dirname(page), found[0])) if found else None


def test_fixture_course_pages_and_downloads(course, tmp_path):
    report = build_site(course, tmp_path / "site")
    out = tmp_path / "site"
    assert (
        sorted(report.pages)
        == sorted(_pages(out))
        == [
            "01_first.html",
            "02_second.html",
            "README.html",
            "docs/guide.html",
            "docs/other.html",
            "index.html",
        ]
    )
    # The learner's and the solution's files never share a name: unzipping the solution
    # beside one's own work overwrites nothing.
    downloads = {"notebooks": "{}.ipynb", "solutions": "{}.solution.ipynb"}
    for folder, form in downloads.items():
        for name in ("01_first", "02_second"):
            assert (out / folder / form.format(name)).read_bytes() == (
                course / folder / f"{name}.ipynb"
            ).read_bytes()
    assert sorted(p.name for p in (out / "solutions").iterdir()) == [
        "01_first.solution.ipynb",
        "01_first.solution.zip",
        "02_second.solution.ipynb",
        "02_second.solution.zip",
    ]
    page = (out / "01_first.html").read_text()
    for folder, form in downloads.items():  # zipped: a page read from disk can save a zip
        inside = form.format("01_first")
        zipped = inside.removesuffix(".ipynb") + ".zip"
        assert f'href="{folder}/{zipped}" download' in page
        with zipfile.ZipFile(out / folder / zipped) as bundle:
            assert bundle.namelist() == [inside]
            assert bundle.read(inside) == (course / folder / "01_first.ipynb").read_bytes()
    build_site(course, tmp_path / "again")  # the same bytes on every build
    assert (out / "notebooks" / "01_first.zip").read_bytes() == (
        tmp_path / "again" / "notebooks" / "01_first.zip"
    ).read_bytes()
    assert 'rel="next" href="02_second.html">02 · Second steps →' in page
    assert (
        'rel="prev" href="01_first.html">← 01 · First steps' in (out / "02_second.html").read_text()
    )
    index = (out / "index.html").read_text()
    assert "<h1>A tiny course</h1>" in index
    assert 'href="01_first.html">01 · First steps</a>' in index
    assert "Meet <math" in index  # the goal's first sentence, math and all
    assert "More text" not in index


def test_md_and_notebook_links_are_rewritten(course, tmp_path):
    build_site(course, tmp_path / "site")
    pages = _pages(tmp_path / "site")
    assert 'href="docs/guide.html#part-two"' in pages["README.html"]
    assert 'href="01_first.html"' in pages["README.html"]  # notebooks/ -> the page
    assert 'id="part-two"' in pages["docs/guide.html"]  # GitHub-style anchors
    assert (
        'href="#a-tiny-course"' in pages["README.html"]
        and 'id="a-tiny-course"' in pages["README.html"]
    )
    guide = pages["docs/guide.html"]
    assert 'href="../README.html"' in guide and 'href="other.html"' in guide
    assert 'href="../02_second.html"' in guide  # solutions/ -> the page
    first = pages["01_first.html"]
    for href in ("docs/guide.html#part-two", "02_second.html", "README.html"):
        assert f'href="{href}"' in first
    assert first.count('href="02_second.html"') >= 2  # solution and learner links
    assert 'href="https://arxiv.org/abs/1706.03762"' in first  # prose links stay, as <a>
    assert not re.search(r'href="[^"]*\.md[#"]', "".join(pages.values()))


def test_the_pages_say_what_a_downloaded_notebook_needs(bilingual, tmp_path):
    """Not `make lab` (a clone's): the package installed, then `tfcourse lab --dir`, or a
    JupyterLab where it is installed; with a link to the README's quick start."""
    build_site(bilingual, tmp_path / "site")
    pages = _pages(tmp_path / "site")
    for page, readme in (
        ("index.html", "README.html#quick-start"),
        ("01_first.html", "README.html#quick-start"),
        ("zh/index.html", "../README.zh.html#快速开始"),
        ("zh/01_first.html", "../README.zh.html#快速开始"),
    ):
        text = pages[page]
        assert "make lab" not in text, page
        assert "<code>tfcourse lab --dir " in text and "JupyterLab" in text, page
        assert f'<a href="{readme}">' in text, page
    assert "pip install ." in pages["index.html"] and "pip install ." in pages["zh/index.html"]
    assert "<code>tfcourse lab --language zh</code>" in pages["zh/index.html"]
    assert "装有 tfcourse 的环境" in pages["zh/01_first.html"]


def test_solution_pages_drop_the_markers_and_name_their_figures(course, tmp_path):
    """The generator's ### BEGIN/END SOLUTION lines are not the reader's; every figure has an
    alt text in the page's language: its recorded first words, else its cell's id."""
    titled = nbformat.v4.new_output("display_data", data={"image/png": PNG})
    titled.metadata = {
        "image/png": {"tfcourse_texts": ["$\\mathdefault{10^{1}}$", "Loss  by step"]}
    }
    nb = nbformat.read(course / "solutions" / "02_second.ipynb", as_version=4)
    nb.cells += [
        nbformat.v4.new_code_cell(
            "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION",
            id="exercise",
            metadata={"tags": ["exercise"]},
        ),
        nbformat.v4.new_code_cell("curves()", id="curves", outputs=[titled]),
        nbformat.v4.new_code_cell(
            "two()",
            id="two-plots",
            outputs=[nbformat.v4.new_output("display_data", data={"image/png": PNG})] * 2,
        ),
    ]
    nbformat.write(nb, course / "solutions" / "02_second.ipynb")
    (course / "solutions" / "zh").mkdir()
    nbformat.write(nb, course / "solutions" / "zh" / "02_second.ipynb")
    build_site(course, tmp_path / "site")
    pages = _pages(tmp_path / "site")
    for page, word in (("02_second.html", "Figure: "), ("zh/02_second.html", "图：")):
        text = html.unescape(pages[page])
        assert "SOLUTION" not in text and "return" in text, page
        assert "No description" not in text, page
        assert re.findall(r'<img alt="([^"]*)"', text) == [
            f"{word}Loss by step",
            f"{word}two-plots (1)",
            f"{word}two-plots (2)",
        ], page
    assert re.findall(r'<img alt="([^"]*)"', pages["01_first.html"]) == ["Figure: plot"]


def test_outputs_math_and_widgets(course, tmp_path):
    build_site(course, tmp_path / "site")
    page = (tmp_path / "site" / "01_first.html").read_text()
    assert re.search(r'<img [^>]*src="data:image/png;base64,' + re.escape(PNG[:20]), page)
    assert '<math display="block">' in page and "<msqrt>" in page and "$" not in page
    assert "interactive widget" in page and "widget-view+json" not in page
    assert "example.com/track" not in page  # JavaScript outputs dropped
    assert "VBox(children" not in page


def test_no_page_loads_anything_remote(course, tmp_path):
    build_site(course, tmp_path / "site")
    pages = _pages(tmp_path / "site")
    assert check_offline(tmp_path / "site") == []
    for name, text in pages.items():
        assert not REMOTE_LOAD.search(text), (name, REMOTE_LOAD.search(text).group(0))
        assert "mathjax" not in text.lower() and "require.js" not in text and "unpkg" not in text


@pytest.mark.parametrize(
    "tag",
    [
        '<script src="https://cdn.example.com/require.min.js"></script>',
        '<link rel="stylesheet" href="//fonts.example.com/css">',
        "<img src='http://example.com/x.png'>",
        '<iframe src="https://example.com"></iframe>',
        '<script src="\\\\example.com\\x.js"></script>',  # browsers read \\ as //
        '<img srcset="a.png 1x, https://example.com/b.png 2x">',
        "<style>@import url(https://example.com/theme.css);</style>",
        "<div style=\"background: url('https://example.com/bg.png')\"></div>",
    ],
)
def test_offline_check_catches_injected_resources(course, tmp_path, tag):
    build_site(course, tmp_path / "site")
    page = tmp_path / "site" / "02_second.html"
    page.write_text(page.read_text().replace("</main>", tag + "\n</main>"))
    found = check_offline(tmp_path / "site")
    assert len(found) == 1 and found[0].startswith("02_second.html: "), found


def test_offline_check_allows_what_loads_nothing():
    assert (
        external_resources(
            '<a href="https://example.com">paper</a> <img src="data:image/png;'
            'base64,AAAA"> <link rel="stylesheet" href="style.css"> '
            '<img src="file:///tmp/x.png"> <a href="#top">top</a>'
        )
        == []
    )


def test_a_remote_image_in_a_notebook_fails_the_build(course, tmp_path):
    nb = nbformat.read(course / "solutions" / "02_second.ipynb", as_version=4)
    nb.cells.append(
        nbformat.v4.new_markdown_cell("![logo](https://example.com/logo.png)", id="logo")
    )
    nbformat.write(nb, course / "solutions" / "02_second.ipynb")
    with pytest.raises(SiteError, match=r"02_second.html: <img src=https://example.com/logo.png>"):
        build_site(course, tmp_path / "site")


def test_missing_solutions_folder_is_a_clear_error(tmp_path, capsys):
    assert cli.main(["site", "--root", str(tmp_path), "--out", str(tmp_path / "site")]) == 1
    err = capsys.readouterr().err
    assert f"no solutions/ folder in {tmp_path.resolve()}" in err and "--root" in err
    assert not (tmp_path / "site").exists()


def test_unknown_notebook_and_foreign_folder_are_refused(course, tmp_path):
    with pytest.raises(SiteError, match="no solution notebook '07_nothing'"):
        build_site(course, tmp_path / "site", ["07_nothing"])
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    with pytest.raises(SiteError, match="not a site built by"):
        build_site(course, precious)
    assert (precious / "thesis.tex").exists()


def test_cli_builds_a_subset_and_rebuilds_in_place(course, tmp_path, capsys):
    out = tmp_path / "site"
    assert cli.main(["site", "01_first", "--root", str(course), "--out", str(out)]) == 0
    assert cli.main(["site", "01_first.ipynb", "--root", str(course), "--out", str(out)]) == 0
    assert "wrote 5 pages" in capsys.readouterr().out
    assert not (out / "02_second.html").exists()


def test_language_switch_links_both_ways(bilingual, tmp_path):
    out = tmp_path / "site"
    report = build_site(bilingual, out)
    pages = _pages(out)
    assert sorted(report.pages) == sorted(pages)
    switches = {page: _switch(pages, page) for page in pages}
    assert {page: target for page, target in switches.items() if target} == {
        "01_first.html": "zh/01_first.html",
        "zh/01_first.html": "01_first.html",
        "index.html": "zh/index.html",
        "zh/index.html": "index.html",
        "README.html": "README.zh.html",
        "README.zh.html": "README.html",
    }
    for page, target in switches.items():
        assert target is None or (out / target).is_file(), (page, target)
    # No Chinese twin, no switch: not to a page that does not exist, not to the index.
    assert switches["02_second.html"] is None and "zh/02_second.html" not in pages
    assert ">中文</a>" in pages["01_first.html"] and ">English</a>" in pages["zh/01_first.html"]
    assert check_offline(out) == []
    for name, text in pages.items():
        assert not REMOTE_LOAD.search(text), name


def test_chinese_pages_chrome_downloads_and_links(bilingual, tmp_path):
    out = tmp_path / "site"
    build_site(bilingual, out)
    pages = _pages(out)
    page = pages["zh/01_first.html"]
    assert '<html lang="zh-CN">' in page and '<html lang="en">' in pages["01_first.html"]
    assert "<title>01 · 第一步 · tfcourse</title>" in page and "<h1" in page and "第一步" in page
    assert '<a href="../zh/index.html">课程</a>' in page and ">Course</a>" not in page
    assert "下载" in page and "Download the" not in page
    assert (
        "交互控件" in page and "interactive widget" not in page and "widget-view+json" not in page
    )
    for kind, name in (("notebooks", "01_first"), ("solutions", "01_first.solution")):
        assert f'href="{kind}/{name}.zip" download' in page
        assert (out / "zh" / kind / f"{name}.ipynb").read_bytes() == (
            bilingual / kind / "zh" / "01_first.ipynb"
        ).read_bytes()
    assert not (out / "zh" / "notebooks" / "02_second.ipynb").exists()
    # notebooks/zh/, README.zh.md, an English-only notebook, a link written as from solutions/.
    for href in ("01_first.html", "../README.zh.html", "../02_second.html", "../docs/guide.html"):
        assert f'href="{href}"' in page, href
    assert 'href="zh/01_first.html"' in pages["README.zh.html"]  # README.zh.md's link
    assert '<html lang="zh-CN">' in pages["README.zh.html"]
    assert not re.search(r'href="[^"]*\.(md|ipynb)[#"](?! download)', "".join(pages.values()))


def test_chinese_index_lists_the_chinese_notebooks(bilingual, tmp_path):
    out = tmp_path / "site"
    build_site(bilingual, out)
    index = (out / "zh" / "index.html").read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in index and "<h1>一门小课程</h1>" in index
    assert (
        "<p>它有一个<a" in index and ">English</a></p>" not in index
    )  # intro: not the switch line
    assert re.findall(r'<a class="title" href="([^"]+)">([^<]+)</a>', index) == [
        ("01_first.html", "01 · 第一步")
    ]
    assert "认识 <math" in index and "和掩码。" in index and "后面的句子" not in index
    assert '<a href="../02_second.html" hreflang="en">02 · Second steps</a>' in index  # no zh yet
    assert "<h2>文档</h2>" in index and 'href="../docs/guide.html"' in index
    english = (out / "index.html").read_text(encoding="utf-8")
    assert english.count('class="title"') == 2 and "<h1>A tiny course</h1>" in english


@pytest.mark.parametrize(
    ("goal", "first"),
    [
        ("**Goal:** meet the mask. More text.", "Meet the mask."),
        ("**目标：** 认识掩码。后面的句子。", "认识掩码。"),
        ("**目标。** 它说「耗时降至1.3ms。」然后呢？下一句。", "它说「耗时降至1.3ms。」然后呢？"),
        ("一行写到\n下一行！第二句。", "一行写到下一行！"),
    ],
)
def test_first_sentence_in_either_language(goal, first):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# Title\n\n{goal}")])
    assert _title_and_goal(nb, "x") == ("Title", first)


@pytest.fixture(scope="module")
def real_site(tmp_path_factory):
    out = tmp_path_factory.mktemp("real") / "site"
    return build_site(ROOT, out, REAL), out


def test_real_notebooks(real_site):
    report, out = real_site
    for name in REAL:
        page = (out / f"{name}.html").read_text()
        assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', page)) >= 2, name
        assert "Exercise" in page and "celltag_check" in page
        assert (out / "notebooks" / f"{name}.ipynb").exists()
        assert (out / "solutions" / f"{name}.solution.ipynb").exists()
        assert "BEGIN SOLUTION" not in page and "No description has been provided" not in page
        assert not re.search(r"<img (?![^>]*alt=\"Figure: [^\"]+\")", page), name
    assert "<math" in (out / "01_attention.html").read_text()
    assert {"index.html", "README.html"} <= set(report.pages)
    assert check_offline(out) == []
    for name, text in _pages(out).items():
        assert not REMOTE_LOAD.search(text), name


# ------------------------------------------------------------------------- in a browser


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.mark.browser
@pytest.mark.slow
def test_site_in_chromium_offline(tmp_path):
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="the browser test needs the `playwright` package (pip install -e '.[dev]')",
    )
    # The browser tests' Chromium (skips when there is none) and flags for a machine offline.
    chromium = chromium_executable()
    # The whole course: its build takes ~7 s (measured on a shared 2-core machine; 12 s for
    # `tfcourse site` with its imports), well within a browser test's budget.
    out, started = tmp_path / "site", time.monotonic()
    report = build_site(ROOT, out)
    seconds = time.monotonic() - started
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(out))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/"
    ARTIFACTS.mkdir(exist_ok=True)
    requests, errors = [], []
    try:
        with sync_api.sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                str(tmp_path / "chromium-profile"),
                executable_path=chromium,
                headless=True,
                args=CHROMIUM_FLAGS,
                viewport={"width": 1280, "height": 1000},
            )
            page = context.new_page()
            page.on("request", lambda request: requests.append(request.url))
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(base + "index.html")
            assert page.locator(".toc a.title").count() == len(
                list((ROOT / "solutions").glob("*.ipynb"))
            )
            page.screenshot(path=str(ARTIFACTS / "site-index.png"))
            for name in REAL:
                page.get_by_role("link", name="Course", exact=True).click()
                page.wait_for_url("**/index.html")
                page.locator(f'.toc a.title[href="{name}.html"]').click()
                page.wait_for_url(f"**/{name}.html")
                _assert_rendered(page)
                page.screenshot(path=str(ARTIFACTS / f"site-{name}.png"))
            page.get_by_role("link", name="README", exact=True).click()
            page.wait_for_url("**/README.html")
            page.goto((out / "03_norms.html").as_uri())  # from the file system
            _assert_rendered(page)
            page.screenshot(path=str(ARTIFACTS / "site-file-03_norms.png"))
            # The recorder itself: a page that does load something remote is seen (TEST-NET
            # address, nothing answers; the request is recorded when it starts).
            probe = "http://203.0.113.1/probe.png"
            with page.expect_request(probe, timeout=10_000):
                page.set_content(f'<img src="{probe}">', wait_until="commit")
            assert requests.pop() == probe
            context.close()
    finally:
        server.shutdown()
        server.server_close()
    (ARTIFACTS / "site-timing.json").write_text(
        json.dumps({"build_s": round(seconds, 1), "pages": len(report.pages)}, indent=1) + "\n"
    )
    allowed = (base, "data:", "file://")
    assert requests and not [url for url in requests if not url.startswith(allowed)], requests
    assert not errors, errors


def _assert_rendered(page):
    """The page has its stylesheet, a loaded figure and rendered math or code."""
    page.wait_for_function(
        "() => [...document.images].some(i => i.complete && i.naturalWidth > 0)", timeout=30_000
    )
    assert page.evaluate("getComputedStyle(document.querySelector('main')).maxWidth") != "none"
    assert page.locator(".jp-CodeCell .highlight").count() > 0
    if page.locator("math").count():
        assert page.locator("math").first.bounding_box()["width"] > 0


def test_real_chinese_pages(real_site):
    report, out = real_site
    chinese = [name for name in REAL if (ROOT / "solutions" / "zh" / f"{name}.ipynb").is_file()]
    if not chinese:
        pytest.skip("no Chinese edition of the real notebooks (tfcourse build-notebooks)")
    pages = _pages(out)
    index = pages["zh/index.html"]
    titles = re.findall(r'<a class="title" href="([^"]+)">([^<]+)</a>', index)
    assert [href for href, _ in titles] == [f"{name}.html" for name in chinese]
    for (_, title), name in zip(titles, chinese, strict=True):
        nb = nbformat.read(ROOT / "solutions" / "zh" / f"{name}.ipynb", as_version=4)
        assert nb.cells[0].source.startswith(f"# {html.unescape(title)}\n"), name
        assert re.search(r"[\u4e00-\u9fff]", title), title
        page = pages[f"zh/{name}.html"]
        assert '<html lang="zh-CN">' in page and "下载" in page
        alts = re.findall(r"<img ([^>]*)>", page)
        assert alts and all(re.match(r'alt="图：[^"]+"', alt) for alt in alts), name
        assert _switch(pages, f"zh/{name}.html") == f"{name}.html"
        assert _switch(pages, f"{name}.html") == f"zh/{name}.html"
        assert (out / "zh" / "notebooks" / f"{name}.ipynb").is_file()
    assert (
        _switch(pages, "index.html") == "zh/index.html"
        and _switch(pages, "zh/index.html") == "index.html"
    )
    assert {f"zh/{name}.html" for name in chinese} <= set(report.pages)
