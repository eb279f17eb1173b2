"""What the CuPy-based GPU backends (cuTile, naive) share: device memory, CUDA-event timing,
L2 flushing, peak memory from CuPy's pool, and host views of device arrays."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench.backends.base import Backend
from workbench.backends.gpu import (
    CupyEventTimer,
    HostView,
    cupy_free_bytes,
    cupy_l2_flusher,
    gpu_machine_info,
)
from workbench.timing import Timer, TimingSettings


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

    def timer(self) -> Timer:
        return CupyEventTimer()

    def between_samples(self, settings: TimingSettings) -> Callable[[], object] | None:
        return cupy_l2_flusher() if settings.flush_l2 else None

    def reset_peak_memory(self) -> None:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()

    def peak_memory_bytes(self) -> int | None:
        import cupy

        # The pool keeps every block it handed out, so its size after the launches is the peak.
        return int(cupy.get_default_memory_pool().total_bytes())

    def release(self) -> None:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
