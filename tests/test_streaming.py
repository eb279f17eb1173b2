"""Where a decode call's time goes: the fixed cost and streaming rate fitted over k_len, in the
report (markdown, plain text, JSON) and from the committed H200 decode groups."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from tests import cpu_peers
from tests.conftest import FAST_TIMING_ARGS
from workbench.analysis.streaming import (
    COLD_KV_BYTES,
    MIN_FIT_POINTS,
    fit_run,
    fit_streaming,
    summary,
)
from workbench.store import Store

ROOT = Path(__file__).resolve().parents[1]
DECODE_DB = ROOT / "bench" / "results" / "h200-decode.db"


def test_the_fit_recovers_a_fixed_cost_and_a_rate_and_ignores_lengths_that_fit_in_l2() -> None:
    seed = int(np.random.SeedSequence().entropy % 2**31)
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    fixed_us, rate_gbs = rng.uniform(2, 30), rng.uniform(500, 5000)
    sizes = [int(COLD_KV_BYTES * f) for f in (1.0, 2.0, 4.0, 8.0)]
    points = [
        (b, (fixed_us + b / (rate_gbs * 1e3)) * 1e-3 * rng.uniform(0.999, 1.001)) for b in sizes
    ]
    # A length whose K+V stays in L2 reads far faster than the line: it must not bend it.
    points.append((COLD_KV_BYTES // 4, 1e-6))
    fit = fit_streaming(points, {"read_bandwidth_gbs": 2 * rate_gbs})
    assert fit.fixed_us == pytest.approx(fixed_us, abs=0.02 * fixed_us + 0.5)
    assert fit.rate_gbs == pytest.approx(rate_gbs, rel=0.01)
    assert fit.points == len(sizes) and fit.worst_residual_pct < 0.5 and not fit.poor
    assert fit.read_pct == pytest.approx(50.0, rel=0.01)
    assert summary(fit).startswith(f"{fit.fixed_us:.1f} µs + {fit.rate_gbs:.0f} GB/s (")


def test_no_fit_without_enough_cold_lengths_or_where_time_does_not_grow() -> None:
    two = [(COLD_KV_BYTES, 0.03), (2 * COLD_KV_BYTES, 0.06), (COLD_KV_BYTES // 2, 0.02)]
    with pytest.raises(
        ValueError, match=f"2 lengths with K\\+V past 128 MB .*needs {MIN_FIT_POINTS}"
    ):
        fit_streaming(two)
    flat = [(COLD_KV_BYTES * k, 0.05 - 0.001 * k) for k in (1, 2, 3)]
    with pytest.raises(ValueError, match="does not grow"):
        fit_streaming(flat)
    # Points off any line are fitted but said to be so.
    bent = [(COLD_KV_BYTES * k, t) for k, t in ((1, 0.030), (2, 0.090), (3, 0.100), (4, 0.160))]
    fit = fit_streaming(bent)
    assert fit.poor and "not a line" in summary(fit) and fit.read_pct is None


@pytest.fixture
def decode_db(tmp_path: Path) -> Path:
    copy = tmp_path / "h200-decode.db"
    shutil.copy(DECODE_DB, copy)  # opening may migrate: the committed file stays as it is
    return copy


def test_report_of_the_committed_decode_groups_splits_each_backends_time(
    run_cli, decode_db: Path
) -> None:
    args = ("report", "--db", str(decode_db), "--group", "9", "--group", "13")
    data = json.loads(run_cli(*args, "--json").out)
    fits = {(f["group"], f["backend"]): f for f in data["streaming"]}
    with Store(decode_db) as store:
        for run in store.group_runs(9):
            fit = fits[(9, run.backend)]["fit"]
            cold = [
                p for p in store.points(run.id) if run.point_problem(p).kv_bytes() >= COLD_KV_BYTES
            ]
            assert fit["points"] == len(cold) >= MIN_FIT_POINTS
            # The line passes every cold point within the residual it states.
            for p in cold:
                line_us = fit["fixed_us"] + run.point_problem(p).kv_bytes() / (
                    fit["rate_gbs"] * 1e3
                )
                off = abs(line_us - p.latency_ms * 1e3) / (p.latency_ms * 1e3) * 100
                assert off <= fit["worst_residual_pct"] + 1e-6
            assert fit == fit_run(run, store.points(run.id)).to_dict()
    # Group 13 (D 64 at k_len 8k, 32k, 128k) has one length past 128 MB: no line, and why.
    assert all(
        f["fit"] is None and "1 length with" in f["reason"] for k, f in fits.items() if k[0] == 13
    )
    markdown = run_cli(*args, "--markdown").out
    assert (
        "| problem | mask | q_len | backend | fixed µs | rate GB/s | rate % of read |" in markdown
    )
    cutile = fits[(9, "cutile")]["fit"]
    assert f"| cutile | {cutile['fixed_us']:.1f} | {cutile['rate_gbs']:.0f} |" in markdown
    assert "- no fit for group 13 (" in markdown
    text = run_cli(*args).out
    assert "where the time goes: latency = fixed + K+V bytes / rate" in text
    assert "no fit for group 13: 1 length with K+V past 128 MB" in text
    # These runs predate the read's own line; runs that carry it get it under their fits.
    assert "a plain read on this machine" not in markdown
    with sqlite3.connect(decode_db) as db:
        db.execute(
            "update runs set machine = json_set(machine, '$.read_fixed_us', 2.4, "
            "'$.read_line_rate_gbs', 4565.2) where group_id = 9"
        )
    marked = run_cli(*args, "--markdown").out
    assert marked.count("- a plain read on this machine") == 1
    assert "over 134–537 MB): 2.4 µs + 4565 GB/s a call, the least a kernel" in marked
    shown = json.loads(run_cli(*args, "--json").out)["streaming"]
    assert {tuple(f["read_line"] or ()) for f in shown if f["group"] == 9} == {(2.4, 4565.2)}
    assert (
        "a plain read on this machine (one launch): 2.4 µs + 4565 GB/s a call" in run_cli(*args).out
    )


def test_a_cpu_decode_groups_report_says_why_it_has_no_fit(run_cli, monkeypatch) -> None:
    cpu_peers.register(monkeypatch)
    sweep = ("sweep", "--batch", "1", "--heads", "4", "--kv-heads", "2", "--head-dim", "32",
             *FAST_TIMING_ARGS)  # fmt: skip
    result = run_cli(*sweep, "--backends", f"reference,{cpu_peers.NAME}", "--k-lens", "64,128")
    assert result.code == 0, result.err
    text = run_cli("report", "--group", "1").out
    assert (
        "no fit for group 1: 0 lengths with K+V past 128 MB (twice the L2); a fit needs 3" in text
    )
    assert "where the time goes" not in text


def test_the_streaming_read_fills_every_sm_once_and_no_more_than_it_has_words() -> None:
    from workbench.measure.stream_read import CTAS_PER_SM, THREADS, describe, grid_ctas

    assert grid_ctas(10**9, 132) == 132 * CTAS_PER_SM
    assert grid_ctas(1, 132) == 1
    assert grid_ctas(THREADS * 3 + 1, 132) == 4
    for words, sms in ((0, 132), (5, 0)):
        with pytest.raises(ValueError, match="at least one word and one SM"):
            grid_ctas(words, sms)
    assert "one-launch read" in describe() and "16-byte loads" in describe()


def test_a_decode_group_at_one_length_says_nothing_about_a_fit(run_cli, monkeypatch) -> None:
    """A front-door sweep at one k_len printed "no fit for group 1: 1 length with K+V past 128
    MB … a fit needs 3" under every report: a line through one point was never in reach."""
    cpu_peers.register(monkeypatch)
    sweep = ("sweep", "--batch", "1", "--heads", "4", "--kv-heads", "2", "--head-dim", "32",
             *FAST_TIMING_ARGS)  # fmt: skip
    result = run_cli(*sweep, "--backends", f"reference,{cpu_peers.NAME}", "--k-lens", "128")
    assert result.code == 0, result.err
    text = run_cli("report", "--group", "1").out
    assert "× " in text and "no fit" not in text
    assert "no fit" not in run_cli("report", "--group", "1", "--markdown").out
    fits = json.loads(run_cli("report", "--group", "1", "--json").out)["streaming"]
    assert fits and all(f["fit"] is None and f["lengths"] == 1 for f in fits)
