"""The "decode" kernel form: packed GQA heads and the key range split across CTAs
(FlashDecoding), and the kernel that combines the splits.

Decode is a few query rows against a long KV cache: reading K and V is the whole cost, and one
CTA per (batch, head, q-block) leaves most SMs idle. Two changes fix that:

- **Packed GQA heads.** The query heads of one KV head are adjacent in Q, so Q (B, H, q_len, D)
  is viewed as (B, Hkv, group·q_len, D) and those rows share one tile: each K/V block is read
  once per group, not once per head. Row ``r`` is query position ``r % q_len`` (its mask row).
  Unpacked, Q's heads are the tiles' heads as in the tile form and ``kv_group`` maps them to
  their KV head.
- **Split key range.** Grid axis 2 is the split: split ``s`` reads key blocks
  ``[s·split_blocks, (s+1)·split_blocks)`` of its tile's range (``kernels.schedule.
  split_ranges``) and writes its normalised output and its log2-sum-exp; the combine kernel
  weighs each split by ``exp2(lse_s - max_s lse_s)``. A split whose rows see no key writes 0
  and -inf and weighs nothing. With one split the kernel writes Out and Lse itself.

The loop bounds are ``kernels.schedule.rows_k_block_range`` for the query positions the tile's
rows hold (``kernels.schedule.packed_row_span``), in the same integer arithmetic, intersected
with the split's blocks.
"""

from __future__ import annotations

import cuda.tile as ct

from kernels.cutile.device import (
    LN2,
    NEG_INF,
    BlockOptions,
    TileShape,
    ValueTile,
    block_step,
    constant_group,
    epilogue,
    kernel,
    load_q,
)

# The decode kernel's switches, compiled in.
DecodeSwitches = constant_group(
    K_SPLIT=bool,  # unmasked and masked blocks in two loops, vs one loop with a branch
    WITH_LSE=bool,  # one split only: the combine writes Lse otherwise
    STORE_TMA=bool,
    SPLIT=bool,  # more than one split: write OutParts/LseParts for the combine
    WITH_MAP=bool,  # record each key block a split visits (BlockMap) and which split (Order)
)
# The combine's tile: splits, rows and head-dim columns per CTA.
CombineTile = constant_group(
    TILE_S=int,  # the splits, padded to a power of two
    TILE_R=int,  # rows per CTA
    TILE_DC=int,  # head-dim columns per CTA
)
# The combine's switches, compiled in.
CombineSwitches = constant_group(WITH_LSE=bool, STORE_TMA=bool)


