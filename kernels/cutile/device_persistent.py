"""The persistent kernel forms: a few programs per SM, each looping over tiles.

"persistent" runs problems without a mask (every tile loops over the same key blocks);
"causal-persistent" runs causal problems that are whole square tiles, with the tiles dealt out
on the host by work (``kernels.schedule.causal_tile_assignment``). ``kernels.cutile.forms`` and
``LaunchConfig.kernel_form`` say when each runs; the result files named below say why each is
written as it is.
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
    key_offsets,
    tile_coords,
)
from kernels.cutile.device_chunks import (
    block_step_chunks,
    epilogue_chunks,
    load_q_chunks,
    scores_chunks,
    softmax_update_chunks,
    zero_accumulators,
)

# The persistent grid's switches, compiled in.
PersistentSwitches = constant_group(
    K_SPLIT=bool,
    WITH_LSE=bool,
    WITH_MAP=bool,
    STORE_TMA=bool,
    Q_HALVES=bool,  # each Q tile fetched as two column halves (else whole)
    EVEN_K=bool,  # k_len % TILE_N == 0: no ragged last key block
    Q_PREFETCH=bool,  # EVEN_K and K_SPLIT: the next tile's Q is loaded during this one
    PAIRED_K=bool,  # Q_PREFETCH and an even number of key blocks: two blocks an iteration
)
# The causal persistent grid's switches, compiled in.
CausalPersistentSwitches = constant_group(
    WITH_LSE=bool,
    WITH_MAP=bool,
    STORE_TMA=bool,
    Q_HALVES=bool,  # each Q tile fetched as two column halves (else whole)
)


@kernel
def fmha_fwd_persistent_kernel(
    Q,  # [B, H, q_len, D]
    K,  # [B, Hkv, k_len, D]
    V,  # [B, Hkv, k_len, Dv]
    Out,  # [B, H, q_len, Dv]
    Lse,  # [B, H, q_len] float32 (dummy [1, 1, 1] unless WITH_LSE)
    BlockMap,  # [B*H, n_q_blocks, n_k_blocks] int32 (dummy unless WITH_MAP)
    Order,  # [B*H, n_q_blocks] int32: the tile's place in the grid-stride order (WITH_MAP)
    qk_scale_log2: float,
    group: int,
    TILE: TileShape,
    VALUE_TILE: ValueTile,
    OPTS: BlockOptions,  # its MASK is not read: this kernel runs no mask
    SWITCHES: PersistentSwitches,
):
    """Attention without a mask as a persistent grid: G programs, each walking tiles
    ``t = pid, pid + G, …`` (tile t is q-block ``t % n_q`` of batch·head ``t // n_q``, the
    plain launch order).

    Every tile loops over the same key blocks, so the compiler's producer warp runs on into
    the next tile's K/V while the consumers finish this one. With ``Q_PREFETCH`` the next
    tile's Q is loaded at the top of this one (``q_next``) so that it is in shared memory when
    this tile's epilogue ends
    (bench/results/experiments/h200-explore-persistent-prefetch.md). It is only
    compiled in when no key block needs the mask: with the carried Q and a masked block in
    the same tile body tileiras 13.4 produced wrong results on the H200 (same file). D and Dv
    run in the column chunks of ``TILE_D`` and ``TILE_DV`` (:mod:`kernels.cutile.device_chunks`).

    With ``Q_HALVES`` every Q tile is fetched as two column halves and joined in registers
    (:func:`load_q`):
    fetched whole, half of the next Q shared the output staging tile's shared memory, and the
    consumer warpgroups met at named barriers at every tile boundary; in halves it gets
    buffers of its own (bench/results/experiments/h200-explore-q-split.md, h200-profile-source.md).

    With ``PAIRED_K`` the key loop takes two blocks an iteration: tileiras 13.4 gives each
    load site one shared-memory buffer, so two sites give K and V two buffers each and the
    producer need not wait for both consumers before fetching the next block. It wins on short
    sequences only, so it is a tuning entry
    (bench/results/experiments/h200-explore-persistent-pairs.md).
    """
    TILE_M, TILE_N, TILE_D = TILE
    (TILE_DV,) = VALUE_TILE
    _, FAST_MATH, K_LATENCY, V_LATENCY, _, D_PADDED = OPTS
    K_SPLIT, WITH_LSE, WITH_MAP, STORE_TMA, Q_HALVES, EVEN_K, Q_PREFETCH, PAIRED_K = SWITCHES
    n_heads = Q.shape[1]
    k_len = K.shape[2]
    n_q_blocks = ct.cdiv(Q.shape[2], TILE_M)
    n_tiles = Q.shape[0] * n_heads * n_q_blocks
    n_programs = ct.num_blocks(0)
    pid = ct.bid(0)
    even_k_blocks = k_len // TILE_N
    n_k_blocks = ct.cdiv(k_len, TILE_N)
    cols_tile = ct.arange(TILE_N, dtype=ct.int32)[None, :]  # [1, TILE_N]
    opts = (0, FAST_MATH, K_LATENCY, V_LATENCY, 0, D_PADDED)  # the ragged block: no polynomial
    opts_unmasked = OPTS
    widths = (TILE_N, TILE_D, TILE_DV)

    q = load_q_chunks(Q, tile_coords(pid, n_q_blocks, n_heads), TILE_M, TILE_D, Q_HALVES)
    for t in range(pid, n_tiles, n_programs):
        bh = t // n_q_blocks
        b, h, qb = tile_coords(t, n_q_blocks, n_heads)
        hk = h // group
        if Q_PREFETCH:
            # The next tile's Q (this one again on the last lap: in bounds, never used).
            t_next = min(t + n_programs, n_tiles - 1)
            where_next = tile_coords(t_next, n_q_blocks, n_heads)
            q_next = load_q_chunks(Q, where_next, TILE_M, TILE_D, Q_HALVES)
        else:
            q = load_q_chunks(Q, (b, h, qb), TILE_M, TILE_D, Q_HALVES)
        rows_ip = (qb * TILE_M + ct.arange(TILE_M, dtype=ct.int32))[:, None]  # [TILE_M, 1]
        state = (
            ct.full((TILE_M, 1), NEG_INF, dtype=ct.float32),
            ct.zeros((TILE_M, 1), dtype=ct.float32),
            zero_accumulators(TILE_M, TILE_DV),
        )
        edge = (rows_ip, cols_tile, k_len, 0, qk_scale_log2)  # no window: no mask
        if WITH_MAP:
            ct.store(Order, (bh, qb), t)
        if K_SPLIT:
            # One block step an iteration, or two with PAIRED_K: each step written out is a
            # load site of its own, so two give K and V two buffers each (see above).
            offsets = key_offsets(PAIRED_K)
            for first in range(0, even_k_blocks, len(offsets)):
                for offset in ct.static_iter(offsets):
                    j = first + offset
                    state = block_step_chunks(
                        q, K, V, (b, hk, j), state, edge, False, False, opts_unmasked, widths
                    )
                    if WITH_MAP:
                        ct.atomic_add(BlockMap, (bh, qb, j), 1)
            if not EVEN_K:  # the ragged last key block, bounds-checked and masked
                state = block_step_chunks(
                    q, K, V, (b, hk, even_k_blocks), state, edge, True, True, opts, widths
                )
                if WITH_MAP:
                    ct.atomic_add(BlockMap, (bh, qb, even_k_blocks), 2)
        else:
            for j in range(0, n_k_blocks):
                masked = j >= even_k_blocks
                state = block_step_chunks(
                    q, K, V, (b, hk, j), state, edge, True, masked, opts, widths
                )
                if WITH_MAP:
                    kind = 1
                    if masked:
                        kind = 2
                    ct.atomic_add(BlockMap, (bh, qb, j), kind)
        epilogue_chunks(state, Out, Lse, (b, h, qb), FAST_MATH, WITH_LSE, STORE_TMA, TILE_DV)
        if Q_PREFETCH:
            q = q_next


@kernel
def fmha_fwd_causal_persistent_kernel(
    Q,  # [B, H, q_len, D]
    K,  # [B, Hkv, k_len, D]
    V,  # [B, Hkv, k_len, Dv]
    Out,  # [B, H, q_len, Dv]
    Lse,  # [B, H, q_len] float32 (dummy [1, 1, 1] unless WITH_LSE)
    BlockMap,  # [B*H, n_q_blocks, n_k_blocks] int32 (dummy unless WITH_MAP)
    Order,  # [B*H, n_q_blocks] int32: lap * programs + program that ran the tile (WITH_MAP)
    Tiles,  # [programs, 1 + most tiles] int32: tile count, then bh * n_q_blocks + qb per tile
    qk_scale_log2: float,
    input_pos: int,  # a whole number of key blocks (checked on the host)
    group: int,
    TILE: TileShape,  # TILE_N == TILE_M (checked on the host)
    VALUE_TILE: ValueTile,
    OPTS: BlockOptions,  # its MASK is not read: the kernel masks the diagonal itself
    SWITCHES: CausalPersistentSwitches,
):
    """Causal attention as a persistent grid, for aligned problems
    (:func:`kernels.schedule.causal_grid_aligned`): square tiles, q_len and input_pos whole
    tiles. Q-block ``qb`` then runs key blocks ``0 … qb + input_pos / TILE_N`` and only the
    last, the diagonal, needs the mask: the same lower triangle in every tile, inside the
    array, so no load is bounds-checked.

    Each program runs the tiles the host assigned it (``Tiles``, from
    :func:`kernels.schedule.causal_tile_assignment`): causal tiles differ up to n_q-fold in
    work, and a fixed grid stride left the busiest program well above the mean.

    One key loop over every block, with only the triangle under a branch taken on the
    diagonal: a separate diagonal step after the loop made tileiras 13.4 share its K/V buffers
    with the output staging tile, and the whole masked update under the branch was slower.
    The polynomial exp2 (``POLY_COLS``) also sees the diagonal's masked scores: it clamps -inf
    to 2^-126, which P's fp16 cast turns into 0. Q is loaded at the top of each tile (in column
    halves with ``Q_HALVES``, see :func:`fmha_fwd_persistent_kernel`), not prefetched. All of it:
    bench/results/experiments/h200-explore-causal-persistent.md.
    """
    TILE_M, TILE_N, TILE_D = TILE
    (TILE_DV,) = VALUE_TILE
    _, FAST_MATH, K_LATENCY, _, _, D_PADDED = OPTS
    WITH_LSE, WITH_MAP, STORE_TMA, Q_HALVES = SWITCHES
    n_heads = Q.shape[1]
    k_len = K.shape[2]
    n_q_blocks = Q.shape[2] // TILE_M
    n_programs = ct.num_blocks(0)
    pid = ct.bid(0)
    diag_offset = input_pos // TILE_N
    cols_tile = ct.arange(TILE_N, dtype=ct.int32)[None, :]  # [1, TILE_N]
    rows_local = ct.arange(TILE_M, dtype=ct.int32)[:, None]  # [TILE_M, 1]

    n_mine = ct.gather(Tiles, (pid, 0), check_bounds=False)
    for i in range(0, n_mine):
        code = ct.gather(Tiles, (pid, i + 1), check_bounds=False)
        bh = code // n_q_blocks
        qb = code % n_q_blocks
        b = bh // n_heads
        h = bh % n_heads
        hk = h // group
        diag = qb + diag_offset
        q = load_q_chunks(Q, (b, h, qb), TILE_M, TILE_D, Q_HALVES)
        rows_ip = qb * TILE_M + input_pos + rows_local  # [TILE_M, 1]
        state = (
            ct.full((TILE_M, 1), NEG_INF, dtype=ct.float32),
            ct.zeros((TILE_M, 1), dtype=ct.float32),
            zero_accumulators(TILE_M, TILE_DV),
        )
        edge = (rows_ip, cols_tile, k_len, 0, qk_scale_log2)  # no window: causal only
        if WITH_MAP:
            ct.store(Order, (bh, qb), i * n_programs + pid)
        for j in range(0, diag + 1):
            qk = scores_chunks(q, K, (b, hk, j), D_PADDED, K_LATENCY, TILE_N, TILE_D)
            if j == diag:  # the diagonal: the same triangle in every tile
                qk = ct.where(cols_tile <= rows_local, qk, NEG_INF)
            state = softmax_update_chunks(
                qk, V, (b, hk, j), state, edge, False, False, OPTS, TILE_DV
            )
            if WITH_MAP:
                kind = 1
                if j == diag:
                    kind = 2
                ct.atomic_add(BlockMap, (bh, qb, j), kind)
        epilogue_chunks(state, Out, Lse, (b, h, qb), FAST_MATH, WITH_LSE, STORE_TMA, TILE_DV)
