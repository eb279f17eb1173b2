"""Autotuning search spaces for the cuTile FMHA forward kernel, one table per GPU architecture.

Each entry is a complete launch config of the tunable knobs (:data:`kernels.knobs.TUNABLE`, in
the registry's names, checked by the kernel's own rules when the table is built); the tuner
measures every entry on the caller's problem and keeps the fastest, so a table only has to
*contain* the winner, not rank it. Each config is a separate compile and several timed runs, so
a table stays at or under ~24 entries.

How far each table was checked (:func:`table_status`):

* ``sm_90`` (H100/H200): every entry timed on an H200 against cuDNN by
  ``bench/explore_configs.py`` (bench/results/experiments/h200-explore-*.md); kept are those
  best or within a few percent of the best somewhere.
* ``sm_100``/``sm_103`` and ``sm_120``/``sm_121``: **vetted offline, not timed**: every entry
  compiled for the architecture without a spill and within its limits
  (``bench/blackwell_report.py``; bench/results/blackwell-offline.md, docs/blackwell.md).
  ``sm_110`` takes the sm_100 table unchecked. ``tests/test_arch_tables_offline.py`` recompiles
  one entry of each.
* Ampere/Ada: **untested here**: TileGym's published table, widened with occupancy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kernels.head_dims import tile_head_dim
from kernels.knobs import KNOBS, TUNABLE, check_launch, launch_violations
from kernels.schedule import TILE_KNOBS, tile_shape

Config = dict[str, Any]


def entry(values: Mapping[str, Any]) -> Config:
    """A table entry from tunable knob ``values``: every tunable knob, at its registry default
    unless given; refused (by the kernel's rules, in their words) where the kernel could not
    launch it."""
    unknown = sorted(set(values) - set(TUNABLE))
    if unknown:
        raise TypeError(f"not tunable knobs: {unknown}; the tunable ones are {list(TUNABLE)}")
    config = {name: KNOBS[name].default for name in TUNABLE}
    config.update(values)
    check_launch(config)
    return config


def _cfg(rows: int, keys: int, **knobs: Any) -> Config:
    """:func:`entry` of a tile shape (query rows, keys: the knobs of
    :data:`kernels.schedule.TILE_KNOBS`) and the other tunable ``knobs``."""
    return entry({**dict(zip(TILE_KNOBS, (rows, keys))), **knobs})


# Hopper: 128-row tiles with 8 worker warps and part of the exp2s on the FMA polynomial, 64-row
# tiles at occupancy 2, 2-CTA clusters of them (K/V multicast), and the persistent grid: the
# entries that were best or near it in the H200 explorations
# (bench/results/experiments/h200-explore-*.md); everything that lost everywhere is left out.
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
    # 2-CTA clusters: two 64-row CTAs share each K/V tile (h200-explore-clusters.md).
    _cfg(128, 128, num_ctas=2, occupancy=2, k_latency=3, v_latency=6),
    _cfg(128, 128, num_ctas=2, occupancy=2, k_latency=4, v_latency=8),
    _cfg(128, 128, num_ctas=2, occupancy=2, poly_exp2_cols=16),
    # The persistent grid (h200-explore-persistent*.md, h200-explore-causal-persistent.md);
    # with key blocks in pairs for no mask (h200-explore-persistent-pairs.md).
    _cfg(128, 128, num_worker_warps=8, poly_exp2_cols=16, persistent=True),
    _cfg(128, 128, num_worker_warps=8, poly_exp2_cols=16, persistent=True, k_unroll=2),
)

# Blackwell datacenter (sm_100/103, 227 KB of shared memory per block): the entries that compile
# without a spill and within the SM's limits at fp16/bf16, D = 64/128, every mask
# (bench/results/blackwell-offline.md); TileGym's 256x128 spills, and no persistent grid fits
# without a mask.
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
    _cfg(256, 128, num_ctas=2, occupancy=2),
    _cfg(128, 128, num_ctas=2, occupancy=2, poly_exp2_cols=16),
)

# sm_103: sm_100's table less 64x64 at occupancy 2, whose two blocks outgrow the SM there with a
# window (bench/results/blackwell-offline.md).
_SM103: tuple[Config, ...] = tuple(c for c in _SM100 if c != _cfg(64, 64, occupancy=2))

# Blackwell consumer (sm_120/121, 99 KB of shared memory per block, 100 KB per SM): what fits
# there (bench/results/blackwell-offline.md): 64x64 at one CTA per SM, its persistent grid, and
# 128x64 with 8 worker warps with the polynomial. Occupancy 2, 256-row tiles and the Hopper
# picks spill; the window and the CLI do not offer what spills everywhere
# (kernels.knobs.ARCH_RULES).
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

# Head dim 256 on Blackwell: 64x64 at one CTA per SM, the one entry that fits on sm_100/103; on
# sm_120/121 every entry spills at D = 256, and this one is kept so that D = 256 runs at all
# (bench/results/blackwell-offline.md, docs/blackwell.md).
_D256_SPACES: dict[str, tuple[Config, ...]] = {
    "sm_100": (_cfg(64, 64, occupancy=1),),
    "sm_103": (_cfg(64, 64, occupancy=1),),
    "sm_120": (_cfg(64, 64, occupancy=1),),
    "sm_121": (_cfg(64, 64, occupancy=1),),
}

# Head dim 64 on Hopper: half the accumulator of D = 128 leaves registers and shared memory for
# wider key tiles (FlashAttention-4 runs 192x128 there; cuTile tiles are powers of two). On the
# H200 (B4 H32 N 4k, no mask) 128x256 with 8 worker warps won the D = 64 search at 1227 us
# against the D = 128 table's best 1270 us; 256x64, the persistent 128x256 and the polynomial
# on 32 columns lost and are left out (the tuner's cache in bench/results/, docs/experiments.md).
_D64_EXTRA: dict[str, tuple[Config, ...]] = {
    "sm_90": (
        _cfg(128, 256, num_worker_warps=8),
        _cfg(128, 256, num_worker_warps=8, k_latency=3, v_latency=6),
    ),
}

# Head dim 256 on Hopper: the capped table held only 64-row tiles of one CTA an SM (255
# registers, 165 KB of shared memory at 64x128, so their occupancy hint of 2 cannot be met), and
# they ran at 0.79x cuDNN on the H200. 128 rows over 8 worker warps (two consumer warpgroups,
# FlashAttention-3's shape for D = 256) compile at 168 registers without a spill and won the
# D = 256 causal search at 2k and 8k (0.95-0.97x cuDNN); its persistent grid and load latencies
# 3/6 lost by 1-5 % and are left out (the tuner's cache in bench/results/).
_D256_EXTRA: dict[str, tuple[Config, ...]] = {"sm_90": (_cfg(128, 64, num_worker_warps=8),)}

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

    Unknown architectures fall back to the smallest safe table (sm_12x: sm_120's, else
    Ampere's). ``mask=None`` gives the whole table; with a mask, the entries the kernel's rules
    refuse for it are left out (:func:`kernels.knobs.launch_violations`: the persistent grid has
    no window kernel, the causal one takes one key block an iteration). For head_dim 256 the
    Blackwell tables have spaces of their own (``_D256_SPACES``), and elsewhere the tile area
    is capped at 128x64 to keep register use sane, Hopper adding 128-row tiles over 8 worker
    warps (``_D256_EXTRA``); for head_dim 64, Hopper adds wider tiles (``_D64_EXTRA``).
    """
    head_dim = tile_head_dim(head_dim)  # a padded head dim tunes as its tile's width
    table = SEARCH_SPACES.get(arch)
    if table is None:
        table = _SM120 if arch.startswith("sm_12") else _SM80
    if head_dim == 64:
        table = (*table, *_D64_EXTRA.get(arch, ()))
    if mask is not None:
        table = tuple(c for c in table if not launch_violations(c, mask))
    if head_dim >= 256 and arch in _D256_SPACES:
        return [dict(c) for c in _D256_SPACES[arch]]
    configs = [dict(c) for c in table]
    if head_dim >= 256:
        configs = [c for c in configs if math.prod(tile_shape(c)) <= 128 * 64] or [
            _cfg(64, 64, occupancy=1)
        ]
        extra = _D256_EXTRA.get(arch, ())
        if mask is not None:
            extra = tuple(c for c in extra if not launch_violations(c, mask))
        configs += [dict(c) for c in extra if dict(c) not in configs]
    return configs
