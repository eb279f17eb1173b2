"""Group sweeps (several backends, same inputs, interleaved) through the core and the CLI."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from tests import cpu_peers
from workbench.backends import get_backend
from workbench.config import ConfigError, KernelConfig, Problem, SweepSpec
from workbench.jobs import GroupStarted, group_specs, plan_group, run_group
from workbench.measure.timing import TimingSettings
from workbench.run.events import PointFinished, RunFinished
from workbench.store import Store


@pytest.fixture(autouse=True)
def _second_cpu_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu_peers.register(monkeypatch)


QUICK = TimingSettings(warmup=0, min_samples=2, max_samples=50, min_time_s=0.0, rounds=2)


def _spec(seed: int, lens: tuple[int, ...] = (32, 64)) -> SweepSpec:
    problem = Problem(batch=1, heads=2, head_dim=32, q_len=1, k_len=1)
    return SweepSpec(problem, lens, KernelConfig(mask="causal", tile_m=16, tile_n=16), seed=seed)


def test_a_group_stores_one_run_per_backend_on_the_same_inputs(db_path: Path) -> None:
    seed = int(np.random.SeedSequence().entropy % 2**31)
    print(f"group seed {seed}")
    names = ["reference", cpu_peers.NAME]
    plan, backends = plan_group(group_specs(_spec(seed), names), label="pair")
    with Store(db_path) as store:
        events = list(run_group(plan, store, backends=backends, timings=[QUICK, QUICK]))
        started = events[0]
        assert isinstance(started, GroupStarted)
        assert started.backends == tuple(names) and started.total == 4
        assert [e.status for e in events if isinstance(e, RunFinished)] == ["complete"] * 2
        group = store.group(started.group_id)
        assert group["kind"] == "backends" and group["label"] == "pair"
        assert group["spec"]["seed"] == seed and group["spec"]["backends"] == names
        runs = store.group_runs(started.group_id)
        assert [r.backend for r in runs] == names
        assert all(r.label == "pair" and r.step == r.backend for r in runs)
        first, second = (store.points(r.id) for r in runs)
        # The same inputs at every length: the same kernel gives the same output, error and all.
        for a, b in zip(first, second, strict=True):
            assert a.seq_len == b.seq_len
            assert a.max_abs_err == b.max_abs_err and a.rel_err == b.rel_err
            assert a.samples == b.samples >= 2  # both timed over the same rounds
            assert a.extra["timer"] == b.extra["timer"] == "cpu"
    # Points arrive length by length, both backends of a length before the next length.
    order = [(e.point.seq_len, e.run_id) for e in events if isinstance(e, PointFinished)]
    assert [n for n, _ in order] == [32, 32, 64, 64]


def test_a_group_measures_each_length_in_balanced_interleaved_rounds(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within a length the backends take turns: each runs right after each other one."""
    import workbench.backends.interleave as interleave
    import workbench.measure.timing as timing

    turns: list[str] = []
    real = timing.measure_interleaved

    def spy(samplers, settings, **kwargs):  # type: ignore[no-untyped-def]
        for sampler, name in zip(samplers, ("reference", cpu_peers.NAME), strict=True):
            inner = sampler.turn

            def turn(inner=inner, name=name):  # type: ignore[no-untyped-def]
                turns.append(name)
                return inner()

            sampler.turn = turn
        return real(samplers, settings, **kwargs)

    monkeypatch.setattr(interleave, "measure_interleaved", spy)
    plan, backends = plan_group(group_specs(_spec(7, (32,)), ["reference", cpu_peers.NAME]))
    settings = TimingSettings(warmup=0, min_samples=1, min_time_s=0.0, rounds=4)
    with Store(db_path) as store:
        list(run_group(plan, store, backends=backends, timings=[settings, settings]))
    assert len(turns) == 8  # four rounds of two; CPU samplers get no untimed round
    # Two backends alternate: each turn follows the other backend's, never its own.
    assert all(a != b for a, b in itertools.pairwise(turns)), turns


def test_a_group_with_an_unavailable_backend_is_refused_before_anything_is_written(
    run_cli, fast_args, db_path: Path
) -> None:
    result = run_cli(
        "sweep", *fast_args, "--seq-lens", "32", "--backends", "reference,missing-peer"
    )
    assert result.code == 2
    assert result.err_lines == [
        "error: --backends missing-peer: not available: missing-peer is not installed: "
        "pip install missing-peer"
    ]
    assert not db_path.exists()


