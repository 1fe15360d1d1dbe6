"""The lesson's "in production" notes as code that can be timed (notebook 09, ``benchmarks/``).

Each ``measure_*`` function runs one comparison on one device and returns a
dict of medians (seconds), ratios computed from that same run, and the
numerical agreement of the candidates, so a speedup is never reported for two
things that compute different results. Ratios are ``baseline / candidate``:
above 1 means the candidate is faster.

The two reference functions (``fuse_qkv``, ``attend_with_cache``) are what the
notebook's exercises are checked against.
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F
from torch import nn

from ..language import say
from ..nn import validate
from ..nn.attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention
from .timing import compare_times, peak_cuda_bytes, synchronize, tensor_bytes

# ----------------------------------------------------------------------------- references


def fuse_qkv(q_proj: nn.Linear, k_proj: nn.Linear, v_proj: nn.Linear) -> nn.Linear:
    """One ``Linear(D, 3D)`` computing ``cat([q_proj(x), k_proj(x), v_proj(x)], -1)``.

    ``nn.Linear`` stores ``weight (out, in)``, so stacking the three weights along
    dim 0 stacks their outputs: rows ``[0, D)`` make q, ``[D, 2D)`` k, ``[2D, 3D)`` v
    (the layout of ``MultiHeadAttention.qkv_proj`` and GPT-2's ``c_attn``).
    The result owns copies of the weights.
    """
    projections = (q_proj, k_proj, v_proj)
    for name, p in zip("qkv", projections, strict=True):
        if not isinstance(p, nn.Linear):
            raise TypeError(
                say(
                    f"{name}_proj must be an nn.Linear, got {type(p).__name__}",
                    f"{name}_proj 必须是 nn.Linear，实际是 {type(p).__name__}",
                )
            )
    shapes = {tuple(p.weight.shape) for p in projections}
    if len(shapes) != 1:
        raise ValueError(
            say(
                f"q/k/v projections must have the same shape, got {sorted(shapes)}",
                f"q/k/v 三个投影的形状必须相同，实际是 {sorted(shapes)}",
            )
        )
    has_bias = {p.bias is not None for p in projections}
    if len(has_bias) != 1:
        raise ValueError(
            say(
                "either all or none of the q/k/v projections must have a bias",
                "q/k/v 三个投影要么都有偏置（bias），要么都没有",
            )
        )
    out_features, in_features = q_proj.weight.shape
    w = q_proj.weight
    fused = nn.Linear(
        in_features, 3 * out_features, bias=has_bias.pop(), device=w.device, dtype=w.dtype
    )
    with torch.no_grad():
        fused.weight.copy_(torch.cat([p.weight for p in projections], dim=0))  # (3D, D)
        if fused.bias is not None:
            fused.bias.copy_(torch.cat([p.bias for p in projections], dim=0))  # (3D,)
    return fused


def attend_with_cache(
    q: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    past_k: torch.Tensor | None = None,
    past_v: torch.Tensor | None = None,
):
    """Causal attention for the newest tokens, reusing the keys/values of earlier ones.

    Args:
        q, k_new, v_new: ``(B, H, T_new, head_dim)`` for the ``T_new`` newest tokens,
            which sit at positions ``T_past .. T_past + T_new - 1``.
        past_k, past_v: ``(B, H, T_past, head_dim)`` cached from earlier calls, or None.

    Returns:
        ``(out, k, v)``: ``out (B, H, T_new, head_dim)``; ``k``, ``v``
        ``(B, H, T_past + T_new, head_dim)``, the cache to pass to the next call.

    New query ``i`` is at absolute position ``T_past + i``, so it may attend to keys
    ``0 .. T_past + i``: the causal mask is the lower triangle shifted right by
    ``T_past`` (``tril(diagonal=T_past)``). With one new token it allows everything.
    """
    if (past_k is None) != (past_v is None):
        raise ValueError(
            say("pass both past_k and past_v, or neither", "past_k、past_v 要么都传，要么都不传")
        )
    if past_k is not None:
        k_new = torch.cat([past_k, k_new], dim=-2)  # (B, H, T_past + T_new, hd)
        v_new = torch.cat([past_v, v_new], dim=-2)
    T_new, T_all = q.shape[-2], k_new.shape[-2]
    mask = torch.ones(T_new, T_all, dtype=torch.bool, device=q.device).tril(diagonal=T_all - T_new)
    out, _ = scaled_dot_product_attention(q, k_new, v_new, mask)
    return out, k_new, v_new


# ----------------------------------------------------------------------------- measurements


def _ratio(baseline: float, candidate: float) -> float:
    return baseline / candidate if candidate > 0 else math.inf


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max())


@torch.no_grad()
def measure_qkv_fusion(
    n_tokens: int,
    d_model: int,
    *,
    device="cpu",
    dtype=torch.float32,
    repeats: int = 20,
    seed: int = 0,
) -> dict:
    """One ``Linear(D, 3D)`` (then split) vs three ``Linear(D, D)`` on ``n_tokens`` token vectors.

    Returns ``{"fused_s", "separate_s", "speedup" (separate / fused), "max_diff",
    "n_tokens", "d_model"}``.
    """
    validate.positive_int("n_tokens", n_tokens)
    validate.positive_int("d_model", d_model)
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (nn.Linear(d_model, d_model) for _ in range(3))
    for p in (q, k, v):
        for t in p.parameters():
            t.copy_(torch.randn(t.shape, generator=gen) / math.sqrt(d_model))
    fused = fuse_qkv(q, k, v).to(device, dtype)
    q, k, v = (p.to(device, dtype) for p in (q, k, v))
    x = torch.randn(n_tokens, d_model, generator=gen).to(device, dtype)
    diff = _max_diff(fused(x), torch.cat([q(x), k(x), v(x)], dim=-1))
    times = compare_times(
        {"fused": lambda: fused(x).split(d_model, dim=-1), "separate": lambda: (q(x), k(x), v(x))},
        repeats=repeats,
        device=device,
    )
    return {
        "n_tokens": n_tokens,
        "d_model": d_model,
        "fused_s": times["fused"],
        "separate_s": times["separate"],
        "speedup": _ratio(times["separate"], times["fused"]),
        "max_diff": diff,
    }


class PerCallMaskAttention(MultiHeadAttention):
    """``MultiHeadAttention`` that builds its causal mask on every call instead of slicing a buffer.

    The counterfactual of the lesson's note 2; same parameters, same results.
    """

    def _combined_mask(self, attn_mask, B: int, T: int, past: int):
        if attn_mask is not None or not self.causal:
            return super()._combined_mask(attn_mask, B, T, past)
        return causal_mask(past + T, device=self.qkv_proj.weight.device)[past:]


@torch.no_grad()
def measure_mask_buffer(
    T: int,
    *,
    d_model: int = 64,
    n_heads: int = 2,
    batch: int = 1,
    device="cpu",
    repeats: int = 10,
    seed: int = 0,
) -> dict:
    """The causal mask sliced from a registered buffer vs built per call, at sequence length ``T``.

    Times the mask alone and a whole attention forward with each, and sizes the
    memory: ``mask_bytes`` allocated per call (bool ``(T, T)``), ``scores_bytes`` of
    the ``(B, H, T, T)`` float scores the explicit path materializes anyway, and
    on CUDA the measured peak of one forward with each (``peak_*_bytes``; None elsewhere).
    """
    validate.positive_int("T", T)
    torch.manual_seed(seed)
    buffered = MultiHeadAttention(d_model, n_heads, max_seq_len=T).to(device).eval()
    per_call = PerCallMaskAttention(d_model, n_heads, max_seq_len=T).to(device).eval()
    per_call.load_state_dict(buffered.state_dict())
    x = torch.randn(batch, T, d_model, device=device)
    diff = _max_diff(buffered(x), per_call(x))
    mask_times = compare_times(
        {
            "buffer": lambda: buffered.mask[:T, :T],
            "per_call": lambda: causal_mask(T, device=device),
        },
        repeats=max(repeats, 20),
        device=device,
    )
    forward_times = compare_times(
        {"buffer": lambda: buffered(x), "per_call": lambda: per_call(x)},
        repeats=repeats,
        device=device,
    )
    mask = causal_mask(T, device=device)
    return {
        "T": T,
        "max_diff": diff,
        "mask_buffer_s": mask_times["buffer"],
        "mask_per_call_s": mask_times["per_call"],
        "mask_speedup": _ratio(mask_times["per_call"], mask_times["buffer"]),
        "forward_buffer_s": forward_times["buffer"],
        "forward_per_call_s": forward_times["per_call"],
        "forward_speedup": _ratio(forward_times["per_call"], forward_times["buffer"]),
        "mask_bytes": tensor_bytes(mask),
        "scores_bytes": batch * n_heads * T * T * torch.finfo(torch.float32).bits // 8,
        "peak_buffer_bytes": peak_cuda_bytes(lambda: buffered(x), device),
        "peak_per_call_bytes": peak_cuda_bytes(lambda: per_call(x), device),
    }


@torch.no_grad()
def measure_attention_impls(
    T: int,
    *,
    batch: int = 1,
    n_heads: int = 4,
    head_dim: int = 32,
    device="cpu",
    dtype=torch.float32,
    repeats: int = 10,
    seed: int = 0,
) -> dict:
    """Explicit attention (``tc.scaled_dot_product_attention``) vs PyTorch's fused one.

    Three candidates on the same causal problem: ``explicit`` (scores, mask,
    softmax, weights @ v, as in the lesson), ``sdpa_mask`` (PyTorch's fused
    function given the bool mask) and ``sdpa_causal`` (``is_causal=True``: no mask
    tensor at all, which lets PyTorch use its flash/memory-efficient kernels).
    """
    validate.positive_int("T", T)
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (
        torch.randn(batch, n_heads, T, head_dim, generator=gen).to(device, dtype) for _ in range(3)
    )
    mask = causal_mask(T, device=device)
    reference, _ = scaled_dot_product_attention(q, k, v, mask)
    candidates = {
        "explicit": lambda: scaled_dot_product_attention(q, k, v, mask)[0],
        "sdpa_mask": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        "sdpa_causal": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    }
    diffs = {name: _max_diff(fn(), reference) for name, fn in candidates.items()}
    times = compare_times(candidates, repeats=repeats, device=device)
    return {
        "T": T,
        **{f"{n}_s": t for n, t in times.items()},
        "speedup_sdpa_mask": _ratio(times["explicit"], times["sdpa_mask"]),
        "speedup_sdpa_causal": _ratio(times["explicit"], times["sdpa_causal"]),
        "max_diff_sdpa_mask": diffs["sdpa_mask"],
        "max_diff_sdpa_causal": diffs["sdpa_causal"],
        "scores_bytes": batch * n_heads * T * T * q.element_size(),
    }


def autocast_dtype(device) -> torch.dtype:
    """The low-precision dtype to autocast to: bfloat16 where supported, else float16.

    bfloat16 keeps float32's exponent range (no loss scaling needed); CPUs and
    Ampere-or-newer GPUs support it. Older GPUs get float16.
    """
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return torch.float16
    return torch.bfloat16


@torch.no_grad()
def autocast_op_dtypes(device, dtype: torch.dtype | None = None) -> dict[str, torch.dtype]:
    """Output dtype of a few ops under ``torch.autocast(device.type, dtype)``: the device's policy.

    Autocast keeps one list of ops to run in the low dtype and one to run in
    float32 *per device type*; the lists differ between CPU and CUDA. Each op gets
    a ``(4, 8)`` input, float32 or already in ``dtype`` (as a previous autocast op's
    output would be). ``dtype`` defaults to ``autocast_dtype(device)``.

    Returns ``{"F.op (input dtype)": output dtype}``.
    """
    device = torch.device(device)
    dtype = autocast_dtype(device) if dtype is None else dtype
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(
            say(
                f"dtype must be a floating torch.dtype, got {dtype!r}",
                f"dtype 必须是浮点类型的 torch.dtype，实际是 {dtype!r}",
            )
        )
    low = str(dtype).removeprefix("torch.")
    gen = torch.Generator().manual_seed(0)
    x32 = torch.randn(4, 8, generator=gen).to(device)
    x_low, weight = x32.to(dtype), torch.randn(8, 8, generator=gen).to(device)
    target = torch.zeros(4, dtype=torch.long, device=device)
    with torch.autocast(device_type=device.type, dtype=dtype):
        outputs = {
            "F.linear (float32)": F.linear(x32, weight),
            f"F.softmax ({low})": F.softmax(x_low, dim=-1),
            f"F.layer_norm ({low})": F.layer_norm(x_low, (8,)),
            f"F.cross_entropy ({low})": F.cross_entropy(x_low, target),
            "F.softmax (float32)": F.softmax(x32, dim=-1),
        }
    return {name: out.dtype for name, out in outputs.items()}


@torch.no_grad()
def measure_autocast(
    module: nn.Module, x: torch.Tensor, *, dtype: torch.dtype | None = None, repeats: int = 10
) -> dict:
    """``module(x)`` in float32 vs under ``torch.autocast`` to ``dtype`` (``autocast_dtype``).

    Returns times, the speedup (float32 / autocast), the output dtype under
    autocast, and the error relative to the float32 output's largest magnitude.
    """
    device = x.device
    dtype = autocast_dtype(device) if dtype is None else dtype

    def low():
        with torch.autocast(device_type=device.type, dtype=dtype):
            return module(x)

    full = module(x)
    out = low()
    rel_err = _max_diff(out, full) / float(full.abs().max())
    times = compare_times(
        {"float32": lambda: module(x), "autocast": low}, repeats=repeats, device=device
    )
    return {
        "dtype": str(dtype).removeprefix("torch."),
        "output_dtype": str(out.dtype).removeprefix("torch."),
        "float32_s": times["float32"],
        "autocast_s": times["autocast"],
        "speedup": _ratio(times["float32"], times["autocast"]),
        "rel_err": rel_err,
        "finite": bool(torch.isfinite(out).all()),
    }


@torch.no_grad()
def decode_step_times(model, prompt: torch.Tensor, new_tokens: int, *, use_cache: bool):
    """Greedy decoding, timing every step: ``(tokens (B, T + new), [seconds per step])``.

    The same loop as ``GPT.generate(temperature=0)``, unrolled so each step's cost
    can be seen: without a cache, step ``t`` re-runs the model on all ``T + t``
    tokens; with one, it runs on the single newest token.
    """
    from ..nn.attention import KVCache

    validate.positive_int("new_tokens", new_tokens)
    model.eval()
    device = prompt.device
    caches = [KVCache() for _ in model.blocks] if use_cache else None
    idx, step_input, times = prompt, prompt, []
    for _ in range(new_tokens):
        synchronize(device)
        start = time.perf_counter()
        logits = model(step_input if use_cache else idx, caches=caches)[:, -1, :]
        next_id = logits.argmax(dim=-1, keepdim=True)
        synchronize(device)
        times.append(time.perf_counter() - start)
        idx = torch.cat([idx, next_id], dim=1)
        step_input = next_id
    return idx, times


# ----------------------------------------------------------------------------- KV caches


class PreallocatedKVCache:
    """A KV cache that allocates room for ``max_len`` positions once and writes each step in place.

    Same interface as ``tc.KVCache`` (``len(cache)``, ``append(k, v) -> (k, v)``), so
    ``MultiHeadAttention`` and ``GPT.forward(..., caches=...)`` take either. ``KVCache.append``
    concatenates, which copies the whole cache at every step; here a step writes only its
    own ``T_new`` positions and returns views of the filled part.

    Shapes: ``append(k, v)`` with ``k, v (B, H, T_new, head_dim)`` returns
    ``(B, H, len(cache), head_dim)`` views. The storage ``(B, H, max_len, head_dim)`` is
    allocated on the first ``append``, in ``k``'s dtype and on its device.
    """

    def __init__(self, max_len: int):
        self.max_len = validate.positive_int("max_len", max_len)
        self._k: torch.Tensor | None = None
        self._v: torch.Tensor | None = None
        self._len = 0

    def __len__(self) -> int:
        return self._len

    @property
    def k(self) -> torch.Tensor | None:
        """The cached keys ``(B, H, len(cache), head_dim)`` (a view); None before any append."""
        return None if self._k is None else self._k[:, :, : self._len]

    @property
    def v(self) -> torch.Tensor | None:
        """The cached values ``(B, H, len(cache), head_dim)`` (a view); None before any append."""
        return None if self._v is None else self._v[:, :, : self._len]

    def append(self, k: torch.Tensor, v: torch.Tensor):
        for name, t in (("k", k), ("v", v)):
            validate.floating_tensor(name, t)
            if t.dim() != 4:
                raise ValueError(
                    say(
                        f"{name} must have shape (B, H, T_new, head_dim), got {tuple(t.shape)}",
                        f"{name} 的形状必须是 (B, H, T_new, head_dim)，实际是 {tuple(t.shape)}",
                    )
                )
        if k.shape != v.shape:
            got = f"k {tuple(k.shape)}, v {tuple(v.shape)}"
            raise ValueError(
                say(
                    f"k and v must have the same shape, got {got}",
                    f"k 和 v 的形状必须相同，实际是 {got}",
                )
            )
        B, H, T_new, hd = k.shape
        if self._k is None:
            self._k = k.new_empty(B, H, self.max_len, hd)
            self._v = v.new_empty(B, H, self.max_len, hd)
        elif (B, H, hd) != (self._k.shape[0], self._k.shape[1], self._k.shape[3]):
            B0, H0, _, hd0 = self._k.shape
            want, got = f"(batch={B0}, heads={H0}, T, head_dim={hd0})", tuple(k.shape)
            raise ValueError(
                say(
                    f"new keys must have shape {want} like the cached ones, got {got}",
                    f"新的键必须与缓存中的键形状一致，即 {want}，实际是 {got}",
                )
            )
        if self._len + T_new > self.max_len:
            raise ValueError(
                say(
                    f"the cache holds at most max_len={self.max_len} positions; it holds "
                    f"{self._len} and got {T_new} more",
                    f"缓存最多存 max_len={self.max_len} 个位置；"
                    f"它已存了 {self._len} 个，又来了 {T_new} 个",
                )
            )
        self._k[:, :, self._len : self._len + T_new] = k  # writes T_new slots, copies nothing else
        self._v[:, :, self._len : self._len + T_new] = v
        self._len += T_new
        return self.k, self.v

    def truncate(self, length: int) -> None:
        """Forget every position from ``length`` on (the storage stays allocated)."""
        if isinstance(length, bool) or not isinstance(length, int) or not 0 <= length <= self._len:
            raise ValueError(
                say(
                    f"length must be an int in [0, {self._len}], got {length!r}",
                    f"length 必须是 [0, {self._len}] 中的 int，实际是 {length!r}",
                )
            )
        self._len = length


def _time_one_step_at(
    model, token: torch.Tensor, T: int, gen: torch.Generator, repeats: int
) -> dict:
    """One cached decoding step after ``T`` cached positions, with each kind of cache."""
    from ..nn.attention import KVCache

    c, device = model.config, token.device
    dtype = next(model.parameters()).dtype
    past = [
        tuple(
            torch.randn(1, c.n_heads, T, c.head_dim, generator=gen).to(device, dtype)
            for _ in range(2)
        )
        for _ in model.blocks
    ]  # (1, H, T, hd) each
    concat = [KVCache() for _ in model.blocks]
    prealloc = [PreallocatedKVCache(T + 1) for _ in model.blocks]
    for cache, (k, v) in zip(prealloc, past, strict=True):
        cache.append(k, v)

    def step_concat():
        for cache, (k, v) in zip(concat, past, strict=True):
            cache.k, cache.v = k, v  # roll back to T positions
        return model(token, caches=concat)

    def step_prealloc():
        for cache in prealloc:
            cache.truncate(T)
        return model(token, caches=prealloc)

    diff = _max_diff(step_concat(), step_prealloc())
    times = compare_times(
        {"concat": step_concat, "prealloc": step_prealloc}, repeats=repeats, device=device
    )
    return {
        "T": T,
        "concat_s": times["concat"],
        "prealloc_s": times["prealloc"],
        "max_diff": diff,
        "cache_bytes": sum(tensor_bytes(k) + tensor_bytes(v) for k, v in past),
    }


@torch.no_grad()
def measure_decode_step(model, positions, *, repeats: int = 10, seed: int = 0) -> list[dict]:
    """Time of one cached decoding step at each position in ``positions``, for both caches.

    For each ``T``, every block's cache is filled with ``T`` random keys and values
    (their values do not change the cost), then one new token is decoded with
    ``KVCache`` (``torch.cat``: copies the cache) and with ``PreallocatedKVCache``
    (writes one slot), interleaved; each timed call first rolls the cache back to
    ``T`` positions. ``model`` is a ``GPT`` with ``max_seq_len > max(positions)``.

    Returns one dict per position: ``T``, ``concat_s``, ``prealloc_s`` (medians),
    ``max_diff`` (the two caches' logits), ``cache_bytes`` (keys + values of all
    layers at ``T``: what ``torch.cat`` copies per step).
    """
    positions = [validate.positive_int("position", T) for T in positions]
    validate.positive_int("repeats", repeats)
    if not positions:
        raise ValueError(
            say("positions must name at least one position, got none", "positions 不能为空")
        )
    if max(positions) + 1 > model.config.max_seq_len:
        need, got = max(positions), f"max_seq_len={model.config.max_seq_len}"
        raise ValueError(
            say(
                f"positions need max_seq_len > {need}, got {got}",
                f"positions 要求 max_seq_len > {need}，实际是 {got}",
            )
        )
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    token = torch.randint(0, model.config.vocab_size, (1, 1), generator=gen)
    token = token.to(next(model.parameters()).device)
    return [_time_one_step_at(model, token, T, gen, repeats) for T in positions]


class CompileResult:
    """What ``try_compile`` produced: ``module`` (compiled, or the original on fallback),
    ``compiled`` (bool), ``reason`` (why not, or the backend used), ``first_call_s``."""

    def __init__(self, module, compiled: bool, reason: str, first_call_s: float | None):
        self.module, self.compiled, self.reason, self.first_call_s = (
            module,
            compiled,
            reason,
            first_call_s,
        )

    def __repr__(self) -> str:
        return f"CompileResult(compiled={self.compiled}, reason={self.reason!r})"


def try_compile(
    module: nn.Module, example: torch.Tensor, *, backend: str = "inductor"
) -> CompileResult:
    """``torch.compile(module, backend=backend)`` and one call on ``example``, or a fallback.

    Compilation happens lazily on the first call, so that call is made (and
    timed) here; any failure there (no C++ compiler, unsupported platform or
    Python, missing Triton) returns the original module with the reason, so
    code after it runs either way.
    """
    if not hasattr(torch, "compile"):
        version = torch.__version__
        return CompileResult(
            module,
            False,
            say(f"torch {version} has no torch.compile", f"torch {version} 没有 torch.compile"),
            None,
        )
    try:
        compiled = torch.compile(module, backend=backend)
        synchronize(example.device)
        start = time.perf_counter()
        with torch.no_grad():
            compiled(example)
        synchronize(example.device)
        return CompileResult(
            compiled,
            True,
            say(f"compiled with backend={backend!r}", f"已用后端 backend={backend!r} 编译"),
            time.perf_counter() - start,
        )
    except Exception as error:  # noqa: BLE001 - any compiler failure means: run eagerly instead
        message = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        return CompileResult(module, False, f"{type(error).__name__}: {message}", None)
