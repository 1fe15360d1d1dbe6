"""Check for notebook 05: the Transformer block, pre-LN and post-LN."""

from __future__ import annotations

import copy

import torch

from ..nn import block as reference_block
from ._harness import (
    Checker,
    build,
    describe_call,
    inplace_case,
    load_reference,
    module_case,
    randomize_,
)
from .mlp import _feedforward_width

D, H, M = 16, 4, 8
P_DROP = 0.5

SHARED_NORM = ("one norm module is shared by both sublayers (norm1 used twice, or "
               "norm2 = norm1): each sublayer needs its own LayerNorm with its own weights")
TANH_GELU = ("the tanh approximation of GELU (GPT-2's) in the block's MLP where the exact (erf) "
             "GELU is asked; use F.gelu(x) or nn.GELU() without approximate='tanh'")


def _pre(x, attn, mlp, n1, n2):
    x = x + attn(n1(x))
    return x + mlp(n2(x))


def _post(x, attn, mlp, n1, n2):
    x = n1(x + attn(x))
    return n2(x + mlp(x))


def _tanh_gelu_twin(ref):
    """The reference with GPT-2's tanh GELU in its MLP, same weights."""
    twin = copy.deepcopy(ref)
    twin.mlp.activation = "gelu_tanh"
    return twin


def _gelu_near_misses(ref, x):
    # tanh-GELU differs from GELU by < 1e-3: it can hide inside an accelerator's tolerance.
    return [(TANH_GELU, lambda: _tanh_gelu_twin(ref)(x))]


def _block_variants(ref, x):
    a, m, n1, n2 = ref.attn, ref.mlp, ref.norm1, ref.norm2
    shared = _pre if ref.pre_ln else _post
    common = [(SHARED_NORM, lambda: shared(x, a, m, n1, n1)),
              (SHARED_NORM, lambda: shared(x, a, m, n2, n2)),
              (TANH_GELU, lambda: _tanh_gelu_twin(ref)(x))]
    return _order_variants(ref, x) + common


def _order_variants(ref, x):
    a, m, n1, n2 = ref.attn, ref.mlp, ref.norm1, ref.norm2
    if ref.pre_ln:
        return [
            ("post-LN was written where pre-LN was asked (pre_ln=True): pre-LN normalizes "
             "each sublayer's input, x + attn(norm1(x)), not the sum after the residual add",
             lambda: _post(x, a, m, n1, n2)),
            ("the attention residual is missing: x = attn(norm1(x)) instead of "
             "x = x + attn(norm1(x))", lambda: (lambda h: h + m(n2(h)))(a(n1(x)))),
            ("the MLP residual is missing: x = mlp(norm2(x)) instead of x = x + mlp(norm2(x))",
             lambda: m(n2(x + a(n1(x))))),
            ("both residual connections are missing", lambda: m(n2(a(n1(x))))),
            ("the norm is applied to the residual stream (x = norm1(x); x = x + attn(x)) "
             "instead of only to the sublayer's input",
             lambda: (lambda h: (lambda g: g + m(g))(n2(h + a(h))))(n1(x))),
            ("norm1 and norm2 are swapped", lambda: _pre(x, a, m, n2, n1)),
            ("the MLP runs before attention", lambda: (lambda h: h + a(n2(h)))(x + m(n1(x)))),
            ("attention and MLP both read the block input (in parallel) instead of one after "
             "the other", lambda: x + a(n1(x)) + m(n2(x))),
        ]
    return [
        ("pre-LN was written where post-LN was asked (pre_ln=False): post-LN normalizes after "
         "the residual add, norm1(x + attn(x))", lambda: _pre(x, a, m, n1, n2)),
        ("the attention residual is missing: norm1(attn(x)) instead of norm1(x + attn(x))",
         lambda: (lambda h: n2(h + m(h)))(n1(a(x)))),
        ("the MLP residual is missing: norm2(mlp(x)) instead of norm2(x + mlp(x))",
         lambda: n2(m(n1(x + a(x))))),
        ("both residual connections are missing", lambda: n2(m(n1(a(x))))),
        ("the sublayer output is normalized before the residual add (x + norm1(attn(x))) "
         "instead of norm1(x + attn(x))", lambda: (lambda h: h + n2(m(h)))(x + n1(a(x)))),
        ("norm1 and norm2 are swapped", lambda: _post(x, a, m, n2, n1)),
        ("the MLP runs before attention", lambda: (lambda h: n2(h + a(h)))(n1(x + m(x)))),
    ]


