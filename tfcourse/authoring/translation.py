"""The Chinese edition: translations stored beside each solution notebook, keyed by cell id.

``solutions/NN_topic.ipynb`` holds the English; ``solutions/NN_topic.zh.md`` holds the
Chinese twin of each cell that has text, in sections like these::

    <!-- cell: title · en: 3f2a9c1b5e -->
    # 01 · 注意力
    ...

    <!-- cell: ex-attention · en: 0a1b2c3d4e -->
    ```python
    def attention(q, k, v):
        \"\"\"中文的 docstring\"\"\"
        ...
    ```

    <!-- hint: ex-attention · en: 1234567890 -->
    先算分数……

``en:`` is a fingerprint of the English the section was translated from (the cell's source,
or its hint). When the English changes and the section does not, the translation is stale,
and ``tfcourse build-notebooks --check`` fails naming the cell. ``tfcourse translate NN``
writes the sections a notebook still lacks or that went stale, with the English as the
text to translate.

What a code cell may change: its comments, its docstrings and its other string literals
(printed prose, figure labels). Its syntax tree with that text set aside must equal the
English one, so the two editions run the same code. A cell whose output is compared
(``nbval-check-output``) and whose printed text changed keeps no outputs from the English:
the Chinese solution is executed for its own, which nbval then compares with the Chinese
edition's runs; the pair test keeps the two in step (the same numbers in each output).
"""

from __future__ import annotations

import ast
import hashlib
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from ..course import notebook_format
from . import glossary

LANGUAGE = "zh"
SUFFIX = f".{LANGUAGE}.md"
_HEADER = re.compile(r"^<!-- (cell|hint): ([A-Za-z0-9_-]{1,64}) · en: ([0-9a-f]{10}) -->$")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_WORDS = re.compile(r"[A-Za-z]{3,}")
_PROSE = re.compile(r"[A-Za-z]{2,}[ ,.:;'!?-]+[A-Za-z]{2,}")
_CODE_SPANS = re.compile(
    r"```.*?```|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]*\$|<[^>\n]*>|\]\([^)\n]*\)", re.DOTALL
)
# The first cell's call, given the edition's language by the generator (not the translator).
_SETUP_CALL = re.compile(r"(setup_notebook\((?:(?!language=)[^()])*)\)")
_NOT_PROSE_COMMENTS = (
    notebook_format.BEGIN_MARKER,
    notebook_format.END_MARKER,
    "# noqa",
    "# type:",
)


def fingerprint(english: str) -> str:
    """The first 10 hex digits of the SHA-256 of ``english``."""
    return hashlib.sha256(english.encode("utf-8")).hexdigest()[:10]


def twin_path(solution: str | Path) -> Path:
    """Where the translations of ``solutions/NAME.ipynb`` live: ``solutions/NAME.zh.md``."""
    solution = Path(solution)
    return solution.with_name(solution.stem + SUFFIX)


@dataclass
class Section:
    """One translated text: a cell's source (``kind="cell"``) or an exercise's hint."""

    kind: str
    cell_id: str
    en: str  # fingerprint of the English it was translated from
    text: str
    line: int  # where its header is in the file (1-based), for messages


def parse_twin(text: str, name: str = "<twin>") -> dict[tuple[str, str], Section]:
    """The sections of a ``.zh.md`` file, keyed by ``(kind, cell_id)``.

    Raises ``ValueError`` naming the line for a duplicate section, text before the first
    header, or a code section whose fence is not closed.
    """
    sections: dict[tuple[str, str], Section] = {}
    current: Section | None = None
    body: list[str] = []

    def close() -> None:
        if current is None:
            if any(line.strip() for line in body):
                raise ValueError(f"{name}: text before the first '<!-- cell: ... -->' header")
            return
        current.text = "\n".join(body).strip("\n")
        sections[(current.kind, current.cell_id)] = current

    for number, line in enumerate(text.split("\n"), start=1):
        match = _HEADER.match(line.rstrip())
        if not match:
            body.append(line)
            continue
        close()
        kind, cell_id, en = match.groups()
        if (kind, cell_id) in sections:
            raise ValueError(
                f"{name}:{number}: a second '{kind}: {cell_id}' section "
                f"(the first is on line {sections[(kind, cell_id)].line})"
            )
        current, body = Section(kind, cell_id, en, "", number), []
    close()
    return sections


