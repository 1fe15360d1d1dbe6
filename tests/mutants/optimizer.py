"""The wrong and the right implementations that test_mutants_optimizer.py runs: notebook 08's
``configure_optimizer``. See ``mutants/__init__.py``."""

from __future__ import annotations

import torch
from torch import nn

import tfcourse as tc
from tfcourse.nn.positional import LearnedPositionalEmbedding
from tfcourse.train.optim import configure_optimizer

# The modules that hold the course GPTs' parameters, as nanoGPT's first version listed them.
EMBEDDINGS = (nn.Embedding, LearnedPositionalEmbedding)


def _refuse_bad_input(model, lr, weight_decay, mistake=None) -> None:
    """The reference's refusals, each of which a mistake may leave out."""
    if mistake != "unchecked-model" and not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if mistake != "unchecked-lr" and not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    if mistake != "unchecked-weight-decay" and weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")


def _parameters(model, mistake):
    """The parameters a learner collects: trainable ones, each once (or not, by mistake)."""
    if mistake == "tied-twice":  # the tied head listed under both of its names
        named = model.named_parameters(remove_duplicate=False)
        return [p for _, p in named if p.requires_grad]
    if mistake == "frozen":
        return list(model.parameters())
    if mistake == "copies":
        return [p.detach() for p in model.parameters() if p.requires_grad]
    return [p for p in model.parameters() if p.requires_grad]


