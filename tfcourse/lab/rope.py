"""RoPE measured through attention scores: float32 rounding, and running past the trained length.

Notebook 10 uses these to show what a change to the rotary tables does to the scores
``q_rot . k_rot`` that attention sees, not only to the angles.
"""

from __future__ import annotations

import math

import torch

from ..language import say
from ..nn import validate
from ..nn.positional import rotary_cos_sin, rotary_inv_freq, rotate_half


def _tables(cos: torch.Tensor, sin: torch.Tensor, name: str, head_dim: int) -> None:
    """Check one (cos, sin) pair of tables: same shape ``(R, head_dim)``."""
    validate.floating_tensor(f"{name} cos", cos)
    validate.floating_tensor(f"{name} sin", sin)
    if cos.dim() != 2 or cos.shape != sin.shape or cos.shape[-1] != head_dim:
        want = f"(rows, head_dim={head_dim})"
        got = f"cos {tuple(cos.shape)}, sin {tuple(sin.shape)}"
        raise ValueError(
            say(
                f"{name} tables must both have shape {want}; got {got}",
                f"{name} 的两张表的形状都必须是 {want}；实际是 {got}",
            )
        )


def rotary_scores(q: torch.Tensor, k: torch.Tensor, q_tables, k_tables) -> torch.Tensor:
    """Scores ``rotated q . rotated k`` for many positions at once, shape ``(R, N)``.

    ``q``, ``k``: ``(N, head_dim)``, N query/key vectors (one per head, say).
    ``q_tables``, ``k_tables``: ``(cos, sin)``, each ``(R, head_dim)`` or ``(1, head_dim)``:
    row ``r`` holds the query's and the key's position. Entry ``[r, n]`` is the score of
    ``q[n]`` at row r's query position with ``k[n]`` at row r's key position. Computed as four
    matmuls, so R can be tens of thousands without an ``(R, N, head_dim)`` tensor.
    """
    validate.floating_tensor("q", q)
    validate.floating_tensor("k", k)
    if q.dim() != 2 or q.shape != k.shape:
        got = f"q {tuple(q.shape)}, k {tuple(k.shape)}"
        raise ValueError(
            say(
                f"q and k must both have shape (N, head_dim); got {got}",
                f"q 和 k 的形状都必须是 (N, head_dim)；实际是 {got}",
            )
        )
    head_dim = q.shape[-1]
    (cq, sq), (ck, sk) = q_tables, k_tables
    _tables(cq, sq, "q_tables", head_dim)
    _tables(ck, sk, "k_tables", head_dim)
    rq, rk = rotate_half(q), rotate_half(k)
    # (q*cq + rq*sq) . (k*ck + rk*sk), expanded: each term is (table product) @ (vector product).T
    return (
        (cq * ck) @ (q * k).T
        + (cq * sk) @ (q * rk).T
        + (sq * ck) @ (rq * k).T
        + (sq * sk) @ (rq * rk).T
    )


def relative_rms(values: torch.Tensor, reference: torch.Tensor) -> float:
    """``rms(values - reference) / rms(reference)``: 0 = unchanged, about 1.4 = unrelated."""
    if values.shape != reference.shape:
        first, second = tuple(values.shape), tuple(reference.shape)
        raise ValueError(
            say(
                f"values and reference must have the same shape; got {first} and {second}",
                f"values 和 reference 的形状必须相同；实际是 {first} 和 {second}",
            )
        )
    return float((values - reference).pow(2).mean().sqrt() / reference.pow(2).mean().sqrt())


def rounded_rotary_tables(
    positions: torch.Tensor,
    head_dim: int,
    base: float = 10000.0,
    *,
    round_theta: bool = False,
    round_product: bool = False,
):
    """float32 ``(cos, sin)`` tables ``(P, head_dim)`` with chosen float32 roundings of the angles.

    Everything is computed in float64, except: ``round_theta`` rounds each frequency
    ``theta_i`` to float32 before multiplying; ``round_product`` rounds each angle ``t * theta_i``
    to float32. Both False gives the exact angles (one float32 rounding of cos and sin at the end).
    """
    if not isinstance(positions, torch.Tensor):
        got = type(positions).__name__
        raise TypeError(
            say(
                f"positions must be a torch.Tensor of shape (P,), got {got}",
                f"positions 必须是形状为 (P,) 的 torch.Tensor，实际是 {got}",
            )
        )
    if positions.dim() != 1:
        shape = tuple(positions.shape)
        raise ValueError(
            say(
                f"positions must have shape (P,), got {shape}",
                f"positions 的形状必须是 (P,)，实际是 {shape}",
            )
        )
    theta = rotary_inv_freq(head_dim, base, dtype=torch.float64, device=positions.device)
    if round_theta:
        theta = theta.float().double()
    angles = positions.double()[:, None] * theta  # (P, head_dim/2); exact for a float32 theta
    if round_product:
        angles = angles.float().double()
    angles = torch.cat([angles, angles], dim=-1)  # (P, head_dim)
    return angles.cos().float(), angles.sin().float()


