"""Our own kernel and a plugin through the same declaration (issue 55, item 1): which of the
config's knobs a backend takes comes from its declaration, never a list of names, so a plugin's
run shows its own knobs and none of the cuTile kernel's, in `show`, `runs` and the CSV, even
read back by a process that never loaded the plugin."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import FAST_TIMING_ARGS

NUMPY_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "numpy_softcap.py"
CUTILE_WORDS = ("32×32", "64×64", "kernel knobs", "fast-math", "occ")


def test_a_plugin_runs_show_lists_its_own_knobs_and_none_of_cutiles(
    script: Callable[..., Any], tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    swept = script(
        db, "--plugin", NUMPY_EXAMPLE, "sweep", "--backend", "numpy-softcap", "--heads", "2",
        "--head-dim", "32", "--seq-lens", "64", "--tile-m", "32", "--tile-n", "32",
        "--mask", "causal", "--plugin-knob", "softcap=20", *FAST_TIMING_ARGS, "--json",
    )  # fmt: skip
    assert swept.returncode == 0, swept.stderr
    ((plugin_run,),) = [json.loads(swept.stdout)["runs"]]
    reference = script(
        db, "sweep", "--heads", "2", "--head-dim", "32", "--seq-lens", "64", "--tile-m", "32",
        "--tile-n", "32", "--mask", "causal", *FAST_TIMING_ARGS, "--json",
    )  # fmt: skip
    assert reference.returncode == 0, reference.stderr
    ((reference_run,),) = [json.loads(reference.stdout)["runs"]]

    # Read back without --plugin: the run's own record says what it ran.
    shown = script(db, "show", str(plugin_run["id"]))
    assert shown.returncode == 0, shown.stderr
    (config_line,) = [line for line in shown.stdout.splitlines() if "config " in line]
    assert config_line.split() == ["config", "causal", "·", "softcap", "20.0,", "chunk_rows", "128"]
    assert not any(word in config_line for word in CUTILE_WORDS), config_line

    # The reference walks the kernel's schedule: its declaration says it takes the tiles.
    shown = script(db, "show", str(reference_run["id"]))
    (config_line,) = [line for line in shown.stdout.splitlines() if "config " in line]
    assert "32×32 causal" in config_line, config_line

    exported = script(db, "export", "--csv", "-")
    assert exported.returncode == 0, exported.stderr
    rows = {r["backend"]: r for r in csv.DictReader(io.StringIO(exported.stdout))}
    assert rows["numpy-softcap"]["config_tile_m"] == "" and rows["reference"]["config_tile_m"]
    assert rows["numpy-softcap"]["config_mask"] == "causal"
