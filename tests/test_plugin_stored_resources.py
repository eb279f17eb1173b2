"""`resources --runs` on a cuTile plugin's stored GPU run (issue 55 item 2): each point gains what
the plugin's kernel compiled to on the run's GPU with that point's own knobs, from the file the
run names; a run whose file was edited since is skipped with a line saying so, nothing stored."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.test_plugin_resources import CUTILE, need_tools
from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.store import Store

pytestmark = pytest.mark.usefixtures("no_plugins_left")


def _stored_gpu_run(store: Store, rng: np.random.Generator, plugin: Path, tiles: list[int]) -> int:
    """A run of cutile-naive as an H100 stored it before points kept their resources: one point
    per tile its tuner chose."""
    from workbench.backends.reference import ReferenceBackend
    from workbench.measure.timing import TimingSettings

    config = KernelConfig(mask="causal", autotune=True)
    lengths = tuple(256 * (i + 1) for i in range(len(tiles)))
    spec = SweepSpec(Problem(batch=1, heads=2, head_dim=64), lengths, config, "cutile-naive", "")
    machine = {
        "gpu_name": "NVIDIA H100", "compute_capability": "9.0", "plugin_path": str(plugin),
        "plugin_sha256": hashlib.sha256(plugin.read_bytes()).hexdigest(),
        "plugin_knobs": {"tile": 64}, "plugin_tunable": ["tile"],
    }  # fmt: skip
    run_id = store.create_run(spec, machine)
    timing = TimingSettings(warmup=0, min_samples=1, max_samples=1, min_time_s=0.0)
    for problem, n, tile in zip(spec.problems(), lengths, tiles, strict=True):
        result = ReferenceBackend().measure_point(problem, config, timing, rng)
        result.extra["plugin_knobs"] = {"tile": tile}
        store.add_point(run_id, result, seq_len=n)
    store.finish_run(run_id, "complete")
    return run_id


def test_a_plugins_stored_points_gain_what_their_own_knobs_compiled_to(
    run_cli: Any, db_path: Path, rng: np.random.Generator, tmp_path: Path
) -> None:
    need_tools()
    plugin = tmp_path / "my_naive.py"
    plugin.write_text(CUTILE.read_text())
    with Store(db_path) as store:
        run_id = _stored_gpu_run(store, rng, plugin, [64, 32])
    filled = run_cli("resources", "--runs", run_id, "--db", db_path)
    assert filled.code == 0, filled.err
    assert "stored the compiled resources of 2 point(s)" in filled.out
    shown = json.loads(run_cli("show", run_id, "--db", db_path, "--json").out)
    found = [p["extra"]["resources"] for p in shown["points"]]
    assert all(r["arch"] == "sm_90" and r["error"] == "" and r["registers"] > 0 for r in found)
    assert found[1]["shared_bytes"] < found[0]["shared_bytes"]  # tile 32 against 64
    assert "compiled" in run_cli("show", run_id, "--db", db_path).out

    # Edited since: skipped, saying which file and why; nothing stored.
    with Store(db_path) as store:
        later = _stored_gpu_run(store, rng, plugin, [64])
    plugin.write_text(plugin.read_text() + "\n# edited\n")
    skipped = run_cli("resources", "--runs", later, "--db", db_path)
    assert skipped.code == 0, skipped.err
    assert "stored the compiled resources of 0 point(s)" in skipped.out
    assert f"run {later} (cutile-naive): skipped, {plugin} changed since the run" in skipped.err
    (point,) = json.loads(run_cli("show", later, "--db", db_path, "--json").out)["points"]
    assert "resources" not in point["extra"]
