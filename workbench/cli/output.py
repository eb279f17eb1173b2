"""The command line's own output: stdout writes that fail in one line, error lines that never
land on the end of an unfinished progress line, and what commands print (tables, JSON, a job's
progress).

A full disk behind ``> file``, ``/dev/full`` or a closed terminal makes a write to stdout fail;
:func:`guarded_stdout` turns that into :class:`OutputFailed` (the CLI's exit 1 with one line),
and a reader that left (``| head``) into :class:`ReaderLeft` (exit 0: it read what it wanted).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import sys
import textwrap
from collections.abc import Iterator
from typing import Any, TextIO

from workbench.cli.exit_codes import EXIT_FAILED, EXIT_OK
from workbench.run import progress
from workbench.run.events import JobStarted, RunFinished
from workbench.run.progress import ProgressPrinter


class OutputFailed(Exception):
    """Writing the command's output to stdout failed; the message says why, in one line."""


class ReaderLeft(Exception):
    """stdout's reader closed the pipe (``fmha-workbench runs | head``): not an error."""


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null, so the interpreter's last flush of what is still buffered cannot
    fail a second time (it would print "Exception ignored" and exit 120)."""
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.__stdout__.fileno() if sys.__stdout__ else 1)
        os.close(null)


def _failure(exc: OSError) -> Exception:
    _silence_stdout()
    if isinstance(exc, BrokenPipeError) or exc.errno == errno.EPIPE:
        return ReaderLeft()
    return OutputFailed(f"writing to stdout failed: {exc.strerror or exc}")


class _GuardedStream:
    """``stream`` whose write and flush raise OutputFailed / ReaderLeft instead of OSError.

    Where it has a descriptor, the text is written with ``os.write`` until all of it is out:
    Python's own buffered stdout takes a short write (the last free block of a full disk) as
    done, dropping the rest without an error, and the command exited 0 with a cut file.
    """

    BUFFER_BYTES = 1 << 16

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        try:
            stream.flush()
            self._fd: int | None = stream.fileno()
            self._eager = stream.isatty()  # a terminal sees each line as it comes
        except (OSError, ValueError, AttributeError):  # a captured stream: no descriptor
            self._fd, self._eager = None, True

    def write(self, text: str) -> int:
        if self._fd is None:
            try:
                return self._stream.write(text)
            except OSError as exc:
                raise _failure(exc) from exc
        data = text.encode(self._stream.encoding or "utf-8", self._stream.errors or "strict")
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._eager or self._pending_bytes >= self.BUFFER_BYTES:
            self.flush()
        return len(text)

    def flush(self) -> None:
        try:
            if self._fd is None:
                self._stream.flush()
                return
            view = memoryview(b"".join(self._pending))
            self._pending, self._pending_bytes = [], 0
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            raise _failure(exc) from exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _ClosedStream:
    """stdout when the command was started with it closed (``>&-``): Python's print would drop
    the output silently and exit 0."""

    def write(self, text: str) -> int:
        raise OutputFailed("writing to stdout failed: stdout is closed")

    def flush(self) -> None:
        pass


@contextlib.contextmanager
def guarded_stdout() -> Iterator[None]:
    """While the block runs, stdout's failures are OutputFailed / ReaderLeft; what is left in
    its buffer is flushed (and so checked) before the block ends, also when it ends by
    SystemExit (argparse's ``--help``: piped, its text was dropped and nothing printed)."""
    real = sys.stdout
    if isinstance(real, (_GuardedStream, _ClosedStream)):
        yield
        return
    guarded = _ClosedStream() if real is None else _GuardedStream(real)
    sys.stdout = guarded
    try:
        yield
        guarded.flush()
    except SystemExit:
        guarded.flush()
        raise
    finally:
        sys.stdout = real


def say_error(line: str) -> None:
    """``line`` on stderr on a line of its own: a progress line left open (``[4/8] N=1280 …``
    waiting for its result) is ended first."""
    progress.end_open_line()
    with contextlib.suppress(OSError):
        print(line, file=sys.stderr)


def failed(line: str, code: int) -> int:
    """Say ``line`` (:func:`say_error`) and return the exit ``code``."""
    say_error(line)
    return code


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: object, *, keep_newlines: bool = False) -> str:
    """``text`` with control characters escaped (ESC, BEL, NUL in a label must not drive the
    terminal); newlines kept where asked (a stored error's trace)."""

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        return char if keep_newlines and char == "\n" else repr(char)[1:-1]

    return _CONTROL.sub(escape, str(text))


def emit_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


# The narrowest last column worth wrapping into; a narrower terminal gets long lines instead.
MIN_WRAPPED_COLUMN = 24


def table(rows: list[list[str]], header: list[str], *, width: int | None = None) -> str:
    """Columns padded to their widest cell, no trailing spaces. Where the table is wider than
    the terminal, the last column wraps under itself, or, with too little room
    beside the others, goes under its row as ``name: text``, so a long rule or label does not
    run a 200-character line. ``width``: the room (None: the terminal's; piped output keeps
    one line a row for grep)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    room = output_width() if width is None else width
    start = sum(widths[:-1]) + 2 * (len(widths) - 1)
    if len(header) < 2 or not room or start + widths[-1] <= room:
        return "\n".join(_padded(row, widths) for row in [header, *rows])
    if room - start >= MIN_WRAPPED_COLUMN:  # beside the row, wrapped
        lines = []
        for row in [header, *rows]:
            first, *more = textwrap.wrap(str(row[-1]), room - start) or [""]
            lines.append(_padded([*row[:-1], first], widths))
            lines += [" " * start + piece for piece in more]
        return "\n".join(lines)
    indent = " " * (widths[0] + 2)  # under the row, after its first column
    lines = [_padded(header[:-1], widths)]
    for row in rows:
        lines.append(_padded(row[:-1], widths))
        if str(row[-1]).strip():
            said = f"{header[-1]}: {row[-1]}"
            lines += textwrap.wrap(said, room, initial_indent=indent, subsequent_indent=indent)
    return "\n".join(lines)


def _padded(row: list[str], widths: list[int]) -> str:
    return "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()


def output_width() -> int | None:
    """How wide stdout's lines may be: a terminal's width (``COLUMNS`` where set, as argparse
    reads it), or None for a pipe or a file, which keep one line a row."""
    try:
        if not sys.stdout.isatty():
            return None
    except (AttributeError, ValueError, OSError):
        return None
    return shutil.get_terminal_size().columns


def fmt(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def follow(job: Any, events: Any) -> tuple[int, int | None, list[int]]:
    """Print a job's events on stderr as they come. Returns the exit code (1 if a run did not
    complete), the job's group id (None for a sweep) and its run ids."""
    printer = ProgressPrinter(job.story)
    code, group_id, run_ids = EXIT_OK, None, []
    try:
        for event in events:
            printer(event)
            if isinstance(event, JobStarted):
                group_id = event.group_id
            elif isinstance(event, RunFinished):
                run_ids.append(event.run_id)
                if event.status != "complete":
                    code = EXIT_FAILED
    finally:
        # Ctrl-C between two events lands here, not in the job: close it while the store is
        # open, so its runs are stored cancelled (left to the garbage collector, they were
        # closed after the store and stayed "running", with a traceback).
        events.close()
    return code, group_id, run_ids
