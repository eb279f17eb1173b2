"""The serving kernels' device code run on the CPU (tests/tile_emulator.py: NumPy tiles, one CTA
after another) against a float64 reference, sequence by sequence: the tile table, the loop
bounds, the masks, each sequence sliced out of the packed tokens, pages gathered through a
shuffled, shared block table with NaN in every unused slot, the ragged splits and their combine.
The GPU tests (tests/gpu/test_serving_kernels.py) run the same cases through the compiler.
Inputs are fresh random normals from the session's printed seed."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("cuda.tile")  # the device modules import it (nothing here launches)

from kernels.cutile import device, device_paged, device_varlen
from kernels.cutile.paged import (
    PagedShape,
    combine_constants,
    kernel_constants,
    plan_paged,
)
from kernels.cutile.varlen import VarlenShape, kernel_arguments
from kernels.serving_schedule import varlen_tiles
from tests.serving_cases import compare, paged_batch, reference
from tests.tile_emulator import as_array, emulated, run_grid


@pytest.mark.parametrize(
    ("mask", "head_dim", "heads", "kv_heads", "tile"),
    [
        ("causal", 64, 4, 2, (64, 64)),
        ("none", 96, 3, 3, (64, 64)),  # a padded head dim: checked loads, dropped columns
        ("window", 64, 6, 2, (64, 64)),
        ("causal", 32, 2, 1, (64, 128)),
    ],
    ids=["causal-gqa2", "none-d96", "window-group3", "causal-64x128-mqa"],
)
def test_the_varlen_kernel_matches_the_reference(rng, mask, head_dim, heads, kv_heads, tile):
    # One token, an empty sequence, odd lengths, a cached prefix (more keys than queries),
    # fewer keys than queries, queries with no key at all.
    lq = [1, 0, 37, 130, int(rng.integers(60, 200)), 20, 9]
    lk = [1, 0, 37, 130 + 29, lq[4] + int(rng.integers(0, 90)), 5, 0]
    f16 = np.float16
    q = rng.standard_normal((sum(lq), heads, head_dim)).astype(f16)
    k = rng.standard_normal((sum(lk), kv_heads, head_dim)).astype(f16)
    v = rng.standard_normal((sum(lk), kv_heads, head_dim)).astype(f16)
    cu_q, cu_k = np.cumsum([0, *lq]), np.cumsum([0, *lk])
    window = 50 if mask == "window" else None
    causal = mask != "none"
    s = VarlenShape(sum(lq), sum(lk), heads, kv_heads, head_dim, head_dim, "float16",
                    tuple(cu_q.tolist()), tuple(cu_k.tolist()))  # fmt: skip
    tiles = varlen_tiles(cu_q, cu_k, *tile, causal=causal, window=window)
    values = kernel_arguments(s, causal=causal, window=window, scale=1 / math.sqrt(head_dim),
                              block_m=tile[0], block_n=tile[1], with_lse=True)  # fmt: skip
    out = np.full((s.total_q, heads, head_dim), np.nan, dtype=f16)
    lse = np.full((heads, s.total_q), np.nan, dtype=np.float32)
    args = (
        *(as_array(x.transpose(1, 0, 2)[None]) for x in (q, k, v, out)),
        as_array(lse[None]),
        as_array(tiles),
        *values.values(),
    )
    with emulated(device, device_varlen):
        run_grid(device_varlen.fmha_varlen_kernel, (heads, len(tiles), 1), args)
    for b in range(len(lq)):
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        if lq[b]:
            want = reference(q[qs], k[ks], v[ks], causal=causal, window=window)
            compare(out[qs], lse[:, qs], *want, f"sequence {b} (lq {lq[b]}, lk {lk[b]}) {mask}")


def run_paged(q, k_cache, v_cache, table, seq_lens, plan, heads, kv_heads):
    """The split kernel and the combine as prepare_paged launches them, on NumPy views."""
    batch, q_len, _, d = q.shape
    g = heads // kv_heads
    s = PagedShape(batch, q_len, heads, kv_heads, d, d, k_cache.shape[0], k_cache.shape[1],
                   "float16", tuple(seq_lens))  # fmt: skip
    out = np.full((batch, q_len, heads, d), np.nan, dtype=np.float16)
    lse = np.full((batch, heads, q_len), np.nan, dtype=np.float32)
    out5 = as_array(out.reshape(batch, q_len, kv_heads, g, d).transpose(0, 2, 1, 3, 4))
    lse4 = as_array(lse.reshape(batch, kv_heads, g, q_len))
    split = plan.schedule.needs_combine
    rows = plan.q_blocks * plan.block_m
    parts = as_array(np.full((plan.schedule.slots, kv_heads, rows, d), np.nan, np.float32))
    lse_parts = as_array(np.full((plan.schedule.slots, kv_heads, rows), np.nan, np.float32))
    args = (
        as_array(q.reshape(batch, q_len, kv_heads, g, d).transpose(0, 2, 1, 3, 4)),
        as_array(k_cache.transpose(0, 2, 1, 3)),
        as_array(v_cache.transpose(0, 2, 1, 3)),
        as_array(table),
        as_array(np.array(seq_lens, dtype=np.int32)),
        as_array(plan.schedule.unit_table),
        out5,
        lse4 if not split else None,
        parts if split else None,
        lse_parts if split else None,
        *kernel_constants(s, plan, scale=1 / math.sqrt(d), with_lse=True),
    )
    with emulated(device, device_paged):
        run_grid(device_paged.fmha_paged_kernel, (kv_heads, len(plan.schedule.units),
                                                  plan.q_blocks), args)  # fmt: skip
        if split:
            tile, lse_on = combine_constants(s, plan, with_lse=True)
            n_dc = -(-d // tile[3])
            table2 = as_array(plan.schedule.sequence_table)
            run_grid(device_paged.paged_combine_kernel, (kv_heads, batch, plan.q_blocks * n_dc),
                     (parts, lse_parts, table2, out5, lse4, tile, lse_on))  # fmt: skip
    return out, lse


@pytest.mark.parametrize(
    ("page", "block_n", "q_len", "heads", "kv_heads", "sms"),
    [
        # SMs enough that the long sequence alone would hold a few while the rest wait, so the
        # split table cuts it (with fewer it keeps every sequence whole: no combine to check).
        (16, None, 1, 8, 2, 16),  # four pages joined a block, split
        (16, 16, 3, 8, 2, 16),  # a page a block, three positions
        (64, None, 1, 4, 4, 32),  # two pages joined a block, MHA
        (256, None, 2, 6, 2, 16),  # two blocks a page, group 3 (padded to 4 rows)
        (32, None, 40, 4, 2, 64),  # chunked prefill: 40 positions in q-blocks of 32
    ],
    ids=["p16-joined", "p16-page-a-block-q3", "p64-mha", "p256-group3-q2", "p32-chunk40"],
)
def test_the_paged_kernel_matches_the_reference(rng, page, block_n, q_len, heads, kv_heads, sms):
    head_dim = 32
    seq_lens = [int(rng.integers(700, 1100)), 300, 0, 1, page * 2, page + 1]
    k_cache, v_cache, table, keys = paged_batch(rng, seq_lens, page, kv_heads, head_dim)
    q = rng.standard_normal((len(seq_lens), q_len, heads, head_dim)).astype(np.float16)
    plan = plan_paged(seq_lens, q_len=q_len, heads=heads, kv_heads=kv_heads, page_size=page,
                      block_n=block_n, sm_count=sms)  # fmt: skip
    assert plan.schedule.needs_combine and plan.schedule.splits[0] > 1  # the combine runs
    out, lse = run_paged(q, k_cache, v_cache, table, seq_lens, plan, heads, kv_heads)
    for b, (kb, vb) in enumerate(keys):
        want = reference(q[b], kb, vb, causal=True)
        what = f"sequence {b} of {seq_lens}, {plan.schedule.splits[b]} splits, P{page}"
        compare(out[b], lse[b], *want, what)


@pytest.mark.parametrize("q_len", [1, 5])
def test_the_paged_kernel_without_splits_writes_out_and_lse_itself(rng, q_len):
    seq_lens = [500, 0, 77, 3]
    k_cache, v_cache, table, keys = paged_batch(rng, seq_lens, 16, 2, 64)
    q = rng.standard_normal((len(seq_lens), q_len, 8, 64)).astype(np.float16)
    plan = plan_paged(seq_lens, q_len=q_len, heads=8, kv_heads=2, page_size=16, split=False)
    assert not plan.schedule.needs_combine
    out, lse = run_paged(q, k_cache, v_cache, table, seq_lens, plan, 8, 2)
    for b, (kb, vb) in enumerate(keys):
        compare(out[b], lse[b], *reference(q[b], kb, vb, causal=True), f"sequence {b}")
