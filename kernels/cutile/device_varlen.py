"""The varlen prefill kernel: sequences of different lengths packed end to end (FlashAttention's
``cu_seqlens`` layout), one CTA per (head, q-block of a sequence), no padding computed.

The grid is (query head, tile); the host passes Q, K, V, Out as (1, heads, total_tokens, D)
views of the packed (total_tokens, heads, D) tensors (a permute, no copy) and a table of the
q-blocks that hold a query (``kernels.serving_schedule.varlen_tiles``). Each CTA slices its
sequence out of the token axis (``Array.slice``): inside the slice the shared block steps of
``kernels.cutile.device`` run unchanged, a bounds-checked load past the sequence's last key is
zero-padded, and a store past its last query is dropped (the next sequence is never touched).

Masks per sequence, bottom-right aligned: query ``i`` of a sequence with ``lq`` queries and
``lk`` keys sees keys ``j <= i + lk - lq`` (causal) and ``j > i + lk - lq - window`` (window).
The key blocks a tile visits are split in three runs: window-edge blocks (masked), blocks every
row sees whole (unmasked, unchecked loads), and the causal diagonal with the ragged last block
(masked, checked loads).
"""

from __future__ import annotations

import cuda.tile as ct

from kernels.cutile.device import (
    NEG_INF,
    BlockOptions,
    TileShape,
    ValueTile,
    block_step,
    epilogue,
    kernel,
    load_q,
)


@kernel
def fmha_varlen_kernel(
    Q,  # [1, Hq, total_q, D]: a view of the packed (total_q, Hq, D) query
    K,  # [1, Hkv, total_k, D]
    V,  # [1, Hkv, total_k, Dv]
    Out,  # [1, Hq, total_q, Dv]
    Lse,  # [1, Hq, total_q] float32, natural log (a dummy [1, 1, 1] unless WITH_LSE)
    Tiles,  # [tiles, 8] int32: q_start, q_len, k_start, k_len, q_block, seq, work, pad
    qk_scale_log2: float,  # scale * log2(e)
    kv_group: int,  # query heads per KV head
    window: int,  # the window mask's width (MASK 2), else unused
    TILE: TileShape,
    VALUE_TILE: ValueTile,
    OPTS: BlockOptions,  # MASK 0 none, 1 causal, 2 causal with a window
    WITH_LSE: ct.Constant[bool],
):
    """One (query head, tile of the table) per CTA: heads fastest, so the query heads of a KV
    head read its K and V at about the same time (from L2), and the table's longest tiles
    start first."""
    TILE_M, TILE_N, TILE_D = TILE
    (TILE_DV,) = VALUE_TILE
    MASK, FAST_MATH, K_LATENCY, V_LATENCY, _, D_PADDED = OPTS
    h = ct.bid(0)
    t = ct.bid(1)
    hk = h // kv_group
    q0 = ct.gather(Tiles, (t, 0), check_bounds=False)
    lq = ct.gather(Tiles, (t, 1), check_bounds=False)
    k0 = ct.gather(Tiles, (t, 2), check_bounds=False)
    lk = ct.gather(Tiles, (t, 3), check_bounds=False)
    qb = ct.gather(Tiles, (t, 4), check_bounds=False)

    # This sequence's tokens; a sequence with no key slices nothing at a valid start (a slice
    # must start inside the array), and its loop below runs no block.
    total_k = K.shape[2]
    k_start = min(k0, total_k - 1)
    Qs = Q.slice(axis=2, start=q0, stop=q0 + lq)
    Os = Out.slice(axis=2, start=q0, stop=q0 + lq)
    Ks = K.slice(axis=2, start=k_start, stop=k_start + lk)
    Vs = V.slice(axis=2, start=k_start, stop=k_start + lk)

    # ---- the key blocks this tile's rows see --------------------------------------------
    input_pos = lk - lq
    first = qb * TILE_M
    last = min(first + TILE_M, lq) - 1
    even_k_blocks = lk // TILE_N
    hi = ct.cdiv(lk, TILE_N)
    full_hi = even_k_blocks
    lo = 0
    edge_hi = 0  # window-edge blocks: [lo, edge_hi)
    if MASK >= 1:
        see_hi = min(last + input_pos, lk - 1)
        hi = 0
        if see_hi >= 0:
            hi = see_hi // TILE_N + 1
        full_hi = 0
        if first + input_pos >= 0:
            full_hi = min((first + input_pos + 1) // TILE_N, even_k_blocks)
        full_hi = min(full_hi, hi)
    if MASK == 2:
        lo = min(max(first + input_pos - window + 1, 0) // TILE_N, hi)
        # Every row sees block j whole from j·TILE_N > last + input_pos - window on.
        edge_hi = ct.cdiv(max(last + input_pos - window + 1, 0), TILE_N)
    edge_hi = min(max(edge_hi, lo), hi)
    diag_lo = max(full_hi, edge_hi)

    # ---- state ----------------------------------------------------------------------------
    q = load_q(Qs, (0, h, qb), TILE_M, TILE_D, False)  # [TILE_M, TILE_D]
    rows_ip = (first + input_pos + ct.arange(TILE_M, dtype=ct.int32))[:, None]  # [TILE_M, 1]
    cols_tile = ct.arange(TILE_N, dtype=ct.int32)[None, :]  # [1, TILE_N]
    m_i = ct.full((TILE_M, 1), NEG_INF, dtype=ct.float32)
    l_i = ct.zeros((TILE_M, 1), dtype=ct.float32)
    acc = ct.zeros((TILE_M, TILE_DV), dtype=ct.float32)
    state = (m_i, l_i, acc)
    edge = (rows_ip, cols_tile, lk, window, qk_scale_log2)
    masked_opts = (MASK, FAST_MATH, K_LATENCY, V_LATENCY, 0, D_PADDED)  # no polynomial

    for j in range(lo, edge_hi):
        state = block_step(q, Ks, Vs, (0, hk, j), state, edge, True, True, masked_opts)
    for j in range(edge_hi, diag_lo):
        state = block_step(q, Ks, Vs, (0, hk, j), state, edge, False, False, OPTS)
    for j in range(diag_lo, hi):
        state = block_step(q, Ks, Vs, (0, hk, j), state, edge, True, True, masked_opts)

    if WITH_LSE:
        Ls = Lse.slice(axis=2, start=q0, stop=q0 + lq)
        epilogue(state, Os, Ls, (0, h, qb), FAST_MATH, True, True)
    else:
        epilogue(state, Os, Lse, (0, h, qb), FAST_MATH, False, True)
