"""Nsight Compute on one point: the refusals (for real: this machine has no ncu), the parser
of ncu's raw CSV, and the whole `profile` command against a stand-in ncu that answers with a
fixture, so storage and Compare's side-by-side are checked without a GPU."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.reports.ncu import compare_rows, launch_spec, ncu_command, parse_raw_csv
from workbench.store import Store

# A FIXTURE (tests/fixtures/ncu-raw-handwritten.csv), written by hand in the shape of
# `ncu --import R --csv --page raw` (a header of metric names, a row of units, one row per
# kernel); not a recorded run: the numbers are made up, in the range an H200 shows for this
# kernel. ncu's own ==PROF== line comes first and must be skipped.
NCU_RAW_FIXTURE = (Path(__file__).parent / "fixtures" / "ncu-raw-handwritten.csv").read_text()
# Likewise by hand, in the shape of `ncu --import R --csv --page source --print-source sass`: a
# kernel's SASS at absolute addresses with its PC samples by reason; a CTA barrier before the key
# loop and one after it, the loop an mbarrier wait, HGMMA, its wait and the exponentials.
NCU_SOURCE_FIXTURE = (Path(__file__).parent / "fixtures" / "ncu-source-handwritten.csv").read_text()


def test_the_parser_takes_the_headline_metrics_and_the_top_stalls() -> None:
    profile = parse_raw_csv(NCU_RAW_FIXTURE, report="r.ncu-rep", profiled_at="now")
    m = profile.metrics
    assert m["duration_us"] == pytest.approx(1234.56)  # nanoseconds, thousands separated
    assert m["sm_throughput_pct"] == 71.25 and m["tensor_pipe_pct"] == 63.5
    assert m["dram_throughput_pct"] == 22.75 and m["dram_gbs"] == pytest.approx(1093.0)
    assert m["l2_hit_rate_pct"] == 88.4 and m["achieved_occupancy_pct"] == 18.6
    assert m["registers_per_thread"] == 168 and m["shared_per_block_kb"] == 165.0
    assert m["sm_clock_mhz"] == pytest.approx(1980.0)  # the clock ncu saw, left as it was
    # Where the cycles go: issue slots, exp2's MUFU pipe and the FMA pipe.
    assert (m["issue_active_pct"], m["mufu_pipe_pct"], m["fma_pipe_pct"]) == (48.2, 41.75, 22.1)
    # "not_issued" is not a reason; the rest, every one, sorted largest first.
    assert profile.stalls[:3] == [("long_scoreboard", 2.41), ("math_pipe_throttle", 1.62),
                                  ("barrier", 0.97)]  # fmt: skip
    assert "wait" in dict(profile.stalls) and "not_issued" not in dict(profile.stalls)
    assert "selected" not in dict(profile.stalls)  # the issuing warp, not a wait
    assert profile.kernel == "fmha_kernel_causal" and profile.report == "r.ncu-rep"
    with pytest.raises(Exception, match="no profiled kernel"):
        parse_raw_csv("==PROF== nothing profiled\n")


def test_a_scaled_unit_is_converted_not_taken_as_the_headlines_own() -> None:
    """On the H200 ncu wrote the DRAM rate as 3.6 "Tbyte/second": stored as 3.6 GB/s until
    the prefix was read (and the import now asks ncu for base units)."""
    from workbench.reports.ncu import unit_factor

    assert 3.609 * unit_factor("GB/s", "Tbyte/second") == pytest.approx(3609.0)
    assert 3.609e12 * unit_factor("GB/s", "byte/second") == pytest.approx(3609.0)
    assert 37.9e-6 * unit_factor("us", "second") == pytest.approx(37.9)
    assert 1.98e9 * unit_factor("MHz", "cycle/second") == pytest.approx(1980.0)
    assert 156800 * unit_factor("KB", "byte") == pytest.approx(153.125)
    assert unit_factor("%", "%") == 1.0
    # The short spellings ncu's raw page used on the H200 (auto-scaled, then base units).
    assert 3.609 * unit_factor("GB/s", "TB/s") == pytest.approx(3609.0)
    assert 3580.5e9 * unit_factor("GB/s", "B/s") == pytest.approx(3580.5)
    assert 36768 * unit_factor("us", "ns") == pytest.approx(36.768)
    assert 153128 * unit_factor("KB", "B") == pytest.approx(149.54, abs=0.01)
    assert 1.98 * unit_factor("MHz", "GHz") == pytest.approx(1980.0)
    assert 1.98 * unit_factor("MHz", "cycle/nsecond") == pytest.approx(1980.0)
    assert unit_factor("us", "B") == 1.0  # not the same kind: left as it is
    # ncu on the H200 (2026-12-03) gave the shared memory a block takes as "byte/block": the
    # window said "164976 KB" for 161 KB until the per-block suffix was read.
    assert 164976 * unit_factor("KB", "byte/block") == pytest.approx(161.11, abs=0.01)
    assert 2 * unit_factor("KB", "Kbyte/block") == pytest.approx(1.953, abs=0.001)


def test_the_command_profiles_one_launch_with_the_clocks_left_alone(db_path: Path) -> None:
    with Store(db_path) as store:
        run_id = _cutile_run(store, np.random.default_rng(0), autotune=True)
        run, point = store.run(run_id), store.points(run_id)[0]
    spec = launch_spec(run, point)
    # An autotuned point is profiled with the launch its tuner picked, not the form's tiles.
    assert spec["config"]["autotune"] is False and spec["config"]["tile_m"] == 128
    assert spec["problem"]["q_len"] == point.q_len
    argv = ncu_command("ncu", Path("x.ncu-rep"), spec)
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert argv[argv.index("--launch-count") + 1] == "1"
    assert argv[argv.index("--nvtx-include") + 1] == "fmha-workbench-profile/"
    assert json.loads(argv[-1]) == spec and argv[-3:-1] == ["-m", "workbench.reports.ncu"]


def _cutile_run(
    store: Store,
    rng: np.random.Generator,
    *,
    autotune: bool = False,
    label: str = "",
    backend: str = "cutile",
    axis: str = "seq_len",
) -> int:
    """A stored cuTile run with one point at N = 128 (or k_len 128 for one query row, with
    ``axis="k_len"``), as the GPU would have stored it."""
    from workbench.backends.reference import ReferenceBackend
    from workbench.measure.timing import TimingSettings

    config = KernelConfig(mask="causal", autotune=autotune)
    spec = SweepSpec(
        Problem(batch=1, heads=1, head_dim=64, q_len=1, k_len=1), (128,), config, backend, label,
        axis=axis,
    )  # fmt: skip
    run_id = store.create_run(spec, {"gpu_name": "NVIDIA H200"})
    result = ReferenceBackend().measure_point(
        spec.problems()[0], config, TimingSettings(warmup=0, min_samples=1, max_samples=1,
                                                   min_time_s=0.0), rng
    )  # fmt: skip
    result.extra["launch"] = {"tile_m": 128, "tile_n": 128, "num_worker_warps": 8}
    store.add_point(run_id, result, seq_len=128)  # on the run's axis: N or k_len
    store.finish_run(run_id, "complete")
    return run_id


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_profile_without_ncu_exits_2_in_one_line_and_writes_nothing(
    run_cli: Any, db_path: Path, rng: np.random.Generator
) -> None:
    if shutil.which("ncu"):
        pytest.skip("ncu is on PATH here: the refusal is for machines without it")
    with Store(db_path) as store:
        run_id = _cutile_run(store, rng)
    before = _digest(db_path)
    result = run_cli("profile", run_id, "--seq-len", "128", "--db", db_path)
    assert result.code == 2 and result.err_lines == [
        "error: cannot profile: Nsight Compute (ncu) is not on PATH: install NVIDIA Nsight "
        "Compute to profile"
    ]
    assert _digest(db_path) == before and not (db_path.parent / "profiles").exists()
    missing = run_cli("profile", run_id, "--seq-len", "256", "--db", db_path)
    assert missing.code == 2 and "has no point at N=256 (128)" in missing.err


def _fake_ncu(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    permitted: bool = True,
    source_page: bool = True,
) -> Path:
    """An `ncu` on PATH that refuses without --clock-control none, writes the report it is
    asked for and answers --import with the fixtures (or reports no counter permission; or,
    with ``source_page=False``, has no source page, as an older ncu)."""
    fixture = tmp_path / "raw.csv"
    fixture.write_text(NCU_RAW_FIXTURE)
    source = tmp_path / "source.csv"
    source.write_text(NCU_SOURCE_FIXTURE)
    tool = tmp_path / "bin" / "ncu"
    tool.parent.mkdir()
    denied = "" if permitted else 'echo "==ERROR== ERR_NVGPUCTRPERM - no permission"; exit 1'
    page = f'cat "{source}"; exit 0' if source_page else 'echo "==ERROR== unknown page"; exit 1'
    tool.write_text(f"""#!/bin/sh
