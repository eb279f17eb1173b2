"""``fmha-workbench``: the GUI with no subcommand, and a headless CLI over the same core.

Each command (:mod:`workbench.cli.commands`, one module a command) opens the store, calls one
or two core functions and turns their errors into a clean exit: 0 on success, 1 when a sweep
failed or a write did (a lock, a full disk, stdout), 2 with one line on stderr (and nothing
written) for bad input, 130 when interrupted (Ctrl-C), 143 when terminated (SIGTERM, handled
like Ctrl-C: the run is stored cancelled with its points). Reading commands open the database
read-only and never change it.
"""

from __future__ import annotations

# isort: split
# First: a Ctrl-C while the rest below imports is a quiet exit 130, not a traceback.
from workbench.cli.signals import Terminated, ignore_stop_signals, stop_signals

# isort: split
import sys
from collections.abc import Sequence
from typing import NoReturn

from workbench.backends.base import BackendError
from workbench.backends.plugin_cli import parse_with_plugins
from workbench.cli import commands
from workbench.cli.exit_codes import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
)
from workbench.cli.output import OutputFailed, ReaderLeft, failed, guarded_stdout
from workbench.cli.parser import build_parser, join_text_values
from workbench.cli.values import UsageError
from workbench.config import ConfigError
from workbench.store import StoreError, StoreLocked, StoreWriteFailed


def main(argv: Sequence[str] | None = None) -> int:
    from workbench.backends import UnknownBackend
    from workbench.measure.blas import limit_blas_threads

    limit_blas_threads()  # the window's policy for the reference backend (workbench.measure.blas)
    typed = list(sys.argv[1:] if argv is None else argv)
    try:
        with guarded_stdout():  # a failed write to stdout is one line and exit 1
            args = parse_with_plugins(build_parser(), join_text_values(typed))
            command = args.command or "gui"
            # SIGTERM stops a command like Ctrl-C; the window's Qt loop has its own way to end.
            with stop_signals(sigterm=command != "gui"):
                return int(commands.by_name()[command].run(args))
    except (StoreLocked, StoreWriteFailed, OutputFailed) as exc:  # not bad input: failed
        return failed(f"error: {exc}", EXIT_FAILED)
    except (UsageError, UnknownBackend, BackendError, StoreError) as exc:
        return failed(f"error: {exc}", EXIT_USAGE)
    except ConfigError as exc:
        return failed(f"error: {exc.cli_message(typed)}", EXIT_USAGE)
    except Terminated:
        return failed("terminated", EXIT_TERMINATED)
    except KeyboardInterrupt:
        return failed("interrupted", EXIT_INTERRUPTED)
    except (BrokenPipeError, ReaderLeft):  # `fmha-workbench runs | head`: not an error
        sys.stderr.close()
        return EXIT_OK


def entry_point() -> NoReturn:
    code = main()
    ignore_stop_signals()  # Python's shutdown restores SIGINT's default: a late Ctrl-C killed it
    sys.exit(code)
