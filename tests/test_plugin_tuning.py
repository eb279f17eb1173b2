"""``--autotune`` on a plugin (issue 55 item 2): the tuner searches the knobs the plugin declares
tunable, the ones the user did not fix, as its rules allow under the mask; each point runs the
fastest and says so in ``show``, ``show --json`` and the CSV; a space it cannot search is
refused in one line naming --autotune, nothing written."""

from __future__ import annotations

import csv
import io
import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAST_TIMING_ARGS

pytestmark = pytest.mark.usefixtures("no_plugins_left")

SMALL = ["--heads", "2", "--head-dim", "32", *FAST_TIMING_ARGS]

# A plugin whose ``rows`` knob only changes its speed: 32 is fast, anything else sleeps 20 ms a
# launch, so a tuner that times the candidates must land on 32, never the default 64. ``rows``
# 16 is refused under the causal mask by a rule; ``scale`` is not tunable.
PLUGIN = """
import time

import numpy as np

from workbench.backends import Knob, Rule, declare


def attention(q, k, v, *, problem, config, knobs):
    if knobs["rows"] != 32:
        time.sleep(0.02)
    scores = (q @ k.swapaxes(-1, -2)) / np.sqrt(q.shape[-1])
    if config.mask == "causal":
        n = scores.shape[-1]
        scores = np.where(np.tril(np.ones((n, n), dtype=bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ v


BACKENDS = (
    declare(
        "tunable",
        "a plugin with a tunable knob",
        attention,
        knobs=(
            Knob(
                "rows", int, {default}, {rows}, "--plugin-knob rows", "Rows", "rows",
                tunable={tunable},
            ),
            Knob("scale", int, 1, (1, 2), "--plugin-knob scale", "Scale", "not tuned"),
        ),
        rules=(
            Rule(
                "rows", ("mask",), lambda values, mask: mask == "causal" and values["rows"] == 16,
                lambda values, mask: "16 rows do not take the causal mask", "rows 16 causal",
            ),
        ),
    ),
)
"""


def plugin_file(tmp_path: Path, rows: tuple[int, ...] = (16, 32, 64), tunable: bool = True) -> Path:
    path = tmp_path / "tunable.py"
    default = 64 if 64 in rows else rows[0]
    path.write_text(textwrap.dedent(PLUGIN.format(rows=rows, default=default, tunable=tunable)))
    return path


