"""``tfcourse autograder NOTEBOOK``: build Gradescope's autograder zip for one course notebook.

Gradescope wants a zip with ``setup.sh`` and ``run_autograder`` at its top level
(https://gradescope-autograders.readthedocs.io/en/latest/specs/). It unpacks the zip in
``/autograder/source`` and runs ``setup.sh`` once, as root, to build its image; then, for
each submission, it runs ``run_autograder`` with the submission in ``/autograder/submission``
and reads ``/autograder/results/results.json``. The zip built here holds:

- ``setup.sh``: Python (from apt, if the image lacks it), a virtual environment in
  ``/autograder/venv``, PyTorch's CPU build, then the bundled ``tfcourse``;
- ``run_autograder``: picks the submitted notebook, runs ``tfcourse grade --against NAME
  --solutions source/solutions --gradescope results/results.json`` on it (the same grader as
  on the teacher's machine), and always leaves a valid ``results.json``: a submission that
  cannot be graded scores 0 with a message that says why;
- the package source from this checkout (``tfcourse/``, ``pyproject.toml``, ``README.md``)
  and ``solutions/NAME.ipynb`` with its Chinese edition ``solutions/zh/NAME.ipynb`` (a
  Chinese submission is graded against it), the only answer keys the bundle needs.

NAME must be one of the course's notebooks (a ``solutions/*.ipynb`` stem); a path is
refused, so nothing outside the course's ``solutions/`` can end up in the zip. The zip is
reproducible: sorted entries, fixed timestamps.
"""

from __future__ import annotations

import argparse
import math
import re
import shlex
import sys
import zipfile
from pathlib import Path

from ..course import notebook_format
from ..files import replaced_atomically
from ..language import say
from .secret import load_secret

NAME = re.compile(r"[0-9A-Za-z][0-9A-Za-z_.-]*")  # also keeps the name safe in a shell script
# The same torch as `make setup` installs (the Makefile's TORCH), from PyTorch's CPU index:
# Gradescope's machines have no GPU, and PyPI's Linux torch is the much larger CUDA build.
TORCH = "torch==2.13.0"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PACKAGE_FILES = ("pyproject.toml", "README.md")
EXECUTABLE = 0o100755 << 16  # zip external_attr: a regular file, rwxr-xr-x
REGULAR = 0o100644 << 16
SECRET = 0o100600 << 16  # the grading secret: readable by the grader's user only
STAMP = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip can hold: same bytes on every build

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, on its Ubuntu image, with this bundle unpacked beside
# it (/autograder/source). It installs a virtual environment in /autograder/venv holding
# PyTorch's CPU build and the bundled tfcourse; run_autograder uses it.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Debian and Ubuntu ship venv's pip (ensurepip) in python3-venv, not with python3 itself.
if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
        python3 python3-venv python3-pip
fi
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "setup.sh: tfcourse needs Python 3.10 or newer; this image has $(python3 --version)" >&2
    exit 1
fi
# bubblewrap: the sandbox every learner's code runs in while it is graded. Where it cannot
# run (a container without user namespaces), each worker runs as a fresh unprivileged user
# instead (see the end of this script); the report says which.
if ! command -v bwrap >/dev/null 2>&1; then
    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
        bubblewrap; } || echo "setup.sh: could not install bubblewrap" >&2
fi
python3 -m venv "$ROOT/venv"
PY="$ROOT/venv/bin/python"
"$PY" -m pip install --upgrade pip
# torch first, so the package's torch range is already met and pip pulls no CUDA build.
"$PY" -m pip install __TORCH__ --index-url __CPU_INDEX__ || {
    echo "setup.sh: PyTorch's CPU index failed; installing torch from the default index" >&2
    "$PY" -m pip install __TORCH__
}
"$PY" -m pip install "$SOURCE"
"$ROOT/venv/bin/tfcourse" --version
# Where bubblewrap cannot run (no user namespaces), `tfcourse grade` runs each worker as a
# fresh unprivileged user, and refuses to start if that user could read the grader's
# files: the bundle (solutions, secret) and the installed package (its references).
PACKAGE_DIR="$("$PY" -c 'import os, tfcourse; print(os.path.dirname(tfcourse.__file__))')"
chmod -R go-rwx "$SOURCE" "$PACKAGE_DIR"
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this for every submission. It grades the submitted notebook against the
# bundled solution of __NAME__ with `tfcourse grade` and always leaves a valid results.json:
# a submission that cannot be graded scores 0, with a message that says why.
# AUTOGRADER_ROOT (default /autograder) lets tests run it in a temporary folder.
set -u
NAME=__NAME__
ROOT="${AUTOGRADER_ROOT:-/autograder}"
RESULTS="$ROOT/results/results.json"
# setup.sh's environment when there is one; else the `tfcourse` on PATH.
if [ -x "$ROOT/venv/bin/tfcourse" ]; then PATH="$ROOT/venv/bin:$PATH"; fi
PYTHON="$(command -v python3 || command -v python || true)"
mkdir -p "$ROOT/results"
rm -f "$RESULTS"

