"""Checks for notebook 07: the GPT assembly (its parameter counts: ``counting.py``)."""

from __future__ import annotations

import math

import torch

from ..language import say
from ..nn.config import GPTConfig
from ..nn.model import GPT
from ._harness import Checker, close, describe_call, mistake
from ._module_cases import backward_case
from ._parameters import build, load_reference, randomize_

# Small enough for a fraction of a second on a CPU; full-length inputs exercise every position.
GPT_CONFIGS = (
    GPTConfig(vocab_size=50, max_seq_len=16, n_layers=2, n_heads=4, d_model=32),
    GPTConfig(vocab_size=37, max_seq_len=8, n_layers=1, n_heads=2, d_model=24, bias=False),
    # Notebook 10's rotary positions: they live in attention, and the model has no table.
    GPTConfig(vocab_size=29, max_seq_len=8, n_layers=1, n_heads=2, d_model=16, positional="rope"),
)


def _gpt(
    ref,
    idx,
    *,
    positions=True,
    offset=0,
    final_norm=True,
    scale=False,
    blocks="all",
    output="logits",
):
    """``ref``'s forward pass with one deliberate deviation at a time (for diagnosis)."""
    T = idx.shape[1]
    x = ref.tok_emb(idx)
    if scale:
        x = x * math.sqrt(x.shape[-1])
    if positions:
        x = x + ref.pos_emb.weight[offset : offset + T]
    order = {
        "all": list(ref.blocks),
        "reversed": list(ref.blocks)[::-1],
        "first": list(ref.blocks)[:1],
    }[blocks]
    for block in order:
        x = block(x)
    if final_norm:
        x = ref.final_norm(x)
    logits = ref.lm_head(x)
    return {"logits": logits, "probs": logits.softmax(-1), "log_probs": logits.log_softmax(-1)}[
        output
    ]


