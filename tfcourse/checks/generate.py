"""Check for notebook 08: the learner's sampler, ``generate(model, idx, max_new_tokens, ...)``.

Sampling is random, but not when the random numbers are shared: the check and the learner's
code draw from twin ``torch.Generator``s, one ``torch.multinomial(probs, 1, generator=...)``
call per new token, so a correct sampler returns exactly the reference's ids. When the ids
differ, the same sampler with one known mistake (``MISTAKES``) is run with a fresh twin of the
generator, and the one that reproduces the learner's ids is named. The model is a
``InferenceProbe``: it refuses training mode, gradients and over-long contexts, each with a
message this check turns into a named mistake, and its logits depend on every token and
position of the context.
"""

from __future__ import annotations

import torch

from ..language import say
from ..nn.config import GPTConfig
from ..train.inference_probe import GRADIENTS_ON, TOO_LONG, TRAINING_MODE, InferenceProbe
from ._harness import Checker, Mistakes, mistake, require_function
from .cases import case_int, case_seed

CONFIG = GPTConfig(vocab_size=12, max_seq_len=6, n_layers=1, n_heads=1, d_model=8)
B = 32  # prompts per case: enough draws that a changed distribution changes some of them


def _mistakes() -> dict[str, str]:
    # The first replay that reproduces the learner's ids is named. Only the top-p case can
    # tell the top-p mistakes apart, and a sampler reaching it got top-k right in the cases
    # before: so they come first (with top_k 8 of 12, top-p measured before top-k's cut
    # draws as if top-k were ignored).
    return {
        "top-p-drops-crossing": mistake(
            "top-p drops the token that crosses p (it keeps only tokens whose cumulative mass "
            "is <= p): keep a token while the mass of the tokens sorted before it is < p, so "
            "the kept ones reach p",
            "top-p 丢掉了让累计概率越过 p 的那个词元（只保留了累计概率 <= p 的词元）："
            "排在它前面的词元的概率之和 < p 时就保留它，这样保留下来的词元合起来才能达到 p",
        ),
        "top-p-ascending": mistake(
            "top-p sorts the probabilities in ascending order, so it keeps the least likely "
            "tokens: sort them with descending=True",
            "top-p 把概率按升序排列，结果保留的是最不可能的词元：排序时要用 descending=True",
        ),
        "top-p-before-temperature": mistake(
            "top-p measures the mass without the temperature (softmax of the logits before they "
            "are divided by it) while the draw uses it: cut on softmax(logits / temperature)",
            "top-p 计算累计概率时没有用温度（用的是除以温度之前的 logits 的 softmax），"
            "而抽样时却用了温度：应该在 softmax(logits / temperature) 上截断",
        ),
        "top-p-before-top-k": mistake(
            "top-p measures the mass on the whole distribution, before top-k's cut: after top-k, "
            "take the softmax of the kept logits (renormalised) and cut on that",
            "top-p 是在 top-k 截断之前、在整个分布上计算累计概率的：应该在 top-k 之后，"
            "对保留下来的 logits 重新做 softmax（重新归一化），再在它上面截断",
        ),
        "no-top-p": mistake(
            "top_p is ignored: tokens outside the nucleus can still be sampled",
            "没有用 top_p：核采样本该截掉的词元仍可能被采样",
        ),
        "temperature-after-softmax": mistake(
            "the temperature is applied after the softmax, or not at all (probabilities divided "
            "by a constant are the same distribution): divide the logits by it",
            "温度用在了 softmax 之后，或者根本没用（概率整体除以一个常数，分布并不变）："
            "应该用 logits 除以温度",
        ),
        "top-k-plus-one": mistake(
            "top-k keeps k + 1 tokens: the k-th largest logit is the threshold, and only "
            "logits below it become -inf",
            "top-k 保留了 k + 1 个词元：阈值是第 k 大的 logit，只有比它小的才设为 -inf",
        ),
        "no-top-k": mistake(
            "top_k is ignored: every token can still be sampled",
            "没有用 top_k：所有词元都仍可能被采样",
        ),
        "argmax": mistake(
            "the most likely token is taken (argmax) instead of sampling from the softmax",
            "直接取了最可能的词元（argmax），而没有从 softmax 分布中采样",
        ),
        "first-position": mistake(
            "the logits of the first position are used: the next token is predicted at the "
            "last position, logits[:, -1]",
            "用了第一个位置的 logits：下一个词元是在最后一个位置预测的，即 logits[:, -1]",
        ),
        "crop-first": mistake(
            "the context keeps the first max_seq_len tokens: keep the last ones, "
            "idx[:, -max_seq_len:]",
            "上下文保留的是前 max_seq_len 个词元：应保留最后的，即 idx[:, -max_seq_len:]",
        ),
    }


