"""D 96 in column chunks (64 + 32), compiled for sm_90 without a GPU: the configs the tuner
tries compile, and where D 128 spills nothing the 64-row tile and the causal persistent grid
spill nothing at D 96 chunked and take less shared memory than at D 128
(docs/lab/head-dim-chunks.md has every entry). Skips without cuda.tile, tileiras or
cuobjdump."""

from __future__ import annotations

import pytest

pytest.importorskip("cuda.tile")

from kernels import cutile_fmha as F
from kernels.cubin_resources import ARCH_LIMITS, cuobjdump_path, read_resources
from kernels.tuning_spaces import search_space

PROBLEM = dict(
    arch="sm_90", batch=2, heads=32, kv_heads=8, q_len=4096, mask="causal", dtype="bfloat16"
)


def _entry(predicate) -> dict:
    return next(c for c in search_space("sm_90", 96, "causal") if predicate(c))


def _resources(knobs: dict, head_dim: int):
    if F.tileiras_version() is None or cuobjdump_path() is None:
        pytest.skip("tileiras or cuobjdump is not installed")
    return read_resources(F.compile_cubin(**PROBLEM, head_dim=head_dim, **knobs))


@pytest.mark.parametrize(
    "which",
    [
        pytest.param(lambda c: c["tile_m"] == 64, id="tile-64x128-occ2"),
        pytest.param(lambda c: c["persistent"], id="causal-persistent-128x128-ww8"),
    ],
)
def test_d96_chunked_spills_nothing_and_takes_less_shared_memory_than_d128(which) -> None:
    knobs = _entry(which)
    chunked, wide = _resources(knobs, 96), _resources(knobs, 128)
    print(f"{knobs}: D 96 {chunked}; D 128 {wide}")
    assert wide.stack == 0 and chunked.stack == 0 and chunked.local == 0
    assert chunked.shared < wide.shared


def test_d96_chunked_128_row_tiles_fit_one_cta_an_sm() -> None:
    # tileiras buffers the four smaller K/V load sites deeper: more shared memory than D 128,
    # a few bytes of stack (16-24 B offline), but still one CTA an SM.
    knobs = _entry(lambda c: c["tile_m"] == 128 and c["num_worker_warps"] == 8)
    used = _resources(knobs, 96)
    print(f"{knobs}: D 96 {used}")
    assert used.shared <= ARCH_LIMITS["sm_90"].shared_per_block and used.stack <= 64
