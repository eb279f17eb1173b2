"""The paged-KV attention kernel (decode, q_len 1-16, and chunked prefill against the cache) and
the combine of its ragged key splits.

K and V live in pages of ``PAGE`` tokens, (num_pages, PAGE, Hkv, D), passed as the
(num_pages, Hkv, PAGE, D) view; a sequence's pages are ``BlockTable[b, :]`` in any order (pages
may be shared). A key block of ``TILE_N`` keys is:

- **part of one page** (``PAGE >= TILE_N``): block ``j`` is block ``j % (PAGE // TILE_N)`` of page
  ``BlockTable[b, j // (PAGE // TILE_N)]``, and the shared :func:`kernels.cutile.device.
  block_step` runs on it unchanged, its mask shifted to the page's first key. The last page's
  unused tail is cut off with ``Array.slice``, so a bounds-checked load pads it with zeros (a
  stale NaN there never reaches P·V).
- **several pages** (``PAGE < TILE_N``): ``TILE_N // PAGE`` page loads joined along the key axis,
  then one MMA; masked blocks zero V's rows past the sequence's last key.

Rows: the query positions of one KV head's ``group`` query heads share a tile (packed GQA, as
the contiguous decode packs them): Q is the (B, Hkv, q_len, group, D) view of (B, q_len, Hq, D)
and a tile is ``ROWS_Q`` positions × ``ROWS_G`` heads (each a power of two, padded with zero
rows that the stores drop); row ``r`` is position ``r // ROWS_G``. The q_len queries are each
sequence's last positions, causal among themselves.

Grid: (KV head, work unit, q-block). A work unit is a run of one sequence's key blocks
(``kernels.serving_schedule.plan_splits``, the ``Units`` table); with ``SPLIT`` each unit writes
its normalised output and base-2 log-sum-exp to its slot and :func:`paged_combine_kernel`
merges each sequence's slots, else the one unit per sequence writes Out and Lse itself.
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
    exp2_mixed,
    kernel,
)

PagedLayout = constant_group(
    ROWS_Q=int,  # query positions per tile
    ROWS_G=int,  # query heads of one KV head per tile (the group, padded to a power of two)
    PAGE=int,  # tokens per page
    SPLIT=bool,  # write the units' partials for the combine (else Out and Lse directly)
    WITH_LSE=bool,
)
PagedCombineTile = constant_group(TILE_S=int, ROWS_Q=int, ROWS_G=int, TILE_DC=int)


def _page_k(Kc, BlockTable, seq, pidx, hk, TILE_D, PAGE, CHECKED, K_LATENCY):
    """Kᵀ of one page as [TILE_D, PAGE]."""
    page = ct.gather(BlockTable, (seq, pidx))
    if CHECKED:
        k_t = ct.load(
            Kc, index=(page, hk, 0, 0), shape=(1, 1, TILE_D, PAGE), order=(0, 1, 3, 2),
            padding_mode=ct.PaddingMode.ZERO, latency=K_LATENCY,
        )  # fmt: skip
    else:
        k_t = ct.load(
            Kc, index=(page, hk, 0, 0), shape=(1, 1, TILE_D, PAGE), order=(0, 1, 3, 2),
            check_bounds=False, latency=K_LATENCY,
        )  # fmt: skip
    return k_t.reshape((TILE_D, PAGE))


def _page_v(Vc, BlockTable, seq, pidx, hk, TILE_DV, PAGE, CHECKED, V_LATENCY):
    """V of one page as [PAGE, TILE_DV]."""
    page = ct.gather(BlockTable, (seq, pidx))
    if CHECKED:
        v = ct.load(
            Vc, index=(page, hk, 0, 0), shape=(1, 1, PAGE, TILE_DV),
            padding_mode=ct.PaddingMode.ZERO, latency=V_LATENCY,
        )  # fmt: skip
    else:
        v = ct.load(
            Vc, index=(page, hk, 0, 0), shape=(1, 1, PAGE, TILE_DV), check_bounds=False,
            latency=V_LATENCY,
        )  # fmt: skip
    return v.reshape((PAGE, TILE_DV))


def _pages_joined(load, PAGES, axis):
    """The tiles ``load(0) .. load(PAGES - 1)`` (PAGES 2, 4 or 8) joined in order along
    ``axis``, pairwise (``cat`` takes two tiles of one shape)."""
    pair01 = ct.cat((load(0), load(1)), axis)
    if PAGES == 2:
        return pair01
    quad = ct.cat((pair01, ct.cat((load(2), load(3)), axis)), axis)
    if PAGES == 4:
        return quad
    pair45 = ct.cat((load(4), load(5)), axis)
    return ct.cat((quad, ct.cat((pair45, ct.cat((load(6), load(7)), axis)), axis)), axis)


def _multi_page_step(q, Kc, Vc, BlockTable, where, state, edge, masked, OPTS):
    """One online-softmax step over key block ``j`` made of ``TILE_N // PAGE`` pages: the fold
    of :func:`kernels.cutile.device.softmax_update`, with V already in registers (its rows past
    the sequence's last key zeroed: the last page's tail may hold anything)."""
    seq, hk, j, n_pages, PAGE = where
    m_i, l_i, acc = state
    rows_ip, cols_tile, k_len, _, qk_scale_log2 = edge
    _, FAST_MATH, K_LATENCY, V_LATENCY, POLY_COLS, D_PADDED = OPTS
    TILE_D = q.shape[1]
    TILE_DV = acc.shape[1]
    TILE_N = cols_tile.shape[1]
    PAGES = TILE_N // PAGE
    first = j * PAGES
    last_page = n_pages - 1  # a block's pages past the sequence's repeat its last

    def k_page(i):
        return _page_k(Kc, BlockTable, seq, min(first + i, last_page), hk, TILE_D, PAGE,
                       D_PADDED, K_LATENCY)  # fmt: skip

    def v_page(i):
        return _page_v(Vc, BlockTable, seq, min(first + i, last_page), hk, TILE_DV, PAGE,
                       D_PADDED, V_LATENCY)  # fmt: skip

    k_t = _pages_joined(k_page, PAGES, 1)  # [TILE_D, TILE_N]
    v = _pages_joined(v_page, PAGES, 0)  # [TILE_N, TILE_DV]
    qk = ct.mma(q, k_t, ct.zeros((q.shape[0], TILE_N), dtype=ct.float32))
    if masked:
        cols = j * TILE_N + cols_tile  # [1, TILE_N]
        visible = (cols < k_len) & (cols <= rows_ip)
        qk = ct.where(visible, qk, NEG_INF)
        keys = (j * TILE_N + ct.arange(TILE_N, dtype=ct.int32))[:, None]  # [TILE_N, 1]
        v = ct.where(keys < k_len, v, 0.0).astype(v.dtype)
        m_ij = max(m_i, ct.max(qk, axis=1, keepdims=True) * qk_scale_log2)
        m_sub = ct.where(m_ij == NEG_INF, 0.0, m_ij)  # rows that saw no key: exp2 0, not NaN
        p = ct.exp2(qk * qk_scale_log2 - m_sub, flush_to_zero=FAST_MATH)
    else:
        m_ij = max(m_i, ct.max(qk, axis=1, keepdims=True) * qk_scale_log2)
        m_sub = m_ij
        p = exp2_mixed(qk * qk_scale_log2 - m_sub, POLY_COLS, FAST_MATH)
    alpha = ct.exp2(m_i - m_sub, flush_to_zero=FAST_MATH)
    l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
    acc = ct.mma(p.astype(v.dtype), v, acc * alpha)
    return (m_ij, l_i, acc)


def _step(q, Kc, Vc, BlockTable, seq, hk, j, lk, state, edge, masked, OPTS, MASKED_OPTS, PAGE):
    """Key block ``j`` of sequence ``seq``, whichever way the pages make it up."""
    rows_ip, cols_tile, _, _, scale = edge
    TILE_N = cols_tile.shape[1]
    if PAGE >= TILE_N:
        per_page = PAGE // TILE_N
        pidx = j // per_page
        page = ct.gather(BlockTable, (seq, pidx))
        base = pidx * PAGE  # the page's first key: the mask counts keys from there
        shifted = (rows_ip - base, cols_tile, lk - base, 0, scale)
        where = (page, hk, j % per_page)
        if masked:
            valid = min(lk - base, PAGE)  # the keys of this page the sequence holds
            Ks = Kc.slice(axis=2, start=0, stop=valid)
            Vs = Vc.slice(axis=2, start=0, stop=valid)
            return block_step(q, Ks, Vs, where, state, shifted, True, True, MASKED_OPTS)
        return block_step(q, Kc, Vc, where, state, shifted, False, False, OPTS)
    n_pages = ct.cdiv(lk, PAGE)
    opts = OPTS
    if masked:
        opts = MASKED_OPTS
    return _multi_page_step(q, Kc, Vc, BlockTable, (seq, hk, j, n_pages, PAGE), state, edge,
                            masked, opts)  # fmt: skip


@kernel
def fmha_paged_kernel(
    Q,  # [B, Hkv, q_len, group, D]: a view of (B, q_len, Hq, D)
    Kc,  # [num_pages, Hkv, PAGE, D]: a view of the (num_pages, PAGE, Hkv, D) cache
    Vc,  # [num_pages, Hkv, PAGE, Dv]
    BlockTable,  # [B, max_pages] int32
    SeqLens,  # [B] int32: each sequence's keys
    Units,  # [units, 4] int32: sequence, slot, first key block, stop key block
    Out,  # [B, Hkv, q_len, group, Dv]: a view of (B, q_len, Hq, Dv) (written without SPLIT)
    Lse,  # [B, Hkv, group, q_len] float32: a view of (B, Hq, q_len) (dummy unless WITH_LSE)
    OutParts,  # [slots, Hkv, q-blocks · TILE_M, Dv] float32 (dummy without SPLIT)
    LseParts,  # [slots, Hkv, q-blocks · TILE_M] float32, base 2 (dummy without SPLIT)
    qk_scale_log2: float,
    q_len: int,
    TILE: TileShape,  # TILE_M = ROWS_Q · ROWS_G
    VALUE_TILE: ValueTile,
    OPTS: BlockOptions,  # MASK 1: causal among the q_len last positions
    LAYOUT: PagedLayout,
):
    """One (KV head, work unit, q-block) per CTA."""
    TILE_M, TILE_N, TILE_D = TILE
    (TILE_DV,) = VALUE_TILE
    MASK, FAST_MATH, K_LATENCY, V_LATENCY, _, D_PADDED = OPTS
    ROWS_Q, ROWS_G, PAGE, SPLIT, WITH_LSE = LAYOUT
    hk = ct.bid(0)
    u = ct.bid(1)
    qb = ct.bid(2)
    seq = ct.gather(Units, (u, 0), check_bounds=False)
    slot = ct.gather(Units, (u, 1), check_bounds=False)
    unit_lo = ct.gather(Units, (u, 2), check_bounds=False)
    unit_hi = ct.gather(Units, (u, 3), check_bounds=False)
    lk = ct.gather(SeqLens, seq)
    input_pos = lk - q_len

    # ---- loop bounds, as the contiguous decode's (kernels.schedule.rows_k_block_range) -----
    first = qb * ROWS_Q
    last = min(first + ROWS_Q, q_len) - 1
    see_hi = min(last + input_pos, lk - 1)
    hi = 0
    if see_hi >= 0:
        hi = see_hi // TILE_N + 1
    full_hi = 0
    if first + input_pos >= 0:
        full_hi = min(min((first + input_pos + 1) // TILE_N, lk // TILE_N), hi)
    u_lo = min(unit_lo, full_hi)
    u_hi = min(unit_hi, full_hi)
    v_lo = max(min(unit_lo, hi), u_hi)
    v_hi = max(min(unit_hi, hi), v_lo)

    # ---- state ----------------------------------------------------------------------------
    q = ct.load(
        Q, index=(seq, hk, qb, 0, 0), shape=(1, 1, ROWS_Q, ROWS_G, TILE_D),
        padding_mode=ct.PaddingMode.ZERO,
    ).reshape((TILE_M, TILE_D))  # fmt: skip
    positions = first + ct.arange(TILE_M, dtype=ct.int32) // ROWS_G
    rows_ip = (positions + input_pos)[:, None]  # [TILE_M, 1]
    cols_tile = ct.arange(TILE_N, dtype=ct.int32)[None, :]
    m_i = ct.full((TILE_M, 1), NEG_INF, dtype=ct.float32)
    l_i = ct.zeros((TILE_M, 1), dtype=ct.float32)
    acc = ct.zeros((TILE_M, TILE_DV), dtype=ct.float32)
    state = (m_i, l_i, acc)
    edge = (rows_ip, cols_tile, lk, 0, qk_scale_log2)
    masked_opts = (MASK, FAST_MATH, K_LATENCY, V_LATENCY, 0, D_PADDED)

    for j in range(u_lo, u_hi):
        state = _step(q, Kc, Vc, BlockTable, seq, hk, j, lk, state, edge, False, OPTS,
                      masked_opts, PAGE)  # fmt: skip
    for j in range(v_lo, v_hi):
        state = _step(q, Kc, Vc, BlockTable, seq, hk, j, lk, state, edge, True, OPTS,
                      masked_opts, PAGE)  # fmt: skip

    m_i, l_i, acc = state
    l_safe = ct.where(l_i == 0.0, 1.0, l_i)  # rows that saw no key: acc 0, output 0
    if SPLIT:
        part = (acc / l_safe).reshape((1, 1, TILE_M, TILE_DV))
        ct.store(OutParts, index=(slot, hk, qb, 0), tile=part)
        lse2 = m_i + ct.log2(l_safe)  # base 2; -inf where the unit saw no key
        ct.store(LseParts, index=(slot, hk, qb), tile=lse2.reshape((1, 1, TILE_M)))
    else:
        if FAST_MATH:
            inv_l = ct.truediv(1.0, l_safe, rounding_mode=ct.RoundingMode.APPROX,
                               flush_to_zero=True)  # fmt: skip
        else:
            inv_l = 1.0 / l_safe
        out = (acc * inv_l).astype(Out.dtype).reshape((1, 1, ROWS_Q, ROWS_G, TILE_DV))
        ct.store(Out, index=(seq, hk, qb, 0, 0), tile=out)
        if WITH_LSE:
            lse = ((m_i + ct.log2(l_safe)) * LN2).reshape((ROWS_Q, ROWS_G))
            ct.store(
                Lse, index=(seq, hk, 0, qb), tile=lse.transpose().reshape((1, 1, ROWS_G, ROWS_Q))
            )


@kernel
def paged_combine_kernel(
    OutParts,  # [slots, Hkv, q-blocks · TILE_M, Dv] float32
    LseParts,  # [slots, Hkv, q-blocks · TILE_M] float32, base 2
    SeqSplits,  # [B, 2] int32: each sequence's first slot and its number of slots
    Out,  # [B, Hkv, q_len, group, Dv]
    Lse,  # [B, Hkv, group, q_len] float32 (dummy unless WITH_LSE)
    TILE: PagedCombineTile,
    WITH_LSE: ct.Constant[bool],
):
    """Merge one sequence's units for one (KV head, q-block, column block): each weighed by
    exp2(lse_s - max lse), as the contiguous decode's combine does; its slots are adjacent, so
    one slice of the partials holds them, and slots past its own come in as -inf (no weight)."""
    TILE_S, ROWS_Q, ROWS_G, TILE_DC = TILE
    TILE_M = ROWS_Q * ROWS_G
    hk = ct.bid(0)
    b = ct.bid(1)
    n_dc = ct.cdiv(Out.shape[4], TILE_DC)
    qb = ct.bid(2) // n_dc
    dc = ct.bid(2) % n_dc
    first = ct.gather(SeqSplits, (b, 0), check_bounds=False)
    count = ct.gather(SeqSplits, (b, 1), check_bounds=False)
    mine = LseParts.slice(axis=0, start=first, stop=first + count)
    lse = ct.load(
        mine, index=(0, hk, qb), shape=(TILE_S, 1, TILE_M), padding_mode=ct.PaddingMode.NEG_INF
    ).reshape((TILE_S, TILE_M))
    top = ct.max(lse, axis=0, keepdims=True)  # [1, TILE_M]
    top_safe = ct.where(top == NEG_INF, 0.0, top)  # rows no unit saw: exp2 gives 0, not NaN
    weight = ct.exp2(lse - top_safe)  # [TILE_S, TILE_M]
    total = ct.sum(weight, axis=0, keepdims=True)  # [1, TILE_M]
    parts = ct.load(
        OutParts.slice(axis=0, start=first, stop=first + count), index=(0, hk, qb, dc),
        shape=(TILE_S, 1, TILE_M, TILE_DC), padding_mode=ct.PaddingMode.ZERO,
    ).reshape((TILE_S, TILE_M, TILE_DC))  # fmt: skip
    acc = ct.sum(parts * weight.reshape((TILE_S, TILE_M, 1)), axis=0)  # [TILE_M, TILE_DC]
    total_safe = ct.where(total == 0.0, 1.0, total).reshape((TILE_M, 1))
    out = (acc / total_safe).astype(Out.dtype).reshape((1, 1, ROWS_Q, ROWS_G, TILE_DC))
    ct.store(Out, index=(b, hk, qb, 0, dc), tile=out)
    if WITH_LSE:  # noqa: SIM102 (a compile-time switch around a runtime test)
        if dc == 0:
            lse_out = ((top_safe + ct.log2(total)) * LN2).reshape((ROWS_Q, ROWS_G))
            ct.store(Lse, index=(b, hk, 0, qb),
                     tile=lse_out.transpose().reshape((1, 1, ROWS_G, ROWS_Q)))  # fmt: skip
