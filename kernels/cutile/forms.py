"""The kernel forms, the parameters each kernel declares, and where each value comes from.

Each kernel's own Python signature is its parameter declaration (read through
``__wrapped__``, see :func:`kernels.cutile.device.kernel`). :func:`plan` asks :func:`_sources`
for exactly the names a kernel declares, in its order; the launch (``kernels.cutile.launch``),
the tuner and the offline compile (``kernels.cutile.compile``) all build their argument tuple
or signature from that plan. A new parameter is therefore a change to the kernel's signature
plus one entry in :func:`_sources`, and a parameter with no source fails at the first plan; a
constant that is a knob's value as it is (``Knob.constant`` in :mod:`kernels.knobs`) needs no
entry: it comes from the registry. Compile-time constants travel grouped, as tuple parameters
declared with :func:`kernels.cutile.device.constant_group`: :func:`_sources` still answers one
name per item, and :func:`_values` builds each tuple from its items' values.
"""

from __future__ import annotations

import functools
import inspect
import math
import threading
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import cuda.tile as ct
import numpy as np

from kernels import knobs as registry
from kernels.cutile.combine_shape import combine_tile
from kernels.cutile.config import LaunchConfig
from kernels.cutile.device import Members
from kernels.cutile.device_decode import fmha_decode_combine_kernel, fmha_decode_kernel
from kernels.cutile.device_persistent import (
    fmha_fwd_causal_persistent_kernel,
    fmha_fwd_persistent_kernel,
)
from kernels.cutile.device_tile import fmha_fwd_kernel
from kernels.cutile.problem import Problem as Problem  # where the kernels' callers find it
from kernels.head_dims import pads_head_dim, tile_head_dim
from kernels.schedule import (
    auto_kv_splits,
    blocks_per_split,
    causal_tile_assignment,
    decode_tile_m,
    effective_splits,
)

LOG2E = 1.4426950408889634
MASK_CODES = {"none": 0, "causal": 1, "window": 2}
# Budget for the K/V of one remap group, below the H200's 60 MB L2 (two partitions).
L2_GROUP_BYTES = 24 * 1024 * 1024
# Bytes per element of the input dtypes (both are 16-bit).
ITEMSIZE = {"float16": 2, "bfloat16": 2}
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
# The SM slots the "auto" split count fills: CTAs per SM of the decode kernel, times the
# occupancy hint where one is given (without one tileiras gives its tile 255 registers and
# ~150 KB of shared memory: one CTA an SM; auto at 2 a SM was 4-20 % slower on the H200,
# docs/experiments.md).
DECODE_CTAS_PER_SM = 1
# CTAs of the combine an SM holds at once, by whether it writes the LSE. Without a hint tileiras
# gave its 256 threads 255 registers, one CTA an SM: at q_len 16 (1,024 CTAs at B=8) the combine
# ran in 8 waves and cost ~10 µs on the H200 where one wave costs ~3. At 4 it takes 64 registers
# and spills in no form; at 8 the combines without the LSE take 22-31 registers and spill
# nothing (0.6-1.6 µs less at q_len 16 on the H200), where those that write the LSE spill 72 B.
COMBINE_OCCUPANCY: dict[bool, int | None] = {False: 8, True: 4}


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


def kernel_for(config: LaunchConfig, form: str = "tile", *, with_lse: bool = False) -> Any:
    """The kernel object that runs ``form`` for ``config``: its compiler hints (the combine
    takes none from ``config``: its own occupancy, :data:`COMBINE_OCCUPANCY` by ``with_lse``)."""
    if form == COMBINE:
        return kernel_variant(form, occupancy=COMBINE_OCCUPANCY[with_lse])
    return kernel_variant(form, **config.hints())


# --------------------------------------------------------------------------------------------
# Where the values come from
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


