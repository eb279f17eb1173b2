"""What the GPU backends share: detection that never raises, the GPU sampler, L2 flushing,
peak memory and the machine's metadata.

Nothing here imports CuPy or torch at module import; each function imports what it needs, so
a machine without them still imports the workbench and gets a one-line reason instead. The
torch/CuPy array shim (host views, dtype conversion) and the tileiras version are the kernel
package's (``kernels.cutile.arrays``, ``kernels.cutile.diagnostics``), which import neither
either; they are re-exported here for the backends.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from kernels.cutile.arrays import HostView as HostView  # re-exported for the backends
from kernels.cutile.arrays import as_torch as as_torch
from kernels.cutile.diagnostics import tileiras_version
from workbench.analysis.bandwidth import machine_bandwidth
from workbench.backends.base import Availability
from workbench.measure.machine import package_version
from workbench.measure.timing import TimingSettings

L2_FLUSH_BYTES = 256 * 1024 * 1024  # several times any current L2 (H200: 60 MB)


@lru_cache(maxsize=1)
def cupy_device() -> Availability:
    """Is there a CUDA device CuPy can use? Cached: the answer does not change in a process."""
    try:
        import cupy
    except ImportError:
        return Availability(False, "CuPy is not installed: pip install 'fmha-workbench[gpu]'")
    except Exception as exc:  # a broken CUDA install can fail at import
        return Availability(False, f"CuPy failed to load ({exc}); check the NVIDIA driver")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return Availability(False, f"no usable NVIDIA GPU or driver ({_first_line(exc)})")
    if count < 1:
        return Availability(False, "no NVIDIA GPU found")
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return Availability(True, f"{name} (sm_{props['major']}{props['minor']})")


@lru_cache(maxsize=1)
def torch_device() -> Availability:
    try:
        import torch
    except ImportError:
        return Availability(
            False, "torch is not installed (pip install torch to compare with SDPA)"
        )
    except Exception as exc:
        return Availability(False, f"torch failed to load ({_first_line(exc)})")
    if not torch.cuda.is_available():
        return Availability(False, "torch sees no CUDA GPU (CPU-only build or no driver)")
    name = torch.cuda.get_device_name(0)
    major, minor = torch.cuda.get_device_capability(0)
    return Availability(True, f"{name} (sm_{major}{minor}), torch {torch.__version__}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def launch_sampler(
    launch: Callable[[], Any],
    lib: str,
    settings: TimingSettings,
    flusher: Callable[[], Callable[[], object]],
) -> Any:
    """The project's one GPU timing procedure for ``launch`` (see kernels.measure)."""
    from kernels.measure import LaunchSampler

    between = flusher() if settings.flush_l2 else None
    return LaunchSampler(launch, lib, graph=settings.graph, between=between)


def cupy_l2_flusher() -> Callable[[], object]:
    import cupy

    scratch = cupy.empty(L2_FLUSH_BYTES // 4, dtype=cupy.int32)
    return lambda: scratch.fill(0)


def torch_l2_flusher() -> Callable[[], object]:
    import torch

    scratch = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    return scratch.zero_


def cupy_free_bytes() -> int | None:
    try:
        import cupy

        free, _total = cupy.cuda.runtime.memGetInfo()
        pool = cupy.get_default_memory_pool()
        return int(free + pool.free_bytes())
    except Exception:
        return None


def gpu_machine_info() -> dict[str, Any]:
    """GPU name, capability, SMs, memory, driver, clocks at start and library versions."""
    info: dict[str, Any] = {
        "cuda_tile": package_version("cuda-tile"),
        "tileiras": tileiras_version(),
        "cupy": package_version("cupy-cuda13x") or package_version("cupy"),
        "torch": package_version("torch"),
    }
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"]
        info.update(
            gpu_name=name.decode() if isinstance(name, bytes) else str(name),
            compute_capability=f"{props['major']}.{props['minor']}",
            sm_count=int(props["multiProcessorCount"]),
            memory_bytes=int(props["totalGlobalMem"]),
            driver=cupy.cuda.runtime.driverGetVersion(),
        )
    except Exception:
        pass
    info.update(nvidia_smi_fields())
    # This GPU's measured read bandwidth (`fmha-workbench bandwidth`), where it was measured.
    info.update(machine_bandwidth(info.get("gpu_name")))
    return info


def nvidia_smi_fields() -> dict[str, Any]:
    """Driver and clocks as nvidia-smi reports them at the start of a run (empty if absent)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return {}
    fields = ["name", "driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "power.limit"]
    try:
        out = subprocess.run(
            [smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    values = [v.strip() for v in out.split(",")]
    if len(values) != len(fields):
        return {}
    keys = [
        "gpu_name",
        "driver_version",
        "sm_clock_mhz",
        "mem_clock_mhz",
        "max_sm_clock_mhz",
        "power_limit_w",
    ]
    return dict(zip(keys, values))


# --- inputs on the device -------------------------------------------------------------------


def device_inputs(problem: Any, rng: Any) -> tuple[Any, Any, Any]:
    """Fresh standard-normal q, k, v drawn on the device with CuPy, as float32 values rounded
    to the problem's dtype. Every GPU backend starts from these, so backends swept as a group
    with one seed see the same numbers."""
    import cupy

    generator = cupy.random.default_rng(int(rng.integers(0, 2**63 - 1)))
    kv = problem.kv_heads
    shapes = [
        (problem.batch, problem.heads, problem.q_len, problem.head_dim),
        (problem.batch, kv, problem.k_len, problem.head_dim),
        (problem.batch, kv, problem.k_len, problem.value_dim),
    ]
    out = []
    for shape in shapes:
        x = generator.standard_normal(shape, dtype=cupy.float32)
        if problem.dtype == "float16":
            x = x.astype(cupy.float16).astype(cupy.float32)
        else:  # round to nearest even on the 16 bits bfloat16 drops, as on the host
            bits = x.view(cupy.uint32)
            bits = (bits + cupy.uint32(0x7FFF) + ((bits >> 16) & 1)) & cupy.uint32(0xFFFF0000)
            x = bits.view(cupy.float32)
        out.append(x)
    return tuple(out)
