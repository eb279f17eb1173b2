"""The kernel's flags, generated from the knob registry (:mod:`kernels.knobs`): a knob's flag,
its help (values, rules, default) and the ``--arch`` whose offering applies. A new knob, or a
knob's new value, comes from the registry: nothing here lists them."""

from __future__ import annotations

import argparse
from typing import Any

from kernels import knobs
from workbench.cli.values import UsageError, whole

# Architectures the knob offering can be asked for (CUDA's compute capabilities, sm_70 on).
KNOWN_ARCHS = ("sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_100",
               "sm_101", "sm_103", "sm_110", "sm_120", "sm_121")  # fmt: skip
ARCH_HELP = (
    "offer the cuTile kernel's knob values for this GPU architecture (sm_90, sm_120, ...) "
    "instead of the local GPU's; 'any': every value the kernel takes"
)


def knob_help(knob: knobs.Knob) -> str:
    """A knob's help line, all from the registry: what it does, the values (the cuTile
    kernel's where it takes fewer), the rules, the default (argparse adds it for a switch)."""
    parts = [knob.help]
    if knob.kind is not bool:
        values = knob.values_text()
        for capability, narrower in knob.narrower.items():
            who = knobs.CAPABILITY_NAMES.get(capability, capability)
            values += f" ({who}: {knob.values_text(narrower)})"
        if knob.choices_note:
            values += f" ({knob.choices_note})"
        parts.append(values)
    if knobs.rules_text(knob.name):
        parts.append(knobs.rules_text(knob.name))
    default = ("on" if knob.default else "off") if knob.kind is bool else knob.text(knob.default)
    parts.append(f"default {default}")
    return "; ".join(parts)


def add_knob_flag(group: Any, knob: knobs.Knob, *, given_only: bool = False) -> None:
    """The registry's flag for ``knob``: ``--x/--no-x`` for a switch, a number otherwise.
    ``given_only``: the attribute is set only when the flag is typed (:func:`knob_values`
    tells the user's values from a preset's)."""
    shown = knob_help(knob).replace("%", "%%")  # argparse formats help with %: "5 %" is text
    default = argparse.SUPPRESS if given_only else knob.default
    if knob.kind is bool:
        group.add_argument(
            knob.flag,
            dest=knob.name,
            action=argparse.BooleanOptionalAction,
            default=default,
            help=shown,
        )
    else:
        group.add_argument(
            knob.flag, dest=knob.name, type=_knob_number(knob), default=default, help=shown
        )


def _knob_number(knob: knobs.Knob) -> Any:
    """A whole number (:func:`whole`), or the knob's word for "not set" (``auto``) where it
    has one."""
    unset = knob.names.get(None) if None in knob.values else None

    def parse(text: str) -> int | None:
        return None if unset is not None and text.strip() == unset else whole(text)

    return parse


def add_arch(group: Any) -> None:
    group.add_argument("--arch", metavar="sm_XY", help=ARCH_HELP)


def knob_arch(args: argparse.Namespace) -> str | None:
    """The GPU architecture whose knob offering applies: ``--arch``, else the local GPU's (from
    nvidia-smi, no CUDA context), else None (no GPU: every value the kernel takes)."""
    arch = getattr(args, "arch", None)
    if arch is None:
        from workbench.jobs.ladder_steps import local_gpu_arch

        return local_gpu_arch()
    if arch == "any":
        return None
    if arch not in KNOWN_ARCHS:
        raise UsageError(
            f"--arch: {arch!r} is not an architecture this workbench knows; expected one of "
            f"{', '.join(KNOWN_ARCHS)}, or any"
        )
    return arch