def _refusals() -> dict[str, str]:
    """Errors the probe raises, and the mistake each one means."""
    return {
        TRAINING_MODE: mistake(
            "model.eval() is never called: in training mode dropout is on while sampling",
            "从未调用 model.eval()：在训练模式下采样，dropout 仍然开着",
        ),
        GRADIENTS_ON: mistake(
            "no torch.no_grad(): every new token builds an autograd graph for nothing",
            "没有用 torch.no_grad()：每生成一个词元都白白建一张自动求导的计算图",
        ),
        TOO_LONG: mistake(
            "the context is not cropped: once idx is longer than max_seq_len, feed only its "
            "last max_seq_len tokens",
            "没有裁剪上下文：idx 一旦超过 max_seq_len，只把最后 max_seq_len 个词元送进模型",
        ),
    }


MISTAKES = Mistakes(_mistakes)
REFUSALS = Mistakes(_refusals)
# torch.multinomial's refusal of weights below 0 (or -inf, nan): handed the logits, whose
# entries are of either sign, or masked ones (-inf), instead of the softmax's probabilities.
NOT_PROBABILITIES = "probability tensor contains either"


def _logits_drawn() -> str:
    return mistake(
        "torch.multinomial is given the logits instead of the probabilities: its weights must "
        "be >= 0 and finite, so draw from softmax(logits)",
        "传给 torch.multinomial 的是 logits 而不是概率：它的权重必须 >= 0 且有限，"
        "所以要从 softmax(logits) 中采样",
    )


def _no_token_left() -> str:
    return mistake(
        "torch.multinomial got a row of nan: top-p dropped every token of a row (all logits "
        "-inf), which happens when the most likely token alone crosses p and the token that "
        "crosses p is dropped: keep it, so the most likely token always stays",
        "torch.multinomial 拿到了一整行 nan：top-p 把某一行的词元全都丢掉了（logits 全是 -inf）。"
        "当最可能的那个词元单独就越过 p，而越过 p 的词元又被丢掉时，就会这样：应该保留它，"
        "这样最可能的词元总会留下",
    )


def _sample(model, idx, max_new_tokens, temperature, top_k, generator, mistake_key="", top_p=None):
    """The reference sampler, or the same with one of ``MISTAKES`` (by key) made."""
    was_training = model.training
    model.eval()
    L = model.config.max_seq_len
    with torch.no_grad():
        for _ in range(max_new_tokens):
            context = idx[:, :L] if mistake_key == "crop-first" else idx[:, -L:]
            logits = model(context)[:, 0 if mistake_key == "first-position" else -1]  # (B, V)
            if mistake_key == "argmax":
                next_id = logits.argmax(dim=-1, keepdim=True)
            else:
                if mistake_key != "temperature-after-softmax":
                    logits = logits / temperature
                full = logits  # before top-k's cut
                if top_k is not None and mistake_key != "no-top-k":
                    k = min(top_k + (mistake_key == "top-k-plus-one"), logits.shape[-1])
                    kth = logits.topk(k, dim=-1).values[:, -1:]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                if top_p is not None and mistake_key != "no-top-p":
                    measured = {
                        "top-p-before-temperature": logits * temperature,
                        "top-p-before-top-k": full,
                    }.get(mistake_key, logits)
                    outside = _outside_nucleus(measured, top_p, mistake_key)
                    logits = logits.masked_fill(outside, float("-inf"))
                next_id = torch.multinomial(logits.softmax(dim=-1), 1, generator=generator)
            idx = torch.cat([idx, next_id], dim=1)  # (B, T + 1)
    model.train(was_training)
    return idx


