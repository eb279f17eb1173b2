"""The developer benchmarks' report tables (CPU only: the formatting, not the GPU timing)."""

from __future__ import annotations

import json

from bench.tuner_consistency import to_markdown


def _key(**knobs: object) -> str:
    base = {"k_latency": 2, "v_latency": 4, "num_ctas": None, "num_worker_warps": None,
            "occupancy": 2, "pipeline": False, "poly_exp2_cols": 0, "store_tma": True}  # fmt: skip
    return json.dumps({**base, **knobs}, sort_keys=True)


def test_tuner_table_marks_each_runs_pick_beside_the_benchmark_time() -> None:
    tile = _key(tile_m=64, tile_n=128)
    cluster = _key(tile_m=128, tile_n=128, num_ctas=2, k_latency=3, v_latency=6)
    row = {
        "mask": "causal",
        "n": 2048,
        "picks": [
            {"pick": json.loads(tile), "stage2_us": {tile: 316.4, cluster: 332.5}},
            {"pick": json.loads(cluster), "stage2_us": {cluster: 318.4}},
        ],
        "bench_us": {"cudnn": 309.2, tile: 336.2, cluster: 315.2},
    }
    lines = to_markdown([row]).splitlines()
    assert lines[0] == "### causal N = 2048"
    body = [ln for ln in lines if ln.startswith("| ") and "---" not in ln][1:]
    # Fastest in the benchmark first; each run's pick is marked; a config that was not a
    # finalist in a run shows a dash; the ratio is cuDNN's time over the config's.
    assert body[0] == "| 128x128 occ2 ctas2 lat3/6 | 332.5 | 318.4 **picked** | 315.2 | 0.98 |"
    assert body[1] == "| 64x128 occ2 lat2/4 | 316.4 **picked** | – | 336.2 | 0.92 |"
    assert body[2].startswith("| cuDNN |") and body[2].endswith("| 309.2 | 1.00 |")
