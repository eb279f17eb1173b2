"""Refused combinations of knobs, one per rule of the registry, found from the rules themselves:
the front-end tests (config, CLI, window) walk the same list, so a rule added to
kernels.knobs is checked everywhere without a test being written for it."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from kernels import knobs

MASKS = ("none", "causal", "window")


@dataclass(frozen=True)
class Case:
    """Knob values (only those off their default) and a mask that the registry refuses,
    naming ``field`` for ``reason``; ``requires``: the rule says the knob means nothing there
    (the window greys its row out) rather than that two settings clash; ``launch``: the
    kernel's LaunchConfig refuses it too."""

    name: str
    field: str
    values: dict[str, Any]
    mask: str
    reason: str
    requires: bool
    launch: bool

    @property
    def value(self) -> Any:
        return self.values[self.field]

    def flags(self) -> list[str]:
        """The sweep command line of the case."""
        argv = ["--mask", self.mask] + (["--window", "64"] if self.mask == "window" else [])
        for name, value in self.values.items():
            knob = knobs.KNOBS[name]
            if knob.kind is bool:
                argv.append(knob.flag if value else "--no-" + knob.flag[2:])
            else:
                argv += [knob.flag, knob.names[None] if value is None else str(value)]
        return argv


def _first_refusal(values: dict[str, Any], mask: str) -> knobs.Violation | None:
    found = knobs.violations(values, mask)
    return found[0] if found else None


def _search(names: list[str], wanted: Any) -> tuple[dict[str, Any], str]:
    """The combination over ``names`` (and the masks) with the fewest knobs off their default
    whose first refusal is ``wanted(values, mask, refusal)``."""
    grids = [knobs.KNOBS[n].values for n in names]
    best: tuple[dict[str, Any], str] | None = None
    for combo in itertools.product(*grids):
        for mask in MASKS:
            values = {
                n: v for n, v in zip(names, combo, strict=True) if v != knobs.KNOBS[n].default
            }
            refusal = _first_refusal(values, mask)
            fewer = best is None or len(values) < len(best[0])
            if refusal is not None and fewer and wanted(values, mask, refusal):
                best = (values, mask)
    assert best is not None, f"no combination of {names} is refused as wanted"
    return best


def rule_cases() -> list[Case]:
    cases = []
    for rule in knobs.RULES:
        # What this rule reads, and what the rules before it on the same knob read (the
        # causal rule on key pairs is only reached with the persistent grid on).
        reads = [n for r in knobs.RULES if r.field == rule.field for n in r.reads]
        names = list(dict.fromkeys([rule.field, *(n for n in reads if n != "mask")]))

        def is_this_rule(values: dict[str, Any], mask: str, refusal: Any, rule: Any = rule) -> bool:
            full = {**knobs.defaults(), **values}
            return (
                rule.broken(full, mask)
                and refusal.field == rule.field
                and refusal.reason == rule.reason(full, mask)
            )

        values, mask = _search(names, is_this_rule)
        full = {**knobs.defaults(), **values}
        slug = "-".join(w for w in re.findall(r"[a-z]+", rule.condition) if w != "the")
        name = f"{rule.field}-{'only' if rule.requires else 'not'}-{slug}"
        reason = rule.reason(full, mask)
        cases.append(Case(name, rule.field, values, mask, reason, rule.requires, rule.launch))
    # Values that depend on other knobs (the polynomial's columns on tile_n): a refusal too.
    for knob in knobs.KNOBS.values():
        if knob.choices is None:
            continue
        names = [knob.name, *knob.choices_reads]

        def is_choice(values: dict[str, Any], mask: str, refusal: Any, knob: Any = knob) -> bool:
            return refusal.field == knob.name and values.get(knob.name) not in (None, 0)

        values, mask = _search(names, is_choice)
        refusal = _first_refusal(values, mask)
        assert refusal is not None
        name = f"{knob.name}-values"
        cases.append(Case(name, knob.name, values, mask, refusal.reason, False, knob.launch))
    return cases


CASES = rule_cases()
