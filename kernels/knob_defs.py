"""One definition per knob: :class:`Knob` and the registry of every knob (:data:`KNOBS`), with
the sets derived from it (the kernel's launch knobs, the tunable ones, the exposed ones).

:mod:`kernels.knobs` is the public face: it re-exports these, the rules between knobs
(:mod:`kernels.knob_rules`) and the problem's axes (:mod:`kernels.problem_axes`), and checks
values against them. Nothing here imports cuda.tile or Qt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# The capability of the project's cuTile kernel, the one backend that narrows knob values.
CUTILE = "cutile"
CAPABILITY_NAMES = {CUTILE: "the cuTile kernel"}


def poly_exp2_choices(tile_n: int) -> tuple[int, ...]:
    """Allowed ``poly_exp2_cols`` for a key tile: 0 (off) or tile_n/16, /8, /4, /2.

    The polynomial takes a block's last C score columns and the MUFU part to their left is
    joined on in blocks of doubling width, so C is tile_n over a power of two; /16 is the
    smallest share offered.
    """
    return (0, *(tile_n // d for d in (16, 8, 4, 2) if tile_n // d >= 1))


Values = Mapping[str, Any]


@dataclass(frozen=True)
class Knob:
    """One knob.

    ``values``: every value the workbench's config takes (None: not set, the compiler's
    choice); ``narrower``: capability -> the fewer values a backend takes (the CPU reference
    runs 16- and 32-row tiles, the cuTile kernel does not); ``choices``: where the allowed
    values depend on other knobs (``choices_reads``: the polynomial's columns on tile_n), a
    function of them.

    ``word``: the label word, a format string for a number (``"occ {}"``; two ``{}`` with
    ``pair``: rendered with that knob, ``"{}×{}"``, and one row of the window,
    ``pair_label``), for a switch the word when on (and ``word_off`` when off); a number shows
    when it departs from its default (``always``: every time).

    ``tunable``: the tuner's search space sets it. ``constant``/``hint``: the kernel
    compile-time constant or compiler hint it feeds (a constant gets the knob's value as it is,
    unless the launch plan, ``kernels.cutile.plan``, computes it from more: PIPELINE,
    POLY_COLS, PAIRED_K).
    ``launch``: a field of the kernel's LaunchConfig (``autotune`` is the workbench's own);
    ``exposed``: a CLI flag and a row in the window.
    """

    name: str
    kind: type
    default: Any
    values: tuple[Any, ...]
    flag: str
    label: str
    help: str
    word: str | None = None
    word_off: str | None = None
    pair: str | None = None
    pair_label: str = ""
    always: bool = False
    names: Mapping[Any, str] = field(default_factory=dict)
    narrower: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    choices: Callable[[Values], tuple[Any, ...]] | None = None
    choices_reads: tuple[str, ...] = ()
    choices_note: str = ""
    tunable: bool = False
    constant: str | None = None
    hint: str | None = None
    launch: bool = True
    exposed: bool = True

    def values_for(self, capability: str | None = None) -> tuple[Any, ...]:
        """The values ``capability`` takes (every value the config takes for None)."""
        return self.narrower.get(capability, self.values) if capability else self.values

    def text(self, value: Any) -> str:
        """How a value reads in the window and in help: ``auto``, ``off``, ``2 (pairs)``."""
        return self.names.get(value, str(value))

    def values_text(self, values: Sequence[Any] | None = None) -> str:
        """``1, 2, 4, 8, 16``, or a run of whole numbers as ``1 to 32``; None left out."""
        shown = [v for v in (self.values if values is None else values) if v is not None]
        if self.kind is bool:
            return "true or false"
        whole = all(isinstance(v, int) and not isinstance(v, bool) for v in shown)
        if len(shown) > 4 and whole and shown == list(range(shown[0], shown[-1] + 1)):
            return f"{shown[0]} to {shown[-1]}"
        return ", ".join(str(v) for v in shown)

    def expected(self) -> str:
        """What a refusal of a value outside :attr:`values` says."""
        text = self.values_text()
        if self.kind is bool:
            return f"expected {text}"
        if " to " in text:
            return f"expected a whole number from {text}"
        return f"expected one of {text}"

    def word_for(self, value: Any, partner: Any = None) -> str | None:
        """This knob's label word for ``value`` (None: nothing to say)."""
        if self.kind is bool:
            return self.word if value is True else self.word_off if value is False else None
        if self.word is None:
            return None
        if self.pair is not None:
            other = KNOBS[self.pair]
            if not self.always and value == self.default and partner == other.default:
                return None
            return self.word.format(value, partner)
        if value == self.default and not self.always:
            return None
        if value is None:  # "auto" where the knob names it, else nothing to say
            return self.word.format(self.names[None]) if None in self.names else None
        return self.word.format(value)


