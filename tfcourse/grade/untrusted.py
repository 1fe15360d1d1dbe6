"""Learner text made safe to show: in a terminal, a spreadsheet, a JSON file, a web page.

Everything a submission controls reaches the grade reports: what its cells printed or raised,
its notes, even its file name. Shown raw, an escape sequence in an exception message can
erase a report line and draw a fake "score: 2/2" in its place, a bidi override can make a
teacher read "0/2" as "2/0", and a file name such as ``=HYPERLINK(...).ipynb`` becomes a live
formula in the CSV. ``plain`` turns such text into what it looks like: visible characters,
newlines and tabs, nothing that moves the cursor, reorders or hides text; ``csv_text``
keeps a spreadsheet from reading a cell as a formula.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from ..language import say

# Enough for a long traceback line or a printed table; the head is what explains a failure.
LIMIT = 4000
# The marker that says how much was cut needs this much room (see _marker).
MIN_LIMIT = 64

# Escape sequences go as a whole, not just their ESC: "\x1b[2K" without the ESC would still
# leave "[2K" behind, and an unterminated string (OSC, DCS...) would swallow what follows it
# in a terminal, so it is cut to its end here too. 8-bit C1 forms (CSI U+009B...) as well.
_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x18\x1a\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
_CSI = r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
_OTHER_ESCAPE = r"\x1b[ -/]*[0-~]"  # ESC 7, ESC M (cursor up), ESC c (reset), ESC ( B ...
_ESCAPES = re.compile(f"{_STRING}|{_CSI}|{_OTHER_ESCAPE}")
# Anything but printable ASCII, newline and tab: looked at one character at a time.
_UNUSUAL = re.compile(r"[^\t\n -~]")
# Joiners shape emoji and some scripts (Persian, Indic); they neither hide nor move text.
_JOINERS = {"\u200c", "\u200d"}
# Spreadsheets (Excel, LibreOffice, Google Sheets) read a cell that starts with one of these
# as a formula. Full-width forms too: some spreadsheets fold them to ASCII.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "＝", "＋", "－", "＠")


def plain(text: str, limit: int | None = LIMIT, *, one_line: bool = False) -> str:
    """``text`` without anything that could act on a terminal or reorder what is shown.

    Removed: ANSI escape sequences (CSI, OSC, DCS... as a whole), the other control
    characters (C0 but newline and tab, DEL, C1), and Unicode format characters (bidi
    overrides and isolates U+202A-U+202E, U+2066-U+2069, zero-width and invisible
    characters, tag characters), except the zero-width joiners. A carriage return and the
    Unicode line and paragraph separators become newlines; a lone surrogate (it could not
    be written as UTF-8) becomes U+FFFD. With ``one_line`` newlines and tabs are shown as
    ``\\n`` and ``\\t``, for a name that must stay on its line.

    At most ``limit`` characters come back (``None``: no limit): the head of the text and a
    note of how many characters were cut. ``plain(plain(s)) == plain(s)``.
    """
    if not isinstance(text, str):
        raise TypeError(
            say(
                f"plain expects str, got {type(text).__name__}",
                f"plain 需要 str，实际是 {type(text).__name__}",
            )
        )
    if limit is not None and (
        isinstance(limit, bool) or not isinstance(limit, int) or limit < MIN_LIMIT
    ):
        raise ValueError(
            say(
                f"limit must be None or a whole number >= {MIN_LIMIT}, got {limit!r}",
                f"limit 必须是 None 或 >= {MIN_LIMIT} 的整数，实际是 {limit!r}",
            )
        )
    # Only a bounded head is cleaned, so a submission that prints gigabytes costs nothing;
    # escape sequences may make the raw head much longer than what it shows.
    raw = text if limit is None else text[: 4 * limit + 1024]
    cleaned = _ESCAPES.sub("", raw).replace("\r\n", "\n").replace("\r", "\n")
    cleaned = _UNUSUAL.sub(lambda match: _shown(match.group()), cleaned)
    if one_line:
        cleaned = cleaned.replace("\n", "\\n").replace("\t", "\\t")
    beyond = len(text) - len(raw)
    if limit is None or (len(cleaned) <= limit and not beyond):
        return cleaned
    # Room for the longest marker this text could need (one_line can double its length), so
    # the result fits in limit and a second pass leaves it alone.
    head = cleaned[: limit - len(_marker(2 * len(text)))]
    return head + _marker(len(cleaned) - len(head) + beyond)


def _marker(cut: int) -> str:
    return say(f" … [{cut} more characters cut]", f"……［另有 {cut} 个字符被截去］")


@functools.lru_cache(maxsize=4096)
def _shown(char: str) -> str:
    """What one character that is not printable ASCII becomes."""
    category = unicodedata.category(char)
    if category == "Cc":  # C0 (but newline and tab, kept by _UNUSUAL), DEL, C1
        return ""
    if category == "Cf":
        return char if char in _JOINERS else ""
    if category == "Cs":
        return "\ufffd"
    if category in ("Zl", "Zp"):  # U+2028, U+2029: some viewers break the line there
        return "\n"
    return char


def clean_dict(data: dict, limit: int | None = LIMIT) -> dict:
    """A copy of ``data`` with every string value, in nested dicts, lists and tuples too,
    passed through ``plain(value, limit)``; keys and other values as they are."""
    if not isinstance(data, dict):
        raise TypeError(
            say(
                f"clean_dict expects a dict, got {type(data).__name__}",
                f"clean_dict 需要 dict，实际是 {type(data).__name__}",
            )
        )
    return _clean(data, limit)


def _clean(value, limit):
    if isinstance(value, str):
        return plain(value, limit)
    if isinstance(value, dict):
        return {key: _clean(item, limit) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_clean(item, limit) for item in value)
    return value


def csv_text(text: str) -> str:
    """A text cell a spreadsheet shows as text: one that starts with ``=``, ``+``, ``-``,
    ``@``, a tab or a line break gets a leading ``'`` (OWASP's advice for CSV injection).
    Only for text: a number we wrote ourselves must stay a number."""
    if not isinstance(text, str):
        raise TypeError(
            say(
                f"csv_text expects str, got {type(text).__name__}",
                f"csv_text 需要 str，实际是 {type(text).__name__}",
            )
        )
    return "'" + text if text.startswith(_FORMULA_START) else text
