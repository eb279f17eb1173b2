"""Peers: torch's scaled_dot_product_attention with its backend forced (FA2 "flash" or cuDNN).

torch picks FA2 by default on Hopper, so each peer pins its backend with ``sdpa_kernel``. GQA
runs natively (``enable_gqa``): each key/value head is read once for its group of query heads,
as a model calls it. Expanding K and V to every query head first would make the timed call read
the group's worth of extra bytes (4-8× at decode, where reading K and V is the whole cost).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from workbench.backends.base import Availability, host_inputs, refuse_split_head_dims
from workbench.backends.declaration import BackendDeclaration, Capabilities
from workbench.backends.gpu import torch_device
from workbench.backends.padded import padded_form, prepare_padded
from workbench.backends.torch_base import TorchBackend, upload_serving
from workbench.config import ConfigError, KernelConfig, Problem

# The first torch whose SDPA takes ``enable_gqa`` (GQA without expanding K and V).
SDPA_GQA_TORCH = (2, 5)


def _release(version: str) -> tuple[int, int]:
    """(major, minor) of a torch version string such as "2.11.0+cu130"."""
    major, minor, *_ = [
        *(int("".join(c for c in p if c.isdigit()) or 0) for p in version.split(".")),
        0,
        0,
    ]
    return major, minor


class TorchSdpaBackend(TorchBackend):
    sdpa_backend: ClassVar[str]  # name of a torch.nn.attention.SDPBackend member
    runs_ragged = True  # on the padded batch (workbench.backends.padded)

    def availability(self) -> Availability:
        status = torch_device()
        if not status.available:
            return status
        import torch

        if self.sdpa_backend == "CUDNN_ATTENTION" and not torch.backends.cudnn.is_available():
            return Availability(False, "torch was built without cuDNN")
        if _release(torch.__version__) < SDPA_GQA_TORCH:
            return Availability(
                False, f"torch {torch.__version__} is older than 2.5: its SDPA has no enable_gqa"
            )
        return Availability(True, f"torch SDPA {self.description} on {status.reason}")

    # Whether SDPA's backend runs a causal mask aligned bottom-right (the queries the last
    # tokens, q_len < k_len) through torch's lower-right causal bias.
    lower_right: ClassVar[bool]

    def check_supported(self, problem: Problem, config: KernelConfig) -> None:
        # FA2 needs one head dim; torch's cuDNN path is not known to take another for V here.
        refuse_split_head_dims(problem, self.name)
        if problem.lengths is not None:
            padded_form(problem, config, self.name, takes_mask=self.lower_right)
        else:
            sdpa_causal_form(problem, config, self.name, lower_right=self.lower_right)
        super().check_supported(problem, config)

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> tuple[Any, ...]:
        if problem.lengths is not None:  # the serving layouts; padded in prepare, untimed
            return upload_serving(host_inputs(problem, rng), problem.dtype)
        return super().make_inputs(problem, rng)

    def prepare(
        self, problem: Problem, config: KernelConfig, inputs: tuple[Any, ...]
    ) -> Callable[[], Any]:
        import torch
        import torch.nn.functional as functional
        from torch.nn.attention import SDPBackend, sdpa_kernel

        if problem.lengths is not None:
            form = padded_form(problem, config, self.name, takes_mask=self.lower_right)
            return prepare_padded(problem, config, inputs, self.sdpa_backend, form)
        q, k, v = inputs
        enable_gqa = problem.group_size > 1
        attn_mask = None
        form = sdpa_causal_form(problem, config, self.name, lower_right=self.lower_right)
        is_causal = form == "is_causal"
        if form == "lower_right":
            from torch.nn.attention.bias import causal_lower_right

            attn_mask = causal_lower_right(problem.q_len, problem.k_len)
        backend = getattr(SDPBackend, self.sdpa_backend)

        def launch() -> Any:
            with sdpa_kernel([backend]):
                return functional.scaled_dot_product_attention(
                    q, k, v, attn_mask=attn_mask, is_causal=is_causal, enable_gqa=enable_gqa
                )

        torch.cuda.synchronize()
        return launch


class TorchFlashBackend(TorchSdpaBackend):
    name = "torch-flash"
    description = "flash (FA2)"
    notes = (
        "decode: q_len 1 runs without a mask; causal with q_len > 1 below k_len "
        "(bottom-right) is refused: SDPA's flash backend found no kernel for it on the H200; "
        "a ragged batch: pads every sequence to the longest, so only a varlen causal prefill "
        "runs (no mask needed); TFLOP/s counts the real lengths, so it shows the padding's waste"
    )
    sdpa_backend = "FLASH_ATTENTION"
    lower_right = False


class TorchCudnnBackend(TorchSdpaBackend):
    name = "torch-cudnn"
    description = "cuDNN"
    notes = (
        "decode: q_len 1 runs without a mask; causal with q_len > 1 below k_len runs with "
        "torch's explicit lower-right causal mask (about 5x slower than without a mask there); "
        "a ragged batch: pads every sequence to the longest and masks the padded keys "
        "(bottom-right per sequence); TFLOP/s counts the real lengths, so it shows the "
        "padding's waste"
    )
    sdpa_backend = "CUDNN_ATTENTION"
    lower_right = True


def sdpa_causal_form(
    problem: Problem, config: KernelConfig, name: str, *, lower_right: bool
) -> str:
    """How SDPA runs ``config``'s mask on ``problem``: "none" (no mask, or causal where one
    query row is the last token and sees every key), "is_causal" (top-left, q_len = k_len) or
    "lower_right" (causal bottom-right through an explicit mask); a ConfigError says why not."""
    if config.mask == "window":
        raise ConfigError("mask", "window", f"{name} has no sliding-window mask")
    if config.mask != "causal":
        return "none"
    if problem.input_pos != problem.k_len - problem.q_len:
        raise ConfigError(
            "input_pos",
            problem.input_pos,
            f"{name} supports causal offsets of k_len - q_len only",
        )
    if problem.input_pos == 0:
        return "is_causal"
    if problem.q_len == 1:
        return "none"  # the last token sees every key: causal is no mask at all
    if not lower_right:
        raise ConfigError(
            "q_len",
            problem.q_len,
            f"{name}: causal with q_len {problem.q_len} below k_len {problem.k_len} "
            "(bottom-right) has no kernel in SDPA's flash backend; use torch-cudnn (explicit "
            "lower-right mask) or q_len 1",
        )
    return "lower_right"


DECLARATIONS = tuple(
    BackendDeclaration(
        name=cls.name,
        label=f"torch SDPA {cls.description}",
        factory=cls,
        capabilities=Capabilities(masks=("none", "causal")),
        notes=cls.notes,
    )
    for cls in (TorchFlashBackend, TorchCudnnBackend)
)
