"""Where the plugins of this process and its children are named: the environment, which every
child the workbench starts (the engine child that runs a plugin) inherits."""

from __future__ import annotations

import json
import os
from typing import Any

ENV_PLUGINS = "FMHA_WORKBENCH_PLUGINS"  # plugin files, os.pathsep-separated, absolute
ENV_KNOBS = "FMHA_WORKBENCH_PLUGIN_KNOBS"  # JSON {knob: value} from --plugin-knob


def plugin_paths() -> list[str]:
    return [p for p in os.environ.get(ENV_PLUGINS, "").split(os.pathsep) if p]


def knob_settings() -> dict[str, Any]:
    """The plugin knob values the command line set (``--plugin-knob``)."""
    text = os.environ.get(ENV_KNOBS, "")
    return dict(json.loads(text)) if text else {}
