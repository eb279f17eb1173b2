"""Labels for the launch an autotuned run actually used (workbench.analysis.tuned)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from workbench.analysis.tuned import launch_summary, tuned_label, tuned_labels, tuned_lines

# What the cuTile backend stores in extra["launch"] (the H200 database's run 1 at N = 1024).
STORED = {
    "tile_m": 64,
    "tile_n": 128,
    "fast_math": True,
    "k_split": True,
    "remap": True,
    "occupancy": 2,
    "num_worker_warps": None,
    "num_ctas": None,
    "k_latency": 3,
    "v_latency": 6,
    "pipeline": False,
    "poly_exp2_cols": 0,
    "store_tma": True,
}
# The sm_90 table's persistent entry as stored.
PERSISTENT = {
    **STORED,
    "tile_m": 128,
    "occupancy": None,
    "num_worker_warps": 8,
    "k_latency": 2,
    "v_latency": 4,
    "poly_exp2_cols": 16,
    "persistent": True,
}


@pytest.mark.parametrize(
    ("launch", "label"),
    [
        (STORED, "64×128 occ 2 lat 3/6"),
        (
            {**STORED, "tile_m": 128, "occupancy": 2, "num_ctas": 2, "poly_exp2_cols": 16},
            "128×128 occ 2 poly 16 cluster 2 lat 3/6",
        ),
        (
            {
                **STORED,
                "tile_m": 128,
                "occupancy": None,
                "num_worker_warps": 8,
                "k_latency": 2,
                "v_latency": 4,
                "poly_exp2_cols": 32,
                "store_tma": False,
            },
            "128×128 8 warps poly 32 stg",
        ),
        (PERSISTENT, "128×128 8 warps poly 16 persistent"),
        ({**PERSISTENT, "k_unroll": 2}, "128×128 8 warps poly 16 persistent k-unroll 2"),
        (
            {
                **STORED,
                "occupancy": None,
                "k_latency": 2,
                "v_latency": 4,
                "persistent": True,
                "k_unroll": 1,
            },
            "64×128 persistent",
        ),
        ({**STORED, "occupancy": None, "k_latency": 2, "v_latency": 4}, "64×128"),
        ({**STORED, "occupancy": None, "k_latency": 2, "v_latency": 8}, "64×128 lat 2/8"),
        (
            {**STORED, "occupancy": None, "pipeline": True, "k_latency": 2, "v_latency": 4},
            "64×128 pipe",
        ),
    ],
)
def test_launch_summary_shows_what_departs_from_the_defaults(
    launch: dict[str, Any], label: str
) -> None:
    assert launch_summary(launch) == label


def test_launch_summary_survives_old_and_odd_records() -> None:
    # An older record: tiles only, no latency, TMA or cluster keys.
    assert launch_summary({"tile_m": 64, "tile_n": 64}) == "64×64"
    # A missing tile is marked, not guessed; unknown keys are ignored.
    assert launch_summary({"tile_n": 128, "future_knob": 7}) == "?×128"
    # Values of the wrong type are skipped rather than shown or raised on.
    odd = {"tile_m": "64", "tile_n": 64.0, "occupancy": "2", "num_ctas": True, "k_latency": None}
    assert launch_summary(odd) == "?×?"
    assert launch_summary({"tile_m": 64, "tile_n": 64, "k_latency": 5}) == "64×64 lat 5/4"
    for nothing in (None, {}, [], "64x64", 3):
        assert launch_summary(nothing) == ""


@dataclass
class Point:
    seq_len: int
    extra: dict[str, Any] | None = field(default_factory=dict)


def test_only_autotuned_points_with_a_launch_record_get_a_label() -> None:
    points = [
        Point(1024, {"launch": STORED, "autotune": {"tried": 8}}),
        Point(2048, {}),  # a peer backend (torch-cudnn) stores no launch
        Point(4096, None),
        Point(8192, {"launch": {**STORED, "tile_m": 128, "num_ctas": 2}}),
    ]
    assert tuned_label(True, points[0].extra) == "64×128 occ 2 lat 3/6"
    # Without autotune the stored launch is the form's config again: nothing to add.
    assert tuned_label(False, points[0].extra) == ""
    assert tuned_labels(False, points) == {}
    labels = tuned_labels(True, points)
    assert labels == {1024: "64×128 occ 2 lat 3/6", 8192: "128×128 occ 2 cluster 2 lat 3/6"}
    assert tuned_lines(labels) == (
        "N=1024: 64×128 occ 2 lat 3/6\nN=8192: 128×128 occ 2 cluster 2 lat 3/6"
    )
    assert tuned_lines({}) == ""