def make_configure_optimizer(mistake=None):
    """Learner-style ``configure_optimizer`` (split by ``p.dim()``); ``mistake`` switches on
    one error."""

    def configure(model, *, lr, weight_decay=0.1, betas=(0.9, 0.95), eps=1e-8):
        _refuse_bad_input(model, lr, weight_decay, mistake)
        if mistake == "betas-default":  # the signature's default is AdamW's, not the course's
            betas = (0.9, 0.999) if betas == (0.9, 0.95) else betas
        params = _parameters(model, mistake)
        decay = [p for p in params if p.dim() >= 2]
        no_decay = [p for p in params if p.dim() < 2]
        if mistake == "bias-by-name":  # only "bias" kept out: the norm gains decay
            named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
            decay = [p for n, p in named if not n.endswith("bias")]
            no_decay = [p for n, p in named if n.endswith("bias")]
        if mistake == "embedding-not-decayed":
            named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
            decay = [p for n, p in named if p.dim() >= 2 and "emb" not in n]
            no_decay = [p for n, p in named if p.dim() < 2 or "emb" in n]
        groups = [
            {"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        if mistake == "no-decay-group-default":
            del groups[1]["weight_decay"]
        if mistake == "weight-decay-dropped":
            del groups[0]["weight_decay"]
        settings = dict(lr=lr, betas=betas, eps=eps)
        if mistake in ("lr-dropped", "betas-dropped", "eps-dropped"):
            del settings[mistake.removesuffix("-dropped")]
        if mistake == "one-group":
            return torch.optim.AdamW(params, weight_decay=weight_decay, **settings)
        if mistake == "no-decay":
            return torch.optim.AdamW(params, weight_decay=0.0, **settings)
        if mistake == "adam":
            return torch.optim.Adam(groups, **settings)
        return torch.optim.AdamW(groups, **settings)

    configure.__name__ = "configure_optimizer" if mistake is None else f"configure_{mistake}"
    return configure


def by_module_type(*, types=(nn.Linear, *EMBEDDINGS, tc.LayerNorm, tc.RMSNorm), separate=False):
    """nanoGPT's first way: walk the modules, decay the weights of ``nn.Linear`` (and, unless
    ``separate``, of the embeddings), keep the rest without; each parameter once. With
    ``separate`` the embeddings go to the no-decay group, and the tied head lands in both."""

    def configure(model, *, lr, weight_decay=0.1, betas=(0.9, 0.95), eps=1e-8):
        _refuse_bad_input(model, lr, weight_decay)
        decay, no_decay, seen = [], [], set()
        for module in model.modules():
            if not isinstance(module, types):
                continue
            for name, p in module.named_parameters(recurse=False):
                if not p.requires_grad or (id(p) in seen and not separate):
                    continue
                seen.add(id(p))
                matrix = name == "weight" and isinstance(module, (nn.Linear, *EMBEDDINGS))
                if separate and isinstance(module, EMBEDDINGS):
                    matrix = False
                (decay if matrix else no_decay).append(p)
        groups = [
            {"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)

    configure.__name__ = "configure_optimizer"
    return configure


def by_name(model, *, lr, weight_decay=0.1, betas=(0.9, 0.95), eps=1e-8):
    """Split by name, rightly for the course's models: biases and every norm's parameters."""
    _refuse_bad_input(model, lr, weight_decay)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            plain = name.endswith(".bias") or "norm" in name
            (no_decay if plain else decay).append(p)
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0}],
        lr=lr,
        betas=betas,
        eps=eps,
    )


def three_groups_by_id(model, *, lr, weight_decay=0.1, betas=(0.9, 0.95), eps=1e-8):
    """``named_parameters`` into a set of ids: embeddings, other matrices and the rest, each a
    group of its own; AdamW's own weight_decay argument for the two that decay."""
    _refuse_bad_input(model, lr, weight_decay)
    embedding_ids = {id(m.weight) for m in model.modules() if isinstance(m, EMBEDDINGS)}
    embeddings, matrices, rest = [], [], []
    for _, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if id(p) in embedding_ids:
            embeddings.append(p)
        elif p.ndim >= 2:
            matrices.append(p)
        else:
            rest.append(p)
    return torch.optim.AdamW(
        [{"params": matrices}, {"params": rest, "weight_decay": 0.0}, {"params": embeddings}],
        lr=lr,
        betas=betas,
        eps=eps,
        weight_decay=weight_decay,
    )


MUTANTS = [
    ("optimizer-one-group", make_configure_optimizer("one-group"), "every parameter decays"),
    ("optimizer-no-decay", make_configure_optimizer("no-decay"), "no parameter decays"),
    (
        "optimizer-bias-by-name",
        make_configure_optimizer("bias-by-name"),
        "biases or norm gains decay",
    ),
    (
        "optimizer-embedding-not-decayed",
        make_configure_optimizer("embedding-not-decayed"),
        "the embeddings do not decay",
    ),
    (
        "optimizer-no-decay-group-default",
        make_configure_optimizer("no-decay-group-default"),
        "AdamW's default (0.01) decays the biases",
    ),
    (
        "optimizer-tied-twice",
        make_configure_optimizer("tied-twice"),
        "a parameter is in the optimizer twice",
    ),
    (
        "optimizer-tied-in-both-groups",
        by_module_type(separate=True),
        "a parameter is in the optimizer twice",
    ),
    ("optimizer-frozen", make_configure_optimizer("frozen"), "frozen parameters (requires_grad"),
    (
        "optimizer-module-types-without-rmsnorm",
        by_module_type(types=(nn.Linear, *EMBEDDINGS, tc.LayerNorm)),
        "parameters left out of the optimizer never train",
    ),
    ("optimizer-copies", make_configure_optimizer("copies"), "not the model's parameters"),
    ("optimizer-adam", make_configure_optimizer("adam"), "torch.optim.Adam instead of AdamW"),
    (
        "optimizer-weight-decay-dropped",
        make_configure_optimizer("weight-decay-dropped"),
        "weight_decay is not passed on to AdamW",
    ),
    ("optimizer-lr-dropped", make_configure_optimizer("lr-dropped"), "lr is not passed on"),
    (
        "optimizer-betas-dropped",
        make_configure_optimizer("betas-dropped"),
        "betas is not passed on",
    ),
    ("optimizer-eps-dropped", make_configure_optimizer("eps-dropped"), "eps is not passed on"),
    (
        "optimizer-betas-default",
        make_configure_optimizer("betas-default"),
        "betas is not passed on",
    ),
    (
        "optimizer-unchecked-model",
        make_configure_optimizer("unchecked-model"),
        "model is not checked",
    ),
    ("optimizer-unchecked-lr", make_configure_optimizer("unchecked-lr"), "lr is not checked"),
    (
        "optimizer-unchecked-weight-decay",
        make_configure_optimizer("unchecked-weight-decay"),
        "weight_decay is not checked",
    ),
]

ALTERNATIVES = [
    ("optimizer-reference", configure_optimizer),
    ("optimizer-learner-base", make_configure_optimizer()),
    ("optimizer-by-name", by_name),
    ("optimizer-three-groups-by-id", three_groups_by_id),
    ("optimizer-by-module-type", by_module_type()),
]
