"""The rules that tie knobs together (:data:`RULES`) and the values a GPU architecture cannot run
(:data:`ARCH_RULES`), in the words every front end refuses them with. Re-exported by
:mod:`kernels.knobs`, which applies them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernels.knob_defs import KNOBS, Values


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
