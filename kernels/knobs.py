"""Launch-knob values that the kernel and the workbench's config both check.

Kept apart from ``cutile_fmha`` (which needs cuda.tile) so that the workbench core, which runs
without a GPU, validates against the same values the kernel's ``LaunchConfig`` does.
"""

from __future__ import annotations

# The cluster sizes cuTile's num_ctas hint takes.
CLUSTER_CTAS: tuple[int, ...] = (1, 2, 4, 8, 16)
# Key blocks per iteration of the persistent grid's key loop (``k_unroll``).
K_UNROLLS: tuple[int, ...] = (1, 2)
# The K and V load-latency hints a launch uses unless told otherwise.
DEFAULT_LOAD_LATENCIES: tuple[int, int] = (2, 4)


def poly_exp2_choices(tile_n: int) -> tuple[int, ...]:
    """Allowed ``poly_exp2_cols`` for a key tile: 0 (off) or tile_n/16, /8, /4, /2.

    The polynomial takes a block's last C score columns and the MUFU part to their left is
    joined on in blocks of doubling width, so C is tile_n over a power of two; /16 is the
    smallest share offered.
    """
    return (0, *(tile_n // d for d in (16, 8, 4, 2) if tile_n // d >= 1))
