"""The checks accept the references, print exactly one line and change nothing around them."""

from __future__ import annotations

import ast
import re

import pytest
import torch

import tfcourse as tc
from tfcourse import checks
from tfcourse.checks import _harness, _parameters
from tfcourse.checks.mlp import check_swiglu as check_swiglu_mlp
from tfcourse.lab.probes import gradient_probe

import mutants.core
from conftest import fails, named_mistake
from helpers import ROOT


def reference_probe(model, idx, targets):
    probe = gradient_probe(model, idx, targets, "lm")
    return probe["embedding"], probe["blocks"]


def reference_first_head(mha, x):
    return mha(x, return_weights=True)[1][:, 0]


REFERENCES = [
    pytest.param(checks.check_causal_mask, tc.causal_mask, "causal_mask: 4/4", id="causal_mask"),
    pytest.param(
        checks.check_attention,
        tc.scaled_dot_product_attention,
        "scaled_dot_product_attention: 7/7",
        id="attention",
    ),
    pytest.param(
        checks.check_multi_head_attention,
        tc.MultiHeadAttention,
        "MultiHeadAttention: 7/7",
        id="multi_head_attention",
    ),
    pytest.param(
        checks.check_first_head_weights,
        reference_first_head,
        "first_head_weights: 5/5",
        id="first_head_weights",
    ),
    pytest.param(checks.check_layernorm, tc.LayerNorm, "LayerNorm: 6/6", id="layernorm"),
    pytest.param(checks.check_rmsnorm, tc.RMSNorm, "RMSNorm: 6/6", id="rmsnorm"),
    pytest.param(checks.check_feedforward, tc.FeedForward, "FeedForward: 8/8", id="feedforward"),
    pytest.param(
        checks.check_swiglu_hidden_dim,
        tc.swiglu_hidden_dim,
        "swiglu_hidden_dim: 6/6",
        id="swiglu_hidden_dim",
    ),
    pytest.param(check_swiglu_mlp, tc.SwiGLU, "SwiGLU: 8/8", id="swiglu"),
    pytest.param(
        checks.check_transformer_block,
        tc.TransformerBlock,
        "TransformerBlock: 8/8",
        id="transformer_block",
    ),
    pytest.param(
        checks.check_grad_norm_probe, reference_probe, "grad_norm_probe: 4/4", id="grad_norm_probe"
    ),
    pytest.param(checks.check_gpt, tc.GPT, "GPT: 9/9", id="gpt"),
    pytest.param(
        checks.check_bias_savings,
        mutants.core.linear_bias_count,
        "bias_savings: 4/4",
        id="bias_savings",
    ),
    pytest.param(
        checks.check_gpt2_small_params,
        mutants.core.gpt_num_params,
        "gpt2_small_params: 6/6",
        id="gpt2_small_params",
    ),
]


@pytest.mark.parametrize("check, reference, line", REFERENCES)
def test_reference_passes_with_exactly_one_line(check, reference, line, capsys):
    check(reference)
    captured = capsys.readouterr()
    assert captured.out == f"{line} checks passed\n"
    assert captured.err == ""


@pytest.mark.parametrize("check, reference, line", REFERENCES[:7])
def test_float64_default_dtype(check, reference, line, capsys):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        check(reference)
    finally:
        torch.set_default_dtype(previous)
    assert capsys.readouterr().out == f"{line} checks passed\n"


def test_every_check_is_exported():
    names = {
        "check_causal_mask",
        "check_attention",
        "check_multi_head_attention",
        "check_first_head_weights",
        "check_layernorm",
        "check_rmsnorm",
        "check_feedforward",
        "check_swiglu_hidden_dim",
        "check_swiglu",
        "check_transformer_block",
        "check_grad_norm_probe",
        "check_gpt",
        "check_bias_savings",
        "check_gpt2_small_params",
    }
    assert names <= set(dir(checks))
    # every check, whoever added it, is in __all__ (the __all__ line must stay last)
    assert set(checks.__all__) == {name for name in dir(checks) if name.startswith("check_")}