def test_a_group_refuses_repeated_and_empty_backend_lists(run_cli, fast_args, db_path) -> None:
    for backends in ("reference,reference", ",", " , "):
        result = run_cli("sweep", *fast_args, "--seq-lens", "32", "--backends", backends)
        assert result.code == 2, backends
        assert len(result.err_lines) == 1 and "backends" in result.err_lines[0]
    assert not db_path.exists()


def test_the_cli_group_prints_each_length_with_every_backend(run_cli, fast_args, db_path) -> None:
    names = f"reference,{cpu_peers.NAME}"
    result = run_cli(
        "sweep", *fast_args, "--seq-lens", "16,32", "--backends", names, "--label", "g", "--json"
    )
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["group_id"] == 1 and [r["backend"] for r in data["runs"]] == names.split(",")
    assert "group 1: reference #1, reference-b #2; 4 point(s), timed interleaved" in result.err
    assert result.err.count("N=16 …") == 1 and result.err.count("N=32 …") == 1
    compared = run_cli("compare", "--group", "1", "--json")
    assert compared.code == 0
    assert [r["backend"] for r in json.loads(compared.out)["runs"]] == names.split(",")


def test_a_group_in_rounds_stores_each_medians_noise_for_compare_and_the_csv(
    run_cli, fast_args, db_path, tmp_path
) -> None:
    names = f"reference,{cpu_peers.NAME}"
    result = run_cli("sweep", *fast_args, "--seq-lens", "16,32", "--backends", names,
                     "--rounds", "6", "--json")  # fmt: skip
    assert result.code == 0, result.err
    compared = json.loads(run_cli("compare", "--group", "1", "--json").out)
    for entry in compared["points"]:
        cell = entry["runs"]["2"]
        # The threshold is the rounds' 2σ, never under the run-to-run floor.
        assert cell["noise_pct"] >= 2.0
        assert cell["significant"] == (abs(cell["delta_pct"]) > cell["noise_pct"])
    target = tmp_path / "g.csv"
    assert run_cli("export", "--csv", str(target), "--group", "1").code == 0
    rows = list(csv.DictReader(target.open(encoding="utf-8")))
    assert len(rows) == 4
    for row in rows:
        assert 0 < float(row["latency_se_pct"]) < 100, row["latency_se_pct"]
    with Store(db_path) as store:
        point = store.points(1)[0]
        assert point.extra["turns"] >= 6 and point.extra["median_noise_pct"] > 0


def test_a_length_one_backend_cannot_fit_is_left_out_for_it_alone(monkeypatch) -> None:
    peer = get_backend(cpu_peers.NAME)

    def refuse_long(problem, config):  # type: ignore[no-untyped-def]
        if problem.q_len > 32:
            raise ConfigError("q_len", problem.q_len, "the scores do not fit")

    monkeypatch.setattr(peer, "check_supported", refuse_long)
    specs = group_specs(_spec(3, (16, 32, 64)), ["reference", cpu_peers.NAME])
    plan, _ = plan_group(specs, [get_backend("reference"), peer])
    assert [s.seq_lens for s in plan.specs] == [(16, 32, 64), (16, 32)]
    assert [(s.backend, s.seq_len) for s in plan.skipped] == [(cpu_peers.NAME, 64)]


def test_a_fault_outside_any_backend_fails_every_open_run_and_is_raised(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import workbench.jobs.group as group_module

    def broken(*args: object, **kwargs: object) -> None:
        raise TypeError("a bug between the backends")

    monkeypatch.setattr(group_module, "measure_group_point", broken)
    plan, backends = plan_group(group_specs(_spec(7), ["reference", cpu_peers.NAME]))
    with Store(db_path) as store:
        events = []
        with pytest.raises(TypeError, match="between the backends"):
            for event in run_group(plan, store, backends=backends, timings=[QUICK, QUICK]):
                events.append(event)
        finished = [e for e in events if isinstance(e, RunFinished)]
        assert [e.status for e in finished] == ["failed", "failed"]
        runs = store.group_runs(events[0].group_id)
        assert [r.status for r in runs] == ["failed", "failed"]
        assert all("between the backends" in (r.error or "") for r in runs)