# "$@": why, in words (joined by spaces). Writes a results.json worth 0 points, then stops.
fail() {
    local why="$*"
    echo "autograder: $why"
    if [ -z "$PYTHON" ] || ! "$PYTHON" - "$why" "$RESULTS" <<'PY'
import json, sys
result = {"score": 0.0, "output": sys.argv[1], "output_format": "text",
          "stdout_visibility": "visible", "tests": []}
with open(sys.argv[2], "w", encoding="utf-8") as out:
    json.dump(result, out, indent=2, ensure_ascii=False)
PY
    then
        echo '{"score": 0.0, "output": "The submission could not be graded.", "tests": []}' \\
            > "$RESULTS"
    fi
    exit 0
}

found=()
if [ -d "$ROOT/submission" ]; then
    while IFS= read -r -d '' file; do found+=("$file"); done < <(
        find "$ROOT/submission" -type f -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' \\
            -print0 | sort -z)
fi
[ "${#found[@]}" -gt 0 ] || fail "No notebook (.ipynb file) was found in the submission." \\
    "Submit your $NAME.ipynb."
chosen="${found[0]}"
if [ "${#found[@]}" -gt 1 ]; then
    # Several notebooks: the one named $NAME.ipynb, else the only one whose name holds $NAME.
    matching=()
    for file in "${found[@]}"; do
        case "${file##*/}" in
            "$NAME.ipynb") matching=("$file"); break ;;
            *"$NAME"*) matching+=("$file") ;;
        esac
    done
    [ "${#matching[@]}" -eq 1 ] || fail "The submission holds ${#found[@]} notebooks and" \\
        "${#matching[@]} of them have $NAME in their name: submit only your $NAME.ipynb."
    chosen="${matching[0]}"
fi
command -v tfcourse >/dev/null ||
    fail "The autograder is broken: tfcourse is not installed (did setup.sh fail?)."

# The learner's cases come from the bundle's secret and the submission's id (Gradescope's
# submission_metadata.json), so nothing recorded at home can be replayed.
SECRET="$ROOT/source/grading-secret"
chmod 600 "$SECRET" 2>/dev/null || fail "The autograder is broken: its grading secret is missing."
IDENTITY=""
if [ -n "$PYTHON" ] && [ -f "$ROOT/submission_metadata.json" ]; then
    IDENTITY="$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["id"])' \\
        "$ROOT/submission_metadata.json" 2>/dev/null)" || IDENTITY=""
fi

# The submission, its metadata and the results: root's only (see setup.sh).
chmod -R go-rwx "$ROOT/submission" "$ROOT/results" 2>/dev/null
chmod go-rwx "$ROOT/submission_metadata.json" 2>/dev/null

# Grade a copy in a folder of its own; its name stays the learner's, shown in the report.
WORK="$(mktemp -d)" || fail "The autograder could not create a work folder."
trap 'rm -rf "$WORK"' EXIT
base="${chosen##*/}"
cp -- "$chosen" "$WORK/$base" || fail "The autograder could not copy $base."
cd "$WORK" || fail "The autograder could not enter its work folder."
tfcourse grade "./$base" --against "$NAME" --solutions "$ROOT/source/solutions" \\
    --timeout __TIMEOUT__ --gradescope "$RESULTS" --secret "$SECRET" \\
    ${IDENTITY:+--identity "$IDENTITY"} __UNSEALED__
status=$?
# 0: all passed, 1: some failed; either way results.json must be there and readable.
if [ -z "$PYTHON" ]; then
    [ -s "$RESULTS" ] && exit 0
elif "$PYTHON" -c 'import json, sys; json.load(open(sys.argv[1], encoding="utf-8"))["tests"]' \\
        "$RESULTS" 2>/dev/null; then
    exit 0
fi
fail "The grader stopped (exit status $status) before writing its results;" \\
    "the autograder output says why."
