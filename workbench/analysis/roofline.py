"""Where a point stands against this machine's measured ceilings (a roofline).

A machine record holds two ceilings measured once on the GPU (:func:`measure_ceilings`): the
dense matrix-multiply rate per dtype (TFLOP/s) and the streaming read bandwidth (GB/s). A
point's arithmetic intensity is its counted FLOPs (the TFLOP/s convention: causal halved) over
the bytes it must move at least (q, k, v read once, the output written once); the ceiling that
bounds it is the lower of the matmul rate and intensity × bandwidth, and its % is the point's
TFLOP/s over that bound (the same as its GB/s over the bandwidth when memory-bound). A run
whose GPU has no record here, or that ran on the CPU, gets no %, and :func:`no_ceiling_reason`
says why.
"""

from __future__ import annotations

import platform
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

from workbench.config import Problem

MEASURE_COMMAND = "fmha-workbench machine --measure"
# What each ceiling is, in words, for the record and the docs.
MATMUL_METHOD = (
    "dense N×N×N matrix multiply (N = {n}) in {dtypes}, 2·N³ FLOP over the median of "
    "CUDA-graph replays (kernels.measure, the workbench's one timer)"
)


@dataclass(frozen=True)
class Ceilings:
    """One machine's measured ceilings and where they were measured."""

    gpu_name: str
    matmul_tflops: dict[str, float]  # dtype -> dense matmul TFLOP/s
    read_gbs: float  # streaming read, GB/s (10^9 bytes)
    measured_at: str
    machine: dict[str, Any] = field(default_factory=dict)  # host, driver, clocks, library
    method: dict[str, str] = field(default_factory=dict)  # ceiling -> how it was measured
    id: int | None = None

    def matmul_for(self, dtype: str) -> float | None:
        return self.matmul_tflops.get(dtype)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu_name": self.gpu_name,
            "matmul_tflops": dict(self.matmul_tflops),
            "read_gbs": self.read_gbs,
            "measured_at": self.measured_at,
            "machine": dict(self.machine),
            "method": dict(self.method),
            "id": self.id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Ceilings:
        return cls(
            gpu_name=str(data["gpu_name"]),
            matmul_tflops={str(k): float(v) for k, v in dict(data["matmul_tflops"]).items()},
            read_gbs=float(data["read_gbs"]),
            measured_at=str(data["measured_at"]),
            machine=dict(data.get("machine") or {}),
            method=dict(data.get("method") or {}),
            id=data.get("id"),
        )


@dataclass(frozen=True)
class RooflinePoint:
    """One point against the ceilings."""

    intensity: float  # FLOP per byte moved at least
    tflops: float
    bound: str  # "compute" or "memory"
    pct_of_bound: float  # of the bounding ceiling at this intensity


def minimum_bytes(problem: Problem) -> int:
    """What one launch must move at least: q, k and v read once, the output written once."""
    return problem.tensor_bytes()


def point_roofline(
    problem: Problem, tflops: float, latency_ms: float, ceilings: Ceilings
) -> RooflinePoint | None:
    """``problem`` at the point's lengths; None where the record has no matmul rate for its
    dtype or the point has no time."""
    peak = ceilings.matmul_for(problem.dtype)
    if peak is None or latency_ms <= 0 or tflops <= 0 or ceilings.read_gbs <= 0:
        return None
    flops = tflops * 1e12 * latency_ms * 1e-3
    nbytes = minimum_bytes(problem)
    intensity = flops / nbytes
    memory_roof = intensity * ceilings.read_gbs / 1e3  # TFLOP/s
    bound = "memory" if memory_roof < peak else "compute"
    attainable = min(peak, memory_roof)
    return RooflinePoint(
        intensity=intensity,
        tflops=tflops,
        bound=bound,
        pct_of_bound=100.0 * tflops / attainable,
    )


ROOFLINE_COLUMNS = ("intensity_flop_per_byte", "roofline_bound", "pct_of_roofline")


def point_columns(
    problem: Problem, tflops: float, latency_ms: float, ceilings: Ceilings | None
) -> dict[str, Any]:
    """A point's roofline cells (CSV, tables): its intensity always, its bound and % only
    against a record of its GPU (None where there is none)."""
    point = None
    if ceilings is not None:
        point = point_roofline(problem, tflops, latency_ms, ceilings)
    flops = tflops * 1e12 * latency_ms * 1e-3
    intensity = flops / minimum_bytes(problem) if flops > 0 else None
    return {
        "intensity_flop_per_byte": round(intensity, 2) if intensity is not None else None,
        "roofline_bound": point.bound if point else None,
        "pct_of_roofline": round(point.pct_of_bound, 1) if point else None,
    }


def ran_on_the_cpu(backend: str, machine: dict[str, Any]) -> bool:
    """Whether a stored run's launches ran on the CPU: the reference backend (even on a GPU
    machine), or a backend whose machine record names no GPU (a NumPy plugin)."""
    return backend == "reference" or not machine.get("gpu_name")


