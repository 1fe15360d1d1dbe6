"""``tfcourse site``: the course as a static HTML site that works offline.

``build/site/`` gets one page per solution notebook (``solutions/NN_topic.ipynb`` with its
stored outputs and figures), the learner and solution ``.ipynb`` files to download, an index,
and the Markdown documents (``README.md``, ``README.zh.md``, ``CONTRIBUTING.md``, ``docs/*.md``)
as pages. Links that point at those ``.md`` files or into ``notebooks/`` / ``solutions/`` are
rewritten to the site's pages. Open ``index.html`` from disk or under ``python -m http.server``.

Offline by construction: nbconvert renders only the cells (``lab/base.html.j2``); the page
around them and its one stylesheet are ours, so nbconvert's require.js, MathJax and widget
manager CDN links never appear. LaTeX becomes MathML at build time (latex2mathml; browsers
render MathML natively), figures stay data URIs, widget views become a note. The build then
scans every page and fails if anything would be loaded from the network.
"""

from __future__ import annotations

import argparse
import html
import logging
import posixpath
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from . import notebook_format
from .offline import check_offline

STYLESHEET = Path(__file__).with_name("site.css")   # ours; Pygments' colours appended
MARKER = ".tfcourse-site"          # marks a folder this command may wipe and rebuild
WIDGET_NOTE = ('<div class="note">An interactive widget is shown here in JupyterLab: download '
               'the notebook and run it to use the widget.</div>')
_CELLS_TEMPLATE = "{%- extends 'base.html.j2' -%}"     # lab's cells, no <head>: no CDN scripts


class SiteError(Exception):
    """The site cannot be built; the message says why and what to do."""


@dataclass
class SiteReport:
    """What a build wrote: pages (site-relative paths), warnings, wall-clock seconds."""

    out: Path
    pages: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0


# ------------------------------------------------------------------------- rendering

def tex_to_html(tex: str, display: bool, warnings: list[str]) -> str:
    """MathML for ``tex`` (without xmlns: HTML5 needs none), else the TeX itself in <code>."""
    try:
        from latex2mathml.converter import convert
        return convert(tex, display="block" if display else "inline").replace(
            ' xmlns="http://www.w3.org/1998/Math/MathML"', "")
    except Exception as error:  # noqa: BLE001 - ImportError, or TeX latex2mathml cannot parse
        warnings.append(f"math shown as TeX ({type(error).__name__}: {error}): {tex[:60]}")
        return f'<code class="tex">{html.escape(tex)}</code>'


