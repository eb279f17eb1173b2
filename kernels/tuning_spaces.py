"""Autotuning search spaces for the cuTile FMHA forward kernel, one table per GPU architecture.

Each entry is a complete launch config: the keyword arguments that ``cutile_fmha.attention``
takes for tiling and compiler hints. The tuner measures every entry on the caller's problem
and keeps the fastest, so a table only has to *contain* the winner, not rank it.

Provenance (keep it honest when editing):

* ``sm_90`` (H100/H200) -- vetted by offline sm_90 compiles (tileiras 13.4.92): 128x128 and
  256x128 spill under plain occupancy hints, ``num_worker_warps=8`` removes (128x128) or
  shrinks (256x128) the spill, 64x64/64x128 at occupancy 2 fit in 128 registers. Every entry
  was timed on an H200 (2026-11-29, fp16, B=4, H=32, D=128, N 2048 to 16384, causal and not)
  by ``bench/explore_configs.py`` against cuDNN in the same run; the table keeps the ones
  that were best or within a few percent of it somewhere.
* ``sm_100`` / ``sm_103`` / ``sm_120`` / ``sm_121`` and Ampere/Ada -- **untested here**: taken
  from published guidance (TileGym's ``_fmha_autotune_configs`` table; TileGym measured them
  without applying its hints, see docs/cutile-notes section 3), widened with occupancy.

The whole table stays at or under ~24 configs: each config is a separate compile (seconds on
a workstation) and several timed runs.
"""

from __future__ import annotations

from typing import Any

from kernels.knobs import DEFAULT_LOAD_LATENCIES

Config = dict[str, Any]


def _cfg(
    tile_m: int,
    tile_n: int,
    *,
    occupancy: int | None = None,
    num_worker_warps: int | None = None,
    num_ctas: int | None = None,
    k_latency: int = DEFAULT_LOAD_LATENCIES[0],
    v_latency: int = DEFAULT_LOAD_LATENCIES[1],
    pipeline: bool = False,
    poly_exp2_cols: int = 0,
    store_tma: bool = True,
    persistent: bool = False,
    k_unroll: int = 1,
) -> Config:
    return {
        "tile_m": tile_m,
        "tile_n": tile_n,
        "occupancy": occupancy,
        "num_worker_warps": num_worker_warps,
        "num_ctas": num_ctas,
        "k_latency": k_latency,
        "v_latency": v_latency,
        "pipeline": pipeline,
        "poly_exp2_cols": poly_exp2_cols,
        "store_tma": store_tma,
        "persistent": persistent,
        "k_unroll": k_unroll,
    }


# Hopper: 128-row tiles with 8 worker warps (two consumer warpgroups sharing each K/V tile),
# with part of the softmax exponentials moved off the MUFU unit (``poly_exp2_cols``); 64-row
# tiles at occupancy 2 (two CTAs per SM hide each other's prologue and epilogue, which wins at
# short sequences); and the same two CTAs per SM as halves of a 128-row tile in a 2-CTA
# cluster, which multicasts each K/V tile to both and so halves the 64-row tile's L2 traffic.
# Chosen from the H200 explorations in bench/results (h200-explore-*.md, every config timed
# against cuDNN in the same run). Entries that lost everywhere there (occupancy 1, 4 worker
# warps, clusters at occupancy 1 or of 4 CTAs, 256x128, 256x64, 128x64, 64x64, a hand
# software pipeline, a persistent grid without the Q prefetch, paired q-blocks) are left out:
# each entry costs a compile and a timing on every new problem class.
_SM90: tuple[Config, ...] = (
    _cfg(64, 128, occupancy=2),
    _cfg(64, 128, occupancy=2, k_latency=3, v_latency=6),
    _cfg(128, 128, num_worker_warps=8, k_latency=3, v_latency=6),
    _cfg(128, 128, num_worker_warps=8, poly_exp2_cols=16),
    _cfg(128, 128, num_worker_warps=8, poly_exp2_cols=16, k_latency=3, v_latency=6),
    _cfg(128, 128, num_worker_warps=8, poly_exp2_cols=16, k_latency=4, v_latency=8),
    _cfg(128, 128, num_worker_warps=8, poly_exp2_cols=16, store_tma=False),
    _cfg(128, 128, num_worker_warps=8, poly_exp2_cols=32),
    _cfg(128, 128, num_worker_warps=8, poly_exp2_cols=32, store_tma=False),
    # 2-CTA clusters, each CTA 64 rows at occupancy 2: the 64-row tile's two CTAs per SM with
    # K/V loaded once per cluster (TMA multicast) instead of once per CTA.
    _cfg(128, 128, num_ctas=2, occupancy=2, k_latency=3, v_latency=6),
    _cfg(128, 128, num_ctas=2, occupancy=2, k_latency=4, v_latency=8),
    _cfg(128, 128, num_ctas=2, occupancy=2, poly_exp2_cols=16),
    # The persistent grid (one program per SM looping over the tiles). Non-causal, the next
    # tile's Q fetched during this one, in column halves; against the same tile one CTA per
    # tile, +12-13 % at N = 1024-2048, +6-7 % at 4096-8192 in one run
    # (h200-explore-persistent-*.md, h200-explore-q-split.md). Causal (aligned problems, the
    # tiles assigned by work on the host): against the 2-CTA cluster +12 % at N = 1024, +7 %
    # at 2048, +2 % at 4096, +1 % at 8192 in one run, 1.01-1.05x cuDNN
    # (h200-explore-causal-persistent.md).
    _cfg(128, 128, num_worker_warps=8, poly_exp2_cols=16, persistent=True),
    # Non-causal only: the same with key blocks in pairs (two K and two V buffers): in two
    # runs +3-4 % at N = 1024, +2-3 % at 2048, level at 4096, 3-5 % behind from 8192
    # (h200-explore-persistent-pairs.md).
    _cfg(128, 128, num_worker_warps=8, poly_exp2_cols=16, persistent=True, k_unroll=2),
)

