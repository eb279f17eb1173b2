"""Nsight Compute on a plugin's point: the child under ncu loads the run's own plugin file, at
the version the run stored, with the own knob values that point ran (its tuner's choice in an
autotuned run), so the profile is of the kernel that was timed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kernels import knobs
from workbench.backends.plugin_env import ENV_KNOBS, ENV_PINS, ENV_PLUGINS, version_change
from workbench.store import PointRecord, RunRecord

PLUGIN_SPEC = "plugin"


def plugin_spec(run: RunRecord, point: PointRecord) -> dict[str, Any] | None:
    """The run's plugin file, its stored SHA-256 and the point's own knob values; None for a
    run of another backend."""
    own = (point.extra or {}).get("plugin_knobs", run.machine.get("plugin_knobs"))
    if not isinstance(own, Mapping):
        return None
    return {
        "path": str(run.machine.get("plugin_path") or ""),
        "sha256": str(run.machine.get("plugin_sha256") or ""),
        "entry_point": str(run.machine.get("plugin_entry_point") or ""),
        "knobs": dict(own),
    }


def plugin_config(config: dict[str, Any]) -> dict[str, Any]:
    """A plugin's point is launched with the knobs it ran: its tuner does not run again."""
    return {**config, knobs.TUNER.name: False}


def version_refusal(run_id: int, plugin: Mapping[str, Any]) -> str | None:
    """Why the run's plugin cannot be profiled as it ran (its file gone or edited since), in
    one line; None when it can. An entry point's package is what is installed now."""
    path = plugin["path"]
    if plugin["entry_point"] or not path:
        return None
    changed = version_change(path, plugin["sha256"], since=f"run {run_id} ran it")
    if changed and "SHA-256" in changed:
        return (
            f"{changed}: restore that version to profile the kernel that was timed, or "
            "profile a run of the file as it is"
        )
    return changed


def plugin_env(plugin: Mapping[str, Any]) -> dict[str, str]:
    """The environment that makes the child load the run's plugin with the point's knobs."""
    files = "" if plugin["entry_point"] else plugin["path"]
    return {ENV_PLUGINS: files, ENV_KNOBS: json.dumps(plugin["knobs"]), ENV_PINS: ""}
