"""Head dims that are not powers of two run the prefill forms in power-of-two column chunks
(issue #52 item 2, the speed half): the chunk arithmetic and what the launch plan chooses, on
the CPU. The kernel's own chunk walk (kernels.cutile.device_chunks.chunk_tiles) is checked
against the plan's chunks where cuda.tile is installed."""

from __future__ import annotations

from itertools import accumulate

import pytest

from kernels.cutile.plan import CHUNKED_FORMS, LaunchPlan
from kernels.head_dims import (
    CHUNKED,
    EXACT,
    MMA_K_MIN,
    PADDED,
    column_chunks,
    head_columns,
)
from kernels.knobs import HEAD_DIM

compile_ = pytest.importorskip("kernels.cutile.compile", reason="cuda-tile is not installed")

# Each form as a workbench sweep runs it, on the front door's D96-prefill problem's shape.
PREFILL = {
    "tile": dict(mask="causal", tile_m=64, tile_n=64, occupancy=2),
    "persistent": dict(mask="none", tile_m=128, tile_n=128, num_worker_warps=8, persistent=True),
    "causal-persistent": dict(
        mask="causal", tile_m=128, tile_n=128, num_worker_warps=8, persistent=True
    ),
}
DECODE = dict(mask="none", q_len=1, k_len=8192, kv_splits=4, pack_gqa=True, tile_n=128)


def planned(head_dim: int, head_dim_v: int | None = None, **knobs) -> tuple:
    call, config = compile_.offline_plan(
        batch=2, heads=32, kv_heads=8, head_dim=head_dim, head_dim_v=head_dim_v, **knobs
    )
    return call, config


@pytest.mark.parametrize("head_dim", HEAD_DIM.values)
def test_each_listed_dim_splits_into_aligned_power_of_two_chunks_largest_first(
    head_dim: int,
) -> None:
    chunks = column_chunks(head_dim)
    assert all(c & (c - 1) == 0 and c >= MMA_K_MIN for c in chunks), chunks
    assert list(chunks) == sorted(set(chunks), reverse=True), chunks
    # Each chunk is a whole tile of the columns at its offset (the kernel's tile index).
    assert all(o % c == 0 for o, c in zip(chunk_offsets(chunks), chunks, strict=True))
    # Padding only to the MMA's K: a multiple of 16 runs with no padded column at all.
    assert head_dim <= sum(chunks) < head_dim + MMA_K_MIN
    assert (sum(chunks) == head_dim) == (head_dim % MMA_K_MIN == 0)


@pytest.mark.parametrize(
    ("head_dim", "chunks", "columns"),
    [
        (96, (64, 32), CHUNKED),
        (80, (64, 16), CHUNKED),
        (160, (128, 32), CHUNKED),
        (192, (128, 64), CHUNKED),
        (40, (32, 16), CHUNKED),  # 32 + 8: the 8 pads to the MMA's 16
        (224, (128, 64, 32), CHUNKED),
        (248, (256,), PADDED),  # 128 + 64 + 32 + 16 + 8: the 8 carries into one 256
        (128, (128,), EXACT),
    ],
)
def test_the_chunks_of_the_issues_examples(head_dim: int, chunks: tuple, columns: str) -> None:
    assert column_chunks(head_dim) == chunks
    assert head_columns(head_dim, chunks) == columns


@pytest.mark.parametrize("form", list(PREFILL))
def test_the_prefill_forms_plan_d96_as_64_plus_32_with_unchecked_loads(form: str) -> None:
    call, _ = planned(96, q_len=4096, **PREFILL[form])
    assert call.form == form and form in CHUNKED_FORMS
    # The kernel takes the chunks' sum: no MMA sees a column past the 96.
    assert (call.value("TILE_D"), call.value("TILE_DV")) == (96, 96)
    assert call.value("D_PADDED") is False  # 64 + 32 is exactly 96: nothing to zero-fill


