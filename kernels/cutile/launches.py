"""Launches planned once and bound to arrays: what every call of the kernel goes through.

:func:`device_plan` plans a launch on the caller's device (:func:`kernels.cutile.plan.
plan_launch`, asking that device's SM count only where the plan needs it);
:class:`PreparedLaunch` turns the plan into its kernel calls (:func:`kernels.cutile.forms.
kernel_calls`: the grid and every parameter's value), makes the arrays a caller does not pass
(:class:`Allocator`), and :meth:`PreparedLaunch.runner` binds a caller's arrays and returns the
zero-argument launch. Nothing here reads a config past :func:`device_plan`: only the plan.
``kernels.cutile.launch`` checks the inputs and keeps these per call;
the tuner and the block map build theirs here too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cuda.tile as ct

from kernels.cutile import forms
from kernels.cutile.arrays import (
    copy_into,
    default_stream,
    device_id,
    dtype_name,
    empty,
    fill,
    from_numpy,
    reshaped,
    sm_count,
)
from kernels.cutile.config import LaunchConfig
from kernels.cutile.diagnostics import check_arch, friendly_errors
from kernels.cutile.forms import ArraySpec, Problem
from kernels.cutile.plan import LaunchPlan, plan_launch

# Each launch of one call: grid, argument tuple, kernel form.
Launches = list[tuple[tuple[int, int, int], tuple[Any, ...], str]]


def _stream_key(stream: Any, lib: str) -> int:
    """The CUDA stream handle behind either library's stream object."""
    return int(stream.cuda_stream if lib == "torch" else stream.ptr)


class Allocator:
    """Makes the array arguments a caller did not pass, on ``like``'s device: the plan's
    host data copied over (the causal tile table), or an uninitialised stand-in for an output
    the launch does not want (the kernel skips it: ``WITH_LSE``/``WITH_MAP`` are off), made
    once per parameter and shape (and host table) and reused. Keeps no reference to ``like``
    (a kept launch must not hold a caller's tensor alive)."""

    def __init__(self, lib: str, like: Any) -> None:
        self.lib = lib
        self.like = _OnDevice(like.device)  # what empty() and from_numpy() read of ``like``
        self._made: dict[tuple[Any, ...], tuple[Any, Any]] = {}

    def __call__(self, name: str, spec: ArraySpec) -> Any:
        # One per parameter (launch arrays must not alias), and per host table: the table's
        # identity, kept alive beside its copy so that the id is not reused.
        key = (name, spec.dtype, spec.shape, None if spec.data is None else id(spec.data))
        if key not in self._made:
            made = (
                empty(self.lib, spec.shape, spec.dtype, self.like)
                if spec.data is None
                else from_numpy(spec.data, self.lib, self.like)
            )
            self._made[key] = (spec.data, made)
        return self._made[key][1]


@dataclass(frozen=True)
class _OnDevice:
    """An array's device, standing in for the array where only its device is read."""

    device: Any


def device_plan(
    p: Problem,
    config: LaunchConfig,
    like: Any,
    *,
    scale: float | None,
    mask: str,
    input_pos: int,
    window: int | None,
    with_lse: bool,
    with_map: bool,
) -> LaunchPlan:
    """:func:`kernels.cutile.plan.plan_launch` for a launch on the device ``like`` lives on."""
    assert p.lib is not None  # a launch's problem: its arrays set lib
    lib = p.lib
    return plan_launch(
        config, p, mask=mask, input_pos=input_pos, window=window, scale=scale,
        with_lse=with_lse, with_map=with_map,
        sm_count=lambda: sm_count(device_id(like, lib) or 0, lib),
    )  # fmt: skip


