"""Checks for notebook 07: the GPT assembly and two parameter counts."""

from __future__ import annotations

import functools
import math
import numbers

import torch

from ..nn.block import TransformerBlock
from ..nn.config import GPTConfig
from ..nn.model import GPT
from ..nn.norms import LayerNorm
from ._harness import Checker, backward_case, build, describe_call, load_reference, randomize_

# Small enough for a fraction of a second on a CPU; full-length inputs exercise every position.
GPT_CONFIGS = (
    GPTConfig(vocab_size=50, max_seq_len=16, n_layers=2, n_heads=4, d_model=32),
    GPTConfig(vocab_size=37, max_seq_len=8, n_layers=1, n_heads=2, d_model=24, bias=False),
)


def _gpt(ref, idx, *, positions=True, offset=0, final_norm=True, scale=False, blocks="all",
         output="logits"):
    """``ref``'s forward pass with one deliberate deviation at a time (for diagnosis)."""
    T = idx.shape[1]
    x = ref.tok_emb(idx)
    if scale:
        x = x * math.sqrt(x.shape[-1])
    if positions:
        x = x + ref.pos_emb.weight[offset:offset + T]
    order = {"all": list(ref.blocks), "reversed": list(ref.blocks)[::-1],
             "first": list(ref.blocks)[:1]}[blocks]
    for block in order:
        x = block(x)
    if final_norm:
        x = ref.final_norm(x)
    logits = ref.lm_head(x)
    return {"logits": logits, "probs": logits.softmax(-1),
            "log_probs": logits.log_softmax(-1)}[output]


_GPT_MISTAKES = [
    ("no position embeddings are added", dict(positions=False)),
    ("position ids start at 1 instead of 0", dict(offset=1)),
    ("the final norm is not applied before lm_head", dict(final_norm=False)),
    ("the token embeddings are scaled by sqrt(d_model) (GPT-2 does not)", dict(scale=True)),
    ("the blocks run in reverse order", dict(blocks="reversed")),
    ("only the first block is applied", dict(blocks="first")),
    ("forward returns probabilities (softmax) instead of logits", dict(output="probs")),
    ("forward returns log-probabilities (log_softmax) instead of logits",
     dict(output="log_probs")),
]


def check_gpt(cls) -> None:
    """Check a GPT class against ``tfcourse.GPT``.

    Interface: ``cls(config)`` for a ``tfcourse.GPTConfig``, an ``nn.Module`` with
    ``tfcourse.GPT``'s parameter names: ``tok_emb`` (``Embedding(V, D)``), ``pos_emb``
    (a learned table with parameter ``weight (max_seq_len, D)``), ``blocks``
    (``ModuleList`` of blocks in the ``tfcourse.TransformerBlock`` layout, built from
    ``config.block_kwargs()``), ``final_norm`` and ``lm_head`` (``Linear(D, V,
    bias=False)``) whose weight *is* ``tok_emb.weight`` (tied)::

        logits = lm_head(final_norm(blocks(tok_emb(idx) + pos_emb.weight[:T])))   # (B, T, V)

    ``forward(idx (B, T) long) -> logits (B, T, V)``. The configs used are
    ``GPT_CONFIGS`` (GPT-2 style: learned positions, tanh GELU, tied head; dropout 0).

    Sub-checks (6): parameter layout; lm_head tied to tok_emb; idx not modified in
    place; (2, 16) logits and parameter gradients; batch 1, T=1; a second config
    (1 layer, d_model 24, bias=False) on (3, 8).
    """
    with Checker("GPT") as chk:
        gen = chk.generator(8)

        def pair(case, config):
            learner = build(chk, case, cls, config).eval()
            reference = randomize_(GPT(config), gen).to(chk.device, chk.dtype).eval()
            load_reference(chk, case, learner, reference, bias=config.bias)
            return learner, reference

        config = GPT_CONFIGS[0]
        case = f"parameter layout of {describe_call(cls, ('config',))} (GPT_CONFIGS[0])"
        learner, reference = pair(case, config)
        chk.ok()

        case = "weight tying (config.tie_weights=True)"
        head, embedding = getattr(learner, "lm_head", None), getattr(learner, "tok_emb", None)
        if getattr(head, "weight", None) is not getattr(embedding, "weight", 0):
            chk.fail(case, "lm_head.weight is not the same tensor as tok_emb.weight",
                     looks_like="the weights are not tied (two matrices, or a copy)",
                     hint="after building both: self.lm_head.weight = self.tok_emb.weight")
        chk.ok()

        case = "idx (2, 16): idx not modified in place"
        idx = torch.randint(config.vocab_size, (2, 16), generator=gen).to(chk.device)
        idx_seen = idx.clone()
        with torch.no_grad():
            chk.call(case, "calling your model(idx)", learner, idx_seen)
        chk.unchanged(case, "idx", idx, idx_seen)
        chk.ok()

        for seed, shape in enumerate([(2, 16), (1, 1)]):
            case = f"idx {shape}" + (": batch 1, T=1" if shape == (1, 1) else "")
            idx = torch.randint(config.vocab_size, shape, generator=gen).to(chk.device)
            _gpt_case(chk, case, learner, reference, idx, seed)
            chk.ok()

        config = GPT_CONFIGS[1]
        case = "GPT_CONFIGS[1] (1 layer, d_model 24, bias=False), idx (3, 8)"
        learner, reference = pair(case, config)
        idx = torch.randint(config.vocab_size, (3, 8), generator=gen).to(chk.device)
        _gpt_case(chk, case, learner, reference, idx, 2)
        chk.ok()