def _unfence(section: Section, name: str) -> str:
    lines = section.text.split("\n")
    if len(lines) < 2 or lines[0].strip() != "```python" or lines[-1].strip() != "```":
        raise ValueError(
            f"{name}:{section.line}: the code of cell '{section.cell_id}' must sit "
            f"between a '```python' line and a '```' line"
        )
    return "\n".join(lines[1:-1])


def _prose(markdown: str) -> str:
    return _CODE_SPANS.sub(" ", markdown)


def _python(source: str) -> str:
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


def _comments_and_strings(source: str):
    """(comments, strings) of a cell's source, as tokenized text."""
    comments, strings = [], []
    try:
        for token in tokenize.generate_tokens(io.StringIO(_python(source)).readline):
            if token.type == tokenize.COMMENT:
                comments.append(token.string)
            elif token.type == tokenize.STRING or token.type == getattr(
                tokenize, "FSTRING_MIDDLE", -1
            ):
                strings.append(token.string)
    except (tokenize.TokenError, SyntaxError):
        pass
    return comments, strings


def is_compared(cell) -> bool:
    """Whether nbval compares this cell's output (so its printed text must not change)."""
    return notebook_format.CHECK_OUTPUT_TAG in notebook_format.tags(cell)


def needs_translation(cell) -> bool:
    """Whether the cell has English for a reader: markdown with words, or a code cell with
    a comment or docstring in words, a string of prose, or a printed or figure label. Check cells
    are never translated: the grader puts back the English ones."""
    source = cell.get("source", "")
    if cell.get("cell_type") == "markdown":
        return bool(_WORDS.search(_prose(source)))
    if cell.get("cell_type") != "code" or notebook_format.is_check(cell):
        return False  # check cells stay as they are: the grader restamps them
    comments, strings = _comments_and_strings(source)
    if any(_WORDS.search(c) and not c.strip().startswith(_NOT_PROSE_COMMENTS) for c in comments):
        return True
    if any(_PROSE.search(s) for s in strings):
        return True
    return any(_WORDS.search(text) for text in _labels(source))


# Where a short string is text for a reader: what print() shows, and figure and widget labels.
_LABEL_KEYWORDS = {"label", "title", "xlabel", "ylabel", "suptitle", "description"}
_LABEL_METHODS = {
    "set_title",
    "set_xlabel",
    "set_ylabel",
    "suptitle",
    "text",
    "annotate",
    "legend",
    "print",
}


def _labels(source: str) -> list[str]:
    """The literal text of ``print(...)`` arguments and of figure/widget labels."""
    try:
        tree = notebook_format.parse_python(_python(source))
    except SyntaxError:
        return []
    found = []

    def texts(node):
        return [
            n.value
            for n in ast.walk(node)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        ]

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        if name in _LABEL_METHODS:
            for arg in node.args:
                found += texts(arg)
        found += [t for k in node.keywords if k.arg in _LABEL_KEYWORDS for t in texts(k.value)]
    return found


class _Neutral(ast.NodeTransformer):
    """Set aside what a translation may change: docstrings always; with ``strings``, every
    string constant (an f-string keeps its placeholders, in any order)."""

    def __init__(self, strings: bool):
        self.strings = strings

    def _drop_docstring(self, node):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body[0] = ast.Expr(ast.Constant("<docstring>"))
        return node

    def visit_Module(self, node):
        return self._drop_docstring(self.generic_visit(node))

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Module

    def visit_Constant(self, node):
        if self.strings and isinstance(node.value, str):
            return ast.Constant("<text>")
        return node

    def visit_FormattedValue(self, node):
        node.value = self.visit(node.value)  # the format spec is code: left as it is
        return node

    def visit_JoinedStr(self, node):
        if not self.strings:
            return self.generic_visit(node)
        values = sorted(
            (ast.dump(self.visit(v)) for v in node.values if isinstance(v, ast.FormattedValue))
        )
        return ast.Constant("<f-string " + " ".join(values) + ">")


