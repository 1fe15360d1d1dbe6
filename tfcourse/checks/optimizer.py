"""Check for notebook 08: the optimizer's parameter groups (AdamW, weight decay on 2-D weights).

The learner's ``fn(model, *, lr, weight_decay=0.1, betas=(0.9, 0.95), eps=1e-8)`` returns a
``torch.optim.AdamW`` whose groups decay the matrices and embeddings (``p.dim() >= 2``) and
leave the biases and norm gains (``p.dim() < 2``) alone. The check reads the answer as
structure, not by training with it: which parameter (by identity) is in which group, with
what weight decay, learning rate, betas and eps. Training would show a wrong group only as a
small drift of the losses; the structure names the parameter.

Three models: the course's GPT (biases, LayerNorm, the head tied to the token embedding), a
LLaMA-style one (RMSNorm, no biases, rotary positions, an untied head) and the first with
some parameters frozen; then the input the reference refuses.

Sealed, the models cross by value (frozen parameters frozen), and the optimizer the
learner's code returns comes back by value, rebuilt over the check's own model
(``grade/sealed/protocol.optimizer_node``): the same judgement, on the same objects.
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import nn

from ..language import say
from ..nn.config import GPTConfig
from ..nn.model import GPT
from ..nn.positional import LearnedPositionalEmbedding
from ..runtime import fmt
from ._harness import Checker, Mistakes, first_line, mistake, require_function
from .cases import case_int

# The course's GPT: biases, LayerNorm, learned positions, the head tied to the embedding.
TIED = GPTConfig(vocab_size=24, max_seq_len=8, n_layers=2, n_heads=2, d_model=16)
# LLaMA's choices: RMSNorm (a gain, no bias), no biases anywhere, rotary positions (no
# position table), SwiGLU, grouped keys and values, and a head of its own.
UNTIED = GPTConfig(
    vocab_size=24,
    max_seq_len=8,
    n_layers=1,
    n_heads=4,
    n_kv_heads=2,
    d_model=16,
    d_hidden=32,
    norm="rmsnorm",
    mlp="swiglu",
    bias=False,
    positional="rope",
    tie_weights=False,
)
# What AdamW uses for a setting it is not given: a value the check finds there was dropped.
ADAMW_DEFAULTS = {"lr": 1e-3, "weight_decay": 0.01, "betas": (0.9, 0.999), "eps": 1e-8}
SHOWN = 3  # parameter names listed in a message before "and n more"


def _mistakes() -> dict[str, str]:
    return {
        "adam": mistake(
            "torch.optim.Adam instead of AdamW: Adam's weight_decay is L2 (weight_decay * p is "
            "added to the gradient, then divided by Adam's running scale, so weights with large "
            "gradients barely decay); AdamW shrinks each weight by lr * weight_decay * p itself",
            "用了 torch.optim.Adam 而不是 AdamW：Adam 的 weight_decay 是 L2 正则（把 "
            "weight_decay * p 加到梯度上，再被 Adam 的自适应尺度除掉，梯度大的权重几乎不衰减）；"
            "AdamW 直接把每个权重缩小 lr * weight_decay * p（解耦的权重衰减）",
        ),
        "everything": mistake(
            "every parameter decays (one group, or two with the same weight_decay): the biases "
            "and norm gains are pulled towards 0 too",
            "所有参数都做了权重衰减（只有一个参数组，或两组的 weight_decay 相同）：偏置和归一化"
            "的增益也被拉向 0",
        ),
        "nothing": mistake(
            "no parameter decays: weight_decay never reaches the group of the 2-D weights",
            "没有任何参数做权重衰减：weight_decay 没有传到 2 维权重所在的参数组",
        ),
        "no-decay-default": mistake(
            "the no-decay group sets no weight_decay of its own, so AdamW's default (0.01) "
            "decays the biases and norm gains: give that group weight_decay=0.0",
            "不衰减的那组没有设置自己的 weight_decay，于是 AdamW 的默认值（0.01）让偏置和归一化"
            "的增益也衰减了：给这一组写上 weight_decay=0.0",
        ),
        "one-d": mistake(
            "biases or norm gains decay: the split goes by name and misses some 1-D parameters "
            "(a norm's gain is called weight, like a matrix); split by shape, p.dim() < 2",
            "偏置或归一化的增益做了权重衰减：按名字分组漏掉了一些 1 维参数（归一化的增益也叫 "
            "weight，和矩阵同名）；请按形状分组，p.dim() < 2",
        ),
        "embedding": mistake(
            "the embeddings do not decay: they are 2-D matrices like a Linear layer's weight "
            "(with tied weights the token embedding is the LM head too); decay every p.dim() >= 2",
            "词嵌入没有做权重衰减：它们和 Linear 层的 weight 一样是 2 维矩阵（权重绑定时，词元"
            "嵌入同时也是语言模型头）；所有 p.dim() >= 2 的参数都要衰减",
        ),
        "twice": mistake(
            "a parameter is in the optimizer twice (in both groups, or twice in one): the tied "
            "weight counted twice, e.g. from named_parameters(remove_duplicate=False) or from "
            "each module's weight; model.parameters() lists a shared parameter once",
            "同一个参数在优化器里出现了两次（两组各一次，或在一组里两次）：绑定的权重被算了两遍，"
            "例如来自 named_parameters(remove_duplicate=False) 或逐个模块取 weight；"
            "model.parameters() 对绑定的参数只列出一次",
        ),
        "frozen": mistake(
            "frozen parameters (requires_grad=False) are in the optimizer: keep only those "
            "with p.requires_grad",
            "冻结的参数（requires_grad=False）也进了优化器：只保留 p.requires_grad 为真的参数",
        ),
        "missing": mistake(
            "parameters left out of the optimizer never train: collect them from "
            "model.parameters() (or named_parameters()), not from chosen module types",
            "没放进优化器的参数永远不会被训练：请从 model.parameters()（或 named_parameters()）"
            "收集参数，而不是只挑某几类模块",
        ),
        "copies": mistake(
            "the optimizer holds tensors that are not the model's parameters (copies from "
            "state_dict(), .data, .detach() or .clone()): it would update the copies, and the "
            "model would never change",
            "优化器里放的张量不是模型自己的参数（来自 state_dict()、.data、.detach() 或 "
            ".clone() 的副本）：优化器只会更新这些副本，模型本身永远不变",
        ),
        "unchecked-model": mistake(
            "model is not checked: anything but an nn.Module should raise TypeError",
            "没有检查 model：传入的不是 nn.Module 时应抛出 TypeError",
        ),
        "unchecked-lr": mistake(
            "lr is not checked: lr <= 0 should raise ValueError (AdamW accepts lr=0, and a run "
            "at learning rate 0 learns nothing)",
            "没有检查 lr：lr <= 0 时应抛出 ValueError（AdamW 接受 lr=0，而学习率为 0 的训练"
            "什么也学不到）",
        ),
        "unchecked-weight-decay": mistake(
            "weight_decay is not checked: weight_decay < 0 should raise ValueError (AdamW does "
            "not check the weight_decay a group sets itself)",
            "没有检查 weight_decay：weight_decay < 0 时应抛出 ValueError（参数组自己设置的 "
            "weight_decay，AdamW 不会检查）",
        ),
    }


MISTAKES = Mistakes(_mistakes)


def _dropped(setting: str, value) -> str:
    """The mistake of a setting that never reached AdamW: it has AdamW's own default."""
    return mistake(
        f"{setting} is not passed on to AdamW: it has AdamW's own default, {value} (the "
        f"argument is dropped, or your signature's default is AdamW's)",
        f"{setting} 没有传给 AdamW：它用的是 AdamW 自己的默认值 {value}（参数没有传下去，"
        f"或者你的函数签名里的默认值就是 AdamW 的）",
    )


