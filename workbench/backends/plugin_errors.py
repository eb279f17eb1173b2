"""A plugin's own exception at run time, told in its author's terms: the line of their file it
came from, the exception in one line, then the traceback's frames in their file, so a run that
failed says where to look (`show`, History's tooltip, the CSV's error)."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from workbench.errors import BackendError

T = TypeVar("T")
MAX_FRAMES = 6  # the plugin's own frames kept, innermost last


class PluginError(BackendError):
    """An exception raised by a plugin's code (its prepare, attention, launch, score transform
    or block map), located in its file."""


def one_line(exc: BaseException) -> str:
    """``Type: message`` with the message's whitespace folded to single spaces."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def located(exc: BaseException, path: str, what: str) -> str:
    """``/my/attn.py line 12, in attention: RuntimeError: …`` and, one a line below it, the
    plugin file's frames of the traceback with their source lines; ``what`` (the plugin's call,
    ``prepare``) stands in for the line where no frame is in the file."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _same_file(f.filename, path)]
    if not frames:
        return f"{path}: {what}: {one_line(exc)}"
    last = frames[-1]
    lines = [f"{path} line {last.lineno}, in {last.name}: {one_line(exc)}"]
    if len(frames) > 1 or last.line:
        lines.append("its frames in that file, innermost last:")
        for frame in frames[-MAX_FRAMES:]:
            lines.append(f"  line {frame.lineno}, in {frame.name}: {(frame.line or '').strip()}")
    return "\n".join(lines)


def _same_file(filename: str, path: str) -> bool:
    try:
        return Path(filename).resolve() == Path(path).resolve()
    except OSError:
        return filename == path


@contextmanager
def plugin_code(path: str, what: str) -> Iterator[None]:
    """Run a plugin's code; an exception out of it becomes a :class:`PluginError` located in
    ``path``. Our own refusals (a BackendError it passes on) and interrupts go through as
    they are."""
    try:
        yield
    except BackendError:
        raise
    except Exception as exc:
        raise PluginError(located(exc, path, what)) from exc


def guarded(call: Callable[..., T], path: str, what: str) -> Callable[..., T]:
    """``call`` with its exceptions located by :func:`plugin_code`."""

    def run(*args: Any, **kwargs: Any) -> T:
        with plugin_code(path, what):
            return call(*args, **kwargs)

    return run
