"""``tfcourse site``: the course as a static HTML site that works offline.

``build/site/`` gets one page per solution notebook (``solutions/NN_topic.ipynb`` with its
stored outputs and figures), the learner and solution ``.ipynb`` files to download, an index,
and the Markdown documents (``README.md``, ``README.zh.md``, ``CONTRIBUTING.md``, ``docs/*.md``)
as pages; the Chinese edition (``solutions/zh/``, ``notebooks/zh/``) gets the same under
``zh/``, and every page with a twin in the other language links to it from its header
(``site_languages``). Links that point at those ``.md`` files or into ``notebooks/`` /
``solutions/`` are rewritten to the site's pages. Open ``index.html`` from disk or under
``python -m http.server``.

Offline by construction: nbconvert renders only the cells (``lab/base.html.j2``); the page
around them and its one stylesheet are ours, so nbconvert's require.js, MathJax and widget
manager CDN links never appear. LaTeX becomes MathML at build time (latex2mathml; browsers
render MathML natively), figures stay data URIs, widget views become a note. The build then
scans every page and fails if anything would be loaded from the network.

A solution page shows the code without the ``### BEGIN SOLUTION`` / ``### END SOLUTION``
marker lines (the generator's, not the reader's), and every figure with an alt text in the
page's language (``site_languages.name_pictures``).
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
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..course import notebook_format
from .offline import check_offline
from .site_languages import (
    ALT_KEY,
    ENGLISH,
    Edition,
    download_name,
    editions,
    english_home,
    href,
    name_pictures,
    of_document,
    twins,
)

STYLESHEET = Path(__file__).with_name("site.css")  # ours; Pygments' colours appended
MARKER = ".tfcourse-site"  # marks a folder this command may wipe and rebuild
WIDGET_NOTE = ENGLISH.words["widget"]
# lab's cells, no <head>: no CDN scripts. A picture's <img> gets the alt text ``prepare`` chose
# (without one, nbconvert writes "No description has been provided for this image").
_WITH_ALT = (
    "{{ super() | replace('<img ', '<img alt=\"' ~ "
    f"(output.metadata.get('{ALT_KEY}', '') | escape_html) ~ '\" ', 1) }}}}"
)
_CELLS_TEMPLATE = "{%- extends 'base.html.j2' -%}\n" + "".join(
    f"{{% block {block} scoped %}}{_WITH_ALT}{{% endblock {block} %}}\n"
    for block in ("data_png", "data_jpg")
)
_MARKERS = (notebook_format.BEGIN_MARKER, notebook_format.END_MARKER)
_LINKS_ONLY = re.compile(r"\s*(\[[^\]]*\]\([^)]*\)[\s|·/,]*)+$")  # "[English](README.md)"
_GOAL_LABEL = re.compile(r"^\*\*(Goal|目标)[.:。：]\*\*\s*")
# A sentence ends at . ! ? before a space and a capital, or at 。！？ unless a closing quote
# follows.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z*(\"])|(?<=[。！？])(?![」』”’）)])\s*")
_CJK = "\u3000-\u303f\u3400-\u9fff\uff00-\uffef"
_CJK_LINE_BREAK = re.compile(f"(?<=[{_CJK}])\n(?=[{_CJK}])")  # joined: no space between 中文


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
            ' xmlns="http://www.w3.org/1998/Math/MathML"', ""
        )
    except Exception as error:  # noqa: BLE001 - ImportError, or TeX latex2mathml cannot parse
        warnings.append(f"math shown as TeX ({type(error).__name__}: {error}): {tex[:60]}")
        return f'<code class="tex">{html.escape(tex)}</code>'


class _Site:
    """One build: which repository file became which site page, and the rendering."""

    def __init__(self, root: Path, sources: dict[str, str]):
        # nbconvert is imported here, not at the top, so `tfcourse --help` stays fast.
        from nbconvert.filters.markdown_mistune import IPythonRenderer

        self.root, self.sources = root, sources
        self.warnings: list[str] = []
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
                if not self.github_anchors:  # notebooks: JupyterLab's ids, like nbconvert
                    return super().heading(text, level, **attrs)
                # .md pages: GitHub's ids, which the documents' own "#section" links use.
                plain = re.sub(r"<[^>]+>", "", text).strip().lower()
                slug = re.sub(r"[^\w\- ]", "", plain).replace(" ", "-")
                return (
                    f'<h{level} id="{slug}">{text}<a class="anchor-link" href="#{slug}">¶</a>'
                    f"</h{level}>\n"
                )

        self.renderer = Renderer

    def rewrite(self, url: str, source: str, page: str) -> str:
        """``url`` as written in ``source`` (a repository path), as seen from site ``page``."""
        parts = urlsplit(url)
        if parts.scheme or parts.netloc or not parts.path:
            return url  # external links and "#fragment" stay
        path = unquote(parts.path)
        targets = [
            posixpath.normpath(
                path.lstrip("/")
                if path.startswith("/")
                else posixpath.join(posixpath.dirname(home), path)
            )
            for home in dict.fromkeys((source, english_home(source)))
        ]
        target = next((t for t in targets if t in self.sources), None)
        if target is None:
            if targets[0].endswith((".md", ".ipynb")):
                self.warnings.append(f"{source}: link to {url!r}, which is not in the site")
            return url
        return href(self.sources[target], page) + (f"#{parts.fragment}" if parts.fragment else "")

    def markdown(self, text: str, source: str, page: str, attachments=None, notebook=False) -> str:
        from nbconvert.filters.markdown_mistune import MarkdownWithMath

        renderer = self.renderer(
            lambda url: self.rewrite(url, source, page),
            not notebook,
            attachments=attachments,
            embed_images=True,
            path=str((self.root / source).parent),
        )
        return MarkdownWithMath(renderer=renderer).render(text)

    def exporter(self):
        from jinja2 import DictLoader, pass_context
        from nbconvert import HTMLExporter

        site = self

        class CellsExporter(HTMLExporter):
            @pass_context
            def markdown2html(self, context, source):
                resources = context.get("resources", {})
                return site.markdown(
                    source,
                    resources["tfcourse_source"],
                    resources["tfcourse_page"],
                    context.get("cell", {}).get("attachments"),
                    notebook=True,
                )

        # nbconvert warns for every figure without alt text (ours all have one: prepare).
        quiet = logging.getLogger("tfcourse.site.nbconvert")
        quiet.setLevel(logging.ERROR)
        exporter = CellsExporter(
            template_name="lab",
            template_file="cells.j2",
            extra_loaders=[DictLoader({"cells.j2": _CELLS_TEMPLATE})],
            exclude_input_prompt=True,
            exclude_output_prompt=True,
            log=quiet,
        )
        # The template runs bleach over every highlighted input cell: a third of the build
        # time, for nothing, since Pygments escapes the code it colours and the notebooks are
        # our own. (Anything a page would load is still caught by check_offline.)
        exporter.register_filter("clean_html", lambda cell_html: cell_html)
        return exporter

    def prepare(self, nb, source: str, widget_note: str = WIDGET_NOTE, figure: str = "{}"):
        """Make ``nb`` fit to show offline (in place): no widget state or views (``widget_note``
        instead), no JavaScript, TeX outputs as MathML; no solution markers in the code, and
        an alt text for every picture (``figure``, formatted with its title)."""
        nb.metadata.pop("widgets", None)
        for cell in nb.cells:
            if cell.cell_type == "code":
                lines = cell.source.split("\n")
                cell.source = "\n".join(line for line in lines if line.strip() not in _MARKERS)
                name_pictures(cell, figure)
        for output in (o for cell in nb.cells for o in cell.get("outputs", [])):
            data = output.get("data", {})
            if notebook_format.WIDGET_MIME in data:
                output["data"] = {"text/html": widget_note}
                continue
            data.pop("application/javascript", None)  # the site runs no code
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
            raise SiteError(
                f"{out} exists and is not a site built by `tfcourse site`; not replacing it"
            )
        shutil.rmtree(out)
    documents = [
        p.relative_to(root).as_posix()
        for p in (
            root / "README.md",
            root / "README.zh.md",
            root / "CONTRIBUTING.md",
            *sorted((root / "docs").glob("*.md")),
        )
        if p.is_file()
    ]
    sources = {doc: doc.removesuffix(".md") + ".html" for doc in documents}
    built = editions(root, solutions)
    for edition, paths in built:
        for path in paths:
            for kind in ("solutions", "notebooks"):
                sources[edition.source(kind, path.name)] = edition.page(path.stem)
    site, report = _Site(root, sources), SiteReport(out)
    switches = twins(built, documents, sources)
    navs = {
        edition: [(edition.words["course"], edition.page("index"))]
        + [(_label(doc), sources[doc]) for doc in documents]
        for edition, _ in built
    }
    exporter = site.exporter()
    english: list[tuple] = []
    for edition, paths in built:
        entries = _notebook_pages(
            root, out, site, exporter, edition, paths, navs[edition], switches, report
        )
        english, names = english or entries, {path.stem for path in paths}
        others = [
            (page, name) for page, name, *_ in english if page.removesuffix(".html") not in names
        ]
        index = edition.page("index")
        _write(
            out,
            index,
            _page(
                "tfcourse",
                _index(root, site, edition, entries, documents, others),
                index,
                navs[edition],
                edition,
                switches.get(index),
            ),
            report,
        )
    for doc in documents:
        edition = of_document(doc)
        _write(
            out,
            sources[doc],
            _page(
                _label(doc),
                site.markdown((root / doc).read_text(encoding="utf-8"), doc, sources[doc]),
                sources[doc],
                navs.get(edition, navs[ENGLISH]),
                edition,
                switches.get(sources[doc]),
            ),
            report,
        )
    from pygments.formatters import HtmlFormatter

    (out / "style.css").write_text(
        STYLESHEET.read_text("utf-8") + HtmlFormatter().get_style_defs(".highlight"), "utf-8"
    )
    (out / MARKER).write_text(
        "built by `tfcourse site`; this folder is replaced on every build\n", encoding="utf-8"
    )
    report.warnings += site.warnings
    remote = check_offline(out)
    if remote:
        raise SiteError(
            "pages would load resources from the network (the site must work "
            "offline):\n  " + "\n  ".join(remote)
        )
    report.seconds = time.monotonic() - started
    return report


def _notebook_pages(
    root: Path,
    out: Path,
    site: _Site,
    exporter,
    edition: Edition,
    paths,
    nav,
    switches,
    report: SiteReport,
) -> list[tuple]:
    """One edition's notebook pages and downloads; the index entries: (page, title, goal,
    download links, source)."""
    read = [notebook_format.read_notebook(p, require_ids=False) for p in paths]
    titles = [_title_and_goal(nb, path.stem) for path, nb in zip(paths, read, strict=True)]
    entries = []
    for number, (path, nb) in enumerate(zip(paths, read, strict=True)):
        page, source = edition.page(path.stem), edition.source("solutions", path.name)
        site.prepare(nb, source, edition.words["widget"], edition.words["figure"])
        cells, _ = exporter.from_notebook_node(
            nb,
            resources={
                "metadata": {"name": path.stem, "path": str(path.parent)},
                "tfcourse_source": source,
                "tfcourse_page": page,
            },
        )
        downloads = _copy_downloads(root, out, edition, path.name, report)
        readme = _readme(site, edition, page)
        neighbours = [(number - 1, "prev", "← {}"), (number + 1, "next", "{} →")]
        pager = "".join(
            f'<a rel="{rel}" href="{paths[i].stem}.html">'
            f"{form.format(html.escape(titles[i][0]))}</a>"
            if 0 <= i < len(paths)
            else "<span></span>"
            for i, rel, form in neighbours
        )
        pager = f'<nav class="pager">{pager}</nav>'
        sentence = edition.words["downloads"].format(
            edition.words["or"].join(downloads), readme=readme
        )
        body = f'{pager}\n<p class="downloads">{sentence}</p>\n{cells}\n{pager}'
        _write(
            out,
            page,
            _page(f"{titles[number][0]} · tfcourse", body, page, nav, edition, switches.get(page)),
            report,
        )
        entries.append((page, *titles[number], downloads, source))
    return entries


def _solutions(root: Path, notebooks) -> list[Path]:
    folder = root / "solutions"
    if not folder.is_dir():
        raise SiteError(
            f"no solutions/ folder in {root}: the site is built from the solution "
            f"notebooks; run this in the course folder, or pass --root"
        )
    paths = [folder / f"{Path(name).stem}.ipynb" for name in notebooks or []]
    for name, path in zip(notebooks or [], paths, strict=True):
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
            paragraph = _CJK_LINE_BREAK.sub("", _GOAL_LABEL.sub("", paragraph.strip()))
            goal = _SENTENCE_END.split(paragraph.replace("\n", " "), maxsplit=1)[0]
            return heading.lstrip("#").strip(), goal[:1].upper() + goal[1:]
    return fallback, ""


def _label(document: str) -> str:
    stem = posixpath.basename(document).removesuffix(".md")
    return {"README.zh": "README (中文)", "CONTRIBUTING": "Contributing"}.get(
        stem, stem if stem.isupper() else stem.replace("_", " ").capitalize()
    )


def _zipped(notebook: Path, archive: Path) -> None:
    """``archive``: a zip holding ``notebook`` alone, the same bytes on every build."""
    info = zipfile.ZipInfo(notebook.name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr(info, notebook.read_bytes())


def _copy_downloads(
    root: Path, out: Path, edition: Edition, name: str, report: SiteReport
) -> list[str]:
    """Copy the edition's learner and solution notebook ``name`` into the site, each also
    zipped; links to the zips from its page (which is in the same site folder). Their names
    never collide (``download_name``): ``NAME.zip`` holds ``NAME.ipynb``, the learner's;
    ``NAME.solution.zip`` holds ``NAME.solution.ipynb``.

    A zip, because a page opened from disk (``file://``) cannot make Chromium download an
    ``.ipynb`` (it ignores ``download`` there and shows the JSON); a zip is saved wherever
    the site is read. The ``.ipynb`` copies stay for the links in the notebooks' prose."""
    links = []
    for kind, label in (("notebooks", "learner"), ("solutions", "solution")):
        source, copy = edition.source(kind, name), out / edition.download(kind, name)
        if (root / source).is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / source, copy)
            _zipped(copy, copy.with_suffix(".zip"))
            zipped = Path(download_name(kind, name)).with_suffix(".zip").name
            links.append(f'<a href="{kind}/{zipped}" download>{edition.words[label]}</a>')
        else:
            report.warnings.append(f"no {source}: its page does not offer it")
    return links


