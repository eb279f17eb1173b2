"""Compiled resources for stored runs that lack them (runs stored before points kept them).

Each cuTile point of the given runs without ``resources`` in its extra facts gets what its
launch compiles to on the run's GPU (:func:`workbench.analysis.resources.point_resources`, cached on
disk), stored with the point, so History, Compare, the Ladder cells and the CSV explain old
runs too. A run of a plugin that declares ``compile_cubin`` gets its own kernel's, compiled
from the file the run names at the version it stored, with each point's own knob values; a
file edited since is skipped with a line saying so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from workbench.analysis.resources import ResourceService, arch_of_machine, point_resources
from workbench.backends import plugin_compile
from workbench.backends.plugin_env import version_change
from workbench.backends.plugins import file_declarations
from workbench.store import RunRecord, Store


def fill_resources(
    store: Store,
    run_ids: Sequence[int],
    service: ResourceService,
    progress: Callable[[str], None] | None = None,
) -> int:
    """Store the compiled resources of every point of ``run_ids`` that has none; returns how
    many points gained them (peers' points, and CPU runs', have none to gain)."""
    filled = 0
    for run_id in run_ids:
        run = store.run(run_id)
        plugin = _plugin_of(run, progress)  # (its loaded plugin, its GPU's arch) or None
        for point in store.points(run.id):
            extra = point.extra or {}
            if extra.get("resources"):
                continue
            problem = dataclasses.replace(run.problem, q_len=point.q_len, k_len=point.k_len)
            if plugin is not None:
                found = plugin_compile.point_resources(
                    plugin[0], problem, run.config, extra.get("plugin_knobs") or {}, plugin[1]
                )
            else:
                found = point_resources(
                    service, run.backend, problem, run.config, extra, run.machine
                )
            if found is None:
                continue
            store.set_point_extra(run.id, point.seq_len, "resources", found)
            filled += 1
            if progress is not None:
                progress(f"run {run.id} N={point.seq_len}: {found.get('registers')} registers")
    return filled


def _plugin_of(run: RunRecord, progress: Callable[[str], None] | None) -> tuple[Any, str] | None:
    """The plugin a stored GPU run of a plugin ran and its GPU's arch, where its
    file is there at the run's version and declares ``compile_cubin``; else None, saying why
    where the run is a plugin's."""
    if "plugin_knobs" not in run.machine:
        return None
    arch = arch_of_machine(run.machine)
    if arch is None:  # a CPU plugin's run: nothing was compiled
        return None
    plugin, why = _stored_plugin(run.backend, run.machine)
    if plugin is None:
        if progress is not None:
            progress(f"run {run.id} ({run.backend}): skipped, {why}")
        return None
    return plugin, arch


def _stored_plugin(backend: str, machine: Mapping[str, Any]) -> tuple[Any, str]:
    """The loaded plugin (its factory, which holds ``compile_cubin``) a stored run of
    ``backend`` ran, read from the file the run names at the version it stored, and ""; or
    None and why not in a few words (no file recorded, gone, edited since, no
    ``compile_cubin``)."""
    path, stored = str(machine.get("plugin_path") or ""), str(machine.get("plugin_sha256") or "")
    if not path:
        return None, "its plugin file is not recorded"
    changed = version_change(path, stored)
    if changed:
        return None, changed
    found = {d.name: d for d in file_declarations(path)}.get(backend)
    if found is None:
        return None, f"{path} no longer declares {backend}"
    if not plugin_compile.compiles_offline(found):
        return None, f"{backend} declares no compile_cubin"
    return found.factory, ""
