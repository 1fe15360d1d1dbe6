"""Checks for notebook 07's two parameter counts, each a function the check calls on
several models or configs (tied and untied, with and without biases, another MLP width):
a number typed in, or a formula that ignores a field, fails on the case it ignores.

The models are built on the meta device: shapes without storage, so GPT-2 small costs
nothing to build (its first build on meta pays a one-off import of about a second).
"""

from __future__ import annotations

import numbers

import torch

from ..language import say
from ..nn.config import GPTConfig
from ..nn.model import GPT
from ._harness import Checker, mistake

GPT2_SMALL = GPTConfig.preset("gpt2-small")
# Another model on every axis a formula could hard-code: vocabulary, context, depth, width.
SMALL_UNTIED = GPTConfig(
    vocab_size=96,
    max_seq_len=32,
    n_layers=2,
    n_heads=4,
    d_model=64,
    d_hidden=96,
    tie_weights=False,
)


def _meta_gpt(config: GPTConfig) -> GPT:
    with torch.device("meta"):
        return GPT(config)


def _count(module) -> int:
    return sum(p.numel() for p in module.parameters())


def _as_int(chk: Checker, case: str, n) -> int:
    """``n`` as an int, or a failure naming what came back instead."""
    if isinstance(n, torch.Tensor) and n.numel() == 1 and not n.is_floating_point():
        n = n.item()
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        chk.fail(
            case,
            say(
                f"got {n!r} ({type(n).__name__}), expected an int",
                f"得到的是 {n!r}（{type(n).__name__}），应为 int",
            ),
            hint=say(
                "count with integers: sum(p.numel() for p in ...), // instead of /",
                "用整数计数：sum(p.numel() for p in ...)，用 // 而不是 /",
            ),
        )
    return int(n)


def _same_for_all(answers: dict[str, tuple[int, int]], n: int, want: int) -> str | None:
    """The diagnosis of an answer that an earlier, different case also got."""
    if any(got == n and expected != want for got, expected in answers.values()):
        return mistake(
            "the same number as for a different model: count from what the call is given, "
            "not a number computed once",
            "与另一个不同模型的答案相同：要根据这次调用传进来的内容计数，而不是用一个算好的数",
        )
    return None


def _hard_coded(answers: dict[str, tuple[int, int]], n: int, want: int, everywhere) -> str | None:
    """The diagnosis of an answer that an earlier, different case also got, and that
    ``everywhere(n)`` finds the function giving for every case: a number typed in."""
    if _same_for_all(answers, n, want) is None or not everywhere(n):
        return None
    return mistake(
        f"the same number as for a different model: a hard-coded count ({n:,} for every "
        f"config), not computed from the config's fields",
        f"与另一个不同模型的答案相同：这是一个写死的数（每个配置都得到 {n:,}），"
        f"而不是根据配置的各个字段算出来的",
    )


def _judge_count(
    chk: Checker,
    answers: dict,
    first: bool,
    case: str,
    got,
    want: int,
    diagnose,
    hint: str,
    everywhere=None,
) -> None:
    """One case of a counting check: an int (the first case's own sub-check), then the
    count, diagnosed as a number typed in (``everywhere(n)``: the function gives ``n`` for
    every case), by ``diagnose(n)`` or as the answer of another case."""
    n = _as_int(chk, case, got)
    if first:
        chk.ok()
    if n != want:
        typed_in = _hard_coded(answers, n, want, everywhere) if everywhere else None
        chk.fail(
            case,
            say(f"got {n:,}, expected {want:,}", f"得到 {n:,}，应为 {want:,}"),
            looks_like=typed_in or diagnose(n) or _same_for_all(answers, n, want),
            hint=hint,
        )
    answers[case] = (n, want)
    chk.ok()


# ---------------------------------------------------------------------------------------------
# What bias=False removes

# (what the case changes from GPT-2 small, its config); labelled when a check runs, in the
# reader's language of that moment.
BIAS_CASES = (
    ("", GPT2_SMALL),
    ("bias=False", GPT2_SMALL.replace(bias=False)),
    (None, SMALL_UNTIED),
)


def _label(change: str | None) -> str:
    if change is None:
        return say("a small untied GPT, d_hidden=96", "一个不绑定权重的小 GPT，d_hidden=96")
    return say(f"gpt2-small, {change}", f"gpt2-small，{change}") if change else "gpt2-small"


def _none_bias() -> str:
    return mistake(
        "a Linear without a bias (bias=None, e.g. the LM head) is counted: skip layers whose "
        "bias is None",
        "把没有偏置的 Linear（bias=None，比如语言模型头）也算了进去：bias 为 None 的层要跳过",
    )


