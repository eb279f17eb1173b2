"""From a validated config and a problem to the launch plan: every value a launch needs, with
nothing left to resolve ("auto" split counts, the kernel form, the decode form's tile rows,
the persistent grid's size, the padded head dims, the switches a form computes from the knobs).

The path of a launch, top-down:

1. :func:`call_config` turns the knobs a caller gave into a validated :class:`LaunchConfig`;
   on a problem bound by reading K and V the knobs left out take the decode presets' values
   (:func:`kernels.decode_choice.front_door_knobs`).
2. :func:`plan_launch` turns that config and the problem into a :class:`LaunchPlan`: the one
   function where an auto value is resolved (the split count through
   :func:`kernels.decode_layout.decode_layout`).
3. :func:`kernels.cutile.forms.kernel_calls` turns the plan into each kernel's grid and
   argument values, by the kernel's own signature; :mod:`kernels.cutile.launches` binds arrays
   and launches. Neither reads the config.

The workbench stores :meth:`LaunchPlan.to_dict` with each point, so a run says what it ran.
Pure Python: no cuda.tile, so the CPU tests and the workbench plan as the launch does.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kernels.cutile.combine_shape import combine_tile
from kernels.cutile.config import LaunchConfig
from kernels.cutile.problem import Problem
from kernels.decode_choice import front_door_knobs
from kernels.decode_layout import DecodeLayout, cdiv, decode_layout
from kernels.head_dims import CHUNKED, EXACT, PADDED, column_chunks, head_columns, tile_head_dim
from kernels.knobs import DTYPE_ITEMSIZE
from kernels.schedule import decode_form

# Budget for the K/V of one remap group, below the H200's 60 MB L2 (two partitions).
L2_GROUP_BYTES = 24 * 1024 * 1024
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
# The forms whose kernels take a head dim in power-of-two column chunks (kernels.head_dims);
# the others run it in the next power-of-two tile.
CHUNKED_FORMS = ("tile", "persistent", "causal-persistent")


def default_scale(head_dim: int) -> float:
    """1 / sqrt(head_dim), the scale a launch uses unless told otherwise."""
    return 1.0 / math.sqrt(head_dim)


def decode_ctas_per_sm(values: Mapping[str, Any]) -> int:
    """CTA slots per SM that "auto" splits fill for a launch's knob ``values``: the decode
    CTAs an SM keeps, times the occupancy hint."""
    return DECODE_CTAS_PER_SM * (values.get("occupancy") or 1)


def l2_group_size(batch_heads: int, k_len: int, head_dim: int, itemsize: int, group: int) -> int:
    """Batch·heads per remap group: the largest power of two whose K/V fit the L2 budget.

    Query heads that share a kv head (GQA) share its K/V, so they count once per ``group``.
    """
    kv_bytes_per_bh = max(2 * k_len * head_dim * itemsize // max(group, 1), 1)
    g = 1
    while g * 2 <= batch_heads and (g * 2) * kv_bytes_per_bh <= L2_GROUP_BYTES:
        g *= 2
    return g


def call_config(given: Mapping[str, Any], problem: Problem, mask: str) -> LaunchConfig:
    """The validated config of a call that gave the knobs ``given`` (ValueError naming the
    first one refused): on a decode-bound problem the knobs left out take the decode
    presets' values unless the caller chose the form."""
    knobs = front_door_knobs(
        given, problem.group, problem.q_len, problem.k_len, problem.head_dim, mask
    )
    return LaunchConfig.of(knobs)


@dataclass(frozen=True)
class CombinePlan:
    """The decode form's second launch, which merges the splits: its tile (splits padded, rows,
    head-dim columns per CTA), grid, occupancy hint and whether it writes the LSE."""

    tile_s: int
    tile_r: int
    tile_dc: int
    grid: tuple[int, int, int]
    occupancy: int | None
    with_lse: bool