def test_the_tuner_runs_the_fastest_of_the_declared_values_and_every_view_says_so(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    path, db = plugin_file(tmp_path), tmp_path / "runs.db"
    swept = run_cli(
        "--plugin", path, "sweep", "--db", db, "--backend", "tunable", *SMALL,
        "--seq-lens", "64,128", "--mask", "causal", "--plugin-knob", "scale=2", "--autotune",
    )  # fmt: skip
    assert swept.code == 0, swept.err

    shown = run_cli("show", "1", "--db", db)
    (config_line,) = [line for line in shown.out.splitlines() if "config " in line]
    assert config_line.split() == ["config", "causal", "·", "rows", "tuned,", "scale", "2"]
    lines = shown.out.splitlines()
    (compile_line,) = [line for line in lines if line.startswith("  compile ")]
    assert ", autotune " in compile_line, compile_line  # the tuning's share of the compile
    header = next(line for line in lines if line.startswith("N "))
    assert header.split()[-1] == "tuned"
    for n in ("64", "128"):
        row = next(line for line in lines if line.split()[:1] == [n])
        assert row.endswith("rows 32"), row

    points = json.loads(run_cli("show", "1", "--db", db, "--json").out)["points"]
    for point in points:
        record = point["extra"]["plugin_tuning"]
        assert record["chosen"] == {"rows": 32}
        # Under the causal mask the rule leaves 32 and 64; the user's scale is not searched.
        assert sorted(tuned["rows"] for tuned, _ in record["times_ms"]) == [32, 64]
        assert point["extra"]["plugin_knobs"] == {"rows": 32, "scale": 2}

    exported = run_cli("export", "--db", db, "--csv", "-")
    rows = list(csv.DictReader(io.StringIO(exported.out)))
    assert [json.loads(r["plugin_knobs"]) for r in rows] == [{"rows": 32, "scale": 2}] * 2


def test_without_autotune_the_plugin_runs_its_given_values_and_says_nothing_of_tuning(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    path, db = plugin_file(tmp_path), tmp_path / "runs.db"
    swept = run_cli(
        "--plugin", path, "sweep", "--db", db, "--backend", "tunable", *SMALL, "--seq-lens", "64"
    )  # fmt: skip
    assert swept.code == 0, swept.err
    (point,) = json.loads(run_cli("show", "1", "--db", db, "--json").out)["points"]
    assert point["extra"]["plugin_knobs"] == {"rows": 64, "scale": 1}
    assert "plugin_tuning" not in point["extra"]
    assert "tuned" not in run_cli("show", "1", "--db", db).out


@pytest.mark.parametrize(
    ("rows", "tunable", "extra", "said"),
    [
        ((16, 32, 64), False, [], "tunable has no tunable knob left to tune"),
        ((16, 32, 64), True, ["--plugin-knob", "rows=32"], "(rows fixed by --plugin-knob)"),
        (tuple(range(8, 8 + 65)), True, [], "make 65 combinations, more than the 64"),
        ((16,), True, [], "passes its rules under the causal mask"),
    ],
    ids=["none-declared", "all-fixed", "too-many", "none-allowed"],
)
def test_a_space_the_tuner_cannot_search_is_refused_in_one_line_and_nothing_is_written(
    run_cli: Callable[..., Any],
    tmp_path: Path,
    rows: tuple[int, ...],
    tunable: bool,
    extra: list[str],
    said: str,
) -> None:
    path, db = plugin_file(tmp_path, rows, tunable), tmp_path / "runs.db"
    refused = run_cli(
        "--plugin", path, "sweep", "--db", db, "--backend", "tunable", *SMALL,
        "--seq-lens", "64", "--mask", "causal", "--autotune", *extra,
    )  # fmt: skip
    assert refused.code == 2, refused.err
    (line,) = refused.err_lines
    assert line.startswith("error: --autotune: "), line
    assert said in line, line
    assert not db.exists()


def test_a_choice_is_kept_per_problem_and_file_version() -> None:
    """The tuner times the space once per problem, mask and file version: a second point of
    the same problem is answered from what it kept, another length or version is timed."""
    from kernels.knobs import Knob
    from workbench.backends.declaration import BackendDeclaration
    from workbench.backends.plugin_tuning import tune
    from workbench.config import KernelConfig, Problem

    knob = Knob("rows", int, 64, (32, 64), "--plugin-knob rows", "Rows", "rows", tunable=True)
    declaration = BackendDeclaration("kept", "kept", lambda: None, knobs=(knob,))  # type: ignore[arg-type,return-value]
    timed: list[dict[str, Any]] = []

    def time_launch(values: dict[str, Any]) -> float:
        timed.append(values)
        return 1.0 if values["rows"] == 64 else 2.0

    config = KernelConfig(autotune=True)
    first, record = tune(declaration, {}, "sha-1", Problem(q_len=64, k_len=64), config, time_launch)
    assert first == {"rows": 64} and record["cached"] is False and len(timed) == 2
    again, record = tune(declaration, {}, "sha-1", Problem(q_len=64, k_len=64), config, time_launch)
    assert again == first and record["cached"] is True and len(timed) == 2
    tune(declaration, {}, "sha-2", Problem(q_len=64, k_len=64), config, time_launch)
    tune(declaration, {}, "sha-2", Problem(q_len=128, k_len=128), config, time_launch)
    assert len(timed) == 6


def test_a_later_sweep_of_the_same_file_reads_the_choice_an_edit_tunes_again(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    """Each CLI sweep starts its own engine child: the second finds the first's choice on disk
    (the test's cache file) and times nothing; an edit of the file is a new version."""
    path, db = plugin_file(tmp_path), tmp_path / "runs.db"
    argv = ("--plugin", path, "sweep", "--db", db, "--backend", "tunable", *SMALL,
            "--seq-lens", "64", "--mask", "none", "--autotune")  # fmt: skip

    def record(run_id: int) -> dict[str, Any]:
        (point,) = json.loads(run_cli("show", run_id, "--db", db, "--json").out)["points"]
        return dict(point["extra"]["plugin_tuning"])

    def sweep() -> None:
        # As each `fmha-workbench sweep` process starts its own engine child: here the worker's
        # shared child would keep its memory (and an earlier test's environment).
        from workbench.backends import isolated

        if isolated._engine is not None:
            isolated._engine.close()
            isolated._engine = None
        assert run_cli(*argv).code == 0

    sweep()
    sweep()
    first, second = record(1), record(2)
    assert first["cached"] is False and first["tried"] == 3 and first["chosen"] == {"rows": 32}
    assert second["cached"] is True and second["chosen"] == first["chosen"]
    assert (tmp_path / "plugin-tuning.json").exists()
    path.write_text(path.read_text() + "\n# edited\n")
    sweep()
    assert record(3)["cached"] is False
