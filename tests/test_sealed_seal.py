"""The sealed copy of ``tfcourse``: hidden references are stubs, the checks are no-ops.

The decisive test imports the sealed copy in a separate ``python -I`` process, as the
worker does, and tries every way named in the design to reach a hidden reference.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tfcourse.grade.sealed import seal

REAL = Path(seal.__file__).resolve().parents[2]
# A line of the real LayerNorm's body: it must not be anywhere in the sealed copy.
LAYERNORM_LINE = "var = (x - mean).pow(2).mean(dim=-1, keepdim=True)"


@pytest.fixture(scope="module")
def sealed(tmp_path_factory):
    dest = tmp_path_factory.mktemp("sealed")
    start = time.perf_counter()
    seal.build_sealed_package(dest, {"LayerNorm", "causal_mask"})
    print(f"sealed package built in {1000 * (time.perf_counter() - start):.0f} ms")
    return dest


def run_sealed(dest: Path, code: str) -> dict:
    """Run ``code`` in ``python -I`` with ``dest`` first on ``sys.path``; it fills ``out``."""
    program = (
        f"import json, sys\nsys.path.insert(0, {str(dest)!r})\nout = {{}}\n"
        + textwrap.dedent(code)
        + "\nprint(json.dumps(out))\n"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", program],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_worker_sees_the_sealed_package(sealed):
    out = run_sealed(
        sealed,
        """
        def attempt(name, call):
            try:
                value = call()
            except Exception as error:
                out[name] = [type(error).__name__, str(error)]
            else:
                out[name] = ["ok", repr(value)[:80]]

        import tfcourse as tc
        out["file"] = tc.__file__
        attempt("rmsnorm", lambda: tc.RMSNorm(8))
        attempt("layernorm", lambda: tc.LayerNorm(8))
        attempt("causal_mask", lambda: tc.causal_mask(4))
        from tfcourse.nn.norms import LayerNorm
        attempt("module_layernorm", lambda: LayerNorm(8))
        attempt("make_norm", lambda: type(tc.make_norm("layernorm", 8, 1e-5)))
        attempt("make_norm_rms", lambda: type(tc.make_norm("rmsnorm", 8, 1e-6)).__name__)
        from tfcourse.checks import check_layernorm
        attempt("check", lambda: check_layernorm(object))
        from tfcourse.checks import *# noqa: F403
        out["star"] = sorted(name for name in dir() if name.startswith("check_"))
        attempt("submodule", lambda: __import__("tfcourse.checks.norms"))
        attempt("harness", lambda: __import__("tfcourse.checks._harness"))
        import tfcourse.checks
        attempt("not_a_check", lambda: tfcourse.checks.reference)
        out["modules"] = sorted(name for name in sys.modules if name.startswith("tfcourse"))
        out["real_imported"] = [m.__file__ for m in list(sys.modules.values())
                                if getattr(m, "__file__", None)
                                and m.__name__.startswith("tfcourse")
                                and not m.__file__.startswith(sys.path[0])]
    """,
    )
    assert Path(out["file"]).resolve().is_relative_to(sealed.resolve())
    assert not out["real_imported"]
    assert out["rmsnorm"][0] == "ok"
    for name in ("layernorm", "causal_mask", "module_layernorm", "make_norm"):
        kind, message = out[name]
        assert kind == "RuntimeError" and message.startswith("sealed:"), (name, out[name])
    assert "LayerNorm" in out["layernorm"][1] and "causal_mask" in out["causal_mask"][1]
    assert out["make_norm_rms"] == ["ok", "'RMSNorm'"]
    assert out["check"] == ["ok", "None"]
    assert "check_layernorm" in out["star"] and "check_gpt" in out["star"]
    assert out["submodule"][0] == "ModuleNotFoundError"
    assert out["harness"][0] == "ModuleNotFoundError"
    assert out["not_a_check"][0] == "AttributeError"


def test_no_trace_of_the_hidden_body(sealed):
    assert LAYERNORM_LINE in (REAL / "nn" / "norms.py").read_text()  # the probe is real
    copied = [
        p for p in (sealed / "tfcourse").rglob("*") if p.is_file() and "__pycache__" not in p.parts
    ]  # the worker test compiled it
    assert all(p.suffix == ".py" for p in copied)
    assert not [p for p in copied if LAYERNORM_LINE in p.read_text()]
    # the checks (which hold reference formulas and the known mistakes) are gone
    assert [
        p.name for p in (sealed / "tfcourse" / "checks").iterdir() if p.name != "__pycache__"
    ] == ["__init__.py"]
    real_modules = {
        p.relative_to(REAL)
        for p in REAL.rglob("*.py")
        if "__pycache__" not in p.parts and p.relative_to(REAL).parts[0] != "checks"
    }
    assert {p.relative_to(sealed / "tfcourse") for p in copied} - {
        Path("checks/__init__.py")
    } == real_modules
    # modules that do not mention a hidden name are byte-for-byte copies
    assert (sealed / "tfcourse" / "nn" / "mlp.py").read_bytes() == (
        REAL / "nn" / "mlp.py"
    ).read_bytes()


def test_line_numbers_kept_and_others_untouched(sealed):
    real = (REAL / "nn" / "norms.py").read_text().splitlines()
    copy = (sealed / "tfcourse" / "nn" / "norms.py").read_text().splitlines()
    assert len(copy) == len(real)
    start = next(i for i, line in enumerate(real) if line.startswith("class RMSNorm"))
    assert copy[start:] == real[start:]


def test_seal_source_kinds():
    source = textwrap.dedent('''\
        import functools

        @functools.lru_cache
        def helper(x):
            """Docstring of the reference."""
            return x + 1  # the secret


        class Hidden(Base):
            """Reference class."""
            def method(self):
                return 42


        class Kept:
            def helper(self):          # a method: left alone
                return "method"


        if True:
            def inner():
                return "secret inner"
        try:
            import nothing
        except ImportError:
            lam = lambda n: n * 1234
        a, pair = 1, 5678
        total: int = 9999
        ''')
    hide = {"helper", "Hidden", "inner", "lam", "pair", "total"}
    sealed = seal.seal_source(source, hide)
    for secret in (
        "the secret",
        "42",
        "secret inner",
        "1234",
        "9999",
        "lru_cache",
        "Docstring",
        "Reference class",
        "Base",
    ):
        assert secret not in sealed.replace("import functools", ""), secret
    assert '"method"' in sealed  # methods of other classes stay
    assert len(sealed.splitlines()) >= len(source.splitlines())
    namespace = {}
    exec(compile(sealed, "<sealed>", "exec"), namespace)
    for name in hide:
        with pytest.raises(RuntimeError, match="sealed: the course's reference"):
            namespace[name](1)
    assert isinstance(namespace["Hidden"], type) and namespace["Kept"]().helper() == "method"
    assert namespace["a"] == 1  # `a, pair = ...`: only pair is a stub


def test_seal_source_falls_back_to_unparse_on_shared_lines():
    source = "import os; x = 1\ndef f(): return 'secret'\ny = 2; f2 = f\n"
    sealed = seal.seal_source(source, {"f", "x"})
    assert "secret" not in sealed and "x = 1" not in sealed
    namespace = {}
    exec(sealed, namespace)
    with pytest.raises(RuntimeError):
        namespace["f2"]()
    assert seal.seal_source(source, {"absent"}) is source


def test_checks_stub_lists_the_real_checks():
    names = seal.check_names(REAL / "checks" / "__init__.py")
    assert "check_layernorm" in names and "check_gpt" in names
    assert all(name.startswith("check_") for name in names)
    tree = ast.parse(seal.checks_stub(names))
    assert not [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def test_sealed_package_is_cached_and_thread_safe():
    hide = frozenset({"RMSNorm"})
    results, errors = [], []

    def build():
        try:
            results.append(seal.sealed_package(hide))
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    start = time.perf_counter()
    threads = [threading.Thread(target=build) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    first = time.perf_counter() - start
    start = time.perf_counter()
    again = seal.sealed_package(set(hide))
    cached = time.perf_counter() - start
    print(
        f"sealed_package: first {1000 * first:.0f} ms (build + byte-compile), "
        f"cached {1e6 * cached:.0f} us"
    )
    assert not errors and len(set(results)) == 1 and again == results[0]
    assert (again / "tfcourse" / "nn" / "__pycache__").is_dir()
    assert seal.sealed_package(frozenset({"LayerNorm"})) != again
    with pytest.raises(FileExistsError):
        seal.build_sealed_package(again, hide)
