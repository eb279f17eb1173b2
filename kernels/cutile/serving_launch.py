"""What the serving kernels' host wrappers share: their kernel variants (CTAs an SM),
host tables copied to the device once, the launch, and the offline compile (no GPU) that reads
their registers and spills.

cuda.tile is imported only by the functions that compile or launch.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels import knobs as registry
from kernels.cutile.plan import SERVING_HINT_KNOBS

# Device copies of host tables, the newest last; the oldest go past this many.
DEVICE_TABLES_KEPT = 64
_DEVICE_TABLES: dict[tuple[int, str], tuple[np.ndarray, Any]] = {}
_VARIANTS: dict[tuple[int, int | None, int | None, int | None], Any] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class ArrayArg:
    """An array parameter as the offline compile sees it: dtype name and shape (C order)."""

    dtype: str
    shape: tuple[int, ...]


def variant(
    kernel: Any,
    ctas_per_sm: int | None = None,
    worker_warps: int | None = None,
    cluster_ctas: int | None = None,
) -> Any:
    """``kernel`` compiled to fit ``ctas_per_sm`` CTAs an SM (cuTile's occupancy hint) with
    ``worker_warps`` warps, each program on ``cluster_ctas`` CTAs of a cluster (None: the
    compiler's choice for each), made once: a ``replace_hints`` per launch would recompile."""
    wanted = (ctas_per_sm, worker_warps, cluster_ctas)
    key = (id(kernel), *wanted)
    names = [registry.KNOBS[name].hint for name in SERVING_HINT_KNOBS]
    hints = {name: value for name, value in zip(names, wanted, strict=True) if value}
    with _LOCK:
        if key not in _VARIANTS:
            _VARIANTS[key] = kernel.replace_hints(**hints) if hints else kernel
        return _VARIANTS[key]


def device_table(table: np.ndarray, like: Any) -> Any:
    """A torch copy of the host table ``table`` on ``like``'s device, made once per table
    (tables come from caches, so the same batch reuses its copy; the last
    :data:`DEVICE_TABLES_KEPT` are kept)."""
    import torch

    key = (id(table), str(like.device))
    with _LOCK:
        kept = _DEVICE_TABLES.get(key)
        if kept is None or kept[0] is not table:
            kept = (table, torch.from_numpy(np.array(table, copy=True)).to(like.device))  # writable
            _DEVICE_TABLES[key] = kept
            while len(_DEVICE_TABLES) > DEVICE_TABLES_KEPT:
                del _DEVICE_TABLES[next(iter(_DEVICE_TABLES))]
        return kept[1]


def launch(grid: tuple[int, int, int], kernel: Any, args: Sequence[Any], like: Any) -> None:
    """One launch on torch's current stream of ``like``'s device, errors made readable."""
    import cuda.tile as ct
    import torch

    from kernels.cutile.diagnostics import friendly_errors

    with friendly_errors():
        ct.launch(torch.cuda.current_stream(like.device), grid, kernel, tuple(args))


def compile_offline(kernel: Any, parameters: Sequence[Any], arch: str = "sm_90") -> bytes:
    """The cubin of ``kernel`` for ``arch`` without a GPU: each parameter an :class:`ArrayArg`
    (a contiguous, 16-byte aligned array of that shape), ``int``/``float`` (a runtime scalar
    of that type) or a constant's value."""
    import cuda.tile as ct
    from cuda.tile.compilation import (
        CallingConvention,
        KernelSignature,
        ScalarConstraint,
        export_kernel,
    )

    from kernels.cutile.compile import array_constraint
    from kernels.cutile.diagnostics import friendly_errors

    scalars = {int: ct.int32, float: ct.float32}
    sig: list[Any] = []
    for p in parameters:
        if isinstance(p, ArrayArg):
            sig.append(array_constraint(p))
        elif p in (int, float):
            sig.append(ScalarConstraint(scalars[p]))
        else:
            sig.append(p)
    buf = io.BytesIO()
    with friendly_errors():
        export_kernel(
            kernel,
            [KernelSignature(sig, CallingConvention.cutile_python_v2())],
            buf,
            gpu_code=arch,
            output_format="cubin",
        )
    return buf.getvalue()
