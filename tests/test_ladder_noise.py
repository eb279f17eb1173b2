"""A ladder step's verdict comes from its noise (issue 52): reference-backend points are timed in
enough turns to measure it, and a stray slow sample cannot make a step a loss."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np

from workbench.analysis.compare import RUN_TO_RUN_PCT, compare_cell
from workbench.config import Problem
from workbench.jobs import run_ladder
from workbench.jobs.ladder_steps import ladder_table, load_ladder, speedup_verdict
from workbench.measure.noise import MIN_TURNS, median_noise_pct
from workbench.store import Store


def _point(samples: list[float], turns: int | None) -> SimpleNamespace:
    """A point as Compare reads it: its median, p20-p80 and, with ``turns``, its noise."""
    ordered = np.asarray(samples)
    extra = {}
    if turns is not None:
        extra = {"turns": turns, "median_noise_pct": median_noise_pct(samples)}
    return SimpleNamespace(
        latency_ms=float(np.percentile(ordered, 50)),
        latency_p20_ms=float(np.percentile(ordered, 20)),
        latency_p80_ms=float(np.percentile(ordered, 80)),
        extra=extra,
    )


def test_reference_ladder_steps_carry_the_noise_their_verdicts_come_from(tmp_path):
    store = Store(tmp_path / "runs.db")
    ladder = load_ladder()
    problem = Problem(batch=1, heads=1, head_dim=32)
    group_id, events = run_ladder(ladder, problem, (64,), "reference", store)
    list(events)
    runs = store.group_runs(group_id)
    for run in runs:
        (point,) = store.points(run.id)
        # Enough turns to measure the median's noise: Compare's rule, not the fallback floor.
        assert point.extra["turns"] >= MIN_TURNS, run.step
        assert point.extra["median_noise_pct"] >= 0
    table = ladder_table(store, group_id)
    for step in table["steps"][1:]:
        cell = step["cells"]["64"]
        # A painted step is one beyond its noise, never merely away from 1.
        assert cell["vs_previous_significant"] == (
            abs(1 / cell["vs_previous"] - 1) * 100 > cell["vs_previous_noise_pct"]
        )


def test_one_stray_slow_sample_does_not_make_a_step_a_loss():
    seed = random.randrange(2**32)
    print("seed", seed)
    rng = random.Random(seed)
    base = [1.0 + rng.gauss(0, 0.005) for _ in range(MIN_TURNS)]
    same = [1.0 + rng.gauss(0, 0.005) for _ in range(MIN_TURNS)]
    same[rng.randrange(MIN_TURNS)] = 2.3  # one preempted turn: a x0.44 sample
    cell = compare_cell(_point(same, MIN_TURNS), _point(base, MIN_TURNS))
    assert not cell.significant, (seed, cell)
    as_ladder = {"vs_previous": cell.speedup, "vs_previous_significant": cell.significant}
    assert speedup_verdict(as_ladder, "vs_previous") == "neutral"
    # Points stored without turns fall back to their spreads, at least the run-to-run floor.
    close = compare_cell(_point([1.015] * 3, None), _point([1.0] * 3, None))
    assert close.noise_pct == RUN_TO_RUN_PCT and not close.significant