def _hint() -> str:
    return say(
        "decay = the parameters with p.requires_grad and p.dim() >= 2, no_decay those with "
        "p.dim() < 2, both from model.parameters() (a tied weight once); torch.optim.AdamW("
        "[{'params': decay, 'weight_decay': weight_decay}, {'params': no_decay, "
        "'weight_decay': 0.0}], lr=lr, betas=betas, eps=eps); before that, TypeError unless "
        "model is an nn.Module, ValueError unless lr > 0 and weight_decay >= 0",
        "decay 是 model.parameters() 中 p.requires_grad 为真且 p.dim() >= 2 的参数，no_decay "
        "是 p.dim() < 2 的参数（绑定的权重只算一次）；torch.optim.AdamW([{'params': decay, "
        "'weight_decay': weight_decay}, {'params': no_decay, 'weight_decay': 0.0}], lr=lr, "
        "betas=betas, eps=eps)；在此之前，model 不是 nn.Module 时抛出 TypeError，lr <= 0 或 "
        "weight_decay < 0 时抛出 ValueError",
    )


# ------------------------------------------------------------------------------- the cases


def _model(config: GPTConfig, device, frozen: tuple[str, ...] = ()) -> GPT:
    """A GPT of ``config`` on ``device`` with the parameters whose names start with one of
    ``frozen`` frozen. Its weights do not matter: only which parameter is which."""
    model = GPT(config).to(device)
    for name, parameter in model.named_parameters():
        if frozen and name.startswith(frozen):
            parameter.requires_grad_(False)
    return model


