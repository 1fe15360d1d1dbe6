"""A failing check names the *closest* known mistake, not the first one within tolerance."""

from __future__ import annotations

import math

import pytest
import torch

from tfcourse import checks
from tfcourse.checks import _harness
from tfcourse.checks._compare import close, scaled_error

from conftest import named_mistake
from mutants.core import LayerNormEps1e4, LearnerLayerNorm, LearnerRMSNorm

# What ``tolerances`` gives float32 on the CPU, and on an accelerator: ten times the CPU's.
CPU_TOLERANCES = (1e-4, 1e-5)
ACCELERATOR_TOLERANCES = (1e-3, 1e-4)


def test_scaled_error_is_at_most_one_exactly_when_close():
    gen = torch.Generator().manual_seed(0)
    b = torch.randn(200, generator=gen, dtype=torch.float64)
    for size in (1e-7, 1e-6, 1e-5, 1e-4, 1e-3):
        a = b + size * torch.randn(200, generator=gen, dtype=torch.float64)
        assert (scaled_error(a, b, 1e-4, 1e-5) <= 1.0) == close(a, b, 1e-4, 1e-5)


def test_scaled_error_treats_matching_nan_and_inf_as_equal_and_one_sided_ones_as_infinite():
    b = torch.tensor([1.0, float("nan"), float("inf"), float("-inf")])
    assert scaled_error(b.clone(), b, 1e-4, 1e-5) == 0.0
    assert scaled_error(torch.tensor([1.0, 0.0, 0.0, 0.0]), b, 1e-4, 1e-5) == math.inf
    assert scaled_error(torch.zeros(3), torch.zeros(4), 1e-4, 1e-5) == math.inf


def test_diagnose_picks_the_closest_variant_and_keeps_table_order_on_ties():
    got = torch.linspace(1.0, 2.0, 10)
    with _harness.Checker("diagnosis") as chk:
        far = ("far", lambda: got * (1 + 5 * chk.rtol))  # within 10 x rtol, not exact
        near = ("near", lambda: got.clone())
        broken = ("raises", lambda: 1 / 0)
        wrong_shape = ("shape", lambda: got[:3])
        assert chk.diagnose(got, [broken, wrong_shape, far, near]) == "near"
        assert chk.diagnose(got, [far]) == "far"
        assert chk.diagnose(got, [near, ("near too", lambda: got.clone())]) == "near"
        assert chk.diagnose(got, [("off", lambda: got + 1.0)]) is None


def _spy_on_diagnoses(monkeypatch) -> list[list[tuple[str, float]]]:
    """Record, for every search for a diagnosis, each variant's scaled error (table order)."""
    seen = []
    original = _harness.Checker._variant_errors

    def variant_errors(self, got, variants):
        errors = original(self, got, variants)
        seen.append(errors)
        return errors

    monkeypatch.setattr(_harness.Checker, "_variant_errors", variant_errors)
    return seen


def _default_eps(base, eps):
    return type(
        f"{base.__name__}Eps",
        (base,),
        {"__init__": lambda self, d_model, eps=eps: base.__init__(self, d_model, eps)},
    )


@pytest.mark.parametrize(
    "check, implementation, expected, tolerances",
    [
        pytest.param(
            checks.check_layernorm,
            LayerNormEps1e4,
            "the default eps is 0.0001, expected 1e-05",
            CPU_TOLERANCES,
            id="layernorm-1e-4-cpu",
        ),
        pytest.param(
            checks.check_layernorm,
            _default_eps(LearnerLayerNorm, 1e-6),
            "the default eps is 1e-06, expected 1e-05",
            ACCELERATOR_TOLERANCES,
            id="layernorm-1e-6-accelerator",
        ),
        pytest.param(
            checks.check_rmsnorm,
            _default_eps(LearnerRMSNorm, 1e-8),
            "the default eps is 1e-08, expected 1e-06",
            ACCELERATOR_TOLERANCES,
            id="rmsnorm-1e-8-accelerator",
        ),
    ],
)
def test_a_wrong_default_eps_is_named_as_such_not_as_eps_outside_the_root(
    check, implementation, expected, tolerances, monkeypatch, capsys
):
    monkeypatch.setattr(_harness, "tolerances", lambda dtype, device: tolerances)
    seen = _spy_on_diagnoses(monkeypatch)
    with pytest.raises(AssertionError) as info:
        check(implementation)
    assert named_mistake(str(info.value)) == expected, str(info.value)
    assert capsys.readouterr().out == ""
    # The test has teeth: "eps outside the square root" comes earlier in the table and is
    # also within tolerance, so the old first-match rule named it.
    errors = seen[-1]
    within = [description for description, error in errors if error <= 1.0]
    assert within[0].startswith("eps is added outside the square root")
    assert expected in within
