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

from kernels.schedule import BlockKind, Schedule, visible_block


def _check_inputs(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(
            f"q, k and v must be 4-D (batch, heads, seq, head_dim); got ranks "
            f"{q.ndim}, {k.ndim}, {v.ndim}"
        )
    if k.shape[:3] != v.shape[:3]:
        # v's head dim (Dv) may differ from q's and k's (MLA: D 192, Dv 128).
        raise ValueError(
            f"k and v must agree on batch, heads and keys (dims 0-2); got {k.shape} and {v.shape}"
        )
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
    pack_gqa: bool = False,
    kv_splits: int = 1,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Attention output (B, H, Nq, Dv) for q (B, H, Nq, D), k (B, Hkv, Nk, D) and
    v (B, Hkv, Nk, Dv); Dv may differ from D.

    ``accumulate`` is the arithmetic precision (float32 as on the GPU, or float64 for a
    reference). With ``return_block_map`` the (q-blocks, k-blocks) map of
    :class:`~kernels.schedule.BlockKind` codes that was actually visited comes back too.

    ``pack_gqa``: the query heads of one KV head are the rows of one tile (the decode form's
    layout; ``tile_m`` is then the tile as it runs, see :func:`kernels.schedule.decode_tile_m`).
    ``kv_splits``: each tile's key blocks are read by that many splits
    (:func:`kernels.schedule.split_ranges`), each giving a partial output and its log-sum-exp,
    merged by :func:`combine_splits` as the GPU's combine kernel merges them.
    """
    _check_inputs(q, k, v)
    schedule = Schedule(
        q.shape[2], k.shape[2], tile_m, tile_n, mask, input_pos, window,
        group=q.shape[1] // k.shape[1], pack_gqa=pack_gqa, kv_splits=kv_splits,
    )  # fmt: skip
    return walk_schedule(
        schedule, q, k, v, scale=scale, accumulate=accumulate, return_block_map=return_block_map
    )


def walk_schedule(
    schedule: Schedule,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    scale: float | None = None,
    accumulate: type | str = np.float32,
    return_block_map: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """:func:`flash_attention` along a ``schedule`` made for these inputs (its lengths, group,
    mask, tiles, packing and splits): how a backend runs the schedule it already resolved."""
    _check_inputs(q, k, v)
    acc_dtype = np.dtype(accumulate)
    batch, heads, q_len, head_dim = q.shape
    kv_heads, k_len, value_dim = k.shape[1], k.shape[2], v.shape[3]
    group = heads // kv_heads
    # Only packed rows depend on the group; a tile-form schedule keeps group 1.
    if (schedule.q_len, schedule.k_len) != (q_len, k_len) or (
        schedule.pack_gqa and schedule.group != group
    ):
        raise ValueError(
            f"the schedule is for q_len {schedule.q_len}, k_len {schedule.k_len}, group "
            f"{schedule.group}; the inputs have {q_len}, {k_len}, {group}"
        )
    mask, input_pos, window = schedule.mask, schedule.input_pos, schedule.window
    tile_m, tile_n = schedule.tile_m, schedule.tile_n
    if scale is None:
        scale = 1.0 / np.sqrt(head_dim)

    qf = q.astype(acc_dtype, copy=False)
    if schedule.pack_gqa:
        # Query head h = hk·group + g is contiguous with its group: (B, Hkv, group·Nq, D).
        qf = qf.reshape(batch, kv_heads, group * q_len, head_dim)
        kf = k.astype(acc_dtype, copy=False)
        vf = v.astype(acc_dtype, copy=False)
    else:
        # GQA: query head h reads kv head h // group.
        kf = np.repeat(k.astype(acc_dtype, copy=False), group, axis=1)
        vf = np.repeat(v.astype(acc_dtype, copy=False), group, axis=1)
    out = np.zeros((*qf.shape[:-1], value_dim), dtype=acc_dtype)
    visited = np.zeros((schedule.n_q_blocks, schedule.n_k_blocks), dtype=np.int8)

    for qb in range(schedule.n_q_blocks):
        r0, r1 = qb * tile_m, min((qb + 1) * tile_m, schedule.rows)
        positions = np.arange(r0, r1) % q_len  # each row's query position
        q_tile = qf[:, :, r0:r1, :] * acc_dtype.type(scale)
        parts_out, parts_lse = [], []
        for split in range(schedule.n_splits):
            unmasked, masked = schedule.split_blocks(qb, split)
            shape = (*q_tile.shape[:-1], 1)
            m = np.full(shape, -np.inf, dtype=acc_dtype)
            l_sum = np.zeros(shape, dtype=acc_dtype)
            u = np.zeros((*shape[:-1], value_dim), dtype=acc_dtype)
            for kb in sorted([*unmasked, *masked]):
                c0, c1 = kb * tile_n, min((kb + 1) * tile_n, k_len)
                scores = q_tile @ kf[:, :, c0:c1, :].swapaxes(-1, -2)
                needs_mask = kb in masked
                visited[qb, kb] = BlockKind.MASKED if needs_mask else BlockKind.COMPUTED
                if needs_mask:
                    seen = visible_block(positions, range(c0, c1), mask, input_pos, window)
                    scores = np.where(seen, scores, -np.inf)
                m_new = np.maximum(m, scores.max(axis=-1, keepdims=True))
                # Rows with no visible key so far keep m = -inf; use 0 there so no inf - inf.
                m_safe = np.where(np.isneginf(m_new), 0.0, m_new)
                p = np.exp(scores - m_safe)
                alpha = np.exp(m - m_safe)
                l_sum = l_sum * alpha + p.sum(axis=-1, keepdims=True)
                u = u * alpha + p @ vf[:, :, c0:c1, :]
                m = m_new
            with np.errstate(invalid="ignore", divide="ignore"):
                parts_out.append(np.where(l_sum > 0, u / np.where(l_sum > 0, l_sum, 1), 0.0))
                parts_lse.append(np.where(l_sum > 0, m + np.log(l_sum), -np.inf))
        if len(parts_out) == 1:
            out[:, :, r0:r1, :] = parts_out[0]
        else:
            out[:, :, r0:r1, :] = combine_splits(np.stack(parts_out), np.stack(parts_lse))[0]

    out = out.reshape(batch, heads, q_len, value_dim)
    if return_block_map:
        return out, visited
    return out


def combine_splits(parts_out: np.ndarray, parts_lse: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge the partial outputs of the splits of one key range (FlashDecoding's combine).

    ``parts_out`` (S, …, D): each split's normalised output over its keys; ``parts_lse``
    (S, …, 1): its natural log-sum-exp, -inf for a split that saw no key. The result is what
    one pass over all the keys gives: each split weighted by exp(lse_s - lse), not averaged
    (blocks scoring [0, 0] and [ln 3, ln 3] over values 0 and 1 give 0.75, not 0.5). A split
    with lse -inf weighs nothing; rows no split saw are zeros with lse -inf. Returns the
    output and its log-sum-exp (…, 1).
    """
    top = parts_lse.max(axis=0)
    top = np.where(np.isneginf(top), 0.0, top)
    weights = np.exp(parts_lse - top)  # 0 for the splits that saw nothing
    total = weights.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(
            total > 0, (weights * parts_out).sum(axis=0) / np.where(total > 0, total, 1), 0.0
        )
        lse = np.where(total > 0, top + np.log(np.where(total > 0, total, 1)), -np.inf)
    return out, lse


def masked_softmax_product(scores: np.ndarray, seen: np.ndarray, v: np.ndarray) -> np.ndarray:
    """softmax(scores where seen, else -inf) @ v, with zeros for rows that see nothing."""
    scores = np.where(seen, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isneginf(row_max), 0.0, row_max)
    weights = np.exp(scores - row_max)
    total = weights.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, (weights @ v) / np.where(total > 0, total, 1), 0.0)
