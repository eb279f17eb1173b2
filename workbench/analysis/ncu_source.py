"""Where the warps wait: Nsight Compute's PC samples per SASS instruction.

With the Source Counters section, ncu samples each warp's program counter at a fixed interval
and records why the warp did not issue. ``ncu --import R --csv --page source --print-source
sass`` gives those samples per instruction: a ``Kernel Name`` row, a header row (``Address``,
``Source``, the sample totals and one ``stall_<reason>`` column a reason), then a row an
instruction. :func:`parse_source_csv` keeps what answers "which wait is it": the instructions
holding the most samples, for each reason the instructions its samples sit at, and whether each
lies in the key loop (the first innermost loop with tensor-core instructions, found from the
same SASS's backward branches, as :mod:`kernels.sass_costs` finds it in a cubin).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kernels.sass_costs import innermost_tensor_loops, loops_of, opcode

HOTTEST = 5  # instructions kept by their share of every sample
SITES_PER_REASON = 3
MIN_REASON_SHARE = 0.01  # reasons below this share of the samples keep no sites
# The source page's short column names, as the raw page's reasons (what Compare's rows use).
REASON_NAMES = {
    "long_sb": "long_scoreboard",
    "short_sb": "short_scoreboard",
    "math": "math_pipe_throttle",
    "mio": "mio_throttle",
    "lg": "lg_throttle",
    "tex": "tex_throttle",
    "dispatch": "dispatch_stall",
    "no_inst": "no_instruction",
    "sleep": "sleeping",
    "imc": "imc_miss",
}
# The issuing warp, not a wait (as the raw page's "selected").
NOT_WAITING = ("selected",)
_STALL_COLUMN = re.compile(r"^stall_(?P<reason>[a-z_]+)$")
_TOTAL_COLUMNS = ("Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)")
_HEX = re.compile(r"0x([0-9a-fA-F]+)")


@dataclass(frozen=True)
class WaitSite:
    """One instruction and the share of the samples it holds (of all of them, or of one
    reason's), its reasons' shares of its own samples, and whether it is in the key loop."""

    offset: int  # bytes from the kernel's first instruction, as nvdisasm numbers them
    sass: str
    share: float
    in_key_loop: bool
    reasons: dict[str, float] = field(default_factory=dict)

    @property
    def opcode(self) -> str:
        return opcode(self.sass) if self.sass.strip() else "?"

    @property
    def short_opcode(self) -> str:
        """The opcode in a word: its family (``BAR``, ``HGMMA``, ``NANOSLEEP``), or what a
        ``WARPGROUP``/``SYNCS`` instruction does (``DEPBAR``, ``PHASECHK``)."""
        parts = self.opcode.split(".")
        return parts[1] if parts[0] in ("WARPGROUP", "SYNCS") and len(parts) > 1 else parts[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "offset": self.offset,
            "sass": self.sass,
            "share": self.share,
            "in_key_loop": self.in_key_loop,
            "reasons": dict(self.reasons),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WaitSite:
        return cls(
            offset=int(data["offset"]),
            sass=str(data["sass"]),
            share=float(data["share"]),
            in_key_loop=bool(data["in_key_loop"]),
            reasons={str(k): float(v) for k, v in (data.get("reasons") or {}).items()},
        )


@dataclass(frozen=True)
class Waits:
    """The profiled kernel's warp-stall samples by instruction."""

    samples: int  # samples of waiting warps (the issuing warp's excluded)
    key_loop_share: float | None  # of those, in the key loop (None: no key loop found)
    hottest: list[WaitSite]
    by_reason: dict[str, list[WaitSite]]  # each reason's sites, shares of that reason's samples

    def to_dict(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "key_loop_share": self.key_loop_share,
            "hottest": [s.to_dict() for s in self.hottest],
            "by_reason": {r: [s.to_dict() for s in sites] for r, sites in self.by_reason.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Waits:
        return cls(
            samples=int(data["samples"]),
            key_loop_share=data.get("key_loop_share"),
            hottest=[WaitSite.from_dict(s) for s in data.get("hottest") or []],
            by_reason={
                str(r): [WaitSite.from_dict(s) for s in sites]
                for r, sites in (data.get("by_reason") or {}).items()
            },
        )


def reason_name(column: str) -> str | None:
    """The raw page's name of a ``stall_<reason>`` column (None: not a reason column)."""
    found = _STALL_COLUMN.match(column)
    if found is None:
        return None
    short = found["reason"]
    return REASON_NAMES.get(short, short)


def _count(text: str) -> float:
    try:
        return float(text.replace(",", "").strip() or 0)
    except ValueError:
        return 0.0


def _kernels(text: str) -> list[tuple[str, list[dict[str, str]]]]:
    """(kernel name, rows by column) of each kernel on the page."""
    kernels: list[tuple[str, list[dict[str, str]]]] = []
    header: list[str] | None = None
    lines = [line for line in text.splitlines() if not line.startswith("==")]  # ==PROF== etc.
    for row in csv.reader(io.StringIO("\n".join(lines))):
        if not row:
            continue
        first = row[0].strip()
        if first == "Kernel Name":
            kernels.append((row[1] if len(row) > 1 else "", []))
            header = None
        elif first in ("Address", "# Address"):
            header = [cell.strip() for cell in row]
            if not kernels:
                kernels.append(("", []))
        elif header is not None and first.startswith("0x"):
            kernels[-1][1].append(dict(zip(header, row)))
    return [(name, rows) for name, rows in kernels if rows]


def _branch_target(addresses: set[int], base: int) -> Any:
    """Reads a branch's target: ncu prints it as an address (absolute, or from the kernel's
    start on some versions); None for any other instruction or a target outside the kernel."""

    def target(text: str) -> int | None:
        if not opcode(text).startswith("BRA"):
            return None
        found = _HEX.findall(text.split("BRA", 1)[1])
        if not found:
            return None
        value = int(found[-1], 16)
        for candidate in (value, base + value):
            if candidate in addresses:
                return candidate
        return None

    return target


def parse_source_csv(text: str, kernel: str = "") -> Waits | None:
    """The waits of ``kernel`` (the first kernel on the page when not found there) from the
    source page's CSV; None when the page holds no sampled instruction."""
    kernels = _kernels(text)
    if not kernels:
        return None
    rows = next((r for name, r in kernels if kernel and name == kernel), kernels[0][1])
    columns = list(rows[0])
    reason_columns = {
        c: name for c in columns if (name := reason_name(c)) and name not in NOT_WAITING
    }
    instructions = [(int(r.get("Address", r.get("# Address", "0x0")), 16), r.get("Source", ""))
                    for r in rows]  # fmt: skip
    addresses = {a for a, _ in instructions}
    base = min(addresses)
    key = innermost_tensor_loops(loops_of(instructions, _branch_target(addresses, base)))
    in_key = range(key[0].start, key[0].end + 1) if key else range(0)

    per_site: list[tuple[int, str, dict[str, float]]] = []
    for (address, sass), row in zip(instructions, rows):
        if reason_columns:
            counts = {name: _count(row.get(c, "")) for c, name in reason_columns.items()}
        else:  # an ncu without the reason columns: the not-issued total, unattributed
            total: Any = next((row[c] for c in reversed(_TOTAL_COLUMNS) if c in row), "")
            counts = {"unattributed": _count(total)}
        per_site.append((address, sass.strip(), {r: v for r, v in counts.items() if v > 0}))
    samples = sum(sum(c.values()) for _, _, c in per_site)
    if samples <= 0:
        return None

    def site(address: int, sass: str, counts: dict[str, float], of: float) -> WaitSite:
        own = sum(counts.values())
        top = sorted(counts.items(), key=lambda item: -item[1])[:3]
        return WaitSite(
            offset=address - base,
            sass=sass,
            share=round(of and own / of, 4),
            in_key_loop=address in in_key,
            reasons={r: round(v / own, 3) for r, v in top},
        )

    ranked = sorted(per_site, key=lambda s: -sum(s[2].values()))
    hottest = [site(a, t, c, samples) for a, t, c in ranked[:HOTTEST]]
    totals: dict[str, float] = {}
    for _, _, counts in per_site:
        for reason, value in counts.items():
            totals[reason] = totals.get(reason, 0.0) + value
    by_reason = {}
    for reason, total in sorted(totals.items(), key=lambda item: -item[1]):
        if total / samples < MIN_REASON_SHARE:
            continue
        holders = sorted(per_site, key=lambda s: -s[2].get(reason, 0.0))[:SITES_PER_REASON]
        by_reason[reason] = [
            replace(site(a, t, c, samples), share=round(c[reason] / total, 4))
            for a, t, c in holders
            if c.get(reason)
        ]
    in_loop = sum(sum(c.values()) for a, _, c in per_site if a in in_key)
    return Waits(
        samples=int(samples),
        key_loop_share=round(in_loop / samples, 4) if key else None,
        hottest=hottest,
        by_reason=by_reason,
    )


def where(site: WaitSite) -> str:
    """An instruction in a few words: its opcode, its offset and whether it is in the key loop,
    e.g. ``BAR.SYNC.DEFER_BLOCKING @0x0a40 (key loop)``."""
    loop = " (key loop)" if site.in_key_loop else ""
    return f"{site.opcode} @{site.offset:#06x}{loop}"


def summary_rows(waits: Waits, reasons: Sequence[str] = ()) -> list[list[str]]:
    """Rows for a table of one profile's waits: the hottest instructions (share of every
    sample, their top reasons), then where each of ``reasons`` (default: the three largest)
    waits: its first site, and the next ones in a few words."""
    rows = [
        [f"{s.share:.0%}", where(s), ", ".join(f"{r} {v:.0%}" for r, v in s.reasons.items())]
        for s in waits.hottest
    ]
    for reason in reasons or list(waits.by_reason)[:3]:
        sites = waits.by_reason.get(reason, [])
        if sites:
            then = "; ".join(f"{s.share:.0%} at {where(s)}" for s in sites[1:])
            rows.append([f"{sites[0].share:.0%} of {reason}", where(sites[0]), then])
    return rows


def top_site(waits: Mapping[str, Any] | None, reason: str) -> str:
    """Where a stored profile's ``reason`` waits most, in a few characters: ``DEPBAR loop 50%``
    (the key loop's wait for a tensor-core product holds half its samples); "" where the
    profile has no samples of it."""
    sites = ((waits or {}).get("by_reason") or {}).get(reason) or []
    if not sites:
        return ""
    site = WaitSite.from_dict(sites[0])
    return f"{site.short_opcode}{' loop' if site.in_key_loop else ''} {site.share:.0%}"


def cell_tooltip(waits: Mapping[str, Any] | None, label: str) -> str:
    """What a Compare cell of ``label`` (``stall: REASON`` or ``hottest N``) stands for, in
    full: each instruction's SASS, offset and share; "" where the profile has no samples."""
    if not waits:
        return ""
    stored = Waits.from_dict(waits)
    if label.startswith("stall: "):
        reason = label.removeprefix("stall: ")
        sites = stored.by_reason.get(reason, [])
        return "\n".join(
            f"{s.share:.0%} of {reason} at {s.sass} @{s.offset:#06x}"
            f"{' (key loop)' if s.in_key_loop else ''}"
            for s in sites
        )
    if label.startswith("hottest "):
        rank = int(label.removeprefix("hottest ")) - 1
        if rank >= len(stored.hottest):
            return ""
        s = stored.hottest[rank]
        reasons = ", ".join(f"{r} {v:.0%}" for r, v in s.reasons.items())
        return (
            f"{s.sass} @{s.offset:#06x}{' (key loop)' if s.in_key_loop else ''}: "
            f"{s.share:.0%} of the samples ({reasons})"
        )
    return ""