def test_the_plan_records_the_chunks_it_chose_and_reads_them_back() -> None:
    from kernels.cutile.plan import plan_launch
    from kernels.cutile.problem import Problem

    config = compile_.LaunchConfig.of(dict(tile_m=64, tile_n=64))
    p = Problem(2, 32, 8, 4096, 4096, 192, "bfloat16", head_dim_v=128)
    plan = plan_launch(config, p, mask="causal", sm_count=lambda: 132)
    assert (plan.d_chunks, plan.dv_chunks, plan.head_columns) == ((128, 64), (128,), CHUNKED)
    assert (plan.tile_d, plan.tile_dv, plan.d_padded) == (192, 128, False)
    stored = plan.to_dict()
    again = LaunchPlan.from_dict({**stored, "d_chunks": list(stored["d_chunks"])})
    assert again == plan
    # A plan stored before the chunks were planned ran each head dim in one padded tile.
    old = {k: v for k, v in stored.items() if k not in ("d_chunks", "dv_chunks", "head_columns")}
    old.update(tile_d=256, d_padded=True)
    read = LaunchPlan.from_dict(old)
    assert (read.d_chunks, read.dv_chunks, read.head_columns) == ((256,), (128,), PADDED)


@pytest.mark.parametrize("head_dim", [96, 40])
def test_the_decode_form_keeps_the_padded_tile(head_dim: int) -> None:
    call, _ = planned(head_dim, **DECODE)
    assert call.form == "decode"
    assert call.value("TILE_D") == {96: 128, 40: 64}[head_dim]
    assert call.value("D_PADDED") is True


def test_a_padded_last_chunk_checks_every_load() -> None:
    call, _ = planned(40, q_len=1000, **PREFILL["tile"])
    assert (call.value("TILE_D"), call.value("D_PADDED")) == (48, True)


def test_every_config_the_tuner_tries_at_d96_runs_chunked() -> None:
    from kernels.tuning_spaces import search_space

    for mask, q_len in (("causal", 4096), ("none", 4096)):
        candidates = search_space("sm_90", 96, mask)
        assert candidates
        for knobs in candidates:
            call, _ = planned(96, q_len=q_len, mask=mask, **knobs)
            assert call.form in CHUNKED_FORMS, knobs
            assert (call.value("TILE_D"), call.value("D_PADDED")) == (96, False), knobs


@pytest.mark.parametrize("head_dim", HEAD_DIM.values)
def test_the_kernels_chunk_walk_is_the_plans_chunks(head_dim: int) -> None:
    from kernels.cutile.device_chunks import chunk_tiles

    chunks = column_chunks(head_dim)
    walk = chunk_tiles(sum(chunks))
    assert [w for _, w, _ in walk] == list(chunks)
    assert [i for i, _, _ in walk] == list(range(len(chunks)))
    assert [t * w for _, w, t in walk] == list(chunk_offsets(chunks))


def test_what_ran_names_the_chunks_where_a_head_dim_is_not_a_power_of_two() -> None:
    from kernels.cutile.plan import plan_words

    chunked, _ = planned(96, q_len=4096, **PREFILL["tile"])
    words = plan_words(_plan_of(96, "causal", dict(tile_m=64, tile_n=64)).to_dict())
    assert "D 64+32 / Dv 64+32 columns (chunked)" in words, words
    assert chunked.value("TILE_D") == 96
    padded = plan_words(_plan_of(96, "none", DECODE_KNOBS, q_len=1).to_dict())
    assert "D 128 / Dv 128 columns (padded)" in padded, padded
    exact = plan_words(_plan_of(128, "causal", dict(tile_m=64, tile_n=64)).to_dict())
    assert "columns" not in exact, exact


DECODE_KNOBS = dict(kv_splits=4, pack_gqa=True, tile_n=128)


def _plan_of(head_dim: int, mask: str, knobs: dict, q_len: int = 4096) -> LaunchPlan:
    from kernels.cutile.plan import plan_launch
    from kernels.cutile.problem import Problem

    p = Problem(2, 32, 8, q_len, 8192, head_dim, "bfloat16")
    return plan_launch(
        compile_.LaunchConfig.of(knobs), p, mask=mask, input_pos=8192 - q_len,
        sm_count=lambda: 132,
    )  # fmt: skip


def chunk_offsets(chunks: tuple[int, ...]) -> list[int]:
    """The first column of each chunk."""
    return [0, *accumulate(chunks)][:-1]