def _gpt_mistakes():
    return [
        (mistake("no position embeddings are added", "没有加上位置嵌入"), dict(positions=False)),
        (
            mistake("position ids start at 1 instead of 0", "位置编号从 1 开始了，而不是从 0 开始"),
            dict(offset=1),
        ),
        (
            mistake(
                "the final norm is not applied before lm_head",
                "在 lm_head 之前没有做最后的归一化（final_norm）",
            ),
            dict(final_norm=False),
        ),
        (
            mistake(
                "the token embeddings are scaled by sqrt(d_model) (GPT-2 does not)",
                "词元嵌入乘以了 sqrt(d_model)（GPT-2 不这样做）",
            ),
            dict(scale=True),
        ),
        (
            mistake("the blocks run in reverse order", "各个块按相反的顺序执行了"),
            dict(blocks="reversed"),
        ),
        (mistake("only the first block is applied", "只执行了第一个块"), dict(blocks="first")),
        (
            mistake(
                "forward returns probabilities (softmax) instead of logits",
                "forward 返回的是概率（softmax），而不是 logits",
            ),
            dict(output="probs"),
        ),
        (
            mistake(
                "forward returns log-probabilities (log_softmax) instead of logits",
                "forward 返回的是对数概率（log_softmax），而不是 logits",
            ),
            dict(output="log_probs"),
        ),
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

    ``forward(idx (B, T) long) -> logits (B, T, V)``. With ``config.positional == "rope"``
    there is no table: ``pos_emb`` is None and nothing is added (the rotary positions are
    inside attention). The configs used are ``GPT_CONFIGS`` (GPT-2 style: learned positions,
    tanh GELU, tied head; dropout 0; the last with rotary positions).

    ``config.dropout`` is applied to the embeddings (``drop``, an ``nn.Dropout``) before the
    first block, and only in train mode.

    Sub-checks (9): parameter layout; lm_head tied to tok_emb; idx (2, 8) not modified
    in place; logits and parameter gradients for batch 1, T=1, then for (2, 16), the
    full context; a second config (1 layer, d_model 24, bias=False) on (3, 8); a third
    with rotary positions on (2, 8); the first with dropout=0.5 in train mode and the
    blocks' output projections zeroed (the blocks pass x on, so only the embedding
    dropout can change the logits: it must); a fresh model, with the weights its own
    ``__init__`` gave it, scores random tokens within ``INITIAL_LOSS_MARGIN`` of ln V
    (GPT-2's initialization; PyTorch's defaults start tens of nats above), and its weights
    have GPT-2's statistics: std 0.02 for every Linear and Embedding weight and the position
    table, 0.02 / sqrt(2 * n_layers) for the projections that write into the residual stream
    (``out_proj``, ``fc_out``), Linear biases zero (``INIT_STD_TOLERANCE``).
    """
    with Checker("GPT") as chk:
        gen = chk.generator(8)

        def pair(case, config):
            learner = build(chk, case, cls, config).eval()
            if config.positional == "rope":
                _no_table(chk, case, learner)
            reference = randomize_(GPT(config), gen).to(chk.device, chk.dtype).eval()
            load_reference(chk, case, learner, reference, bias=config.bias)
            return learner, reference

        config = GPT_CONFIGS[0]
        call = describe_call(cls, ("config",))
        case = say(
            f"parameter layout of {call} (GPT_CONFIGS[0])", f"{call} 的参数布局（GPT_CONFIGS[0]）"
        )
        learner, reference = pair(case, config)
        chk.ok()

        case = say("weight tying (config.tie_weights=True)", "权重绑定（config.tie_weights=True）")
        head, embedding = getattr(learner, "lm_head", None), getattr(learner, "tok_emb", None)
        if getattr(head, "weight", None) is not getattr(embedding, "weight", 0):
            chk.fail(
                case,
                say(
                    "lm_head.weight is not the same tensor as tok_emb.weight",
                    "lm_head.weight 与 tok_emb.weight 不是同一个张量",
                ),
                looks_like=mistake(
                    "the weights are not tied (two matrices, or a copy)",
                    "权重没有绑定（是两个矩阵，或是一份拷贝）",
                ),
                hint=say(
                    "after building both: self.lm_head.weight = self.tok_emb.weight",
                    "两者都建好之后：self.lm_head.weight = self.tok_emb.weight",
                ),
            )
        chk.ok()

        # Shorter than the context first: a position off by one (ids from 1) is then named
        # before the full context, where such a model cannot run at all.
        case = say("idx (2, 8): idx not modified in place", "idx (2, 8)：idx 不得被原地修改")
        idx = torch.randint(config.vocab_size, (2, 8), generator=gen).to(chk.device)
        idx_seen = idx.clone()
        with torch.no_grad():
            chk.call(case, say("calling your model(idx)", "调用你的 model(idx)"), learner, idx_seen)
        chk.unchanged(case, "idx", idx, idx_seen)
        chk.ok()

        for seed, shape in enumerate([(1, 1), (2, 16)]):
            case = f"idx {shape}" + (
                say(": batch 1, T=1", "：批大小 1，T=1") if shape == (1, 1) else ""
            )
            idx = torch.randint(config.vocab_size, shape, generator=gen).to(chk.device)
            _gpt_case(chk, case, learner, reference, idx, seed)
            chk.ok()

        further = (  # (config, batch, what is new in it)
            (1, 3, say("1 layer, d_model 24, bias=False", "1 层，d_model 24，bias=False")),
            (2, 2, say("positional='rope': no position table", "positional='rope'：没有位置表")),
        )
        for index, batch, what in further:
            config = GPT_CONFIGS[index]
            case = say(
                f"GPT_CONFIGS[{index}] ({what}), idx ({batch}, 8)",
                f"GPT_CONFIGS[{index}]（{what}），idx ({batch}, 8)",
            )
            learner, reference = pair(case, config)
            idx = torch.randint(config.vocab_size, (batch, 8), generator=gen).to(chk.device)
            _gpt_case(chk, case, learner, reference, idx, index + 1)
            chk.ok()

        _embedding_dropout_case(chk, cls, gen)
        chk.ok()

        _initial_loss_case(chk, cls, gen)
        chk.ok()


P_DROP = 0.5


def _embedding_dropout_case(chk: Checker, cls, gen: torch.Generator) -> None:
    """GPT_CONFIGS[0] with dropout=P_DROP in train mode, every block's attention and MLP
    output projections zero: the (pre-LN) blocks then add exactly 0 to x, in train mode
    too, so only a dropout outside the blocks, the embeddings', can make the train-mode
    logits differ from the eval-mode ones. Nothing depends on the random stream (the
    learner's code may run in another process when graded)."""
    config = GPT_CONFIGS[0].replace(dropout=P_DROP)
    case = say(
        f"GPT_CONFIGS[0] with dropout={P_DROP}, idx (4, 16), train mode, the blocks' output "
        f"projections zeroed: the embeddings must be dropped",
        f"GPT_CONFIGS[0]，dropout={P_DROP}，idx (4, 16)，训练模式，各块的输出投影置零："
        f"嵌入必须经过 dropout",
    )
    learner = build(chk, case, cls, config).eval()
    reference = randomize_(GPT(config), gen)
    with torch.no_grad():
        for block in reference.blocks:
            for layer in (block.attn.out_proj, block.mlp.fc_out):
                layer.weight.zero_()
                layer.bias.zero_()
    reference = reference.to(chk.device, chk.dtype).eval()
    load_reference(chk, case, learner, reference, bias=config.bias)
    idx = torch.randint(config.vocab_size, (4, 16), generator=gen).to(chk.device)
    with torch.no_grad():
        expected = reference(idx)
        got = chk.call(
            case,
            say("calling your model(idx) in train mode", "在训练模式下调用你的 model(idx)"),
            learner.train(),
            idx,
        )
    learner.eval()
    if not (isinstance(got, torch.Tensor) and got.shape == expected.shape):
        chk.compare(case, say("train-mode logits", "训练模式下的 logits"), got, expected)
    if close(got, expected, chk.rtol, chk.atol):
        chk.fail(
            case,
            say(
                f"in train mode (dropout={P_DROP}) the logits equal the eval-mode ones",
                f"训练模式下（dropout={P_DROP}），logits 与评估模式下相同",
            ),
            detail=say(
                "the blocks pass x on unchanged here, so only the embeddings' dropout can act",
                "这里各块只是原样传递 x，能起作用的只有嵌入之后的 dropout",
            ),
            looks_like=mistake(
                "the embeddings are not dropped: self.drop = nn.Dropout(config.dropout) is "
                "missing or never applied to tok_emb(idx) + pos_emb(T) before the blocks",
                "嵌入没有经过 dropout：缺少 self.drop = nn.Dropout(config.dropout)，或者在进入"
                "各块之前没有把它作用在 tok_emb(idx) + pos_emb(T) 上",
            ),
        )


# A fresh model should know nothing yet: its loss on random tokens near ln V, a uniform guess.
# tc.GPT starts within 0.03 of it on GPT_CONFIGS[0] (seeds 0-2); PyTorch's default
# initialization (nn.Embedding from N(0, 1), a tied head) starts at 27-29 nats, ln V = 3.9.
INITIAL_LOSS_MARGIN = 0.5


def _initial_loss_case(chk: Checker, cls, gen: torch.Generator) -> None:
    """GPT_CONFIGS[0] built by the learner's class and used as its ``__init__`` left it (no
    reference weights loaded): the mean cross-entropy of its logits on random tokens."""
    config = GPT_CONFIGS[0]
    case = say(
        "a fresh GPT_CONFIGS[0] model, your own initial weights, random tokens (4, 16)",
        "新建的 GPT_CONFIGS[0] 模型，用你自己的初始权重，随机词元 (4, 16)",
    )
    learner = build(chk, case, cls, config).eval()
    idx = torch.randint(config.vocab_size, (4, 16), generator=gen).to(chk.device)
    targets = torch.randint(config.vocab_size, (4, 16), generator=gen).to(chk.device)
    with torch.no_grad():
        logits = chk.call(case, say("calling your model(idx)", "调用你的 model(idx)"), learner, idx)
    shape = (4, 16, config.vocab_size)
    if not (isinstance(logits, torch.Tensor) and tuple(logits.shape) == shape):
        zeros = torch.zeros(shape, device=chk.device, dtype=chk.dtype)
        chk.compare(case, say("your logits", "你的 logits"), logits, zeros)
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, config.vocab_size).double(), targets.reshape(-1)
    ).item()
    uniform = math.log(config.vocab_size)
    if not loss < uniform + INITIAL_LOSS_MARGIN:  # NaN fails too
        chk.fail(
            case,
            say(
                f"a fresh model's loss is {loss:.2f}, expected about ln V = {uniform:.2f} "
                f"(at most {uniform + INITIAL_LOSS_MARGIN:.2f})",
                f"新建模型的损失是 {loss:.2f}，应约为 ln V = {uniform:.2f}"
                f"（至多 {uniform + INITIAL_LOSS_MARGIN:.2f}）",
            ),
            looks_like=mistake(
                "the weights keep PyTorch's default initialization: nn.Embedding draws from "
                "N(0, 1), so the tied head's first logits are huge and confidently wrong",
                "权重还是 PyTorch 的默认初始化：nn.Embedding 从 N(0, 1) 中抽取，于是绑定的输出头"
                "一开始给出的 logits 又大又笃定，而且是错的",
            ),
            hint=_init_hint(),
        )
    _initial_weights(chk, case, learner, config.n_layers)


