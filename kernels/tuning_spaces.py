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
* ``sm_100`` / ``sm_103`` (B200/B300 class) and ``sm_120`` / ``sm_121`` (RTX 50-series,
  RTX PRO 6000 Blackwell, DGX Spark) -- **vetted offline, not timed**: rebuilt from
  ``bench/blackwell_report.py`` (results in ``bench/results/blackwell-offline.{json,md}``,
  summary in ``docs/blackwell.md``). Every entry was compiled on a CPU with tileiras 13.4.92
  for sm_100 and sm_120, fp16 and bf16, head dims 64 and 128, masks none/causal/window (each
  mask only for the entries ``search_space`` offers it), and read with cuobjdump 13.4.92: no
  stack or local memory (no spill), shared memory within the per-block limit (227 KB sm_100,
  99 KB sm_120), registers x threads within the 64K register file, and the SM able to keep
  as many blocks as the occupancy hint asks (``kernels.cubin_resources.check_fit``). sm_121
  shares sm_120's table and sm_103 has sm_100's less one entry; both were compiled at the
  same points (sm_121's numbers equal sm_120's at every one). Head dim 256 has a space of
  its own (``_D256_SPACES``). **Nothing was timed on Blackwell hardware**: the tuner picks
  among entries that can run, not among entries known to be fast there. ``sm_110`` keeps the
  sm_100 table unchecked. ``tests/test_arch_tables_offline.py`` recompiles one entry of each
  table in CI.
* Ampere/Ada -- **untested here**: taken from published guidance (TileGym's
  ``_fmha_autotune_configs`` table; TileGym measured them without applying its hints, see
  docs/cutile-notes section 3), widened with occupancy.

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
# Chosen from the H200 explorations in bench/results/experiments
# (h200-explore-*.md, every config timed
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

# Blackwell datacenter (sm_100/103: 227 KB shared memory per block, as sm_90), vetted offline
# (bench/results/blackwell-offline.md; nothing timed). Kept: the entries that compile without a
# spill at fp16/bf16, D = 64/128, every mask. TileGym's 256x128 at occupancy 1 or 2 spills
# (8 B of stack; at occupancy 2 the SM cannot hold two 384-thread blocks of 168 registers
# either) and so does 256x128 with 8 worker warps; 128x64 at occupancy 2 asks for more shared
# memory than two blocks get (2 x 113 KB + 2 x 1 KB reserve > 228 KB), and so does Hopper's
# 64x128 at occupancy 2 with a window at D = 64 (by 776 B). No persistent-grid entry fits:
# without a mask it spills on every tile tried (128x128 with 8 worker warps 112 B, 64 B with
# the polynomial, 48 B with key blocks in pairs; 128x128 at occupancy 2 144 B; 128x64 with 8
# worker warps 296 B and 64x64 152-632 B at D = 64), and 64x128 at occupancy 2 cannot keep
# two blocks.
_SM100: tuple[Config, ...] = (
    _cfg(64, 64, occupancy=2),
    _cfg(128, 128, occupancy=1),
    _cfg(128, 128, occupancy=2),
    _cfg(128, 64, num_worker_warps=8),
    _cfg(128, 128, num_worker_warps=8),
    _cfg(128, 128, num_worker_warps=8, k_latency=3, v_latency=6),
    _cfg(128, 128, num_worker_warps=8, poly_exp2_cols=16),
    _cfg(128, 128, num_worker_warps=8, poly_exp2_cols=32),
    _cfg(128, 128, num_worker_warps=8, poly_exp2_cols=16, k_latency=3, v_latency=6),
    # 2-CTA clusters (K/V multicast to both CTAs): TileGym's 256x128 and Hopper's 128x128 with
    # the polynomial, each CTA at 128 registers with no spill, two per SM.
    _cfg(256, 128, num_ctas=2, occupancy=2),
    _cfg(128, 128, num_ctas=2, occupancy=2, poly_exp2_cols=16),
)

# sm_103 (B300 class), compiled at the same points as sm_100: the sm_100 table less 64x64 at
# occupancy 2, which there takes 113.3 KB a block with a window at fp16 D = 128 (97.3 KB on
# sm_100), so two blocks and their reserves do not fit the 228 KB SM. Every other entry fits.
_SM103: tuple[Config, ...] = tuple(c for c in _SM100 if c != _cfg(64, 64, occupancy=2))

