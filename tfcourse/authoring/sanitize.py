"""Machine-specific text in notebook outputs: one list of rewrites, used everywhere.

The same patterns serve three places, so they can never disagree:

- ``tfcourse execute`` rewrites stored solution outputs with them (no machine paths,
  no memory addresses in committed files);
- ``tests/nbval_sanitize.cfg`` is this list in nbval's format (a test keeps it in sync),
  so ``pytest --nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg`` compares the
  stored and the fresh outputs the same way;
- ``find_machine_paths`` flags what no rewrite may leave behind (the notebook generator
  refuses such a notebook).

Every rewrite is idempotent (``sanitize(sanitize(s)) == sanitize(s)``): the stored output
has already been rewritten once when nbval rewrites it again.
"""

from __future__ import annotations

import re

# One path component: letters, digits, and the punctuation file names commonly use.
_PART = r"[\w.+@-]+"

# (regex, replacement) in the order they are applied.
SANITIZE_PATTERNS: list[tuple[str, str]] = [
    # An absolute path right after an ANSI colour code (tracebacks colour file names):
    # keep the colour code and the file name, drop the directories.
    (rf"(\x1b\[[0-9;]*m)(?:[A-Za-z]:)?(?:[/\\]{_PART})+(?=[/\\]{_PART})", r"\1<path>"),
    # Any other absolute path (POSIX or Windows drive): keep only its last component, so
    # ".../site-packages/torch/nn/functional.py:12: UserWarning" stays readable. The
    # look-behind skips relative paths ("a/b"), fractions ("6/6"), URLs ("https://x/y")
    # and already rewritten text ("<path>/x").
    (rf"(?<![\w.~<>/:\\-])(?:[A-Za-z]:)?(?:[/\\]{_PART})+(?=[/\\]{_PART})", "<path>"),
    # Object reprs carry memory addresses ("<Foo object at 0x7f3a...>").
    (r"(?<![0-9A-Za-z_])0x[0-9a-fA-F]{6,}", "0x<address>"),
]

_COMPILED = [(re.compile(regex), replacement) for regex, replacement in SANITIZE_PATTERNS]

# Paths that identify one machine or user. Checked after sanitizing, so a hit means the
# text is in a source cell or survived the rewrites (e.g. a relative-looking path).
# The look-behind skips URLs ("example.com/home/x") and "~/tmp/...".
MACHINE_PATH = re.compile(
    r"(?<![\w.~-])(?:/(?:work|root|tmp|scratch|mnt|private|var/folders)/"
    r"|/(?:home|Users)/[\w.-]+"
    r"|[A-Za-z]:\\(?:Users|Documents and Settings)\\)"
)


def sanitize(text: str) -> str:
    """Rewrite machine-specific parts of ``text`` (paths, memory addresses)."""
    if not isinstance(text, str):
        raise TypeError(f"sanitize expects str, got {type(text).__name__}")
    for pattern, replacement in _COMPILED:
        text = pattern.sub(replacement, text)
    return text


def find_machine_paths(text: str) -> list[str]:
    """Return the machine-specific paths found in ``text`` (empty list if none)."""
    return [match.group(0) for match in MACHINE_PATH.finditer(text)]


def nbval_config() -> str:
    """``SANITIZE_PATTERNS`` in the format of nbval's ``--nbval-sanitize-with`` file."""
    lines = [
        "# Generated from tfcourse/authoring/sanitize.py (SANITIZE_PATTERNS); keep them in sync:",
        "#   python -c 'from tfcourse.course import sanitize; "
        'print(sanitize.nbval_config(), end="")\' \\',
        "#     > tests/nbval_sanitize.cfg",
        "",
    ]
    for index, (regex, replacement) in enumerate(SANITIZE_PATTERNS):
        # nbval reads "regex: ..." / "replace: ..." line pairs; "[name]" headers are comments
        # to it but make the file readable.
        lines += [f"[rule{index}]", f"regex: {regex}", f"replace: {replacement}", ""]
    return "\n".join(lines)
