"""A ladder read the same way everywhere (issue 39, items 6 and 7): the CLI's ladder table and
`report --group` mark a ratio within its noise with Compare's rule, and a ladder is reported
as steps, × previous and × baseline, not as peers timed together."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from workbench.backends.base import PointResult, problem_flops, schedule_for
from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.jobs.ladder_steps import format_ladder_table, ladder_table
from workbench.measure.accuracy import AccuracyReport
from workbench.measure.timing import TimingStats
from workbench.store import Store

STEPS = ("baseline", "bigger tiles", "fast math")


def seed_ladder(db: Path, samples: dict[str, tuple[float, ...]]) -> int:
    """A stored ladder of three steps at N = 64, each with the given raw samples (ms)."""
    problem = Problem(batch=1, heads=2, head_dim=32, q_len=64, k_len=64)
    config = KernelConfig(tile_m=32, tile_n=32, mask="causal")
    with Store(db) as store:
        group = store.create_group("ladder", "noisy", {"steps": list(STEPS)})
        for step in STEPS:
            spec = SweepSpec(problem, (64,), config, label=step)
            run_id = store.create_run(spec, {"hostname": "here"}, group_id=group, step=step)
            store.add_point(
                run_id,
                PointResult(
                    problem=problem,
                    timing=TimingStats(samples[step]),
                    compile_s=0.0,
                    accuracy=AccuracyReport(1e-4, 1e-4, 64, 1e-2),
                    block_map=np.asarray(schedule_for(problem, config).block_map, dtype=np.int8),
                    flops=problem_flops(problem, config),
                ),
            )
            store.finish_run(run_id, "complete")
    return group


# Three samples each: the second step's ×0.80 is within its 3-sample noise; the third's
# ×2.0 over it is far beyond.
NOISY = {
    "baseline": (0.8, 1.0, 1.3),
    "bigger tiles": (0.9, 1.25, 1.5),
    "fast math": (0.62, 0.625, 0.63),
}


def test_a_ladder_ratio_within_its_noise_is_marked_as_compare_marks_it(db_path: Path) -> None:
    group = seed_ladder(db_path, NOISY)
    with Store(db_path) as store:
        table = ladder_table(store, group)
    second, third = (step["cells"]["64"] for step in table["steps"][1:])
    assert second["vs_previous"] == 0.8 and not second["vs_previous_significant"]
    assert second["vs_previous_noise_pct"] > 20
    assert third["vs_previous"] == 2.0 and third["vs_previous_significant"]
    rows = format_ladder_table(table)
    assert rows[2][1].endswith(" TFLOP/s 0.80× ~ prev 0.80× ~ base"), rows
    assert rows[3][1].endswith("2.00× prev 1.60× base"), rows


def test_report_of_a_ladder_reports_steps_with_noise(run_cli: Any, db_path: Path) -> None:
    group = seed_ladder(db_path, NOISY)
    text = run_cli("report", "--db", db_path, "--group", group)
    assert text.code == 0, text.err
    out = text.out
    assert f"ladder {group} noisy: reference on here" in out
    assert "each step one change on the previous" in out
    for step in STEPS:
        assert step in out
    assert "0.80× ~ prev" in out and "2.00× prev" in out
    assert "~ within the noise: twice the standard error" in out
    # Not the peer report's words: a ladder has no peers and was not timed interleaved.
    assert "over each peer" not in out and "interleaved" not in out

    markdown = run_cli("report", "--db", db_path, "--group", group, "--markdown").out
    assert "| step | N = 64 |" in markdown and "| 2. bigger tiles |" in markdown
    assert "0.80× ~ prev" in markdown and "interleaved" not in markdown

    data = json.loads(run_cli("report", "--db", db_path, "--group", group, "--json").out)
    assert data["kind"] == "ladder"
    cells = [s["cells"]["64"] for s in data["ladders"][0]["steps"]]
    assert [c["vs_previous_significant"] for c in cells] == [False, False, True]


def test_report_refuses_a_ladder_mixed_with_a_peer_group(run_cli: Any, db_path: Path) -> None:
    group = seed_ladder(db_path, NOISY)
    with Store(db_path) as store:
        other = store.create_group("group", "peers", {})
        spec = SweepSpec(Problem(heads=1, head_dim=32), (64,), KernelConfig(32, 32))
        store.finish_run(store.create_run(spec, {}, group_id=other), "complete")
    result = run_cli("report", "--db", db_path, "--group", group, "--group", other)
    assert result.code == 2
    assert result.err.strip() == (
        f"error: report ladders on their own (ladder groups: {group}; other groups: {other})"
    )


def test_the_cli_ladder_prints_the_noise_rule_under_its_table(
    run_cli: Any, db_path: Path, fast_args: list[str]
) -> None:
    result = run_cli("ladder", "--db", db_path, *fast_args, "--seq-lens", "64")
    assert result.code == 0, result.err
    assert "~ within the noise: twice the standard error" in result.out
    with Store(db_path) as store:
        group = store.groups("ladder")[0]["id"]
        table = ladder_table(store, group)
    for step, line in zip(table["steps"][1:], result.out.splitlines()[2:], strict=False):
        cell = step["cells"]["64"]
        mark = "" if cell["vs_previous_significant"] else " ~"
        assert f"{cell['vs_previous']:.2f}×{mark} prev" in line, line