@dataclass(frozen=True)
class LaunchPlan:
    """Every value one attention launch needs, none of them "auto".

    ``form``: tile, persistent, causal-persistent or decode. ``tile_m``: the rows a tile
    runs (the decode form's may be fewer than the knob's); ``n_q_blocks`` row blocks of one
    slice, a slice being ``heads`` of ``rows`` rows (packed: the KV heads and group·q_len);
    ``kv_splits`` splits of ``split_blocks`` key blocks each (1: none); ``programs`` and
    ``grid``: the first launch's (``sm_count``: the SMs the grid or an auto split count was
    sized for, None where neither asked). ``d_chunks``/``dv_chunks``: the power-of-two column
    chunks D and Dv run in, largest first (``tile_d``/``tile_dv`` their sums, which the kernel
    takes); ``head_columns`` says how they cover the head dims (exact, chunked or padded,
    :mod:`kernels.head_dims`); ``d_padded``: some chunk reaches past its array's columns, so
    every K/V load is bounds-checked. The switches are as the kernel takes them
    (``pipeline`` off without the K-loop split, ``paired_k`` only where the keys pair up), the
    hints as the compiler gets them. ``combine``: the decode form's second launch where the
    key range is split.
    """

    form: str
    grid: tuple[int, int, int]
    programs: int
    sm_count: int | None
    mask: str
    input_pos: int
    window: int  # 0: no window
    scale: float
    with_lse: bool
    with_map: bool
    tile_m: int
    tile_n: int
    tile_d: int
    tile_dv: int
    d_chunks: tuple[int, ...]
    dv_chunks: tuple[int, ...]
    head_columns: str
    d_padded: bool
    n_q_blocks: int
    n_k_blocks: int
    heads: int
    rows: int
    pack_gqa: bool
    kv_splits: int
    split_blocks: int
    l2_group: int
    remap_group: int
    fast_math: bool
    k_split: bool
    k_latency: int
    v_latency: int
    poly_cols: int
    pipeline: bool
    store_tma: bool
    q_halves: bool
    even_k: bool
    q_prefetch: bool
    paired_k: bool
    occupancy: int | None
    num_worker_warps: int | None
    num_ctas: int | None
    combine: CombinePlan | None = None

    def hints(self) -> dict[str, int | None]:
        """The compiler hints of the first launch, by hint name (None: the compiler's choice)."""
        return {
            "occupancy": self.occupancy,
            "num_worker_warps": self.num_worker_warps,
            "num_ctas": self.num_ctas,
        }

    def resolved_knobs(self) -> dict[str, Any]:
        """The knob values a launch of one slice takes to run what this plan resolved (the
        split count: a launch of fewer tiles would resolve auto to another)."""
        return {"kv_splits": self.kv_splits}

    def to_dict(self) -> dict[str, Any]:
        """The plan as plain JSON values (what a stored point keeps)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LaunchPlan:
        """A plan from :meth:`to_dict`'s values (lists back to tuples)."""
        values = dict(data)
        values["grid"] = tuple(values["grid"])
        # A plan stored before the chunks were planned ran each head dim in one tile.
        for chunks, width in (("d_chunks", "tile_d"), ("dv_chunks", "tile_dv")):
            values[chunks] = tuple(values.get(chunks) or (values[width],))
        values.setdefault("head_columns", PADDED if values["d_padded"] else EXACT)
        combine = values.get("combine")
        if combine is not None:
            values["combine"] = CombinePlan(**{**combine, "grid": tuple(combine["grid"])})
        return cls(**values)


