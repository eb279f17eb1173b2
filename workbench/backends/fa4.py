"""Peer: FlashAttention-4 (``flash-attn-4``, CuTe-DSL kernels with an sm_90 forward).

FA4 takes (batch, seq, heads, head_dim) tensors: the inputs are drawn like every backend's, in
(B, H, N, D), and copied to FA4's layout once, outside the timed region; the launch returns a
(B, H, N, D) view of FA4's output, so the float64 check reads it like any other. Causal and
window masks are FA4's bottom-right-aligned ones, which are the workbench's exactly when the
queries are the last ``q_len`` positions (``input_pos == k_len - q_len``, what every sweep runs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from workbench.backends.base import Availability, host_inputs, refuse_split_head_dims
from workbench.backends.declaration import BackendDeclaration
from workbench.backends.fa4_serving import NOTES as RAGGED_NOTES
from workbench.backends.fa4_serving import prepare_fa4_ragged
from workbench.backends.gpu import torch_device
from workbench.backends.torch_base import TorchBackend, upload_serving
from workbench.config import ConfigError, KernelConfig, Problem

INSTALL_HINT = "pip install 'fmha-workbench[fa4]' (flash-attn-4 4.0.0b36)"
MIN_CAPABILITY = (9, 0)


def _import_fa4() -> Any:
    from flash_attn.cute import flash_attn_func

    return flash_attn_func


class FlashAttention4Backend(TorchBackend):
    name = "fa4"
    description = "FlashAttention-4 (CuTe DSL)"
    notes = (
        "no split of the key range on sm_90: one CTA per (batch, head, q-block), so a "
        f"small-batch decode leaves most SMs idle; causal is bottom-right; {RAGGED_NOTES}"
    )
    runs_ragged = True  # its varlen and paged paths (workbench.backends.fa4_serving)

    def availability(self) -> Availability:
        try:
            _import_fa4()
        except ImportError:
            return Availability(False, f"flash-attn-4 is not installed: {INSTALL_HINT}")
        except Exception as exc:  # a broken CUTLASS DSL install can fail at import
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return Availability(False, f"flash-attn-4 failed to load ({first}): {INSTALL_HINT}")
        status = torch_device()
        if not status.available:
            return status
        import torch

        major, minor = torch.cuda.get_device_capability(0)
        if (major, minor) < MIN_CAPABILITY:
            return Availability(
                False, f"FlashAttention-4 needs sm_90 or newer; this GPU is sm_{major}{minor}"
            )
        return Availability(True, f"FlashAttention-4 on {status.reason}")

    def check_supported(self, problem: Problem, config: KernelConfig) -> None:
        refuse_split_head_dims(problem, self.name)  # FA4 on Hopper has one head dim
        fa4_check(problem, config)
        super().check_supported(problem, config)

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> tuple[Any, ...]:
        if problem.lengths is not None:  # the serving layouts FA4's varlen API takes as they are
            return upload_serving(host_inputs(problem, rng), problem.dtype)
        return super().make_inputs(problem, rng)

    def prepare(
        self, problem: Problem, config: KernelConfig, inputs: tuple[Any, ...]
    ) -> Callable[[], Any]:
        import torch

        if problem.lengths is not None:
            return prepare_fa4_ragged(problem, config, inputs, fa4_mask_options(problem, config))

        flash_attn_func = _import_fa4()
        q, k, v = (x.transpose(1, 2).contiguous() for x in inputs)  # (B, N, H, D), untimed
        options = fa4_mask_options(problem, config)

        def launch() -> Any:
            with torch.no_grad():
                out, _lse = flash_attn_func(q, k, v, **options)
            return out.transpose(1, 2)  # a view in the workbench's (B, H, N, D)

        torch.cuda.synchronize()
        return launch


def fa4_check(problem: Problem, config: KernelConfig) -> None:
    """Refuse, before anything runs, what FA4 cannot run with the workbench's meaning."""
    if config.mask in ("causal", "window") and problem.input_pos != problem.k_len - problem.q_len:
        raise ConfigError(
            "input_pos",
            problem.input_pos,
            "fa4 aligns causal masks bottom-right: it needs input_pos = k_len - q_len",
        )


def fa4_mask_options(problem: Problem, config: KernelConfig) -> dict[str, Any]:
    """FA4's keyword arguments for the workbench's mask: row i sees key j <= i + input_pos
    (causal), and also j > i + input_pos - W (window), i.e. FA4's window (W - 1, 0)."""
    if config.mask == "causal":
        return {"causal": True}
    if config.mask == "window":
        assert config.window is not None
        return {"causal": True, "window_size": (config.window - 1, 0)}
    return {"causal": False}


DECLARATIONS = (
    BackendDeclaration(
        name=FlashAttention4Backend.name,
        label=FlashAttention4Backend.description,
        factory=FlashAttention4Backend,
        notes=FlashAttention4Backend.notes,
    ),
)
