"""The kernel forms, the parameters each kernel declares, and each parameter's value from the
launch plan.

Each kernel's own Python signature is its parameter declaration (read through ``__wrapped__``,
see :func:`kernels.cutile.device.kernel`). :func:`kernel_calls` gives every parameter a form's
kernel declares its value, read from a :class:`kernels.cutile.plan.LaunchPlan` (where every
auto value is already resolved) and the problem's shapes, by name (:func:`_named_values`); the
launch (:mod:`kernels.cutile.launches`), the tuner and the offline compile
(:mod:`kernels.cutile.compile`) all build their argument tuple or signature from those calls. A
new parameter is a change to the kernel's signature plus its value in :func:`_named_values`
(and a plan field where it comes from the knobs), and a parameter with no value fails at the
first call planned. Compile-time constants travel grouped, as tuple parameters declared with
:func:`kernels.cutile.device.constant_group`: a value is still named by its item, and
:func:`_values` builds each tuple from its items' values.
"""

from __future__ import annotations

import functools
import inspect
import threading
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import cuda.tile as ct
import numpy as np

from kernels.cutile.combine_shape import combine_tile as combine_tile  # re-exported
from kernels.cutile.config import LaunchConfig
from kernels.cutile.device import Members
from kernels.cutile.device_decode import fmha_decode_combine_kernel, fmha_decode_kernel
from kernels.cutile.device_persistent import (
    fmha_fwd_causal_persistent_kernel,
    fmha_fwd_persistent_kernel,
)
from kernels.cutile.device_tile import fmha_fwd_kernel
from kernels.cutile.plan import (  # noqa: F401  (re-exported: where the kernels' callers look)
    COMBINE_OCCUPANCY,
    DECODE_CTAS_PER_SM,
    L2_GROUP_BYTES,
    LaunchPlan,
    decode_ctas_per_sm,
    default_scale,
    l2_group_size,
    plan_launch,
)
from kernels.cutile.problem import Problem as Problem  # where the kernels' callers find it
from kernels.schedule import causal_tile_assignment

LOG2E = 1.4426950408889634
MASK_CODES = {"none": 0, "causal": 1, "window": 2}
# The JIT specialises on whether each array dimension divides by 16; the host-made arrays (the
# block map, the launch order, the causal tile table) are padded to multiples of it so that one
# compile serves every problem size.
SHAPE_CLASS = 16

# The kernels a launch can run (LaunchConfig.kernel_form picks one for a problem).
KERNEL_FORMS: tuple[str, ...] = ("tile", "persistent", "causal-persistent", "decode")
# The second launch of the decode form when it splits the key range: it merges the splits.
COMBINE = "combine"
_KERNELS = {
    "tile": fmha_fwd_kernel,
    "persistent": fmha_fwd_persistent_kernel,
    "causal-persistent": fmha_fwd_causal_persistent_kernel,
    "decode": fmha_decode_kernel,
    COMBINE: fmha_decode_combine_kernel,
}


def grid_kernel(form: str) -> Any:
    """The kernel function of a form, without compiler hints: one CTA per tile ("tile"), the
    persistent grid without a mask ("persistent") or for aligned causal problems
    ("causal-persistent"), packed GQA heads and a split key range ("decode"), or the decode
    form's combine ("combine"); :func:`kernel_variant` and the tuner's search add the hints."""
    if form not in _KERNELS:
        raise ValueError(f"kernel form must be one of {(*KERNEL_FORMS, COMBINE)}, got {form!r}")
    return _KERNELS[form]


# --------------------------------------------------------------------------------------------
# The declaration: each kernel's own signature
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Parameter:
    """One declared kernel parameter: ``kind`` is "array" (no annotation), "scalar" (a runtime
    ``int``/``float``, int32/float32 on the device) or "constant" (``ct.Constant[...]``,
    compiled in); ``type`` is the Python type of a scalar or constant. A grouped constant
    (:func:`kernels.cutile.device.constant_group`) is a ``tuple`` whose ``members`` are its
    items, each a constant with its own name and type."""

    name: str
    kind: str
    type: type | None = None
    members: tuple[Parameter, ...] = ()