@kernel
def fmha_decode_kernel(
    Q,  # [B, HQ, R, D]: HQ = Hkv and R = group·q_len when packed, else H and q_len
    K,  # [B, Hkv, k_len, D]
    V,  # [B, Hkv, k_len, Dv]
    Out,  # [B, HQ, R, Dv] (written only with one split)
    Lse,  # [B, HQ, R] float32 (dummy [1, 1, 1] unless WITH_LSE)
    OutParts,  # [B·HQ, splits, R, Dv] float32, each split's output (dummy with one split)
    LseParts,  # [B·HQ, splits, R] float32, each split's log2-sum-exp (dummy with one split)
    BlockMap,  # [B·HQ, row blocks, k blocks] int32: 1 unmasked, 2 masked (dummy unless WITH_MAP)
    Order,  # [B·HQ, row blocks, k blocks] int32: the split that read each block (likewise)
    qk_scale_log2: float,  # scale * log2(e)
    input_pos: int,  # causal offset: position i sees key j <= i + input_pos
    q_len: int,  # query positions per head: row r is position r % q_len
    kv_group: int,  # Q's heads per KV head (1 when packed: Q's heads are the KV heads)
    split_blocks: int,  # key blocks per split
    TILE: TileShape,
    VALUE_TILE: ValueTile,
    OPTS: BlockOptions,  # MASK 0 none or 1 causal
    SWITCHES: DecodeSwitches,
):
    """One (row block, batch·head, split) per CTA."""
    TILE_M, TILE_N, TILE_D = TILE
    (TILE_DV,) = VALUE_TILE
    MASK, FAST_MATH, K_LATENCY, V_LATENCY, _, D_PADDED = OPTS
    K_SPLIT, WITH_LSE, STORE_TMA, SPLIT, WITH_MAP = SWITCHES
    rb = ct.bid(0)
    bh = ct.bid(1)
    s = ct.bid(2)
    n_heads = Q.shape[1]
    rows = Q.shape[2]
    k_len = K.shape[2]
    b = bh // n_heads
    h = bh % n_heads
    hk = h // kv_group

    # ---- the query positions of this tile's rows: kernels.schedule.packed_row_span ----------
    first = rb * TILE_M
    last = min(first + TILE_M, rows) - 1
    first_row = 0
    last_row = q_len - 1
    if (last - first + 1 < q_len) & (first // q_len == last // q_len):
        first_row = first % q_len
        last_row = last % q_len

    # ---- loop bounds: kernels.schedule.rows_k_block_range (mask none or causal) -------------
    even_k_blocks = k_len // TILE_N
    see_hi_first = k_len - 1
    see_hi_last = k_len - 1
    if MASK != 0:
        see_hi_first = first_row + input_pos
        see_hi_last = last_row + input_pos
    see_hi = min(see_hi_last, k_len - 1)
    hi = see_hi // TILE_N + 1
    full_hi = 0
    if see_hi_first >= 0:
        full_hi = min(min((see_hi_first + 1) // TILE_N, even_k_blocks), hi)
    if see_hi < 0:  # no row of this tile sees any key
        hi = 0
        full_hi = 0
    # ... and this split's share of them: unmasked [u_lo, u_hi), masked [u_hi, v_hi).
    s_lo = s * split_blocks
    s_hi = s_lo + split_blocks
    u_lo = min(s_lo, full_hi)
    u_hi = min(s_hi, full_hi)
    v_lo = max(min(s_lo, hi), u_hi)
    v_hi = max(min(s_hi, hi), v_lo)

    # ---- state ----------------------------------------------------------------------------
    q = load_q(Q, (b, h, rb), TILE_M, TILE_D, False)  # [TILE_M, TILE_D]
    positions = (first + ct.arange(TILE_M, dtype=ct.int32)) % q_len
    rows_ip = (positions + input_pos)[:, None]  # [TILE_M, 1]
    cols_tile = ct.arange(TILE_N, dtype=ct.int32)[None, :]  # [1, TILE_N]
    m_i = ct.full((TILE_M, 1), NEG_INF, dtype=ct.float32)
    l_i = ct.zeros((TILE_M, 1), dtype=ct.float32)
    acc = ct.zeros((TILE_M, TILE_DV), dtype=ct.float32)
    state = (m_i, l_i, acc)
    edge = (rows_ip, cols_tile, k_len, 0, qk_scale_log2)
    opts = (MASK, FAST_MATH, K_LATENCY, V_LATENCY, 0, D_PADDED)  # masked: no polynomial
    opts_unmasked = OPTS

    if K_SPLIT:
        for j in range(u_lo, u_hi):
            state = block_step(q, K, V, (b, hk, j), state, edge, False, False, opts_unmasked)
            if WITH_MAP:
                ct.atomic_add(BlockMap, (bh, rb, j), 1)
                ct.store(Order, (bh, rb, j), s)
        for j in range(v_lo, v_hi):
            state = block_step(q, K, V, (b, hk, j), state, edge, True, True, opts)
            if WITH_MAP:
                ct.atomic_add(BlockMap, (bh, rb, j), 2)
                ct.store(Order, (bh, rb, j), s)
    else:
        for j in range(min(s_lo, hi), v_hi):  # the split's visited blocks in key order
            masked = j >= full_hi
            state = block_step(q, K, V, (b, hk, j), state, edge, True, masked, opts)
            if WITH_MAP:
                kind = 1
                if masked:
                    kind = 2
                ct.atomic_add(BlockMap, (bh, rb, j), kind)
                ct.store(Order, (bh, rb, j), s)

    if SPLIT:
        m_i, l_i, acc = state
        l_safe = ct.where(l_i == 0.0, 1.0, l_i)  # a split that saw no key: acc 0, output 0
        part = (acc / l_safe).reshape((1, 1, TILE_M, TILE_DV))
        ct.store(OutParts, index=(bh, s, rb, 0), tile=part, allow_tma=STORE_TMA)
        lse2 = m_i + ct.log2(l_safe)  # base 2; -inf where the split saw no key
        ct.store(LseParts, index=(bh, s, rb), tile=lse2.reshape((1, 1, TILE_M)))
    else:
        epilogue(state, Out, Lse, (b, h, rb), FAST_MATH, WITH_LSE, STORE_TMA)


@kernel
def fmha_decode_combine_kernel(
    OutParts,  # [B·HQ, splits, R, Dv] float32
    LseParts,  # [B·HQ, splits, R] float32, base 2
    Out,  # [B, HQ, R, D]
    Lse,  # [B, HQ, R] float32, natural log (dummy [1, 1, 1] unless WITH_LSE)
    TILE: CombineTile,
    SWITCHES: CombineSwitches,
):
    """Merge the splits of one (row block, batch·head, column block): the online-softmax
    rescale, each split weighed by exp2(lse_s - max lse), not averaged; rows no split saw get
    0 and -inf. Every split's LSE and output come in one load each (no loop over the splits:
    a loop of dependent small loads cost more than the split kernel saved)."""
    TILE_S, TILE_R, TILE_DC = TILE
    WITH_LSE, STORE_TMA = SWITCHES
    rb = ct.bid(0)
    bh = ct.bid(1)
    dc = ct.bid(2)
    n_heads = Out.shape[1]
    b = bh // n_heads
    h = bh % n_heads

    lse = ct.load(
        LseParts, index=(bh, 0, rb), shape=(1, TILE_S, TILE_R), padding_mode=ct.PaddingMode.NEG_INF
    ).reshape((TILE_S, TILE_R))
    top = ct.max(lse, axis=0, keepdims=True)  # [1, TILE_R]
    # Rows no split saw keep -inf: subtract 0 there so that exp2 gives 0, not NaN.
    top_safe = ct.where(top == NEG_INF, 0.0, top)
    weight = ct.exp2(lse - top_safe)  # [TILE_S, TILE_R]; 0 for splits that saw nothing
    total = ct.sum(weight, axis=0, keepdims=True)  # [1, TILE_R]
    parts = ct.load(
        OutParts,
        index=(bh, 0, rb, dc),
        shape=(1, TILE_S, TILE_R, TILE_DC),
        padding_mode=ct.PaddingMode.ZERO,
    ).reshape((TILE_S, TILE_R, TILE_DC))
    acc = ct.sum(parts * weight.reshape((TILE_S, TILE_R, 1)), axis=0)  # [TILE_R, TILE_DC]
    total_safe = ct.where(total == 0.0, 1.0, total).reshape((TILE_R, 1))
    out = (acc / total_safe).astype(Out.dtype).reshape((1, 1, TILE_R, TILE_DC))
    ct.store(Out, index=(b, h, rb, dc), tile=out, allow_tma=STORE_TMA)
    if WITH_LSE:  # noqa: SIM102 (a compile-time switch around a runtime test)
        if dc == 0:
            lse_out = (top_safe + ct.log2(total)) * LN2  # log2(0) = -inf: rows no split saw
            ct.store(Lse, index=(b, h, rb), tile=lse_out.reshape((1, 1, TILE_R)))
