"""The sweep process: runs the core's ``run_sweep`` away from the GUI's interpreter.

No Qt here, on purpose: this module is what a ``spawn`` child imports. The GUI's worker thread
starts it for backends that compute in the calling process (the NumPy reference). Their Python
loops would otherwise hold the GIL the GUI thread needs for every repaint, and a measured 10 ms
event loop stalled for up to 300 ms. GPU backends already run in the core's supervised engine
process, so for them the worker thread calls ``run_sweep`` itself and keeps the engine (and its
compile cache) alive across runs.

Messages on the pipe, child to parent, each a tuple:
``("event", Event)``, ``("rejected", field, message)``, ``("crashed", text)``, ``("done",)``.
"""

from __future__ import annotations

import contextlib
import traceback
from multiprocessing.connection import Connection
from typing import Any

CHILD_NICENESS = 10


def run_in_child(spec: Any, db_path: str, timing: Any, conn: Connection, cancel: Any) -> None:
    """Child entry point: stream the sweep's events through ``conn`` until it ends."""
    import os

    from workbench.config import ConfigError
    from workbench.runner import run_sweep
    from workbench.store import Store

    # The desktop stays responsive while the CPU works flat out: the window's repaints (and the
    # user's other programs) go first. Only CPU backends run here, so no GPU timing is affected.
    # Not on this platform, or not allowed: run at normal priority.
    with contextlib.suppress(AttributeError, OSError):
        os.nice(CHILD_NICENESS)
    store = None
    try:
        store = Store(db_path)
        for event in run_sweep(spec, store, cancel=cancel.is_set, timing=timing):
            conn.send(("event", event))
    except ConfigError as exc:
        conn.send(("rejected", exc.field, str(exc)))
    except BaseException as exc:  # report everything: the parent shows it and lives on
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        conn.send(("crashed", detail))
    finally:
        if store is not None:
            with contextlib.suppress(Exception):
                store.close()
        # The parent may have gone already; then there is nobody left to tell.
        with contextlib.suppress(OSError):
            conn.send(("done",))
            conn.close()
