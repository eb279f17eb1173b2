"""One BLAS threading policy for the NumPy reference backend, wherever it runs: the command
line's own process and the processes the window starts for its sweeps.

One BLAS thread unless the user set ``OPENBLAS_NUM_THREADS`` (or ``OMP_NUM_THREADS``,
``MKL_NUM_THREADS``) themselves. On a loaded 2-core machine the CLI, with a thread per core,
read 11.5-14.1 s a point where the window's one-thread processes read 1.4-1.6 s; the same
policy makes the two comparable, and each reference run records the threads it ran with
(``blas_threads`` in its machine record).

The environment variables reach processes started from here; the OpenBLAS NumPy has already
loaded is set through its own ``set_num_threads``, which works after NumPy's import too.
"""

from __future__ import annotations

import ctypes
import os
import sys
from functools import lru_cache
from typing import Any

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
DEFAULT_BLAS_THREADS = 1
# Names OpenBLAS builds export (NumPy's wheels ship scipy-openblas with its own prefix).
_SETTERS = (
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)
_GETTERS = tuple(name.replace("set_num", "get_num") for name in _SETTERS)


def policy_threads() -> int:
    """The BLAS threads the policy asks for: the user's ``OPENBLAS_NUM_THREADS`` (then
    ``OMP_NUM_THREADS``) when set to a whole number, else one."""
    for name in BLAS_THREAD_VARIABLES[:2]:
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return DEFAULT_BLAS_THREADS


def limit_blas_threads() -> int | None:
    """Apply the policy to this process and the ones it starts; returns the threads in effect
    (None when the loaded BLAS cannot say). Call it from the main thread at start-up:
    changing the environment while other threads run is not safe."""
    threads = policy_threads()
    for name in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, str(threads))
    library = _openblas()
    if library is not None:
        for name in _SETTERS:
            setter = getattr(library, name, None)
            if setter is not None:
                setter(threads)
                break
    return blas_threads()


def blas_threads() -> int | None:
    """The threads the loaded OpenBLAS uses now, else what the environment asks for, else
    None."""
    library = _openblas()
    if library is not None:
        for name in _GETTERS:
            getter = getattr(library, name, None)
            if getter is not None:
                return int(getter())
    value = os.environ.get("OPENBLAS_NUM_THREADS", "")
    return int(value) if value.isdigit() else None


def _openblas() -> Any:
    """NumPy's OpenBLAS, once NumPy is loaded (found among the process's mapped libraries);
    None before that and elsewhere (another BLAS, no /proc)."""
    if "numpy" not in sys.modules:
        return None
    return _mapped_openblas()


@lru_cache(maxsize=1)
def _mapped_openblas() -> Any:
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = sorted(
                {line.split()[-1] for line in maps if "openblas" in line.lower() and ".so" in line}
            )
    except OSError:
        return None
    for path in paths:
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None