# The mechanical slips of a translation, caught before a reader does.
# Inline code and math; a span may wrap onto the next line of its paragraph.
_SPANS = re.compile(r"``.+?``|`(?:[^`\n]|\n(?![ \t]*\n))+`|\$\$.+?\$\$|\$[^$\n]+\$", re.DOTALL)
_FENCES = re.compile(r"```.*?```", re.DOTALL)
_QUOTED = re.compile(r"“[^”]*”")  # quoted words (a source's own), kept as they are
_HALF_WIDTH = re.compile(
    r"[\u4e00-\u9fff][:;?!]|[:;?!](?=[\u4e00-\u9fff])"
    r"|[\u4e00-\u9fff]\((?=[^)]*\))|\)(?=[\u4e00-\u9fff])"
)
_DOCSTRING = re.compile(r'^[rRbBuU]?("""|\'\'\')')


# A span that may name a translated label: words, not code ("shifts frozen", "with mask").
_LABEL_SPAN = re.compile(r"`([A-Za-z][A-Za-z ,-]*[A-Za-z])`")


def prose_slips(english: str, chinese: str, labels: tuple[str, ...] = ()) -> list[str]:
    """What a translated text lost or mixed by accident: a code or math span of the English
    that is not in the Chinese verbatim (a ``+`` or ``>`` dropped on the way), half-width
    ``:`` ``;`` ``()`` against Chinese characters (outside “quotes”, a source's own words).

    ``labels`` are the English strings that the notebook's Chinese code translated (a
    table's rows, a figure's legend): a span made of words found in one of them names a
    label, which the Chinese names as the Chinese edition prints it."""

    def spans(text):
        return [" ".join(span.split()) for span in _SPANS.findall(_FENCES.sub(" ", text))]

    def names_a_translated_label(span):
        words = _LABEL_SPAN.fullmatch(span)
        if words is None:
            return False
        pattern = r"(?<![A-Za-z])" + re.escape(words.group(1)) + r"(?![A-Za-z])"
        return any(re.search(pattern, label) for label in labels)

    slips = []
    missing = [
        span
        for span in dict.fromkeys(spans(english))
        if span not in spans(chinese) and not names_a_translated_label(span)
    ]
    if missing:
        slips.append(
            "the Chinese lost or changed " + ", ".join(missing[:3]) + " (code and "
            "formulas stay as in the English)"
        )
    for line in _SPANS.sub("x", _QUOTED.sub("“”", _FENCES.sub(" ", chinese))).splitlines():
        if match := _HALF_WIDTH.search(line):
            around = line[max(0, match.start() - 12) : match.end() + 12].strip()
            slips.append(f"half-width punctuation in Chinese text: '{around}' (use ：；（）)")
    return slips


def code_slips(chinese: str) -> list[str]:
    """A docstring left in English in a translated code cell; half-width punctuation
    against Chinese characters in its printed text."""
    _, strings = _comments_and_strings(chinese)
    slips = [
        f"a docstring is still English: {s[:50]!r}..."
        for s in strings
        if _DOCSTRING.match(s) and _PROSE.search(s) and not _CJK.search(s)
    ]
    for s in strings:
        if _CJK.search(s) and (match := _HALF_WIDTH.search(_QUOTED.sub("“”", s))):
            slips.append(
                f"half-width punctuation in Chinese text: "
                f"'{s[max(0, match.start() - 12) : match.end() + 12].strip()}' (use ：；（）)"
            )
    return slips


def _neutral_trees(english: str, chinese: str, *, strings: bool) -> str | list[str]:
    """Both sources' syntax trees with comments, docstrings and (``strings``) the other
    string literals set aside; or why one does not parse."""
    trees = []
    for label, source in (("English", english), ("Chinese", chinese)):
        try:
            tree = notebook_format.parse_python(_python(source))
        except SyntaxError as error:
            return f"the {label} code does not parse: {error.msg} (line {error.lineno})"
        trees.append(ast.dump(_Neutral(strings=strings).visit(tree)))
    return trees


