"""The independent check's noise figure: does "within twice its noise" mean what it says?

Synthetic timings (CPU only) stand in for two timers measuring the same launches: each round
draws a clock state that moves every sample of that round's turn, as on the H200 host.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.independent_check import agreement_line, median_noise_pct, ratio_noise_pct
from workbench.measure.noise import turn_medians

PER_TURN = 10


def _point(rng: np.random.Generator, true_ms: float, rounds: int) -> list[float]:
    """One stored point: ``rounds`` turns of PER_TURN samples, each turn at its own clock."""
    samples = []
    for _ in range(rounds):
        clock = rng.lognormal(0.0, 0.03)
        samples += list(true_ms * clock * rng.lognormal(0.0, 0.01, PER_TURN))
    return samples


def _ratio_and_noise(rng: np.random.Generator, ours_ms: float, peer_ms: float, rounds: int):
    ours, peer = _point(rng, ours_ms, rounds), _point(rng, peer_ms, rounds)
    ratio = float(np.median(peer) / np.median(ours))
    noise = ratio_noise_pct(
        median_noise_pct(turn_medians(ours, [PER_TURN] * rounds)),
        median_noise_pct(turn_medians(peer, [PER_TURN] * rounds)),
    )
    return ratio, noise


def test_two_measurements_of_the_same_launches_fall_within_twice_their_noise(rng) -> None:
    trials, inside = 1000, 0  # enough that the count sits several of its σ inside both bounds
    for _ in range(trials):
        first, noise_1 = _ratio_and_noise(rng, 1.0, 1.05, rounds=16)
        second, noise_2 = _ratio_and_noise(rng, 1.0, 1.05, rounds=16)
        diff = 100 * (first / second - 1)
        inside += abs(diff) <= 2 * ratio_noise_pct(noise_1, noise_2)
    # 2σ of a normal spread holds about 95 %; the estimate must neither miss often nor be so
    # wide that it would also swallow a real change. Over 40 seeds the count was 971 ± 5
    # (960-979): both bounds lie over 5 of its σ away, so no seed of a run is near them (the
    # draws are synthetic, so a loaded machine cannot move them either).
    assert 0.90 * trials <= inside <= 0.997 * trials  # about 97 % on average


def test_a_real_change_of_eight_percent_stands_outside_the_noise(rng) -> None:
    flagged, trials = 0, 200
    for _ in range(trials):
        before, noise_1 = _ratio_and_noise(rng, 1.0, 1.05, rounds=16)
        after, noise_2 = _ratio_and_noise(rng, 1.0, 1.05 * 1.08, rounds=16)
        diff = 100 * (after / before - 1)
        flagged += abs(diff) > 2 * ratio_noise_pct(noise_1, noise_2)
    # Over 40 seeds 197 ± 1.4 of 200 were flagged (194-200): the bound is 5 of its σ below.
    assert flagged >= 0.95 * trials


def test_more_rounds_narrow_the_noise(rng) -> None:
    # 300 draws a side: over 40 seeds the ratio's spread is 0.09 (at 50 draws it was 0.24, and
    # one seed in a few hundred fell outside these bounds).
    few = np.median([_ratio_and_noise(rng, 1.0, 1.0, rounds=4)[1] for _ in range(300)])
    many = np.median([_ratio_and_noise(rng, 1.0, 1.0, rounds=36)[1] for _ in range(300)])
    assert 2.5 < few / many < 3.6  # √(36/4) = 3


def test_the_agreement_line_counts_both_ways() -> None:
    line = agreement_line([(0.5, 0.4), (-1.8, 1.0), (3.0, 1.0)], threshold_pct=1.5)
    assert "Largest difference 3.00 % over 3" in line
    assert "within 1.5 %: 1 of 3" in line
    assert "noise: 2 of 3" in line


def test_a_kv_cache_that_fits_in_l2_is_read_cold_from_rotating_copies() -> None:
    from bench.independent_check import L2_BYTES, input_copies, rotating

    # B=1 Llama-3-8B at k_len 4k: 16 MiB of K+V; three L2s lie between two reads of a copy.
    kv_4k = 2 * 8 * 4096 * 128 * 2
    copies = input_copies(kv_4k)
    assert (copies - 1) * kv_4k >= 2 * L2_BYTES and copies == 12
    assert input_copies(L2_BYTES + 1) == 1
    calls: list[int] = []
    step = rotating([lambda i=i: calls.append(i) for i in range(3)])
    for _ in range(7):
        step()
    assert calls == [0, 1, 2, 0, 1, 2, 0]


def test_a_group_the_database_lacks_is_refused_before_any_group_is_timed(
    tmp_path, capsys, monkeypatch
) -> None:
    """A check of groups 1 and 11 where 11 was never made: one line and exit 2, and group 1 is
    not timed first (a GPU run once lost every group's result to a missing last one)."""
    import shutil

    import bench.independent_check as check

    db = tmp_path / "results.db"
    shutil.copy(Path(__file__).resolve().parents[1] / "bench/results/h200-prefill.db", db)
    timed: list[int] = []
    monkeypatch.setattr(check, "check_group", lambda store, g, *a: timed.append(g) or [])
    out = tmp_path / "check.json"
    assert check.main(["--db", str(db), "--groups", "1,99", "--json", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: group 99 has no runs (see `fmha-workbench runs`)"]
    assert timed == [] and not out.exists()


def test_a_check_of_several_groups_says_which_group_each_row_is() -> None:
    """Groups 16 and 18-20 checked at once gave one table whose rows at k_len 8k came from three
    groups with nothing to tell them apart: a group column appears when the rows span groups."""
    from bench.independent_check import to_markdown

    def row(group: int, k_len: int, ratio: float) -> dict:
        pair = {"workbench": ratio, "independent": ratio * 1.01, "diff_pct": -1.0}
        return {
            "group": group,
            "mask": "none",
            "seq_len": k_len,
            "axis": "k_len",
            "independent_kv_gbs": {"cutile": 3500.0},
            "cutile/torch-cudnn": pair,
        }

    several = to_markdown([row(16, 8192, 0.997), row(19, 8192, 0.950)]).splitlines()
    assert several[0].startswith("| group | mask | k_len |")
    assert several[2].startswith("| 16 | none | 8192 |")
    assert several[3].startswith("| 19 | none | 8192 |")
    one = to_markdown([row(16, 4096, 0.98), row(16, 8192, 0.997)]).splitlines()
    assert one[0].startswith("| mask | k_len |")


def test_bad_arguments_are_one_line_and_no_database_is_made(tmp_path: Path, capsys) -> None:
    import pytest

    from bench.independent_check import main

    missing = tmp_path / "missing.db"
    for argv, words in [
        (["--db", str(missing), "--groups", ""], "--groups: expected group ids such as 3,4"),
        (["--db", str(missing), "--groups", "1,x"], "--groups: expected group ids such as 3,4"),
        (["--db", str(missing), "--groups", "1", "--repeat-of", "1-2"], "FIRST:SECOND"),
    ]:
        with pytest.raises(SystemExit) as ended:
            main(argv)
        assert ended.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert words in err[-1] and "Traceback" not in "\n".join(err)
    assert main(["--db", str(missing), "--groups", "1"]) == 2
    assert capsys.readouterr().err.strip() == f"error: --db {missing}: no such run database"
    assert not missing.exists()


def test_an_interrupted_check_keeps_the_groups_it_timed(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """A device call's time limit stopped a check at its last group, and the rows of the groups
    before it, already timed, were lost with it (the JSON was written only at the end): they
    are written, with a line saying the check was cut short, and the exit code says so."""
    import json
    import shutil

    import bench.independent_check as check

    db = tmp_path / "results.db"
    shutil.copy(Path(__file__).resolve().parents[1] / "bench/results/h200-prefill.db", db)

    def timed(store, group, rounds, rep_ms, into):
        if group == 2:
            raise KeyboardInterrupt
        into.append({"group": group, "mask": "causal", "seq_len": 1024, "axis": "seq_len"})

    monkeypatch.setattr(check, "check_group", timed)
    out, md = tmp_path / "check.json", tmp_path / "check.md"
    argv = ["--db", str(db), "--groups", "1,2", "--json", str(out), "--markdown", str(md)]
    assert check.main(argv) == 130
    assert [row["group"] for row in json.loads(out.read_text())["independent"]] == [1]
    assert "Interrupted before every group was timed" in md.read_text()
    assert "interrupted: the rows of groups [1] are kept" in capsys.readouterr().err
