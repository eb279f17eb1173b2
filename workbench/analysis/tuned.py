"""What an autotuned run actually launched, as short labels for the GUI and the CLI.

Where the tuner picks them, the form's tiles and hints are only nominal: the cuTile backend stores
the launch the tuner chose in each point's ``extra["launch"]``. These labels read that record in the
registry's words (:func:`kernels.knobs.words`), as :meth:`workbench.config.KernelConfig.summary`
does. Stored data outlives code versions, so a missing or odd key is skipped (or shown as ``?`` for
a tile) rather than raised.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kernels import knobs, schedule
from workbench.config import own_knob_words


def _clean(name: str, value: Any) -> Any:
    """``value`` if it is one a knob of this kind can have (a whole number, not a bool, for a
    number; a bool for a switch), else the knob's default: stored records outlive versions."""
    knob = knobs.KNOBS[name]
    if knob.kind is bool:
        return value if isinstance(value, bool) else knob.default
    if isinstance(value, bool) or not isinstance(value, int):
        return knob.default
    return value


def launch_summary(launch: Any) -> str:
    """A stored launch record as e.g. ``128×128 occ 2 poly 16 cluster 2 lat 3/6``: the tuned
    knobs (:data:`kernels.knobs.TUNABLE`) in the registry's words, the tiles always and the
    rest where they depart from the kernel's defaults. A missing or odd tile shows as ``?``;
    a missing or odd other value as its default (older records lack the newer knobs).
    "" when ``launch`` is not a mapping or is empty (nothing to say).
    """
    if not isinstance(launch, Mapping) or not launch:
        return ""
    values = {name: _clean(name, launch.get(name)) for name in knobs.TUNABLE}
    for tile in schedule.TILE_KNOBS:
        raw = launch.get(tile)
        if isinstance(raw, bool) or not isinstance(raw, int):
            values[tile] = "?"
    return " ".join(knobs.words(values, knobs.TUNABLE))


def tuned_label(tuned: bool, extra: Any) -> str:
    """The tuned launch of one point, or "" when its run was not ``tuned`` (its config's
    :attr:`~workbench.config.KernelConfig.tuned`) or has no record.

    A run the tuner did not set stores its launch too, but that is just the form's config again.
    A plugin's point (``plugin_tuning``): the values its tuner chose for the plugin's own knobs.
    """
    if not tuned or not isinstance(extra, Mapping):
        return ""
    plugin = extra.get("plugin_tuning")
    if isinstance(plugin, Mapping):  # a plugin's tuner: the own knobs it chose
        chosen = plugin.get("chosen")
        return own_knob_words(chosen) if isinstance(chosen, Mapping) else ""
    return launch_summary(extra.get("launch"))


def tuned_labels(tuned: bool, points: Iterable[Any]) -> dict[int, str]:
    """Sequence length → tuned label, for the points (``seq_len``, ``extra``) that have one."""
    labels: dict[int, str] = {}
    for point in points:
        label = tuned_label(tuned, getattr(point, "extra", None))
        if label:
            labels[point.seq_len] = label
    return labels


def tuned_lines(labels: Mapping[int, str]) -> str:
    """``N=1024: 64×128 occ 2 lat 3/6``, one line per sequence length, shortest first."""
    return "\n".join(f"N={n}: {labels[n]}" for n in sorted(labels))