def _bools(name: str, default: bool, flag: str, label: str, help: str, **more: Any) -> Knob:
    return Knob(name, bool, default, (False, True), flag, label, help, **more)


_TILES = (16, 32, 64, 128, 256)
# Splits of the key range a user can ask for (None, "auto", picks any count up to the last).
KV_SPLIT_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128)
# The tile sizes the cuTile kernel takes (its narrower values of the tile knobs).
KERNEL_TILES = (64, 128, 256)

# The CSV's column order follows this order (mask and window sit after MASK_FIELDS_AFTER, see
# workbench.config): a new knob goes at the end.
_KNOBS: tuple[Knob, ...] = (
    Knob(
        "tile_m", int, 64, _TILES, "--tile-m", "Tile M",
        "query rows per tile (per program)",
        word="{}×{}", pair="tile_n", pair_label="Tile M × N", always=True,
        narrower={CUTILE: KERNEL_TILES},
        tunable=True, constant="TILE_M",
    ),
    Knob(
        "tile_n", int, 64, _TILES, "--tile-n", "Tile N",
        "keys per key block (decode, bound by reading K and V, does best with 32 KB of K a "
        "block: 128 keys at D 128, 256 at D 64)",
        narrower={CUTILE: KERNEL_TILES}, tunable=True, constant="TILE_N",
    ),
    _bools(
        "fast_math", True, "--fast-math", "Fast math",
        "flush-to-zero exp2 and approximate division",
        word="fast-math", constant="FAST_MATH",
    ),
    _bools(
        "k_split", True, "--k-split", "K-loop split",
        "unmasked key blocks in a mask-free loop, the masked ones in a second loop",
        word="k-split", constant="K_SPLIT",
    ),
    _bools(
        "remap", True, "--remap", "Remap program ids",
        "heaviest q-blocks first, batch·heads grouped for L2 reuse (no effect without a mask)",
        word="remap",
    ),
    _bools(
        "autotune", False, "--autotune", "Autotune",
        "the cuTile backend's tuner picks the tiles and hints per length (the tunable knobs "
        "set here are then only nominal)",
        word="autotune", launch=False,
    ),
    Knob(
        "occupancy", int, None, (None, *range(1, 33)), "--occupancy", "Occupancy",
        "programs per SM the compiler targets (a hint; auto: its choice)",
        word="occ {}", names={None: "auto"}, tunable=True, hint="occupancy",
    ),
    Knob(
        "num_worker_warps", int, None, (None, 4, 8), "--worker-warps", "Worker warps",
        "worker warps per program (a hint; other counts need CUDA 13.5; auto: the compiler's "
        "choice)",
        word="{} warps", names={None: "auto"}, tunable=True, hint="num_worker_warps",
    ),
    Knob(
        "poly_exp2_cols", int, 0,
        tuple(sorted({c for t in _TILES for c in poly_exp2_choices(t)})),
        "--poly-exp2-cols", "Poly exp2 cols",
        "exp2 of this many score columns per unmasked key block as an FMA polynomial, off the "
        "MUFU unit (0: off)",
        word="poly {}", names={0: "off"},
        choices=lambda v: poly_exp2_choices(v["tile_n"]), choices_reads=("tile_n",),
        choices_note="0 or tile_n/16, /8, /4, /2",
        tunable=True, constant="POLY_COLS",
    ),
    Knob(
        "num_ctas", int, None, (None, 1, 2, 4, 8, 16), "--cluster-ctas", "Cluster CTAs",
        "CTAs per cluster (a hint; auto: the compiler's choice); tile M 128 with 2 and "
        "occupancy 2 splits the rows 64/64 and multicasts K/V to both CTAs",
        word="cluster {}", names={None: "auto"}, tunable=True, hint="num_ctas",
    ),
    _bools(
        "persistent", False, "--persistent", "Persistent grid",
        "one program per SM slot looping over the tiles (causal problems that are not whole "
        "square tiles run one CTA per tile)",
        word="persistent", tunable=True,
    ),
    Knob(
        "k_unroll", int, 1, (1, 2), "--k-unroll", "Key blocks / iter",
        "key blocks per iteration of the persistent grid's key loop: 2 gives K and V two "
        "shared-memory buffers each (taken where k_len is an even number of whole key blocks "
        "and the K-loop split is on, else 1)",
        word="k-unroll {}", names={2: "2 (pairs)"}, tunable=True, constant="PAIRED_K",
    ),
    Knob(
        "k_latency", int, 2, tuple(range(1, 11)), "--k-latency", "K load latency",
        "latency hint of the K tile loads (how heavy their DRAM traffic is)",
        word="lat {}/{}", pair="v_latency", pair_label="Load latency K / V", tunable=True,
        constant="K_LATENCY",
    ),
    Knob(
        "v_latency", int, 4, tuple(range(1, 11)), "--v-latency", "V load latency",
        "latency hint of the V tile loads",
        tunable=True, constant="V_LATENCY",
    ),
    _bools(
        "pipeline", False, "--pipeline", "Software pipeline",
        "the next key block's q·Kᵀ issued before this block's softmax",
        word="pipe", tunable=True, constant="PIPELINE",
    ),
    _bools(
        "store_tma", True, "--store-tma", "TMA store",
        "the output goes out through shared memory and a TMA store (off: straight from "
        "registers)",
        word_off="stg", tunable=True, constant="STORE_TMA",
    ),
    _bools(
        "q_halves", True, "--q-halves", "Q in column halves",
        "the persistent grid fetches each Q tile as two column halves joined in registers, "
        "so its Q gets shared-memory buffers of its own (off: one whole tile; "
        "docs/experiments.md has what each was measured at)",
        word_off="whole-q", constant="Q_HALVES",
    ),
    Knob(
        "kv_splits", int, 1, (None, *KV_SPLIT_COUNTS), "--kv-splits", "KV splits",
        "split each tile's key range across this many CTAs (FlashDecoding): each gives a "
        "partial output and its log-sum-exp, and a combine kernel merges them; named apart "
        "from the K-loop split; auto: from the grid, the SM count and k_len (no split where "
        "the grid fills the GPU or the keys are a few blocks)",
        word="kv-split {}", names={None: "auto"},
    ),
    _bools(
        "pack_gqa", False, "--pack-gqa", "Pack GQA heads",
        "the query heads that share a KV head are the rows of one tile, so each K/V byte is "
        "read once per group (q_len 1 with a group of 4 fills 4 rows of a 16-row tile)",
        word="pack-gqa",
    ),
    _bools(
        "bnhd_inputs", False, "--bnhd-inputs", "(B, N, H, D) inputs",
        "the cuTile kernel gets q, k and v as a model's (B, N, H, D) projections and reads them "
        "in place through strided views (off: (B, H, N, D) tensors)",
        word="bnhd", launch=False,
    ),
    _bools(
        "one_shot", False, "--one-shot", "One-shot calls",
        "each cuTile launch is a fresh attention() call, as a model's eager forward makes it, "
        "not the launcher prepared once (the host's share shows with --no-graph)",
        word="one-shot", launch=False,
    ),
)  # fmt: skip

KNOBS: dict[str, Knob] = {k.name: k for k in _KNOBS}
# The knob the workbench's mask and window fields follow, as in the first exported CSVs, so that
# column order holds for old knobs and every new knob appends.
MASK_FIELDS_AFTER = "remap"
EXPOSED: tuple[Knob, ...] = tuple(k for k in _KNOBS if k.exposed)
# The switch a form shows first: it decides the tiles the other knobs set.
FORM_FIRST = "autotune"
# The kernel's LaunchConfig: its fields, in order, and their defaults.
LAUNCH: dict[str, Any] = {k.name: k.default for k in _KNOBS if k.launch}
# What the tuner's search space sets; the other launch knobs are the caller's (fixed in tuning).
TUNABLE: tuple[str, ...] = tuple(k.name for k in _KNOBS if k.tunable)
FIXED_IN_TUNING: tuple[str, ...] = tuple(n for n in LAUNCH if n not in TUNABLE)

# The switch that hands the tunable knobs to the tuner (the workbench's own, not a launch knob).
TUNER: Knob = KNOBS["autotune"]
