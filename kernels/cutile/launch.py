"""The validating host wrapper: ``LaunchConfig``, input checks, ``prepare`` and ``attention``.

A launch goes: check the inputs once (:func:`check_inputs`, :func:`check_mask`), turn the knobs
into a validated config (:func:`kernels.cutile.plan.call_config`) and the config and problem into
the launch plan (:func:`kernels.cutile.plan.plan_launch`, through
:func:`kernels.cutile.launches.device_plan`), then let :class:`kernels.cutile.launches.
PreparedLaunch` give every parameter its value from the plan, allocate what the caller did not
pass, and return a launcher that only calls ``ct.launch``. ``attention`` keeps each call's
checks and plan for the next one like it; :func:`launch_plan` says what a call would run.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels import knobs as registry
from kernels.cutile.arrays import (
    default_stream,
    device_id,
    dtype_name,
    empty,
    layout_problem,
    lib_of,
    output_like,
    strides_of,
)
from kernels.cutile.config import LAUNCH_KNOBS as LAUNCH_KNOBS  # re-exported
from kernels.cutile.config import LaunchConfig
from kernels.cutile.diagnostics import check_arch
from kernels.cutile.forms import Problem
from kernels.cutile.launches import PreparedLaunch, device_plan, planned_launcher
from kernels.cutile.plan import LaunchPlan, call_config
from kernels.schedule import MASK_MODES

# The kernel's tiles and worker-warp counts (tileiras 13.4: 4 and 8), from the registry.
TILE_SIZES = registry.KERNEL_TILES
WORKER_WARPS = tuple(w for w in registry.KNOBS["num_worker_warps"].values if w is not None)
HEAD_DIMS = registry.HEAD_DIM.values_for(registry.CUTILE)
DTYPE_NAMES = registry.DTYPE.values_for(registry.CUTILE)
# How the caller's q, k, v and out are indexed: (B, H, N, D), or (B, N, H, D) as a model's
# projections leave them (read in place through a transposed view, never copied).
LAYOUTS = ("bhnd", "bnhd")


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
    if not (dtype_name(q) == dtype_name(k) == dtype_name(v)):
        raise ValueError(
            f"q, k, v must share one dtype, got {dtype_name(q)}, {dtype_name(k)}, {dtype_name(v)}"
        )
    if not (device_id(q, lib) == device_id(k, lib) == device_id(v, lib)):
        raise ValueError("q, k and v must be on the same device")
    batch, heads, q_len, head_dim = (int(x) for x in q.shape)
    # v's head dim (Dv) may differ from q's and k's (DeepSeek's MLA: D 192, Dv 128).
    if tuple(k.shape[:3]) != tuple(v.shape[:3]):
        raise ValueError(
            f"k and v must agree on batch, heads and keys, got {tuple(k.shape)} and "
            f"{tuple(v.shape)}"
        )
    kb, kv_heads, k_len, kd = (int(x) for x in k.shape)
    value_dim = int(v.shape[3])
    if kb != batch:
        raise ValueError(f"k/v batch {kb} differs from q batch {batch}")
    if kd != head_dim:
        raise ValueError(f"k head dim {kd} differs from q head dim {head_dim}")
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"q heads ({heads}) must be a multiple of k/v heads ({kv_heads}) for GQA")
    for what, dim in (("head dim", head_dim), ("v head dim", value_dim)):
        if dim not in HEAD_DIMS:
            raise ValueError(
                f"{what} must be a multiple of 8 from {HEAD_DIMS[0]} to {HEAD_DIMS[-1]}, got {dim}"
            )
    # After the shapes: a head dim the kernel does not take is not fixed by .contiguous().
    for name, arr in (("q", q), ("k", k), ("v", v)):
        problem = layout_problem(arr, lib)
        if problem is not None:
            raise ValueError(f"{name} cannot be read in place: {problem} (call .contiguous())")
    split = value_dim if value_dim != head_dim else None
    return Problem(batch, heads, kv_heads, q_len, k_len, head_dim, dtype_name(q), lib, split)


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
    layout: str = "bhnd",
    **knobs: Any,
) -> Launcher:
    """Validate and allocate once; return a zero-argument launcher for timing loops (its
    ``plan``: the launch plan it runs).

    ``knobs`` are the fields of :class:`LaunchConfig`, one per launch knob of the registry
    (:data:`kernels.knobs.KNOBS`, which gives each one's default; ``fmha-workbench knobs``
    prints them). The launcher re-runs the same launch (same
    inputs, same ``out``) with no validation and no allocation, and returns what
    :func:`attention` would. With ``stream=None`` it launches on the library's *current* stream
    at call time, so it can be captured in a CUDA graph.
    """
    request = _request(q, k, v, scale, mask, input_pos, window, out, layout, knobs)
    out, lse = _outputs(request, return_lse)
    run, plan = planned_launcher(
        request.problem,
        {"Q": request.q, "K": request.k, "V": request.v, "Out": out, "Lse": lse},
        request.config,
        scale=request.scale,
        mask=mask,
        input_pos=int(input_pos),
        window=window,
        stream=stream,
    )
    return Launcher(run, plan, _in_layout(out, layout), lse, return_lse)


class Launcher:
    """What :func:`prepare` returns: calling it launches and returns what :func:`attention`
    would; ``plan`` is the launch plan it runs (None: no query or no key, nothing to run)."""

    def __init__(
        self, run: Callable[[], None], plan: LaunchPlan | None, result: Any, lse: Any,
        with_lse: bool,
    ) -> None:  # fmt: skip
        self._run, self._result, self._lse, self._with_lse = run, result, lse, with_lse
        self.plan = plan

    def __call__(self) -> Any:
        self._run()
        return (self._result, self._lse) if self._with_lse else self._result


def launch_plan(q: Any, k: Any, v: Any, **kwargs: Any) -> LaunchPlan | None:
    """The launch plan that :func:`attention` or :func:`prepare` with these arguments runs on
    q's device (None where there is no query or no key: nothing launches); ValueError naming
    the first thing wrong, as they raise it."""
    return KeptCall.first(q, k, v, kwargs).plan


def attention(q: Any, k: Any, v: Any, **kwargs: Any) -> Any:
    """softmax(scale · q kᵀ + mask) v for fp16/bf16 torch tensors or CuPy arrays.

    Keyword arguments (all optional): ``scale=None`` (1/sqrt(D)), ``mask="none"``,
    ``input_pos=0``, ``window=None``, ``return_lse=False``, ``out=None``, ``stream=None``,
    ``layout="bhnd"``, and the launch knobs of :class:`LaunchConfig` (the registry,
    :data:`kernels.knobs.KNOBS`, has each one's default, values and meaning); see
    :func:`prepare`. On a problem bound by reading K and V (few query rows per KV head, a long
    key range: :func:`kernels.decode_choice.decode_bound`) the knobs left out take the decode
    presets' values (packed heads, auto key splits, 32 KB key blocks) unless the call gives
    the split count or the packing itself.

    ``layout``: ``"bhnd"`` takes q, k, v (and gives ``out``) as (B, H, N, D); ``"bnhd"`` as
    (B, N, H, D), the layout a model's projections produce. Either way the arrays may be
    strided views (a (B, N, H, D) buffer transposed to (B, H, N, D) is read in place): the
    head-dim stride must be 1 and the others whole multiples of 16 bytes.

    k and v may have fewer heads than q (GQA, ``H % Hkv == 0``); v's head dim Dv may differ from
    q's and k's D (both from the registry's list; MLA prefill: 192 and 128), and ``out`` is then
    Dv wide. ``mask``: ``"none"``,
    ``"causal"`` (row i sees key j iff ``j <= i + input_pos``) or ``"window"`` (causal and
    ``j > i + input_pos - window``). Returns ``out`` in the input dtype, or ``(out, lse)`` with
    ``return_lse``: the natural-log LSE in float32, shape (B, H, q_len).

    What a later call with arrays of the same shapes, strides, dtypes and device and the same
    keywords would check and make again (the checks, the launch plan, scratch arrays, the
    causal tile table on the device) is kept from the first such call, so a model calling this
    eagerly pays a dictionary lookup and the launch.
    """
    key = _call_key(q, k, v, kwargs)
    with _ONE_SHOT_LOCK:
        kept = _ONE_SHOT.get(key) if key is not None else None
        if kept is not None and key is not None:  # key is None: nothing was kept
            _ONE_SHOT.move_to_end(key)  # most recently used last
    if kept is None:
        kept = KeptCall.first(q, k, v, kwargs)
        if key is not None:
            with _ONE_SHOT_LOCK:
                _ONE_SHOT[key] = kept
                while len(_ONE_SHOT) > ONE_SHOT_CACHE_SIZE:
                    _ONE_SHOT.popitem(last=False)
    return kept(q, k, v, kwargs.get("out"), kwargs.get("stream"))


# The keyword arguments of attention() that are not knobs.
_CALL_ARGUMENTS = frozenset(
    ("scale", "mask", "input_pos", "window", "return_lse", "out", "stream", "layout")
)
# Calls attention() keeps ready, most recently used last (each holds its scratch arrays).
ONE_SHOT_CACHE_SIZE = 32
_ONE_SHOT: OrderedDict[tuple[Any, ...], KeptCall] = OrderedDict()
_ONE_SHOT_LOCK = threading.Lock()


def clear_launch_cache() -> None:
    """Drop what :func:`attention` kept between calls (and the device memory it holds)."""
    with _ONE_SHOT_LOCK:
        _ONE_SHOT.clear()


def _array_key(arr: Any) -> tuple[Any, ...]:
    """What the checks of an array read: library, shape, strides, dtype, device."""
    lib = lib_of(arr)
    device = arr.device if lib == "torch" else arr.device.id
    return (lib, tuple(arr.shape), strides_of(arr, lib), str(arr.dtype), device)


def _call_key(q: Any, k: Any, v: Any, kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    """The key of what a call checks and plans (None: not cacheable, checked every time)."""
    out = kwargs.get("out")
    try:
        arrays = tuple(_array_key(x) for x in (q, k, v))
        given = _array_key(out) if out is not None else None
        rest = tuple(sorted((n, w) for n, w in kwargs.items() if n not in ("out", "stream")))
        key = (arrays, given, rest)
        hash(key)
    except (ValueError, TypeError, AttributeError):
        return None  # not arrays of either library, or an unhashable keyword: the checks say
    return key


class KeptCall:
    """One :func:`attention` call, checked and planned once: what each later call with arrays
    of the same shapes, strides, dtypes and device and the same keywords needs besides the
    arrays themselves."""

    def __init__(
        self, request: _Request, kwargs: dict[str, Any], prepared: PreparedLaunch | None
    ) -> None:
        self.problem = request.problem
        self.config = request.config
        self.scale = request.scale
        self.layout = kwargs.get("layout", "bhnd")
        self.mask = kwargs.get("mask", "none")
        self.window = kwargs.get("window")
        self.input_pos = int(kwargs.get("input_pos", 0))
        self.return_lse = bool(kwargs.get("return_lse", False))
        self.prepared = prepared
        self.plan: LaunchPlan | None = prepared.plan if prepared is not None else None

    @classmethod
    def first(cls, q: Any, k: Any, v: Any, kwargs: dict[str, Any]) -> KeptCall:
        """Check everything (ValueError naming the first thing wrong) and plan the launch."""
        knobs = {n: w for n, w in kwargs.items() if n not in _CALL_ARGUMENTS}
        request = _request(
            q,
            k,
            v,
            kwargs.get("scale"),
            kwargs.get("mask", "none"),
            kwargs.get("input_pos", 0),
            kwargs.get("window"),
            kwargs.get("out"),
            kwargs.get("layout", "bhnd"),
            knobs,
        )
        if request.out is not None:
            _outputs(request, False)  # checks the given out
        p = request.problem
        assert p.lib is not None  # a launch's problem: its arrays set lib
        prepared = None
        if p.q_len and p.k_len:
            check_arch(device_id(request.q, p.lib) or 0)
            plan = device_plan(
                p, request.config, request.q, scale=request.scale,
                mask=kwargs.get("mask", "none"), input_pos=int(kwargs.get("input_pos", 0)),
                window=kwargs.get("window"), with_lse=bool(kwargs.get("return_lse", False)),
                with_map=False,
            )  # fmt: skip
            prepared = PreparedLaunch(p, plan, request.q)
        return cls(request, kwargs, prepared)

    def __call__(self, q: Any, k: Any, v: Any, out: Any, stream: Any) -> Any:
        p = self.problem
        assert p.lib is not None  # a launch's problem: its arrays set lib
        if self.layout == "bnhd":
            q, k, v = (x.swapaxes(1, 2) for x in (q, k, v))
            out = None if out is None else out.swapaxes(1, 2)
        if out is None:
            out = output_like(q, p.value_dim)  # a (B, N, H, D) q gets a (B, N, H, Dv) out
        lse = empty(p.lib, (p.batch, p.heads, p.q_len), "float32", q) if self.return_lse else None
        arrays = {"Q": q, "K": k, "V": v, "Out": out, "Lse": lse}
        if self.prepared is None:  # no query or no key: nothing to plan
            run, _ = planned_launcher(
                p, arrays, self.config, scale=self.scale, mask=self.mask,
                input_pos=self.input_pos, window=self.window, stream=stream,
            )  # fmt: skip
            run()
        else:
            on = stream if stream is not None else default_stream(p.lib)
            self.prepared.runner(arrays, on)()
        result = _in_layout(out, self.layout)
        return (result, lse) if self.return_lse else result


@dataclass(frozen=True)
class _Request:
    """One call's checked inputs: arrays seen as (B, H, N, D), problem, config and scale
    (``shown_shape``: q's shape as the caller gave it, for messages)."""

    q: Any
    k: Any
    v: Any
    out: Any
    problem: Problem
    config: LaunchConfig
    scale: float | None  # None: the plan's default (1/sqrt(D))
    shown_shape: tuple[int, ...]


def _request(
    q: Any,
    k: Any,
    v: Any,
    scale: float | None,
    mask: str,
    input_pos: int,
    window: int | None,
    out: Any,
    layout: str,
    knobs: dict[str, Any],
) -> _Request:
    """Check everything a call passes; ValueError naming the first thing wrong."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    shown_shape = tuple(q.shape)
    if layout == "bnhd":
        for name, arr in (("q", q), ("k", k), ("v", v)):
            if getattr(arr, "ndim", None) != 4:
                raise ValueError(
                    f"{name} must have rank 4 (B, N, H, D), got shape {tuple(arr.shape)}"
                )
        q, k, v = (x.swapaxes(1, 2) for x in (q, k, v))
        out = None if out is None else _in_layout(out, layout)
    p = check_inputs(q, k, v)
    check_mask(mask, input_pos, window)
    # A problem bound by reading K and V runs the decode form unless the caller chose a form.
    config = call_config(knobs, p, mask)
    if scale is not None and not (math.isfinite(scale) and scale > 0):
        # The running max is taken before scaling (max(qk)·s), which needs s > 0.
        raise ValueError(f"scale must be a finite positive number, got {scale}")
    return _Request(
        q=q,
        k=k,
        v=v,
        out=out,
        problem=p,
        config=config,
        scale=None if scale is None else float(scale),
        shown_shape=shown_shape,
    )


def _outputs(request: _Request, return_lse: bool) -> tuple[Any, Any]:
    """``out`` (the caller's, checked, or a new one laid out as q is) seen as (B, H, N, D),
    and the LSE array when wanted."""
    p, q, out = request.problem, request.q, request.out
    assert p.lib is not None  # a launch's problem: its arrays set lib
    if out is None:
        out = output_like(q, p.value_dim)  # a (B, N, H, D) q gets a (B, N, H, Dv) out
    else:
        want = (*tuple(q.shape)[:3], p.value_dim)  # q's rows, Dv wide
        if lib_of(out) != p.lib or tuple(out.shape) != want:
            shown = (*request.shown_shape[:3], p.value_dim)
            raise ValueError(f"out must be a {p.lib} array of shape {shown}")
        if dtype_name(out) != p.dtype:
            raise ValueError(f"out must have dtype {p.dtype}, got {dtype_name(out)}")
        problem = layout_problem(out, p.lib)
        if problem is not None:
            raise ValueError(f"out cannot be written in place: {problem}")
        if device_id(out, p.lib) != device_id(q, p.lib):
            raise ValueError("out must be on the same device as q")
    lse = empty(p.lib, (p.batch, p.heads, p.q_len), "float32", q) if return_lse else None
    return out, lse


def _in_layout(arr: Any, layout: str) -> Any:
    """``arr`` indexed as the caller's layout asks ((B, H, N, D) ↔ (B, N, H, D) is one swap)."""
    return arr.swapaxes(1, 2) if layout == "bnhd" else arr