class _Site:
    """One build: which repository file became which site page, and the rendering."""

    def __init__(self, root: Path, sources: dict[str, str]):
        # nbconvert is imported here, not at the top, so `tfcourse --help` stays fast.
        from nbconvert.filters.markdown_mistune import IPythonRenderer

        self.root, self.sources, self.warnings = root, sources, []
        warnings = self.warnings

        class Renderer(IPythonRenderer):
            """nbconvert's Markdown renderer, with math as MathML and links for the site."""

            def __init__(self, rewrite, github_anchors, **kwargs):
                super().__init__(escape=False, **kwargs)
                self.rewrite, self.github_anchors = rewrite, github_anchors

            def block_math(self, body):
                return tex_to_html(body, True, warnings)

            def inline_math(self, body):
                return tex_to_html(body, False, warnings)

            def latex_environment(self, name, body):
                return tex_to_html(f"\\begin{{{name}}}{body}\\end{{{name}}}", True, warnings)

            def link(self, text, url, title=None):
                return super().link(text, self.rewrite(url), title)

            def heading(self, text, level, **attrs):
                if not self.github_anchors:       # notebooks: JupyterLab's ids, like nbconvert
                    return super().heading(text, level, **attrs)
                # .md pages: GitHub's ids, which the documents' own "#section" links use.
                plain = re.sub(r"<[^>]+>", "", text).strip().lower()
                slug = re.sub(r"[^\w\- ]", "", plain).replace(" ", "-")
                return (f'<h{level} id="{slug}">{text}<a class="anchor-link" href="#{slug}">¶</a>'
                        f"</h{level}>\n")

        self.renderer = Renderer

    def rewrite(self, url: str, source: str, page: str) -> str:
        """``url`` as written in ``source`` (a repository path), as seen from site ``page``."""
        parts = urlsplit(url)
        if parts.scheme or parts.netloc or not parts.path:
            return url                              # external links and "#fragment" stay
        path = unquote(parts.path)
        target = posixpath.normpath(path.lstrip("/") if path.startswith("/")
                                    else posixpath.join(posixpath.dirname(source), path))
        if target not in self.sources:
            if target.endswith((".md", ".ipynb")):
                self.warnings.append(f"{source}: link to {url!r}, which is not in the site")
            return url
        new = posixpath.relpath(self.sources[target], posixpath.dirname(page) or ".")
        return new + (f"#{parts.fragment}" if parts.fragment else "")

    def markdown(self, text: str, source: str, page: str, attachments=None, notebook=False) -> str:
        from nbconvert.filters.markdown_mistune import MarkdownWithMath

        renderer = self.renderer(lambda url: self.rewrite(url, source, page), not notebook,
                                 attachments=attachments, embed_images=True,
                                 path=str((self.root / source).parent))
        return MarkdownWithMath(renderer=renderer).render(text)

    def exporter(self):
        from jinja2 import DictLoader, pass_context
        from nbconvert import HTMLExporter

        site = self

        class CellsExporter(HTMLExporter):
            @pass_context
            def markdown2html(self, context, source):
                resources = context.get("resources", {})
                return site.markdown(source, resources["tfcourse_source"], resources["tfcourse_page"],
                                     context.get("cell", {}).get("attachments"), notebook=True)

        # nbconvert warns for every figure without alt text, which all matplotlib output is.
        quiet = logging.getLogger("tfcourse.site.nbconvert")
        quiet.setLevel(logging.ERROR)
        exporter = CellsExporter(template_name="lab", template_file="cells.j2",
                                 extra_loaders=[DictLoader({"cells.j2": _CELLS_TEMPLATE})],
                                 exclude_input_prompt=True, exclude_output_prompt=True, log=quiet)
        # The template runs bleach over every highlighted input cell: a third of the build
        # time, for nothing, since Pygments escapes the code it colours and the notebooks are
        # our own. (Anything a page would load is still caught by check_offline.)
        exporter.register_filter("clean_html", lambda cell_html: cell_html)
        return exporter

    def prepare(self, nb, source: str):
        """Make ``nb`` fit to show offline (in place): no widget state or views, no JavaScript,
        TeX outputs as MathML."""
        nb.metadata.pop("widgets", None)
        for output in (o for cell in nb.cells for o in cell.get("outputs", [])):
            data = output.get("data", {})
            if notebook_format.WIDGET_MIME in data:
                output["data"] = {"text/html": WIDGET_NOTE}
                continue
            data.pop("application/javascript", None)        # the site runs no code
            if "text/latex" in data and "text/html" not in data:
                data["text/html"] = self.markdown(data["text/latex"], source, source)


# ------------------------------------------------------------------------- the site

