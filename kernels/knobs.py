"""One definition per knob of the cuTile FMHA kernel and of the workbench around it.

Each :class:`Knob` says a knob's name, type, default and values (narrower where a backend
genuinely takes fewer, ``narrower``), its CLI flag, its row label in the window, its label
word, its help text, whether the tuner sets it and which kernel constant or compiler hint it
feeds. :data:`RULES` are the rules that tie knobs together and :data:`ARCH_RULES` the values a
GPU architecture cannot run. The kernel's LaunchConfig (:data:`LAUNCH`, :func:`check_launch`),
the workbench's KernelConfig, the CLI's flags, the window's rows, every label (summaries,
history, CSV, tuned points) and the tuning tables are derived from here, so a value is refused
by the same rule, in the same words, everywhere.

Nothing here imports cuda.tile or Qt: the workbench core checks values without a GPU.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any, TypeVar, cast

T = TypeVar("T", bound=type)

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
    unless ``kernels.cutile.forms`` computes it from more: PIPELINE, POLY_COLS, PAIRED_K).
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
        if len(shown) > 4 and shown == list(range(shown[0], shown[-1] + 1)):
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


@dataclass(frozen=True)
class Violation:
    """A refused value: the knob it names, the value, and why (a ConfigError's three parts)."""

    field: str
    value: Any
    reason: str

    def __str__(self) -> str:
        return f"{self.field}={self.value!r}: {self.reason}"


@dataclass(frozen=True)
class Rule:
    """A rule between knobs (and the mask). ``field`` is the knob a refusal names; ``reads``
    the other names it reads ("mask" for the mask). A ``requires`` rule says ``field`` means
    nothing unless ``test`` holds: it refuses any value but the default then, and the window
    greys the row out with the reason. Any other rule refuses where ``test`` holds.
    ``launch``: the kernel's LaunchConfig refuses it too (else only the workbench, where the
    kernel would quietly ignore the knob). ``condition``: the rule in a few words for help
    texts (what ``field`` needs, or what it does not combine with)."""

    field: str
    reads: tuple[str, ...]
    test: Callable[[Values, str], bool]
    why: Callable[[Values, str], str]
    condition: str
    requires: bool = False
    launch: bool = True

    @property
    def summary(self) -> str:
        """``only with the K-loop split``, ``not with clusters``."""
        return f"{'only' if self.requires else 'not'} with {self.condition}"

    def broken(self, values: Values, mask: str) -> bool:
        if self.requires:
            return values[self.field] != KNOBS[self.field].default and not self.test(values, mask)
        return self.test(values, mask)

    def reason(self, values: Values, mask: str) -> str:
        return self.why(values, mask)


@dataclass(frozen=True)
class ArchRule:
    """Values of ``field`` that the architectures in ``archs`` cannot run as asked, and why;
    ``source`` is where the evidence is."""

    archs: frozenset[str]
    field: str
    refuses: frozenset[Any]
    reason: str
    source: str

    def message(self, arch: str) -> str:
        return f"not on {arch}: {self.reason}; see {self.source}"


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


def _requires(
    name: str,
    reads: tuple[str, ...],
    holds: Callable[[Values, str], bool],
    why: Any,
    condition: str,
    **kw: Any,
) -> Rule:
    reason = why if callable(why) else (lambda v, m, _text=why: _text)
    return Rule(name, reads, holds, reason, condition, requires=True, **kw)


def _excludes(
    name: str,
    reads: tuple[str, ...],
    broken: Callable[[Values, str], bool],
    why: Any,
    condition: str,
) -> Rule:
    reason = why if callable(why) else (lambda v, m, _text=why: _text)
    return Rule(name, reads, broken, reason, condition)


# In the order a config is checked: the first broken one is what a front end reports.
RULES: tuple[Rule, ...] = (
    _requires(
        "persistent", ("mask",), lambda v, m: m != "window",
        lambda v, m: f"the persistent grid is for mask none or causal (got {m}): there is no "
        "window kernel for it",
        "mask none or causal",
    ),
    _excludes(
        "persistent", ("num_ctas",), lambda v, m: v["persistent"] and (v["num_ctas"] or 1) > 1,
        lambda v, m: f"the persistent grid does not run as clusters (num_ctas {v['num_ctas']}); "
        "turn one of them off",
        "clusters (num_ctas > 1)",
    ),
    _excludes(
        "persistent", ("pipeline",), lambda v, m: v["persistent"] and v["pipeline"],
        "the persistent grid has no software pipeline (pipeline on); turn one of them off",
        "the software pipeline",
    ),
    _requires(
        "k_unroll", ("persistent",), lambda v, m: v["persistent"],
        "key blocks in pairs are for the persistent grid only; turn the persistent grid on or "
        "take 1 block an iteration",
        "the persistent grid",
    ),
    _requires(
        "k_unroll", ("mask",), lambda v, m: m == "none",
        lambda v, m: f"key blocks in pairs are for mask none only (got {m}): the causal "
        "persistent grid takes 1 block an iteration",
        "mask none",
    ),
    _requires(
        "q_halves", ("persistent",), lambda v, m: v["persistent"],
        "only the persistent grid fetches Q in column halves (one CTA per tile always "
        "fetches it whole); turn the persistent grid on",
        "the persistent grid",
    ),
    _requires(
        "kv_splits", ("persistent",), lambda v, m: not v["persistent"],
        "the key range is split across CTAs of one CTA per tile, not the persistent grid; "
        "turn the persistent grid off or take 1 split",
        "one CTA per tile (persistent off)",
    ),
    _requires(
        "kv_splits", ("mask",), lambda v, m: m != "window",
        lambda v, m: f"the split of the key range is for mask none or causal (got {m}): there "
        "is no window decode kernel",
        "mask none or causal",
    ),
    _requires(
        "pack_gqa", ("persistent",), lambda v, m: not v["persistent"],
        "packed GQA heads run one CTA per tile, not the persistent grid; turn the persistent "
        "grid off",
        "one CTA per tile (persistent off)",
    ),
    _requires(
        "pack_gqa", ("mask",), lambda v, m: m != "window",
        lambda v, m: f"packed GQA heads are for mask none or causal (got {m}): there is no "
        "window decode kernel",
        "mask none or causal",
    ),
    _excludes(
        "pipeline", ("kv_splits", "pack_gqa"),
        lambda v, m: v["pipeline"] and (v["kv_splits"] != 1 or v["pack_gqa"]),
        "the decode kernel (KV splits or packed GQA heads) has no software pipeline; turn "
        "the pipeline off",
        "KV splits or packed GQA heads",
    ),
    # Found on the H200 (tileiras 13.4.92): relative error 0.05-1.2 against float64 under both
    # masks, with or without the pipeline, at 64 rows a CTA (128-row tiles in 2-CTA clusters);
    # right without the polynomial, at occupancy 2, and at 128 rows a CTA (256×128 in pairs)
    # (bench/results/experiments/h200-explore-cluster-worker-warps-5ef880b.md, -clusters.md).
    _excludes(
        "poly_exp2_cols", ("num_ctas", "num_worker_warps", "tile_m"),
        lambda v, m: v["poly_exp2_cols"] > 0 and (v["num_ctas"] or 1) > 1
        and v["num_worker_warps"] == 8 and v["tile_m"] // v["num_ctas"] < 128,
        lambda v, m: f"the polynomial exp2 over 8 worker warps with {v['tile_m'] // v['num_ctas']} "
        f"rows a CTA ({v['tile_m']}-row tiles in {v['num_ctas']}-CTA clusters) computes wrong "
        "results (H200, tileiras 13.4); turn the polynomial off, or take occupancy 2 instead "
        "of 8 worker warps",
        "8 worker warps with under 128 rows a CTA of a cluster",
    ),
    _requires(
        "poly_exp2_cols", ("k_split",), lambda v, m: v["k_split"],
        "needs the K-loop split: the polynomial replaces exp2 only in the unmasked loop",
        "the K-loop split", launch=False,
    ),
    _requires(
        "pipeline", ("k_split",), lambda v, m: v["k_split"],
        "needs the K-loop split: it pipelines the unmasked loop",
        "the K-loop split", launch=False,
    ),
)  # fmt: skip

_OFFLINE = "bench/results/blackwell-offline.md"
_SM12X = frozenset({"sm_120", "sm_121"})  # sm_121 compiles as sm_120 at every point tried

# What an architecture cannot run as asked, from the offline compiles of every tuning-table
# entry and candidate (docs/blackwell.md): a value is here when every kernel compiled with it
# for the architecture spilled or outgrew the SM. tests/test_knobs.py checks each against
# bench/results/blackwell-offline.json.
ARCH_RULES: tuple[ArchRule, ...] = (
    ArchRule(
        _SM12X, "tile_m", frozenset({256}),
        "256-row tiles spill registers there (256×128: 6,600 B of stack a thread)",
        _OFFLINE,
    ),
    ArchRule(
        _SM12X, "occupancy", frozenset(range(2, 33)),
        "no kernel at occupancy 2 fits there: each spilled (32-1,208 B of stack a thread) and "
        "two 64×64 blocks need 102,808 B of the SM's 102,400 B of shared memory; a higher "
        "hint leaves each block less",
        _OFFLINE,
    ),
)  # fmt: skip


# The switch that hands the tunable knobs to the tuner (the workbench's own, not a launch knob).
TUNER: Knob = KNOBS["autotune"]


def tuned(values: Values) -> bool:
    """Whether the tuner sets the tunable knobs of ``values`` (:data:`TUNER` on): the values
    set for them are then only nominal."""
    return values.get(TUNER.name) is True


def untuned(values: Values) -> dict[str, Any]:
    """``values`` with the tuner off: how a launch the tuner chose is run again as set."""
    return {**values, TUNER.name: False}


def defaults() -> dict[str, Any]:
    """Every knob at its default."""
    return {k.name: k.default for k in _KNOBS}


def _full(values: Values) -> dict[str, Any]:
    return {**defaults(), **{k: v for k, v in values.items() if k in KNOBS}}


def arch_rule(name: str, value: Any, arch: str | None) -> ArchRule | None:
    """The rule that keeps ``value`` of knob ``name`` off ``arch``, or None."""
    if not arch:
        return None
    for rule in ARCH_RULES:
        if rule.field == name and arch in rule.archs and value in rule.refuses:
            return rule
    return None


def _type_problem(knob: Knob, value: Any) -> str | None:
    if knob.kind is bool:
        return None if isinstance(value, bool) else "expected true or false"
    if value is None and None in knob.values:
        return None
    if isinstance(value, bool) or not isinstance(value, Integral):
        return "expected a whole number"
    return None


def _value_problem(
    knob: Knob,
    value: Any,
    values: Values,
    capability: str | None,
    arch: str | None,
) -> str | None:
    """Why ``value`` is not a value of ``knob`` (given the other ``values``), or None."""
    problem = _type_problem(knob, value)
    if problem:
        return problem
    if knob.choices is not None:
        allowed = knob.choices(values)
        if value not in allowed:
            others = ", ".join(f"{n} {values[n]}" for n in knob.choices_reads)
            return (
                f"expected one of {', '.join(map(str, allowed))} with {others} "
                f"({knob.choices_note})"
            )
    elif value not in knob.values:
        return knob.expected()
    nominal = knob.tunable and tuned(values)  # the tuner sets it instead
    if capability and not nominal:
        allowed = knob.values_for(capability)
        if value not in allowed and value is not None:
            who = CAPABILITY_NAMES.get(capability, capability)
            return f"{who} takes {knob.values_text(allowed)}"
        if capability == CUTILE:
            rule = arch_rule(knob.name, value, arch)
            if rule is not None:
                return rule.message(arch or "")
    return None


_DEPENDENT = tuple(k for k in _KNOBS if k.choices is not None)
_PLAIN = tuple(k for k in _KNOBS if k.choices is None)


def value_violations(
    values: Values, *, capability: str | None = None, arch: str | None = None
) -> list[Violation]:
    """Each knob's value on its own: its type and values, and where ``capability`` is given
    (``"cutile"``) that backend's narrower set and, with ``arch``, the architecture's rules.
    Knobs whose values depend on others (the polynomial's on tile_n) are checked once those
    are valid."""
    full = _full(values)
    found = []
    for k in _PLAIN:
        problem = _value_problem(k, full[k.name], full, capability, arch)
        if problem:
            found.append(Violation(k.name, full[k.name], problem))
    if found:
        return found
    for k in _DEPENDENT:
        problem = _value_problem(k, full[k.name], full, capability, arch)
        if problem:
            found.append(Violation(k.name, full[k.name], problem))
    return found


def rule_violations(values: Values, mask: str = "none", *, launch: bool = False) -> list[Violation]:
    """The broken :data:`RULES` (``launch``: only those the kernel's LaunchConfig enforces)."""
    full = _full(values)
    return [
        Violation(rule.field, full[rule.field], rule.reason(full, mask))
        for rule in RULES
        if (rule.launch or not launch) and rule.broken(full, mask)
    ]


def violations(
    values: Values,
    mask: str = "none",
    *,
    capability: str | None = None,
    arch: str | None = None,
) -> list[Violation]:
    """Everything refused about ``values`` with ``mask``: the values on their own first, and
    only when they are sound the rules between them. Every front end reports the first."""
    return value_violations(values, capability=capability, arch=arch) or rule_violations(
        values, mask
    )


def launch_violations(values: Values, mask: str | None = None) -> list[Violation]:
    """What the kernel's LaunchConfig refuses: the kernel's own values, and the rules it
    enforces (those that read the mask only when ``mask`` is given)."""
    found = value_violations(values, capability=CUTILE)
    if found:
        return found
    full = _full(values)
    return [
        Violation(rule.field, full[rule.field], rule.reason(full, mask or "none"))
        for rule in RULES
        if rule.launch
        and (mask is not None or "mask" not in rule.reads)
        and rule.broken(full, mask or "none")
    ]


def check_launch(values: Values, mask: str | None = None) -> None:
    """Raise ValueError, in the words every front end uses, for what the kernel cannot launch
    (LaunchConfig's check; ``mask``: also the rules that read it)."""
    unknown = sorted(set(values) - set(LAUNCH))
    if unknown:
        raise ValueError(f"unknown knob(s) {unknown}; the knobs are {list(LAUNCH)}")
    found = launch_violations(values, mask)
    if found:
        raise ValueError(str(found[0]))


def applies(name: str, values: Values, mask: str = "none") -> str | None:
    """Why knob ``name`` means nothing with these ``values`` and ``mask`` (the window greys
    its row out and runs its default), or None where it applies."""
    full = _full(values)
    for rule in RULES:
        if rule.requires and rule.field == name and not rule.test(full, mask):
            return rule.reason(full, mask)
    return None


def refusal(
    name: str,
    value: Any,
    values: Values,
    mask: str = "none",
    *,
    capability: str | None = None,
    arch: str | None = None,
) -> Violation | None:
    """Why ``value`` of knob ``name`` would be refused naming ``name``, the other knobs as in
    ``values`` (the window greys out that entry); None where it would not."""
    full = {**_full(values), name: value}
    problem = _value_problem(KNOBS[name], value, full, capability, arch)
    if problem:
        return Violation(name, value, problem)
    for rule in RULES:
        if rule.field == name and not rule.requires and rule.broken(full, mask):
            return Violation(name, value, rule.reason(full, mask))
    return None


def offered(
    name: str, *, capability: str | None = None, arch: str | None = None
) -> tuple[Any, ...]:
    """The values of knob ``name`` that ``capability`` on ``arch`` takes, whatever the other
    knobs are (None, "not set", included where the knob has it)."""
    k = KNOBS[name]
    values = k.values_for(capability)
    if k.choices is not None:  # those some offered value of the knobs it depends on allows
        reads = [offered(n, capability=capability, arch=arch) for n in k.choices_reads]
        allowed = {
            v
            for combo in itertools.product(*reads)
            for v in k.choices(dict(zip(k.choices_reads, combo)))
        }
        values = tuple(v for v in values if v in allowed)
    if capability == CUTILE:
        values = tuple(v for v in values if arch_rule(name, v, arch) is None)
    return tuple(v for v in k.values if v in values or v is None)


def words(values: Values, names: Iterable[str] | None = None) -> list[str]:
    """The label words of ``values`` in knob order (``128×64``, ``fast-math``, ``occ 2``,
    ``8 warps``, ``cluster 2``, ``lat 3/6``, ``stg``): the one vocabulary of summaries, the
    history, the CSV's config text and tuned-point labels. ``names``: only these knobs."""
    wanted = set(KNOBS if names is None else names)
    partners = {k.pair for k in _KNOBS if k.pair}
    out = []
    for k in _KNOBS:
        if k.name not in wanted or k.name in partners:
            continue
        value = values.get(k.name, k.default)
        partner = values.get(k.pair, KNOBS[k.pair].default) if k.pair else None
        word = k.word_for(value, partner)
        if word:
            out.append(word)
    return out


def tuning_label(values: Values) -> str:
    """A tuning table entry in the label words of the knobs the tuner sets (``128×128 8 warps
    poly 16``): how the benchmark scripts and reports name a config."""
    return " ".join(words(values, TUNABLE))


def rules_text(name: str) -> str:
    """The rules about knob ``name`` in a few words (``only with the persistent grid, mask
    none``), for help texts; "" where there are none."""
    return "; ".join(rule.summary for rule in RULES if rule.field == name)


def with_knob_fields(names: Iterable[str], *, own_after: str | None = None) -> Callable[[T], T]:
    """Class decorator: one field per knob in ``names``, in the registry's order, typed and
    defaulted by it, with the class's own annotated fields after the knob ``own_after`` (last
    without one); then a frozen dataclass. The kernel's LaunchConfig and the workbench's
    KernelConfig are made so, and a knob added here is a field of both."""
    wanted = set(names)

    def build(cls: T) -> T:
        own = dict(inspect.get_annotations(cls))
        annotations: dict[str, Any] = {}
        for knob in _KNOBS:
            if knob.name not in wanted:
                continue
            optional = " | None" if None in knob.values else ""
            annotations[knob.name] = f"{knob.kind.__name__}{optional}"
            setattr(cls, knob.name, knob.default)
            if knob.name == own_after:
                annotations.update(own)
        if own_after is None:
            annotations.update(own)
        cls.__annotations__ = annotations
        return cast(T, dataclass(frozen=True)(cls))  # the same class, now a dataclass

    return build


# --- the problem's axes that a backend narrows -----------------------------------------------


@dataclass(frozen=True)
class ProblemAxis:
    """One dimension of the problem with a fixed set of values (head dim, dtype): what the
    workbench's problems take, the fewer a backend runs (``narrower``), and the short words
    that labels and tables use (``short``)."""

    name: str
    values: tuple[Any, ...]
    narrower: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    short: Mapping[Any, str] = field(default_factory=dict)

    def values_for(self, capability: str | None = None) -> tuple[Any, ...]:
        return self.narrower.get(capability, self.values) if capability else self.values

    def word(self, value: Any) -> str:
        return self.short.get(value, str(value))


# Every multiple of 8 from 32 to 256 (a 16-byte row): the cuTile kernel pads the others to a
# power-of-two tile (kernels.head_dims), so every backend's list is this one.
HEAD_DIM = ProblemAxis("head_dim", tuple(range(32, 257, 8)))
DTYPE = ProblemAxis("dtype", ("float16", "bfloat16"), short={"float16": "fp16", "bfloat16": "bf16"})
DTYPE_ITEMSIZE = {"float16": 2, "bfloat16": 2}