def l2_group_size(batch_heads: int, k_len: int, head_dim: int, itemsize: int, group: int) -> int:
    """Batch·heads per remap group: the largest power of two whose K/V fit the L2 budget.

    Query heads that share a kv head (GQA) share its K/V, so they count once per ``group``.
    """
    kv_bytes_per_bh = max(2 * k_len * head_dim * itemsize // max(group, 1), 1)
    g = 1
    while g * 2 <= batch_heads and (g * 2) * kv_bytes_per_bh <= L2_GROUP_BYTES:
        g *= 2
    return g


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


@dataclass(frozen=True)
class Decode:
    """How the decode form lays a problem out: ``heads`` of ``rows`` rows each (the KV heads
    and group·q_len rows when packed, else the query heads and q_len), tiles of ``tile_m``
    rows, ``splits`` splits of ``split_blocks`` key blocks each."""

    heads: int
    rows: int
    tile_m: int
    splits: int
    split_blocks: int

    @property
    def row_blocks(self) -> int:
        return -(-self.rows // self.tile_m)


def grid_form(config: LaunchConfig) -> tuple[int, bool, int, int]:
    """The shape of a config's grid: tile height, persistent or not, CTAs per cluster, key
    blocks per iteration of the persistent loop (the tuner times the fastest of each)."""
    return (config.tile_m, config.persistent, config.num_ctas or 1, config.k_unroll)


def decode_ctas_per_sm(values: Mapping[str, Any]) -> int:
    """CTA slots per SM that "auto" splits fill for a launch's knob ``values``: the decode
    CTAs an SM keeps, times the occupancy hint."""
    return DECODE_CTAS_PER_SM * (values.get("occupancy") or 1)


def decode_layout(
    p: Problem, config: LaunchConfig, sm_count: Callable[[], int] | None = None
) -> Decode:
    """The decode form's layout of ``p``: rows per head, tile rows and the splits that run
    (``kv_splits``; auto asks ``sm_count`` and :func:`kernels.schedule.auto_kv_splits`)."""
    heads, rows = (p.kv_heads, p.group * p.q_len) if config.pack_gqa else (p.heads, p.q_len)
    tile_m = decode_tile_m(config.tile_m, rows)
    n_k_blocks = max(-(-p.k_len // config.tile_n), 1)
    requested = config.kv_splits
    if requested is None:
        tiles = p.batch * heads * -(-rows // tile_m)
        slots = (sm_count() if sm_count is not None else 1) * decode_ctas_per_sm(config.values())
        requested = auto_kv_splits(tiles, n_k_blocks, slots)
    splits = effective_splits(n_k_blocks, requested)
    return Decode(heads, rows, tile_m, splits, blocks_per_split(n_k_blocks, splits))


def resolved_splits(p: Problem, config: LaunchConfig, sm_count: Callable[[], int]) -> int:
    """The splits of the key range a launch of ``config`` on ``p`` runs (1: none); asks
    ``sm_count`` only for auto."""
    if config.kv_splits == 1:
        return 1
    return decode_layout(p, config, sm_count).splits


@dataclass(frozen=True)
class LaunchPlan:
    """One launch as its kernel declares it: the form, the grid, and a value for every
    parameter of the form's kernel, in signature order (:class:`ArraySpec` for arrays).
    ``then``: the launch that follows on the same stream (the decode form's combine)."""

    form: str
    grid: tuple[int, int, int]
    values: dict[str, Any]
    then: LaunchPlan | None = None

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


def plan(
    p: Problem,
    config: LaunchConfig,
    *,
    scale: float,
    mask: str,
    input_pos: int,
    window: int | None,
    with_lse: bool,
    with_map: bool,
    sm_count: Callable[[], int],
) -> LaunchPlan:
    """The form, grid and parameter values of one launch of ``config`` on ``p``.

    ``sm_count`` is asked only by the persistent forms, whose grid is one program per SM slot,
    and by the decode form's auto split count.
    """
    splits = resolved_splits(p, config, sm_count)
    form = config.kernel_form(mask, p.q_len, p.k_len, input_pos, splits=splits)
    n_tiles = -(-p.q_len // config.tile_m) * p.batch * p.heads
    programs = n_tiles
    layout = decode_layout(p, config, sm_count) if form == "decode" else None
    if layout is not None:
        grid = (layout.row_blocks, p.batch * layout.heads, layout.splits)
    else:
        if form != "tile":
            # One program per SM slot: occupancy programs per SM when the config asks for more.
            programs = min(n_tiles, sm_count() * (config.occupancy or 1))
        grid = (programs, 1, 1)
    sources = _sources(
        p, config, form, programs, scale=scale, mask=mask, input_pos=input_pos, window=window,
        with_lse=with_lse, with_map=with_map, layout=layout,
    )  # fmt: skip
    then = None
    if layout is not None and layout.splits > 1:
        tile_s, tile_r, tile_dc = combine_tile(layout.splits, layout.rows, p.value_dim)
        combine_grid = (
            -(-layout.rows // tile_r),
            p.batch * layout.heads,
            -(-p.value_dim // tile_dc),
        )
        combine_sources = {
            **sources,
            "TILE_S": lambda: tile_s,
            "TILE_R": lambda: tile_r,
            "TILE_DC": lambda: tile_dc,
            "WITH_LSE": lambda: bool(with_lse),  # the combine writes the LSE of every split
        }
        then = LaunchPlan(COMBINE, combine_grid, _values(COMBINE, combine_sources))
    return LaunchPlan(form, grid, _values(form, sources), then)


def _values(form: str, sources: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """A value for every parameter the form's kernel declares, from ``sources`` (a grouped
    constant's tuple from its items' sources, in its order)."""
    values: dict[str, Any] = {}
    for param in declaration(form):
        if param.members:
            values[param.name] = tuple(_value(form, item, sources) for item in param.members)
        else:
            values[param.name] = _value(form, param, sources)
    return values


def _value(form: str, param: Parameter, sources: dict[str, Callable[[], Any]]) -> Any:
    source = sources.get(param.name)
    if source is None:
        raise KeyError(
            f"{python_function(form).__name__} declares {param.name!r}, which "
            "kernels.cutile.forms._sources has no value for"
        )
    return _checked(param, source())


def _checked(param: Parameter, value: Any) -> Any:
    """``value`` if it is what ``param`` declares (an ArraySpec for an array)."""
    is_array = isinstance(value, ArraySpec)
    if is_array != (param.kind == "array") or not (is_array or type(value) is param.type):
        raise TypeError(f"{param.name}: a {param.kind} {param.type}, got {value!r}")
    return value


def _sources(
    p: Problem,
    config: LaunchConfig,
    form: str,
    programs: int,
    *,
    scale: float,
    mask: str,
    input_pos: int,
    window: int | None,
    with_lse: bool,
    with_map: bool,
    layout: Decode | None = None,
) -> dict[str, Callable[[], Any]]:
    """Every parameter name any kernel declares, with how to compute its value (called only
    for the names the form's kernel declares). ``layout``: the decode form's."""
    n_q_blocks = -(-p.q_len // config.tile_m)
    n_k_blocks = -(-p.k_len // config.tile_n)
    batch_heads = p.batch * p.heads
    q_shape, o_shape = ((p.batch, p.heads, p.q_len, d) for d in (p.head_dim, p.value_dim))
    k_shape, v_shape = ((p.batch, p.kv_heads, p.k_len, d) for d in (p.head_dim, p.value_dim))

    def l2_group() -> int:
        width = (p.head_dim + p.value_dim) // 2  # K's and V's bytes per key, halved
        return l2_group_size(batch_heads, p.k_len, width, ITEMSIZE[p.dtype], p.group)

    def remap_group() -> int:
        # Remapping balances causal/window work; without a mask it would only scatter the
        # heads that run together (the schedule keeps the plain order there too).
        return l2_group() if config.remap and mask != "none" else 0

    def tiles() -> ArraySpec:
        # The L2 group is the remap's, whether or not remap is on: the assignment needs one.
        table = causal_tile_table(
            batch_heads, n_q_blocks, programs, l2_group(), input_pos // config.tile_n
        )
        return ArraySpec("int32", table.shape, table)

    def even_k() -> bool:
        return p.k_len % config.tile_n == 0

    def q_prefetch() -> bool:
        return even_k() and bool(config.k_split)

    def paired_k() -> bool:
        return q_prefetch() and config.k_unroll == 2 and (p.k_len // config.tile_n) % 2 == 0

    def poly_cols() -> int:
        # The causal persistent grid's single loop takes the polynomial too (see its kernel).
        poly = config.k_split or form == "causal-persistent"
        return int(config.poly_exp2_cols) if poly else 0

    return {
        # arrays
        "Q": lambda: ArraySpec(p.dtype, q_shape),
        "K": lambda: ArraySpec(p.dtype, k_shape),
        "V": lambda: ArraySpec(p.dtype, v_shape),
        "Out": lambda: ArraySpec(p.dtype, o_shape),
        "Lse": lambda: ArraySpec("float32", (p.batch, p.heads, p.q_len) if with_lse else (1, 1, 1)),
        "BlockMap": lambda: ArraySpec(
            "int32", block_map_shape(batch_heads, n_q_blocks, n_k_blocks) if with_map else (1, 1, 1)
        ),
        "Order": lambda: ArraySpec(
            "int32", order_shape(batch_heads, n_q_blocks) if with_map else (1, 1)
        ),
        "Tiles": tiles,
        # runtime scalars
        "qk_scale_log2": lambda: float(scale * LOG2E),
        "input_pos": lambda: int(input_pos),
        "window": lambda: int(window) if window is not None else 0,
        "group": lambda: p.group,
        "remap_group": remap_group,
        # compile-time constants: the knobs' own (TILE_M, K_LATENCY, STORE_TMA, ...), then
        # those computed from knobs and the problem (overriding a knob's where it has one)
        **{
            knob.constant: functools.partial(knob.kind, getattr(config, knob.name))
            for knob in registry.KNOBS.values()
            if knob.constant and knob.launch
        },
        "TILE_D": lambda: tile_head_dim(p.head_dim),
        "TILE_DV": lambda: tile_head_dim(p.value_dim),
        # One switch checks both K's and V's loads: either's columns past the array's are zeros.
        "D_PADDED": lambda: pads_head_dim(p.head_dim) or pads_head_dim(p.value_dim),
        "MASK": lambda: MASK_CODES[mask],
        "WITH_LSE": lambda: bool(with_lse),
        "WITH_MAP": lambda: bool(with_map),
        "PIPELINE": lambda: bool(config.pipeline) and bool(config.k_split),
        "POLY_COLS": poly_cols,
        "EVEN_K": even_k,
        "Q_PREFETCH": q_prefetch,
        "PAIRED_K": paired_k,
        **(
            _decode_sources(p, layout, with_lse, with_map, config.tile_n)
            if layout is not None
            else {}
        ),
    }


def _decode_sources(
    p: Problem, layout: Decode, with_lse: bool, with_map: bool, tile_n: int
) -> dict[str, Callable[[], Any]]:
    """The decode form's values, where they differ from the other forms' (Q, Out and Lse in
    the packed shape: a caller's array of the problem's shape is viewed so)."""
    split = layout.splits > 1
    rows_shape = (p.batch, layout.heads, layout.rows)
    parts = (p.batch * layout.heads, layout.splits, layout.rows)
    # The instrumented launch's maps, per packed (batch·head, row block, key block).
    blocks = block_map_shape(p.batch * layout.heads, layout.row_blocks, -(-p.k_len // tile_n))
    return {
        "Q": lambda: ArraySpec(p.dtype, (*rows_shape, p.head_dim)),
        "Out": lambda: ArraySpec(p.dtype, (*rows_shape, p.value_dim)),
        "Lse": lambda: ArraySpec("float32", rows_shape if with_lse else (1, 1, 1)),
        "OutParts": lambda: ArraySpec("float32", (*parts, p.value_dim) if split else (1, 1, 1, 1)),
        "LseParts": lambda: ArraySpec("float32", parts if split else (1, 1, 1)),
        "BlockMap": lambda: ArraySpec("int32", blocks if with_map else (1, 1, 1)),
        "Order": lambda: ArraySpec("int32", blocks if with_map else (1, 1, 1)),
        "q_len": lambda: p.q_len,
        "kv_group": lambda: p.group if layout.heads == p.heads else 1,
        "split_blocks": lambda: layout.split_blocks,
        "TILE_M": lambda: layout.tile_m,
        "SPLIT": lambda: split,
        # The decode kernel writes the LSE only without splits; the combine writes it else.
        "WITH_LSE": lambda: bool(with_lse) and not split,
    }


def default_scale(head_dim: int) -> float:
    """1 / sqrt(head_dim), the scale a launch uses unless told otherwise."""
    return 1.0 / math.sqrt(head_dim)