def _cases(device) -> list[tuple[str, GPT, dict]]:
    """``(case, model, keyword arguments)``. The settings differ from AdamW's defaults and
    from the course's, so a setting that is dropped, or replaced by a default, shows; the
    third case passes ``lr`` alone, so it is the function's own defaults that are judged.
    In grading the numbers are drawn for the learner (``cases.case_int``)."""
    first = dict(
        lr=case_int(40, 3, 2, 9) * 1e-4,
        weight_decay=case_int(41, 5, 2, 9) / 100,
        betas=(0.8, 0.99),
        eps=1e-6,
    )
    second = dict(
        lr=case_int(42, 6, 2, 9) * 1e-4,
        weight_decay=case_int(43, 3, 2, 9) / 100,
        betas=(0.85, 0.98),
        eps=1e-7,
    )
    third = dict(lr=case_int(44, 2, 2, 9) * 1e-3)
    return [
        (
            say(
                "the course's GPT (biases, LayerNorm, the head tied to the token embedding)",
                "课程的 GPT（有偏置、LayerNorm，语言模型头与词元嵌入做了权重绑定）",
            ),
            _model(TIED, device),
            first,
        ),
        (
            say(
                "a LLaMA-style GPT (RMSNorm, no biases, rotary positions, its own head)",
                "LLaMA 式的 GPT（RMSNorm、没有偏置、旋转位置编码、独立的语言模型头）",
            ),
            _model(UNTIED, device),
            second,
        ),
        (
            say(
                "the course's GPT with pos_emb and block 0 frozen, only lr passed (the defaults)",
                "课程的 GPT，冻结 pos_emb 和第 0 个块，只传 lr（其余用默认值）",
            ),
            _model(TIED, device, frozen=("pos_emb.", "blocks.0.")),
            third,
        ),
    ]


# --------------------------------------------------------------------------- the judgement


def _listed(names: list[str]) -> str:
    """``"a, b, c and 4 more"``: the first names of a list."""
    shown = ", ".join(names[:SHOWN])
    more = len(names) - SHOWN
    return shown if more <= 0 else say(f"{shown} and {more} more", f"{shown}，另有 {more} 个")


def _close(a, b) -> bool:
    """Two settings equal up to float rounding (numbers, or tuples of numbers)."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)
    except (TypeError, ValueError):
        return False


def _shown(value) -> str:
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_shown(v) for v in value) + ")"
    return fmt(float(value)) if isinstance(value, (int, float, torch.Tensor)) else repr(value)


def _kind(value) -> str:
    """What the learner's function returned, by type (the sealed grader's stand-in for an
    object it cannot bring back carries the object's type name as ``__name__``)."""
    name = type(value).__name__
    return str(getattr(value, "__name__", name)) if name == "RemoteObject" else name


