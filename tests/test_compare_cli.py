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
    assert "within the runs' own noise" in capsys.readouterr().out