def no_ceiling_reason(gpu_name: str, backend: str = "") -> str:
    """Why a run's points have no %: the CPU has no ceilings; a GPU has none recorded here."""
    if not gpu_name or backend == "reference":
        on = f"{backend or 'reference'} backend"  # a NumPy plugin runs on the CPU too
        return f"no % of roofline: the run ran on the CPU ({on}), which has no ceilings"
    return (
        f"no % of roofline: no measured ceilings for {gpu_name} in this database "
        f"(run `{MEASURE_COMMAND}` on that GPU)"
    )


def ceilings_for(records: Sequence[Ceilings], gpu_name: str) -> Ceilings | None:
    """The newest record of ``gpu_name`` (records newest first), or None."""
    if not gpu_name:
        return None
    for record in records:
        if record.gpu_name == gpu_name:
            return record
    return None


# --- measuring (on a GPU) ------------------------------------------------------------------------


class DeviceLib(Protocol):
    """What the measurements need of torch or CuPy (tests pass a stand-in)."""

    name: str

    def random(self, shape: tuple[int, ...], dtype: str) -> Any: ...

    def matmul(self, a: Any, b: Any) -> Any: ...

    def median_ms(self, launch: Callable[[], object]) -> float: ...

    def describe(self) -> dict[str, Any]: ...


def measure_matmul_tflops(lib: DeviceLib, dtype: str, n: int = 8192) -> float:
    """Dense N×N×N matmul in ``dtype``: 2·N³ FLOP over the median replay time, in TFLOP/s."""
    a, b = lib.random((n, n), dtype), lib.random((n, n), dtype)
    ms = lib.median_ms(lambda: lib.matmul(a, b))
    return 2.0 * n**3 / (ms * 1e-3) / 1e12


def measure_ceilings(
    lib: DeviceLib,
    gpu: Mapping[str, Any],
    read_gbs: float,
    read_method: str,
    *,
    dtypes: Sequence[str] = ("float16", "bfloat16"),
    n: int = 8192,
) -> Ceilings:
    """Both ceilings of this GPU (``gpu``: its machine facts, with ``gpu_name``): the matmul
    rate measured here, the streaming read as measured by ``workbench.analysis.bandwidth`` (one read
    measurement for the roofline and the decode columns)."""
    matmul = {dtype: measure_matmul_tflops(lib, dtype, n) for dtype in dtypes}
    return Ceilings(
        gpu_name=str(gpu.get("gpu_name") or "unknown GPU"),
        matmul_tflops={k: round(v, 1) for k, v in matmul.items()},
        read_gbs=round(read_gbs, 1),
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        machine={
            **dict(gpu),
            "hostname": socket.gethostname(),
            "platform": platform.platform(),
            **lib.describe(),
        },
        method={
            "matmul": MATMUL_METHOD.format(n=n, dtypes=", ".join(dtypes)),
            "read": read_method,
        },
    )


class TorchLib:
    """torch on the current CUDA device; timed with the workbench's graph timer."""

    name = "torch"

    def __init__(self) -> None:
        import torch

        self.torch = torch

    def random(self, shape: tuple[int, ...], dtype: str) -> Any:
        return self.torch.randn(*shape, device="cuda", dtype=getattr(self.torch, dtype))

    def matmul(self, a: Any, b: Any) -> Any:
        return a @ b

    def median_ms(self, launch: Callable[[], object]) -> float:
        from kernels.measure import graph_median_ms

        return graph_median_ms(launch, "torch", target_ms=50.0, replays=20)

    def describe(self) -> dict[str, Any]:
        return {"library": f"torch {self.torch.__version__}"}


class CupyLib:
    """CuPy on the current device (no bfloat16 matmul: CuPy has no bfloat16)."""

    name = "cupy"

    def __init__(self) -> None:
        import cupy

        self.cupy = cupy

    def random(self, shape: tuple[int, ...], dtype: str) -> Any:
        if dtype == "bfloat16":
            raise ValueError("CuPy has no bfloat16: measure with torch for that ceiling")
        return self.cupy.random.standard_normal(shape, dtype="float32").astype(dtype)

    def matmul(self, a: Any, b: Any) -> Any:
        return a @ b

    def median_ms(self, launch: Callable[[], object]) -> float:
        from kernels.measure import graph_median_ms

        return graph_median_ms(launch, "cupy", target_ms=50.0, replays=20)

    def describe(self) -> dict[str, Any]:
        return {"library": f"cupy {self.cupy.__version__}"}


def device_lib() -> tuple[DeviceLib | None, str]:
    """torch with CUDA, else CuPy with a GPU, and which; (None, why) where neither is here."""
    try:
        import torch

        if torch.cuda.is_available():
            return TorchLib(), "torch"
    except Exception:
        pass
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return CupyLib(), "cupy"
    except Exception:
        pass
    return None, "no GPU: neither torch with CUDA nor CuPy sees one"