"""


def course_notebook(solutions: Path, name: str) -> Path:
    """``solutions/NAME.ipynb`` for a course notebook name such as ``03_norms``.

    Raises ``ValueError`` for anything else: a path, an unknown name, a name a shell script
    could not carry as it is.
    """
    stem = name.removesuffix(".ipynb")
    names = sorted(p.stem for p in solutions.glob("*.ipynb") if p.is_file())
    if not NAME.fullmatch(stem) or stem not in names:
        shown, listed = notebook_format.shown(solutions), ", ".join(names)
        raise ValueError(
            say(
                f"{name!r} is not one of the course's notebooks (in {shown}: {listed or 'none'})",
                f"{name!r} 不是课程中的 notebook（{shown} 里有：{listed or '无'}）",
            )
        )
    return solutions / f"{stem}.ipynb"


def _package_files(root: Path) -> list[tuple[str, Path]]:
    """(name in the zip, file) for the package source: what `pip install` needs to build it."""
    missing = [name for name in (*PACKAGE_FILES, "tfcourse") if not (root / name).exists()]
    if missing:
        shown, listed = notebook_format.shown(root), ", ".join(missing)
        raise ValueError(
            say(
                f"{shown} is not a tfcourse checkout: {listed} missing",
                f"{shown} 不是 tfcourse 的代码仓库：缺少 {listed}",
            )
        )
    files = [(name, root / name) for name in PACKAGE_FILES]
    for path in sorted((root / "tfcourse").rglob("*")):
        relative = path.relative_to(root)
        if path.is_file() and "__pycache__" not in relative.parts and path.suffix != ".pyc":
            files.append((relative.as_posix(), path))
    return files


def build_bundle(
    root: str | Path,
    name: str,
    out: str | Path,
    *,
    timeout: float = 120,
    secret: bytes,
    unsealed: bool = False,
) -> Path:
    """Write the autograder zip for course notebook ``name`` of the checkout ``root`` to
    ``out`` and return ``out``. ``secret``: the grading secret that draws each learner's
    cases (the teacher's, ``secret.load_secret``); ``unsealed``: grade without the sandbox
    where Gradescope cannot run it. Raises ``ValueError`` for a bad name or checkout."""
    root, out = Path(root), Path(out)
    solution = course_notebook(root / "solutions", name)
    scripts = {
        "setup.sh": SETUP_SH.replace("__TORCH__", shlex.quote(TORCH)).replace(
            "__CPU_INDEX__", shlex.quote(CPU_INDEX)
        ),
        "run_autograder": RUN_AUTOGRADER.replace("__NAME__", shlex.quote(solution.stem))
        .replace("__TIMEOUT__", f"{timeout:g}")
        .replace("__UNSEALED__", "--unsealed" if unsealed else ""),
    }
    files = [*_package_files(root), (f"solutions/{solution.name}", solution)]
    translated = solution.parent / "zh" / solution.name  # a Chinese submission's answer key
    if translated.is_file():
        files.append((f"solutions/zh/{solution.name}", translated))
    # A failed build leaves no half-written zip.
    with (
        replaced_atomically(out, prefix=".autograder-", mode=0o644) as temporary,
        zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as bundle,
    ):
        for entry, text in scripts.items():
            _add(bundle, entry, text.encode("utf-8"), EXECUTABLE)
        for entry, path in files:
            _add(bundle, entry, path.read_bytes(), REGULAR)
        _add(bundle, "grading-secret", secret, SECRET)
    return out


def _add(bundle: zipfile.ZipFile, entry: str, data: bytes, mode: int) -> None:
    info = zipfile.ZipInfo(entry, date_time=STAMP)
    info.compress_type, info.external_attr = zipfile.ZIP_DEFLATED, mode
    bundle.writestr(info, data)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "notebook",
        metavar="NOTEBOOK",
        help=say(
            "the course notebook to grade, by name (e.g. 03_norms)",
            "要评分的课程 notebook 的名字（例如 03_norms）",
        ),
    )
    parser.add_argument(
        "--out",
        metavar="FILE.zip",
        help=say(
            "where to write the zip (default: NOTEBOOK-autograder.zip here)",
            "zip 包写到哪里（默认：当前目录下的 NOTEBOOK-autograder.zip）",
        ),
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=120,
        metavar="SECONDS",
        help=say(
            "per-cell time limit on Gradescope (default: 120)",
            "在 Gradescope 上每个单元格的时间上限（默认：120）",
        ),
    )
    parser.add_argument(
        "--unsealed",
        action="store_true",
        help=say(
            "grade without the sandbox where bubblewrap cannot run on "
            "Gradescope (every test then says UNSEALED)",
            "Gradescope 上无法运行 bubblewrap 时不用沙箱评分（此时每项测试都会注明 UNSEALED）",
        ),
    )


def run(args: argparse.Namespace) -> int:
    root = notebook_format.course_root()
    out = Path(args.out or f"{args.notebook.removesuffix('.ipynb')}-autograder.zip")
    try:
        solution = course_notebook(root / "solutions", args.notebook)
        if not (math.isfinite(args.timeout) and args.timeout > 0):
            raise ValueError(
                say(
                    f"--timeout must be a number of seconds > 0, got {args.timeout:g}",
                    f"--timeout 必须是大于 0 的秒数，实际是 {args.timeout:g}",
                )
            )
        if out.is_dir():
            raise ValueError(
                say(
                    f"--out {out}: is a folder; name a file",
                    f"--out {out}：这是文件夹，请给出文件名",
                )
            )
        if not out.parent.resolve().is_dir():
            raise ValueError(
                say(
                    f"--out {out}: the folder {out.parent} does not exist",
                    f"--out {out}：文件夹 {out.parent} 不存在",
                )
            )
        build_bundle(
            root,
            solution.stem,
            out,
            timeout=args.timeout,
            secret=load_secret(),
            unsealed=args.unsealed,
        )
    except (ValueError, OSError) as error:
        print(say(f"error: {error}", f"错误：{error}"), file=sys.stderr)
        return 2
    shown = notebook_format.shown(out)
    print(
        say(
            f"wrote {shown}: upload it as the autograder of a Gradescope "
            f"programming assignment for {solution.stem} (see docs/grading.md)",
            f"已写入 {shown}：把它上传为 Gradescope 编程作业 {solution.stem} 的自动评分器"
            f"（见 docs/grading.md）",
        )
    )
    return 0
