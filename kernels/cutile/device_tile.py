"""The "tile" kernel form: one CTA per (q-block, batch·head) tile, every mask.

The loop bounds are computed on the device with exactly the integer arithmetic of
``kernels.schedule.k_block_range``; with ``WITH_MAP`` the kernel records what its own loops
visited, so a test can compare it with ``kernels.schedule.block_map``.
"""

from __future__ import annotations

import cuda.tile as ct

from kernels.cutile.device import (
    NEG_INF,
    BlockOptions,
    TileShape,
    ValueTile,
    constant_group,
    kernel,
)
from kernels.cutile.device_chunks import (
    block_step_chunks,
    epilogue_chunks,
    load_q_chunks,
    scores_chunks,
    softmax_update_chunks,
    zero_accumulators,
)

# The tile kernel's switches, compiled in.
TileSwitches = constant_group(
    K_SPLIT=bool,  # unmasked and masked blocks in two loops, vs one loop with a branch
    WITH_LSE=bool,
    WITH_MAP=bool,
    PIPELINE=bool,  # K-split only: next block's q·Kᵀ issued before this block's softmax
    STORE_TMA=bool,  # output written by a TMA store (through shared memory) or directly
)


@kernel
def fmha_fwd_kernel(
    Q,  # [B, H, q_len, D]
    K,  # [B, Hkv, k_len, D]
    V,  # [B, Hkv, k_len, Dv]
    Out,  # [B, H, q_len, Dv]
    Lse,  # [B, H, q_len] float32 (dummy [1, 1, 1] unless WITH_LSE)
    BlockMap,  # [B*H, n_q_blocks, n_k_blocks] int32 (dummy unless WITH_MAP)
    Order,  # [B*H, n_q_blocks] int32: program id per (batch·head, q-block) (dummy unless WITH_MAP)
    qk_scale_log2: float,  # scale * log2(e)
    input_pos: int,  # causal offset: row i sees key j <= i + input_pos
    window: int,  # window width W (used only when MASK == 2)
    group: int,  # query heads per kv head (GQA)
    remap_group: int,  # 0: plain order; > 0: heavy-first order, this many batch·heads per group
    TILE: TileShape,
    VALUE_TILE: ValueTile,
    OPTS: BlockOptions,
    SWITCHES: TileSwitches,
):
    """Attention for every mask, one CTA per tile; the program id picks the tile, in plain or
    heavy-first order (``remap_group``). D and Dv run in the column chunks of ``TILE_D`` and
    ``TILE_DV`` (:mod:`kernels.cutile.device_chunks`)."""
    TILE_M, TILE_N, TILE_D = TILE
    (TILE_DV,) = VALUE_TILE
    MASK, FAST_MATH, K_LATENCY, V_LATENCY, _, D_PADDED = OPTS
    K_SPLIT, WITH_LSE, WITH_MAP, PIPELINE, STORE_TMA = SWITCHES
    n_heads = Q.shape[1]
    q_len = Q.shape[2]
    k_len = K.shape[2]
    n_bh = Q.shape[0] * n_heads
    n_q_blocks = ct.cdiv(q_len, TILE_M)

    # ---- which (q-block, batch·head) this program owns -------------------------------------
    pid = ct.bid(0)
    if remap_group > 0:
        # Groups of `remap_group` batch·heads run one after another so their K/V stay in L2;
        # inside a group the q-blocks run last-first (heaviest causal rows first, so the short
        # rows fill the tail wave), and the batch·heads of the group vary fastest.
        span = n_q_blocks * remap_group
        grp = pid // span
        bh0 = grp * remap_group
        gsize = min(remap_group, n_bh - bh0)
        r = pid - grp * span
        qb = n_q_blocks - 1 - r // gsize
        bh = bh0 + r % gsize
    else:
        qb = pid % n_q_blocks
        bh = pid // n_q_blocks
    b = bh // n_heads
    h = bh % n_heads
    hk = h // group

    # ---- loop bounds: kernels.schedule.k_block_range, in the same integer arithmetic --------
    first_row = qb * TILE_M
    last_row = min(first_row + TILE_M, q_len) - 1
    even_k_blocks = k_len // TILE_N
    if MASK == 0:
        see_hi_first = k_len - 1
        see_hi_last = k_len - 1
        see_lo_first = 0
        see_lo_last = 0
    else:
        see_hi_first = first_row + input_pos
        see_hi_last = last_row + input_pos
        if MASK == 2:
            see_lo_first = first_row + input_pos - window + 1
            see_lo_last = last_row + input_pos - window + 1
        else:
            see_lo_first = 0
            see_lo_last = 0
    see_lo = max(see_lo_first, 0)
    see_hi = min(see_hi_last, k_len - 1)
    lo = see_lo // TILE_N
    hi = see_hi // TILE_N + 1
    full_lo = max(ct.cdiv(max(see_lo_last, 0), TILE_N), lo)
    full_hi = lo
    if see_hi_first >= 0:
        full_hi = min(min((see_hi_first + 1) // TILE_N, even_k_blocks), hi)
    if full_hi <= full_lo:
        full_lo = max(min(full_lo, hi), lo)
        full_hi = full_lo
    if see_hi < see_lo:  # no row of this block sees any key
        lo = 0
        hi = 0
        full_lo = 0
        full_hi = 0

    # ---- state ----------------------------------------------------------------------------
    q = load_q_chunks(Q, (b, h, qb), TILE_M, TILE_D, False)  # a [TILE_M, c] tile per chunk
    rows_ip = (first_row + input_pos + ct.arange(TILE_M, dtype=ct.int32))[:, None]  # [TILE_M, 1]
    cols_tile = ct.arange(TILE_N, dtype=ct.int32)[None, :]  # [1, TILE_N]
    m_i = ct.full((TILE_M, 1), NEG_INF, dtype=ct.float32)
    l_i = ct.zeros((TILE_M, 1), dtype=ct.float32)
    widths = (TILE_N, TILE_D, TILE_DV)
    state = (m_i, l_i, zero_accumulators(TILE_M, TILE_DV))
    edge = (rows_ip, cols_tile, k_len, window, qk_scale_log2)
    opts = (MASK, FAST_MATH, K_LATENCY, V_LATENCY, 0, D_PADDED)  # masked: no polynomial
    opts_unmasked = OPTS

    if WITH_MAP:
        ct.store(Order, (bh, qb), pid)

    # ---- main loops -----------------------------------------------------------------------
    if K_SPLIT:
        # Unmasked middle first: no mask code, no -inf guard, no bounds checks.
        if PIPELINE:
            # Software pipelining: issue block j+1's q·Kᵀ before block j's softmax, so the
            # tensor cores have work while the exp2s run (FlashAttention-3's intra-warpgroup
            # overlap, written out by hand; costs one more [TILE_M, TILE_N] score tile).
            if full_hi > full_lo:
                qk = scores_chunks(q, K, (b, hk, full_lo), D_PADDED, K_LATENCY, TILE_N, TILE_D)
                for j in range(full_lo, full_hi - 1):
                    qk_next = scores_chunks(
                        q, K, (b, hk, j + 1), D_PADDED, K_LATENCY, TILE_N, TILE_D
                    )
                    state = softmax_update_chunks(
                        qk, V, (b, hk, j), state, edge, False, False, opts_unmasked, TILE_DV
                    )
                    qk = qk_next
                    if WITH_MAP:
                        ct.atomic_add(BlockMap, (bh, qb, j), 1)
                state = softmax_update_chunks(
                    qk, V, (b, hk, full_hi - 1), state, edge, False, False, opts_unmasked,
                    TILE_DV,
                )  # fmt: skip
                if WITH_MAP:
                    ct.atomic_add(BlockMap, (bh, qb, full_hi - 1), 1)
        else:
            for j in range(full_lo, full_hi):
                state = block_step_chunks(
                    q, K, V, (b, hk, j), state, edge, False, False, opts_unmasked, widths
                )
                if WITH_MAP:
                    ct.atomic_add(BlockMap, (bh, qb, j), 1)
        # Masked blocks: the window edge [lo, full_lo) and the diagonal/ragged edge
        # [full_hi, hi), walked as one loop so the masked code is emitted once.
        n_left = full_lo - lo
        n_masked = n_left + hi - full_hi
        for t in range(n_masked):
            j = lo + t
            if t >= n_left:
                j = full_hi + t - n_left
            state = block_step_chunks(q, K, V, (b, hk, j), state, edge, True, True, opts, widths)
            if WITH_MAP:
                ct.atomic_add(BlockMap, (bh, qb, j), 2)
    else:
        # One loop in key order, every load bounds-checked; the mask code runs only on the
        # blocks that need it (a branch uniform across the CTA), as in TileGym's kernel.
        for j in range(lo, hi):
            masked = (j < full_lo) | (j >= full_hi)
            state = block_step_chunks(q, K, V, (b, hk, j), state, edge, True, masked, opts, widths)
            if WITH_MAP:
                kind = 1
                if masked:
                    kind = 2
                ct.atomic_add(BlockMap, (bh, qb, j), kind)

    epilogue_chunks(state, Out, Lse, (b, h, qb), FAST_MATH, WITH_LSE, STORE_TMA, TILE_DV)
