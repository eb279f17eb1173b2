"""Several processes writing to one database at once lose nothing."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.store import Store

FAST = ["--warmup", "0", "--samples", "1", "--min-time", "0"]
SEQ_LENS = list(range(16, 257, 16))


def test_sweeps_in_parallel_processes_and_this_one_lose_nothing(
    tmp_path: Path, sweep_command: Callable, measure: Callable, count_rows: Callable
) -> None:
    # A fresh file: the first opens race to create the schema, too.
    db = tmp_path / "shared.db"
    lens = ",".join(map(str, SEQ_LENS))
    children = [
        subprocess.Popen(
            sweep_command(
                db,
                "--seq-lens",
                lens,
                "--heads",
                "2",
                "--head-dim",
                "32",
                "--label",
                f"p{i}",
                *FAST,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(3)
    ]
    # Meanwhile this process writes runs of its own, point by point, until they are all done.
    mine = []
    rng = np.random.default_rng()
    spec = SweepSpec(Problem(heads=1, head_dim=32), (16, 24), KernelConfig(), label="local")
    results = [measure(p, spec.config, rng) for p in spec.problems()]
    during = 0  # writes made while a sweep process was still running
    while len(mine) < 15 or any(child.poll() is None for child in children):
        during += any(child.poll() is None for child in children)
        with Store(db) as store:
            run_id = store.create_run(spec, {})
            for result in results:
                store.add_point(run_id, result)
            store.finish_run(run_id, "complete")
            mine.append(run_id)
    outcomes = [child.communicate(timeout=300) for child in children]
    for child, (_, err) in zip(children, outcomes):
        assert child.returncode == 0, err
        assert "error" not in err.lower()
    assert during >= 5  # the writes really overlapped
    swept = {int(out.strip()) for out, _ in outcomes}

    with Store(db) as store:
        runs = store.runs()
        assert len(runs) == 3 + len(mine)
        assert all(r.status == "complete" for r in runs)
        assert sorted(r.label for r in runs if r.label.startswith("p")) == ["p0", "p1", "p2"]
        assert len(swept) == 3 and not swept & set(mine)
        for run_id in swept:
            points = store.points(run_id)
            assert [p.seq_len for p in points] == SEQ_LENS
            assert all(store.block_map(run_id, n) is not None for n in SEQ_LENS)
        for run_id in mine:
            assert [p.seq_len for p in store.points(run_id)] == [16, 24]
    expected_points = 3 * len(SEQ_LENS) + len(mine) * 2
    assert count_rows(db, "points") == expected_points
    assert count_rows(db, "block_maps") == expected_points


OPEN_AT = """
import sys, time
from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.store import Store

start = float(sys.argv[2])
time.sleep(max(0.0, start - time.time()))
with Store(sys.argv[1]) as store:
    spec = SweepSpec(Problem(heads=1, head_dim=32), (16,), KernelConfig(), label=sys.argv[3])
    store.finish_run(store.create_run(spec, {}), "complete")
"""


def test_processes_creating_a_fresh_database_at_the_same_moment(
    tmp_path: Path, count_rows: Callable
) -> None:
    """Every process that finds no schema migrates; each migration must still happen once."""
    for attempt in range(2):
        db = tmp_path / f"fresh{attempt}.db"
        start = time.time() + 2.0  # time for every child to import, then all open together
        children = [
            subprocess.Popen(
                [sys.executable, "-c", OPEN_AT, str(db), str(start), f"c{i}"],
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(4)
        ]
        errors = [child.communicate(timeout=120)[1] for child in children]
        assert [child.returncode for child in children] == [0] * 4, errors
        assert count_rows(db, "runs") == 4
        with Store(db) as store:
            assert sorted(r.label for r in store.runs()) == ["c0", "c1", "c2", "c3"]