case "$*" in *"--page source"*) {page};; esac
case "$*" in *--import*) cat "{fixture}"; exit 0;; esac
case "$*" in *"--clock-control none"*) ;; *) echo "clocks would be locked"; exit 3;; esac
{denied}
while [ "$#" -gt 0 ]; do
  if [ "$1" = "--export" ]; then echo report > "$2"; fi
  shift
done
""")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}:/usr/bin:/bin")
    return tool


def test_profile_stores_the_metrics_and_compare_shows_two_runs_side_by_side(
    run_cli: Any, db_path: Path, rng: np.random.Generator, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    with Store(db_path) as store:
        first, second = _cutile_run(store, rng, label="a"), _cutile_run(store, rng, label="b")
    _fake_ncu(tmp_path, monkeypatch)
    result = run_cli("profile", first, "--seq-len", "128", "--db", db_path)
    assert result.code == 0, result.err
    assert "SM throughput" in result.out and "71.25 %" in result.out
    # Where the warps wait, from the PC samples: the barrier before the key loop holds most.
    assert "where the warps wait (995 PC samples, 59% of them in the key loop):" in result.out
    lines = result.out.splitlines()
    assert any(
        line.split()[:2] == ["31%", "BAR.SYNC.DEFER_BLOCKING"] and "barrier 99%" in line
        for line in lines
    )
    assert any(line.startswith("78% of barrier") and "22% at BAR.SYNC" in line for line in lines)
    with Store(db_path) as store:
        stored = store.points(first)[0].extra["ncu"]
    assert stored["metrics"]["l2_hit_rate_pct"] == 88.4
    assert stored["waits"]["samples"] == 995 and stored["waits"]["key_loop_share"] == 0.5889
    report = Path(stored["report"])
    assert report.parent == db_path.parent / "profiles" and report.exists()
    shown = json.loads(run_cli("show", first, "--json", "--db", db_path).out)
    assert shown["points"][0]["extra"]["ncu"]["stalls"][0] == ["long_scoreboard", 2.41]

    # One profiled run: compare has nothing to put beside it yet; two: side by side.
    assert "Nsight Compute" not in run_cli("compare", first, second, "--db", db_path).out
    assert run_cli("profile", second, "--seq-len", "128", "--db", db_path).code == 0
    text = run_cli("compare", first, second, "--db", db_path).out
    block = text[text.index("Nsight Compute at N=128:") :].splitlines()
    assert block[1].split() == ["metric", f"#{first}", f"#{second}"]
    assert any(line.startswith("L2 hit rate") and line.count("88.4 %") == 2 for line in block)
    assert compare_rows([stored, None])[0][2] == "–"


def test_profile_without_counter_permission_exits_2_and_keeps_nothing(
    run_cli: Any, db_path: Path, rng: np.random.Generator, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    with Store(db_path) as store:
        run_id = _cutile_run(store, rng)
        reference = _cutile_run(store, rng, backend="reference")
    _fake_ncu(tmp_path, monkeypatch, permitted=False)
    before = _digest(db_path)
    result = run_cli("profile", run_id, "--seq-len", "128", "--db", db_path)
    assert result.code == 2 and len(result.err_lines) == 1
    assert "ERR_NVGPUCTRPERM" in result.err
    assert _digest(db_path) == before
    assert list((db_path.parent / "profiles").glob("*")) == []
    cpu = run_cli("profile", reference, "--seq-len", "128", "--db", db_path)
    assert cpu.code == 2 and "ran on the CPU (reference backend)" in cpu.err


def test_compare_sets_each_runs_top_stalls_beside_the_others_value_for_them() -> None:
    """On the H200 ours waited at a barrier 1.82 warps per issue and FA4 0.55, which was not in
    FA4's top three: the row of a reason carries every profile's value for it."""
    ours = {"stalls": [["barrier", 1.82], ["long_scoreboard", 1.47], ["wait", 1.1], ["gmma", 0.01]]}
    fa4 = {"stalls": [["wait", 1.55], ["selected", 1.0], ["long_scoreboard", 0.82],
                      ["dispatch_stall", 0.57], ["barrier", 0.55]]}  # fmt: skip
    old = {"stalls": [["wait", 1.3]]}  # stored before every reason was kept
    rows = {row[0]: row[1:] for row in compare_rows([ours, fa4, old])}
    assert rows["stall: barrier"] == ["1.82", "0.55", "–"]
    assert rows["stall: long_scoreboard"] == ["1.47", "0.82", "–"]
    # "selected" is the issuing warp (1 per issue), not a wait: older records kept it.
    assert "stall: selected" not in rows and rows["stall: dispatch_stall"] == ["–", "0.57", "–"]
    assert "stall: gmma" not in rows  # in nobody's top three
    labels = [label for label in rows if label.startswith("stall: ")]
    reasons = ("barrier", "long_scoreboard", "wait", "dispatch_stall")
    assert labels == [f"stall: {r}" for r in reasons]


def test_the_pc_samples_say_which_instruction_each_reason_waits_at() -> None:
    """The question the H200's prefill profile left open: ours stalled at a barrier 1.82 warps
    per issue, with no barrier in its key loop. The source page says which instruction."""
    from workbench.analysis.ncu_source import parse_source_csv

    waits = parse_source_csv(NCU_SOURCE_FIXTURE, "fmha_kernel_causal")
    assert waits is not None
    # The issuing warp's samples ("selected") are not waits: 1,046 sampled, 995 waiting.
    assert waits.samples == 995
    # The key loop runs from the mbarrier wait (0x30) to the branch back to it (0x80).
    assert waits.key_loop_share == pytest.approx(586 / 995, abs=1e-4)
    hottest = [(s.offset, s.opcode, s.in_key_loop) for s in waits.hottest]
    assert hottest[:4] == [(0x20, "BAR.SYNC.DEFER_BLOCKING", False),
                           (0x30, "SYNCS.PHASECHK.TRANS64.TRYWAIT", True),
                           (0x50, "WARPGROUP.DEPBAR.LE", True),
                           (0x60, "MUFU.EX2", True)]  # fmt: skip
    assert waits.hottest[0].share == pytest.approx(312 / 995, abs=1e-4)
    assert waits.hottest[3].reasons == {"math_pipe_throttle": 0.571, "short_scoreboard": 0.429}
    # Each reason's samples by instruction, as shares of that reason, in the raw page's names.
    barrier = waits.by_reason["barrier"]
    assert [(s.offset, s.share) for s in barrier] == [(0x20, 0.775), (0xA0, 0.225)]
    assert waits.by_reason["long_scoreboard"][0].in_key_loop
    assert list(waits.by_reason)[:3] == ["barrier", "long_scoreboard", "wait"]
    assert "selected" not in waits.by_reason
    # A page without samples, or without any instruction, has nothing to say.
    assert parse_source_csv("==PROF== nothing\n") is None
    header, *_ = [ln for ln in NCU_SOURCE_FIXTURE.splitlines() if ln.startswith('"Address"')]
    empty = f'"Kernel Name","k"\n{header}\n"0x10","EXIT",' + ",".join(['"0"'] * 12)
    assert parse_source_csv(empty) is None


def test_compare_puts_each_reasons_instruction_beside_its_value() -> None:
    from workbench.analysis.ncu_source import parse_source_csv

    waits = parse_source_csv(NCU_SOURCE_FIXTURE)
    assert waits is not None
    ours = {"stalls": [["barrier", 1.82], ["long_scoreboard", 1.47]], "waits": waits.to_dict()}
    fa4 = {"stalls": [["long_scoreboard", 0.82], ["barrier", 0.55]]}  # profiled without samples
    rows = {row[0]: row[1:] for row in compare_rows([ours, fa4])}
    # Short enough for two runs beside the chart: the opcode in a word, "loop" in the key loop.
    assert rows["stall: barrier"] == ["1.82 · BAR 78%", "0.55"]
    assert rows["stall: long_scoreboard"] == ["1.47 · PHASECHK loop 100%", "0.82"]
    assert rows["samples in key loop"] == ["59%", "–"]
    assert rows["hottest 1"] == ["BAR 31%", "–"]
    assert rows["hottest 2"] == ["PHASECHK loop 22%", "–"]
    assert rows["hottest 3"] == ["DEPBAR loop 16%", "–"]
    # Profiles stored before the samples were read show no such rows.
    assert "samples in key loop" not in {r[0] for r in compare_rows([fa4, fa4])}


def test_a_decode_point_is_profiled_and_compared_at_its_k_len(
    run_cli: Any, db_path: Path, rng: np.random.Generator, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A decode run's lengths are key lengths: the profile and Compare say k_len, not N."""
    with Store(db_path) as store:
        ours = _cutile_run(store, rng, axis="k_len")
        theirs = _cutile_run(store, rng, axis="k_len", backend="torch-cudnn")
    _fake_ncu(tmp_path, monkeypatch)
    result = run_cli("profile", ours, "--seq-len", "128", "--db", db_path)
    assert result.code == 0, result.err
    assert result.out.startswith(f"run {ours} at k_len=128: ")
    missing = run_cli("profile", ours, "--seq-len", "64", "--db", db_path)
    assert missing.code == 2 and "has no point at k_len=64 (128)" in missing.err
    assert run_cli("profile", theirs, "--seq-len", "128", "--db", db_path).code == 0
    assert "Nsight Compute at k_len=128:" in run_cli("compare", ours, theirs, "--db", db_path).out


def test_an_ncu_without_the_source_page_keeps_the_headline_metrics(
    run_cli: Any, db_path: Path, rng: np.random.Generator, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    with Store(db_path) as store:
        run_id = _cutile_run(store, rng)
    _fake_ncu(tmp_path, monkeypatch, source_page=False)
    result = run_cli("profile", run_id, "--seq-len", "128", "--db", db_path)
    assert result.code == 0, result.err
    assert "71.25 %" in result.out and "where the warps wait" not in result.out
    with Store(db_path) as store:
        stored = store.points(run_id)[0].extra["ncu"]
    assert stored["metrics"]["sm_throughput_pct"] == 71.25 and "waits" not in stored
