"""The course's one glossary (``docs/glossary.md``) as data, and the rule it enforces:
wherever an English text uses a glossary term, its Chinese twin uses the glossary's term.

A row ``| temperature / top-k sampling | 温度 / top-k 采样 | ... |`` gives two terms when both
sides split into as many parts. The Chinese term is the text before a bracket
(``层归一化（LayerNorm）`` → ``层归一化``); the bracket's content is accepted too (``LayerNorm``),
unless it starts with 又称 ("also called"), which names a term *not* to use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_ROW = re.compile(r"^\|([^|]+)\|([^|]+)\|[^|]*\|\s*$")
_BRACKET = re.compile(r"^(?P<main>[^（(]+?)\s*[（(](?P<inner>[^）)]+)[）)]\s*$")

# English words too common to mean the glossary's term wherever they appear.
GENERIC = {
    "query",
    "key",
    "value",
    "token",
    "vocabulary",
    "stub",
    "checkpoint",
    "restamp",
    "encoder layer",
    "gradient norm",
    "GELU",
}


@dataclass(frozen=True)
class Term:
    english: str
    chinese: tuple[str, ...]  # accepted Chinese forms, the preferred one first

    def used_in(self, english_text: str) -> bool:
        pattern = r"(?<![\w-])" + re.escape(self.english) + r"(?:s|es)?(?![\w-])"
        return re.search(pattern, english_text, re.IGNORECASE) is not None

    def kept_in(self, chinese_text: str) -> bool:
        squeezed = re.sub(r"\s+", "", chinese_text).lower()  # "Transformer 块" = "Transformer块"
        return any(re.sub(r"\s+", "", form).lower() in squeezed for form in self.chinese)


def _chinese_forms(cell: str) -> tuple[str, ...]:
    match = _BRACKET.match(cell.strip())
    if not match:
        return (cell.strip(),)
    inner = match.group("inner").strip()
    return (match.group("main").strip(),) + (() if inner.startswith("又称") else (inner,))


def load(path: str | Path | None = None) -> list[Term]:
    """Every term of the glossary's tables (header rows skipped); none when the course's
    ``docs/`` is not there (an installed package without its checkout)."""
    path = Path(path) if path else Path(__file__).resolve().parents[2] / "docs" / "glossary.md"
    if not path.is_file():
        return []
    terms = []
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if not match or set(match.group(1).strip()) <= {"-"} or match.group(1).strip() == "English":
            continue
        english = re.sub(r"\s*\([^)]*\)", "", match.group(1)).strip()
        english_parts = [p.strip() for p in english.split(" / ")]
        chinese_parts = [p.strip() for p in re.split(r"\s*/\s*", match.group(2).strip())]
        if len(english_parts) != len(chinese_parts):
            english_parts, chinese_parts = [english], [match.group(2).strip()]
        for en, zh in zip(english_parts, chinese_parts, strict=True):
            if en not in GENERIC:
                terms.append(Term(en, _chinese_forms(zh)))
    return terms


def misses(english_text: str, chinese_text: str, terms: list[Term]) -> list[Term]:
    """The glossary terms the English uses and the Chinese does not."""
    return [t for t in terms if t.used_in(english_text) and not t.kept_in(chinese_text)]