def _parameter(name: str, annotation: Any) -> Parameter:
    if annotation is inspect.Parameter.empty:
        return Parameter(name, "array")
    if typing.get_origin(annotation) is typing.Annotated:
        inner, *meta = typing.get_args(annotation)
        if any(isinstance(m, ct.ConstantAnnotation) for m in meta):
            if typing.get_origin(inner) is not tuple:
                return Parameter(name, "constant", inner)
            groups = [m for m in meta if isinstance(m, Members)]
            if not groups:
                raise TypeError(f"{name}: a tuple constant names its items: use constant_group()")
            items = zip(groups[0].names, typing.get_args(inner), strict=True)
            return Parameter(
                name, "constant", tuple, tuple(Parameter(n, "constant", t) for n, t in items)
            )
    if annotation in (int, float):
        return Parameter(name, "scalar", annotation)
    raise TypeError(f"kernel parameter annotation {annotation!r} is not one this module reads")


def python_function(form: str) -> Callable[..., Any]:
    """The Python function under a form's ``@kernel`` decorator."""
    return grid_kernel(form).__wrapped__


@functools.cache
def declaration(form: str) -> tuple[Parameter, ...]:
    """The parameters the form's kernel declares, in signature order."""
    function = python_function(form)
    hints = typing.get_type_hints(function, include_extras=True)
    return tuple(
        _parameter(name, hints.get(name, inspect.Parameter.empty))
        for name in inspect.signature(function).parameters
    )


def parameters(form: str) -> tuple[str, ...]:
    """The names of the form's kernel parameters, in signature order (a grouped constant's
    own name, not its items')."""
    return tuple(p.name for p in declaration(form))


# --------------------------------------------------------------------------------------------
# Kernel variants: one object per compiler-hint combination, created once
# --------------------------------------------------------------------------------------------

_VARIANTS: dict[tuple[str, tuple[tuple[str, Any], ...]], Any] = {}
_VARIANTS_LOCK = threading.Lock()


def kernel_variant(form: str = "tile", **hints: Any):
    """The kernel object of ``form`` with these compiler hints (the registry's ``Knob.hint``
    names: occupancy, num_worker_warps, num_ctas; None: the compiler's choice), cached.

    ``replace_hints`` returns a new kernel with its own JIT cache, so calling it per launch
    would recompile (or at least re-look-up) every time; each combination is made once here.
    """
    key = (form, tuple(sorted(hints.items())))
    base = grid_kernel(form)
    with _VARIANTS_LOCK:
        kern = _VARIANTS.get(key)
        if kern is None:
            kern = base if all(v is None for v in hints.values()) else base.replace_hints(**hints)
            _VARIANTS[key] = kern
        return kern


def kernel_for(call: KernelCall) -> Any:
    """The kernel object that runs ``call``: its form's kernel with the call's compiler hints."""
    return kernel_variant(call.form, **call.hints)


# --------------------------------------------------------------------------------------------
# Each parameter's value, from the launch plan
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArraySpec:
    """An array argument as the plan describes it: dtype name and shape, and for host-made
    contents (the causal tile table) the data. A launch passes its own array in its place or
    allocates one from this; the offline compile turns it into the JIT's constraint."""

    dtype: str
    shape: tuple[int, ...]
    data: np.ndarray | None = field(default=None, compare=False, repr=False)


