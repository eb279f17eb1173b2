"""Backends behind one interface, looked up by name.

Every backend is a declaration (:mod:`workbench.backends.declaration`); what is listed, probed,
narrowed and isolated is read from it (:mod:`workbench.backends.catalog`). Backend modules load
CuPy or torch only when they compute, so asking what is available never loads them into a
process that does not need them, and a broken GPU stack only makes its own entries unavailable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

from kernels import knobs
from kernels.knobs import Knob, Rule
from workbench.backends.base import Availability, Backend, BackendError, PointResult
from workbench.backends.catalog import (
    _REGISTRY,
    UnknownBackend,
    backend_names,
    declaration_of,
    declarations,
    load_backend,
    runs_in_engine,
)
from workbench.backends.declaration import BackendDeclaration, Capabilities
from workbench.backends.isolated import IsolatedBackend
from workbench.backends.plugin_backend import declare
from workbench.backends.plugin_blocks import BlockReport

__all__ = [
    "_REGISTRY",
    "Availability",
    "Backend",
    "BackendDeclaration",
    "BackendError",
    "BlockReport",
    "Capabilities",
    "Knob",
    "PointResult",
    "Rule",
    "UnknownBackend",
    "backend_names",
    "backend_notes",
    "backend_statuses",
    "declaration_of",
    "declarations",
    "declare",
    "get_backend",
    "gpu_arch",
    "knob_capability",
    "machine_summary",
    "offered_values",
    "runs_in_engine",
]


def __getattr__(attribute: str) -> object:
    # BACKEND_NAMES and GPU_BACKENDS are read from the declarations each time (plugins too).
    from workbench.backends import catalog

    return getattr(catalog, attribute)


def knob_capability(name: str) -> str | None:
    """The registry capability (:data:`kernels.knobs.CUTILE`) whose narrower knob values and
    architecture rules backend ``name`` follows; None for the backends that run every value the
    config takes (the CPU reference) or ignore the kernel's knobs (the peers)."""
    found = declarations().get(name)
    return found.knob_capability if found is not None else None


def check_offered(config: Any, backends: Sequence[str], arch: str | None) -> None:
    """Refuse a knob value one of ``backends`` does not run (the cuTile kernel's tiles; on GPU
    architecture ``arch``, what the registry keeps off it) as a ConfigError, in the words the
    window's greyed entries use, before anything is written. The CLI's sweep and the window's
    Run both ask this; the ladder's presets run their steps as the study ran them."""
    from workbench.config import refuse_first

    values = config.knob_values()
    for capability in sorted(cast(set[str], {knob_capability(name) for name in backends} - {None})):
        refuse_first(knobs.value_violations(values, capability=capability, arch=arch))


def offered_values(
    name: str, arch: str | None = None, *, tuned: bool = False
) -> dict[str, tuple[Any, ...]]:
    """Field -> the values backend ``name`` runs, for the fields it narrows: the knobs the
    registry narrows for it (on GPU architecture ``arch``, e.g. ``"sm_120"``; None: any) and
    the head dim. ``tuned``: the tuner sets the tunable knobs
    (:func:`kernels.knobs.tuned`), so those are not narrowed."""
    capability = knob_capability(name)
    narrowed: dict[str, tuple[Any, ...]] = {}
    for knob in knobs.EXPOSED if capability is not None else ():
        if tuned and knob.tunable:
            continue
        values = knobs.offered(knob.name, capability=capability, arch=arch)
        if values != knob.values:
            narrowed[knob.name] = values
    found = declarations().get(name)
    if found is not None and found.capabilities.head_dims is not None:
        narrowed["head_dim"] = found.capabilities.head_dims
    return narrowed


def gpu_arch(statuses: Mapping[str, Availability]) -> str | None:
    """The architecture of the GPU our kernel's backend runs on (``"sm_90"``), as its probe
    names it (the backend declared ``kernel_resources``), or None when there is none."""
    for name, declaration in declarations().items():
        status = statuses.get(name)
        if not declaration.kernel_resources or status is None or not status.available:
            continue
        found = re.search(r"\b(sm_\d+)\b", status.reason)
        if found:
            return found.group(1)
    return None


def get_backend(name: str, *, isolated: bool = True) -> Backend:
    """The backend called ``name``; GPU backends come wrapped in the crash-isolating engine
    unless ``isolated`` is false (inside the engine child, or in GPU tests)."""
    backend = load_backend(name)
    if isolated and runs_in_engine(name):
        return IsolatedBackend(backend)
    return backend


def backend_statuses() -> dict[str, Availability]:
    """Every backend's availability; never raises."""
    statuses = {}
    for name, declaration in declarations().items():
        try:
            probe = declaration.probe or get_backend(name).availability
            statuses[name] = probe()
        except Exception as exc:  # a broken optional stack must not take the app down
            statuses[name] = Availability(False, f"{name} failed to load: {exc}")
    from workbench.backends.plugins import broken_entry_points

    for name, why in broken_entry_points.items():  # listed, so the user sees why it is absent
        statuses.setdefault(name, Availability(False, why))
    return statuses


def backend_notes() -> dict[str, str]:
    """Each backend's notes (what it cannot do in decode, say), where it has any; read from
    the declaration, so a backend that cannot load here still says them."""
    return {name: d.notes for name, d in declarations().items() if d.notes}


def machine_summary(statuses: dict[str, Availability] | None = None) -> str:
    """One line for a status bar: the GPU in use, or that the CPU reference is.

    Pass the result of :func:`backend_statuses` when you have it: probing again costs time."""
    statuses = statuses if statuses is not None else backend_statuses()
    gpu = [s.reason for n, s in statuses.items() if n != "reference" and s.available]
    if gpu:
        return gpu[0]
    reasons = [s.reason for n, s in statuses.items() if n != "reference"]
    why = f" ({reasons[0]})" if reasons else ""
    return f"CPU reference backend{why}"