def code_difference(english: str, chinese: str) -> str | None:
    """None if ``chinese`` is ``english`` with only its translatable text changed, else what
    differs (for the message)."""
    trees = _neutral_trees(english, chinese, strings=True)
    if isinstance(trees, str):
        return trees
    if trees[0] == trees[1]:
        return None
    return "its code differs from the English beyond comments, docstrings and strings"


def prints_the_same(english: str, chinese: str) -> bool:
    """Whether the two sources differ at most in comments and docstrings, so that the
    English outputs are the Chinese cell's outputs too."""
    trees = _neutral_trees(english, chinese, strings=False)
    return not isinstance(trees, str) and trees[0] == trees[1]


def translated_strings(english, sections: dict[tuple[str, str], Section]) -> tuple[str, ...]:
    """The string literals of the English code cells that their Chinese sections changed: the
    labels of tables and figures, which the Chinese prose names as the Chinese edition shows
    them."""
    found: list[str] = []
    for cell in english.cells:
        section = sections.get(("cell", cell.get("id")))
        if cell.cell_type != "code" or section is None:
            continue
        try:
            kept = set(_comments_and_strings(_unfence(section, ""))[1])
        except ValueError:
            continue
        found += [s for s in _comments_and_strings(cell.source)[1] if s not in kept]
    return tuple(dict.fromkeys(found))


def translate_notebook(english, sections: dict[tuple[str, str], Section], name: str):
    """The Chinese solution notebook and the list of problems (each naming the cell).

    A cell without text keeps its English source; an exercise's hint is translated too.
    The Chinese notebook keeps each cell's outputs unless a string it prints changed.
    """
    import copy

    nb = copy.deepcopy(english)
    terms = glossary.load()
    labels = translated_strings(english, sections)
    problems = []
    used = set()
    for index, cell in enumerate(nb.cells):
        cell_id = cell.get("id")
        label = f"{name}: {notebook_format.cell_label(cell, index)}"
        wanted = [("cell", cell.source)] if needs_translation(cell) else []
        hint = cell.get("metadata", {}).get("tfcourse", {}).get("hint")
        if hint and notebook_format.is_exercise(cell):
            wanted.append(("hint", hint))
        for kind, english_text in wanted:
            section = sections.get((kind, cell_id))
            what = "its hint" if kind == "hint" else "the cell"
            if section is None:
                problems.append(
                    f"{label}: {what} has no translation (run `tfcourse translate "
                    f"{name}` to add a section)"
                )
                continue
            used.add((kind, cell_id))
            if section.en != fingerprint(english_text):
                problems.append(
                    f"{label}: {what} changed since it was translated (the "
                    f"section says en: {section.en}, the English now has "
                    f"{fingerprint(english_text)}); update the translation"
                )
                continue
            text = section.text
            if kind == "hint" or cell.cell_type == "markdown":
                problems += [
                    f"{label}: the English says '{term.english}'; the Chinese should "
                    f"say {' or '.join(term.chinese)} (docs/glossary.md)"
                    for term in glossary.misses(english_text, text, terms)
                ]
                problems += [f"{label}: {slip}" for slip in prose_slips(english_text, text, labels)]
            if kind == "hint":
                cell.metadata["tfcourse"]["hint"] = text
            elif cell.cell_type == "markdown":
                if not _CJK.search(text):
                    problems.append(f"{label}: the translation has no Chinese")
                cell.source = text
            else:
                try:
                    text = _unfence(section, name + SUFFIX)
                except ValueError as error:
                    problems.append(str(error))
                    continue
                difference = code_difference(cell.source, text)
                if difference:
                    problems.append(f"{label}: {difference}")
                    continue
                problems += [f"{label}: {slip}" for slip in code_slips(text)]
                if not prints_the_same(cell.source, text):
                    # It prints other text now: the English outputs would not match it.
                    cell.outputs, cell.execution_count = [], None
                cell.source = text
    ids = {cell.get("id") for cell in nb.cells}
    for (kind, cell_id), section in sections.items():
        if (kind, cell_id) not in used:
            why = "no cell has that id" if cell_id not in ids else "the cell needs no translation"
            problems.append(
                f"{name}{SUFFIX}:{section.line}: section '{kind}: {cell_id}' is "
                f"not used ({why}); delete it"
            )
    if not any(_SETUP_CALL.search(cell.source) for cell in nb.cells if cell.cell_type == "code"):
        problems.append(
            f"{name}: no cell calls setup_notebook(...), which switches the "
            f"Chinese edition's messages to Chinese"
        )
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = _SETUP_CALL.sub(rf'\1, language="{LANGUAGE}")', cell.source)
    nb.metadata.setdefault("tfcourse", {})["language"] = LANGUAGE
    return nb, problems


