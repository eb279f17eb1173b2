"""Memory-bound reporting: bytes moved per second at each point, and this machine's own ceiling.

Decode attention is bound by reading K and V, so a point's TFLOP/s says little; its GB/s of K+V
(each byte of K and V read once: B·Hkv·k_len·(D + Dv)·itemsize over the median latency) and of Q+O
(Q read and O written once) say how close it runs to the memory system. The fraction is taken of
*this machine's measured* streaming-read bandwidth, not a datasheet figure:
:func:`measure_read_bandwidth` times a kernel that reads a large buffer once (2 GiB, far beyond
any L2, with CUDA graphs through the project's one timer; with CuPy one launch of 16-byte loads,
``workbench.measure.stream_read``, so that no second pass adds to the fixed cost of small reads) and
:func:`save_bandwidth` keeps the result per GPU in a small JSON file, which the GPU backends add
to every run's machine record (:func:`machine_bandwidth`). Without a measurement (a CPU, a GPU
never measured) there is no fraction, only GB/s.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import statistics
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from workbench.config import Problem

# The machine record's keys: the measured read bandwidth and how it was measured.
READ_BANDWIDTH_KEY = "read_bandwidth_gbs"
READ_BANDWIDTH_METHOD_KEY = "read_bandwidth_method"
# The same read as a line, latency = fixed + bytes / rate, over READ_LINE_SIZES: the fixed cost
# a kernel that reads its bytes once pays a call (launch, the first bytes' latency, the tail).
READ_FIXED_KEY = "read_fixed_us"
READ_LINE_RATE_KEY = "read_line_rate_gbs"
# Past twice the H200's L2 (what the decode fits take) and in the range of a decode call's K+V.
READ_LINE_SIZES = (134_217_728, 268_435_456, 536_870_912)
# 2 GiB: over thirty times the largest L2 in service (H200: 60 MB), so every sample reads HBM.
STREAM_BYTES = 2 << 30
STREAM_SAMPLES = 20
# A read smaller than this is made from copies taken in turn, so that no call finds its bytes
# still in L2 from the call before (four times the H200's 60 MB L2).
ROTATION_BYTES = 256_000_000


def point_gbs(problem: Problem, latency_ms: float | None) -> tuple[float | None, float | None]:
    """GB/s (10⁹ bytes a second) of K+V and of Q+O at one point; None without a latency."""
    if not latency_ms or latency_ms <= 0:
        return None, None
    seconds = latency_ms * 1e-3
    return problem.kv_bytes() / seconds / 1e9, problem.qo_bytes() / seconds / 1e9


def read_fraction_pct(kv_gbs: float | None, machine: Mapping[str, Any]) -> float | None:
    """``kv_gbs`` in % of the machine's measured read bandwidth; None where it was not measured."""
    ceiling = machine.get(READ_BANDWIDTH_KEY)
    if kv_gbs is None or not isinstance(ceiling, (int, float)) or ceiling <= 0:
        return None
    return 100.0 * kv_gbs / float(ceiling)


class StoredPoint(Protocol):
    """What :func:`point_bandwidth` reads of a point (a ``workbench.store.PointRecord``)."""

    @property
    def latency_ms(self) -> float: ...


class StoredRun(Protocol):
    """What :func:`point_bandwidth` reads of a run (a ``workbench.store.RunRecord``)."""

    @property
    def machine(self) -> dict[str, Any]: ...

    def point_problem(self, point: Any) -> Problem: ...


def point_bandwidth(run: StoredRun, point: StoredPoint) -> dict[str, float | None]:
    """GB/s of K+V and of Q+O at a stored ``point`` of ``run``, and K+V in % of the run's
    machine's measured read bandwidth (None where it was not measured)."""
    kv_gbs, qo_gbs = point_gbs(run.point_problem(point), point.latency_ms)
    return {
        "kv_gbs": kv_gbs,
        "qo_gbs": qo_gbs,
        "kv_read_pct": read_fraction_pct(kv_gbs, run.machine),
    }


@dataclass(frozen=True)
class ReadBandwidth:
    """One measurement of a GPU's streaming-read bandwidth."""

    gpu: str
    gbs: float  # median over the samples
    bytes_read: int
    samples: int
    method: str
    measured_at: str
    # The read at READ_LINE_SIZES fitted as fixed + bytes / rate (None where not measured).
    fixed_us: float | None = None
    line_rate_gbs: float | None = None