# GPT-2's initialization as statistics a fresh model's weights must show: the std of every
# Linear and Embedding weight (and the position table) 0.02, the projections that write into
# the residual stream 0.02 / sqrt(2 * n_layers), every Linear bias zero. The smallest tensor
# checked has 512 entries, so a sample std is within 3 % of its scale (one standard error);
# 20 % leaves six of them and still tells 0.02 from 0.02 / sqrt(2 * 2) = 0.01.
INIT_STD = 0.02
INIT_STD_TOLERANCE = 0.2
RESIDUAL_PROJECTIONS = ("attn.out_proj.weight", "mlp.fc_out.weight", "mlp.down_proj.weight")


def _initial_weights(chk: Checker, case: str, learner, n_layers: int) -> None:
    """The fresh model's weights have GPT-2's statistics (``INIT_STD``); names the usual slips:
    the residual projections unscaled, only the embeddings initialized, biases left random."""
    scaled = INIT_STD / math.sqrt(2 * n_layers)
    found = {}  # name -> (std, expected)
    random_bias = []
    for module_name, module in learner.named_modules():
        if not isinstance(module, torch.nn.Linear | torch.nn.Embedding):
            continue
        name = f"{module_name}.weight"
        expected = scaled if name.endswith(RESIDUAL_PROJECTIONS) else INIT_STD
        found[name] = (module.weight.detach().double().std().item(), expected)
        bias = getattr(module, "bias", None)
        if isinstance(bias, torch.Tensor) and bias.detach().abs().max().item() != 0:
            random_bias.append(f"{module_name}.bias")
    table = getattr(learner, "pos_emb", None)
    if isinstance(getattr(table, "weight", None), torch.Tensor):
        found["pos_emb.weight"] = (table.weight.detach().double().std().item(), INIT_STD)
    off = {n: (std, want) for n, (std, want) in found.items() if not _near(std, want)}
    if not off and random_bias:
        chk.fail(
            case,
            say(f"{random_bias[0]} is not zero", f"{random_bias[0]} 不是零"),
            looks_like=mistake(
                "the biases keep PyTorch's default (random) initialization: GPT-2 sets them "
                "to zero",
                "偏置还是 PyTorch 默认的随机初始化：GPT-2 把它们置为零",
            ),
            hint=_init_hint(),
        )
    if not off:
        return
    name, (std, want) = next(iter(off.items()))
    residual = [n for n in found if n.endswith(RESIDUAL_PROJECTIONS)]
    if residual and set(off) == set(residual) and all(_near(found[n][0], INIT_STD) for n in off):
        looks = mistake(
            f"the projections that write into the residual stream (out_proj, fc_out) are not "
            f"scaled: GPT-2 draws them from N(0, 0.02 / sqrt(2 * n_layers)), here std "
            f"{scaled:.4f}, so that the stream's variance does not grow with depth",
            f"写入残差流的投影（out_proj、fc_out）没有缩放：GPT-2 从 "
            f"N(0, 0.02 / sqrt(2 * n_layers)) 中抽取它们，这里的标准差是 {scaled:.4f}，"
            f"这样残差流的方差才不会随深度增长",
        )
    elif _near(found.get("tok_emb.weight", (0, INIT_STD))[0], INIT_STD) and any(
        n.startswith("blocks.") for n in off
    ):
        looks = mistake(
            "only the embeddings are initialized: the Linear layers keep PyTorch's default "
            "(uniform, std 1 / sqrt(3 * fan_in))",
            "只初始化了嵌入：Linear 层还是 PyTorch 的默认初始化（均匀分布，标准差为 "
            "1 / sqrt(3 * fan_in)）",
        )
    else:
        looks = None
    chk.fail(
        case,
        say(
            f"a fresh model's {name}: std {std:.4f}, expected {want:.4f}",
            f"新建模型的 {name}：标准差 {std:.4f}，应为 {want:.4f}",
        ),
        looks_like=looks,
        hint=_init_hint(),
    )