def _outside_nucleus(logits, top_p, mistake_key=""):
    """``(B, V)`` bool, True for the tokens top-p drops: a token stays while the probability
    of the tokens more likely than it (sorted before it) is below ``top_p``, so the kept ones
    reach ``top_p`` and the most likely token always stays."""
    probs, order = logits.softmax(dim=-1).sort(dim=-1, descending=mistake_key != "top-p-ascending")
    cumulative = probs.cumsum(dim=-1)
    if mistake_key == "top-p-drops-crossing":
        drop = cumulative > top_p
        drop[:, 0] = False  # a learner's version that kept no token raises in multinomial
    else:
        drop = cumulative - probs >= top_p
    return torch.zeros_like(drop).scatter(-1, order, drop)  # back to the vocabulary's order


def _hint() -> str:
    return say(
        "remember the mode, model.eval(), then under torch.no_grad() per new token: crop idx "
        "to its last max_seq_len tokens, logits at the last position / temperature, keep the "
        "top_k largest (the rest -inf), then with top_p keep the most likely tokens until "
        "their softmax mass reaches top_p (the rest -inf), softmax, torch.multinomial(probs, 1, "
        "generator=generator), append; finally put the model back in the mode it was in",
        "先记下模型的模式，调用 model.eval()，然后在 torch.no_grad() 下逐个生成词元：把 idx "
        "裁剪为最后 max_seq_len 个词元，取最后一个位置的 logits 除以温度，只保留最大的 top_k "
        "个（其余设为 -inf），给了 top_p 时再从最可能的词元起依次保留，直到它们的 softmax "
        "概率之和达到 top_p（其余设为 -inf），softmax，torch.multinomial(probs, 1, "
        "generator=generator)，拼接到末尾；最后把模型恢复到原来的模式",
    )


def _cases():
    """(prompt length, new tokens, temperature, top_k, top_p, the model's mode on entry)."""
    return (
        (2, case_int(40, 10, 9, 12), 1.0, None, None, True),  # well past max_seq_len: cropping
        (case_int(41, 4, 2, 5), case_int(42, 5, 3, 7), 0.4, None, None, True),  # sharp
        # top-k where the tail has mass (a high temperature); arrives in eval mode, stays so
        (1, case_int(43, 6, 4, 8), 2.0, 3, None, False),
        # top-p after top-k: p = 0.7 cuts inside the 8 kept tokens (so does the whole
        # distribution's nucleus), and each wrong cut changes some draws, under every salt
        # tried (103); in about a fifth of them the most likely token alone crosses p
        (case_int(44, 2, 1, 4), case_int(45, 8, 6, 10), 1.5, 8, 0.7, True),
    )


