"""Where the plugins of this process and its children are named: the environment, which every
child the workbench starts (the engine child that runs a plugin) inherits."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ENV_PLUGINS = "FMHA_WORKBENCH_PLUGINS"  # plugin files, os.pathsep-separated, absolute
ENV_KNOBS = "FMHA_WORKBENCH_PLUGIN_KNOBS"  # JSON {knob: value} from --plugin-knob
# JSON {path: sha256}: the version of each file the window accepted last; a later save that is
# refused leaves that version running (workbench.backends.plugin_reload).
ENV_PINS = "FMHA_WORKBENCH_PLUGIN_PINS"
DIGESTS = "digests"  # not in the environment: the files' hashes, in plugin_environment()


def plugin_paths() -> list[str]:
    return [p for p in os.environ.get(ENV_PLUGINS, "").split(os.pathsep) if p]


def knob_settings() -> dict[str, Any]:
    """The plugin knob values the command line set (``--plugin-knob``)."""
    text = os.environ.get(ENV_KNOBS, "")
    return dict(json.loads(text)) if text else {}


@contextmanager
def knob_values_set(values: Mapping[str, Any]) -> Iterator[None]:
    """Plugin knob ``values`` over the command line's while the block runs (a ladder step's),
    the command line's again after it; the engine child follows the environment at its next
    call (:mod:`workbench.backends.isolated`)."""
    if not values:
        yield
        return
    before = os.environ.get(ENV_KNOBS)
    os.environ[ENV_KNOBS] = json.dumps({**knob_settings(), **values})
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV_KNOBS, None)
        else:
            os.environ[ENV_KNOBS] = before


def version_change(path: str, stored_sha256: str, since: str = "the run") -> str | None:
    """Why the plugin file at ``path`` is no longer the version a run stored (it cannot be
    read, or its SHA-256 is another), in words ending a sentence; None while it is that
    version (or none was stored)."""
    try:
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as exc:
        return f"the plugin file {path} cannot be read ({exc.strerror or exc})"
    if stored_sha256 and digest != stored_sha256:
        then, now = stored_sha256[:12], digest[:12]
        return f"{path} changed since {since} (SHA-256 {then} then, {now} now)"
    return None


def pinned_digests() -> dict[str, str]:
    """The accepted version (SHA-256) of each plugin file the window pinned."""
    text = os.environ.get(ENV_PINS, "")
    return dict(json.loads(text)) if text else {}


def plugin_environment() -> dict[str, str]:
    """This process's plugin settings and each file's SHA-256 now (its pinned version's where
    the window pinned one), as the engine child follows them
    (:mod:`workbench.backends.isolated`): an edited file is imported afresh there."""
    digests = []
    pins = pinned_digests()
    for path in plugin_paths():
        if path in pins:
            digests.append(pins[path])
            continue
        try:
            digests.append(hashlib.sha256(Path(path).read_bytes()).hexdigest())
        except OSError:
            digests.append("unreadable")
    settings = {name: os.environ.get(name, "") for name in (ENV_PLUGINS, ENV_KNOBS, ENV_PINS)}
    return {**settings, DIGESTS: ",".join(digests)}