def test_a_check_does_not_disturb_the_callers_state(capsys):
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    with torch.no_grad():
        checks.check_layernorm(tc.LayerNorm)
        assert not torch.is_grad_enabled()
    assert torch.equal(torch.rand(3), expected_next)  # the RNG stream continues as before
    assert torch.get_float32_matmul_precision() == "highest"
    capsys.readouterr()


def test_matmul_precision_is_restored(capsys):
    torch.set_float32_matmul_precision("high")
    try:
        checks.check_rmsnorm(tc.RMSNorm)
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision("highest")
    capsys.readouterr()


def test_an_unfinished_exercise_raises_its_own_error():
    class Stub(torch.nn.Module):
        def __init__(self, d_model, eps=1e-5):
            raise NotImplementedError("Exercise LayerNorm: write your code here")

    with pytest.raises(NotImplementedError, match="Exercise LayerNorm"):
        checks.check_layernorm(Stub)


def test_a_constructor_that_fails_is_reported_with_the_call():
    class WrongSignature(torch.nn.Module):
        def __init__(self, d_model, n_heads):
            super().__init__()

    first = fails(checks.check_multi_head_attention, WrongSignature).splitlines()[0]
    assert "WrongSignature(24, 4, max_seq_len=8)" in first
    assert "TypeError" in first


def test_an_error_inside_forward_is_reported_not_raised():
    class Broken(tc.LayerNorm):
        def forward(self, x):
            return x @ torch.ones(3, 3)

    with pytest.raises(AssertionError, match="calling your module raised RuntimeError"):
        checks.check_layernorm(Broken)


# ---------------------------------------------------------------------------------------------
# How a failure reads: a short first line, then one line each for the rest


def test_a_failure_reads_first_line_case_difference_diagnosis():
    message = fails(checks.check_causal_mask, lambda T: torch.ones(T, T, dtype=torch.bool).triu())
    assert message.splitlines() == [
        "causal_mask: mask differs from the reference (check 1 of 4)",
        "  case: causal_mask(5)",
        "  20 of 25 entries differ; first at [0, 1]: expected False, got True",
        "  looks like: the upper triangle (triu) instead of the lower (tril): True where the "
        "key comes after the query",
    ]


def test_a_boolean_result_counts_its_wrong_entries_never_a_max_diff():
    def one_wrong(T):
        mask = tc.causal_mask(T)
        mask[T - 1, 0] = T < 3  # right for T = 1 and 2; for T = 5: one entry
        return mask

    message = fails(checks.check_causal_mask, one_wrong)
    assert "max |diff|" not in message
    assert message.splitlines()[0] == "causal_mask: mask differs from the reference (check 1 of 4)"
    assert "  1 of 25 entries differs; first at [4, 0]: expected True, got False" in message


def test_a_float_result_gives_its_largest_difference_and_the_tolerance():
    class Doubles(tc.LayerNorm):
        def forward(self, x):
            return 2 * super().forward(x)

    message = fails(checks.check_layernorm, Doubles)
    lines = message.splitlines()
    assert lines[0] == "LayerNorm: output differs from the reference (check 3 of 6)"
    assert lines[1] == "  case: x (2, 5, 16), default eps"
    assert re.fullmatch(
        r"  max \|diff\| = [\d.]+ \(tolerance: 1e-05 \+ 0\.0001 \* \|reference\|\)", lines[2]
    ), lines[2]
    assert lines[-1].startswith("  hint: no known mistake reproduces this output")


def test_what_the_learners_code_raised_is_a_line_of_its_own():
    class Broken(tc.LayerNorm):
        def forward(self, x):
            return x @ torch.ones(3, 3)

    lines = fails(checks.check_layernorm, Broken).splitlines()
    assert lines[0] == "LayerNorm: calling your module raised RuntimeError (check 2 of 6)"
    assert lines[2].startswith("  RuntimeError: mat1 and mat2 shapes cannot be multiplied")