def build_site(root: str | Path, out: str | Path, notebooks=None) -> SiteReport:
    """Build the site of the course at ``root`` into ``out`` (replaced, if it is a site).

    ``notebooks``: solution notebooks by name (``"01_attention"``), default all. Raises
    ``SiteError`` if there is nothing to build or a page would load something remote.
    """
    started = time.monotonic()
    root, out = Path(root).resolve(), Path(out).resolve()
    solutions = _solutions(root, notebooks)
    if out.exists():
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise SiteError(f"{out} exists and is not a site built by `tfcourse site`; "
                            f"not replacing it")
        shutil.rmtree(out)
    documents = [p.relative_to(root).as_posix() for p in (root / "README.md", root / "README.zh.md",
                 root / "CONTRIBUTING.md", *sorted((root / "docs").glob("*.md"))) if p.is_file()]
    sources = {doc: doc.removesuffix(".md") + ".html" for doc in documents}
    for path in solutions:
        sources[f"solutions/{path.name}"] = sources[f"notebooks/{path.name}"] = f"{path.stem}.html"
    site, report = _Site(root, sources), SiteReport(out)
    nav = [("Course", "index.html")] + [(_label(doc), sources[doc]) for doc in documents]
    exporter, read = site.exporter(), [notebook_format.read_notebook(p, require_ids=False)
                                       for p in solutions]
    titles = [_title_and_goal(nb, path.stem) for path, nb in zip(solutions, read)]
    entries = []
    for number, (path, nb) in enumerate(zip(solutions, read)):
        page, source = f"{path.stem}.html", f"solutions/{path.name}"
        site.prepare(nb, source)
        cells, _ = exporter.from_notebook_node(nb, resources={
            "metadata": {"name": path.stem, "path": str(path.parent)},
            "tfcourse_source": source, "tfcourse_page": page})
        downloads = _copy_downloads(root, out, path, report)
        neighbours = [(number - 1, "prev", "← {}"), (number + 1, "next", "{} →")]
        pager = "".join(f'<a rel="{rel}" href="{solutions[i].stem}.html">'
                        f"{form.format(html.escape(titles[i][0]))}</a>"
                        if 0 <= i < len(solutions) else "<span></span>" for i, rel, form in neighbours)
        pager = f'<nav class="pager">{pager}</nav>'
        body = (f'{pager}\n<p class="downloads">Download the {" or the ".join(downloads)}. This page '
                f"shows the solution with its stored outputs.</p>\n{cells}\n{pager}")
        _write(out, page, _page(f"{titles[number][0]} · tfcourse", body, page, nav), report)
        entries.append((page, *titles[number], downloads, source))
    for doc in documents:
        text = (root / doc).read_text(encoding="utf-8")
        _write(out, sources[doc], _page(_label(doc), site.markdown(text, doc, sources[doc]),
                                        sources[doc], nav), report)
    _write(out, "index.html", _page("tfcourse", _index(root, site, entries, documents),
                                    "index.html", nav), report)
    from pygments.formatters import HtmlFormatter
    (out / "style.css").write_text(STYLESHEET.read_text("utf-8") + HtmlFormatter().get_style_defs(".highlight"), "utf-8")
    (out / MARKER).write_text("built by `tfcourse site`; this folder is replaced on every build\n")
    report.warnings += site.warnings
    remote = check_offline(out)
    if remote:
        raise SiteError("pages would load resources from the network (the site must work "
                        "offline):\n  " + "\n  ".join(remote))
    report.seconds = time.monotonic() - started
    return report


def _solutions(root: Path, notebooks) -> list[Path]:
    folder = root / "solutions"
    if not folder.is_dir():
        raise SiteError(f"no solutions/ folder in {root}: the site is built from the solution "
                        f"notebooks; run this in the course folder, or pass --root")
    paths = [folder / f"{Path(name).stem}.ipynb" for name in notebooks or []]
    for name, path in zip(notebooks or [], paths):
        if not path.is_file():
            raise SiteError(f"no solution notebook {name!r} in {folder}")
    paths = paths or sorted(folder.glob("*.ipynb"))
    if not paths:
        raise SiteError(f"no solution notebooks (*.ipynb) in {folder}")
    return paths


def _title_and_goal(nb, fallback: str) -> tuple[str, str]:
    """The first Markdown heading, and the first sentence of the paragraph after it."""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("#"):
            heading, _, rest = cell.source.lstrip().partition("\n")
            paragraph = next((p for p in rest.split("\n\n") if p.strip()), "")
            paragraph = re.sub(r"^\*\*Goal[.:]\*\*\s*", "", paragraph.strip()).replace("\n", " ")
            goal = re.split(r"(?<=[.!?])\s+(?=[A-Z*(\"])", paragraph, maxsplit=1)[0]
            return heading.lstrip("#").strip(), goal[:1].upper() + goal[1:]
    return fallback, ""


