"""The site's languages: English pages at the top, the Chinese edition under ``zh/``.

An ``Edition`` is one language's notebooks and the words of the page around them (the
download sentence, the index, the widget note, the nav). A notebook gets a Chinese page
(``zh/NAME.html``) when it has a Chinese solution notebook (``solutions/zh/NAME.ipynb``, made
by ``tfcourse build-notebooks``); its downloads go to ``zh/notebooks/`` and ``zh/solutions/``.
Each page with a twin in the other language links to it from its header (``twins``).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, eq=False)  # compared and hashed by identity
class Edition:
    """One language of the site: ``folder`` is both its subfolder in ``solutions/`` and
    ``notebooks/`` and the site folder of its pages ("" or "zh/")."""

    code: str
    html_lang: str
    folder: str
    readme: str
    name: str  # the switch link's label, in the language itself
    words: dict[str, str]

    def page(self, stem: str) -> str:
        return f"{self.folder}{stem}.html"

    def source(self, kind: str, name: str) -> str:
        """``kind`` ("solutions" or "notebooks") file ``name`` in the repository."""
        return f"{kind}/{self.folder}{name}"

    def download(self, kind: str, name: str) -> str:
        """Where the site keeps that file."""
        return f"{self.folder}{kind}/{name}"


ENGLISH = Edition(
    "en",
    "en",
    "",
    "README.md",
    "English",
    {
        "course": "Course",
        "learner": "learner notebook (exercises to do; .zip)",
        "solution": "solution notebook (.zip)",
        "or": " or the ",
        "downloads": "Download the {}. This page shows the solution with its stored outputs.",
        "index": "Each page below shows a solution notebook with its stored outputs. To do the "
        "exercises, download the learner notebook and open it in JupyterLab "
        "(<code>make lab</code>).",
        "notebooks": "The notebooks",
        "documents": "Documents",
        "english_only": "",
        "widget": '<div class="note">An interactive widget is shown here in JupyterLab: download '
        "the notebook and run it to use the widget.</div>",
    },
)
CHINESE = Edition(
    "zh",
    "zh-CN",
    "zh/",
    "README.zh.md",
    "中文",
    {
        "course": "课程",
        "learner": "学员版 notebook（要做的练习；.zip）",
        "solution": "参考答案 notebook（.zip）",
        "or": "或",
        "downloads": "下载{}。本页展示参考答案及其保存的输出。",
        "index": "下面每一页展示一个参考答案 notebook 及其保存的输出。要做练习，请下载学员版 "
        "notebook，在 JupyterLab 中打开（<code>make lab</code>）。",
        "notebooks": "各 notebook",
        "documents": "文档",
        "english_only": "以下 notebook 暂无中文版，可阅读英文版：{}。",
        "widget": '<div class="note">在 JupyterLab 中，这里显示一个交互控件：下载 notebook 并运行，'
        "即可使用它。</div>",
    },
)


def editions(root: Path, solutions: list[Path]) -> list[tuple[Edition, list[Path]]]:
    """Each edition with its solution notebooks, in course order: English has them all,
    Chinese those with a ``solutions/zh/`` twin (left out when there is none)."""
    chinese = [root / CHINESE.source("solutions", path.name) for path in solutions]
    chinese = [path for path in chinese if path.is_file()]
    return [(ENGLISH, solutions)] + ([(CHINESE, chinese)] if chinese else [])


def of_document(document: str) -> Edition:
    """The language of a Markdown document: ``NAME.zh.md`` is Chinese."""
    return CHINESE if document.endswith(".zh.md") else ENGLISH


def twins(
    built: list[tuple[Edition, list[Path]]], documents: list[str], sources: dict[str, str]
) -> dict[str, tuple[Edition, str]]:
    """Site page -> (the other edition, its twin page), both ways: notebook pages, the
    indexes, and documents ``NAME.md`` / ``NAME.zh.md``."""
    pairs = []
    if len(built) > 1:
        pairs.append((ENGLISH.page("index"), CHINESE.page("index")))
        pairs += [(ENGLISH.page(path.stem), CHINESE.page(path.stem)) for path in built[1][1]]
    pairs += [
        (sources[doc], sources[doc.removesuffix(".md") + ".zh.md"])
        for doc in documents
        if of_document(doc) is ENGLISH and doc.removesuffix(".md") + ".zh.md" in documents
    ]
    return {**{en: (CHINESE, zh) for en, zh in pairs}, **{zh: (ENGLISH, en) for en, zh in pairs}}


def english_home(source: str) -> str:
    """Where the English twin of a Chinese notebook lives (``solutions/zh/X`` ->
    ``solutions/X``): its cells' links were written there, so a link that leads nowhere from
    ``zh/`` is tried from there. Any other file: itself."""
    head, _, tail = source.partition(f"/{CHINESE.folder}")
    return f"{head}/{tail}" if tail and "/" not in tail else source


def href(target: str, page: str) -> str:
    """Site path ``target`` as a relative link on site page ``page``."""
    return posixpath.relpath(target, posixpath.dirname(page) or ".")
