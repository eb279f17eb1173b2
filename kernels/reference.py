"""NumPy FlashAttention forward that walks the kernel's tile schedule.

It is the CPU backend of the workbench and the executable specification of the cuTile kernel:
the same (q-block, k-block) visits as :mod:`kernels.schedule`, the same online softmax (running
max ``m``, running sum ``l``, unnormalised numerator ``u``; both ``l`` and ``u`` are rescaled by
``exp(m_old - m_new)`` when the max grows), and it never forms the full score matrix.

A query row that sees no key (possible with a window, or with a causal offset past the keys)
returns zeros: there is nothing to average, and zeros are what the GPU kernel writes too.
"""

from __future__ import annotations

import numpy as np

from kernels.schedule import BlockKind, Schedule, visible, visible_block


def _check_inputs(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(
            f"q, k and v must be 4-D (batch, heads, seq, head_dim); got ranks "
            f"{q.ndim}, {k.ndim}, {v.ndim}"
        )
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape; got {k.shape} and {v.shape}")
    if q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise ValueError(
            f"q {q.shape} and k {k.shape} must agree on batch (dim 0) and head_dim (dim 3)"
        )
    if k.shape[1] < 1 or q.shape[1] % k.shape[1]:
        raise ValueError(f"q heads ({q.shape[1]}) must be a multiple of k/v heads ({k.shape[1]})")


def flash_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    scale: float | None = None,
    mask: str = "none",
    input_pos: int = 0,
    window: int | None = None,
    tile_m: int = 64,
    tile_n: int = 64,
    accumulate: type | str = np.float32,
    return_block_map: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Attention output (B, H, Nq, D) for q (B, H, Nq, D) and k, v (B, Hkv, Nk, D).

    ``accumulate`` is the arithmetic precision (float32 as on the GPU, or float64 for a
    reference). With ``return_block_map`` the (q-blocks, k-blocks) map of
    :class:`~kernels.schedule.BlockKind` codes that was actually visited comes back too.
    """
    _check_inputs(q, k, v)
    acc_dtype = np.dtype(accumulate)
    batch, heads, q_len, head_dim = q.shape
    kv_heads, k_len = k.shape[1], k.shape[2]
    group = heads // kv_heads
    schedule = Schedule(q_len, k_len, tile_m, tile_n, mask, input_pos, window)
    if scale is None:
        scale = 1.0 / np.sqrt(head_dim)

    qf = q.astype(acc_dtype, copy=False)
    # GQA: query head h reads kv head h // group; a view, no copy of K or V per query head.
    kf = np.repeat(k.astype(acc_dtype, copy=False), group, axis=1)
    vf = np.repeat(v.astype(acc_dtype, copy=False), group, axis=1)
    out = np.zeros((batch, heads, q_len, head_dim), dtype=acc_dtype)
    visited = np.zeros((schedule.n_q_blocks, schedule.n_k_blocks), dtype=np.int8)

    for qb, k_range in enumerate(schedule.k_ranges):
        r0, r1 = qb * tile_m, min((qb + 1) * tile_m, q_len)
        q_tile = qf[:, :, r0:r1, :] * acc_dtype.type(scale)
        rows = r1 - r0
        m = np.full((batch, heads, rows, 1), -np.inf, dtype=acc_dtype)
        l_sum = np.zeros((batch, heads, rows, 1), dtype=acc_dtype)
        u = np.zeros((batch, heads, rows, head_dim), dtype=acc_dtype)
        for kb in range(k_range.lo, k_range.hi):
            c0, c1 = kb * tile_n, min((kb + 1) * tile_n, k_len)
            scores = q_tile @ kf[:, :, c0:c1, :].swapaxes(-1, -2)
            needs_mask = not (k_range.full_lo <= kb < k_range.full_hi)
            visited[qb, kb] = BlockKind.MASKED if needs_mask else BlockKind.COMPUTED
            if needs_mask:
                seen = visible_block(range(r0, r1), range(c0, c1), mask, input_pos, window)
                scores = np.where(seen, scores, -np.inf)
            m_new = np.maximum(m, scores.max(axis=-1, keepdims=True))
            # Rows with no visible key so far keep m = -inf; use 0 there so no inf - inf = NaN.
            m_safe = np.where(np.isneginf(m_new), 0.0, m_new)
            p = np.exp(scores - m_safe)
            alpha = np.exp(m - m_safe)
            l_sum = l_sum * alpha + p.sum(axis=-1, keepdims=True)
            u = u * alpha + p @ vf[:, :, c0:c1, :]
            m = m_new
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, :, r0:r1, :] = np.where(l_sum > 0, u / np.where(l_sum > 0, l_sum, 1), 0.0)

    if return_block_map:
        return out, visited
    return out


def naive_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    scale: float | None = None,
    mask: str = "none",
    input_pos: int = 0,
    window: int | None = None,
    accumulate: type | str = np.float64,
) -> np.ndarray:
    """Plain masked softmax(Q Kᵀ · scale) V with the whole score matrix: the oracle for tests
    and the float64 check of every backend. Rows that see no key are zeros, as above."""
    _check_inputs(q, k, v)
    acc_dtype = np.dtype(accumulate)
    group = q.shape[1] // k.shape[1]
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1])
    qf = q.astype(acc_dtype)
    kf = np.repeat(k.astype(acc_dtype), group, axis=1)
    vf = np.repeat(v.astype(acc_dtype), group, axis=1)
    scores = (qf @ kf.swapaxes(-1, -2)) * scale
    seen = visible(q.shape[2], k.shape[2], mask, input_pos, window)
    return masked_softmax_product(scores, seen, vf)


def masked_softmax_product(scores: np.ndarray, seen: np.ndarray, v: np.ndarray) -> np.ndarray:
    """softmax(scores where seen, else -inf) @ v, with zeros for rows that see nothing."""
    scores = np.where(seen, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isneginf(row_max), 0.0, row_max)
    weights = np.exp(scores - row_max)
    total = weights.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, (weights @ v) / np.where(total > 0, total, 1), 0.0)
