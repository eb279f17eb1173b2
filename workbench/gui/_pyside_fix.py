"""Guard against PySide6 6.12.0's reference-count leak of None/True on Python < 3.12.

PySide6 6.12.0 (cp310-abi3 wheel) returns ``None`` from every void C++ method and from every
Python override Qt calls (``paintEvent``, ``event``...) without taking a reference, and signal
emission does the same with ``True``. On Python 3.12+ those objects are immortal and nothing
happens; on 3.10 and 3.11 each call lowers their reference count by one, and after some ten
thousand calls (a few seconds of pyqtgraph repainting) the interpreter aborts with
"Fatal Python error: none_dealloc: deallocating None". PySide6 6.11.3 does not leak.

The fix does here what 3.12 does natively: it gives those singletons a reference count so high
that no amount of leaking brings it to zero. It is applied only when a probe shows the leak, so
a fixed PySide6 or a newer Python leaves the interpreter untouched.
"""

from __future__ import annotations

import ctypes
import sys

# 2**40 references: at a million leaked references a second that lasts twelve days.
_RESERVE = 1 << 40
_SINGLETONS = (None, True, False, NotImplemented, Ellipsis)
_applied = False


def leaks_none(calls: int = 64) -> bool:
    """Does calling a void Qt method lose a reference to None?"""
    from PySide6.QtCore import QObject

    probe = QObject()
    probe.setObjectName("probe")  # let any one-time caching happen first
    before = sys.getrefcount(None)
    for _ in range(calls):
        probe.setObjectName("probe")
    return sys.getrefcount(None) <= before - calls // 2


def apply() -> bool:
    """Reserve references for the singletons if this PySide6 leaks them; True if applied."""
    global _applied
    if _applied:
        return True
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False  # immortal singletons (3.12+), or no ob_refcnt to speak of
    if not leaks_none():
        return False
    for obj in _SINGLETONS:
        # ob_refcnt is the first field of every CPython object (a Py_ssize_t).
        ctypes.c_ssize_t.from_address(id(obj)).value += _RESERVE
    _applied = True
    return True


def applied() -> bool:
    return _applied