def measure_read_bandwidth(
    gpu: str,
    read_once: Callable[[], object],
    bytes_read: int,
    time_ms: Callable[[Callable[[], object]], list[float]],
    *,
    lib: str,
    reader: str = "sum",
) -> ReadBandwidth:
    """Time ``read_once`` (a launch that reads ``bytes_read`` bytes of device memory once) with
    ``time_ms`` (milliseconds per call, one per sample) and return its median read rate;
    ``reader`` says what kind of launch it is, for the method line."""
    samples = time_ms(read_once)
    if not samples or min(samples) <= 0:
        raise ValueError("the streaming read gave no positive timing")
    median_ms = statistics.median(samples)
    copies = rotation_copies(bytes_read)
    size = f"{bytes_read / 2**30:.0f} GiB" if bytes_read >= 2**30 else f"{bytes_read / 1e6:,.1f} MB"
    what = (
        f"a {size} float32 buffer (read once, far beyond L2)"
        if copies == 1
        else f"a {size} float32 buffer, {copies} copies taken in turn (beyond L2)"
    )
    method = f"{lib}: {reader} of {what}, median of {len(samples)} CUDA-graph samples"
    return ReadBandwidth(
        gpu=gpu,
        gbs=bytes_read / (median_ms * 1e-3) / 1e9,
        bytes_read=bytes_read,
        samples=len(samples),
        method=method,
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def rotation_copies(bytes_read: int) -> int:
    """How many copies of a ``bytes_read`` buffer a measurement reads in turn (see
    ``ROTATION_BYTES``); 1 for a buffer that is already far beyond L2."""
    return max(1, math.ceil(ROTATION_BYTES / bytes_read))


def measure_gpu_read_bandwidth(gpu: str, bytes_read: int = STREAM_BYTES) -> ReadBandwidth:
    """:func:`measure_read_bandwidth` on the local GPU (named ``gpu`` in the machine record):
    CuPy where installed, else torch. Below ``ROTATION_BYTES`` the calls read copies in turn,
    so that each one reads HBM, as a decode call reads a KV cache it did not just write."""
    from kernels.measure import LaunchSampler

    # Whole 16-byte words: the streaming kernel's loads.
    elements = max(4, bytes_read // 16 * 4)
    copies = rotation_copies(bytes_read)
    turn = itertools.cycle(range(copies))
    try:
        import cupy

        from workbench.measure.stream_read import StreamRead, describe

        lib, reader = "cupy", describe()
        readers = [StreamRead(cupy.ones(elements, dtype=cupy.float32)) for _ in range(copies)]

        def read_once() -> object:
            return readers[next(turn)]()

    except ImportError:
        import torch

        lib, reader = "torch", "sum"
        tensors = [torch.ones(elements, dtype=torch.float32, device="cuda") for _ in range(copies)]

        def read_once() -> object:
            return tensors[next(turn)].sum()

    def time_ms(launch: Callable[[], object]) -> list[float]:
        sampler = LaunchSampler(launch, lib)
        samples: list[float] = []
        while len(samples) < STREAM_SAMPLES:
            samples.extend(sampler.turn())
        return samples

    return measure_read_bandwidth(gpu, read_once, elements * 4, time_ms, lib=lib, reader=reader)


def bandwidth_path() -> Path:
    """``$FMHA_WORKBENCH_MACHINE``, else ``~/.cache/fmha-workbench/machine.json``."""
    named = os.environ.get("FMHA_WORKBENCH_MACHINE")
    if named:
        return Path(named).expanduser()
    return Path.home() / ".cache" / "fmha-workbench" / "machine.json"


def _read_all(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_bandwidth(measured: ReadBandwidth, path: Path | None = None) -> Path:
    """Keep ``measured`` as its GPU's read bandwidth (replacing an earlier one)."""
    from workbench.safe_write import write_bytes_safely

    path = path or bandwidth_path()
    data = _read_all(path)
    data[measured.gpu] = asdict(measured)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_safely(path, json.dumps(data, indent=2).encode("utf-8"))
    return path


def stored_measurements(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every GPU's stored measurement, by GPU name."""
    return {k: v for k, v in _read_all(path or bandwidth_path()).items() if isinstance(v, dict)}


def machine_bandwidth(gpu: str | None, path: Path | None = None) -> dict[str, Any]:
    """The machine-record fields of ``gpu``'s stored measurement; {} where there is none."""
    if not gpu:
        return {}
    entry = _read_all(path or bandwidth_path()).get(gpu)
    if not isinstance(entry, dict) or not isinstance(entry.get("gbs"), (int, float)):
        return {}
    fields: dict[str, Any] = {
        READ_BANDWIDTH_KEY: round(float(entry["gbs"]), 1),
        READ_BANDWIDTH_METHOD_KEY: str(entry.get("method", "")),
    }
    fixed, rate = entry.get("fixed_us"), entry.get("line_rate_gbs")
    if isinstance(fixed, (int, float)) and isinstance(rate, (int, float)) and rate > 0:
        fields[READ_FIXED_KEY] = round(float(fixed), 2)
        fields[READ_LINE_RATE_KEY] = round(float(rate), 1)
    return fields


def read_line(machine: Mapping[str, Any]) -> tuple[float, float] | None:
    """A machine record's plain read as (fixed µs a call, GB/s); None where not measured."""
    fixed, rate = machine.get(READ_FIXED_KEY), machine.get(READ_LINE_RATE_KEY)
    if not isinstance(fixed, (int, float)) or not isinstance(rate, (int, float)) or rate <= 0:
        return None
    return float(fixed), float(rate)


def read_line_text(line: tuple[float, float]) -> str:
    """``2.4 µs + 4565 GB/s a call``: what a kernel that only reads pays for its bytes."""
    return f"{line[0]:.1f} µs + {line[1]:.0f} GB/s a call"
