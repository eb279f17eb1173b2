"""Peers: torch's scaled_dot_product_attention with its backend forced (FA2 "flash" or cuDNN).

torch picks FA2 by default on Hopper, so each peer pins its backend with ``sdpa_kernel``. GQA
key/value heads are expanded once before timing, so the timed call is plain multi-head attention.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from workbench.backends.base import Availability
from workbench.backends.gpu import torch_device
from workbench.backends.torch_base import TorchBackend
from workbench.config import ConfigError, KernelConfig, Problem


class TorchSdpaBackend(TorchBackend):
    sdpa_backend: ClassVar[str]  # name of a torch.nn.attention.SDPBackend member

    def availability(self) -> Availability:
        status = torch_device()
        if not status.available:
            return status
        import torch

        if self.sdpa_backend == "CUDNN_ATTENTION" and not torch.backends.cudnn.is_available():
            return Availability(False, "torch was built without cuDNN")
        return Availability(True, f"torch SDPA {self.description} on {status.reason}")

    def check_supported(self, problem: Problem, config: KernelConfig) -> None:
        super().check_supported(problem, config)
        if config.mask == "window":
            raise ConfigError("mask", "window", f"{self.name} has no sliding-window mask")

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

        torch.cuda.synchronize()
        return launch


class TorchFlashBackend(TorchSdpaBackend):
    name = "torch-flash"
    description = "flash (FA2)"
    sdpa_backend = "FLASH_ATTENTION"


class TorchCudnnBackend(TorchSdpaBackend):
    name = "torch-cudnn"
    description = "cuDNN"
    sdpa_backend = "CUDNN_ATTENTION"
