"""Peers: torch's scaled_dot_product_attention with its backend forced (FA2 "flash" or cuDNN).

torch picks FA2 by default on Hopper, so each peer pins its backend with ``sdpa_kernel``. GQA
key/value heads are expanded once before timing, so the timed call is plain multi-head attention.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from workbench.backends.base import Availability, Backend
from workbench.backends.gpu import (
    HostView,
    TorchEventTimer,
    as_torch,
    device_inputs,
    gpu_machine_info,
    torch_device,
    torch_graph_launch,
    torch_l2_flusher,
)
from workbench.config import ConfigError, KernelConfig, Problem
from workbench.timing import Timer, TimingSettings


class TorchSdpaBackend(Backend):
    sdpa_backend: ClassVar[str]  # name of a torch.nn.attention.SDPBackend member

    def __init__(self) -> None:
        self._settings: TimingSettings | None = None

    def availability(self) -> Availability:
        status = torch_device()
        if not status.available:
            return status
        import torch

        if self.sdpa_backend == "CUDNN_ATTENTION" and not torch.backends.cudnn.is_available():
            return Availability(False, "torch was built without cuDNN")
        return Availability(True, f"torch SDPA {self.description} on {status.reason}")

    def default_timing(self) -> TimingSettings:
        return TimingSettings(warmup=5, min_samples=30, min_time_s=0.5)

    def memory_capacity(self) -> int | None:
        import torch

        free, _total = torch.cuda.mem_get_info()
        return int(free)

    def machine_info(self) -> dict[str, Any]:
        return gpu_machine_info()

    def check_supported(self, problem: Problem, config: KernelConfig) -> None:
        super().check_supported(problem, config)
        if config.mask == "window":
            raise ConfigError("mask", "window", f"{self.name} has no sliding-window mask")

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> tuple[Any, ...]:
        return tuple(as_torch(x, problem.dtype) for x in device_inputs(problem, rng))

    def host_view(self, tensor: Any) -> Any:
        return HostView(tensor)

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize()

    def prepare(
        self, problem: Problem, config: KernelConfig, inputs: tuple[Any, ...]
    ) -> Callable[[], Any]:
        import torch
        import torch.nn.functional as functional
        from torch.nn.attention import SDPBackend, sdpa_kernel

        q, k, v = inputs
        group = problem.group_size
        if group > 1:
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
        attn_mask = None
        is_causal = False
        if config.mask == "causal":
            if problem.q_len == problem.k_len and problem.input_pos == 0:
                is_causal = True
            elif problem.input_pos == problem.k_len - problem.q_len:
                from torch.nn.attention.bias import causal_lower_right

                attn_mask = causal_lower_right(problem.q_len, problem.k_len)
            else:
                raise ConfigError(
                    "input_pos",
                    problem.input_pos,
                    f"{self.name} supports causal offsets of k_len - q_len only",
                )
        backend = getattr(SDPBackend, self.sdpa_backend)

        def launch() -> Any:
            with sdpa_kernel([backend]):
                return functional.scaled_dot_product_attention(
                    q, k, v, attn_mask=attn_mask, is_causal=is_causal
                )

        settings = self._settings
        if settings is not None and settings.cuda_graph:
            return torch_graph_launch(launch)
        torch.cuda.synchronize()
        return launch

    def timer(self) -> Timer:
        return TorchEventTimer()

    def between_samples(self, settings: TimingSettings) -> Callable[[], object] | None:
        return torch_l2_flusher() if settings.flush_l2 else None

    def reset_peak_memory(self) -> None:
        import torch

        torch.cuda.reset_peak_memory_stats()

    def peak_memory_bytes(self) -> int | None:
        import torch

        return int(torch.cuda.max_memory_allocated())

    def release(self) -> None:
        import torch

        torch.cuda.empty_cache()

    def measure_point(self, problem, config, settings, rng):  # type: ignore[no-untyped-def]
        self._settings = settings  # prepare() needs to know about graph replay
        return super().measure_point(problem, config, settings, rng)


class TorchFlashBackend(TorchSdpaBackend):
    name = "torch-flash"
    description = "flash (FA2)"
    sdpa_backend = "FLASH_ATTENTION"


class TorchCudnnBackend(TorchSdpaBackend):
    name = "torch-cudnn"
    description = "cuDNN"
    sdpa_backend = "CUDNN_ATTENTION"