def _near(std: float, expected: float) -> bool:
    return abs(std - expected) <= INIT_STD_TOLERANCE * expected


def _init_hint() -> str:
    return say(
        "at the end of __init__, initialize like GPT-2: every Linear and Embedding "
        "weight from N(0, 0.02), biases zero, and the projections that write into the "
        "stream (out_proj, fc_out) from N(0, 0.02 / sqrt(2 * n_layers))",
        "在 __init__ 的最后按 GPT-2 的方式初始化：每个 Linear 和 Embedding 的权重取自 "
        "N(0, 0.02)，偏置置零，写入残差流的投影（out_proj、fc_out）取自 "
        "N(0, 0.02 / sqrt(2 * n_layers))",
    )


def _no_table(chk: Checker, case: str, learner) -> None:
    """With rotary positions the model has no position table (``pos_emb`` is None)."""
    table = getattr(learner, "pos_emb", None)
    if isinstance(table, torch.nn.Module) and any(True for _ in table.parameters()):
        chk.fail(
            case,
            say(
                "your model has a pos_emb table; tc.GPT has none with config.positional='rope'",
                "你的模型有 pos_emb 位置表；config.positional='rope' 时 tc.GPT 没有这张表",
            ),
            looks_like=mistake(
                "a learned position table is built although config.positional is 'rope'",
                "config.positional 为 'rope' 时仍然建了一张可学习的位置表",
            ),
            hint=say(
                "self.pos_emb = None unless config.positional == 'learned', and add positions "
                "in forward only when there is a table",
                "只有 config.positional == 'learned' 时才建位置表，否则 self.pos_emb = None；"
                "forward 里也只在有位置表时才加上位置",
            ),
        )


def _gpt_case(chk: Checker, case: str, learner, reference, idx, seed: int) -> None:
    expected = reference(idx)
    got = chk.call(case, say("calling your model(idx)", "调用你的 model(idx)"), learner, idx)
    variants = [(label, lambda o=o: _gpt(reference, idx, **o)) for label, o in _gpt_mistakes()]
    chk.compare(
        case,
        say("logits tensor", "logits 张量"),
        got,
        expected,
        variants=variants,
        hint=say(
            "logits (B, T, vocab_size) for every position",
            "每个位置都要给出 logits，形状为 (B, T, vocab_size)",
        ),
    )
    backward_case(
        chk,
        case,
        reference,
        learner,
        expected,
        got,
        seed=seed + 300,
        what="logits",
        variants=lambda: variants,
    )