def plan_launch(
    config: LaunchConfig,
    problem: Problem,
    *,
    mask: str = "none",
    input_pos: int = 0,
    window: int | None = None,
    scale: float | None = None,
    with_lse: bool = False,
    with_map: bool = False,
    sm_count: Callable[[], int],
) -> LaunchPlan:
    """The plan of one launch of ``config`` on ``problem``: every auto value resolved here.

    ``sm_count`` is asked only by the persistent forms, whose grid is one program per SM slot,
    and by an auto split count (its slots: :func:`decode_ctas_per_sm` a SM). ``scale``: None
    is :func:`default_scale`. ValueError where the config cannot run ``mask``.
    """
    p = problem
    values = config.values()
    asked: list[int] = []

    def sms() -> int:
        if not asked:
            asked.append(int(sm_count()))
        return asked[0]

    layout = None
    if decode_form(values):
        layout = decode_layout(
            values, batch=p.batch, heads=p.heads, kv_heads=p.kv_heads, q_len=p.q_len,
            k_len=p.k_len, sm_slots=lambda: sms() * decode_ctas_per_sm(values),
        )  # fmt: skip
    form = config.kernel_form(
        mask, p.q_len, p.k_len, input_pos, splits=layout.splits if layout else 1
    )
    if form != "decode":
        layout = None
    n_k_blocks = cdiv(p.k_len, config.tile_n)
    n_tiles = cdiv(p.q_len, config.tile_m) * p.batch * p.heads
    programs = n_tiles
    if layout is not None:
        grid = (layout.row_blocks, p.batch * layout.heads, layout.splits)
    else:
        if form != "tile":
            # One program per SM slot: occupancy programs per SM when the config asks for more.
            programs = min(n_tiles, sms() * (config.occupancy or 1))
        grid = (programs, 1, 1)
    d_chunks, dv_chunks = (
        column_chunks(d) if form in CHUNKED_FORMS else (tile_head_dim(d),)
        for d in (p.head_dim, p.value_dim)
    )
    columns = [head_columns(d, c) for d, c in ((p.head_dim, d_chunks), (p.value_dim, dv_chunks))]
    width = (p.head_dim + p.value_dim) // 2  # K's and V's bytes per key, halved
    l2_group = l2_group_size(p.batch * p.heads, p.k_len, width, DTYPE_ITEMSIZE[p.dtype], p.group)
    even_k = p.k_len % config.tile_n == 0
    q_prefetch = even_k and config.k_split
    # The causal persistent grid's single loop takes the polynomial too (see its kernel).
    poly = config.k_split or form == "causal-persistent"
    return LaunchPlan(
        form=form,
        grid=grid,
        programs=programs,
        sm_count=asked[0] if asked else None,
        mask=mask,
        input_pos=int(input_pos),
        window=int(window) if window is not None else 0,
        scale=float(default_scale(p.head_dim) if scale is None else scale),
        with_lse=bool(with_lse),
        with_map=bool(with_map),
        tile_m=layout.tile_m if layout else config.tile_m,
        tile_n=config.tile_n,
        tile_d=sum(d_chunks),
        tile_dv=sum(dv_chunks),
        d_chunks=d_chunks,
        dv_chunks=dv_chunks,
        # Chunked if either head dim is, else padded if either is.
        head_columns=next((c for c in (CHUNKED, PADDED) if c in columns), EXACT),
        # One switch checks both K's and V's loads: either's columns past the array's are zeros.
        d_padded=sum(d_chunks) != p.head_dim or sum(dv_chunks) != p.value_dim,
        n_q_blocks=layout.row_blocks if layout else cdiv(p.q_len, config.tile_m),
        n_k_blocks=n_k_blocks,
        heads=layout.heads if layout else p.heads,
        rows=layout.rows if layout else p.q_len,
        pack_gqa=layout is not None and config.pack_gqa,
        kv_splits=layout.splits if layout else 1,
        split_blocks=layout.split_blocks if layout else n_k_blocks,
        l2_group=l2_group,
        # Remapping balances causal/window work; without a mask it would only scatter the
        # heads that run together (the schedule keeps the plain order there too).
        remap_group=l2_group if config.remap and mask != "none" else 0,
        fast_math=config.fast_math,
        k_split=config.k_split,
        k_latency=config.k_latency,
        v_latency=config.v_latency,
        poly_cols=int(config.poly_exp2_cols) if poly else 0,
        pipeline=config.pipeline and config.k_split,
        store_tma=config.store_tma,
        q_halves=config.q_halves,
        even_k=even_k,
        q_prefetch=q_prefetch,
        paired_k=q_prefetch and config.k_unroll == 2 and (p.k_len // config.tile_n) % 2 == 0,
        occupancy=config.occupancy,
        num_worker_warps=config.num_worker_warps,
        num_ctas=config.num_ctas,
        combine=_combine(p, layout, with_lse) if layout is not None else None,
    )


def _combine(p: Problem, layout: DecodeLayout, with_lse: bool) -> CombinePlan | None:
    """The combine of a split key range (None: one split, the decode kernel writes Out)."""
    if layout.splits <= 1:
        return None
    tile_s, tile_r, tile_dc = combine_tile(layout.splits, layout.rows, p.value_dim)
    grid = (cdiv(layout.rows, tile_r), p.batch * layout.heads, cdiv(p.value_dim, tile_dc))
    return CombinePlan(
        tile_s, tile_r, tile_dc, grid, COMBINE_OCCUPANCY[bool(with_lse)], bool(with_lse)
    )


# What a stored point's plan shows as CSV columns (``plan_<name>``); the whole plan follows.
CSV_FIELDS = ("form", "tile_m", "tile_n", "kv_splits", "pack_gqa", "grid")


def plan_columns(stored: Mapping[str, Any] | None) -> dict[str, Any]:
    """A stored plan (:meth:`LaunchPlan.to_dict`, read back from JSON) as the CSV's
    ``plan_*`` columns and its ``plan`` JSON; all empty without one."""
    plan = dict(stored or {})
    if isinstance(plan.get("grid"), list):
        plan["grid"] = "x".join(map(str, plan["grid"]))
    return {
        **{f"plan_{name}": plan.get(name) for name in CSV_FIELDS},
        "plan": json.dumps(stored, sort_keys=True) if stored else None,
    }


def plan_words(stored: Mapping[str, Any]) -> str:
    """A stored plan in a few words: ``decode · 16×128 tiles · 16 KV splits of 16 key blocks
    · heads packed · grid 1×8×16 · combine grid 1×8×4``, or ``tile · 64×64 tiles · D 64+32 /
    Dv 64+32 columns (chunked) · grid 256×1×1`` where a head dim is not a power of two."""
    if "units" in stored:  # a ragged point's serving kernel (serving_plan_record)
        return serving_plan_words(stored)
    words = [str(stored.get("form")), f"{stored.get('tile_m')}×{stored.get('tile_n')} tiles"]
    splits = stored.get("kv_splits") or 1
    if splits > 1:
        words.append(f"{splits} KV splits of {stored.get('split_blocks')} key blocks")
    if stored.get("pack_gqa"):
        words.append("heads packed")
    columns = stored.get("head_columns")
    if columns in (CHUNKED, PADDED):  # a power-of-two head dim says nothing of its columns
        chunks = [("D", stored.get("d_chunks")), ("Dv", stored.get("dv_chunks"))]
        said = [f"{name} {'+'.join(map(str, c))}" for name, c in chunks if c]
        words.append(f"{' / '.join(said)} columns ({columns})")
    words.append("grid " + "×".join(str(n) for n in stored.get("grid") or ()))
    combine = stored.get("combine")
    if isinstance(combine, Mapping):
        words.append("combine grid " + "×".join(str(n) for n in combine.get("grid") or ()))
    return " · ".join(words)


# The knobs a ragged launch (the serving kernels, kernels/cutile/varlen.py and paged.py) reads:
# its tile rows, its key block, its KV splits, its CTAs an SM and whether heads are packed.
SERVING_KNOBS = ("tile_m", "tile_n", "kv_splits", "occupancy", "pack_gqa")
# The knobs of the varlen kernel's block step (kernels/cutile/varlen.py): the score columns of
# an unmasked key block whose exp2 is the FMA polynomial, and the K and V load latency hints;
# the paged kernel takes none of them.
VARLEN_STEP_KNOBS = ("poly_exp2_cols", "k_latency", "v_latency")
# The knobs whose compiler hints the serving kernels are compiled with: CTAs an SM, the
# worker warps the varlen kernel's 128-row tile takes, and the varlen kernel's cluster.
SERVING_HINT_KNOBS = ("occupancy", "num_worker_warps", "num_ctas")
# The varlen kernel's CTAs a cluster (one tile program on two CTAs), the paged kernel has none.
VARLEN_CLUSTER_KNOB = SERVING_HINT_KNOBS[2]


def serving_plan_record(
    form: str, kernel: str, tiles: tuple[int, int], kv_splits: int, occupancy: int | None,
    pack_gqa: bool, grid: list[int], **facts: Any,
) -> dict[str, Any]:  # fmt: skip
    """A ragged point's stored plan: the keys :data:`CSV_FIELDS` and :func:`plan_words` read
    (``form``: "varlen" or "paged"; ``kv_splits``: the most splits of a sequence), and the
    serving ``facts`` (units, page size, the fewest splits, the split request, the combine)."""
    record = dict(zip(SERVING_KNOBS, (*tiles, kv_splits, occupancy, pack_gqa), strict=True))
    return {"form": form, "kernel": kernel, "grid": grid, **record, **facts}


def serving_plan_words(stored: Mapping[str, Any]) -> str:
    """A ragged point's plan in a few words: ``paged · fmha_paged_kernel · 16×64 tiles · pages
    of 16 · 412 units, 1-8 splits a sequence (auto) · heads packed · grid 8×412×1 · combine
    grid 8×64×4 · occ auto``."""
    words = [str(stored.get("form")), str(stored.get("kernel"))]
    words.append(f"{stored.get('tile_m')}×{stored.get('tile_n')} tiles")
    if stored.get("page_size"):
        words.append(f"pages of {stored['page_size']}")
    units = stored.get("units")
    if stored.get("form") == "paged":
        low, high = stored.get("min_splits", 1), stored.get("kv_splits", 1)
        spread = f"{low}-{high}" if low != high else f"{high}"
        words.append(f"{units} units, {spread} splits a sequence ({stored.get('split_request')})")
    else:
        words.append(f"{units} q-block tiles")
        if stored.get("poly_exp2_cols"):
            words.append(f"poly exp2 on {stored['poly_exp2_cols']} columns")
        if stored.get("k_latency") is not None:
            words.append(f"lat {stored['k_latency']}/{stored.get('v_latency')}")
        if (stored.get(VARLEN_CLUSTER_KNOB) or 1) > 1:
            words.append(f"{stored[VARLEN_CLUSTER_KNOB]}-CTA clusters")
    if stored.get("pack_gqa"):
        words.append("heads packed")
    words.append("grid " + "×".join(str(n) for n in stored.get("grid") or ()))
    combine = stored.get("combine")
    if isinstance(combine, Mapping):
        words.append("combine grid " + "×".join(str(n) for n in combine.get("grid") or ()))
    ctas = stored.get("occupancy")
    words.append(f"occ {ctas if ctas is not None else 'auto'}")
    return " · ".join(words)