def check_generate(fn) -> None:
    """Check ``fn(model, idx, max_new_tokens, *, temperature=1.0, top_k=None, top_p=None,
    generator=None)``.

    ``idx (B, T)`` holds token ids; the function appends ``max_new_tokens`` tokens and returns
    ``(B, T + max_new_tokens)`` (``idx`` itself unchanged). Each new token: the logits of the
    last position for the context cropped to the last ``model.config.max_seq_len`` tokens,
    divided by ``temperature``; with ``top_k``, every logit below the k-th largest set to
    ``-inf``; with ``top_p``, the probabilities ``softmax(logits)`` sorted in descending order
    and every token set to ``-inf`` whose more likely tokens already hold ``top_p`` (the
    token that crosses ``top_p`` stays, so at least one does); then
    ``torch.multinomial(softmax, 1, generator=generator)``. The model runs in eval mode under
    ``torch.no_grad()`` and is put back in the mode it came in. ``top_p`` is passed only in
    the case that uses it.

    Sub-checks (5): prompts of 2 tokens run past ``max_seq_len`` at temperature 1;
    temperature 0.4; top-k 3 at temperature 2 with the model arriving in eval mode; top-p
    0.7 after top-k 8 at temperature 1.5; the prompts unchanged and each model back in its
    mode. Names the mistake when it is a known one (``MISTAKES``, the probe's refusals:
    ``REFUSALS``, ``torch.multinomial``'s refusal of the logits, drawn from instead of the
    probabilities, and of a row that top-p left without a token).
    """
    require_function("check_generate", fn)
    name = getattr(fn, "__name__", "fn")
    with Checker("generate") as chk:
        after = []
        for number, (T, new, temperature, top_k, top_p, training) in enumerate(_cases()):
            case = say(
                f"{B} prompts of {T} token(s), {new} new, temperature {temperature}, top_k {top_k}",
                f"{B} 个长度为 {T} 的提示词，生成 {new} 个，温度 {temperature}，top_k {top_k}",
            ) + (say(f", top_p {top_p}", f"，top_p {top_p}") if top_p is not None else "")
            torch.manual_seed(case_seed(50 + number))
            model = InferenceProbe(CONFIG).to(chk.device).train(training)
            gen = chk.generator(60 + number)
            idx = torch.randint(CONFIG.vocab_size, (B, T), generator=gen).to(chk.device)
            seed = case_seed(70 + number)

            def twin(seed=seed):
                return torch.Generator(chk.device).manual_seed(seed)

            def reference(
                key="",
                model=model,
                idx=idx,
                new=new,
                temperature=temperature,
                top_k=top_k,
                top_p=top_p,
                twin=twin,
            ):
                return _sample(model, idx, new, temperature, top_k, twin(), key, top_p)

            want = reference()
            seen = idx.clone()
            got = chk.call(
                case,
                say(
                    f"calling your {name}(model, idx, {new}, ...)",
                    f"调用你的 {name}(model, idx, {new}, ...)",
                ),
                fn,
                model,
                seen,
                new,
                temperature=temperature,
                top_k=top_k,
                **({} if top_p is None else {"top_p": top_p}),  # older samplers lack it
                generator=twin(),
                known={
                    **REFUSALS,
                    # a sampler that reaches top-p drew from probabilities in the cases before
                    NOT_PROBABILITIES: _logits_drawn() if top_p is None else _no_token_left(),
                },
                hint=_hint(),
            )
            shape = (B, T + new)
            if not (isinstance(got, torch.Tensor) and tuple(got.shape) == shape):
                chk.fail(
                    case,
                    say(
                        f"returned {_described(got)}, expected token ids of shape {shape}",
                        f"返回了 {_described(got)}，应返回形状为 {shape} 的词元 id",
                    ),
                    hint=say(
                        "return the prompt with the new ids appended: torch.cat([idx, next_id], "
                        "dim=1) at every step",
                        "返回拼上新 id 的提示词：每一步 torch.cat([idx, next_id], dim=1)",
                    ),
                )
            got = got.to(want.device)
            if not torch.equal(got[:, :T].long(), idx):
                chk.fail(
                    case,
                    say(
                        "the first T ids of the result are not the prompt",
                        "结果的前 T 个 id 不是提示词本身",
                    ),
                    hint=_hint(),
                )
            if not torch.equal(got.long(), want):
                looks = next(
                    (
                        text
                        for key, text in MISTAKES.items()
                        if torch.equal(got.long(), reference(key))
                    ),
                    None,
                )
                at = int((got.long() != want).any(dim=0).nonzero()[0])
                chk.fail(
                    case,
                    say(
                        f"the ids sampled differ from the reference's from position {at} on "
                        f"(the twin generators give both the same random numbers)",
                        f"从位置 {at} 起，采样出的 id 与参考实现不同（两个生成器给出的随机数相同）",
                    ),
                    looks_like=looks,
                    hint=_hint(),
                )
            after.append((case, model, training, idx, seen))
            chk.ok()
        for case, model, training, idx, seen in after:
            chk.kept_mode(case, model, training, hint=_hint())
            chk.unchanged(case, "idx", idx, seen)
        chk.ok()


def _described(value) -> str:
    if isinstance(value, torch.Tensor):
        return say(f"a tensor of shape {tuple(value.shape)}", f"形状为 {tuple(value.shape)} 的张量")
    return type(value).__name__
