"""The validating host wrapper: ``LaunchConfig``, input checks, ``prepare`` and ``attention``.

A launch goes: check the inputs and the config once, let :func:`kernels.cutile.forms.plan` pick
the kernel form and give every parameter the form's kernel declares its value, allocate what
the caller did not pass, and return a launcher that only calls ``ct.launch``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import cuda.tile as ct
import numpy as np

from kernels import knobs as registry
from kernels.cutile import forms
from kernels.cutile.arrays import (
    default_stream,
    device_id,
    dtype_name,
    empty,
    fill,
    from_numpy,
    is_contiguous,
    lib_of,
    reshaped,
    sm_count,
)
from kernels.cutile.config import LAUNCH_KNOBS as LAUNCH_KNOBS  # re-exported
from kernels.cutile.config import LaunchConfig
from kernels.cutile.diagnostics import check_arch, friendly_errors
from kernels.cutile.forms import ArraySpec, Problem
from kernels.schedule import MASK_MODES

# The kernel's tiles and worker-warp counts (tileiras 13.4: 4 and 8), from the registry.
TILE_SIZES = registry.KNOBS["tile_m"].values_for(registry.CUTILE)
WORKER_WARPS = tuple(w for w in registry.KNOBS["num_worker_warps"].values if w is not None)
HEAD_DIMS = registry.HEAD_DIM.values_for(registry.CUTILE)
DTYPE_NAMES = registry.DTYPE.values_for(registry.CUTILE)


# --------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------


def check_inputs(q: Any, k: Any, v: Any) -> Problem:
    """The problem ``q``, ``k``, ``v`` pose; ValueError naming what is wrong with them."""
    lib = lib_of(q)
    for name, arr in (("k", k), ("v", v)):
        if lib_of(arr) != lib:
            raise ValueError(f"{name} is a {lib_of(arr)} array but q is a {lib} array")
    for name, arr in (("q", q), ("k", k), ("v", v)):
        if arr.ndim != 4:
            raise ValueError(f"{name} must have rank 4 (B, H, N, D), got shape {tuple(arr.shape)}")
        if dtype_name(arr) not in DTYPE_NAMES:
            raise ValueError(f"{name} must be float16 or bfloat16, got {dtype_name(arr)}")
        if device_id(arr, lib) is None:
            raise ValueError(f"{name} must be on a CUDA device, got {arr.device}")
        if not is_contiguous(arr, lib):
            raise ValueError(f"{name} must be contiguous (call .contiguous() first)")
    if not (dtype_name(q) == dtype_name(k) == dtype_name(v)):
        raise ValueError(
            f"q, k, v must share one dtype, got {dtype_name(q)}, {dtype_name(k)}, {dtype_name(v)}"
        )
    if not (device_id(q, lib) == device_id(k, lib) == device_id(v, lib)):
        raise ValueError("q, k and v must be on the same device")
    batch, heads, q_len, head_dim = (int(x) for x in q.shape)
    if tuple(k.shape) != tuple(v.shape):
        raise ValueError(
            f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}"
        )
    kb, kv_heads, k_len, kd = (int(x) for x in k.shape)
    if kb != batch:
        raise ValueError(f"k/v batch {kb} differs from q batch {batch}")
    if kd != head_dim:
        raise ValueError(f"k/v head dim {kd} differs from q head dim {head_dim}")
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"q heads ({heads}) must be a multiple of k/v heads ({kv_heads}) for GQA")
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head dim must be one of {HEAD_DIMS}, got {head_dim}")
    return Problem(batch, heads, kv_heads, q_len, k_len, head_dim, dtype_name(q), lib)


def check_mask(mask: str, input_pos: int, window: int | None) -> None:
    """ValueError unless ``mask``, ``input_pos`` and ``window`` make sense together."""
    if mask not in MASK_MODES:
        raise ValueError(f"mask must be one of {MASK_MODES}, got {mask!r}")
    if mask == "window":
        if window is None or int(window) < 1:
            raise ValueError(f"mask='window' needs window >= 1, got {window!r}")
    elif window is not None:
        raise ValueError(f"window={window} is only meaningful with mask='window'")
    if not isinstance(input_pos, (int, np.integer)):
        raise ValueError(f"input_pos must be an int, got {type(input_pos).__name__}")


# --------------------------------------------------------------------------------------------
# Launching
# --------------------------------------------------------------------------------------------


def prepare(
    q: Any,
    k: Any,
    v: Any,
    *,
    scale: float | None = None,
    mask: str = "none",
    input_pos: int = 0,
    window: int | None = None,
    return_lse: bool = False,
    out: Any = None,
    stream: Any = None,
    **knobs: Any,
) -> Callable[[], Any]:
    """Validate and allocate once; return a zero-argument launcher for timing loops.

    ``knobs`` are the fields of :class:`LaunchConfig`, one per launch knob of the registry
    (:data:`kernels.knobs.KNOBS`, which gives each one's default; ``fmha-workbench knobs``
    prints them). The launcher re-runs the same launch (same
    inputs, same ``out``) with no validation and no allocation, and returns what
    :func:`attention` would. With ``stream=None`` it launches on the library's *current* stream
    at call time, so it can be captured in a CUDA graph.
    """
    p = check_inputs(q, k, v)
    check_mask(mask, input_pos, window)
    config = LaunchConfig.of(knobs)
    if scale is None:
        scale = forms.default_scale(p.head_dim)
    if not (math.isfinite(scale) and scale > 0):
        # The running max is taken before scaling (max(qk)·s), which needs s > 0.
        raise ValueError(f"scale must be a finite positive number, got {scale}")
    if out is None:
        out = empty(p.lib, tuple(q.shape), p.dtype, q)
    else:
        if lib_of(out) != p.lib or tuple(out.shape) != tuple(q.shape):
            raise ValueError(f"out must be a {p.lib} array of shape {tuple(q.shape)}")
        if dtype_name(out) != p.dtype or not is_contiguous(out, p.lib):
            raise ValueError(f"out must be contiguous with dtype {p.dtype}")
        if device_id(out, p.lib) != device_id(q, p.lib):
            raise ValueError("out must be on the same device as q")
    lse = empty(p.lib, (p.batch, p.heads, p.q_len), "float32", q) if return_lse else None
    run = launcher(
        p,
        {"Q": q, "K": k, "V": v, "Out": out, "Lse": lse},
        config,
        scale=scale,
        mask=mask,
        input_pos=int(input_pos),
        window=window,
        stream=stream,
    )

    def launch() -> Any:
        run()
        return (out, lse) if return_lse else out

    return launch


def attention(q: Any, k: Any, v: Any, **kwargs: Any) -> Any:
    """softmax(scale · q kᵀ + mask) v for (B, H, N, D) fp16/bf16 torch tensors or CuPy arrays.

    Keyword arguments (all optional): ``scale=None`` (1/sqrt(D)), ``mask="none"``,
    ``input_pos=0``, ``window=None``, ``return_lse=False``, ``out=None``, ``stream=None``, and
    the launch knobs of :class:`LaunchConfig` (the registry, :data:`kernels.knobs.KNOBS`, has
    each one's default, values and meaning); see :func:`prepare`.

    k and v may have fewer heads than q (GQA, ``H % Hkv == 0``). ``mask``: ``"none"``,
    ``"causal"`` (row i sees key j iff ``j <= i + input_pos``) or ``"window"`` (causal and
    ``j > i + input_pos - window``). Returns ``out`` in the input dtype, or ``(out, lse)`` with
    ``return_lse``: the natural-log LSE in float32, shape (B, H, q_len).
    """
    return prepare(q, k, v, **kwargs)()


class Allocator:
    """Makes the array arguments a caller did not pass, on ``like``'s device: the plan's
    host data copied over (the causal tile table), or an uninitialised stand-in for an output
    the launch does not want (the kernel skips it: ``WITH_LSE``/``WITH_MAP`` are off), made
    once per parameter and shape and reused."""

    def __init__(self, lib: str, like: Any) -> None:
        self.lib = lib
        self.like = like
        self._stand_ins: dict[tuple[str, str, tuple[int, ...]], Any] = {}

    def __call__(self, name: str, spec: ArraySpec) -> Any:
        if spec.data is not None:
            return from_numpy(spec.data, self.lib, self.like)
        key = (name, spec.dtype, spec.shape)  # one per parameter: launch arrays must not alias
        if key not in self._stand_ins:
            self._stand_ins[key] = empty(self.lib, spec.shape, spec.dtype, self.like)
        return self._stand_ins[key]


def launch_of(
    p: Problem,
    arrays: dict[str, Any],
    config: LaunchConfig,
    allocate: Allocator,
    *,
    scale: float,
    mask: str,
    input_pos: int,
    window: int | None,
) -> tuple[tuple[int, int, int], tuple[Any, ...], str]:
    """Grid, argument tuple and kernel form of the first launch of :func:`launches_of` (the
    only one but for the decode form's combine; the tuner's search times this one)."""
    return launches_of(
        p, arrays, config, allocate, scale=scale, mask=mask, input_pos=input_pos, window=window
    )[0]


def launches_of(
    p: Problem,
    arrays: dict[str, Any],
    config: LaunchConfig,
    allocate: Allocator,
    *,
    scale: float,
    mask: str,
    input_pos: int,
    window: int | None,
) -> list[tuple[tuple[int, int, int], tuple[Any, ...], str]]:
    """Grid, argument tuple and kernel form of each launch of one attention call, in order
    (for attention, the block map and the tuner): one, or the decode form's split kernel and
    its combine. ``arrays``: the caller's arrays by parameter name ("Q", "K", "V", "Out", and
    "Lse", "BlockMap", "Order" when wanted); the others come from ``allocate`` (the same
    stand-in for the same parameter of both launches: the splits' partial outputs). A given
    array the plan wants in another shape of the same size is viewed in it (the decode form's
    packed Q, Out and Lse)."""
    q = arrays["Q"]
    launch: forms.LaunchPlan | None = forms.plan(
        p,
        config,
        scale=scale,
        mask=mask,
        input_pos=input_pos,
        window=window,
        with_lse=arrays.get("Lse") is not None,
        with_map=arrays.get("BlockMap") is not None,
        sm_count=lambda: sm_count(device_id(q, p.lib) or 0, p.lib),
    )
    out = []
    first = True
    while launch is not None:
        given = {
            name: _planned_view(arr, launch.values.get(name))
            for name, arr in arrays.items()
            if first or name in launch.values  # the combine takes only its own arrays
        }
        out.append((launch.grid, launch.arguments(given, allocate), launch.form))
        launch, first = launch.then, False
    return out


def _planned_view(arr: Any, spec: Any) -> Any:
    """``arr`` viewed in the shape ``spec`` plans for it, where that differs (same size)."""
    if arr is None or not isinstance(spec, ArraySpec) or tuple(arr.shape) == spec.shape:
        return arr
    return reshaped(arr, spec.shape)


def launcher(
    p: Problem,
    arrays: dict[str, Any],
    config: LaunchConfig,
    *,
    scale: float,
    mask: str,
    input_pos: int,
    window: int | None,
    stream: Any,
) -> Callable[[], None]:
    """Everything but the launch itself: grid, argument tuple, kernel variant, arch check."""
    q, out, lse = arrays["Q"], arrays["Out"], arrays.get("Lse")
    if p.q_len == 0:
        return lambda: None
    if p.k_len == 0:  # every row sees no key: zeros and -inf, like the reference

        def no_keys() -> None:
            fill(out, 0)
            if lse is not None:
                fill(lse, -math.inf)

        return no_keys
    check_arch(device_id(q, p.lib) or 0)
    launches = [
        (grid, args, forms.kernel_for(config, form))
        for grid, args, form in launches_of(
            p,
            arrays,
            config,
            Allocator(p.lib, q),
            scale=scale,
            mask=mask,
            input_pos=input_pos,
            window=window,
        )
    ]
    lib = p.lib

    def run() -> None:
        with friendly_errors():
            on = stream if stream is not None else default_stream(lib)
            for grid, args, kern in launches:
                ct.launch(on, grid, kern, args)

    return run
