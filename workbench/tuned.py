"""What an autotuned run actually launched, as short labels for the GUI and the CLI.

With autotune on, the form's tiles and hints are only nominal: the cuTile backend stores the
launch the tuner chose in each point's ``extra["launch"]``. These labels read that record in the
style of :meth:`workbench.config.KernelConfig.summary`. Stored data outlives code versions, so a
missing or odd key is skipped (or shown as ``?`` for a tile) rather than raised.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kernels.knobs import DEFAULT_LOAD_LATENCIES
from workbench.config import hint_words


def _whole(value: Any) -> int | None:
    """``value`` if it is a whole number (bools are not), else None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _tile(value: Any) -> str:
    number = _whole(value)
    return str(number) if number is not None else "?"


def launch_summary(launch: Any) -> str:
    """A stored launch record as e.g. ``128×128 occ 2 cluster 2 lat 3/6 poly 16``.

    Tiles always; occupancy, worker warps, cluster size, pipelining and poly exp2 only when set;
    latencies only when not the defaults 2/4; ``stg`` when the output skips the TMA store;
    ``persistent`` for the persistent grid, ``k-unroll 2`` when it takes key blocks in pairs.
    "" when ``launch`` is not a mapping or is empty (nothing to say).
    """
    if not isinstance(launch, Mapping) or not launch:
        return ""
    k_lat = _whole(launch.get("k_latency"))
    v_lat = _whole(launch.get("v_latency"))
    latencies = (
        k_lat if k_lat is not None else DEFAULT_LOAD_LATENCIES[0],
        v_lat if v_lat is not None else DEFAULT_LOAD_LATENCIES[1],
    )
    # Only departures from the kernel's defaults are shown.
    loads = [f"lat {latencies[0]}/{latencies[1]}"] if latencies != DEFAULT_LOAD_LATENCIES else []
    if launch.get("pipeline") is True:
        loads.append("pipe")
    parts = [f"{_tile(launch.get('tile_m'))}×{_tile(launch.get('tile_n'))}"]
    parts += hint_words(
        _whole(launch.get("occupancy")),
        _whole(launch.get("num_worker_warps")),
        _whole(launch.get("num_ctas")),
        _whole(launch.get("poly_exp2_cols")),
        before_poly=loads,
    )
    # Only an explicit False: older records have no key and always stored through TMA.
    if launch.get("store_tma") is False:
        parts.append("stg")
    if launch.get("persistent") is True:
        parts.append("persistent")
    # Older records have no key: one key block an iteration.
    k_unroll = _whole(launch.get("k_unroll"))
    if k_unroll is not None and k_unroll > 1:
        parts.append(f"k-unroll {k_unroll}")
    return " ".join(parts)


def tuned_label(autotune: bool, extra: Any) -> str:
    """The tuned launch of one point, or "" when its run was not autotuned or has no record.

    A run without autotune stores its launch too, but that is just the form's config again.
    """
    if not autotune or not isinstance(extra, Mapping):
        return ""
    return launch_summary(extra.get("launch"))


def tuned_labels(autotune: bool, points: Iterable[Any]) -> dict[int, str]:
    """Sequence length → tuned label, for the points (``seq_len``, ``extra``) that have one."""
    labels: dict[int, str] = {}
    for point in points:
        label = tuned_label(autotune, getattr(point, "extra", None))
        if label:
            labels[point.seq_len] = label
    return labels


def tuned_lines(labels: Mapping[int, str]) -> str:
    """``N=1024: 64×128 occ 2 lat 3/6``, one line per sequence length, shortest first."""
    return "\n".join(f"N={n}: {labels[n]}" for n in sorted(labels))