def missing_sections(english, sections: dict[tuple[str, str], Section]) -> tuple[str, list[str]]:
    """``(new, stale)``: the sections to append to a twin file for every text without a
    translation (the English as the text to replace), and a line per stale section."""
    new, stale = [], []
    for cell in english.cells:
        cell_id = cell.get("id")
        wanted = [("cell", cell.source)] if needs_translation(cell) else []
        hint = cell.get("metadata", {}).get("tfcourse", {}).get("hint")
        if hint and notebook_format.is_exercise(cell):
            wanted.append(("hint", hint))
        for kind, text in wanted:
            section = sections.get((kind, cell_id))
            if section is None:
                body = (
                    f"```python\n{text}\n```"
                    if kind == "cell" and cell.cell_type == "code"
                    else text
                )
                new.append(f"<!-- {kind}: {cell_id} · en: {fingerprint(text)} -->\n{body}\n")
            elif section.en != fingerprint(text):
                stale.append(
                    f"line {section.line}: '{kind}: {cell_id}' is stale: translate the "
                    f"English again and set its header to en: {fingerprint(text)}"
                )
    return "\n".join(new), stale


def check_notebook(solution: Path) -> tuple[object, list[str]]:
    """The Chinese edition of ``solution`` and its problems (none when it is complete)."""
    english = notebook_format.read_notebook(solution)
    path = twin_path(solution)
    if not path.exists():
        return None, [
            f"{notebook_format.shown(solution)}: no translation file "
            f"{notebook_format.shown(path)} (run `tfcourse translate {solution.stem}`)"
        ]
    try:
        sections = parse_twin(path.read_text(encoding="utf-8"), notebook_format.shown(path))
    except ValueError as error:
        return None, [str(error)]
    return translate_notebook(english, sections, solution.stem)


def add_arguments(parser) -> None:
    parser.add_argument(
        "notebooks",
        nargs="+",
        metavar="NOTEBOOK",
        help="solution notebooks to translate (a path or a name like 03_norms)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; list every missing, stale or wrong translation",
    )


def run(args) -> int:
    import sys

    solutions = notebook_format.course_root() / "solutions"
    status = 0
    for name in args.notebooks:
        solution = Path(name) if Path(name).exists() else solutions / f"{Path(name).stem}.ipynb"
        if not solution.exists():
            print(f"error: no solution notebook {name!r}", file=sys.stderr)
            return 2
        path = twin_path(solution)
        if args.check:
            _, problems = check_notebook(solution)
            for problem in problems:
                print(f"error: {problem}", file=sys.stderr)
            print(
                f"{notebook_format.shown(path)}: "
                + ("complete and up to date" if not problems else f"{len(problems)} problems")
            )
            status = max(status, 1 if problems else 0)
            continue
        existing = path.read_text(encoding="utf-8") if path.exists() else ""
        try:
            sections = parse_twin(existing, notebook_format.shown(path))
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        new, stale = missing_sections(notebook_format.read_notebook(solution), sections)
        if new:
            path.write_text(
                existing.rstrip("\n") + ("\n\n" if existing.strip() else "") + new, encoding="utf-8"
            )
        count = new.count("<!-- ")
        print(
            f"{notebook_format.shown(path)}: {count} sections added with the English to "
            f"translate, {len(stale)} stale"
        )
        for line in stale:
            print(f"  {line}")
    return status