def unseen_rotation_share(
    inv_freq: torch.Tensor,
    trained_inv_freq: torch.Tensor,
    trained_len: int,
    distances: torch.Tensor,
) -> float:
    """Share of (pair, distance) combinations whose angle the trained model never saw.

    A pair that turned less than once within ``trained_len`` positions saw only the angles
    ``0 .. trained_len * trained_theta_i``; at distance r with frequency ``theta'_i`` it now
    turns ``r * theta'_i``. Counts combinations beyond that range, over all pairs and the
    given ``distances`` (P,). With random q and k every pair carries the same share of the
    score's variance on average, so this is also the expected share of the score that comes
    from rotations outside the trained range.
    """
    validate.positive_int("trained_len", trained_len)
    if inv_freq.shape != trained_inv_freq.shape or inv_freq.dim() != 1:
        first, second = tuple(inv_freq.shape), tuple(trained_inv_freq.shape)
        raise ValueError(
            say(
                "inv_freq and trained_inv_freq must both have shape (head_dim/2,); "
                f"got {first} and {second}",
                "inv_freq 和 trained_inv_freq 的形状都必须是 (head_dim/2,)；"
                f"实际是 {first} 和 {second}",
            )
        )
    if distances.dim() != 1:
        shape = tuple(distances.shape)
        raise ValueError(
            say(
                f"distances must have shape (P,), got {shape}",
                f"distances 的形状必须是 (P,)，实际是 {shape}",
            )
        )
    if distances.numel() == 0:
        return 0.0  # no new distance, nothing unseen
    reached = trained_len * trained_inv_freq  # (pairs,) largest angle seen
    never_turned = reached < 2 * math.pi
    angles = distances.to(inv_freq.dtype)[:, None] * inv_freq  # (P, pairs)
    unseen = (angles > reached) & never_turned
    return float(unseen.double().mean())


def context_extension(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    trained_len: int,
    factor: float,
    scaling: str | None,
    base: float = 10000.0,
    near: int = 64,
) -> dict[str, float]:
    """Measure one way of running RoPE at ``factor`` times the trained length, on scores.

    ``q``, ``k``: ``(N, head_dim)`` float64; ``scaling`` as in ``rotary_inv_freq`` (None: plain
    RoPE run at the longer length). The key sits at position 0 and the query at distance r;
    the reference is plain RoPE, what the model was trained with. Returns:

    - ``near_drift``: ``relative_rms`` of the scores against plain RoPE's at distances ``< near``;
    - ``trained_drift``: the same over all trained distances ``< trained_len``;
    - ``unseen_share``: ``unseen_rotation_share`` over the new distances
      ``trained_len .. factor * trained_len - 1``.
    """
    validate.positive_int("trained_len", trained_len)
    factor = validate.positive_float("factor", factor)
    if q.dim() != 2:
        shape = tuple(q.shape)
        raise ValueError(
            say(
                f"q and k must have shape (N, head_dim), got q {shape}",
                f"q 和 k 的形状必须是 (N, head_dim)，实际 q 是 {shape}",
            )
        )
    head_dim = q.shape[-1]
    length = round(factor * trained_len)
    options = (
        {}
        if scaling is None
        else {
            "scaling": scaling,
            "factor": factor,
            "original_max_len": trained_len if scaling == "yarn" else None,
        }
    )
    scaled = rotary_cos_sin(trained_len, head_dim, base, dtype=q.dtype, device=q.device, **options)
    plain = rotary_cos_sin(trained_len, head_dim, base, dtype=q.dtype, device=q.device)
    key_at_zero = (
        torch.ones(1, head_dim, dtype=q.dtype, device=q.device),  # cos 0, sin 0
        torch.zeros(1, head_dim, dtype=q.dtype, device=q.device),
    )
    scores = rotary_scores(q, k, scaled, key_at_zero)  # (trained_len, N)
    reference = rotary_scores(q, k, plain, key_at_zero)
    theta = rotary_inv_freq(head_dim, base, device=q.device, **options)
    trained_theta = rotary_inv_freq(head_dim, base, device=q.device)
    return {
        "near_drift": relative_rms(scores[:near], reference[:near]),
        "trained_drift": relative_rms(scores, reference),
        "unseen_share": unseen_rotation_share(
            theta, trained_theta, trained_len, torch.arange(trained_len, length, device=q.device)
        ),
    }
