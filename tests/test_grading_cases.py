"""Grading cases: a salt changes every number the checks draw, and nothing else.

The checks draw their cases from fixed seeds, so outputs recorded at home on the public
cases could be replayed in the grader. Inside ``grading_cases(salt)`` every seed is mixed
with the salt. These tests show that correctness does not depend on the salt (the
references and the alternative correct implementations pass, with the same line, and the
known mistakes fail, naming their cause, under every salt), that a replayed recording
passes the public cases and fails salted ones, and how the grader's secret gives salts.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import io
import os
import stat
import threading
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from torch import nn

import tfcourse as tc
from tfcourse import checks
from tfcourse.checks import grading_cases
from tfcourse.checks.batching import _batch
from tfcourse.checks.cases import case_seed, current_salt
from tfcourse.checks.claims import reference_permute_qk_rows
from tfcourse.checks.evaluation import _estimate
from tfcourse.checks.generate import _sample
from tfcourse.checks.special_tokens import _encode as _encode_with_special
from tfcourse.checks.tokenizer import _reference_pair
from tfcourse.checks.train_loop import _loop
from tfcourse.grade import secret as grading_secret
from tfcourse.lab.probes import gradient_probe
from tfcourse.lab.production import attend_with_cache, fuse_qkv
from tfcourse.language import speaking
from tfcourse.nn.attention import repeat_kv
from tfcourse.train.bpe import PATTERN, ByteBPE, _merge
from tfcourse.train.optim import configure_optimizer, lr_at

import mutants.claims
import mutants.core
import mutants.gqa
import mutants.llama_block
import mutants.norm_backward
import mutants.optimizer
import mutants.rotary_attention
from conftest import verdict_lines


def reference_probe(model, idx, targets):
    probe = gradient_probe(model, idx, targets, "lm")
    return probe["embedding"], probe["blocks"]


# Every check with the course's own implementation of its exercise.
REFERENCES = {
    "check_causal_mask": tc.causal_mask,
    "check_attention": tc.scaled_dot_product_attention,
    "check_multi_head_attention": tc.MultiHeadAttention,
    "check_first_head_weights": lambda mha, x: mha(x, return_weights=True)[1][:, 0],
    "check_layernorm": tc.LayerNorm,
    "check_layernorm_backward": tc.layernorm_backward,
    "check_rmsnorm": tc.RMSNorm,
    "check_feedforward": tc.FeedForward,
    "check_swiglu_hidden_dim": tc.swiglu_hidden_dim,
    "check_swiglu": tc.SwiGLU,
    "check_transformer_block": tc.TransformerBlock,
    "check_grad_norm_probe": reference_probe,
    "check_gpt": tc.GPT,
    "check_bias_savings": mutants.core.linear_bias_count,
    "check_gpt2_small_params": mutants.core.gpt_num_params,
    "check_rotary": tc.apply_rotary,
    "check_rotary_tables": tc.rotary_cos_sin,
    "check_fuse_qkv": fuse_qkv,
    "check_kv_cache_attention": attend_with_cache,
    "check_permute_qk_rows": reference_permute_qk_rows,
    "check_repeat_kv": repeat_kv,
    "check_rotary_attention": mutants.rotary_attention.LearnerRotaryAttention,
    "check_llama_block": mutants.llama_block.LearnerLlamaBlock,
    "check_lr_schedule": lr_at,
    "check_configure_optimizer": configure_optimizer,
    "check_train_loop": lambda model, optimizer, batches, **setting: _loop(
        model, optimizer, batches, **setting
    )[0],
    "check_generate": lambda model, idx, n, *, temperature, top_k, top_p=None, generator: _sample(
        model, idx, n, temperature, top_k, generator, top_p=top_p
    ),
    "check_get_batch": lambda data, batch_size, seq_len, *, generator: _batch(
        data, batch_size, seq_len, generator
    ),
    "check_estimate_loss": _estimate,
    "check_most_frequent_pair": _reference_pair,
    "check_merge_pair": _merge,
    "check_bpe_encode": lambda text, merges: ByteBPE(merges).encode(text),
    "check_bpe_decode": lambda ids, merges: ByteBPE(merges).decode(ids),
    "check_pre_split": PATTERN.findall,
    "check_encode_with_special": _encode_with_special,
}

# Two salts for the fast set, one of them near the top of the 63-bit range.
FAST_SALTS = (1, 2**62 + 12345)
SLOW_SALTS = tuple(range(100, 110))


def run(check, implementation, salt) -> tuple[str, str | None]:
    """``(what the check printed, the verdict of its failure or None)`` under ``salt``."""
    printed = io.StringIO()
    try:
        with grading_cases(salt), contextlib.redirect_stdout(printed):
            check(implementation)
    except AssertionError as error:
        return printed.getvalue(), verdict_lines(str(error))
    return printed.getvalue(), None


def test_every_check_has_a_reference_here():
    assert set(REFERENCES) == set(checks.__all__)


# ---------------------------------------------------------------------------------------------
# Correctness does not depend on the salt


def _passes_alike(name: str, implementation, salts) -> None:
    check = getattr(checks, name)
    public, failure = run(check, implementation, None)
    assert failure is None and public.endswith(" checks passed\n") and public.count("\n") == 1
    for salt in salts:
        printed, failure = run(check, implementation, salt)
        assert failure is None, f"{name} under salt {salt}: {failure}"
        assert printed == public, f"{name} under salt {salt} printed {printed!r}"


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_the_reference_passes_with_the_same_line_under_salts(name):
    _passes_alike(name, REFERENCES[name], FAST_SALTS)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_the_reference_passes_with_the_same_line_under_ten_salts(name):
    _passes_alike(name, REFERENCES[name], SLOW_SALTS)


def _alternatives():
    rows = [(row[0], row[1], row[2]) for row in mutants.core.ALTERNATIVES]
    rows += [(row[0], checks.check_permute_qk_rows, row[1]) for row in mutants.claims.ALTERNATIVES]
    rows += [(row[0], checks.check_repeat_kv, row[1]) for row in mutants.gqa.ALTERNATIVES]
    rows += [
        (row[0], checks.check_layernorm_backward, row[1])
        for row in mutants.norm_backward.ALTERNATIVES
    ]
    rows += [
        (row[0], checks.check_rotary_attention, row[1])
        for row in mutants.rotary_attention.ALTERNATIVES
    ]
    rows += [(row[0], checks.check_llama_block, row[1]) for row in mutants.llama_block.ALTERNATIVES]
    rows += [
        (row[0], checks.check_configure_optimizer, row[1]) for row in mutants.optimizer.ALTERNATIVES
    ]
    return [pytest.param(check, implementation, id=name) for name, check, implementation in rows]


def _mutants():
    rows = [(row[0], row[1], row[2], row[3]) for row in mutants.core.MUTANTS]
    rows += [
        (row[0], checks.check_permute_qk_rows, row[1], row[2]) for row in mutants.claims.MUTANTS
    ]
    rows += [(row[0], checks.check_repeat_kv, row[1], row[2]) for row in mutants.gqa.MUTANTS]
    rows += [
        (row[0], checks.check_layernorm_backward, row[1], row[2])
        for row in mutants.norm_backward.MUTANTS
    ]
    rows += [
        (row[0], checks.check_rotary_attention, row[1], row[2])
        for row in mutants.rotary_attention.MUTANTS
    ]
    rows += [
        (row[0], checks.check_llama_block, row[1], row[2]) for row in mutants.llama_block.MUTANTS
    ]
    rows += [
        (row[0], checks.check_configure_optimizer, row[1], row[2])
        for row in mutants.optimizer.MUTANTS
    ]
    return [
        pytest.param(check, implementation, cause, id=name)
        for name, check, implementation, cause in rows
    ]


@pytest.mark.slow
@pytest.mark.parametrize("check, implementation", _alternatives())
def test_an_alternative_correct_implementation_passes_under_ten_salts(check, implementation):
    for salt in SLOW_SALTS:
        printed, failure = run(check, implementation, salt)
        assert failure is None, f"salt {salt}: {failure}"
        assert printed.count("\n") == 1 and printed.endswith(" checks passed\n")


def _fails_naming(check, implementation, cause, salts) -> None:
    for salt in salts:
        printed, failure = run(check, implementation, salt)
        assert failure is not None, f"passed under salt {salt}"
        assert cause in failure, f"salt {salt}: {failure}"
        assert printed == ""


# Mistakes whose effect is small on some inputs (eps, tanh-GELU, scalings) or that the
# checks diagnose from the numbers, one or two per kind of check.
SUBTLE = {
    "layernorm-eps-outside-sqrt",
    "layernorm-default-eps-1e-4",
    "rmsnorm-eps-outside-sqrt",
    "rmsnorm-divides-by-std",
    "feedforward-tanh-gelu",
    "mha-scale-by-d-model",
    "sdpa-mask-inverted",
    "head-weights-unscaled",
    "block-norm-on-residual-stream",
    "gpt-no-final-norm",
    "probe-no-zero-grad",
    "permute-inverse",
    "repeat-kv-tiled",
}


@pytest.mark.parametrize(
    "check, implementation, cause", [row for row in _mutants() if row.id in SUBTLE]
)
def test_a_subtle_mistake_still_fails_naming_its_cause_under_salts(check, implementation, cause):
    _fails_naming(check, implementation, cause, FAST_SALTS)


def test_the_subtle_selection_exists():
    assert {row.id for row in _mutants()} >= SUBTLE


@pytest.mark.slow
@pytest.mark.parametrize("check, implementation, cause", _mutants())
def test_every_mistake_fails_naming_its_cause_under_ten_salts(check, implementation, cause):
    _fails_naming(check, implementation, cause, SLOW_SALTS)


# ---------------------------------------------------------------------------------------------
# The salt changes the numbers, not the cases


class InputRecorder(tc.LayerNorm):
    """``tfcourse.LayerNorm`` that keeps every input it is called on."""

    seen: ClassVar[list[torch.Tensor]] = []

    def forward(self, x):
        type(self).seen.append(x.detach().clone())
        return super().forward(x)


def recorded_inputs(salt) -> list[torch.Tensor]:
    class Recorder(InputRecorder):
        seen: ClassVar[list[torch.Tensor]] = []

    assert run(checks.check_layernorm, Recorder, salt)[1] is None
    return Recorder.seen


def test_a_salt_keeps_the_shapes_and_changes_every_input():
    public, salted = recorded_inputs(None), recorded_inputs(FAST_SALTS[0])
    assert [t.shape for t in public] == [t.shape for t in salted]
    assert all(not torch.equal(a, b) for a, b in zip(public, salted, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(public, recorded_inputs(None), strict=True))
    assert all(
        torch.equal(a, b) for a, b in zip(salted, recorded_inputs(FAST_SALTS[0]), strict=True)
    )


def test_a_salt_changes_the_probe_models_seeded_outside_the_generator():
    weights = {}

    def probe(model, idx, targets):
        weights.setdefault(salt, model.tok_emb.weight.detach().clone())
        return reference_probe(model, idx, targets)

    for salt in (None, 5):
        assert run(checks.check_grad_norm_probe, probe, salt)[1] is None
    assert not torch.equal(weights[None], weights[5])


def test_case_seeds_are_the_public_ones_without_a_salt():
    assert case_seed(7) == 7 and current_salt() is None
    with grading_cases(3):
        assert current_salt() == 3
        salted = case_seed(7)
        assert salted != 7 and 0 <= salted < 2**63
        assert case_seed(8) != salted
        with grading_cases(None):
            assert case_seed(7) == 7
        assert case_seed(7) == salted
    assert case_seed(7) == 7 and current_salt() is None
    with grading_cases(4):
        assert case_seed(7) != salted


@pytest.mark.parametrize("salt", ["1", 1.0, True])
def test_a_salt_must_be_an_int(salt):
    with pytest.raises(TypeError), grading_cases(salt):
        pass


def test_each_thread_draws_the_cases_of_its_own_salt():
    expected = {salt: recorded_inputs(salt) for salt in (11, 12)}
    got, errors = {}, []

    def grade(salt):
        try:
            got[salt] = recorded_inputs(salt)
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=grade, args=(salt,)) for salt in (11, 12)]
    with grading_cases(99):  # a new thread does not inherit this one's salt
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    for salt in (11, 12):
        assert all(torch.equal(a, b) for a, b in zip(got[salt], expected[salt], strict=True))


# ---------------------------------------------------------------------------------------------
# Record and replay: the attack the salt defeats


def fingerprint(*tensors: torch.Tensor) -> str:
    digest = hashlib.sha256()
    for t in tensors:
        digest.update(str(tuple(t.shape)).encode())
        digest.update(t.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


class Recording(torch.autograd.Function):
    """Runs the reference module and stores its output and gradients under the input."""

    @staticmethod
    def forward(ctx, x, weight, bias, module, table):
        with torch.enable_grad():
            x_leaf = x.detach().requires_grad_(True)
            y = tc.LayerNorm.forward(module, x_leaf)
        ctx.key, ctx.table = fingerprint(x, weight), table
        ctx.graph = (x_leaf, module.weight, module.bias, y)
        table[ctx.key] = {"out": y.detach().clone()}
        return y.detach().clone()

    @staticmethod
    def backward(ctx, grad):
        x_leaf, weight, bias, y = ctx.graph
        grads = torch.autograd.grad(y, (x_leaf, weight, bias), grad)
        ctx.table[ctx.key]["grads"] = [g.detach().clone() for g in grads]
        return (*grads, None, None)


class Replay(torch.autograd.Function):
    """Computes nothing: looks the input up in the table, else returns garbage."""

    @staticmethod
    def forward(ctx, x, weight, bias, table):
        ctx.entry = table.get(fingerprint(x, weight))
        ctx.shapes = (x, weight, bias)
        return ctx.entry["out"].clone() if ctx.entry else torch.full_like(x, 0.5)

    @staticmethod
    def backward(ctx, grad):
        if ctx.entry and "grads" in ctx.entry:
            return (*ctx.entry["grads"], None)
        return (*(torch.zeros_like(t) for t in ctx.shapes), None)


def record_public_layernorm_cases() -> dict:
    """What a learner could do at home: run the public check on a recording reference."""
    table: dict = {}

    class RecordingLayerNorm(tc.LayerNorm):
        def forward(self, x):
            return Recording.apply(x, self.weight, self.bias, self, table)

    with grading_cases(None):
        checks.check_layernorm(RecordingLayerNorm)
    return table


def replaying_layernorm(table: dict) -> type[nn.Module]:
    class LayerNorm(nn.Module):
        def __init__(self, d_model, eps=1e-5):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d_model))
            self.bias = nn.Parameter(torch.zeros(d_model))

        def forward(self, x):
            return Replay.apply(x, self.weight, self.bias, table)

    return LayerNorm


def test_a_replayed_recording_passes_the_public_cases_and_fails_salted_ones(capsys):
    table = record_public_layernorm_cases()
    capsys.readouterr()
    replay = replaying_layernorm(table)
    # It implements nothing: on an input it has not seen it is wrong.
    x = torch.randn(2, 3, 16)
    assert not torch.allclose(replay(16)(x), tc.LayerNorm(16)(x), atol=0.1)
    # The attack is real: on the public cases it scores.
    printed, failure = run(checks.check_layernorm, replay, None)
    assert failure is None and printed == "LayerNorm: 6/6 checks passed\n"
    # Salted cases defeat it.
    for salt in FAST_SALTS:
        printed, failure = run(checks.check_layernorm, replay, salt)
        assert failure is not None and printed == ""
        assert "differs from the reference" in failure


def recorded(function):
    """A function recorded at home on a check's public calls, and its replay: the recorded
    answer for an argument it has seen, a wrong one (zeros) for any other."""
    table = {}

    def recording(*args, **kwargs):
        table[(args, tuple(sorted(kwargs.items())))] = answer = function(*args, **kwargs)
        return answer

    def replaying(*args, **kwargs):
        key = (args, tuple(sorted(kwargs.items())))
        return table[key] if key in table else table[next(iter(table))]

    return recording, replaying


@pytest.mark.parametrize(
    "check, reference",
    [
        (checks.check_causal_mask, tc.causal_mask),
        (checks.check_rotary_tables, tc.rotary_cos_sin),
        (checks.check_swiglu_hidden_dim, tc.swiglu_hidden_dim),
        (checks.check_lr_schedule, lr_at),
    ],
    ids=["causal_mask", "rotary_tables", "swiglu_hidden_dim", "lr_schedule"],
)
def test_a_replayed_table_of_answers_fails_the_checks_without_random_inputs(check, reference):
    """Checks whose cases are sizes and settings, not random numbers: in grading those are
    drawn for the learner too, so a table recorded on the public calls fails."""
    recording, replaying = recorded(reference)
    assert run(check, recording, None)[1] is None
    printed, failure = run(check, replaying, None)
    assert failure is None and "passed" in printed  # the attack works on public cases
    for salt in FAST_SALTS:
        assert run(check, replaying, salt)[1] is not None, salt
        assert run(check, reference, salt)[1] is None, salt


# ---------------------------------------------------------------------------------------------
# The grader's secret


def test_the_secret_module_imports_no_model_code():
    tree = ast.parse(Path(grading_secret.__file__).read_text())
    imported = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    for wing in ("nn", "lab", "train", "checks"):
        assert not any(wing in name.split(".") for name in imported), imported


def test_the_secret_is_created_private_once_and_kept(tmp_path):
    path = tmp_path / "config" / "tfcourse" / "grading-secret"
    first = grading_secret.load_secret(path)
    assert len(first) == grading_secret.SECRET_BYTES
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert grading_secret.load_secret(path) == first
    assert [p.name for p in path.parent.iterdir()] == ["grading-secret"]  # no temporary left
    assert grading_secret.load_secret(tmp_path / "other") != first


@pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620])
def test_a_secret_others_may_access_is_refused_in_both_languages(tmp_path, mode):
    path = tmp_path / "grading-secret"
    grading_secret.load_secret(path)
    path.chmod(mode)
    with pytest.raises(ValueError, match="chmod 600"):
        grading_secret.load_secret(path)
    with speaking("zh"), pytest.raises(ValueError, match="其他用户"):
        grading_secret.load_secret(path)


def test_a_short_secret_is_refused_and_raw_bytes_are_accepted(tmp_path):
    path = tmp_path / "grading-secret"
    path.write_bytes(b"0123456789abcdef\n")  # 8 bytes in hex
    path.chmod(0o600)
    with pytest.raises(ValueError, match="fewer than 16"):
        grading_secret.load_secret(path)
    raw = bytes(range(200, 232))
    path.write_bytes(raw)
    assert grading_secret.load_secret(path) == raw


def test_the_secret_path_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(grading_secret.ENVIRONMENT_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert grading_secret.secret_path() == tmp_path / "xdg" / "tfcourse" / "grading-secret"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative")  # ignored, as the XDG spec says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert (
        grading_secret.secret_path()
        == tmp_path / "home" / ".config" / "tfcourse" / "grading-secret"
    )
    monkeypatch.setenv(grading_secret.ENVIRONMENT_VARIABLE, str(tmp_path / "mine"))
    assert grading_secret.secret_path() == tmp_path / "mine"
    assert grading_secret.load_secret() == grading_secret.load_secret(tmp_path / "mine")


def test_the_salt_depends_on_secret_identity_and_exercise():
    secret, other = b"s" * 32, b"t" * 32
    salt = grading_secret.case_salt(secret, "alice.ipynb", "layernorm")
    assert 0 <= salt < 2**63
    assert grading_secret.case_salt(secret, "alice.ipynb", "layernorm") == salt
    assert (
        len(
            {
                salt,
                grading_secret.case_salt(secret, "bob.ipynb", "layernorm"),
                grading_secret.case_salt(secret, "alice.ipynb", "rmsnorm"),
                grading_secret.case_salt(other, "alice.ipynb", "layernorm"),
                grading_secret.case_salt(secret, "alice.ipynbl", "ayernorm"),
            }
        )
        == 5
    )
    with pytest.raises(ValueError):
        grading_secret.case_salt(b"short", "alice.ipynb", "layernorm")
    with pytest.raises(TypeError):
        grading_secret.case_salt("s" * 32, "alice.ipynb", "layernorm")
