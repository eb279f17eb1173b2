"""What the CuPy-based GPU backends (cuTile, naive) share: device memory, the GPU sampler,
L2 flushing, peak memory from CuPy's pool, and host views of device arrays."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench.backends.base import Backend
from workbench.backends.gpu import (
    HostView,
    cupy_free_bytes,
    cupy_l2_flusher,
    gpu_machine_info,
    launch_sampler,
)
from workbench.measure.timing import Sampler, TimingSettings


class CupyBackend(Backend):
    def memory_capacity(self) -> int | None:
        return cupy_free_bytes()

    def machine_info(self) -> dict[str, Any]:
        return gpu_machine_info()

    def host_view(self, tensor: Any) -> Any:
        return HostView(tensor)

    def synchronize(self) -> None:
        import cupy

        cupy.cuda.Device().synchronize()

    lib = "cupy"  # the array library of this backend's inputs (what its launches run on)

    def sampler(self, launch: Callable[[], Any], settings: TimingSettings) -> Sampler:
        return launch_sampler(launch, self.lib, settings, cupy_l2_flusher)

    def reset_peak_memory(self) -> None:
        import cupy

        pool = cupy.get_default_memory_pool()
        pool.free_all_blocks()
        self._baseline_bytes = int(pool.used_bytes())

    def peak_memory_bytes(self) -> int | None:
        import cupy

        # The pool keeps every block it handed out, so its size after the launches is the peak.
        total = int(cupy.get_default_memory_pool().total_bytes())
        return max(total - getattr(self, "_baseline_bytes", 0), 0)

    def release(self) -> None:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