def _bias_diagnosis(model: GPT, n: int, want: int) -> str | None:
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    with_bias = [m for m in linears if m.bias is not None]
    norm_biases = sum(
        p.numel() for name, p in model.named_parameters() if name.endswith("bias")
    ) - sum(m.bias.numel() for m in with_bias)
    table = [
        (
            want + norm_biases,
            mistake(
                "the LayerNorm biases are counted too; bias=False removes only the Linear "
                "layers' biases (norms keep theirs)",
                "把层归一化（LayerNorm）的偏置也算进去了；bias=False 只去掉 Linear 层的偏置"
                "（归一化层保留自己的偏置）",
            ),
        ),
        (
            len(with_bias),
            mistake(
                "the Linear layers with a bias are counted, not their bias entries (numel)",
                "数的是带偏置的 Linear 层的个数，而不是偏置元素的个数（numel）",
            ),
        ),
        (
            want + sum(m.weight.numel() for m in with_bias),
            mistake(
                "the Linear layers' weights are counted too, not only their biases",
                "把 Linear 层的权重也算进去了，应该只数偏置",
            ),
        ),
        (
            _count(model),
            mistake(
                "that is every parameter of the model, not the Linear biases",
                "这是模型的全部参数，而不是 Linear 层的偏置",
            ),
        ),
    ]
    if want and n == 0:
        return mistake(
            "only the module's direct children are looked at: module.modules() also yields "
            "the nested ones (the blocks' layers)",
            "只看了模块的直接子模块：module.modules() 还会给出嵌套在里面的层（各个块里的层）",
        )
    return next((why for value, why in table if value == n), None)


def check_bias_savings(fn) -> None:
    """Check a count of the parameters that ``bias=False`` removes.

    Interface: ``fn(module) -> int``: the number of bias entries of every ``nn.Linear``
    inside ``module`` that has one (the LayerNorms keep theirs under ``bias=False``).
    Called on GPTs built on the meta device: GPT-2 small, GPT-2 small with
    ``bias=False`` (0: nothing left to remove) and a small untied GPT with another MLP
    width. The expected count is what ``bias=False`` saves: the model's parameters minus
    those of the same model with ``bias=False``.

    Sub-checks (4): an int for GPT-2 small; its count; 0 with bias=False; the small GPT.
    """
    with Checker("bias_savings") as chk:
        answers: dict[str, tuple[int, int]] = {}
        for number, (change, config) in enumerate(BIAS_CASES):
            case = _label(change)
            model = _meta_gpt(config)
            want = _count(model) - _count(_meta_gpt(config.replace(bias=False)))
            got = chk.call(
                case,
                say("calling your function on the model", "用这个模型调用你的函数"),
                fn,
                model,
                known={"NoneType": _none_bias()},
            )
            _judge_count(
                chk,
                answers,
                number == 0,
                case,
                got,
                want,
                lambda n, model=model, want=want: _bias_diagnosis(model, n, want),
                say(
                    "add up m.bias.numel() for every nn.Linear m in module.modules() "
                    "whose bias is not None",
                    "对 module.modules() 里每个 bias 不为 None 的 nn.Linear m，"
                    "把 m.bias.numel() 加起来",
                ),
            )


# ---------------------------------------------------------------------------------------------
# GPT-2 small's parameter count, as a function of the config

PARAM_CASES = (
    ("", GPT2_SMALL),
    ("tie_weights=False", GPT2_SMALL.replace(tie_weights=False)),
    ("bias=False", GPT2_SMALL.replace(bias=False)),
    ("d_hidden=2048", GPT2_SMALL.replace(d_hidden=2048)),
    (None, SMALL_UNTIED),
)