def _readme(site: _Site, edition: Edition, page: str) -> str:
    """A link from ``page`` to the quick start of the edition's README (or its words alone,
    when the README is not in the site)."""
    words, target = edition.words["readme"], site.sources.get(edition.readme)
    if target is None:
        return words
    return f'<a href="{href(target, page)}#{edition.words["quick_start"]}">{words}</a>'


def _write(out: Path, page: str, text: str, report: SiteReport):
    (out / page).parent.mkdir(parents=True, exist_ok=True)
    (out / page).write_text(text, encoding="utf-8")
    report.pages.append(page)


def _page(
    title: str,
    body: str,
    page: str,
    nav: list[tuple[str, str]],
    edition: Edition = ENGLISH,
    switch: tuple[Edition, str] | None = None,
) -> str:
    """The HTML document around ``body``, in ``edition``'s language; ``nav`` holds (label,
    site path) links; ``switch``, (the other edition, site path), the twin page's link."""
    prefix = "../" * page.count("/")
    links = " ".join(
        f'<a href="{prefix}{target}">{html.escape(label)}</a>' for label, target in nav
    )
    if switch:
        other, target = switch
        links += (
            f' <a class="switch" href="{prefix}{target}" hreflang="{other.html_lang}" '
            f'lang="{other.html_lang}">{other.name}</a>'
        )
    return (
        f'<!DOCTYPE html>\n<html lang="{edition.html_lang}">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<title>{html.escape(title)}</title>\n<link rel="stylesheet" href="{prefix}style.css">\n'
        f'</head>\n<body>\n<header class="site-header"><nav>{links}</nav></header>\n'
        f"<main>\n{body}\n</main>\n</body>\n</html>\n"
    )