def _check_type(chk: Checker, case: str, optimizer) -> None:
    """An AdamW (or an Adam with decoupled weight decay, the same optimizer)."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        chk.fail(
            case,
            say(
                f"returned a {_kind(optimizer)}, expected a torch.optim.AdamW",
                f"返回了 {_kind(optimizer)}，应返回 torch.optim.AdamW",
            ),
            hint=_hint(),
        )
    decoupled = isinstance(optimizer, torch.optim.AdamW) or optimizer.defaults.get(
        "decoupled_weight_decay", False
    )
    if decoupled:
        return
    name = type(optimizer).__name__
    chk.fail(
        case,
        say(
            f"the optimizer's class is {name}, expected AdamW",
            f"返回的优化器类型是 {name}，应为 AdamW",
        ),
        looks_like=MISTAKES["adam"] if isinstance(optimizer, torch.optim.Adam) else None,
        hint=_hint(),
    )


def _check_membership(chk: Checker, case: str, model: nn.Module, optimizer) -> None:
    """Every trainable parameter of ``model`` exactly once, nothing else."""
    names = {id(p): name for name, p in model.named_parameters()}
    held = [p for group in optimizer.param_groups for p in group["params"]]
    foreign = [p for p in held if id(p) not in names]
    if foreign:
        shapes = ", ".join(str(tuple(p.shape)) for p in foreign[:SHOWN])
        chk.fail(
            case,
            say(
                f"{len(foreign)} tensor(s) in the optimizer are not parameters of the model",
                f"优化器里有 {len(foreign)} 个张量不是模型的参数",
            ),
            detail=say(f"their shapes: {shapes}", f"它们的形状：{shapes}"),
            looks_like=MISTAKES["copies"],
            hint=_hint(),
        )
    counts: dict[int, int] = {}
    for p in held:
        counts[id(p)] = counts.get(id(p), 0) + 1
    twice = [names[key] for key, count in counts.items() if count > 1]
    if twice:
        chk.fail(
            case,
            say(
                "a parameter is in the optimizer more than once",
                "有参数在优化器里出现了不止一次",
            ),
            detail=_listed(twice),
            looks_like=MISTAKES["twice"],
            hint=_hint(),
        )
    frozen = [names[id(p)] for p in held if not p.requires_grad]
    if frozen:
        chk.fail(
            case,
            say("frozen parameters are in the optimizer", "冻结的参数进了优化器"),
            detail=_listed(frozen),
            looks_like=MISTAKES["frozen"],
            hint=_hint(),
        )
    missing = [
        name for name, p in model.named_parameters() if p.requires_grad and id(p) not in counts
    ]
    if missing:
        chk.fail(
            case,
            say("parameters of the model are in no group", "模型的一些参数不在任何参数组里"),
            detail=_listed(missing),
            looks_like=MISTAKES["missing"],
            hint=_hint(),
        )


def _decay_of(optimizer) -> dict[int, float]:
    """Each parameter's weight decay, by ``id``: its group's."""
    return {
        id(p): float(group.get("weight_decay", 0.0))
        for group in optimizer.param_groups
        for p in group["params"]
    }


def _embeddings(model: nn.Module) -> set[int]:
    """``id``s of the parameters of the model's embeddings: ``nn.Embedding`` (the tokens) and
    the course's ``LearnedPositionalEmbedding`` (a table, not an ``nn.Embedding``)."""
    tables = (nn.Embedding, LearnedPositionalEmbedding)
    return {id(p) for m in model.modules() if isinstance(m, tables) for p in m.parameters()}


