"""Load: a 2,000-point sweep in bounded memory, and paging through 5,000 stored runs quickly."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.store import Store

MEMORY_BOUND_MB = 100  # peak RSS growth allowed over a 2,000-point sweep
PAGE_BOUND_S = 0.1  # one page of the run history, with 5,000 runs stored

SWEEP_2000 = """
import json, resource, sys
from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.run.events import PointFinished, RunFinished
from workbench.jobs import run_sweep
from workbench.store import Store
from workbench.measure.timing import TimingSettings

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20

def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

n = int(sys.argv[2])
# A window of one key keeps each point cheap, so the test is about the runner and the store.
config = KernelConfig(tile_m=64, tile_n=64, mask="window", window=1)
problem = Problem(batch=1, heads=1, head_dim=32)
quick = TimingSettings(warmup=0, min_samples=1, max_samples=1, min_time_s=0.0)
store = Store(sys.argv[1])
# Warm up: imports, first allocations and the SQLite cache are not what we measure.
warm = SweepSpec(problem, tuple(range(1, 65)), config, label="warm-up")
for _ in run_sweep(warm, store, timing=quick):
    pass
base_rss, base_peak = rss_mb(), peak_mb()
spec = SweepSpec(problem, tuple(range(1, n + 1)), config, label="load")
points, status, highest = 0, None, base_rss
for event in run_sweep(spec, store, timing=quick):
    if isinstance(event, PointFinished):
        points += 1
        if points % 100 == 0:
            highest = max(highest, rss_mb())
    elif isinstance(event, RunFinished):
        status = event.status
        run_id = event.run_id
stored = len(store.points(run_id))
print(json.dumps({
    "points": points, "stored": stored, "status": status,
    "rss_growth_mb": highest - base_rss, "peak_growth_mb": peak_mb() - base_peak,
}))
"""


@pytest.mark.slow
def test_a_2000_point_sweep_stays_within_a_memory_bound(
    tmp_path: Path, python_facts: Callable[..., dict[str, Any]]
) -> None:
    """A leak of anything per point (inputs, outputs, samples, events) would show up here:
    one N=2000 point's q, k and v alone are 0.75 MB."""
    facts = python_facts(SWEEP_2000, tmp_path / "load.db", 2000, timeout=590)
    assert facts["status"] == "complete"
    assert facts["points"] == facts["stored"] == 2000
    assert facts["rss_growth_mb"] < MEMORY_BOUND_MB, facts
    assert facts["peak_growth_mb"] < MEMORY_BOUND_MB, facts
    print(f"2,000 points: RSS grew {facts['rss_growth_mb']:.1f} MB (bound {MEMORY_BOUND_MB} MB)")


def test_paging_through_5000_runs_is_fast(db_path: Path) -> None:
    spec = SweepSpec(Problem(heads=1, head_dim=32), (16, 32), KernelConfig(), label="template")
    with Store(db_path) as store:
        template_id = store.create_run(spec, {"hostname": "h", "gpu_name": "g"})
        template = dict(store.db["runs"].get(template_id))
        rows = []
        for i in range(2, 5001):
            row = dict(template, id=i, label=f"run {i:05d}", status="complete")
            if i % 7 == 0:
                row["config"] = json.dumps(KernelConfig(mask="causal").to_dict())
            rows.append(row)
        with store.db.conn:
            store.db["runs"].insert_all(rows, batch_size=1000)

    with Store(db_path) as store:
        assert store.count_runs() == 5000

        def timed(call: Callable[[], Any]) -> tuple[float, Any]:
            best, value = float("inf"), None
            for _ in range(3):
                started = time.perf_counter()
                value = call()
                best = min(best, time.perf_counter() - started)
            return best, value

        for offset in (0, 2500, 4950):
            took, page = timed(lambda offset=offset: store.runs(limit=50, offset=offset))
            assert took < PAGE_BOUND_S, (offset, took)
            assert [r.id for r in page] == list(range(5000 - offset, 5000 - offset - 50, -1))
        took, found = timed(lambda: store.runs(search="run 04321", limit=50))
        assert took < PAGE_BOUND_S and [r.id for r in found] == [4321]
        took, causal = timed(lambda: store.runs(search="causal", limit=50, offset=100))
        assert took < PAGE_BOUND_S and len(causal) == 50
        assert all(r.config.mask == "causal" for r in causal)
        took, count = timed(lambda: store.count_runs(search="causal"))
        assert took < PAGE_BOUND_S and count == 5000 // 7
