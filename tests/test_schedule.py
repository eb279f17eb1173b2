"""The tile schedule: which (q-block, k-block) pairs the kernel computes, masks or skips.

The block map drawn by the workbench is only worth looking at if it is the truth, so most of
these compare it with a brute-force classification from the visibility matrix.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.schedule import (
    BlockKind,
    Schedule,
    block_map,
    causal_grid_aligned,
    causal_tile_assignment,
    cdiv,
    visible,
    visible_pairs,
)
from tests.oracles import program_order, work_per_q_block

TILES = (16, 32, 64, 128)


def brute_force_map(s: Schedule) -> np.ndarray:
    """Classify every block from the whole (q_len, k_len) visibility matrix."""
    seen = visible(s.q_len, s.k_len, s.mask, s.input_pos, s.window)
    grid = np.empty((s.n_q_blocks, s.n_k_blocks), dtype=np.int8)
    for qb in range(s.n_q_blocks):
        rows = seen[qb * s.tile_m : (qb + 1) * s.tile_m]  # only real rows count
        for kb in range(s.n_k_blocks):
            c0, c1 = kb * s.tile_n, (kb + 1) * s.tile_n
            tile = rows[:, c0:c1]
            padded = c1 > s.k_len  # the ragged last block holds keys past k_len
            if not tile.any():
                grid[qb, kb] = BlockKind.SKIPPED
            elif tile.all() and not padded:
                grid[qb, kb] = BlockKind.COMPUTED
            else:
                grid[qb, kb] = BlockKind.MASKED
    return grid


@st.composite
def schedules(draw: st.DrawFn, max_len: int = 300) -> Schedule:
    q_len = draw(st.integers(1, max_len))
    k_len = draw(st.integers(1, max_len))
    mask = draw(st.sampled_from(["none", "causal", "window"]))
    input_pos = draw(st.integers(0, max_len)) if mask != "none" else 0
    window = draw(st.integers(1, max_len + 10)) if mask == "window" else None
    return Schedule(
        q_len,
        k_len,
        draw(st.sampled_from(TILES)),
        draw(st.sampled_from(TILES)),
        mask,
        input_pos,
        window,
    )


@settings(max_examples=300, deadline=None)
@given(schedules())
def test_block_map_matches_brute_force_classification(s: Schedule) -> None:
    np.testing.assert_array_equal(s.block_map, brute_force_map(s))


@settings(max_examples=150, deadline=None)
@given(schedules())
def test_counts_add_up_to_the_grid(s: Schedule) -> None:
    counts = s.counts()
    assert counts["computed"] + counts["masked"] + counts["skipped"] == (
        cdiv(s.q_len, s.tile_m) * cdiv(s.k_len, s.tile_n)
    )
    assert s.block_map.shape == (s.n_q_blocks, s.n_k_blocks)
    # The work per program is exactly the visited (not skipped) blocks of its row.
    visited = (s.block_map != BlockKind.SKIPPED).sum(axis=1)
    np.testing.assert_array_equal(work_per_q_block(s), visited)
    # The module-level helper gives the same map.
    np.testing.assert_array_equal(
        block_map(s.q_len, s.k_len, s.tile_m, s.tile_n, s.mask, s.input_pos, s.window),
        s.block_map,
    )


@settings(max_examples=150, deadline=None)
@given(schedules())
def test_visited_blocks_are_one_contiguous_run_per_row(s: Schedule) -> None:
    """The kernel loops lo..hi: nothing skipped may sit between two visited blocks."""
    for row in s.block_map:
        visited = np.flatnonzero(row != BlockKind.SKIPPED)
        if visited.size:
            assert visited[-1] - visited[0] + 1 == visited.size


def test_causal_skips_about_half_and_tends_to_half() -> None:
    fractions = []
    for n in (256, 1024, 4096, 16384):
        s = Schedule(n, n, 64, 64, "causal")
        counts = s.counts()
        blocks = s.n_q_blocks
        fraction = counts["skipped"] / s.block_map.size
        # Exactly the strict upper triangle is skipped and the diagonal is masked.
        assert counts["skipped"] == blocks * (blocks - 1) // 2
        assert counts["masked"] == blocks
        assert abs(fraction - 0.5) <= 1 / blocks
        fractions.append(fraction)
    assert fractions == sorted(fractions)
    assert fractions[-1] > 0.49


def test_dense_computes_everything() -> None:
    s = Schedule(1024, 2048, 64, 128)
    assert s.counts() == {"computed": 16 * 16, "masked": 0, "skipped": 0}


@pytest.mark.parametrize("mask", ["none", "causal", "window"])
@pytest.mark.parametrize("tile_n", [32, 64, 128])
def test_ragged_last_k_block_is_always_masked(mask: str, tile_n: int) -> None:
    rng = np.random.default_rng()
    for _ in range(20):
        k_len = int(rng.integers(1, 20)) * tile_n + int(rng.integers(1, tile_n))
        q_len = int(rng.integers(1, k_len + 1))
        window = int(rng.integers(1, k_len + 1)) if mask == "window" else None
        s = Schedule(q_len, k_len, 64, tile_n, mask, k_len - q_len, window)
        last = s.block_map[:, -1]
        assert not (last == BlockKind.COMPUTED).any(), (q_len, k_len, window)
        # The last q-block sees the last key (chunked prefill), so it computes that block.
        assert last[-1] == BlockKind.MASKED
        if mask == "none":
            assert (last == BlockKind.MASKED).all()


def test_ragged_q_needs_no_mask_by_itself() -> None:
    """Padding rows of a ragged last q-block are never stored, so they force no mask."""
    s = Schedule(1000, 1024, 64, 64)  # 1000 % 64 != 0, k divisible
    assert s.counts() == {"computed": 16 * 16, "masked": 0, "skipped": 0}
    # ...but they do not make the block visit keys that its real rows cannot see.
    c = Schedule(1000, 1000, 64, 64, "causal")
    assert c.k_range(c.n_q_blocks - 1).hi == c.n_k_blocks


def test_window_skips_blocks_on_both_sides() -> None:
    s = Schedule(4096, 4096, 64, 64, "window", 0, 256)
    grid = s.block_map
    middle = grid[s.n_q_blocks // 2]
    visited = np.flatnonzero(middle != BlockKind.SKIPPED)
    assert visited[0] > 0 and visited[-1] < s.n_k_blocks - 1  # skipped on the left and right
    assert (middle[: visited[0]] == BlockKind.SKIPPED).all()
    assert (middle[visited[-1] + 1 :] == BlockKind.SKIPPED).all()
    assert (middle == BlockKind.COMPUTED).any()  # the inside of the window needs no mask
    # A window of 256 keys at 64-wide tiles visits 5 blocks per row (4 and the diagonal).
    assert visited.size == 5
    # Most blocks of a long sequence are skipped; far more than for plain causal.
    assert s.counts()["skipped"] > Schedule(4096, 4096, 64, 64, "causal").counts()["skipped"]


def test_causal_offset_is_chunked_prefill() -> None:
    """Queries are the last q_len tokens: the last row sees every key, the first row most."""
    s = Schedule(128, 1024, 64, 64, "causal", input_pos=896)
    assert s.k_range(s.n_q_blocks - 1).hi == s.n_k_blocks
    # The first q-block sees keys 0..896+63, all but the last block, 14 of them without mask.
    first = s.block_map[0]
    assert (first[:14] == BlockKind.COMPUTED).all()
    assert first[14] == BlockKind.MASKED and first[15] == BlockKind.SKIPPED


def test_rows_that_see_no_key_skip_every_block() -> None:
    # Rows 300.. of a 100-key, window-8 problem see nothing: their blocks must all be skipped.
    s = Schedule(512, 100, 64, 32, "window", 0, 8)
    seen = visible(512, 100, "window", 0, 8)
    for qb in range(s.n_q_blocks):
        if not seen[qb * 64 : (qb + 1) * 64].any():
            assert (s.block_map[qb] == BlockKind.SKIPPED).all()
            assert s.k_range(qb).visited == 0


@settings(max_examples=100, deadline=None)
@given(schedules(), st.integers(1, 12), st.booleans())
def test_program_order_is_a_permutation_of_all_programs(
    s: Schedule, batch_heads: int, remap: bool
) -> None:
    order = program_order(s, batch_heads, remap=remap)
    everything = {(qb, bh) for qb in range(s.n_q_blocks) for bh in range(batch_heads)}
    assert len(order) == len(everything)
    assert set(order) == everything


@settings(max_examples=100, deadline=None)
@given(schedules(), st.integers(1, 6))
def test_remap_launches_the_heaviest_programs_first(s: Schedule, batch_heads: int) -> None:
    work = work_per_q_block(s)
    order = program_order(s, batch_heads, remap=True)
    loads = [int(work[qb]) for qb, _ in order]
    assert loads == sorted(loads, reverse=True)
    assert loads[0] == max(work)
    # Without remapping the q-block varies fastest within one batch·head.
    plain = program_order(s, batch_heads, remap=False)
    assert plain[: s.n_q_blocks] == [(qb, 0) for qb in range(s.n_q_blocks)]


def test_remap_keeps_the_plain_order_without_a_mask() -> None:
    s = Schedule(1000, 1000, 64, 128, "none")
    assert program_order(s, 3, remap=True) == program_order(s, 3, remap=False)


def test_remap_moves_the_long_causal_rows_to_the_front() -> None:
    s = Schedule(2048, 2048, 64, 64, "causal")
    assert program_order(s, 4, remap=False)[0] == (0, 0)  # the lightest row first
    assert program_order(s, 4, remap=True)[0][0] == s.n_q_blocks - 1  # the heaviest first


def tile_flops(s: Schedule, head_dim: int) -> int:
    """FLOPs of the two GEMMs on every block the map computes, padding included."""
    computed = int((s.block_map != BlockKind.SKIPPED).sum())
    return 4 * computed * s.tile_m * s.tile_n * head_dim


@settings(max_examples=200, deadline=None)
@given(schedules(max_len=200), st.sampled_from([32, 64, 128]))
def test_flops_useful_counts_visible_pairs(s: Schedule, head_dim: int) -> None:
    pairs = int(visible(s.q_len, s.k_len, s.mask, s.input_pos, s.window).sum())
    assert visible_pairs(s.q_len, s.k_len, s.mask, s.input_pos, s.window) == pairs
    assert s.flops_useful(head_dim) == 4 * head_dim * pairs
    # The kernel computes whole tiles, so it never does less than the useful work.
    assert tile_flops(s, head_dim) >= s.flops_useful(head_dim)


def test_flops_of_a_dense_aligned_problem_are_the_textbook_count() -> None:
    s = Schedule(1024, 512, 64, 64)
    d = 128
    assert s.flops_useful(d) == tile_flops(s, d) == 4 * 1024 * 512 * d
    c = Schedule(1024, 1024, 64, 64, "causal")
    assert c.flops_useful(d) == 4 * d * 1024 * 1025 // 2


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(q_len=0, k_len=8, tile_m=16, tile_n=16),
        dict(q_len=8, k_len=0, tile_m=16, tile_n=16),
        dict(q_len=8, k_len=8, tile_m=0, tile_n=16),
        dict(q_len=8, k_len=8, tile_m=16, tile_n=16, mask="sliding"),
        dict(q_len=8, k_len=8, tile_m=16, tile_n=16, mask="window"),
        dict(q_len=8, k_len=8, tile_m=16, tile_n=16, mask="window", window=0),
    ],
)
def test_bad_schedules_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        Schedule(**kwargs)


@settings(max_examples=60, deadline=None)
@given(
    tile=st.sampled_from([64, 128]),
    q_blocks=st.integers(1, 9),
    ip_blocks=st.integers(0, 3),
    extra_keys=st.integers(0, 200),
)
def test_an_aligned_causal_problem_has_one_diagonal_block_per_q_block(
    tile: int, q_blocks: int, ip_blocks: int, extra_keys: int
) -> None:
    # What the causal persistent kernel assumes of the problems it takes: whole unmasked key
    # blocks, then exactly one masked block, the diagonal, at qb + input_pos / tile.
    q_len, input_pos = q_blocks * tile, ip_blocks * tile
    k_len = q_len + input_pos + extra_keys
    assert causal_grid_aligned(q_len, k_len, tile, tile, input_pos)
    s = Schedule(q_len, k_len, tile, tile, "causal", input_pos)
    for qb, r in enumerate(s.k_ranges):
        assert (r.lo, r.full_lo, r.full_hi, r.hi) == (0, 0, qb + ip_blocks, qb + ip_blocks + 1)


def test_unaligned_causal_problems_are_told_apart() -> None:
    assert not causal_grid_aligned(1000, 1000, 128, 128, 0)  # ragged last q-block
    assert not causal_grid_aligned(1024, 2048, 128, 128, 1000)  # diagonal mid-block
    assert not causal_grid_aligned(1024, 2000, 128, 128, 1024)  # diagonal past k_len
    assert not causal_grid_aligned(1024, 1024, 64, 128, 0)  # a tall tile: two diagonals
    assert not causal_grid_aligned(1024, 1024, 128, 128, -128)  # rows that see no key
    assert not causal_grid_aligned(0, 0, 128, 128, 0)


@pytest.mark.parametrize("n_q", [8, 16, 32, 64, 128])
def test_causal_tile_assignment_runs_every_tile_once_and_evens_the_work(n_q: int) -> None:
    # B*H = 128 on the H200's 132 SMs, N = 1024-16384 with 128-row tiles: a grid stride over
    # the same tiles gave the busiest program 8-67 % more work than the mean.
    group = max(1, 32 * 8 // n_q)  # the L2 group of those sizes
    programs = causal_tile_assignment(128, n_q, 132, group)
    tiles = [t for p in programs for t in p]
    assert sorted(tiles) == sorted((qb, bh) for qb in range(n_q) for bh in range(128))
    work = [sum(qb + 1 for qb, _ in p) for p in programs]
    assert max(work) <= 1.005 * (sum(work) / len(work)) + 1


def test_causal_tile_assignment_keeps_l2_groups_together() -> None:
    # The heavy three quarters run group after group: a program's tiles of batch·head group g
    # all come before its tiles of group g + 1 (the light quarter goes last, in any group).
    n_q, group = 16, 16
    for program in causal_tile_assignment(128, n_q, 132, group, diag_offset=2):
        heavy = [bh // group for qb, bh in program if qb >= n_q // 4]
        assert heavy == sorted(heavy)
        kinds = [qb >= n_q // 4 for qb, _ in program]
        assert kinds == sorted(kinds, reverse=True)  # the heavy tiles first
    # More programs than tiles: the extra ones get nothing, the others one tile each.
    few = causal_tile_assignment(1, 2, 4, 1)
    assert sorted(len(p) for p in few) == [0, 0, 1, 1]