def _split_mistake(model, decay, one_d_decayed, two_d_plain, weight_decay) -> str | None:
    """The known mistake behind a wrong split, or None. ``one_d_decayed``: the 1-D
    parameters that decay; ``two_d_plain``: the 2-D ones that do not (by ``id``)."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    one_d = {id(p) for p in trainable if p.dim() < 2}
    two_d = {id(p) for p in trainable if p.dim() >= 2}
    if one_d_decayed == one_d and not two_d_plain:
        defaulted = all(_close(decay[key], ADAMW_DEFAULTS["weight_decay"]) for key in one_d)
        if defaulted and not _close(weight_decay, ADAMW_DEFAULTS["weight_decay"]):
            return MISTAKES["no-decay-default"]
        if len({decay[id(p)] for p in trainable}) == 1:
            return MISTAKES["everything"]
        return MISTAKES["one-d"]
    if one_d_decayed and not two_d_plain:
        return MISTAKES["one-d"]
    if two_d_plain == two_d and not one_d_decayed:
        return MISTAKES["nothing"]
    if two_d_plain and two_d_plain <= _embeddings(model) and not one_d_decayed:
        return MISTAKES["embedding"]
    return None


def _check_split(chk: Checker, case: str, model: nn.Module, optimizer, weight_decay) -> None:
    """Decay on the 2-D parameters, none on the 1-D ones, and the decay asked for."""
    names = {id(p): name for name, p in model.named_parameters()}
    decay = _decay_of(optimizer)
    trainable = [p for p in model.parameters() if p.requires_grad]
    one_d_decayed = {id(p) for p in trainable if p.dim() < 2 and decay[id(p)] > 0}
    two_d_plain = {id(p) for p in trainable if p.dim() >= 2 and decay[id(p)] <= 0}
    if one_d_decayed or two_d_plain:
        lines = []
        if one_d_decayed:
            listed = _listed([names[key] for key in names if key in one_d_decayed])
            lines.append(say(f"1-D but decayed: {listed}", f"1 维参数却做了衰减：{listed}"))
        if two_d_plain:
            listed = _listed([names[key] for key in names if key in two_d_plain])
            lines.append(say(f"2-D but not decayed: {listed}", f"2 维参数却没有衰减：{listed}"))
        chk.fail(
            case,
            say(
                "the parameters are split into the wrong groups",
                "参数分错了组",
            ),
            detail="; ".join(lines),
            looks_like=_split_mistake(model, decay, one_d_decayed, two_d_plain, weight_decay),
            hint=_hint(),
        )
    for p in trainable:
        if p.dim() >= 2 and not _close(decay[id(p)], weight_decay):
            got = decay[id(p)]
            chk.fail(
                case,
                say(
                    f"{names[id(p)]} decays with weight_decay {_shown(got)}, expected "
                    f"{_shown(weight_decay)}",
                    f"{names[id(p)]} 的 weight_decay 是 {_shown(got)}，应为 {_shown(weight_decay)}",
                ),
                looks_like=_dropped("weight_decay", _shown(got))
                if _close(got, ADAMW_DEFAULTS["weight_decay"])
                else None,
                hint=_hint(),
            )


def _check_settings(chk: Checker, case: str, optimizer, want: dict) -> None:
    """``lr``, ``betas`` and ``eps`` of every group as asked."""
    for number, group in enumerate(optimizer.param_groups):
        for setting in ("lr", "betas", "eps"):
            got = group.get(setting)
            if _close(got, want[setting]):
                continue
            dropped = _close(got, ADAMW_DEFAULTS[setting])
            chk.fail(
                case,
                say(
                    f"param group {number} has {setting}={_shown(got)}, expected "
                    f"{_shown(want[setting])}",
                    f"第 {number} 个参数组的 {setting}={_shown(got)}，应为 {_shown(want[setting])}",
                ),
                looks_like=_dropped(setting, _shown(got)) if dropped else None,
                hint=_hint(),
            )


def _judge(chk: Checker, case: str, model: nn.Module, optimizer, want: dict) -> None:
    _check_type(chk, case, optimizer)
    _check_membership(chk, case, model, optimizer)
    _check_split(chk, case, model, optimizer, want["weight_decay"])
    _check_settings(chk, case, optimizer, want)


def _errors() -> dict[str, str]:
    """Words of torch's own refusals and the mistake they mean: AdamW refuses a parameter in
    two groups, so the learner's code raises before the check sees its optimizer."""
    return {"more than one parameter group": MISTAKES["twice"]}


# --------------------------------------------------------------------------- bad input


