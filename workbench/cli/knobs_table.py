"""The knob registry as the ``knobs`` command offers it: every knob with its flag, default and
values (the cuTile kernel's on an architecture), the rules between knobs, and what that
architecture does not run."""

from __future__ import annotations

from typing import Any

from kernels import knobs
from workbench.backends.plugin_cli import knob_table


def knobs_table(arch: str | None) -> dict[str, Any]:
    """The registry as the CLI offers it: every knob with its flag, default and values (the
    cuTile kernel's on ``arch``), the rules between knobs, and what ``arch`` does not run."""
    rows = []
    for knob in knobs.EXPOSED:
        rows.append(
            {
                "knob": knob.name,
                "flag": knob.flag,
                "label": knob.label,
                "default": knob.default,
                "values": list(knob.values),
                "cutile": list(knobs.offered(knob.name, capability=knobs.CUTILE, arch=arch)),
                "rules": knobs.rules_text(knob.name),
                "tunable": knob.tunable,
                "feeds": knob.constant or knob.hint,
                "help": knob.help,
            }
        )
    refused = [
        {
            "knob": rule.field,
            "values": sorted(rule.refuses),
            "reason": rule.message(arch),
            "source": rule.source,
        }
        for rule in knobs.ARCH_RULES
        if arch in rule.archs
    ]
    return {"arch": arch, "knobs": rows, "not_offered": refused, "plugin_knobs": knob_table()}


def knobs_rows(table: dict[str, Any]) -> list[list[str]]:
    """:func:`knobs_table`'s knobs as text cells: knob, flag, default, values, the cuTile
    kernel's values, rules."""

    def shown(name: str, values: list[Any]) -> str:
        return knobs.KNOBS[name].values_text(values) if values else "-"

    return [
        [
            r["knob"],
            r["flag"],
            knobs.KNOBS[r["knob"]].text(r["default"]),
            shown(r["knob"], r["values"]),
            shown(r["knob"], r["cutile"]),
            r["rules"],
        ]
        for r in table["knobs"]
    ]