def _label(document: str) -> str:
    stem = posixpath.basename(document).removesuffix(".md")
    return {"README.zh": "README (中文)", "CONTRIBUTING": "Contributing"}.get(
        stem, stem if stem.isupper() else stem.replace("_", " ").capitalize())


def _copy_downloads(root: Path, out: Path, solution: Path, report: SiteReport) -> list[str]:
    """Copy the learner and solution notebooks into the site; links to them."""
    links = []
    for folder, label in (("notebooks", "learner notebook (exercises to do)"),
                          ("solutions", "solution notebook")):
        if (root / folder / solution.name).is_file():
            (out / folder).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / folder / solution.name, out / folder / solution.name)
            links.append(f'<a href="{folder}/{solution.name}" download>{label}</a>')
        else:
            report.warnings.append(f"no {folder}/{solution.name}: its page does not offer it")
    return links


def _write(out: Path, page: str, text: str, report: SiteReport):
    (out / page).parent.mkdir(parents=True, exist_ok=True)
    (out / page).write_text(text, encoding="utf-8")
    report.pages.append(page)


def _page(title: str, body: str, page: str, nav: list[tuple[str, str]]) -> str:
    """The HTML document around ``body``; ``nav`` holds (label, site path) links."""
    prefix = "../" * page.count("/")
    links = " ".join(f'<a href="{prefix}{target}">{html.escape(label)}</a>' for label, target in nav)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f'<title>{html.escape(title)}</title>\n<link rel="stylesheet" href="{prefix}style.css">\n'
            f'</head>\n<body>\n<header class="site-header"><nav>{links}</nav></header>\n'
            f"<main>\n{body}\n</main>\n</body>\n</html>\n")


def _index(root: Path, site: _Site, entries, documents) -> str:
    """The README's title and first paragraph, the notebooks in order, the documents."""
    title, intro = "tfcourse", ""
    if (root / "README.md").is_file():
        heading, _, rest = (root / "README.md").read_text(encoding="utf-8").lstrip().partition("\n")
        title = heading.lstrip("#").strip() or title
        first = next((p for p in rest.split("\n\n") if p.strip()), "")
        intro = site.markdown(first, "README.md", "index.html")
    items = "\n".join(
        f'<li><a class="title" href="{page}">{html.escape(name)}</a>'
        f'{site.markdown(goal, source, "index.html")}<p class="files">{" · ".join(links)}</p></li>'
        for page, name, goal, links, source in entries)
    reading = "\n".join(f'<li><a href="{site.sources[doc]}">{_label(doc)}</a> <code>{doc}</code></li>'
                        for doc in documents)
    return (f"<h1>{html.escape(title)}</h1>\n{intro}\n<p>Each page below shows a solution notebook "
            f"with its stored outputs. To do the exercises, download the learner notebook and open "
            f"it in JupyterLab (<code>make lab</code>).</p>\n<h2>The notebooks</h2>\n"
            f'<ul class="toc">\n{items}\n</ul>\n'
            + (f"<h2>Documents</h2>\n<ul>\n{reading}\n</ul>\n" if reading else ""))


# ------------------------------------------------------------------------- command

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebooks", nargs="*", metavar="NOTEBOOK",
                        help="solution notebooks to include, e.g. 01_attention (default: all)")
    parser.add_argument("--root", metavar="DIR", help="the course folder (default: found from here)")
    parser.add_argument("--out", metavar="DIR", help="the site's folder (default: <course>/build/site)")


def run(args: argparse.Namespace) -> int:
    root = Path(args.root) if args.root else notebook_format.course_root()
    out = Path(args.out) if args.out else root / "build" / "site"
    try:
        report = build_site(root, out, args.notebooks or None)
    except (SiteError, ValueError) as error:        # ValueError: a notebook that cannot be read
        print(f"tfcourse site: error: {error}", file=sys.stderr)
        return 1
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"wrote {len(report.pages)} pages to {notebook_format.shown(out)} in "
          f"{report.seconds:.1f} s; open {notebook_format.shown(out / 'index.html')}")
    return 0
