"""The commands, one module each: ``NAME``, ``register(subparsers)`` adding its parser with its
flags and help, and ``run(args) -> int``. :data:`ALL` is the order ``--help`` and docs/cli.md
list them in; a new command is a new module added here.

A module's top imports are what its parser needs; what ``run`` needs it imports inside ``run``,
so a command's start-up does not pay for the other commands' imports.
"""

from __future__ import annotations

from types import ModuleType

from workbench.cli.commands import (
    backends,
    bandwidth,
    blockmap,
    compare,
    export,
    gui,
    import_runs,
    knobs,
    ladder,
    machine,
    profile,
    report,
    resources,
    roofline,
    runs,
    show,
    sweep,
)

ALL: tuple[ModuleType, ...] = (
    gui,
    sweep,
    runs,
    show,
    compare,
    export,
    blockmap,
    ladder,
    report,
    resources,
    machine,
    roofline,
    profile,
    backends,
    bandwidth,
    import_runs,
    knobs,
)


def by_name() -> dict[str, ModuleType]:
    """Each command's module under the name a user types."""
    return {command.NAME: command for command in ALL}