def _refusals(model: nn.Module) -> list[tuple[str, tuple, dict, str]]:
    """``(what is wrong, args, kwargs, mistake key)``: input the reference refuses."""
    return [
        (
            say(
                "model is a list of tensors, not an nn.Module",
                "model 是一个张量列表，而不是 nn.Module",
            ),
            (list(model.parameters())[:2],),
            dict(lr=1e-3),
            "unchecked-model",
        ),
        ("lr=0", (model,), dict(lr=0.0), "unchecked-lr"),
        ("weight_decay=-0.1", (model,), dict(lr=1e-3, weight_decay=-0.1), "unchecked-weight-decay"),
    ]


def _check_refusals(chk: Checker, fn, name: str, model: nn.Module) -> None:
    """Each bad input raises ``TypeError`` or ``ValueError``, as the reference's does."""
    for wrong, args, kwargs, key in _refusals(model):
        case = say(f"{name}(...) with {wrong}", f"{name}(...)，其中 {wrong}")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fn(*args, **kwargs)
        except NotImplementedError:
            raise
        except (TypeError, ValueError):
            continue
        except Exception as error:  # noqa: BLE001 - the learner's error, reported
            kind = type(error).__name__
            chk.fail(
                case,
                say(
                    f"raised {kind}, expected a TypeError or ValueError",
                    f"抛出了 {kind}，应抛出 TypeError 或 ValueError",
                ),
                detail=f"{kind}: {first_line(error)}",
                looks_like=MISTAKES[key],
                hint=_hint(),
                cause=error,
            )
        chk.fail(
            case,
            say(
                "returned an optimizer, expected a TypeError or ValueError",
                "返回了一个优化器，应抛出 TypeError 或 ValueError",
            ),
            looks_like=MISTAKES[key],
            hint=_hint(),
        )


def check_configure_optimizer(fn) -> None:
    """Check ``fn(model, *, lr, weight_decay=0.1, betas=(0.9, 0.95), eps=1e-8) -> AdamW``.

    The reference is ``tfcourse.train.optim.configure_optimizer``: a ``torch.optim.AdamW``
    over the trainable parameters of ``model`` (``requires_grad``; a tied weight once, as
    ``model.parameters()`` lists it) in two groups: those with ``p.dim() >= 2`` (matrices
    and embeddings) with ``weight_decay``, those with ``p.dim() < 2`` (biases, norm gains)
    with ``weight_decay=0``; ``lr``, ``betas`` and ``eps`` in every group. Any grouping that
    gives every parameter that decay passes (three groups, other orders).

    Sub-checks (4): the course's GPT (biases, LayerNorm, tied head) with settings other than
    the defaults; a LLaMA-style GPT (RMSNorm, no biases, rotary positions, untied head); the
    course's GPT with frozen parameters and ``lr`` alone (so the defaults are judged); bad
    input (a list of tensors for ``model``, ``lr=0``, ``weight_decay=-0.1``) raising
    ``TypeError`` or ``ValueError``. Parameters are compared by identity: every trainable
    one exactly once, frozen ones left out. Names the mistake when it is a known one
    (``MISTAKES``: plain Adam, everything or nothing decayed, biases or norm gains decayed,
    the embeddings not decayed, a parameter twice, frozen or missing parameters, copies
    instead of the parameters, a setting dropped, bad input not refused).
    """
    require_function("check_configure_optimizer", fn)
    name = getattr(fn, "__name__", "fn")
    with Checker("configure_optimizer") as chk:
        for case, model, kwargs in _cases(chk.device):
            want = {"weight_decay": 0.1, "betas": (0.9, 0.95), "eps": 1e-8, **kwargs}
            with warnings.catch_warnings():  # torch warns of a duplicate: the check names it
                warnings.simplefilter("ignore")
                optimizer = chk.call(
                    case,
                    say(f"calling your {name}(model, ...)", f"调用你的 {name}(model, ...)"),
                    fn,
                    model,
                    known=_errors(),
                    hint=_hint(),
                    **kwargs,
                )
            _judge(chk, case, model, optimizer, want)
            chk.ok()
        _check_refusals(chk, fn, name, _model(TIED, chk.device))
        chk.ok()