# Blackwell datacenter (untested here): TileGym's table, whose 256x128 configs rely on the
# larger register file and 2-CTA clusters of sm_100.
_SM100: tuple[Config, ...] = (
    _cfg(256, 128, occupancy=1),
    _cfg(256, 128, occupancy=2),
    _cfg(256, 128, num_ctas=2, occupancy=2),
    _cfg(128, 128, occupancy=2),
    _cfg(128, 128, occupancy=1),
    _cfg(128, 64, occupancy=2),
    _cfg(64, 64, occupancy=2),
)

# Blackwell consumer (sm_120/121, untested here): TileGym keeps to 64x64 at occupancy 2 (less
# shared memory per SM than sm_100).
_SM120: tuple[Config, ...] = (
    _cfg(64, 64, occupancy=2),
    _cfg(64, 64, occupancy=1),
    _cfg(128, 64, occupancy=1),
    _cfg(64, 128, occupancy=1),
)

# Ampere/Ada (untested here): TileGym's cc < 9 table.
_SM80: tuple[Config, ...] = (
    _cfg(64, 64, occupancy=2),
    _cfg(128, 64, occupancy=2),
    _cfg(128, 64, occupancy=1),
    _cfg(64, 128, occupancy=1),
)

SEARCH_SPACES: dict[str, tuple[Config, ...]] = {
    "sm_80": _SM80,
    "sm_86": _SM80,
    "sm_87": _SM80,
    "sm_89": _SM80,
    "sm_90": _SM90,
    "sm_100": _SM100,
    "sm_103": _SM100,
    "sm_110": _SM100,
    "sm_120": _SM120,
    "sm_121": _SM120,
}

# Which tables were measured on real hardware by this project (the rest are published guidance).
MEASURED_ARCHS: frozenset[str] = frozenset({"sm_90"})


def search_space(arch: str, head_dim: int = 128, mask: str | None = None) -> list[Config]:
    """The configs to try on ``arch`` (e.g. ``"sm_90"``), as fresh dicts.

    Unknown architectures fall back to the smallest safe table (64x64 and friends). Tiles
    wider than the problem needs are kept: the tuner simply measures them. For head_dim 256 the
    score and accumulator tiles double, so tile_m is capped at 128 to keep register use sane.
    ``mask=None`` gives the whole table. Window problems never see the persistent-grid
    entries (it has no window kernel), causal ones only those with one key block an
    iteration (``k_unroll=1``); on a causal problem that is not aligned
    (:func:`kernels.schedule.causal_grid_aligned`) that entry runs one CTA per tile.
    Non-causal problems get the 2-CTA clusters too: on the H200 they were level with the
    best other entry or up to 3 % ahead at N = 2048 and trailed the 128-row tile by about
    5 % at 4096-8192 (h200-explore-n2048-flip.md); since the persistent grid fetches Q in
    column halves they trail it at every non-causal N (0.91-0.99x cuDNN against
    0.98-1.08x, h200-explore-q-split.md). The tuner's second stage ranks them as the benchmark does
    (h200-tuner-consistency.md), so it takes them only where they win.
    """
    table = SEARCH_SPACES.get(arch)
    if table is None:
        table = _SM120 if arch.startswith("sm_12") else _SM80
    if mask == "window":
        table = tuple(c for c in table if not c["persistent"])
    elif mask == "causal":
        table = tuple(c for c in table if c["k_unroll"] == 1)
    configs = [dict(c) for c in table]
    if head_dim >= 256:
        configs = [c for c in configs if c["tile_m"] * c["tile_n"] <= 128 * 64] or [
            _cfg(64, 64, occupancy=1)
        ]
    return configs