class PreparedLaunch:
    """The launches of one plan, made once: each launch's call and kernel, and the arrays the
    caller does not pass (scratch, the causal tile table on the device), made on first use and
    kept. :meth:`runner` binds the caller's arrays."""

    def __init__(self, p: Problem, plan: LaunchPlan, like: Any) -> None:
        assert p.lib is not None  # a launch's problem: its arrays set lib
        self.lib: str = p.lib
        self.plan = plan
        call: forms.KernelCall | None = forms.kernel_calls(plan, p)
        self.plans: list[forms.KernelCall] = []
        while call is not None:
            self.plans.append(call)
            call = call.then
        self.kernels = [forms.kernel_for(call) for call in self.plans]
        self.allocate = Allocator(p.lib, like)
        # The decode form's split kernel writes partial outputs its combine reads: launches on
        # two streams at once must not share them, so each stream gets its own.
        self._per_stream: dict[int, Allocator] | None = {} if len(self.plans) > 1 else None
        self._like = self.allocate.like

    def launches(self, arrays: dict[str, Any]) -> Launches:
        """Grid, argument tuple and form of each launch, with ``arrays`` (by parameter name)
        viewed in the planned shapes; ValueError where one has no such view."""
        views = {}
        for name, arr in arrays.items():
            view = _planned_view(arr, self.plans[0].values.get(name))
            if view is None and arr is not None:
                raise ValueError(f"{name} cannot be viewed in the shape the launch plans")
            views[name] = view
        return self._bound(views)

    def _bound(self, views: dict[str, Any], allocate: Allocator | None = None) -> Launches:
        out = []
        for i, plan in enumerate(self.plans):
            # The combine takes only its own arrays: the split kernel's partials among them.
            given = {n: a for n, a in views.items() if i == 0 or n in plan.values}
            out.append((plan.grid, plan.arguments(given, allocate or self.allocate), plan.form))
        return out

    def _scratch(self, stream: Any) -> Allocator:
        """The allocator of the arrays the launches write and share, for ``stream``."""
        if self._per_stream is None or stream is None:
            return self.allocate
        key = _stream_key(stream, self.lib)
        if key not in self._per_stream:
            self._per_stream[key] = Allocator(self.lib, self._like)
        return self._per_stream[key]

    def runner(self, arrays: dict[str, Any], stream: Any) -> Callable[[], None]:
        """Zero-argument launch of every planned kernel on ``stream`` (the library's current
        stream at call time for None). Where a caller's (B, N, H, D) array has no view in the
        decode form's packed shape (q_len > 1), a contiguous copy stands in: the query copied
        in before the launches, the output copied back after."""
        views: dict[str, Any] = {}
        copy_in: list[tuple[Any, Any]] = []
        copy_out: list[tuple[Any, Any]] = []
        for name, arr in arrays.items():
            view = _planned_view(arr, self.plans[0].values.get(name))
            if view is None and arr is not None:
                staging = empty(self.lib, tuple(arr.shape), dtype_name(arr), arr)
                view = reshaped(staging, self.plans[0].values[name].shape)
                (copy_in if name == "Q" else copy_out).append(
                    (staging, arr) if name == "Q" else (arr, staging)
                )
            views[name] = view
        bound = self._bound(views, self._scratch(stream))
        kernels = self.kernels
        launches = [
            (grid, args, kern) for (grid, args, _), kern in zip(bound, kernels, strict=True)
        ]
        lib = self.lib

        def run() -> None:
            with friendly_errors():
                on = stream if stream is not None else default_stream(lib)
                for dst, src in copy_in:
                    copy_into(dst, src, on)
                for grid, args, kern in launches:
                    ct.launch(on, grid, kern, args)
                for dst, src in copy_out:
                    copy_into(dst, src, on)

        return run


def launch_of(
    p: Problem,
    arrays: dict[str, Any],
    config: LaunchConfig,
    allocate: Allocator,
    *,
    scale: float | None,
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
    scale: float | None,
    mask: str,
    input_pos: int,
    window: int | None,
) -> Launches:
    """Grid, argument tuple and kernel form of each launch of one attention call, in order
    (for attention, the block map and the tuner): one, or the decode form's split kernel and
    its combine. ``arrays``: the caller's arrays by parameter name ("Q", "K", "V", "Out", and
    "Lse", "BlockMap", "Order" when wanted); the others come from ``allocate`` (the same
    stand-in for the same parameter of both launches: the splits' partial outputs). A given
    array the plan wants in another shape of the same size is viewed in it (the decode form's
    packed Q, Out and Lse)."""
    plan = device_plan(
        p, config, arrays["Q"], scale=scale, mask=mask, input_pos=input_pos, window=window,
        with_lse=arrays.get("Lse") is not None, with_map=arrays.get("BlockMap") is not None,
    )  # fmt: skip
    prepared = PreparedLaunch(p, plan, arrays["Q"])
    prepared.allocate = allocate
    return prepared.launches(arrays)


def _planned_view(arr: Any, spec: Any) -> Any:
    """``arr`` viewed in the shape ``spec`` plans for it, where that differs (same size);
    None where its strides allow no such view."""
    if arr is None or not isinstance(spec, ArraySpec) or tuple(arr.shape) == spec.shape:
        return arr
    return reshaped(arr, spec.shape)


def planned_launcher(
    p: Problem,
    arrays: dict[str, Any],
    config: LaunchConfig,
    *,
    scale: float | None,
    mask: str,
    input_pos: int,
    window: int | None,
    stream: Any,
) -> tuple[Callable[[], None], LaunchPlan | None]:
    """Everything but the launch itself (plan, argument tuple, kernel variant, arch check), and
    the plan it runs (None: no query or no key, no kernel runs)."""
    q, out, lse = arrays["Q"], arrays["Out"], arrays.get("Lse")
    if p.q_len == 0:
        return (lambda: None), None
    if p.k_len == 0:  # every row sees no key: zeros and -inf, like the reference

        def no_keys() -> None:
            fill(out, 0)
            if lse is not None:
                fill(lse, -math.inf)

        return no_keys, None
    assert p.lib is not None  # a launch's problem: its arrays set lib
    check_arch(device_id(q, p.lib) or 0)
    plan = device_plan(
        p, config, q, scale=scale, mask=mask, input_pos=input_pos, window=window,
        with_lse=lse is not None, with_map=arrays.get("BlockMap") is not None,
    )  # fmt: skip
    return PreparedLaunch(p, plan, q).runner(arrays, stream), plan
