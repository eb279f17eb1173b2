"""The block steps of the prefill kernels over a head dim in power-of-two column chunks.

``TILE_D`` (and ``TILE_DV``) is the sum of the chunks the plan chose
(:func:`kernels.head_dims.column_chunks`: 96 = 64 + 32, or one power of two); its set bits,
largest first, are the chunks, so the chunks are compile-time constants without a parameter
of their own. Q is held as one [TILE_M, c] tile per chunk ``c`` of D, the accumulator as one
[TILE_M, c] tile per chunk of Dv: Q·Kᵀ sums one MMA per chunk, P·V runs one MMA per
accumulator, the output is stored per chunk. Chunk ``c`` at column offset ``o`` is tile
``o // c`` of the columns (whole, as the chunks run largest first). A power-of-two head dim is
one chunk, the code of :mod:`kernels.cutile.device`.
"""

from __future__ import annotations

import cuda.tile as ct

from kernels.cutile.device import LN2, NEG_INF, exp2_mixed


def chunk_tiles(span: int) -> list[tuple[int, int, int]]:
    """(chunk number, width, tile index) of each column chunk of ``span`` columns, largest
    first (compile-time helper): its set bits, each at the offset of the wider ones before it."""
    out = []
    width = 1 << (span.bit_length() - 1)
    while width >= 1:
        if span & width:
            out.append((len(out), width, (span & ~(2 * width - 1)) // width))
        width //= 2
    return out


def load_q_chunks(Q, where, TILE_M, TILE_D, COLUMN_HALVES):
    """Q tile ``where`` = (batch, head, q-block) as one [TILE_M, c] tile per chunk, zero-padded
    past q_len and past the head dim; with ``COLUMN_HALVES`` each chunk comes in as two halves
    joined along the head dim (see ``load_q`` in :mod:`kernels.cutile.device`)."""
    b, h, qb = where
    chunks = ()
    for _, width, index in ct.static_iter(chunk_tiles(TILE_D)):
        if COLUMN_HALVES:
            half = width // 2
            left = ct.load(
                Q, index=(b, h, qb, 2 * index), shape=(1, 1, TILE_M, half),
                padding_mode=ct.PaddingMode.ZERO,
            ).reshape((TILE_M, half))  # fmt: skip
            right = ct.load(
                Q, index=(b, h, qb, 2 * index + 1), shape=(1, 1, TILE_M, half),
                padding_mode=ct.PaddingMode.ZERO,
            ).reshape((TILE_M, half))  # fmt: skip
            chunks = (*chunks, ct.cat((left, right), 1))
        else:
            whole = ct.load(
                Q, index=(b, h, qb, index), shape=(1, 1, TILE_M, width),
                padding_mode=ct.PaddingMode.ZERO,
            ).reshape((TILE_M, width))  # fmt: skip
            chunks = (*chunks, whole)
    return chunks


def zero_accumulators(TILE_M, TILE_DV):
    """The P·V accumulator: one zero [TILE_M, c] float32 tile per chunk of Dv."""
    accs = ()
    for _, width, _ in ct.static_iter(chunk_tiles(TILE_DV)):
        accs = (*accs, ct.zeros((TILE_M, width), dtype=ct.float32))
    return accs


def scores_chunks(qs, K, where, CHECKED, K_LATENCY, TILE_N, TILE_D):
    """q · K[j]ᵀ for key block ``j`` of ``where`` = (batch, kv head, j), summed over the chunks
    of D: [TILE_M, TILE_N] fp32. ``CHECKED``: bounds-checked, zero-padded K loads (a ragged
    last block, or a chunk past the head dim)."""
    b, hk, j = where
    qk = ct.zeros((qs[0].shape[0], TILE_N), dtype=ct.float32)
    for c, width, index in ct.static_iter(chunk_tiles(TILE_D)):
        if CHECKED:
            k_t = ct.load(
                K, index=(b, hk, index, j), shape=(1, 1, width, TILE_N), order=(0, 1, 3, 2),
                padding_mode=ct.PaddingMode.ZERO, latency=K_LATENCY,
            ).reshape((width, TILE_N))  # fmt: skip
        else:
            k_t = ct.load(
                K, index=(b, hk, index, j), shape=(1, 1, width, TILE_N), order=(0, 1, 3, 2),
                check_bounds=False, latency=K_LATENCY,
            ).reshape((width, TILE_N))  # fmt: skip
        qk = ct.mma(qs[c], k_t, qk)
    return qk


def softmax_update_chunks(qk, V, where, state, edge, CHECKED, masked, OPTS, TILE_DV):
    """``softmax_update`` of :mod:`kernels.cutile.device` with the accumulator in chunks of
    Dv (``state`` = (m_i, l_i, accumulators)): the same mask, max and exp2, then each chunk
    rescaled and given its own P·V MMA."""
    b, hk, j = where
    m_i, l_i, accs = state
    rows_ip, cols_tile, k_len, window, qk_scale_log2 = edge
    MASK, FAST_MATH, _, V_LATENCY, POLY_COLS, D_PADDED = OPTS
    TILE_N = cols_tile.shape[1]
    if masked:
        cols = j * TILE_N + cols_tile  # [1, TILE_N]
        visible = cols < k_len  # keys past k_len are padding
        if MASK >= 1:
            visible = visible & (cols <= rows_ip)  # causal: j <= i + input_pos
        if MASK == 2:
            visible = visible & (cols > rows_ip - window)  # window: j > i + input_pos - W
        qk = ct.where(visible, qk, NEG_INF)
        m_ij = max(m_i, ct.max(qk, axis=1, keepdims=True) * qk_scale_log2)  # [TILE_M, 1]
        # A row that has seen no key yet keeps m = -inf: subtract 0 (exp2 0, not NaN).
        m_sub = ct.where(m_ij == NEG_INF, 0.0, m_ij)
    else:
        m_ij = max(m_i, ct.max(qk, axis=1, keepdims=True) * qk_scale_log2)  # [TILE_M, 1]
        m_sub = m_ij  # every row saw a finite score in this block
    p = exp2_mixed(qk * qk_scale_log2 - m_sub, POLY_COLS, FAST_MATH)  # [TILE_M, TILE_N]
    alpha = ct.exp2(m_i - m_sub, flush_to_zero=FAST_MATH)  # [TILE_M, 1]
    l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
    p = p.astype(V.dtype)
    out = ()
    for c, width, index in ct.static_iter(chunk_tiles(TILE_DV)):
        # A chunk's columns past the array's come in as zeros only through a checked load.
        if CHECKED or D_PADDED:
            v = ct.load(
                V, index=(b, hk, j, index), shape=(1, 1, TILE_N, width),
                padding_mode=ct.PaddingMode.ZERO, latency=V_LATENCY,
            ).reshape((TILE_N, width))  # fmt: skip
        else:
            v = ct.load(
                V, index=(b, hk, j, index), shape=(1, 1, TILE_N, width),
                check_bounds=False, latency=V_LATENCY,
            ).reshape((TILE_N, width))  # fmt: skip
        out = (*out, ct.mma(p, v, accs[c] * alpha))
    return (m_ij, l_i, out)


def block_step_chunks(qs, K, V, where, state, edge, CHECKED, masked, OPTS, TILE):
    """One online-softmax step over key block ``where[2]`` in column chunks; ``TILE`` =
    (TILE_N, TILE_D, TILE_DV)."""
    TILE_N, TILE_D, TILE_DV = TILE
    qk = scores_chunks(qs, K, where, CHECKED or OPTS[5], OPTS[2], TILE_N, TILE_D)
    return softmax_update_chunks(qk, V, where, state, edge, CHECKED, masked, OPTS, TILE_DV)


def epilogue_chunks(state, Out, Lse, where, FAST_MATH, WITH_LSE, STORE_TMA, TILE_DV):
    """Normalise and store one output tile chunk by chunk (and its LSE rows); ``where`` =
    (batch, head, q-block). The store drops the columns of a chunk past the head dim."""
    b, h, qb = where
    m_i, l_i, accs = state
    TILE_M = accs[0].shape[0]
    l_safe = ct.where(l_i == 0.0, 1.0, l_i)  # rows that saw no key: acc is 0, output 0
    if FAST_MATH:
        inv_l = ct.truediv(1.0, l_safe, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)
    else:
        inv_l = 1.0 / l_safe
    for c, width, index in ct.static_iter(chunk_tiles(TILE_DV)):
        out = (accs[c] * inv_l).astype(Out.dtype).reshape((1, 1, TILE_M, width))
        ct.store(Out, index=(b, h, qb, index), tile=out, allow_tma=STORE_TMA)
    if WITH_LSE:
        lse = (m_i + ct.log2(l_safe)) * LN2  # natural log; -inf for rows that saw no key
        ct.store(Lse, index=(b, h, qb), tile=lse.reshape((1, 1, TILE_M)))