def _params_diagnosis(config: GPTConfig, n: int, want: int) -> str | None:
    V, T, D = config.vocab_size, config.max_seq_len, config.d_model
    block = _count(_meta_gpt(config.replace(n_layers=1)).blocks[0])
    table = []
    if config.tie_weights:
        table.append(
            (
                want + V * D,
                mistake(
                    "the LM head is counted as its own matrix; a tied head shares the token "
                    "embedding, so it counts once",
                    "把语言模型头（LM head）算成了一个独立的矩阵；绑定的输出头与词元嵌入"
                    "共用同一个矩阵，只算一次",
                ),
            )
        )
    else:
        table.append(
            (
                want - V * D,
                mistake(
                    "the head is left out; with tie_weights=False it is its own V x D matrix",
                    "漏掉了输出头；tie_weights=False 时它是一个独立的 V x D 矩阵",
                ),
            )
        )
    if config.bias:
        without = _meta_gpt(config.replace(bias=False)).num_params()
        table.append(
            (
                without,
                mistake(
                    "the Linear biases are left out (that is bias=False)",
                    "漏掉了 Linear 层的偏置（那是 bias=False 的情形）",
                ),
            )
        )
    else:
        table.append(
            (
                _meta_gpt(config.replace(bias=True)).num_params(),
                mistake(
                    "the Linear biases are counted although config.bias is False",
                    "config.bias 为 False，却仍然算上了 Linear 层的偏置",
                ),
            )
        )
    if config.d_hidden is not None:
        table.append(
            (
                _meta_gpt(config.replace(d_hidden=None)).num_params(),
                mistake(
                    "the MLP width is taken as 4 * d_model; config.d_hidden sets it when given",
                    "MLP 宽度按 4 * d_model 算了；给定 config.d_hidden 时应以它为准",
                ),
            )
        )
    table += [
        (
            want - V * D - T * D,
            mistake(
                "the embedding tables are left out (num_params(non_embedding=True))",
                "漏掉了嵌入表（相当于 num_params(non_embedding=True)）",
            ),
        ),
        (want - V * D, mistake("the token embedding is left out", "漏掉了词元嵌入")),
        (
            want - T * D,
            mistake(
                "the position embedding table (max_seq_len x d_model) is left out",
                "漏掉了位置嵌入表（max_seq_len x d_model）",
            ),
        ),
        (
            want - 2 * D,
            mistake("the final LayerNorm is left out", "漏掉了最后的层归一化（LayerNorm）"),
        ),
        (
            want + (50304 - V) * D,
            mistake(
                "the vocabulary is padded to 50304 (nanoGPT's trick); config.vocab_size is "
                "the count",
                "词表被填充到了 50304（nanoGPT 的技巧）；应按 config.vocab_size 计数",
            ),
        ),
        (
            want + V,
            mistake(
                "the LM head has a bias; GPT-2's has none",
                "语言模型头（LM head）带了偏置；GPT-2 的没有",
            ),
        ),
        (
            want - block,
            mistake(
                "one block is missing (n_layers - 1 blocks)", "少了一个块（只算了 n_layers - 1 个）"
            ),
        ),
    ]
    return next((why for value, why in table if value == n), None)


def check_gpt2_small_params(fn) -> None:
    """Check a parameter count of ``tfcourse.GPT`` written as a function of its config.

    Interface: ``fn(config: GPTConfig) -> int``: the number of distinct parameters of
    ``tfcourse.GPT(config)`` (tied matrices counted once), i.e. ``GPT(config).num_params()``,
    for the GPT-2 family (learned positions, LayerNorm, GELU MLP). Called on GPT-2 small
    (``GPTConfig.preset("gpt2-small")``), on it untied, without biases and with
    ``d_hidden=2048``, and on a small untied GPT; each expected count comes from the
    reference model built on the meta device.

    Sub-checks (6): an int for GPT-2 small; then one per config.
    """

    def everywhere(n: int) -> bool:
        """Whether ``fn`` gives ``n`` for every config of the cases (a number typed in)."""
        for _, config in PARAM_CASES:
            try:
                got = fn(config)
            except Exception as error:  # a function that fails is not a constant
                if type(error).__module__.startswith("tfcourse."):
                    raise  # the grader's own (a sealed worker that died): not the learner's
                return False
            if isinstance(got, torch.Tensor) and got.numel() == 1:
                got = got.item()
            if isinstance(got, bool) or not isinstance(got, numbers.Integral) or got != n:
                return False
        return True

    with Checker("gpt2_small_params") as chk:
        answers: dict[str, tuple[int, int]] = {}
        for number, (change, config) in enumerate(PARAM_CASES):
            case = _label(change)
            want = _meta_gpt(config).num_params()
            got = chk.call(
                case,
                say("calling your function on the config", "用这个配置调用你的函数"),
                fn,
                config,
            )
            _judge_count(
                chk,
                answers,
                number == 0,
                case,
                got,
                want,
                lambda n, config=config, want=want: _params_diagnosis(config, n, want),
                everywhere=everywhere,
                hint=say(
                    "embeddings (token and position) + n_layers blocks (MLP width "
                    "d_hidden or 4 * d_model, Linear biases only when config.bias) + "
                    "final norm + the head when it is not tied",
                    "嵌入（词元和位置）+ n_layers 个块（MLP 宽度取 d_hidden，没有时为 "
                    "4 * d_model；只有 config.bias 为真时才有 Linear 偏置）+ 最后的归一化层"
                    " + 不绑定时的输出头",
                ),
            )
