"""Is a static HTML page offline? Every URL a browser would load from it, found by parsing.

Used by ``tfcourse site`` after a build (a page that would load anything from the network
fails the build) and by its tests. Following a link (``<a href>``) loads nothing until
clicked, so links are allowed; ``src``/``href``-like attributes of any other tag, and
``url(...)``/``@import`` in CSS, are what a browser fetches on its own.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

_LOADING_ATTRIBUTES = {"src", "href", "srcset", "poster", "data", "xlink:href", "background"}


def is_remote(url: str) -> bool:
    """True for a URL that leaves the machine: ``//host`` or any scheme but data/file/blob.
    Read as a browser does: tabs and newlines dropped, ``\\`` as ``/``; a one-letter
    "scheme" is a Windows drive."""
    url = re.sub(r"[\t\n\r]", "", url).strip().replace("\\", "/")
    scheme = urlsplit(url).scheme.lower()
    return url.startswith("//") or (len(scheme) > 1 and scheme not in ("data", "file", "blob"))


class _ResourceFinder(HTMLParser):
    """Every URL a browser would *load*, not follow: src/href-like attributes on any tag but
    <a>/<area>, and url(...) / @import in CSS."""

    def __init__(self):
        super().__init__()
        self.found, self.in_style = [], False

    def handle_starttag(self, tag, attrs):
        self.in_style = tag == "style"
        for name, value in attrs:
            if name == "style" and value:
                self.handle_data(value, css=True)
            elif name in _LOADING_ATTRIBUTES and value and tag not in ("a", "area"):
                urls = (
                    [value]
                    if name != "srcset"
                    else [
                        candidate.split()[0] for candidate in value.split(",") if candidate.strip()
                    ]
                )
                self.found += [f"<{tag} {name}={url}>" for url in urls if is_remote(url)]

    def handle_endtag(self, tag):
        self.in_style = self.in_style and tag != "style"

    def handle_data(self, data, css=False):
        if css or self.in_style:
            urls = re.findall(r"""(?:url\(\s*|@import\s+(?!url\())['"]?([^'")\s;]+)""", data)
            self.found += [f"css url({url})" for url in urls if is_remote(url)]


def external_resources(page_html: str) -> list[str]:
    """Every network resource ``page_html`` would load (empty for an offline page)."""
    finder = _ResourceFinder()
    # Figures are megabytes of base64 in src="data:..."; HTMLParser crawls through long
    # attributes, and a data: URI loads nothing, so cut them short first.
    finder.feed(re.sub(r"data:[^\"'\s>]{64,}", "data:", page_html))
    finder.close()
    return finder.found


def check_offline(out: str | Path) -> list[str]:
    """``"page: resource"`` for each network resource any page under ``out`` would load."""
    out = Path(out)
    return [
        f"{page.relative_to(out).as_posix()}: {found}"
        for page in sorted(out.rglob("*.html"))
        for found in external_resources(page.read_text(encoding="utf-8"))
    ]