# Blackwell consumer (sm_120/121: 99 KB shared memory per block, 100 KB per SM, 1536 threads
# per SM), vetted offline (bench/results/blackwell-offline.md; nothing timed). TileGym's
# 64x64 at occupancy 2 spills (32-72 B) and two of its 49 KB blocks plus their 1 KB reserves
# do not fit the 100 KB SM anyway; 128x64 and 64x128 at occupancy 1 spill (1.7 KB, 80-104 B).
# What fits: 64x64 at one CTA per SM, 128x64 with 8 worker warps when part of the exp2s go to
# the FMA polynomial (without it the causal kernel spills 8 B), and the persistent 64x64 grid.
# No 2-CTA cluster fits: 64x64 spills 56-80 B with a mask, 128x64 with 8 worker warps and the
# polynomial 144-192 B, 128x64 and 128x128 at occupancy 2 200-1208 B.
# The Hopper pick (128x128, 8 worker warps, poly 16, persistent) spills at mask none (48 B)
# and fills 101 KB; 128x128 with 8 worker warps spills 136-152 B.
_SM120: tuple[Config, ...] = (
    _cfg(64, 64, occupancy=1),
    _cfg(64, 64, persistent=True),
    _cfg(128, 64, num_worker_warps=8, poly_exp2_cols=8),
    _cfg(128, 64, num_worker_warps=8, poly_exp2_cols=16),
    _cfg(128, 64, num_worker_warps=8, poly_exp2_cols=32),
    _cfg(128, 64, num_worker_warps=8, poly_exp2_cols=16, store_tma=False),
)

# Ampere/Ada (untested here): TileGym's cc < 9 table.
_SM80: tuple[Config, ...] = (
    _cfg(64, 64, occupancy=2),
    _cfg(128, 64, occupancy=2),
    _cfg(128, 64, occupancy=1),
    _cfg(64, 128, occupancy=1),
)

# Head dim 256 on Blackwell (offline report, fp16): the 64x64 tile at one CTA per SM, the one
# entry that neither spills nor asks for what the SM lacks on sm_100 (255 registers, 225 KB;
# at occupancy 2 the hint cannot be honoured, 128x64 with 8 worker warps spills 8 B with no
# mask or causal). On sm_120 **every** entry spills at D = 256 (200-496 B: the 64x256 fp32
# accumulator alone is 64 registers a thread); 64x64 at occupancy 1 is kept so that D = 256
# runs at all, and docs/blackwell.md says it spills.
_D256_SPACES: dict[str, tuple[Config, ...]] = {
    "sm_100": (_cfg(64, 64, occupancy=1),),
    "sm_103": (_cfg(64, 64, occupancy=1),),
    "sm_120": (_cfg(64, 64, occupancy=1),),
    "sm_121": (_cfg(64, 64, occupancy=1),),
}

SEARCH_SPACES: dict[str, tuple[Config, ...]] = {
    "sm_80": _SM80,
    "sm_86": _SM80,
    "sm_87": _SM80,
    "sm_89": _SM80,
    "sm_90": _SM90,
    "sm_100": _SM100,
    "sm_103": _SM103,
    "sm_110": _SM100,
    "sm_120": _SM120,
    "sm_121": _SM120,
}

# Which tables were measured on real hardware by this project (the rest are published guidance).
MEASURED_ARCHS: frozenset[str] = frozenset({"sm_90"})
# Which tables were rebuilt from the offline compile report (bench/results/blackwell-offline.md):
# every entry compiles for the architecture without a spill and within its limits, but none was
# timed there.
VETTED_OFFLINE_ARCHS: frozenset[str] = frozenset({"sm_100", "sm_103", "sm_120", "sm_121"})


def table_status(arch: str) -> str:
    """How far ``arch``'s tuning table was checked, in words for the user (``backends``)."""
    if arch in MEASURED_ARCHS:
        return "tuning table measured on this architecture"
    if arch in VETTED_OFFLINE_ARCHS:
        return "tuning table vetted offline, not yet measured on this architecture"
    return "tuning table from published guidance, not checked on this architecture"


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
    (h200-tuner-consistency.md), so it takes them only where they win. The Blackwell tables
    have head_dim-256 spaces of their own (``_D256_SPACES``, from the offline report).
    """
    table = SEARCH_SPACES.get(arch)
    if table is None:
        table = _SM120 if arch.startswith("sm_12") else _SM80
    if mask == "window":
        table = tuple(c for c in table if not c["persistent"])
    elif mask == "causal":
        table = tuple(c for c in table if c["k_unroll"] == 1)
    if head_dim >= 256 and arch in _D256_SPACES:
        return [dict(c) for c in _D256_SPACES[arch]]
    configs = [dict(c) for c in table]
    if head_dim >= 256:
        configs = [c for c in configs if c["tile_m"] * c["tile_n"] <= 128 * 64] or [
            _cfg(64, 64, occupancy=1)
        ]
    return configs
