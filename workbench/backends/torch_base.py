"""What the backends on torch tensors (SDPA's peers, FlashAttention-4) share: inputs drawn on the
device, torch's caching allocator for capacity and peak memory, and the GPU sampler on torch's
current stream."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from workbench.backends.base import Backend
from workbench.backends.gpu import (
    HostView,
    as_torch,
    device_inputs,
    gpu_machine_info,
    launch_sampler,
    torch_l2_flusher,
)
from workbench.config import Problem
from workbench.measure.timing import Sampler, TimingSettings


class TorchBackend(Backend):
    def default_timing(self) -> TimingSettings:
        return TimingSettings(warmup=5, min_samples=30, min_time_s=0.5)

    def memory_capacity(self) -> int | None:
        import torch

        free, _total = torch.cuda.mem_get_info()
        return int(free)

    def machine_info(self) -> dict[str, Any]:
        return gpu_machine_info()

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> tuple[Any, ...]:
        return tuple(as_torch(x, problem.dtype) for x in device_inputs(problem, rng))

    def host_view(self, tensor: Any) -> Any:
        # A ragged batch's host tables, and a padded batch's rows read through its lengths,
        # are host views already.
        if isinstance(tensor, np.ndarray) or getattr(tensor, "is_host_view", False):
            return tensor
        return HostView(tensor)

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize()

    def sampler(self, launch: Callable[[], Any], settings: TimingSettings) -> Sampler:
        return launch_sampler(launch, "torch", settings, torch_l2_flusher)

    def reset_peak_memory(self) -> None:
        import torch

        torch.cuda.reset_peak_memory_stats()
        self._baseline_bytes = int(torch.cuda.memory_allocated())

    def peak_memory_bytes(self) -> int | None:
        import torch

        peak = int(torch.cuda.max_memory_allocated())
        return max(peak - getattr(self, "_baseline_bytes", 0), 0)

    def release(self) -> None:
        import torch

        torch.cuda.empty_cache()


def upload_serving(
    arrays: tuple[np.ndarray, ...], dtype: str, device: str = "cuda"
) -> tuple[Any, ...]:
    """A ragged batch's host inputs (:func:`~workbench.measure.serving_inputs.
    serving_host_inputs`) on ``device`` as torch tensors: the float ones in ``dtype``; the
    int32 offsets or block table stay host NumPy (the accuracy check reads them there; a
    backend's prepare copies them to the device once)."""
    import torch

    return tuple(
        torch.from_numpy(x).to(device=device, dtype=getattr(torch, dtype))
        if x.dtype == np.float32
        else x
        for x in arrays
    )