def _index(root: Path, site: _Site, edition: Edition, entries, documents, others=()) -> str:
    """The edition's README's title and first paragraph, its notebooks in order, the
    notebooks it lacks (``others``: English (page, title)), the documents."""
    title, intro, index = "tfcourse", "", edition.page("index")
    if (root / edition.readme).is_file():
        text = (root / edition.readme).read_text(encoding="utf-8")
        heading, _, rest = text.lstrip().partition("\n")
        title = heading.lstrip("#").strip() or title
        # The first paragraph that is not just links (README.zh.md opens with "[English](...)").
        first = next((p for p in rest.split("\n\n") if p.strip() and not _LINKS_ONLY.match(p)), "")
        intro = site.markdown(_CJK_LINE_BREAK.sub("", first), edition.readme, index)
    items = "\n".join(
        f'<li><a class="title" href="{href(page, index)}">{html.escape(name)}</a>'
        f'{site.markdown(goal, source, index)}<p class="files">{" · ".join(links)}</p></li>'
        for page, name, goal, links, source in entries
    )
    reading = "\n".join(
        f'<li><a href="{href(site.sources[doc], index)}">{_label(doc)}</a> <code>{doc}</code></li>'
        for doc in documents
    )
    missing = "、".join(
        f'<a href="{href(page, index)}" hreflang="en">{html.escape(name)}</a>'
        for page, name in others
    )
    return (
        f"<h1>{html.escape(title)}</h1>\n{intro}\n"
        f"<p>{edition.words['index'].format(readme=_readme(site, edition, index))}</p>\n"
        f"<h2>{edition.words['notebooks']}</h2>\n"
        f'<ul class="toc">\n{items}\n</ul>\n'
        + (f"<p>{edition.words['english_only'].format(missing)}</p>\n" if missing else "")
        + (f"<h2>{edition.words['documents']}</h2>\n<ul>\n{reading}\n</ul>\n" if reading else "")
    )


# ------------------------------------------------------------------------- command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "notebooks",
        nargs="*",
        metavar="NOTEBOOK",
        help="solution notebooks to include, e.g. 01_attention (default: all)",
    )
    parser.add_argument(
        "--root", metavar="DIR", help="the course folder (default: found from here)"
    )
    parser.add_argument(
        "--out", metavar="DIR", help="the site's folder (default: <course>/build/site)"
    )


def run(args: argparse.Namespace) -> int:
    root = Path(args.root) if args.root else notebook_format.course_root()
    out = Path(args.out) if args.out else root / "build" / "site"
    try:
        report = build_site(root, out, args.notebooks or None)
    except (SiteError, ValueError) as error:  # ValueError: a notebook that cannot be read
        print(f"tfcourse site: error: {error}", file=sys.stderr)
        return 1
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(
        f"wrote {len(report.pages)} pages to {notebook_format.shown(out)} in "
        f"{report.seconds:.1f} s; open {notebook_format.shown(out / 'index.html')}"
    )
    return 0
