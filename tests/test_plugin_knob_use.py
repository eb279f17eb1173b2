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


def test_a_ladder_steps_a_plugins_own_knob_each_step_its_value(
    script: Callable[..., Any], tmp_path: Path
) -> None:
    """A ladder whose steps change the numpy example's soft cap: each step's run ran (and
    recorded) its own cap over the --plugin-knob one, and a bad value or another backend is
    refused in one line naming the step, nothing written."""
    steps = tmp_path / "softcap-steps.json"
    ladder = {
        "name": "soft caps",
        "steps": [
            {"name": "as given", "changes": {}},
            {"name": "cap 20", "changes": {"softcap": 20}},
            {"name": "cap 50 in 64 rows", "changes": {"softcap": 50.0, "chunk_rows": 64}},
        ],
    }
    steps.write_text(json.dumps(ladder))
    db = tmp_path / "runs.db"
    bad = tmp_path / "bad-steps.json"
    for changes, said in (({"softcap": -3.0}, "cap 20: softcap -3.0"), ({"softcap": "x"}, "x")):
        bad.write_text(json.dumps({"steps": [{"name": "cap 20", "changes": changes}]}))
        refused = script(
            db, "--plugin", NUMPY_EXAMPLE, "ladder", "--backend", "numpy-softcap",
            "--steps", bad, "--seq-lens", "64", *FAST_TIMING_ARGS,
        )  # fmt: skip
        assert refused.returncode == 2, refused.stderr
        (line,) = refused.stderr.strip().splitlines()
        assert said in line and "softcap" in line, line
    other = script(
        db, "--plugin", NUMPY_EXAMPLE, "ladder", "--backend", "reference", "--steps", steps,
        "--seq-lens", "64", *FAST_TIMING_ARGS,
    )  # fmt: skip
    assert other.returncode == 2
    (line,) = other.stderr.strip().splitlines()
    assert "cap 20: softcap" in line and "--backend numpy-softcap" in line, line
    assert not db.exists()
    # The cap for the whole ladder from --plugin-knob; the steps over it. With no sizes given, a
    # plugin that computes on the host gets the reference's (128, 256 at B 1 H 2 D 64), not a
    # GPU's 1k-16k at B 4 H 32 D 128, which took the numpy example 22 h.
    kept = script(
        db, "--plugin", NUMPY_EXAMPLE, "--plugin-knob", "softcap=30", "ladder", "--backend",
        "numpy-softcap", "--steps", steps, *FAST_TIMING_ARGS,
    )  # fmt: skip
    assert kept.returncode == 0, kept.stderr
    from workbench.store import Store

    with Store(db) as store:
        runs = sorted(store.runs(), key=lambda r: r.id)
        assert runs and {r.problem.heads for r in runs} == {2}
        assert {p.seq_len for r in runs for p in store.points(r.id)} == {128, 256}
        ran = [(r.label, r.machine["plugin_knobs"]) for r in runs]
        assert ran == [
            ("as given", {"softcap": 30.0, "chunk_rows": 128}),
            ("cap 20", {"softcap": 20.0, "chunk_rows": 128}),
            ("cap 50 in 64 rows", {"softcap": 50.0, "chunk_rows": 64}),
        ], ran
        (group,) = store.groups()
        assert group["spec"]["configs"][1].endswith("softcap 20.0"), group["spec"]
