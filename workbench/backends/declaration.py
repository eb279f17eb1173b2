"""What a backend declares about itself, once: the catalog, the probe, the engine's lookup, the
knob form and the tuner all read the declaration.

Our own backends (the reference, cuTile, the peers) and a user's plugin are declarations of the
same form: a name and label, a factory that makes the :class:`~workbench.backends.base.Backend`,
what it supports (:class:`Capabilities`), its own knobs and the rules between them in the knob
registry's form (:class:`kernels.knobs.Knob`, :class:`kernels.knobs.Rule`), and whether it
computes in the supervised engine child.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernels import knobs
from kernels.knobs import Knob, Rule
from kernels.schedule import MASK_MODES
from workbench.errors import BackendError

if TYPE_CHECKING:
    from workbench.backends.base import Availability, Backend

LAYOUTS = ("bhnd", "bnhd")
DTYPES = ("float16", "bfloat16")
KNOB_TYPES = (bool, int, float, str)
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")


class DeclarationError(BackendError):
    """A declaration that cannot be used: ``where`` names its file (or module), ``field`` the
    part that is wrong."""

    def __init__(self, where: str, field_name: str, reason: str) -> None:
        self.where = where
        self.field = field_name
        self.reason = reason
        super().__init__(f"{where}: {field_name}: {reason}")

    def __reduce__(self) -> tuple[type, tuple[str, str, str]]:
        # Picklable, so a refusal in the engine child arrives as itself.
        return (type(self), (self.where, self.field, self.reason))


@dataclass(frozen=True)
class Capabilities:
    """What a backend runs: input layouts, dtypes, masks, head dims (None: any) and whether it
    runs decode problems (q_len below k_len)."""

    layouts: tuple[str, ...] = ("bhnd",)
    dtypes: tuple[str, ...] = DTYPES
    masks: tuple[str, ...] = tuple(MASK_MODES)
    head_dims: tuple[int, ...] | None = None
    decode: bool = True


@dataclass(frozen=True)
class PluginSource:
    """Where a plugin's declaration came from: its file (or entry point) and the SHA-256 of
    that file's bytes when it was loaded, so a run says what code ran."""

    path: str
    sha256: str
    entry_point: str = ""

    def to_dict(self) -> dict[str, str]:
        data = {"plugin_path": self.path, "plugin_sha256": self.sha256}
        if self.entry_point:
            data["plugin_entry_point"] = self.entry_point
        return data


@dataclass(frozen=True)
class BackendDeclaration:
    """One backend, declared once.

    ``factory`` makes the backend (a class, or a function returning one). ``probe``: its
    availability without making it (None: the backend's own :meth:`availability`).
    ``knob_capability``: the knob registry capability whose narrower values and architecture
    rules it follows (the cuTile kernel's); ``knobs``/``rules``: the backend's own knobs (a
    plugin's), in the registry's form. ``kernel_knobs``: the registry's kernel knobs (tiles,
    flags) mean something to it (our kernel, the reference that walks its schedule); a peer or
    a plugin runs the mask alone with its own tiling. ``tunes``: its tuner sets the tunable
    knobs per length when the config asks for it. ``kernel_resources``: its configs compile
    from this project's kernel, so ``resources`` and each point say what they compiled to (a
    plugin says so with ``compile_cubin``). ``in_engine``: it computes in the supervised
    engine child (GPU backends and every plugin). ``on_host``: it computes on the CPU (the
    reference, a plugin given host arrays), so it gets the reference's default sizes, not a
    GPU's. ``source``: a plugin's file and hash."""

    name: str
    label: str
    factory: Callable[[], Backend]
    capabilities: Capabilities = Capabilities()
    knobs: tuple[Knob, ...] = ()
    rules: tuple[Rule, ...] = ()
    knob_capability: str | None = None
    kernel_knobs: bool = False
    tunes: bool = False
    kernel_resources: bool = False
    in_engine: bool = True
    on_host: bool = False
    probe: Callable[[], Availability] | None = None
    notes: str = ""
    source: PluginSource | None = None

    def make(self) -> Backend:
        return self.factory()

    def knob_defaults(self) -> dict[str, Any]:
        return {knob.name: knob.default for knob in self.knobs}


