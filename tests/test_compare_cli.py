"""`compare` in the CLI uses the window's rule: a change counts only beyond the runs' noise."""

from __future__ import annotations

import json

from workbench.cli import main


def _sweep(db: str, fast_args: list[str], *extra: str) -> None:
    # Three samples, so each point has a p20-p80 spread for the noise rule.
    assert (
        main(["sweep", "--db", db, "--seq-lens", "64,128", *fast_args, "--samples", "3", *extra])
        == 0
    )


def test_compare_reports_delta_noise_and_significance_per_length(tmp_path, capsys, fast_args):
    db = str(tmp_path / "runs.db")
    _sweep(db, fast_args, "--tile-m", "16", "--tile-n", "16")
    _sweep(db, fast_args, "--tile-m", "64", "--tile-n", "64")
    capsys.readouterr()
    assert main(["compare", "1", "2", "--db", db, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["base"] == 1
    for entry in data["points"]:
        base, other = entry["runs"]["1"], entry["runs"]["2"]
        assert base["delta_pct"] is None and base["significant"] is False
        expected = 100 * (other["latency_ms"] - base["latency_ms"]) / base["latency_ms"]
        assert abs(other["delta_pct"] - expected) < 1e-9
        assert other["noise_pct"] >= 1.0
        assert other["significant"] == (abs(other["delta_pct"]) > other["noise_pct"])
    assert main(["compare", "1", "2", "--db", db]) == 0
    out = capsys.readouterr().out
    marked = any(line.rstrip().endswith("~") for line in out.splitlines())
    assert ("~ within the noise" in out) == marked


def _set_latencies(db: str, run_id: int, factor: float) -> None:
    """Points of ``run_id`` at ``factor`` × run 1's latency, with no spread: exact verdicts."""
    import sqlite3

    conn = sqlite3.connect(db)
    with conn:
        for seq_len, latency in conn.execute(
            "SELECT seq_len, latency_ms FROM points WHERE run_id = 1"
        ):
            value = latency * factor
            conn.execute(
                "UPDATE points SET latency_ms = ?, latency_p20_ms = ?, latency_p80_ms = ? "
                "WHERE run_id = ? AND seq_len = ?",
                [value, value, value, run_id, seq_len],
            )
        conn.execute("UPDATE points SET latency_p20_ms = latency_ms, latency_p80_ms = latency_ms")
    conn.close()


def test_the_noise_footnote_appears_only_with_a_marked_row(tmp_path, capsys, fast_args):
    db = str(tmp_path / "runs.db")
    for _ in range(3):
        _sweep(db, fast_args)
    _set_latencies(db, 2, 2.0)  # twice as slow at every length: beyond any noise
    _set_latencies(db, 3, 1.0)  # the same: within the noise
    capsys.readouterr()
    assert main(["compare", "1", "2", "--db", db]) == 0
    clear = capsys.readouterr().out
    assert "~" not in clear and "~ within the noise" not in clear
    assert main(["compare", "1", "3", "--db", db]) == 0
    marked = capsys.readouterr().out
    assert "1.000× ~" in marked and "~ within the noise" in marked


def test_compare_says_which_problem_fields_differ(tmp_path, capsys, fast_args):
    db = str(tmp_path / "runs.db")
    _sweep(db, fast_args, "--heads", "2")
    _sweep(db, fast_args, "--heads", "4")
    _sweep(db, fast_args, "--heads", "2", "--mask", "causal")
    _sweep(db, fast_args, "--heads", "2", "--mask", "window", "--window", "32")
    _sweep(db, fast_args, "--heads", "2", "--tile-m", "32")  # a knob: the same problem
    capsys.readouterr()
    assert main(["compare", "1", "2", "--db", db]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "careful: the runs solve different problems (heads: #1 2, #2 4)" in lines
    assert main(["compare", "3", "4", "--db", db, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["differences"] == ["mask: #3 causal, #4 window", "window: #3 None, #4 32"]
    assert main(["compare", "1", "5", "--db", db]) == 0
    assert "careful" not in capsys.readouterr().out


def test_compare_warns_when_the_runs_come_from_different_machines(tmp_path, capsys, fast_args):
    """The window's Compare tab says so; the CLI the same, from the same core rule."""
    import sqlite3

    db = str(tmp_path / "runs.db")
    _sweep(db, fast_args)
    _sweep(db, fast_args)
    assert main(["compare", "1", "2", "--db", db]) == 0
    assert "different machines" not in capsys.readouterr().out
    conn = sqlite3.connect(db)
    with conn:
        machine = json.loads(conn.execute("SELECT machine FROM runs WHERE id = 2").fetchone()[0])
        machine.update(hostname="elsewhere", gpu_name="NVIDIA H200")
        conn.execute("UPDATE runs SET machine = ? WHERE id = 2", [json.dumps(machine)])
    conn.close()
    assert main(["compare", "1", "2", "--db", db, "--json"]) == 0
    machines = json.loads(capsys.readouterr().out)["machines"]
    assert len(machines) == 2 and "NVIDIA H200 on elsewhere" in machines
    assert main(["compare", "1", "2", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "careful: the runs come from different machines" in out and "elsewhere" in out
