"""A plugin backend: SDPA-style attention with a soft-capped score, in torch, on the GPU and on
the CPU.

With the soft cap off it calls ``torch.nn.functional.scaled_dot_product_attention``; with it on
(SDPA takes no score modifier) the scores are formed in float32, capped with
``cap · tanh(s / cap)``, masked and softmaxed in torch. The same launch is declared twice:
``torch-softcap`` takes torch CUDA tensors (``inputs="cuda"``) and is timed on the GPU as the
torch peers are; ``torch-softcap-cpu`` takes CPU tensors (``inputs="torch"``) and is timed by
the wall clock. Where torch (or a GPU) is missing a backend lists as unavailable and says why::

    fmha-workbench --plugin examples/torch_softcap.py backends
    fmha-workbench --plugin examples/torch_softcap.py sweep \\
        --backends cutile,torch-cudnn,torch-softcap --seq-lens 1024,2048 --plugin-knob softcap=30
    fmha-workbench --plugin examples/torch_softcap.py sweep --backend torch-softcap-cpu \\
        --seq-lens 128,256 --plugin-knob softcap=30
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from workbench.backends import Availability, Capabilities, Knob, declare


def on_the_cpu() -> Availability:
    try:
        import torch
    except ImportError:
        return Availability(False, "torch is not installed: pip install torch to run this plugin")
    return Availability(True, f"torch {torch.__version__} on the CPU (example plugin)")


def capped(scores: np.ndarray, knobs: Mapping[str, Any]) -> np.ndarray:
    """The soft cap as the workbench's float64 check applies it (0: off)."""
    cap = float(knobs["softcap"])
    return cap * np.tanh(scores / cap) if cap > 0 else scores


def prepare(q: Any, k: Any, v: Any, *, problem: Any, config: Any, knobs: Any) -> Callable[[], Any]:
    """q, k, v: torch tensors (B, H, N, D), on the GPU or the CPU; returns the launch. On the GPU
    the launch queues its work on torch's current stream and returns without waiting."""
    import torch
    import torch.nn.functional as functional

    if not q.is_cuda:
        torch.set_num_threads(int(knobs.get("threads", 1)))
    group = q.shape[1] // k.shape[1]
    keys = k.repeat_interleave(group, dim=1) if group > 1 else k
    values = v.repeat_interleave(group, dim=1) if group > 1 else v
    cap = float(knobs["softcap"])
    seen = None  # (Nq, Nk) visible keys, as the workbench's masks define them
    if config.mask != "none":
        rows = torch.arange(q.shape[2], device=q.device)[:, None] + problem.input_pos
        cols = torch.arange(k.shape[2], device=q.device)[None, :]
        seen = cols <= rows
        if config.mask == "window":
            seen &= cols > rows - config.window

    def launch() -> Any:
        with torch.no_grad():
            if cap == 0:
                return functional.scaled_dot_product_attention(q, keys, values, attn_mask=seen)
            scores = (q.float() @ keys.float().transpose(-1, -2)) * (q.shape[-1] ** -0.5)
            scores = cap * torch.tanh(scores / cap)
            if seen is not None:
                scores = scores.masked_fill(~seen, float("-inf"))
            weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
            return (weights @ values.float()).to(q.dtype)

    return launch


SOFTCAP = Knob(
    "softcap",
    float,
    0.0,
    (0.0, 20.0, 30.0, 50.0),
    "--plugin-knob softcap",
    "Soft cap",
    "cap · tanh(score / cap) on the scaled scores; 0 is off (plain SDPA)",
)
CAPABILITIES = Capabilities(masks=("none", "causal", "window"))

BACKENDS = (
    declare(
        "torch-softcap",
        "SDPA-style soft-capped attention in torch on the GPU (example plugin)",
        prepare=prepare,
        inputs="cuda",
        reference_scores=capped,
        capabilities=CAPABILITIES,
        knobs=(SOFTCAP,),
    ),
    declare(
        "torch-softcap-cpu",
        "SDPA-style soft-capped attention in torch on the CPU (example plugin)",
        prepare=prepare,
        inputs="torch",
        probe=on_the_cpu,
        reference_scores=capped,
        capabilities=CAPABILITIES,
        knobs=(
            SOFTCAP,
            Knob(
                "threads",
                int,
                1,
                (1, 2, 4, 8),
                "--plugin-knob threads",
                "Threads",
                "torch CPU threads for the launch",
                tunable=True,
            ),
        ),
    ),
)