def test_a_mask_changed_in_place_is_told_by_its_entries():
    def attention(q, k, v, mask=None):
        if mask is not None:
            mask[0, 1] = True
        return tc.scaled_dot_product_attention(q, k, v, mask=mask)

    message = fails(checks.check_attention, attention)
    assert message.splitlines()[0] == (
        "scaled_dot_product_attention: your code modified its input mask in place (check 1 of 7)"
    )
    assert "  1 of 25 entries changed; first at [0, 1]: False became True" in message
    assert named_mistake(message).startswith("an in-place operation on the input")


def test_the_count_of_sub_checks_is_the_one_each_check_prints():
    """``SUB_CHECKS`` (a failure's "check k of n") names every check, with the n of its pass
    line as the solutions store it."""
    names = {
        node.args[0].value
        for path in (ROOT / "tfcourse" / "checks").glob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Checker"
    }
    assert names == set(_harness.SUB_CHECKS)
    stored = {
        name: int(n)
        for path in (ROOT / "solutions").glob("*.ipynb")
        for name, n in re.findall(r"(\w+): (\d+)/\2 checks passed", path.read_text("utf-8"))
    }
    assert stored == _harness.SUB_CHECKS


def test_a_check_the_table_does_not_know_gives_only_its_position():
    with pytest.raises(AssertionError) as info, _harness.Checker("mine") as chk:
        chk.ok()
        chk.fail("", "it differs")
    assert str(info.value) == "mine: it differs (check 2)"


def test_tolerances_are_tight_on_cpu_and_looser_elsewhere():
    assert _harness.tolerances(torch.float32, torch.device("cpu")) == (1e-4, 1e-5)
    rtol, atol = _harness.tolerances(torch.float32, torch.device("cuda"))
    assert rtol > 1e-4 and atol > 1e-5
    assert _harness.tolerances(torch.float64, torch.device("cpu"))[0] < 1e-4


def test_fused_qkv_is_split_for_separate_projections():
    weight = torch.arange(12.0).reshape(6, 2)
    out = _parameters.adapt_layout(
        {"attn.qkv_proj.weight": weight},
        {"attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight"},
    )
    assert set(out) == {"attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight"}
    assert torch.equal(out["attn.k_proj.weight"], weight[2:4])


def test_the_counting_checks_expect_the_reference_models_counts():
    # The checks take their expected counts from GPT(config) on the meta device; the
    # course's own formula (notebook 07's solution) and the real models agree with them.
    from tfcourse.checks.counting import PARAM_CASES

    for _, config in PARAM_CASES[-1:]:
        assert mutants.core.gpt_num_params(config) == tc.GPT(config).num_params()
    gpt2 = tc.GPTConfig.preset("gpt2-small")
    assert mutants.core.gpt_num_params(gpt2) == 124_439_808  # GPT-2 small's published count


@pytest.mark.parametrize("turn_on", ["legacy", "precision", "new"])
def test_checks_run_without_tf32_and_restore_the_setting(turn_on, capsys):
    from tfcourse.checks._harness import Checker

    matmul = torch.backends.cuda.matmul
    if turn_on == "new" and not hasattr(matmul, "fp32_precision"):
        pytest.skip("torch < 2.9 has no per-backend TF32 API")
    before = (torch.get_float32_matmul_precision(), getattr(matmul, "fp32_precision", None))
    try:
        {
            "legacy": lambda: setattr(matmul, "allow_tf32", True),
            "precision": lambda: torch.set_float32_matmul_precision("high"),
            "new": lambda: setattr(matmul, "fp32_precision", "tf32"),
        }[turn_on]()
        was = getattr(matmul, "fp32_precision", None)
        with Checker("tf32"):
            assert torch.get_float32_matmul_precision() == "highest"
            if was is not None:
                assert matmul.fp32_precision == "ieee"
        assert getattr(matmul, "fp32_precision", None) == was
    finally:
        torch.set_float32_matmul_precision(before[0])
        if before[1] is not None:
            matmul.fp32_precision = before[1]
