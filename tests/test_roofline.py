"""The roofline: measuring the ceilings (with a stand-in device), storing them, a point's
intensity and % of its bound, and the CLI's `machine` command and CSV columns."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from workbench.analysis.roofline import (
    Ceilings,
    measure_ceilings,
    measure_matmul_tflops,
    no_ceiling_reason,
    point_roofline,
)
from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.store import Store

H200 = Ceilings(
    gpu_name="NVIDIA H200",
    matmul_tflops={"float16": 700.0, "bfloat16": 690.0},
    read_gbs=4000.0,
    measured_at="2026-12-01T10:00:00+00:00",
    machine={"hostname": "gpu-host"},
    method={"matmul": "m", "read": "r"},
)


class NumpyDevice:
    """Stands in for torch on a GPU: NumPy arrays, and a clock that says each matmul took
    ``matmul_ms`` (after really running it once, so a broken launch still fails)."""

    name = "numpy"

    def __init__(self, rng: np.random.Generator, matmul_ms: float) -> None:
        self.rng = rng
        self.matmul_ms = matmul_ms
        self.launched: list[str] = []

    def random(self, shape: tuple[int, ...], dtype: str) -> Any:
        return self.rng.standard_normal(shape).astype("float16")

    def matmul(self, a: Any, b: Any) -> Any:
        self.launched.append("matmul")
        return a @ b

    def median_ms(self, launch: Any) -> float:
        launch()
        return self.matmul_ms

    def describe(self) -> dict[str, Any]:
        return {"library": "numpy (a stand-in)"}


def test_the_ceilings_are_flops_and_bytes_over_the_timed_launch(rng: np.random.Generator) -> None:
    n = int(rng.integers(16, 64))
    matmul_ms = float(rng.uniform(0.5, 5.0))
    device = NumpyDevice(rng, matmul_ms)
    assert measure_matmul_tflops(device, "float16", n) == pytest.approx(
        2 * n**3 / (matmul_ms * 1e-3) / 1e12
    )
    read_gbs = float(rng.uniform(1000, 5000))
    record = measure_ceilings(
        device, {"gpu_name": "NVIDIA H200", "driver_version": "580"}, read_gbs, "a read", n=n
    )
    assert record.gpu_name == "NVIDIA H200" and set(record.matmul_tflops) == {
        "float16", "bfloat16",
    }  # fmt: skip
    assert record.read_gbs == pytest.approx(read_gbs, abs=0.05)
    assert record.machine["driver_version"] == "580" and "numpy" in record.machine["library"]
    assert f"N = {n}" in record.method["matmul"] and record.method["read"] == "a read"
    assert Ceilings.from_dict(record.to_dict()) == record


def test_a_point_is_measured_against_the_ceiling_that_bounds_it(rng: np.random.Generator) -> None:
    # Prefill at N = 8k, D = 128: ~1,000 FLOP a byte, far right of the ridge (175): compute.
    prefill = Problem(batch=4, heads=32, head_dim=128, q_len=8192, k_len=8192)
    tflops = float(rng.uniform(300, 600))
    flops = 4 * 4 * 32 * 8192 * 8192 * 128
    latency_ms = flops / (tflops * 1e12) * 1e3
    point = point_roofline(prefill, tflops, latency_ms, H200)
    assert point is not None and point.bound == "compute"
    assert point.intensity == pytest.approx(flops / prefill.tensor_bytes())
    assert point.pct_of_bound == pytest.approx(100 * tflops / 700)
    # Decode (one query row against 32k keys): ~1 FLOP a byte, memory-bound: % of the GB/s.
    decode = Problem(batch=1, heads=32, head_dim=128, q_len=1, k_len=32768)
    gbs = float(rng.uniform(1000, 3900))
    latency_ms = decode.tensor_bytes() / (gbs * 1e9) * 1e3
    decode_flops = 4 * 32 * 1 * 32768 * 128
    point = point_roofline(decode, decode_flops / (latency_ms * 1e-3) / 1e12, latency_ms, H200)
    assert point is not None and point.bound == "memory"
    assert point.pct_of_bound == pytest.approx(100 * gbs / 4000)
    # No matmul rate for the dtype, no time: no %.
    assert point_roofline(decode, 1.0, 0.0, H200) is None
    assert "CPU" in no_ceiling_reason("", "reference")
    assert "fmha-workbench machine --measure" in no_ceiling_reason("NVIDIA H200", "cutile")


def test_machine_measure_without_a_gpu_exits_2_in_one_line_and_writes_nothing(
    run_cli: Any, db_path: Path
) -> None:
    from workbench.analysis.roofline import device_lib

    lib, why = device_lib()
    if lib is not None:
        pytest.skip("a GPU is here: the refusal is for machines without one")
    result = run_cli("machine", "--measure", "--db", db_path)
    assert result.code == 2 and result.err_lines == [f"error: cannot measure the ceilings: {why}"]
    assert not db_path.exists()


def _gpu_run(
    store: Store,
    measure: Any,
    gpu: str,
    rng: np.random.Generator,
    group_id: int | None = None,
    backend: str = "reference",
    machine: dict[str, Any] | None = None,
) -> int:
    spec = SweepSpec(
        Problem(batch=1, heads=1, head_dim=32, q_len=1, k_len=1),
        (128,),
        KernelConfig(),
        backend=backend,
    )
    record = {"gpu_name": gpu, **(machine or {})}
    run_id = store.create_run(spec, record, group_id=group_id, step=backend)
    store.add_point(run_id, measure(spec.problems()[0], spec.config, rng))
    store.finish_run(run_id, "complete")
    return run_id


def test_a_gpu_plugins_points_get_their_percent_and_a_cpu_plugins_say_why_not(
    run_cli: Any, db_path: Path, measure: Any, rng: np.random.Generator
) -> None:
    """A plugin's run is placed on the roofline as any backend's: by the GPU its record names
    (a ``cuda`` plugin's); a NumPy plugin's run names none and says it ran on the CPU."""
    own = {"plugin_path": "/work/my_attn.py", "plugin_knobs": {"tile": 64}}
    with Store(db_path) as store:
        store.add_ceilings(H200.to_dict())
        gpu = _gpu_run(store, measure, "NVIDIA H200", rng, backend="my-attn", machine=own)
        cpu = _gpu_run(store, measure, "", rng, backend="numpy-softcap", machine=own)
        point, problem = store.points(gpu)[0], store.run(gpu).problem
    expected = point_roofline(problem, point.tflops, point.latency_ms, H200)
    assert expected is not None
    shown = run_cli("show", gpu, "--db", db_path).out.splitlines()
    assert shown[-1].split()[-1] == f"{expected.pct_of_bound:.0f}"
    rows = {
        int(r["run_id"]): r
        for r in csv.DictReader(io.StringIO(run_cli("export", "--csv", "-", "--db", db_path).out))
    }
    assert float(rows[gpu]["pct_of_roofline"]) == pytest.approx(expected.pct_of_bound, abs=0.05)
    assert rows[cpu]["pct_of_roofline"] == ""
    said = run_cli("show", cpu, "--db", db_path).out.splitlines()[-1]
    assert said == no_ceiling_reason("", "numpy-softcap")


def test_stored_ceilings_give_each_point_of_that_gpu_its_percent_in_the_csv(
    run_cli: Any, db_path: Path, measure: Any, rng: np.random.Generator
) -> None:
    with Store(db_path) as store:
        h200 = _gpu_run(store, measure, "NVIDIA H200", rng)
        other = _gpu_run(store, measure, "NVIDIA B200", rng)
    empty = run_cli("machine", "--db", db_path)
    assert empty.code == 0 and "no measured ceilings" in empty.out
    rows = list(csv.DictReader(io.StringIO(run_cli("export", "--csv", "-", "--db", db_path).out)))
    assert all(r["pct_of_roofline"] == "" and float(r["intensity_flop_per_byte"]) > 0 for r in rows)

    with Store(db_path) as store:
        older = store.add_ceilings({**H200.to_dict(), "read_gbs": 1.0})
        newer = store.add_ceilings(H200.to_dict())
    listed = run_cli("machine", "--db", db_path)
    assert listed.out.splitlines()[0].startswith(f"#{newer} NVIDIA H200 (gpu-host, 2026-12-01")
    assert "read 4000 GB/s" in listed.out.splitlines()[0] and f"#{older}" in listed.out
    rows = {
        int(r["run_id"]): r
        for r in csv.DictReader(io.StringIO(run_cli("export", "--csv", "-", "--db", db_path).out))
    }
    with Store(db_path) as store:
        point = store.points(h200)[0]
        problem = store.run(h200).problem
    expected = point_roofline(problem, point.tflops, point.latency_ms, H200)  # the newest record
    assert expected is not None
    assert rows[h200]["roofline_bound"] == expected.bound
    assert float(rows[h200]["pct_of_roofline"]) == pytest.approx(expected.pct_of_bound, abs=0.05)
    assert rows[other]["pct_of_roofline"] == ""  # no B200 record: no %, not the H200's
    shown = run_cli("show", h200, "--db", db_path).out.splitlines()
    header = next(line for line in shown if line.startswith("N "))
    assert header.rstrip().endswith("% roof")
    assert shown[-1].split()[-1] == f"{expected.pct_of_bound:.0f}"
    other_shown = run_cli("show", other, "--db", db_path).out.splitlines()
    assert other_shown[-1] == no_ceiling_reason("NVIDIA B200", "reference")
    # A database from before ceilings were kept reads without them, read-only, unmigrated.
    conn = sqlite3.connect(db_path)
    conn.execute("DROP TABLE machine_ceilings")
    conn.execute("PRAGMA user_version = 4")  # uuids and axes, no ceilings yet
    conn.commit()
    conn.close()
    old = run_cli("machine", "--db", db_path, "--json")
    assert old.code == 0 and old.out.strip() == "[]"


def test_the_report_gives_each_backends_percent_once_the_gpu_has_ceilings(
    run_cli: Any, db_path: Path, measure: Any, rng: np.random.Generator
) -> None:
    with Store(db_path) as store:
        group = store.create_group("backends", "pair")
        for backend in ("cutile", "torch-cudnn"):
            _gpu_run(store, measure, "NVIDIA H200", rng, group_id=group, backend=backend)
    without = run_cli("report", "--group", group, "--markdown", "--db", db_path)
    assert without.code == 0, without.err
    assert "% of roofline |" not in without.out
    assert "- no % of roofline: no measured ceilings for NVIDIA H200" in without.out
    with Store(db_path) as store:
        store.add_ceilings(H200.to_dict())
    report = run_cli("report", "--group", group, "--markdown", "--db", db_path)
    header = next(line for line in report.out.splitlines() if line.startswith("| mask"))
    assert header.endswith("| cutile % of roofline | torch-cudnn % of roofline |")
    row = next(line for line in report.out.splitlines() if line.startswith("| none"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert all(c.endswith(" %") for c in cells[-2:])
    assert "from NVIDIA H200's ceilings measured 2026-12-01" in report.out


def test_compare_shows_each_runs_percent_and_says_why_a_run_has_none(
    run_cli: Any, db_path: Path, measure: Any, rng: np.random.Generator
) -> None:
    from workbench.analysis.compare import roofline_points

    with Store(db_path) as store:
        gpu = _gpu_run(store, measure, "NVIDIA H200", rng, backend="cutile")
        cpu = _gpu_run(store, measure, "", rng)
        store.add_ceilings(H200.to_dict())
    text = run_cli("compare", cpu, gpu, "--db", db_path).out
    header = next(line for line in text.splitlines() if line.startswith("N "))
    assert f"#{gpu} % roof" in header and f"#{cpu} % roof" not in header
    assert "no % of roofline: the run ran on the CPU (reference backend)" in text
    data = json.loads(run_cli("compare", cpu, gpu, "--json", "--db", db_path).out)
    cells = data["points"][0]["runs"]
    assert cells[str(cpu)]["pct_of_roofline"] is None
    assert cells[str(gpu)]["pct_of_roofline"] > 0
    # The roofline chart's data: the H200's ceilings, every run's points with their %.
    with Store(db_path) as store:
        chart = roofline_points(store, [gpu, cpu])
    assert chart["ceilings"]["gpu_name"] == "NVIDIA H200" and chart["reason"] == ""
    mine = chart["runs"][0]["points"][0]
    assert mine["pct_of_roofline"] == pytest.approx(cells[str(gpu)]["pct_of_roofline"])
    assert mine["intensity"] > 0 and chart["runs"][1]["points"][0]["pct_of_roofline"] is None
    with Store(db_path) as store:
        alone = roofline_points(store, [cpu])
    assert alone["ceilings"] is None and "CPU" in alone["reason"]
    # The window's Roofline view, headless: the ceilings, then a row per point.
    table = run_cli("roofline", gpu, cpu, "--db", db_path).out.splitlines()
    assert table[0].startswith("#1 NVIDIA H200 (gpu-host")
    assert table[1].split() == ["run", "N", "FLOP/byte", "TFLOP/s", "%", "roof", "config"]
    assert table[2].split()[:2] == [f"#{gpu}", "128"] and table[3].split()[4] == "-"
    missing = run_cli("roofline", 99, "--db", db_path)
    assert missing.code == 2 and missing.err_lines == [
        "error: run 99 does not exist (see `fmha-workbench runs`)"
    ]


def test_machine_measure_stores_the_ceilings_and_the_read_figure_decode_points_use(
    run_cli: Any, db_path: Path, rng: np.random.Generator, tmp_path: Path, monkeypatch: Any
) -> None:
    import functools

    import workbench.analysis.roofline as roofline
    import workbench.backends.gpu as gpu
    from workbench.analysis import bandwidth

    device = NumpyDevice(rng, matmul_ms=2.0)
    read_ms = float(rng.uniform(0.5, 5.0))
    measured = bandwidth.measure_read_bandwidth(
        "NVIDIA H200", lambda: None, 4000, lambda launch: [read_ms] * 3, lib="cupy"
    )
    monkeypatch.setattr(roofline, "device_lib", lambda: (device, "torch"))
    monkeypatch.setattr(
        roofline, "measure_ceilings", functools.partial(roofline.measure_ceilings, n=32)
    )
    monkeypatch.setattr(bandwidth, "measure_gpu_read_bandwidth", lambda name, size=0: measured)
    monkeypatch.setattr(gpu, "gpu_machine_info", lambda: {"gpu_name": "NVIDIA H200"})
    monkeypatch.setenv("FMHA_WORKBENCH_MACHINE", str(tmp_path / "machine.json"))

    done = run_cli("machine", "--measure", "--db", db_path, "--json")
    assert done.code == 0, done.err
    record = json.loads(done.out)
    expected = 4000 / (read_ms * 1e-3) / 1e9
    assert record["read_gbs"] == pytest.approx(expected, abs=0.05)
    assert record["method"]["read"] == measured.method
    # One measurement: the decode columns' % of read bandwidth uses the same figure.
    kept = bandwidth.machine_bandwidth("NVIDIA H200")
    assert kept[bandwidth.READ_BANDWIDTH_KEY] == pytest.approx(expected, abs=0.1)
    shown = run_cli("bandwidth", "--show")
    assert shown.code == 0 and shown.out.startswith("NVIDIA H200: ")
