"""``fmha-workbench``: the GUI with no subcommand, and a headless CLI over the same core.

Each command (:mod:`workbench.cli.commands`, one module a command) opens the store, calls one
or two core functions and turns their errors into a clean exit: 0 on success, 1 when a sweep
failed or a write did (a lock, a full disk, stdout), 2 with one line on stderr (and nothing
written) for bad input, 130 when interrupted (Ctrl-C), 143 when terminated (SIGTERM, handled
like Ctrl-C: the run is stored cancelled with its points). Reading commands open the database
read-only and never change it.

Start-up imports only the parsers; a command's own imports (the store, the backends, NumPy's
users) happen when it runs, so ``--help`` and a reading command do not pay for the others.
"""

from __future__ import annotations

# isort: split
# First: a Ctrl-C while the rest below imports is a quiet exit 130, not a traceback.
from workbench.cli.signals import Terminated, ignore_stop_signals, stop_signals

# isort: split
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from workbench.cli.exit_codes import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
)
from workbench.measure.blas import limit_blas_threads

if TYPE_CHECKING:
    import argparse

# Raised by modules a command imports when it runs: (module, class name), looked up when an
# error arrives, since an error of a module never imported cannot have been raised.
_FAILED_ERRORS = (
    ("workbench.store.errors", "StoreLocked"),
    ("workbench.store.errors", "StoreWriteFailed"),
)
_USAGE_ERRORS = (
    ("workbench.backends.catalog", "UnknownBackend"),
    ("workbench.store.errors", "StoreError"),
)


def _imported_classes(names: Sequence[tuple[str, str]]) -> tuple[type[BaseException], ...]:
    modules = (sys.modules.get(module) for module, _ in names)
    return tuple(
        getattr(module, name) for module, (_, name) in zip(modules, names) if module is not None
    )


def main(argv: Sequence[str] | None = None) -> int:
    # Before NumPy loads (the parsers import it): its OpenBLAS then starts one thread, not one
    # a core (the window's policy for the reference backend, workbench.measure.blas).
    limit_blas_threads()
    from workbench.cli import commands
    from workbench.cli.output import ReaderLeft, failed, guarded_stdout

    typed = list(sys.argv[1:] if argv is None else argv)
    try:
        with guarded_stdout():  # a failed write to stdout is one line and exit 1
            args = _parse(typed)
            command = args.command or "gui"
            # SIGTERM stops a command like Ctrl-C; the window's Qt loop has its own way to end.
            with stop_signals(sigterm=command != "gui"):
                return int(commands.by_name()[command].run(args))
    except Terminated:
        return failed("terminated", EXIT_TERMINATED)
    except KeyboardInterrupt:
        return failed("interrupted", EXIT_INTERRUPTED)
    except (BrokenPipeError, ReaderLeft):  # `fmha-workbench runs | head`: not an error
        sys.stderr.close()
        return EXIT_OK
    except Exception as exc:
        refusal = _refusal(exc, typed)
        if refusal is None:
            raise
        return failed(*refusal)


def _refusal(exc: Exception, typed: Sequence[str]) -> tuple[str, int] | None:
    """The line and exit code of an error the command line answers, or None for a bug."""
    from workbench.cli.output import OutputFailed
    from workbench.cli.values import UsageError
    from workbench.config_error import ConfigError
    from workbench.errors import BackendError

    if isinstance(exc, (OutputFailed, *_imported_classes(_FAILED_ERRORS))):  # not bad input
        return f"error: {exc}", EXIT_FAILED
    if isinstance(exc, (UsageError, BackendError, *_imported_classes(_USAGE_ERRORS))):
        return f"error: {exc}", EXIT_USAGE
    if isinstance(exc, ConfigError):
        return f"error: {exc.cli_message(typed)}", EXIT_USAGE
    return None


# The flags that need the plugin machinery (the backends' catalog) at parse time: the plugin
# flags themselves, and --help, which lists them.
_PLUGIN_OR_HELP_FLAGS = ("--plugin", "--plugin-knob", "--help")


def _may_name_plugins_or_help(words: Sequence[str]) -> bool:
    """Could argparse read one of ``words`` as a plugin flag or a help flag (``-h``, or a
    long flag's abbreviation, ``--plug``)? Without one, the parse is the same without them."""
    for word in words:
        name = word.partition("=")[0]
        if name.startswith("--"):
            if len(name) > 2 and any(flag.startswith(name) for flag in _PLUGIN_OR_HELP_FLAGS):
                return True
        elif name.startswith("-") and "h" in name:
            return True
    return False


def _parse(typed: list[str]) -> argparse.Namespace:
    from workbench.cli import parser

    words = parser.join_text_values(typed)
    if not _may_name_plugins_or_help(typed):
        return parser.build_parser().parse_args(words)
    from workbench.backends.plugin_cli import parse_with_plugins

    namespace: argparse.Namespace = parse_with_plugins(parser.build_parser(), words)
    return namespace


def entry_point() -> NoReturn:
    code = main()
    ignore_stop_signals()  # Python's shutdown restores SIGINT's default: a late Ctrl-C killed it
    sys.exit(code)
