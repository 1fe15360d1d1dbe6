"""Every text file the package reads or writes names its encoding.

Without one, Python uses the locale's: cp1252 or GBK on Windows, where a Chinese notebook,
report or message would be garbled or raise UnicodeEncodeError. The scan reads the source
(a syntax tree, so comments and strings do not count) and lists each call that would.
"""

from __future__ import annotations

import ast

from helpers import ROOT

# Where the encoding goes when it is passed by position: Path.read_text(encoding),
# Path.write_text(data, encoding), open(file, mode, buffering, encoding).
POSITION = {"read_text": 0, "write_text": 1, "open": 3}
SUBPROCESS = {"run", "Popen", "check_output"}


def _constant(node: ast.expr | None) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def unnamed_encodings(source: str) -> list[tuple[int, str]]:
    """(line, call) for each text-mode call in ``source`` that leaves the encoding to the
    locale: ``open`` without ``b`` in its mode, ``read_text``, ``write_text``, and
    ``subprocess`` calls with ``text=True``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        function = node.func
        name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
        if "encoding" in keywords:
            continue
        if name in ("read_text", "write_text") and isinstance(function, ast.Attribute):
            if len(node.args) <= POSITION[name]:
                found.append((node.lineno, name))
        elif name == "open" and (
            isinstance(function, ast.Name)
            or (isinstance(function.value, ast.Name) and function.value.id == "io")
        ):
            mode = node.args[1] if len(node.args) > 1 else keywords.get("mode")
            if "b" not in str(_constant(mode) or "") and len(node.args) <= POSITION["open"]:
                found.append((node.lineno, name))
        elif name in SUBPROCESS and (
            _constant(keywords.get("text")) or _constant(keywords.get("universal_newlines"))
        ):
            found.append((node.lineno, f"{name}(text=True)"))
    return found


def test_the_scan_finds_each_kind_of_call():
    source = (
        "open('a')\nopen('a', 'w')\nopen('a', 'rb')\nio.open('a')\nopen('a', encoding='utf-8')\n"
        "p.read_text()\np.read_text('utf-8')\np.write_text('x')\np.write_text('x', 'utf-8')\n"
        "subprocess.run(['x'], text=True)\nsubprocess.run(['x'], text=True, encoding='utf-8')\n"
        "subprocess.run(['x'], capture_output=True)\nfile.open()\n"
    )
    assert unnamed_encodings(source) == [
        (1, "open"),
        (2, "open"),
        (4, "open"),
        (6, "read_text"),
        (8, "write_text"),
        (10, "run(text=True)"),
    ]


def test_every_text_file_of_the_package_and_scripts_names_its_encoding():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {call}"
        for folder in ("tfcourse", "scripts")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line, call in unnamed_encodings(path.read_text(encoding="utf-8"))
    ]
    assert not found, "pass encoding='utf-8' (the locale's is cp1252 or GBK on Windows):\n" + (
        "\n".join(found)
    )
