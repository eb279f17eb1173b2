"""Decode in the workbench (issue 34, items 3-7), driven through the CLI as a user would: sweeps
along k_len at a fixed q_len, the decode presets, GB/s beside TFLOP/s in show / compare / export
/ report, the split map of `blockmap`, the bandwidth measurement (with a fake GPU timer), the
peers' decode notes, and the decode ladder."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kernels.schedule import Schedule
from tests import cpu_peers
from tests.conftest import FAST_TIMING_ARGS
from workbench.config import ConfigError, KernelConfig, Problem, SweepSpec
from workbench.store import Store

RunCli = Callable[..., Any]
# A small GQA decode problem the reference measures in milliseconds: 8 query heads on 2 KV heads.
SMALL = ["--batch", "2", "--heads", "8", "--kv-heads", "2", "--head-dim", "32", *FAST_TIMING_ARGS]


def decode_sweep(run_cli: RunCli, *extra: str) -> dict[str, Any]:
    result = run_cli("sweep", *SMALL, *extra, "--json")
    assert result.code == 0, result.err
    [run] = json.loads(result.out)["runs"]
    return run


def kv_gbs(run: dict[str, Any], point: dict[str, Any]) -> float:
    p = run["problem"]
    itemsize = 2  # float16 and bfloat16
    kv = 2 * p["batch"] * p["kv_heads"] * point["k_len"] * p["head_dim"] * itemsize
    return kv / (point["latency_ms"] * 1e-3) / 1e9


# --- item 3: q_len and k_len apart, the k_len axis, presets --------------------------------------


def test_a_decode_sweep_runs_k_len_at_a_fixed_q_len_and_stores_its_axis(
    run_cli: RunCli, db_path: Path
) -> None:
    result = run_cli("sweep", *SMALL, "--q-len", "1", "--k-lens", "96,160,256")
    assert result.code == 0, result.err
    assert "[1/3] k_len=96" in result.err and "[3/3] k_len=256" in result.err
    with Store(db_path) as store:
        [run] = store.runs()
        assert run.axis == "k_len" and run.seq_lens == (96, 160, 256)
        points = store.points(run.id)
    # Each point: one query row against its k_len keys, the x of the point being k_len.
    assert [(p.seq_len, p.q_len, p.k_len) for p in points] == [(96, 1, 96), (160, 1, 160),
                                                                (256, 1, 256)]  # fmt: skip
    assert all(p.rel_err is not None and p.rel_err < 1e-2 for p in points)
    listed = run_cli("runs")
    assert "k_len 96..256" in listed.out and "q_len 1" in listed.out


def test_causal_decode_is_bottom_right_and_matches_float64(run_cli: RunCli) -> None:
    """Four draft tokens against 200 keys: row i sees keys up to 196 + i (input_pos = k - q)."""
    run = decode_sweep(run_cli, "--q-len", "4", "--k-lens", "200", "--mask", "causal")
    assert run["status"] == "complete" and run["axis"] == "k_len"
    assert run["problem"]["input_pos"] == 196 and run["problem"]["q_len"] == 4
    [point] = run["points"]
    assert point["rel_err"] < 1e-2
    # The last key block holds the diagonal's few masked keys; nothing before it is skipped.
    grid = Schedule(4, 200, 64, 64, "causal", 196).block_map
    assert point["blocks_skipped"] == int((grid == 0).sum()) == 0


def test_a_preset_sets_the_problem_and_the_users_flags_win(run_cli: RunCli) -> None:
    run = decode_sweep(run_cli, "--preset", "llama3-8b-speculative", "--k-lens", "128,256")
    # The preset's heads (32/8), q_len 16 and causal mask; --heads 8 etc. from SMALL win.
    assert run["problem"]["heads"] == 8 and run["problem"]["kv_heads"] == 2
    assert run["problem"]["q_len"] == 16 and run["problem"]["dtype"] == "bfloat16"
    assert run["config"]["mask"] == "causal" and run["axis"] == "k_len"
    assert [p["k_len"] for p in run["points"]] == [128, 256]
    assert all(p["q_len"] == 16 for p in run["points"])


def test_a_preset_runs_the_decode_kernel_and_typed_knobs_win(run_cli: RunCli) -> None:
    """A preset as it comes packs the GQA heads, splits the key range (auto) and reads 32 KB
    key blocks (the form's default 64x64 tile form read 0.12x cuDNN at B=1 32k on the H200); a
    knob typed by hand wins, even one typed at its registry default."""
    run = decode_sweep(run_cli, "--preset", "llama3-8b-decode", "--k-lens", "512",
                       "--head-dim", "64")  # fmt: skip
    config = run["config"]
    assert config["pack_gqa"] is True and config["kv_splits"] is None
    assert config["tile_n"] == 256  # 32 KB of K at D 64
    [point] = run["points"]
    assert point["rel_err"] < 1e-2 and point["extra"]["kv_splits"] >= 1
    run = decode_sweep(run_cli, "--preset", "llama3-8b-decode", "--k-lens", "512",
                       "--head-dim", "64", "--kv-splits", "1", "--no-pack-gqa",
                       "--tile-n", "64")  # fmt: skip
    config = run["config"]
    assert (config["pack_gqa"], config["kv_splits"], config["tile_n"]) == (False, 1, 64)
    # Without a preset the registry's defaults stand, k_len axis or not.
    plain = decode_sweep(run_cli, "--k-lens", "512")
    assert (plain["config"]["pack_gqa"], plain["config"]["kv_splits"]) == (False, 1)


def test_a_hand_stated_decode_sweep_on_cutiles_tile_form_says_how_to_run_its_decode_kernel(
    run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    import workbench.backends as backends
    from tests.cpu_peers import CutileStandIn

    # The stand-in computes here, not in the GPU engine's child (which would import the real one).
    stand_in = dataclasses.replace(
        backends._REGISTRY["cutile"], factory=CutileStandIn, in_engine=False
    )
    monkeypatch.setitem(backends._REGISTRY, "cutile", stand_in)
    note = "note: cuTile runs this decode sweep on its prefill tile form"
    small = [*SMALL, "--head-dim", "64"]  # a head dim the cuTile kernel takes
    plain = run_cli("sweep", *small, "--backend", "cutile", "--k-lens", "256")
    assert plain.code == 0, plain.err
    assert note in plain.err and "--pack-gqa --kv-splits auto --tile-n 128" in plain.err
    for decode in (["--preset", "llama3-8b-decode"], ["--pack-gqa"], ["--kv-splits", "2"]):
        result = run_cli("sweep", *small, "--backend", "cutile", "--k-lens", "256", *decode)
        assert result.code == 0 and note not in result.err, (decode, result.err)
    # Along N it is prefill: nothing to say; nor for a backend that is not cuTile.
    assert note not in run_cli("sweep", *small, "--backend", "cutile", "--seq-lens", "64").err
    assert note not in run_cli("sweep", *small, "--k-lens", "256").err


def test_every_preset_is_a_valid_decode_problem(run_cli: RunCli) -> None:
    from workbench.problem_presets import problem_presets

    names = set(problem_presets())
    assert {"llama3-8b-decode", "llama3-70b-decode"} <= names
    for preset in problem_presets().values():
        problem = preset.template()
        assert problem.head_dim == 128 and problem.kv_heads == 8
        assert problem.heads in (32, 64) and problem.q_len in (1, 16)
        spec = SweepSpec(problem, (4096, 131072), KernelConfig(mask=preset.mask), axis="k_len")
        assert [p.k_len - p.input_pos for p in spec.problems()] == [problem.q_len] * 2


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["--q-len", "128", "--k-lens", "64"],
            "--k-lens 64: expected a key length of at least the 128 query rows",
        ),
        (["--preset", "llama-9"], "--preset llama-9: expected one of llama3-8b"),
        (["--seq-lens", "128", "--k-lens", "256"], "give the lengths with --k-lens"),
        (["--q-len", "4"], "--q-len sets the query rows of a decode sweep: give --k-lens too"),
        (["--k-lens", "256", "--input-pos", "3"], "--input-pos is k_len - q_len"),
        (["--k-lens", "1k-3k"], "--k-lens 1k-3k: a range needs two powers"),
        (["--k-lens", "256", "--kv-splits", "3"], "--kv-splits 3: expected"),
    ],
)
def test_bad_decode_input_is_one_line_and_writes_nothing(
    run_cli: RunCli, db_path: Path, args: list[str], words: str
) -> None:
    result = run_cli("sweep", *SMALL, *args)
    assert result.code == 2 and len(result.err_lines) == 1, result.err
    assert words in result.err_lines[0]
    assert not db_path.exists()


def test_the_python_api_sweeps_k_len(db_path: Path, rng: np.random.Generator) -> None:
    from workbench.jobs import SweepJob

    problem = Problem(batch=1, heads=4, kv_heads=1, head_dim=32, q_len=2, k_len=2)
    config = KernelConfig(mask="causal", pack_gqa=True, kv_splits=2, tile_n=32)
    spec = SweepSpec(problem, (64, 100), config, axis="k_len", seed=int(rng.integers(1 << 31)))
    with Store(db_path) as store:
        events = list(SweepJob(spec).run(store))
        run_id = events[0].run_ids[0]
        assert events[0].axis == "k_len"
        assert [(p.q_len, p.k_len) for p in store.points(run_id)] == [(2, 64), (2, 100)]
        assert store.run(run_id).status == "complete"
    with pytest.raises(ConfigError, match="k_lens"):
        SweepSpec(problem, (1,), config, axis="k_len")


def test_a_database_from_before_axes_reads_as_n_sweeps(
    run_cli: RunCli, db_path: Path, fast_args: list[str]
) -> None:
    """Schema 3 had no axis: its runs swept N, `show` says N, and reading leaves it as it was."""
    assert run_cli("sweep", *fast_args, "--seq-lens", "16,32").code == 0
    conn = sqlite3.connect(db_path)
    conn.execute("ALTER TABLE runs DROP COLUMN axis")
    conn.execute("DROP TABLE machine_ceilings")  # schema 5's, after the axis
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    shown = run_cli("show", "1")
    assert shown.code == 0 and shown.out.splitlines()[7].split()[0] == "N"
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 3  # reading never migrates
    conn.close()
    assert run_cli("sweep", *fast_args, "--seq-lens", "16").code == 0  # a writer migrates
    with Store(db_path) as store:
        assert [r.axis for r in store.runs()] == ["seq_len", "seq_len"]


# --- item 4: GB/s beside TFLOP/s ---------------------------------------------------------------


def test_show_export_and_compare_give_gb_per_s_of_k_and_v(
    run_cli: RunCli, db_path: Path, tmp_path: Path
) -> None:
    first = decode_sweep(run_cli, "--q-len", "1", "--k-lens", "128,256")
    second = decode_sweep(run_cli, "--q-len", "1", "--k-lens", "128,256", "--pack-gqa")
    shown = run_cli("show", str(first["id"]))
    header, *rows = shown.out.splitlines()[7:]
    rows = [row for row in rows if row[:1].isdigit()]  # the points, not the notes under them
    assert header.split()[:2] == ["k_len", "median"] and "K+V GB/s" in header
    assert "% of read" not in header  # the reference's machine has no measured bandwidth
    column = header.index("K+V GB/s")
    for row, point in zip(rows, first["points"], strict=True):
        assert float(row[column:].split()[0]) == pytest.approx(kv_gbs(first, point), abs=0.051)

    out = tmp_path / "points.csv"
    assert run_cli("export", "--csv", out).code == 0
    exported = list(csv.DictReader(out.open(newline="")))
    assert [r["axis"] for r in exported] == ["k_len"] * 4
    for row, point in zip(exported[:2], first["points"], strict=True):
        assert float(row["kv_gbs"]) == pytest.approx(kv_gbs(first, point))
        assert row["kv_read_pct"] == ""

    compared = run_cli("compare", str(first["id"]), str(second["id"]))
    assert compared.code == 0
    table = compared.out.splitlines()[2]
    assert table.split()[:3] == ["k_len", f"#{first['id']}", "ms"]
    assert f"#{second['id']} GB/s" in table


def test_a_measured_read_bandwidth_gives_each_point_its_share(
    run_cli: RunCli, db_path: Path, tmp_path: Path
) -> None:
    run = decode_sweep(run_cli, "--q-len", "1", "--k-lens", "128")
    with Store(db_path) as store:
        machine = {**store.run(run["id"]).machine, "read_bandwidth_gbs": 0.25}
        store.db.execute("UPDATE runs SET machine = ?", [json.dumps(machine)])
        store.db.conn.commit()
    out = tmp_path / "points.csv"
    assert run_cli("export", "--csv", out).code == 0
    [row] = list(csv.DictReader(out.open(newline="")))
    assert float(row["kv_read_pct"]) == pytest.approx(100 * float(row["kv_gbs"]) / 0.25)
    shown = run_cli("show", str(run["id"]))
    assert "% of read" in shown.out


def test_report_of_a_decode_group_tabulates_gb_per_s(
    run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    cpu_peers.register(monkeypatch)
    result = run_cli(
        "sweep", *SMALL, "--backends", f"reference,{cpu_peers.NAME}", "--q-len", "2",
        "--k-lens", "128,256", "--mask", "causal",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert "k_len=128 …" in result.err
    markdown = run_cli("report", "--group", "1", "--markdown").out
    assert f"| mask | q_len | k_len | reference GB/s | {cpu_peers.NAME} GB/s |" in markdown
    assert "| causal | 2 | 128 |" in markdown and "| causal | 2 | 256 |" in markdown
    assert "GB/s = bytes of K and V" in markdown
    text = run_cli("report", "--group", "1").out
    assert text.split()[:3] == ["mask", "k_len", "reference"]
    data = json.loads(run_cli("report", "--group", "1", "--json").out)
    assert data["decode"] and all(r["kv_gbs"]["reference"] > 0 for r in data["rows"])


def test_a_report_of_decode_groups_of_different_problems_names_each_rows_problem(
    run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    cpu_peers.register(monkeypatch)
    sweep = ["sweep", *SMALL, "--backends", f"reference,{cpu_peers.NAME}", "--k-lens", "128"]
    assert run_cli(*sweep, "--batch", "1").code == 0 and run_cli(*sweep).code == 0
    markdown = run_cli("report", "--group", "1", "--group", "2", "--markdown").out
    assert "| problem | mask | q_len | k_len |" in markdown
    rows = [line for line in markdown.splitlines() if line.startswith("| B=")]
    assert [r.split(" | ")[0] for r in rows] == ["| B=1 H=8/2", "| B=2 H=8/2"]
    assert "B and H as each row says" in markdown


def test_a_decode_groups_readme_table_has_its_own_markers(
    run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from workbench.reports.readme_tables import (
        DECODE_README_BEGIN,
        DECODE_README_END,
        README_BEGIN,
        README_END,
    )

    cpu_peers.register(monkeypatch)
    sweep = ["sweep", *SMALL, "--backends", f"reference,{cpu_peers.NAME}"]
    assert run_cli(*sweep, "--k-lens", "128,256").code == 0
    readme = tmp_path / "README.md"
    prefill = f"{README_BEGIN}\nthe prefill table\n{README_END}"
    readme.write_text(f"# T\n\n{prefill}\n\n{DECODE_README_BEGIN}\nold\n{DECODE_README_END}\n")
    done = run_cli("report", "--group", "1", "--readme", str(readme))
    assert done.code == 0, done.err
    text = readme.read_text()
    assert prefill in text and "old" not in text and "| none | 1 | 256 |" in text
    # A README without the decode markers is refused, and left as it was.
    plain = tmp_path / "plain.md"
    plain.write_text(prefill)
    refused = run_cli("report", "--group", "1", "--readme", str(plain))
    assert refused.code == 2 and "decode performance table" in refused.err
    assert plain.read_text() == prefill


def test_the_bandwidth_measurement_with_a_fake_gpu(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.analysis import bandwidth
    from workbench.backends import gpu
    from workbench.cli.commands import bandwidth as bandwidth_command
    from workbench.cli.commands import machine as machine_command

    path = tmp_path / "machine.json"
    monkeypatch.setenv("FMHA_WORKBENCH_MACHINE", str(path))
    reads: list[int] = []

    def fake_timer(launch: Callable[[], object]) -> list[float]:
        launch()
        return [2.0, 1.0, 1.0]  # ms per read: the median is 1 ms

    measured = bandwidth.measure_read_bandwidth(
        "Fake GPU", lambda: reads.append(1), 4_000_000, fake_timer, lib="cupy"
    )
    assert reads == [1] and measured.gbs == pytest.approx(4.0) and measured.samples == 3

    monkeypatch.setattr(bandwidth_command, "local_gpu_name", lambda: "Fake GPU")
    monkeypatch.setattr(machine_command, "local_gpu_name", lambda: "Fake GPU")
    asked: list[int] = []

    def fake_gpu(name: str, size: int = bandwidth.STREAM_BYTES) -> bandwidth.ReadBandwidth:
        # 2 GiB gives the stored figure; the line's sizes read 3 µs + bytes at 4 GB/s.
        asked.append(size)
        if size == bandwidth.STREAM_BYTES:
            return measured
        ms = 0.003 + size / 4e9 * 1e3
        return bandwidth.measure_read_bandwidth(
            name, lambda: None, size, lambda _: [ms], lib="cupy"
        )

    monkeypatch.setattr(bandwidth, "measure_gpu_read_bandwidth", fake_gpu)
    result = run_cli("bandwidth")
    assert result.code == 0 and result.out.startswith("Fake GPU: 4 GB/s streaming read")
    assert asked == [bandwidth.STREAM_BYTES, *bandwidth.READ_LINE_SIZES]
    assert "a read of 134–537 MB: 3.0 µs + 4 GB/s a call" in result.out
    kept = json.loads(path.read_text())["Fake GPU"]
    assert kept["gbs"] == pytest.approx(4.0) and kept["fixed_us"] == pytest.approx(3.0)
    shown = run_cli("bandwidth", "--show")
    assert "Fake GPU: 4 GB/s; a read: 3.0 µs + 4 GB/s a call, cupy: sum of a" in shown.out
    # Every later run on that GPU carries it in its machine record.
    monkeypatch.setattr(gpu, "nvidia_smi_fields", lambda: {"gpu_name": "Fake GPU"})
    info = gpu.gpu_machine_info()
    assert info["read_bandwidth_gbs"] == pytest.approx(4.0)
    assert "CUDA-graph samples" in info["read_bandwidth_method"]
    assert bandwidth.read_line(info) == pytest.approx((3.0, 4.0))
    # Sizes that give no line (latency not growing with bytes) keep the figure without one.
    monkeypatch.setattr(
        bandwidth,
        "measure_gpu_read_bandwidth",
        lambda name, size=0: bandwidth.measure_read_bandwidth(
            name, lambda: None, size or 2**31, lambda _: [1.0], lib="cupy"
        ),
    )
    flat = run_cli("bandwidth")
    assert flat.code == 0 and "no fixed cost for the read: latency does not grow" in flat.err
    assert "fixed_us" in json.loads(path.read_text())["Fake GPU"]
    assert json.loads(path.read_text())["Fake GPU"]["fixed_us"] is None
    assert bandwidth.read_line(gpu.gpu_machine_info()) is None


def test_the_read_by_size_sits_beside_the_stored_figure_and_keeps_nothing(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.analysis import bandwidth
    from workbench.cli.commands import bandwidth as bandwidth_command
    from workbench.cli.commands import machine as machine_command

    path = tmp_path / "machine.json"
    monkeypatch.setenv("FMHA_WORKBENCH_MACHINE", str(path))
    monkeypatch.setattr(bandwidth_command, "local_gpu_name", lambda: "Fake GPU")
    monkeypatch.setattr(machine_command, "local_gpu_name", lambda: "Fake GPU")
    stored = bandwidth.measure_read_bandwidth(
        "Fake GPU", lambda: None, 4_000_000_000, lambda launch: [1.0], lib="cupy"
    )
    bandwidth.save_bandwidth(stored)  # 4,000 GB/s
    before = path.read_bytes()
    asked: list[int] = []

    def by_size(name: str, size: int) -> bandwidth.ReadBandwidth:
        # A fixed 5 µs a call plus the bytes at 4,000 GB/s, as a launch-bound GPU would read.
        asked.append(size)
        ms = 0.005 + size / 4e12 * 1e3
        return bandwidth.measure_read_bandwidth(
            name, lambda: None, size, lambda _: [ms], lib="cupy"
        )

    monkeypatch.setattr(bandwidth, "measure_gpu_read_bandwidth", by_size)
    result = run_cli("bandwidth", "--sizes", "20M,134M,268M,2Gi")
    assert result.code == 0 and asked == [20_000_000, 134_000_000, 268_000_000, 2**30 * 2]
    lines = result.out.splitlines()
    assert [line.split()[0] for line in lines[:4]] == ["20.0", "134.0", "268.0", "2,147.5"]
    assert "10.0 µs" in lines[0] and "2000 GB/s" in lines[0] and "50.0 % of 4000" in lines[0]
    assert "87.0 % of 4000" in lines[1]  # 134 MB: 33.5 µs of bytes after 5 µs of launch
    # The three sizes past 128 MB give the read's own fixed cost and rate back.
    assert lines[4] == (
        "fixed + bytes / rate over the sizes past 128 MB: 5.0 µs + 4000 GB/s (100 % of read) a call"
    )
    assert path.read_bytes() == before  # the stored ceiling stays the 2 GiB read
    shown = json.loads(run_cli("bandwidth", "--sizes", "20M", "--json").out)
    assert shown["stored_gbs"] == pytest.approx(4000) and shown["sizes"][0]["us"] == pytest.approx(
        10
    )
    assert shown["fit"] is None and shown["no_fit"].startswith("0 sizes past 128 MB")
    fitted = json.loads(run_cli("bandwidth", "--sizes", "134M,268M,536M", "--json").out)["fit"]
    assert fitted["fixed_us"] == pytest.approx(5.0) and fitted["rate_gbs"] == pytest.approx(4000)

    for bad, why in (("12X", "expected sizes such as"), ("100", "expected 1M to 32G"), ("", "")):
        refused = run_cli("bandwidth", "--sizes", bad)
        assert refused.code == 2 and why in refused.err_lines[0] and len(refused.err_lines) == 1
    both = run_cli("bandwidth", "--sizes", "20M", "--show")
    assert both.code == 2 and "not allowed with" in both.err
    assert path.read_bytes() == before
    assert bandwidth.rotation_copies(20_000_000) == 13 and bandwidth.rotation_copies(2**31) == 1


def test_bandwidth_without_a_gpu_is_refused(run_cli: RunCli) -> None:
    result = run_cli("bandwidth")
    assert result.code == 2 and "bandwidth: no GPU here" in result.err_lines[0]


# --- item 5: the block map shows the splits ------------------------------------------------------


def test_blockmap_json_says_which_split_reads_each_key_block(run_cli: RunCli) -> None:
    args = ["--q-len", "1", "--k-len", "1000", "--heads", "8", "--kv-heads", "2", "--pack-gqa"]
    result = run_cli("blockmap", *args, "--kv-splits", "4", "--tile-n", "64", "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    # Four query heads of a KV head packed as 4 rows of one 16-row tile; 16 key blocks, 4 each.
    assert data["shape"] == [1, 16] and data["tile_m"] == 16 and data["pack_gqa"]
    assert data["kv_splits"] == 4 and data["split_ranges"] == [[0, 4], [4, 8], [8, 12], [12, 16]]
    assert data["splits"] == [[s for s in range(4) for _ in range(4)]]
    text = run_cli("blockmap", *args, "--kv-splits", "4", "--tile-n", "64")
    assert "4 split(s) of the key range, key blocks 0-3, 4-7, 8-11, 12-15" in text.out
    assert "0000111122223333" in text.out


def test_a_causal_split_that_sees_no_key_is_skipped_in_the_map(run_cli: RunCli) -> None:
    """128 query rows over 256 keys from the top (input_pos 0): the second split's keys lie
    beyond every row of the first query block, so it reads nothing there."""
    args = ["--q-len", "128", "--k-len", "256", "--mask", "causal", "--kv-splits", "2"]
    data = json.loads(run_cli("blockmap", *args, "--json").out)
    assert data["splits"][0] == [0, -1, -1, -1] and data["splits"][1] == [0, 0, -1, -1]


def test_a_reference_decode_point_records_its_splits(run_cli: RunCli, db_path: Path) -> None:
    run = decode_sweep(
        run_cli, "--q-len", "1", "--k-lens", "512", "--pack-gqa", "--kv-splits", "auto",
        "--tile-n", "64",
    )  # fmt: skip
    [point] = run["points"]
    extra = point["extra"]
    # auto on the nominal 132-slot GPU: 4 CTAs of one split fill few SMs, so it splits.
    assert extra["kv_splits"] > 1 and extra["pack_gqa"] and extra["decode_tile_m"] == 16
    covered = [k for lo, hi in extra["split_ranges"] for k in range(lo, hi)]
    assert covered == list(range(8))
    with Store(db_path) as store:
        grid = store.block_map(run["id"], 512)
    assert grid is not None and grid.shape == (1, 8) and (grid == 1).all()
    header, row = run_cli("show", str(run["id"])).out.splitlines()[7:9]
    assert header.split()[-1] == "splits" and row.split()[-1] == str(extra["kv_splits"])


# --- item 6: peers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "version, available", [("2.4.1", False), ("2.5.0", True), ("2.11.0+cu130", True)]
)
def test_sdpa_peers_need_a_torch_whose_sdpa_takes_gqa_as_it_is(
    version: str, available: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The peers run GQA with enable_gqa (expanding K and V made cuDNN read 4x the bytes at
    decode on the H200): an older torch is refused with the reason, not run unfairly."""
    import sys
    from types import SimpleNamespace

    from workbench.backends import get_backend

    stand_in = SimpleNamespace(
        __version__=version,
        cuda=SimpleNamespace(
            is_available=lambda: True,
            get_device_name=lambda _=0: "NVIDIA H200",
            get_device_capability=lambda _=0: (9, 0),
        ),
        backends=SimpleNamespace(cudnn=SimpleNamespace(is_available=lambda: True)),
    )
    from workbench.backends import gpu, torch_sdpa

    monkeypatch.setitem(sys.modules, "torch", stand_in)
    # torch_device() is cached for the process: the peers ask the uncached one here.
    monkeypatch.setattr(torch_sdpa, "torch_device", gpu.torch_device.__wrapped__)
    for name in ("torch-flash", "torch-cudnn"):
        status = get_backend(name, isolated=False).availability()
        assert status.available == available, status.reason
        assert (
            available
            or status.reason == f"torch {version} is older than 2.5: its SDPA has no enable_gqa"
        )


def test_sdpa_peers_say_how_they_run_a_decode_mask() -> None:
    from workbench.backends.torch_sdpa import sdpa_causal_form

    causal, none = KernelConfig(mask="causal"), KernelConfig()
    one = Problem(heads=8, q_len=1, k_len=4096, input_pos=4095)
    draft = Problem(heads=8, q_len=16, k_len=4096, input_pos=4080)
    square = Problem(heads=8, q_len=256, k_len=256)
    assert sdpa_causal_form(one, none, "torch-flash", lower_right=False) == "none"
    assert sdpa_causal_form(one, causal, "torch-flash", lower_right=False) == "none"
    assert sdpa_causal_form(square, causal, "torch-flash", lower_right=False) == "is_causal"
    assert sdpa_causal_form(draft, causal, "torch-cudnn", lower_right=True) == "lower_right"
    with pytest.raises(ConfigError, match="has no kernel in SDPA's flash backend") as refused:
        sdpa_causal_form(draft, causal, "torch-flash", lower_right=False)
    assert refused.value.field == "q_len"  # a group skips that backend, with the reason
    offset = Problem(heads=8, q_len=16, k_len=4096, input_pos=7)
    with pytest.raises(ConfigError, match="causal offsets of k_len - q_len only"):
        sdpa_causal_form(offset, causal, "torch-cudnn", lower_right=True)


def test_a_group_skips_a_flash_like_peer_for_bottom_right_causal_and_says_why(
    run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, db_path: Path
) -> None:
    cpu_peers.register(monkeypatch)
    peers = f"reference,{cpu_peers.NAME},flash-like"
    draft = run_cli(
        "sweep", *SMALL, "--backends", peers, "--q-len", "4", "--k-lens", "128", "--mask", "causal"
    )
    assert draft.code == 0, draft.err
    assert "note: flash-like skips k_len=128: flash-like: causal with q_len 4 below k_len 128" in (
        draft.err
    )
    with Store(db_path) as store:
        assert [r.backend for r in store.group_runs(1)] == ["reference", cpu_peers.NAME]
    # One new token sees every key: the same peer runs it, without a mask.
    token = run_cli(
        "sweep", *SMALL, "--backends", peers, "--q-len", "1", "--k-lens", "128", "--mask", "causal"
    )
    assert token.code == 0 and "skips" not in token.err
    with Store(db_path) as store:
        assert [r.backend for r in store.group_runs(2)][-1] == "flash-like"


def test_backends_lists_what_each_peer_does_in_decode(run_cli: RunCli) -> None:
    data = json.loads(run_cli("backends", "--json").out)
    assert "no split of the key range on sm_90" in data["fa4"]["notes"]
    assert "refused" in data["torch-flash"]["notes"]
    assert "lower-right" in data["torch-cudnn"]["notes"]
    assert data["reference"]["notes"] == ""
    text = run_cli("backends").out
    assert "note: no split of the key range on sm_90" in text


# --- item 7: the decode ladder ----------------------------------------------------------------


def test_the_decode_ladder_preset_runs_from_the_cli(run_cli: RunCli, db_path: Path) -> None:
    result = run_cli("ladder", "--preset", "decode", *FAST_TIMING_ARGS, "--json")
    assert result.code == 0, result.err
    table = json.loads(result.out)
    assert table["axis"] == "k_len" and table["seq_lens"] == [256, 512]
    steps = [s["step"] for s in table["steps"]]
    assert steps == ["baseline (one CTA per head)", "+ GQA packing", "+ KV split (auto)",
                     "autotuned"]  # fmt: skip
    assert "pack-gqa" in table["steps"][1]["config"]
    assert "kv-split auto" in table["steps"][2]["config"]
    assert all(c["kv_gbs"] > 0 for s in table["steps"] for c in s["cells"].values())
    with Store(db_path) as store:
        runs = store.group_runs(table["group_id"])
        assert {r.axis for r in runs} == {"k_len"} and {r.problem.q_len for r in runs} == {1}
        assert all(r.status == "complete" for r in runs)
    text = run_cli("ladder", "--preset", "decode", *FAST_TIMING_ARGS, "--k-lens", "128").out
    assert "k_len=128" in text and "GB/s" in text


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--preset", "prefill"], "--preset prefill: expected one of hopper"),
        (["--preset", "decode", "--seq-lens", "128"], "give its lengths with --k-lens"),
        (["--k-lens", "128"], "--k-lens and --q-len are for a decode ladder"),
    ],
)
def test_bad_ladder_presets_are_refused(
    run_cli: RunCli, db_path: Path, args: list[str], words: str
) -> None:
    result = run_cli("ladder", *args)
    assert result.code == 2 and words in result.err_lines[0], result.err
    assert not db_path.exists()


def test_help_lists_the_decode_flags(capsys: pytest.CaptureFixture[str]) -> None:
    from workbench.cli import main

    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    shown = io.StringIO(capsys.readouterr().out).read()
    for flag in ("--k-lens", "--q-len", "--preset", "llama3-70b-decode", "--kv-splits"):
        assert flag in shown


def test_the_window_s_ladder_job_takes_the_decode_ladder_on_a_k_len_form_only() -> None:
    from workbench.jobs import ladder_job
    from workbench.jobs.ladder_steps import load_ladder

    decode = load_ladder(preset="decode")
    problem = Problem(heads=4, kv_heads=1, head_dim=32, q_len=1, k_len=1)
    prefill = SweepSpec(problem, (128,), KernelConfig())
    with pytest.raises(ConfigError, match="sweeps k_len at a fixed q_len") as refused:
        ladder_job(prefill, ["reference"], ladder=decode)
    assert refused.value.field == "axis"
    job = ladder_job(SweepSpec(problem, (128, 256), KernelConfig(), axis="k_len"), ["reference"],
                     ladder=decode)  # fmt: skip
    assert job.axis == "k_len" and job.preflight().total == 2 * len(decode.steps)