def check_transformer_block(cls) -> None:
    """Check a decoder block class against ``tfcourse.TransformerBlock``, pre-LN and post-LN.

    Interface: ``cls(d_model, n_heads, *, max_seq_len, pre_ln=True, dropout=0.0)``, an
    ``nn.Module`` with four submodules in the tfcourse layouts:

    - ``norm1``, ``norm2``: two separate LayerNorms (``weight``, ``bias``; eps 1e-5),
    - ``attn``: causal multi-head attention as ``tfcourse.MultiHeadAttention``
      (``qkv_proj``/``out_proj``, or ``q_proj``/``k_proj``/``v_proj``/``out_proj``),
    - ``mlp``: ``tfcourse.FeedForward`` (``fc_in`` to 4 * d_model, exact GELU, ``fc_out``).

    Diagnosed besides wrong orders and missing residuals: one norm module shared by both
    sublayers, and GPT-2's tanh GELU in the MLP (also when it hides within tolerance).

    ``forward(x (B, T, D)) -> (B, T, D)``::

        pre-LN:  x = x + attn(norm1(x));  x = x + mlp(norm2(x))
        post-LN: x = norm1(x + attn(x));  x = norm2(x + mlp(x))

    ``dropout`` goes to the sublayers (attention weights, sublayer outputs) and acts
    only in train mode; the residual stream ``x`` itself is never dropped.

    Sub-checks (8): parameter layout; input not modified in place (pre and post);
    pre-LN (2, 6, 16) output and gradients; pre-LN batch 1, T=1; post-LN (2, 6, 16);
    post-LN batch 1, T=1; dropout=0.5 in eval mode (no effect); dropout=0.5 in train
    mode with the sublayers' output projections zeroed (the residual stream must pass
    untouched) and not zeroed (dropout must act).
    """
    with Checker("TransformerBlock") as chk:
        gen = chk.generator(6)

        def pair(case, zero_sublayers=False, **kwargs):
            learner = build(chk, case, cls, D, H, max_seq_len=M, **kwargs).eval()
            _no_shared_norm(chk, case, learner)
            reference = randomize_(reference_block.TransformerBlock(
                D, H, max_seq_len=M, activation="gelu", **kwargs), gen)
            if zero_sublayers:
                with torch.no_grad():
                    for layer in (reference.attn.out_proj, reference.mlp.fc_out):
                        layer.weight.zero_()
                        layer.bias.zero_()
            reference = reference.to(chk.device, chk.dtype).eval()
            load_reference(chk, case, learner, reference, bias=True,
                           shape_diagnosis=_block_width)
            return learner, reference

        case = f"parameter layout of {describe_call(cls, (D, H), {'max_seq_len': M})}"
        pre, pre_ref = pair(case)
        chk.ok()

        case = f"x (2, 6, {D}): input not modified in place"
        post, post_ref = pair(case, pre_ln=False)
        inplace_case(chk, case, [pre, post], chk.randn(gen, 2, 6, D))
        chk.ok()

        cases = [(f"pre-LN, x (2, 6, {D})", pre, pre_ref, (2, 6, D)),
                 (f"pre-LN, x (1, 1, {D}): batch 1, T=1", pre, pre_ref, (1, 1, D)),
                 (f"post-LN, x (2, 6, {D})", post, post_ref, (2, 6, D)),
                 (f"post-LN, x (1, 1, {D}): batch 1, T=1", post, post_ref, (1, 1, D))]
        for seed, (case, learner, reference, shape) in enumerate(cases):
            x = chk.randn(gen, *shape)
            module_case(chk, case, learner, reference, x, seed=seed,
                        variants=lambda: _block_variants(reference, x),
                        near_misses=lambda: _gelu_near_misses(reference, x))
            chk.ok()

        x = chk.randn(gen, 2, 6, D)
        for pre_ln in (True, False):
            case = f"{'pre' if pre_ln else 'post'}-LN, x (2, 6, {D}), dropout={P_DROP}, " \
                   f"eval mode: dropout must do nothing"
            learner, reference = pair(case, pre_ln=pre_ln, dropout=P_DROP)
            with torch.no_grad():
                first = chk.call(case, "calling your block", learner, x)
                second = chk.call(case, "calling your block", learner, x)
                if isinstance(first, torch.Tensor) and not torch.equal(first, second):
                    chk.fail(case, "two eval-mode calls gave different outputs",
                             looks_like="dropout is active in eval mode: F.dropout(x, p) "
                                        "defaults to training=True; use nn.Dropout, or "
                                        "F.dropout(x, p, training=self.training)")
                chk.compare(case, "output", first, reference(x),
                            variants=_block_variants(reference, x))
        chk.ok()

        for pre_ln in (True, False):
            kind = "pre" if pre_ln else "post"
            case = (f"{kind}-LN, x (2, 6, {D}), dropout={P_DROP}, train mode, sublayer "
                    f"outputs zeroed: x must pass through "
                    f"{'unchanged' if pre_ln else 'as norm2(norm1(x))'}")
            learner, reference = pair(case, zero_sublayers=True, pre_ln=pre_ln, dropout=P_DROP)
            with torch.no_grad():
                expected = reference.train()(x)          # deterministic: the sublayers give 0
                got = chk.call(case, "calling your block in train mode", learner.train(), x)
            chk.compare(case, "train-mode output", got, expected, variants=[
                ("dropout is applied to the residual stream (x itself is dropped, e.g. "
                 "dropout(x + attn(...))); only the sublayer outputs may be dropped",
                 lambda: torch.where(got == 0, torch.zeros_like(expected),
                                     expected / (1 - P_DROP)))],
                hint="dropout belongs inside the sublayers; x + sublayer(x) must keep x intact")
            if not pre_ln:
                continue
            case = f"pre-LN, x (2, 6, {D}), dropout={P_DROP}, train mode: dropout must act"
            learner, reference = pair(case, pre_ln=True, dropout=P_DROP)
            with torch.no_grad():
                out_eval = learner.eval()(x)
                out_train = chk.call(case, "calling your block in train mode", learner.train(), x)
            if torch.allclose(out_train, out_eval):
                chk.fail(case, f"with dropout={P_DROP} the train-mode output equals the "
                         "eval-mode output", looks_like="dropout is never applied (the dropout "
                         "argument is not passed on to the attention and the MLP)")
        chk.ok()


def _no_shared_norm(chk, case, learner) -> None:
    """Fail if norm1 and norm2 are one module, or share a parameter tensor."""
    norm1, norm2 = getattr(learner, "norm1", None), getattr(learner, "norm2", None)
    if norm1 is None or norm2 is None:
        return                                  # the layout sub-check names what is missing
    shared = norm1 is norm2 or any(
        p is q for p in norm1.parameters() for q in norm2.parameters())
    if shared:
        chk.fail(case, "norm1 and norm2 are the same module (or share their parameters)",
                 looks_like=SHARED_NORM)


def _block_width(name, got, want):
    if name.startswith("mlp."):
        return _feedforward_width(True)(name[len("mlp."):], got, want)
    return None