def padded(n: int) -> int:
    """``n`` rounded up to the JIT's shape class (a multiple of 16)."""
    return -(-n // SHAPE_CLASS) * SHAPE_CLASS


def block_map_shape(batch_heads: int, n_q_blocks: int, n_k_blocks: int) -> tuple[int, int, int]:
    """The instrumented launch's ``BlockMap``: (batch·head, q-block, k-block), padded."""
    return padded(batch_heads), padded(n_q_blocks), padded(n_k_blocks)


def order_shape(batch_heads: int, n_q_blocks: int) -> tuple[int, int]:
    """The instrumented launch's ``Order``: (batch·head, q-block), padded."""
    return padded(batch_heads), padded(n_q_blocks)


@functools.lru_cache(maxsize=64)
def causal_tile_table(
    batch_heads: int, n_q_blocks: int, n_programs: int, group: int, diag_offset: int
) -> np.ndarray:
    """The causal persistent grid's ``Tiles`` argument: row p holds program p's tile count,
    then ``bh * n_q_blocks + qb`` for each of its tiles in run order
    (:func:`kernels.schedule.causal_tile_assignment`); read-only, cached per shape.

    Both dimensions are padded to the JIT's shape class (rows of no program, count 0), so one
    compile serves every problem size.
    """
    programs = causal_tile_assignment(batch_heads, n_q_blocks, n_programs, group, diag_offset)
    table = np.zeros(
        (padded(n_programs), padded(1 + max(len(t) for t in programs))), dtype=np.int32
    )
    for p, tiles in enumerate(programs):
        table[p, 0] = len(tiles)
        table[p, 1 : 1 + len(tiles)] = [bh * n_q_blocks + qb for qb, bh in tiles]
    table.flags.writeable = False
    return table


def grid_form(config: LaunchConfig) -> tuple[int, bool, int, int]:
    """The shape of a config's grid: tile height, persistent or not, CTAs per cluster, key
    blocks per iteration of the persistent loop (the tuner times the fastest of each)."""
    return (config.tile_m, config.persistent, config.num_ctas or 1, config.k_unroll)


@dataclass(frozen=True)
class KernelCall:
    """One kernel launch as its kernel declares it: the form, the grid, the compiler hints and
    a value for every parameter of the form's kernel, in signature order (:class:`ArraySpec`
    for arrays). ``then``: the launch that follows on the same stream (the decode form's
    combine)."""

    form: str
    grid: tuple[int, int, int]
    values: dict[str, Any]
    hints: dict[str, Any] = field(default_factory=dict)
    then: KernelCall | None = None

    def value(self, name: str) -> Any:
        """The value of the parameter ``name``, or of the grouped constant's item ``name``."""
        if name in self.values:
            return self.values[name]
        for param in declaration(self.form):
            for i, item in enumerate(param.members):
                if item.name == name:
                    return self.values[param.name][i]
        raise KeyError(f"the {self.form} kernel declares no {name!r}")

    def arguments(
        self, arrays: Mapping[str, Any], materialize: Callable[[str, ArraySpec], Any]
    ) -> tuple[Any, ...]:
        """The argument tuple of ``ct.launch``: ``arrays`` by name where given (None: not
        given), the other array parameters from ``materialize(name, spec)``."""
        unknown = sorted(n for n, a in arrays.items() if a is not None and n not in self.values)
        if unknown:
            raise ValueError(f"the {self.form} kernel takes no array {unknown}")
        out = []
        for name, value in self.values.items():
            if isinstance(value, ArraySpec):
                given = arrays.get(name)
                value = given if given is not None else materialize(name, value)
            out.append(value)
        return tuple(out)


def kernel_calls(plan: LaunchPlan, p: Problem) -> KernelCall:
    """The launches of ``plan`` on ``p`` (the shapes of its arrays), as their kernels declare
    them: the first, and its combine under ``then`` where the decode form splits the keys."""
    named = _named_values(plan, p)
    then = None
    if plan.combine is not None:
        c = plan.combine
        combined = {
            **named,
            "TILE_S": c.tile_s,
            "TILE_R": c.tile_r,
            "TILE_DC": c.tile_dc,
            "WITH_LSE": c.with_lse,  # the combine writes the LSE of every split
        }
        then = KernelCall(COMBINE, c.grid, _values(COMBINE, combined), {"occupancy": c.occupancy})
    return KernelCall(plan.form, plan.grid, _values(plan.form, named), plan.hints(), then)


def plan(
    p: Problem,
    config: LaunchConfig,
    *,
    scale: float | None,
    mask: str,
    input_pos: int,
    window: int | None,
    with_lse: bool,
    with_map: bool,
    sm_count: Callable[[], int],
) -> KernelCall:
    """:func:`kernels.cutile.plan.plan_launch`, then :func:`kernel_calls` of that plan: the
    form, grid and parameter values of one launch of ``config`` on ``p``."""
    launch_plan = plan_launch(
        config, p, mask=mask, input_pos=input_pos, window=window, scale=scale,
        with_lse=with_lse, with_map=with_map, sm_count=sm_count,
    )  # fmt: skip
    return kernel_calls(launch_plan, p)


def _values(form: str, named: Mapping[str, Any]) -> dict[str, Any]:
    """A value for every parameter the form's kernel declares, from ``named`` (a grouped
    constant's tuple from its items' values, in its order)."""
    values: dict[str, Any] = {}
    for param in declaration(form):
        if param.members:
            values[param.name] = tuple(_value(form, item, named) for item in param.members)
        else:
            values[param.name] = _value(form, param, named)
    return values


def _value(form: str, param: Parameter, named: Mapping[str, Any]) -> Any:
    if param.name not in named:
        raise KeyError(
            f"{python_function(form).__name__} declares {param.name!r}, which "
            "kernels.cutile.forms._named_values has no value for"
        )
    return _checked(param, named[param.name])


def _checked(param: Parameter, value: Any) -> Any:
    """``value`` if it is what ``param`` declares (an ArraySpec for an array)."""
    is_array = isinstance(value, ArraySpec)
    if is_array != (param.kind == "array") or not (is_array or type(value) is param.type):
        raise TypeError(f"{param.name}: a {param.kind} {param.type}, got {value!r}")
    return value


def _named_values(plan: LaunchPlan, p: Problem) -> dict[str, Any]:
    """Every parameter name the first launch's kernel may declare, with its value from
    ``plan`` and the shapes of ``p`` (the decode form's in its packed shape)."""
    batch_heads = p.batch * p.heads
    q_shape, o_shape = ((p.batch, p.heads, p.q_len, d) for d in (p.head_dim, p.value_dim))
    k_shape, v_shape = ((p.batch, p.kv_heads, p.k_len, d) for d in (p.head_dim, p.value_dim))
    maps = block_map_shape(batch_heads, plan.n_q_blocks, plan.n_k_blocks)
    named: dict[str, Any] = {
        # arrays
        "Q": ArraySpec(p.dtype, q_shape),
        "K": ArraySpec(p.dtype, k_shape),
        "V": ArraySpec(p.dtype, v_shape),
        "Out": ArraySpec(p.dtype, o_shape),
        "Lse": ArraySpec("float32", (p.batch, p.heads, p.q_len) if plan.with_lse else (1, 1, 1)),
        "BlockMap": ArraySpec("int32", maps if plan.with_map else (1, 1, 1)),
        "Order": ArraySpec(
            "int32", order_shape(batch_heads, plan.n_q_blocks) if plan.with_map else (1, 1)
        ),
        # runtime scalars
        "qk_scale_log2": float(plan.scale * LOG2E),
        "input_pos": int(plan.input_pos),
        "window": int(plan.window),
        "group": int(p.group),
        "remap_group": int(plan.remap_group),
        # compile-time constants
        "TILE_M": int(plan.tile_m),
        "TILE_N": int(plan.tile_n),
        "TILE_D": int(plan.tile_d),
        "TILE_DV": int(plan.tile_dv),
        "D_PADDED": bool(plan.d_padded),
        "MASK": MASK_CODES[plan.mask],
        "FAST_MATH": bool(plan.fast_math),
        "K_LATENCY": int(plan.k_latency),
        "V_LATENCY": int(plan.v_latency),
        "POLY_COLS": int(plan.poly_cols),
        "K_SPLIT": bool(plan.k_split),
        "WITH_LSE": bool(plan.with_lse),
        "WITH_MAP": bool(plan.with_map),
        "PIPELINE": bool(plan.pipeline),
        "STORE_TMA": bool(plan.store_tma),
        "Q_HALVES": bool(plan.q_halves),
        "EVEN_K": bool(plan.even_k),
        "Q_PREFETCH": bool(plan.q_prefetch),
        "PAIRED_K": bool(plan.paired_k),
    }
    if plan.form == "causal-persistent":
        # The L2 group is the remap's, whether or not remap is on: the assignment needs one.
        table = causal_tile_table(
            batch_heads, plan.n_q_blocks, plan.programs, plan.l2_group,
            plan.input_pos // plan.tile_n,
        )  # fmt: skip
        named["Tiles"] = ArraySpec("int32", table.shape, table)
    if plan.form == "decode":
        named.update(_decode_values(plan, p))
    return named


def _decode_values(plan: LaunchPlan, p: Problem) -> dict[str, Any]:
    """The decode form's values, where they differ from the other forms' (Q, Out and Lse in
    the packed shape: a caller's array of the problem's shape is viewed so)."""
    split = plan.kv_splits > 1
    rows_shape = (p.batch, plan.heads, plan.rows)
    parts = (p.batch * plan.heads, plan.kv_splits, plan.rows)
    # The instrumented launch's maps, per packed (batch·head, row block, key block).
    blocks = block_map_shape(p.batch * plan.heads, plan.n_q_blocks, plan.n_k_blocks)
    return {
        "Q": ArraySpec(p.dtype, (*rows_shape, p.head_dim)),
        "Out": ArraySpec(p.dtype, (*rows_shape, p.value_dim)),
        "Lse": ArraySpec("float32", rows_shape if plan.with_lse else (1, 1, 1)),
        "OutParts": ArraySpec("float32", (*parts, p.value_dim) if split else (1, 1, 1, 1)),
        "LseParts": ArraySpec("float32", parts if split else (1, 1, 1)),
        "BlockMap": ArraySpec("int32", blocks if plan.with_map else (1, 1, 1)),
        "Order": ArraySpec("int32", blocks if plan.with_map else (1, 1, 1)),
        "q_len": int(p.q_len),
        "kv_group": 1 if plan.pack_gqa else int(p.group),
        "split_blocks": int(plan.split_blocks),
        "SPLIT": split,
        # The decode kernel writes the LSE only without splits; the combine writes it else.
        "WITH_LSE": bool(plan.with_lse) and not split,
    }