def knob_violation(
    declaration: BackendDeclaration, values: Mapping[str, Any], mask: str
) -> knobs.Violation | None:
    """The first of ``declaration``'s own knob values (its defaults, under ``values``) that its
    knobs or rules refuse under ``mask``; None when none is."""
    own = {knob.name: knob for knob in declaration.knobs}
    merged = {**declaration.knob_defaults(), **values}
    for name, value in merged.items():
        knob = own.get(name)
        if knob is None:
            known = ", ".join(own) or "none"
            return knobs.Violation(name, value, f"{declaration.name} has no such knob ({known})")
        if value not in knob.values:
            return knobs.Violation(name, value, knob.expected())
    for rule in declaration.rules:
        if rule.requires:
            broken = merged[rule.field] != own[rule.field].default and not rule.test(merged, mask)
        else:
            broken = rule.test(merged, mask)
        if broken:
            return knobs.Violation(rule.field, merged[rule.field], rule.why(merged, mask))
    return None


def validate(declaration: Any, where: str, taken: frozenset[str] = frozenset()) -> None:
    """Refuse a declaration that cannot be used, naming ``where`` and the field: a bad name, a
    factory that is not callable, unknown capabilities, a knob of an unknown type or with a
    default outside its values, a rule naming an unknown knob."""
    if not isinstance(declaration, BackendDeclaration):
        raise DeclarationError(
            where, "BACKEND", f"expected a BackendDeclaration, got {type(declaration).__name__}"
        )
    name = declaration.name
    if not isinstance(name, str) or not name or not set(name) <= NAME_CHARS:
        raise DeclarationError(
            where, "name", f"{name!r}: use lower-case letters, digits, '-' and '_'"
        )
    if name in taken:
        raise DeclarationError(where, "name", f"{name!r} is already a backend")
    if not callable(declaration.factory):
        raise DeclarationError(where, "factory", "expected a class or a function")
    _check_capabilities(declaration.capabilities, where)
    names = set()
    for index, knob in enumerate(declaration.knobs):
        label = f"knobs[{index}]"
        if not isinstance(knob, knobs.Knob):
            raise DeclarationError(where, label, f"expected a kernels.knobs.Knob, got {knob!r}")
        if knob.kind not in KNOB_TYPES:
            allowed = ", ".join(t.__name__ for t in KNOB_TYPES)
            raise DeclarationError(
                where,
                f"{label}.kind",
                f"{knob.name}: unknown knob type {knob.kind!r}; use {allowed}",
            )
        if not knob.values:
            raise DeclarationError(where, f"{label}.values", f"{knob.name}: no values")
        bad = [v for v in knob.values if not isinstance(v, knob.kind)]
        if bad:
            raise DeclarationError(
                where, f"{label}.values", f"{knob.name}: {bad[0]!r} is not a {knob.kind.__name__}"
            )
        if knob.default not in knob.values:
            raise DeclarationError(
                where,
                f"{label}.default",
                f"{knob.name}: default {knob.default!r} is not one of its values "
                f"({knob.values_text()})",
            )
        if knob.name in knobs.KNOBS or knob.name in ("mask", "window"):
            raise DeclarationError(
                where, f"{label}.name", f"{knob.name!r} is the workbench's own; name it apart"
            )
        if knob.name in names:
            raise DeclarationError(where, f"{label}.name", f"{knob.name!r} declared twice")
        names.add(knob.name)
    for index, rule in enumerate(declaration.rules):
        for read in (rule.field, *rule.reads):
            if read != "mask" and read not in names:
                raise DeclarationError(where, f"rules[{index}]", f"names unknown knob {read!r}")


def _check_capabilities(capabilities: Any, where: str) -> None:
    if not isinstance(capabilities, Capabilities):
        raise DeclarationError(where, "capabilities", "expected a Capabilities")
    for part, allowed in (
        ("layouts", LAYOUTS),
        ("dtypes", DTYPES),
        ("masks", tuple(MASK_MODES)),
    ):
        given = getattr(capabilities, part)
        unknown = [v for v in given if v not in allowed]
        if unknown or not given:
            what = f"unknown {unknown[0]!r}" if unknown else "none given"
            raise DeclarationError(
                where, f"capabilities.{part}", f"{what}; expected some of {', '.join(allowed)}"
            )
    dims = capabilities.head_dims
    if dims is not None and (not dims or not all(isinstance(d, int) and d > 0 for d in dims)):
        raise DeclarationError(where, "capabilities.head_dims", f"{dims!r}: expected whole numbers")
