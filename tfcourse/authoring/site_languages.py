"""The site's languages: English pages at the top, the Chinese edition under ``zh/``.

An ``Edition`` is one language's notebooks and the words of the page around them (the
download sentence, the index, the widget note, a figure's alt text, the nav). A figure's alt
text is "Figure: <title>" in the page's language (``name_pictures``): the first words the
figure draws (``tfcourse_texts`` in the picture's metadata, stored when the notebook was
executed; see ``tfcourse.lab.figure_text``), else the cell's id. A notebook gets
a Chinese page (``zh/NAME.html``) when it has a Chinese solution notebook
(``solutions/zh/NAME.ipynb``, made by ``tfcourse build-notebooks``); its downloads go to
``zh/notebooks/`` and ``zh/solutions/``. The two downloads never share a file name: the
learner's is ``NAME.ipynb`` (in ``NAME.zip``), the solution ``NAME.solution.ipynb`` (in
``NAME.solution.zip``), so unzipping the solution beside one's work overwrites nothing.
Each page with a twin in the other language links to it from its header (``twins``).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path

ALT_KEY = "tfcourse_alt"  # an output's metadata: its picture's alt text, for the template
TEXTS_KEY = "tfcourse_texts"  # a picture's metadata: the texts its figure draws (lab.figure_text)
_PICTURES = ("image/png", "image/jpeg")


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
        """Where the site keeps that file (``download_name``)."""
        return f"{self.folder}{kind}/{download_name(kind, name)}"


def download_name(kind: str, name: str) -> str:
    """The name a downloaded notebook has: ``NAME.ipynb`` for the learner's (``kind``
    "notebooks"), ``NAME.solution.ipynb`` for the solution."""
    return name if kind == "notebooks" else f"{Path(name).stem}.solution{Path(name).suffix}"


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
        "downloads": "Download the {}. This page shows the solution with its stored outputs. "
        "A notebook needs the course installed ({readme}): unzip it into a folder and run "
        "<code>tfcourse lab --dir FOLDER</code>, or open it in a JupyterLab running where "
        "tfcourse is installed.",
        "index": "Each page below shows a solution notebook with its stored outputs. To do the "
        "exercises, install the course ({readme}: <code>pip install .</code> in its folder); "
        "then <code>tfcourse lab</code> opens your own copy of every learner notebook. A "
        "notebook downloaded from here needs the course installed too: unzip it into a folder "
        "and run <code>tfcourse lab --dir FOLDER</code>, or open it in a JupyterLab running "
        "where tfcourse is installed.",
        "readme": "the README's quick start",
        "quick_start": "quick-start",  # the README's heading, as an anchor
        "notebooks": "The notebooks",
        "documents": "Documents",
        "english_only": "",
        "widget": '<div class="note">An interactive widget is shown here in JupyterLab: run the '
        "notebook where tfcourse is installed to use it.</div>",
        "figure": "Figure: {}",
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
        "downloads": "下载{}。本页展示参考答案及其保存的输出。下载的 notebook 要在装好课程之后"
        "才能运行（见 {readme}）：把压缩包解压到一个文件夹，运行 "
        "<code>tfcourse lab --dir 文件夹</code>；也可以在装有 tfcourse 的环境里用 JupyterLab "
        "打开。",
        "index": "下面每一页展示一个参考答案 notebook 及其保存的输出。要做练习，先安装课程（见 "
        "{readme}：在课程文件夹里运行 <code>pip install .</code>），然后运行 "
        "<code>tfcourse lab --language zh</code>，它会打开你自己的那份学员版 notebook。从这里"
        "下载的 notebook 同样要先装好课程：把它解压到一个文件夹，运行 "
        "<code>tfcourse lab --dir 文件夹</code>，或者在装有 tfcourse 的环境里用 JupyterLab 打开。",
        "readme": "README 的“快速开始”",
        "quick_start": "快速开始",
        "notebooks": "各 notebook",
        "documents": "文档",
        "english_only": "以下 notebook 暂无中文版，可阅读英文版：{}。",
        "widget": '<div class="note">在 JupyterLab 中，这里显示一个交互控件：在装有 tfcourse 的'
        "环境里运行这个 notebook，即可使用它。</div>",
        "figure": "图：{}",
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


def figure_title(output) -> str | None:
    """The first words a figure draws (its title, axis label or legend, as recorded when
    the notebook ran), or None when none were recorded. Mathtext (tick labels such as
    ``$\\mathdefault{10^{-1}}$``) is no title."""
    for mime in _PICTURES:
        texts = output.get("metadata", {}).get(mime, {}).get(TEXTS_KEY)
        if isinstance(texts, list):
            words = [t for t in texts if isinstance(t, str) and t.strip()]
            titled = [t for t in words if not (t.startswith("$") and t.endswith("$"))]
            if titled:
                return " ".join(titled[0].split())
    return None


def name_pictures(cell, figure: str) -> None:
    """Give each picture among ``cell``'s outputs its alt text (``figure`` formatted with
    its title, else the cell's id; numbered when the cell has several without a title)."""
    pictures = [
        o for o in cell.get("outputs", []) if any(m in o.get("data", {}) for m in _PICTURES)
    ]
    titles = [figure_title(o) for o in pictures]
    untitled = titles.count(None)
    number = 0
    for output, title in zip(pictures, titles, strict=True):
        if title is None:
            number += 1
            title = str(cell.get("id") or "?") + (f" ({number})" if untitled > 1 else "")
        output.setdefault("metadata", {})[ALT_KEY] = figure.format(title)
