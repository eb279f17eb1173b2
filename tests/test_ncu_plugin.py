"""Nsight Compute on a plugin's point (issue 55 item 2): the child under ncu loads the run's own
plugin file with the knobs that point ran (its tuner's choice in an autotuned run, no tuning
again), and a file edited since the run is refused in one line, nothing stored."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.test_ncu import _digest, _fake_ncu
from workbench.backends.plugin_env import ENV_KNOBS, ENV_PLUGINS
from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.store import Store

PLUGIN = """
from workbench.backends import Knob, declare

BACKENDS = (declare("gpu-attn", "a GPU plugin", lambda q, k, v, **kw: q, inputs="cuda", knobs=(
    Knob("tile", int, 64, (32, 64), "--plugin-knob tile", "Tile", "rows", tunable=True),)),)
"""


def _plugin_run(store: Store, rng: np.random.Generator, plugin: Path) -> int:
    """An autotuned run of the GPU plugin as a GPU machine stored it: the run's knobs are the
    defaults, the point ran the tile its tuner chose (32)."""
    from workbench.backends.reference import ReferenceBackend
    from workbench.measure.timing import TimingSettings

    config = KernelConfig(mask="causal", autotune=True)
    spec = SweepSpec(Problem(batch=1, heads=1, head_dim=64), (128,), config, "gpu-attn", "")
    machine = {
        "gpu_name": "NVIDIA H100", "plugin_path": str(plugin),
        "plugin_sha256": hashlib.sha256(plugin.read_bytes()).hexdigest(),
        "plugin_knobs": {"tile": 64}, "plugin_tunable": ["tile"],
    }  # fmt: skip
    run_id = store.create_run(spec, machine)
    timing = TimingSettings(warmup=0, min_samples=1, max_samples=1, min_time_s=0.0)
    result = ReferenceBackend().measure_point(spec.problems()[0], config, timing, rng)
    result.extra.update(plugin_knobs={"tile": 32}, plugin_tuning={"chosen": {"tile": 32}})
    store.add_point(run_id, result, seq_len=128)
    store.finish_run(run_id, "complete")
    return run_id


def _recording_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in ncu, behind a wrapper that writes down the plugin environment and the
    spec of each profiling call (the one with --export) before handing over."""
    tool = _fake_ncu(tmp_path, monkeypatch)
    record = tmp_path / "seen.txt"
    wrapper = tmp_path / "wrap" / "ncu"
    wrapper.parent.mkdir()
    wrapper.write_text(f"""#!/bin/sh
case "$*" in *--export*)
  echo "plugins=${ENV_PLUGINS}" >> "{record}"
  echo "knobs=${ENV_KNOBS}" >> "{record}"
  for last; do :; done
  echo "spec=$last" >> "{record}";;
esac
exec "{tool}" "$@"
""")
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{tool.parent}:/usr/bin:/bin")
    return record


def test_a_plugins_point_is_profiled_from_its_file_with_the_knobs_it_ran(
    run_cli: Any, db_path: Path, rng: np.random.Generator, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    plugin = tmp_path / "gpu_attn.py"
    plugin.write_text(PLUGIN)
    with Store(db_path) as store:
        run_id = _plugin_run(store, rng, plugin)
    record = _recording_ncu(tmp_path, monkeypatch)
    monkeypatch.setenv(ENV_KNOBS, json.dumps({"tile": 64}))  # the shell's, not the point's

    result = run_cli("profile", run_id, "--seq-len", "128", "--db", db_path)
    assert result.code == 0, result.err
    seen = dict(line.split("=", 1) for line in record.read_text().splitlines())
    assert seen["plugins"] == str(plugin)
    assert json.loads(seen["knobs"]) == {"tile": 32}  # the tuner's choice at that point
    spec = json.loads(seen["spec"])
    assert spec["backend"] == "gpu-attn" and spec["config"]["autotune"] is False
    with Store(db_path) as store:
        assert "ncu" in store.points(run_id)[0].extra

    # The file edited since: the profile would be of another kernel, so it is refused.
    plugin.write_text(PLUGIN.replace("(32, 64)", "(32, 64, 128)"))
    before = _digest(db_path)
    edited = run_cli("profile", run_id, "--seq-len", "128", "--db", db_path)
    assert edited.code == 2, edited.err
    (line,) = edited.err_lines
    assert f"{plugin} changed since run {run_id} ran it" in line, line
    assert _digest(db_path) == before
    plugin.unlink()
    gone = run_cli("profile", run_id, "--seq-len", "128", "--db", db_path)
    assert gone.code == 2 and f"plugin file {plugin} cannot be read" in gone.err, gone.err
