"""One definition per knob of the cuTile FMHA kernel and of the workbench around it.

Each :class:`Knob` says a knob's name, type, default and values (narrower where a backend
genuinely takes fewer, ``narrower``), its CLI flag, its row label in the window, its label
word, its help text, whether the tuner sets it and which kernel constant or compiler hint it
feeds. :data:`RULES` are the rules that tie knobs together and :data:`ARCH_RULES` the values a
GPU architecture cannot run. The kernel's LaunchConfig (:data:`LAUNCH`, :func:`check_launch`),
the workbench's KernelConfig, the CLI's flags, the window's rows, every label (summaries,
history, CSV, tuned points) and the tuning tables are derived from here, so a value is refused
by the same rule, in the same words, everywhere.

The knobs themselves are :mod:`kernels.knob_defs`, the rules :mod:`kernels.knob_rules`, the
problem's axes :mod:`kernels.problem_axes`; this module re-exports them and holds the checks.
Nothing here imports cuda.tile or Qt: the workbench core checks values without a GPU.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from numbers import Integral
from typing import Any

from kernels.knob_defs import (  # noqa: F401  (re-exported: the registry's public names)
    _KNOBS,
    CAPABILITY_NAMES,
    CUTILE,
    EXPOSED,
    FIXED_IN_TUNING,
    FORM_FIRST,
    KERNEL_TILES,
    KNOBS,
    KV_SPLIT_COUNTS,
    LAUNCH,
    MASK_FIELDS_AFTER,
    TUNABLE,
    TUNER,
    Knob,
    Values,
    poly_exp2_choices,
)
from kernels.knob_rules import ARCH_RULES, RULES, ArchRule, Rule, Violation  # noqa: F401
from kernels.problem_axes import DTYPE, DTYPE_ITEMSIZE, HEAD_DIM, ProblemAxis  # noqa: F401


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