def _gpt_case(chk: Checker, case: str, learner, reference, idx, seed: int) -> None:
    expected = reference(idx)
    got = chk.call(case, "calling your model(idx)", learner, idx)
    chk.compare(case, "logits tensor", got, expected,
                variants=[(label, lambda o=o: _gpt(reference, idx, **o))
                          for label, o in _GPT_MISTAKES],
                hint="logits (B, T, vocab_size) for every position")
    backward_case(chk, case, reference, learner, expected, got, seed=seed + 300, what="logits")


# ---------------------------------------------------------------------------------------------
# Parameter counts


def _count(module) -> int:
    return sum(p.numel() for p in module.parameters())


def _as_int(chk: Checker, case: str, n, want: int) -> int:
    if isinstance(n, torch.Tensor) and n.numel() == 1 and not n.is_floating_point():
        n = n.item()
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        chk.fail(case, f"got {n!r} ({type(n).__name__}), expected an int",
                 hint="count with integers: sum(p.numel() for p in ...), // instead of /")
    return int(n)


@functools.lru_cache(maxsize=2)
def _block_params(bias: bool) -> int:
    """Parameters of one GPT-2-small block (width 768, 12 heads, 4x MLP).

    Built on the CPU with a one-token mask: the meta device would avoid the
    allocation but its first use costs seconds of imports.
    """
    return _count(TransformerBlock(768, 12, max_seq_len=1, bias=bias))


def check_bias_savings(n) -> None:
    """Check the number of parameters that ``bias=False`` saves in GPT-2 small's blocks.

    Interface: ``n``, an int: for a stack of 12 ``TransformerBlock`` s of width 768
    (12 heads, 4x MLP), the parameter count with ``bias=True`` minus the count with
    ``bias=False``. ``bias`` removes the biases of the Linear layers only (qkv_proj,
    out_proj, fc_in, fc_out); the LayerNorms keep theirs. Computed from the
    reference modules, not typed in.

    Sub-checks (2): n is an int; n is the saving.
    """
    with Checker("bias_savings") as chk:
        layers, D = 12, 768
        with_bias, without = layers * _block_params(True), layers * _block_params(False)
        want = with_bias - without
        case = "12 blocks, d_model 768"
        n = _as_int(chk, case, n, want)
        chk.ok()
        per_block = want // layers
        norm_biases = layers * 2 * D
        table = [
            (want + norm_biases, "the LayerNorm biases are counted too; bias=False removes only "
                                 "the Linear layers' biases (norms keep theirs)"),
            (want + norm_biases + D, "the LayerNorm biases (and a final norm's) are counted "
                                     "too; bias=False removes only the Linear layers' biases"),
            (norm_biases, "only the LayerNorm biases are counted; bias=False removes the "
                          "Linear layers' biases"),
            (per_block, "the saving of one block; the stack has 12"),
            (want - layers * 2 * D, "the fused qkv_proj bias has 3 * 768 entries, not 768"),
            (want - layers * 3 * D, "the MLP's first bias has 4 * 768 entries (its hidden "
                                    "width), not 768"),
            (without, "that is the count without biases, not the number saved"),
            (with_bias, "that is the count with biases, not the number saved"),
        ]
        if n != want:
            chk.fail(case, f"got {n:,}, expected {want:,}",
                     looks_like=next((why for value, why in table if value == n), None),
                     hint="count the bias vectors of qkv_proj, out_proj, fc_in and fc_out, "
                          "times 12 blocks")
        chk.ok()


def check_gpt2_small_params(n) -> None:
    """Check the parameter count of GPT-2 small (``GPTConfig.preset("gpt2-small")``).

    Interface: ``n``, an int: the number of distinct parameters of ``tfcourse.GPT`` in
    the ``gpt2-small`` preset (vocab 50257, context 1024, 12 layers, 12 heads, width
    768, biases, tied LM head counted once), i.e. ``GPT(config).num_params()``.
    Computed from the reference modules, not typed in.

    Sub-checks (2): n is an int; n is the count.
    """
    with Checker("gpt2_small_params") as chk:
        config = GPTConfig.preset("gpt2-small")
        V, D, T, layers = config.vocab_size, config.d_model, config.max_seq_len, config.n_layers
        # GPT = token and position tables + blocks + final norm; the tied head adds nothing.
        # (tests/test_checks.py asserts this equals GPT(config).num_params().)
        embeddings, final_norm = V * D + T * D, _count(LayerNorm(D))
        want = embeddings + layers * _block_params(True) + final_norm
        case = "gpt2-small"
        n = _as_int(chk, case, n, want)
        chk.ok()
        table = [
            (want + V * D, "the LM head is counted as its own matrix; GPT-2 ties it to the "
                           "token embedding, so it counts once"),
            (want - embeddings, "the embedding tables are left out "
                                "(num_params(non_embedding=True))"),
            (want - V * D, "the token embedding is left out"),
            (want - T * D, "the position embedding table (1024 x 768) is left out"),
            (embeddings + layers * _block_params(False) + final_norm,
             "the Linear biases are left out (that is bias=False)"),
            (want - 2 * D, "the final LayerNorm is left out"),
            (want + (50304 - V) * D, "the vocabulary is padded to 50304 (nanoGPT's trick); "
                                  "gpt2-small has 50257"),
            (want + V, "the LM head has a bias; GPT-2's has none"),
            (want - _block_params(True), "one block is missing (11 instead of 12)"),
        ]
        if n != want:
            chk.fail(case, f"got {n:,}, expected {want:,}",
                     looks_like=next((why for value, why in table if value == n), None),
                     hint="embeddings (token and position) + 12 blocks + final norm; the "
                          "tied head adds nothing")
        chk.ok()
