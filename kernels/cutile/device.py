"""The building blocks of the cuTile FMHA kernels: device code shared by every kernel form.

Math (per query row, keys ``j`` it may see, ``s = scale * log2(e)``)::

    m   = max_j(qk_j) * s                      running max, base-2 units
    p_j = exp2(qk_j * s - m)                   scale folded into the exp2 argument (one FMA)
    out = sum_j p_j v_j / sum_j p_j
    lse = ln(sum_j exp(scale * qk_j)) = (m + log2(l)) * ln(2)      natural log, float32

The LSE output is the *natural* log-sum-exp (the convention of FlashAttention and torch), in
float32, shape (B, H, q_len); rows that see no key get -inf there and zeros in ``out``.

The kernels themselves are in ``device_tile`` (one CTA per tile) and ``device_persistent``
(the persistent grids); ``kernels.cutile.forms`` says which form runs which kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import cuda.tile as ct

LN2 = 0.6931471805599453
NEG_INF = -math.inf
# exp2_poly: 1.5·2**23 (adding it rounds a float below 2**22 to an integer) and the minimax
# coefficients of 2**f on [-1/2, 1/2], constant term first (max relative error 7.5e-5).
ROUND_MAGIC = 12582912.0
EXP2_C0 = 0.9999280720203069
EXP2_C1 = 0.6932609875706248
EXP2_C2 = 0.24261114795898514
EXP2_C3 = 0.05517166977339565


@dataclass(frozen=True)
class Members:
    """The item names of a grouped constant, in order: metadata on its annotation, which
    cuTile ignores and ``kernels.cutile.forms`` reads."""

    names: tuple[str, ...]


def constant_group(**members: type) -> Any:
    """The annotation of compile-time constants passed as one tuple parameter, in the order
    given: ``ct.Constant[tuple[...]]`` with these item types (cuTile checks the length and
    compiles every item in, as it does a ``ct.Constant`` parameter of its own) and the names
    as :class:`Members`, so that ``kernels.cutile.forms`` fills each item from the source of
    its name. The kernel unpacks the tuple in the same order."""
    return Annotated[ct.Constant[tuple[tuple(members.values())]], Members(tuple(members))]


# The tile of the attention kernels: query rows, keys per block, head dim.
TileShape = constant_group(TILE_M=int, TILE_N=int, TILE_D=int)
# V's, the accumulator's and the output's head dim (a power of two, Dv padded as TILE_D pads D):
# its own group, so a TILE's three items still read as (rows, keys, head dim) where they are used.
ValueTile = constant_group(TILE_DV=int)
# What every block step compiles in (softmax_update's OPTS); a kernel passes a copy with
# POLY_COLS 0 to the steps that apply the mask (the polynomial needs finite scores).
BlockOptions = constant_group(
    MASK=int,  # 0 none, 1 causal, 2 window
    FAST_MATH=bool,  # exp2 flush-to-zero and approximate reciprocal in the epilogue
    K_LATENCY=int,
    V_LATENCY=int,
    POLY_COLS=int,  # score columns per block whose exp2 is a polynomial (unmasked blocks)
    D_PADDED=bool,  # TILE_D or TILE_DV pads a head dim to a power of two: every K/V load checked
)


def kernel(function: Callable[..., Any]) -> Any:
    """``@ct.kernel`` that keeps the Python function as ``__wrapped__``.

    The function's signature is the kernel's parameter declaration: ``kernels.cutile.forms``
    builds both the launch arguments and the offline-compile signature from it, by name (a
    grouped constant's items by their own names, :func:`constant_group`).
    """
    compiled = ct.kernel(function)
    compiled.__wrapped__ = function
    return compiled


def scores(q, K, where, CHECKED, K_LATENCY, TILE_N):
    """q · K[j]ᵀ for key block ``j`` of ``where`` = (batch, kv head, j): [TILE_M, TILE_N] fp32.

    ``CHECKED`` (compile time) picks a bounds-checked, zero-padded K load: a ragged last block
    must not bring NaN/Inf garbage into qk. Unchecked loads are for blocks inside the array.
    """
    b, hk, j = where
    TILE_D = q.shape[1]
    if CHECKED:
        k_t = ct.load(
            K,
            index=(b, hk, 0, j),
            shape=(1, 1, TILE_D, TILE_N),
            order=(0, 1, 3, 2),
            padding_mode=ct.PaddingMode.ZERO,
            latency=K_LATENCY,
        ).reshape((TILE_D, TILE_N))  # [TILE_D, TILE_N]
    else:
        k_t = ct.load(
            K,
            index=(b, hk, 0, j),
            shape=(1, 1, TILE_D, TILE_N),
            order=(0, 1, 3, 2),
            check_bounds=False,
            latency=K_LATENCY,
        ).reshape((TILE_D, TILE_N))  # [TILE_D, TILE_N]
    return ct.mma(q, k_t, ct.zeros((q.shape[0], TILE_N), dtype=ct.float32))


def exp2_poly(x):
    """2**x on the FMA pipes (no MUFU): x = n + f with n = round(x), f in [-1/2, 1/2].

    Adding 1.5·2**23 rounds x to an integer in the low mantissa bits of ``t``; a degree-3
    minimax polynomial gives 2**f (relative error 7.5e-5, below fp16's half ulp, and P is cast
    to fp16 before P·V); shifting ``t``'s bits by 23 adds n to the exponent. The clamp keeps
    the exponent from wrapping into the sign bit (at -126 the result is a denormal, about
    1e-38, where exp2 gives 0 -- nothing a softmax can tell apart). Only for finite x
    (unmasked blocks).
    """
    x = ct.maximum(x, -126.0)
    t = x + ROUND_MAGIC
    f = x - (t - ROUND_MAGIC)
    p = ((EXP2_C3 * f + EXP2_C2) * f + EXP2_C1) * f + EXP2_C0
    bits = ct.bitcast(p, ct.int32) + (ct.bitcast(t, ct.int32) << 23)
    return ct.bitcast(bits, ct.float32)


def exp2_mixed(x, POLY_COLS, FTZ):
    """exp2 of a [M, N] score tile: the last ``POLY_COLS`` columns by polynomial, the rest on
    the MUFU unit. POLY_COLS is 0 or N/2, N/4, N/8, N/16 (tiles are powers of two, so the MUFU part
    is assembled from halves).

    Why: at head_dim 128 the softmax's exponentials keep the MUFU unit busy for a large share
    of the MMA time; moving some onto the FMA pipes shortens it (FlashAttention-4's trick;
    bench/results/experiments/h200-explore-poly.md).
    """
    M = x.shape[0]
    N = x.shape[1]
    if POLY_COLS == 0:
        return ct.exp2(x, flush_to_zero=FTZ)
    # The polynomial takes the rightmost POLY_COLS columns; the MUFU part to their left joins
    # in blocks of doubling width (POLY_COLS, 2·POLY_COLS, … up to N/2).
    tail = exp2_poly(ct.extract(x, (0, N // POLY_COLS - 1), shape=(M, POLY_COLS)))
    for width in ct.static_iter(doublings(POLY_COLS, N)):
        # The MUFU block just left of the finished right part has its width, so `cat` can
        # join the two (tile shapes must match and stay powers of two).
        left = ct.extract(x, (0, N // width - 2), shape=(M, width))
        tail = ct.cat((ct.exp2(left, flush_to_zero=FTZ), tail), 1)
    return tail


def doublings(start: int, stop: int) -> list[int]:
    """start, 2·start, … below stop (compile-time helper for :func:`exp2_mixed`)."""
    out = []
    while start < stop:
        out.append(start)
        start *= 2
    return out


def softmax_update(qk, V, where, state, edge, CHECKED, masked, OPTS):
    """Fold the scores ``qk`` of key block ``j`` into (m_i, l_i, acc); returns the new state.

    ``masked`` says whether this block needs the mask and the -inf guard: a compile-time
    constant in the K-split loops, a runtime flag (uniform across the CTA) in the single loop.
    Only the mask code sits under that branch -- the loads and both MMAs are emitted once (a
    whole block step per branch hung on the H200 for some tiles).

    ``where`` = (batch, kv head, k-block); ``state`` = (m_i, l_i, acc); ``edge`` = (row index +
    input_pos per row, key offsets of a block, k_len, window, scale·log2 e); ``OPTS`` = the
    compile-time (MASK, FAST_MATH, K_LATENCY, V_LATENCY, POLY_COLS), POLY_COLS = 0 wherever a
    block may hold masked (-inf) scores.
    """
    b, hk, j = where
    m_i, l_i, acc = state
    rows_ip, cols_tile, k_len, window, qk_scale_log2 = edge
    MASK, FAST_MATH, _, V_LATENCY, POLY_COLS, D_PADDED = OPTS
    TILE_D = acc.shape[1]
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
        # A row that has seen no key yet keeps m = -inf; subtracting 0 instead of -inf keeps
        # exp2 at 0 rather than NaN (-inf - -inf).
        m_sub = ct.where(m_ij == NEG_INF, 0.0, m_ij)
    else:
        m_ij = max(m_i, ct.max(qk, axis=1, keepdims=True) * qk_scale_log2)  # [TILE_M, 1]
        m_sub = m_ij  # every row saw a finite score in this block
    # POLY_COLS > 0 only in the unmasked loop: the polynomial needs finite scores.
    p = exp2_mixed(qk * qk_scale_log2 - m_sub, POLY_COLS, FAST_MATH)  # [TILE_M, TILE_N]
    alpha = ct.exp2(m_i - m_sub, flush_to_zero=FAST_MATH)  # [TILE_M, 1]
    l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
    acc = acc * alpha  # [TILE_M, TILE_D]

    # A padded head dim's columns past the array's come in as zeros only through a checked load.
    if CHECKED or D_PADDED:
        v = ct.load(
            V,
            index=(b, hk, j, 0),
            shape=(1, 1, TILE_N, TILE_D),
            padding_mode=ct.PaddingMode.ZERO,
            latency=V_LATENCY,
        ).reshape((TILE_N, TILE_D))  # [TILE_N, TILE_D]
    else:
        v = ct.load(
            V,
            index=(b, hk, j, 0),
            shape=(1, 1, TILE_N, TILE_D),
            check_bounds=False,
            latency=V_LATENCY,
        ).reshape((TILE_N, TILE_D))  # [TILE_N, TILE_D]
    acc = ct.mma(p.astype(V.dtype), v, acc)  # [TILE_M, TILE_D]
    return (m_ij, l_i, acc)


def block_step(q, K, V, where, state, edge, CHECKED, masked, OPTS):
    """One online-softmax step over key block ``where[2]``: scores, then the update."""
    _, cols_tile, _, _, _ = edge
    K_LATENCY = OPTS[2]
    qk = scores(q, K, where, CHECKED or OPTS[5], K_LATENCY, cols_tile.shape[1])
    return softmax_update(qk, V, where, state, edge, CHECKED, masked, OPTS)


def key_offsets(paired: bool) -> tuple[int, ...]:
    """Key blocks of one iteration of the persistent grid's unmasked loop, relative to its
    first (compile-time helper): one block, or two with ``PAIRED_K``."""
    return (0, 1) if paired else (0,)


def tile_coords(t, n_q_blocks, n_heads):
    """Tile ``t`` of the plain launch order as (batch, head, q-block)."""
    bh = t // n_q_blocks
    return bh // n_heads, bh % n_heads, t % n_q_blocks


def load_q(Q, where, TILE_M, TILE_D, COLUMN_HALVES):
    """Q tile ``where`` = (batch, head, q-block) as [TILE_M, TILE_D], zero-padded past q_len;
    with ``COLUMN_HALVES`` loaded as two [TILE_M, TILE_D / 2] tiles and joined along head_dim
    (see :func:`kernels.cutile.device_persistent.fmha_fwd_persistent_kernel` for why)."""
    b, h, qb = where
    if not COLUMN_HALVES:
        return ct.load(
            Q, index=(b, h, qb, 0), shape=(1, 1, TILE_M, TILE_D), padding_mode=ct.PaddingMode.ZERO
        ).reshape((TILE_M, TILE_D))
    HALF_D = TILE_D // 2
    left = ct.load(
        Q, index=(b, h, qb, 0), shape=(1, 1, TILE_M, HALF_D), padding_mode=ct.PaddingMode.ZERO
    ).reshape((TILE_M, HALF_D))
    right = ct.load(
        Q, index=(b, h, qb, 1), shape=(1, 1, TILE_M, HALF_D), padding_mode=ct.PaddingMode.ZERO
    ).reshape((TILE_M, HALF_D))
    return ct.cat((left, right), 1)


def epilogue(state, Out, Lse, where, FAST_MATH, WITH_LSE, STORE_TMA):
    """Normalise and store one output tile (and its LSE rows): one reciprocal per row, then a
    multiply. ``where`` = (batch, head, q-block)."""
    b, h, qb = where
    m_i, l_i, acc = state
    TILE_M = acc.shape[0]
    TILE_D = acc.shape[1]
    l_safe = ct.where(l_i == 0.0, 1.0, l_i)  # rows that saw no key: acc is 0, output 0
    if FAST_MATH:
        inv_l = ct.truediv(1.0, l_safe, rounding_mode=ct.RoundingMode.APPROX, flush_to_zero=True)
    else:
        inv_l = 1.0 / l_safe
    out = (acc * inv_l).astype(Out.dtype).reshape((1, 1, TILE_M, TILE_D))
    ct.store(Out, index=(b, h, qb, 0), tile=out, allow_tma=STORE_TMA)
    if WITH_LSE:
        lse = (m_i + ct.log2(l_safe)) * LN2  # natural log; -inf for rows that saw no key
        ct.store(Lse, index=(b, h, qb), tile=lse.reshape((1, 1, TILE_M)))
