"""Decode on the CPU: the schedule's split of the key range and packed GQA heads, and the NumPy
reference that walks them (each split's partial output and log-sum-exp, then the combine)
against the float64 oracle. The GPU kernels implement the same arithmetic
(kernels/cutile/device_decode.py); tests/gpu/test_decode.py checks them against it."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from kernels.knobs import KV_SPLIT_COUNTS
from kernels.reference import combine_splits, flash_attention
from kernels.schedule import (
    CTA_COST_BLOCKS,
    FEW_KEY_BLOCKS,
    BlockKind,
    Schedule,
    auto_kv_splits,
    blocks_per_split,
    decode_tile_m,
    effective_splits,
    split_ranges,
)
from tests.oracles import naive_attention


def inputs(rng: np.random.Generator, batch: int, heads: int, kv_heads: int, q_len: int,
           k_len: int, head_dim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    q = rng.standard_normal((batch, heads, q_len, head_dim))
    k = rng.standard_normal((batch, kv_heads, k_len, head_dim))
    v = rng.standard_normal((batch, kv_heads, k_len, head_dim))
    return q, k, v


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


# --------------------------------------------------------------------------------------------
# The combine: the 0.75 example
# --------------------------------------------------------------------------------------------


def test_two_splits_combine_to_one_pass_not_to_their_average() -> None:
    # One query row, four keys in two blocks of two: scores [0, 0] and [ln 3, ln 3] over
    # values [0, 0] and [1, 1]. One pass: 3·1·2 / (1·2 + 3·2) = 0.75; averaging the two
    # splits' outputs (0 and 1) would give 0.5.
    q = np.ones((1, 1, 1, 1))
    k = np.array([0.0, 0.0, math.log(3), math.log(3)]).reshape(1, 1, 4, 1)
    v = np.array([0.0, 0.0, 1.0, 1.0]).reshape(1, 1, 4, 1)
    options = dict(scale=1.0, tile_m=16, tile_n=2, accumulate=np.float64)
    assert Schedule(1, 4, 16, 2, kv_splits=2).split_ranges == [(0, 1), (1, 2)]
    split = flash_attention(q, k, v, kv_splits=2, **options)
    assert split.item() == pytest.approx(0.75, abs=1e-12)
    assert flash_attention(q, k, v, kv_splits=1, **options).item() == pytest.approx(0.75)
    # The combine on its own: each split's output weighed by exp(lse_s - lse).
    out, lse = combine_splits(
        np.array([[0.0], [1.0]]).reshape(2, 1, 1),
        np.array([math.log(2), math.log(6)]).reshape(2, 1, 1),
    )
    assert out.item() == pytest.approx(0.75) and lse.item() == pytest.approx(math.log(8))


def test_a_split_that_saw_no_key_weighs_nothing_and_gives_no_nan() -> None:
    parts = np.array([[[0.0, 0.0]], [[2.0, -1.0]], [[0.0, 0.0]]])  # (splits, rows, D)
    lse = np.array([[[-np.inf]], [[1.5]], [[-np.inf]]])
    out, total = combine_splits(parts, lse)
    assert np.array_equal(out, [[2.0, -1.0]]) and total.item() == 1.5
    # No split saw a key: zeros and -inf, not NaN.
    out, total = combine_splits(np.zeros((2, 1, 2)), np.full((2, 1, 1), -np.inf))
    assert np.array_equal(out, np.zeros((1, 2))) and np.isneginf(total).all()


# --------------------------------------------------------------------------------------------
# Every split count against the float64 oracle
# --------------------------------------------------------------------------------------------

PROBLEMS = [
    # (heads, kv_heads, q_len, k_len, mask, input_pos): decode, GQA/MQA/MHA, ragged keys,
    # speculative q_len with bottom-right causal (k_len = q_len + input_pos)
    (8, 2, 1, 1000, "none", 0),
    (8, 2, 1, 1024, "causal", 1023),
    (6, 1, 3, 700, "causal", 697),
    (4, 4, 5, 333, "none", 0),
    (8, 2, 16, 1000, "causal", 984),
]


@pytest.mark.parametrize("pack_gqa", [False, True], ids=["unpacked", "packed"])
@pytest.mark.parametrize("kv_splits", KV_SPLIT_COUNTS)
def test_every_split_count_matches_the_float64_oracle(
    rng: np.random.Generator, kv_splits: int, pack_gqa: bool
) -> None:
    for heads, kv_heads, q_len, k_len, mask, input_pos in PROBLEMS:
        q, k, v = inputs(rng, 2, heads, kv_heads, q_len, k_len, 32)
        rows = q_len * heads // kv_heads if pack_gqa else q_len
        tile_m = decode_tile_m(64, rows)
        got = flash_attention(
            q, k, v, mask=mask, input_pos=input_pos, tile_m=tile_m, tile_n=32,
            accumulate=np.float64, pack_gqa=pack_gqa, kv_splits=kv_splits,
        )  # fmt: skip
        want = naive_attention(q, k, v, mask=mask, input_pos=input_pos)
        assert np.isfinite(got).all()
        assert rel_err(got, want) < 1e-12, (heads, kv_heads, q_len, k_len, mask)
        # In float32, as the GPU accumulates, still within float32's reach.
        got32 = flash_attention(
            q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), mask=mask,
            input_pos=input_pos, tile_m=tile_m, tile_n=32, pack_gqa=pack_gqa,
            kv_splits=kv_splits,
        )  # fmt: skip
        assert rel_err(got32, want) < 1e-5


def test_splits_that_see_no_key_contribute_nothing(rng: np.random.Generator) -> None:
    # Causal prefill-like rows: the first q-block sees only key block 0, so three of its four
    # splits read nothing; rows 0-9 (input_pos -10) see no key at all.
    s = Schedule(64, 64, 16, 16, "causal", 0, kv_splits=4)
    assert s.split_ranges == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert [s.split_blocks(0, split) for split in range(4)] == [
        (range(0, 0), [0]), (range(1, 1), []), (range(2, 2), []), (range(3, 3), [])
    ]  # fmt: skip
    for input_pos in (0, -10):
        q, k, v = inputs(rng, 1, 4, 2, 64, 64, 16)
        got = flash_attention(
            q, k, v, mask="causal", input_pos=input_pos, tile_m=16, tile_n=16,
            accumulate=np.float64, kv_splits=4, pack_gqa=True,
        )  # fmt: skip
        want = naive_attention(q, k, v, mask="causal", input_pos=input_pos)
        assert np.isfinite(got).all()
        assert np.abs(got - want).max() < 1e-12
    assert np.array_equal(got[:, :, :10], np.zeros_like(got[:, :, :10]))


def test_ragged_keys_split_into_whole_blocks_and_a_short_last() -> None:
    # 1000 keys in blocks of 64: 16 blocks, the last of 40 keys (masked); 3 splits of 6.
    s = Schedule(1, 1000, 16, 64, kv_splits=3)
    assert s.n_k_blocks == 16 and s.split_ranges == [(0, 6), (6, 12), (12, 16)]
    assert s.split_blocks(0, 2) == (range(12, 15), [15])
    assert s.block_map[0, 15] == BlockKind.MASKED


# --------------------------------------------------------------------------------------------
# The schedule: which split reads which key blocks
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kv_splits", [1, 2, 3, 7, 16, 128])
@pytest.mark.parametrize(
    ("q_len", "k_len", "mask", "input_pos"),
    [(1, 4096, "none", 0), (16, 1000, "causal", 984), (100, 100, "causal", 0)],
)
def test_each_visited_block_is_read_by_exactly_one_split(
    kv_splits: int, q_len: int, k_len: int, mask: str, input_pos: int
) -> None:
    s = Schedule(q_len, k_len, 16, 64, mask, input_pos, group=4, pack_gqa=True,
                 kv_splits=kv_splits)  # fmt: skip
    counts = np.zeros(s.block_map.shape, dtype=int)
    for qb in range(s.n_q_blocks):
        for split in range(s.n_splits):
            unmasked, masked = s.split_blocks(qb, split)
            lo, hi = s.split_ranges[split]
            for kb in (*unmasked, *masked):
                assert lo <= kb < hi
                assert s.split_map[qb, kb] == split
                counts[qb, kb] += 1
            assert all(s.block_map[qb, kb] == BlockKind.MASKED for kb in masked)
            assert all(s.block_map[qb, kb] == BlockKind.COMPUTED for kb in unmasked)
    assert np.array_equal(counts, (s.block_map != BlockKind.SKIPPED).astype(int))
    assert np.array_equal(s.split_map == -1, s.block_map == BlockKind.SKIPPED)
    # The runs cover the key blocks in order, none empty, all as long but the last.
    runs = s.split_ranges
    assert runs[0][0] == 0 and runs[-1][1] == s.n_k_blocks
    assert all(a[1] == b[0] for a, b in itertools.pairwise(runs))
    assert all(hi - lo == blocks_per_split(s.n_k_blocks, kv_splits) for lo, hi in runs[:-1])
    assert s.n_splits == len(runs) == effective_splits(s.n_k_blocks, kv_splits) <= kv_splits


def test_packed_heads_are_the_rows_of_one_tile() -> None:
    # q_len 1 with a group of 4 fills 4 rows of one 16-row tile, not 1 row of 64.
    assert decode_tile_m(64, 4) == 16 and decode_tile_m(64, 32) == 32
    assert decode_tile_m(64, 64) == 64 and decode_tile_m(128, 1000) == 128
    s = Schedule(1, 8192, decode_tile_m(64, 4), 128, group=4, pack_gqa=True)
    assert (s.rows, s.n_q_blocks) == (4, 1)
    # q_len 16 with a group of 4, causal bottom-right: a 64-row tile holds all four heads'
    # positions 0-15, so it sees the keys of the last position and masks the diagonal block.
    s = Schedule(16, 8192, 64, 128, "causal", 8192 - 16, group=4, pack_gqa=True)
    assert (s.rows, s.n_q_blocks, s.row_span(0)) == (64, 1, (0, 15))
    assert s.k_ranges[0].hi == 64 and s.k_ranges[0].full_hi == 63
    # A 16-row tile inside one head sees only that head's positions.
    s = Schedule(32, 1024, 16, 64, "causal", 992, group=2, pack_gqa=True)
    assert [s.row_span(qb) for qb in range(4)] == [(0, 15), (16, 31), (0, 15), (16, 31)]


# --------------------------------------------------------------------------------------------
# Auto: the split count whose busiest CTA slot has the least work
# --------------------------------------------------------------------------------------------


def test_auto_leaves_a_full_grid_and_a_short_key_range_alone() -> None:
    assert auto_kv_splits(tiles=132, n_k_blocks=256, sm_slots=132) == 1  # fills the GPU
    assert auto_kv_splits(tiles=106, n_k_blocks=256, sm_slots=132) == 1  # 80 % full
    assert auto_kv_splits(tiles=8, n_k_blocks=FEW_KEY_BLOCKS, sm_slots=132) == 1
    assert auto_kv_splits(tiles=8, n_k_blocks=FEW_KEY_BLOCKS + 1, sm_slots=132) > 1


def busiest_slot(tiles: int, n_k_blocks: int, splits: int, slots: int) -> int:
    """Key blocks (plus each CTA's fixed cost) the busiest CTA slot reads with ``splits``."""
    runs = effective_splits(n_k_blocks, splits)
    per = -(-n_k_blocks // runs)
    waves = -(-tiles * runs // slots)
    return waves * (per + CTA_COST_BLOCKS)


@pytest.mark.parametrize(
    ("tiles", "n_k_blocks", "slots"),
    [(8, 256, 132), (8, 1024, 264), (64, 64, 132), (64, 64, 264), (1, 2000, 132), (40, 6, 132)],
)
def test_auto_takes_the_fewest_splits_with_the_shortest_busiest_slot(
    tiles: int, n_k_blocks: int, slots: int
) -> None:
    n = auto_kv_splits(tiles, n_k_blocks, slots)
    top = min(128, slots, n_k_blocks)
    costs = {m: busiest_slot(tiles, n_k_blocks, m, slots) for m in range(1, top + 1)}
    assert 1 <= n <= top
    assert costs[n] == min(costs.values())
    assert all(costs[m] > costs[n] for m in range(1, n))


def test_the_issue_problems_split_into_one_full_wave() -> None:
    # bf16 GQA 32/8, D 128, 128-key blocks, 132 SMs of one decode CTA each: B=1 at 8k, 32k and
    # 128k splits each KV head's range 16 ways (128 CTAs of 4, 16, 64 blocks), not the 15 of
    # FlashAttention's wave rule (18 and 69 blocks for the busiest CTA at 32k and 128k);
    # B=8 q_len 1 at 8k (64 tiles) 2 ways; a third split there would start a second wave.
    assert auto_kv_splits(8, 64, 132) == 16
    assert auto_kv_splits(8, 256, 132) == 16
    assert auto_kv_splits(8, 1024, 132) == 16
    assert auto_kv_splits(64, 64, 132) == 2
    assert split_ranges(256, 16) == [(16 * s, 16 * s + 16) for s in range(16)]
    # Two CTAs an SM (an occupancy hint of 2): twice the splits.
    assert auto_kv_splits(8, 256, 264) == 32 and auto_kv_splits(64, 64, 264) == 4
