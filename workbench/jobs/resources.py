"""Compiled resources for stored runs that lack them (runs stored before points kept them).

Each cuTile point of the given runs without ``resources`` in its extra facts gets what its
launch compiles to on the run's GPU (:func:`workbench.analysis.resources.point_resources`, cached on
disk), stored with the point, so History, Compare, the Ladder cells and the CSV explain old
runs too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from workbench.analysis.resources import ResourceService, point_resources
from workbench.store import Store


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
        for point in store.points(run.id):
            extra = point.extra or {}
            if extra.get("resources"):
                continue
            problem = dataclasses.replace(run.problem, q_len=point.q_len, k_len=point.k_len)
            found = point_resources(service, run.backend, problem, run.config, extra, run.machine)
            if found is None:
                continue
            store.set_point_extra(run.id, point.seq_len, "resources", found)
            filled += 1
            if progress is not None:
                progress(f"run {run.id} N={point.seq_len}: {found.get('registers')} registers")
    return filled
