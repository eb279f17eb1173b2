"""The command line's side of plugins: ``--plugin PATH`` and ``--plugin-knob NAME=VALUE``
(global flags, before or after the command, each may repeat), and the plugin knobs the
``knobs`` command lists. The files are loaded and checked here, before any command runs, and
put in the environment (:mod:`workbench.backends.plugin_env`) for the children."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kernels.knobs import TUNER
from workbench.backends.catalog import builtin_names, declarations, forget_plugins
from workbench.backends.declaration import BackendDeclaration
from workbench.backends.plugin_env import ENV_KNOBS, ENV_PLUGINS, plugin_paths
from workbench.backends.plugins import file_declarations
from workbench.errors import BackendError

PLUGIN_FLAG, KNOB_FLAG = "--plugin", "--plugin-knob"


def _flag_values(argv: Sequence[str], flag: str) -> tuple[list[str], list[str]]:
    """(the values of ``flag`` wherever it stands, the other words)."""
    values, rest = [], []
    words = iter(argv)
    for word in words:
        if word == flag:
            value = next(words, None)
            if value is None:
                raise BackendError(f"{flag}: expected a value after it")
            values.append(value)
        elif word.startswith(f"{flag}="):
            values.append(word.removeprefix(f"{flag}="))
        else:
            rest.append(word)
    return values, rest


def parse_knob(text: str, declared: Iterable[BackendDeclaration]) -> tuple[str, Any]:
    """``softcap=30`` -> ("softcap", 30.0), by the type of the plugin knob of that name."""
    name, sep, raw = text.partition("=")
    own = {k.name: k for d in declared for k in d.knobs}
    if not sep or not name:
        raise BackendError(f"{KNOB_FLAG} {text}: expected NAME=VALUE")
    knob = own.get(name)
    if knob is None:
        known = ", ".join(sorted(own)) or "none (load a plugin with --plugin)"
        raise BackendError(f"{KNOB_FLAG} {text}: no plugin knob {name!r}; plugin knobs: {known}")
    value = knob_value(knob, raw)
    if value is None:
        raise BackendError(f"{KNOB_FLAG} {text}: {knob.expected()}")
    return name, value


_SWITCH_WORDS = {"true": True, "on": True, "1": True, "false": False, "off": False, "0": False}


def knob_value(knob: Any, given: Any) -> Any:
    """``given`` (the text of ``--plugin-knob``, or a ladder step's JSON value) as the plugin
    knob's type, or None where it is not one of the knob's values (a JSON 30 for a float knob
    is 30.0; a switch takes on/off words as text, a JSON bool as itself)."""
    try:
        if knob.kind is bool:
            value = _SWITCH_WORDS[given.lower()] if isinstance(given, str) else given
            value = value if isinstance(value, bool) else None
        elif isinstance(given, bool):
            value = None  # true is not a number
        else:
            value = knob.kind(given)
    except (KeyError, TypeError, ValueError):
        value = None
    return value if value is not None and value in knob.values else None


def apply_command_line(argv: Sequence[str]) -> list[str]:
    """Take ``--plugin PATH`` and ``--plugin-knob NAME=VALUE`` out of ``argv`` (before or after
    the command, each may repeat), load and check the files, and put them in the environment
    for this process and its children. Returns the other words."""
    paths, rest = _flag_values(argv, PLUGIN_FLAG)
    settings, rest = _flag_values(rest, KNOB_FLAG)
    if not paths and not settings:
        return rest
    builtin = frozenset(builtin_names())
    loaded: list[BackendDeclaration] = []
    resolved = []
    for path in paths or plugin_paths():
        absolute = str(Path(path).expanduser().resolve())
        if absolute in resolved:  # the same file twice is one plugin
            continue
        loaded += file_declarations(path, builtin | {d.name for d in loaded})
        resolved.append(absolute)
    knob_values = dict(parse_knob(text, loaded) for text in settings)
    os.environ[ENV_PLUGINS] = os.pathsep.join(resolved)
    if settings:
        os.environ[ENV_KNOBS] = json.dumps(knob_values)
    forget_plugins()
    return rest


def knob_table() -> list[dict[str, Any]]:
    """Each loaded plugin's knobs, for the ``knobs`` command: backend, name, type, default,
    values, whether the tuner chooses it, and the plugin's file."""
    rows = []
    for declaration in declarations().values():
        if declaration.source is None:
            continue
        for knob in declaration.knobs:
            rows.append(
                {
                    "backend": declaration.name,
                    "knob": knob.name,
                    "type": knob.kind.__name__,
                    "default": knob.default,
                    "values": list(knob.values),
                    "tunable": knob.tunable,
                    "label": knob.label,
                    "help": knob.help,
                    "plugin_path": declaration.source.path,
                }
            )
    return rows


def parse_with_plugins(parser: argparse.ArgumentParser, argv: Sequence[str]) -> Any:
    """``parser``'s parse of ``argv`` after :func:`apply_command_line` took the plugin flags
    out (wherever they stand); the parser lists them in ``--help``."""
    rest = apply_command_line(argv)
    _add_plugin_help(parser)
    return parser.parse_args(rest)


def print_plugin_knobs(rows: list[dict[str, Any]]) -> None:
    """The ``knobs`` command's table of the loaded plugins' knobs (none: nothing)."""
    if not rows:
        return
    header = ["plugin backend", "knob", "type", "default", "values", TUNER.flag]
    cells = [
        [
            r["backend"], r["knob"], r["type"], str(r["default"]),
            ", ".join(map(str, r["values"])), "tunes it" if r.get("tunable") else "",
        ]
        for r in rows
    ]  # fmt: skip
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(len(header))]
    for line in [header, *cells]:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


def _add_plugin_help(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        PLUGIN_FLAG,
        metavar="PATH",
        action="append",
        help="load backends from a plugin file (a .py setting BACKENDS); may repeat, before or "
        "after the command",
    )
    parser.add_argument(
        KNOB_FLAG,
        metavar="NAME=VALUE",
        action="append",
        help="set a plugin backend's knob (see `knobs --plugin PATH`); may repeat",
    )
