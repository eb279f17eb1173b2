"""A NumPy stand-in for the part of cuda.tile the serving kernels use, to run their device code on
the CPU: every CTA of a grid in turn, tiles as NumPy arrays.

It checks the kernels' own logic (tile indices, loop bounds, masks, slices, the splits and their
combine) where no GPU is at hand; the compiler and the hardware are the GPU tests' business.
Loads follow cuTile's documented semantics (a tile index in the tile space of ``shape``,
``order`` permuting the array's axes, padding past the bounds); an unchecked load that leaves the
array, a tile entirely out of bounds, a slice outside its array and an MMA of mismatched input
dtypes raise, since the hardware would give undefined results. Padding left UNDETERMINED reads
NaN, so a kernel that relies on it shows NaN in its output.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import types
from collections.abc import Iterator
from typing import Any

import numpy as np


class Array(np.ndarray):
    """A kernel's array argument: a NumPy view with cuTile's ``Array.slice``."""

    def slice(self, axis: int, start: Any, stop: Any) -> Array:
        n = self.shape[axis]
        start, stop = int(start), int(stop)
        if not (0 <= start < n and start <= stop <= n):
            raise IndexError(f"slice [{start}, {stop}) of an axis of {n}")
        index = [slice(None)] * self.ndim
        index[axis] = slice(start, stop)
        return self[tuple(index)]


def as_array(x: np.ndarray) -> Array:
    return x.view(Array)


class PaddingMode(enum.Enum):
    UNDETERMINED = "undetermined"
    ZERO = "zero"
    NEG_INF = "neg_inf"


class RoundingMode(enum.Enum):
    RN = "rn"
    APPROX = "approx"


_PAD = {PaddingMode.UNDETERMINED: np.nan, PaddingMode.ZERO: 0, PaddingMode.NEG_INF: -np.inf}
_BID: list[tuple[int, ...]] = [(0, 0, 0)]


def bid(axis: int) -> np.int32:
    return np.int32(_BID[0][axis])


def cdiv(a: Any, b: Any) -> Any:
    return -(-a // b)


def load(arr, index, shape, *, order="C", padding_mode=PaddingMode.UNDETERMINED,
         check_bounds=True, latency=None, allow_tma=None):  # fmt: skip
    view = np.asarray(arr)
    if order != "C":
        view = view.transpose(order)
    lo = [int(i) * s for i, s in zip(index, shape, strict=True)]
    inside = [(max(a, 0), min(a + s, n)) for a, s, n in zip(lo, shape, view.shape, strict=True)]
    if any(b <= a for a, b in inside):
        raise IndexError(f"a tile entirely out of bounds: index {index}, shape {shape}")
    whole = all(a == o and b == o + s for (a, b), o, s in zip(inside, lo, shape, strict=True))
    if not check_bounds and not whole:
        raise IndexError(f"an unchecked load leaves the array: index {index}, shape {shape}")
    pad = _PAD[padding_mode]
    if not np.issubdtype(view.dtype, np.floating):
        pad = 0
    tile = np.full(shape, pad, dtype=view.dtype)
    src = tuple(slice(a, b) for a, b in inside)
    dst = tuple(slice(a - o, b - o) for (a, b), o in zip(inside, lo, strict=True))
    tile[dst] = view[src]
    return tile


def store(arr, index, tile, *, allow_tma=None):
    shape = tile.shape
    lo = [int(i) * s for i, s in zip(index, shape, strict=True)]
    inside = [(max(a, 0), min(a + s, n)) for a, s, n in zip(lo, shape, arr.shape, strict=True)]
    if any(b <= a for a, b in inside):
        return
    src = tuple(slice(a - o, b - o) for (a, b), o in zip(inside, lo, strict=True))
    arr[tuple(slice(a, b) for a, b in inside)] = tile[src].astype(arr.dtype)


def gather(arr, indices, *, mask=None, padding_value=0, check_bounds=True, latency=None):
    idx = indices if isinstance(indices, tuple) else (indices,)
    idx = np.broadcast_arrays(*[np.asarray(i) for i in idx])
    ok = np.ones(idx[0].shape, dtype=bool)
    for i, n in zip(idx, arr.shape, strict=True):
        ok &= (i >= 0) & (i < n)
    if not check_bounds and not ok.all():
        raise IndexError("an unchecked gather leaves the array")
    safe = tuple(np.where(ok, i, 0) for i in idx)
    out = np.where(ok, np.asarray(arr)[safe], padding_value).astype(arr.dtype)
    return out[()] if out.ndim == 0 else out


def mma(a, b, acc):
    if a.dtype != b.dtype:
        raise TypeError(f"mma of {a.dtype} and {b.dtype}: cuTile does not promote its inputs")
    return acc + a.astype(np.float32) @ b.astype(np.float32)


def full(shape, value, dtype):
    return np.full(shape, value, dtype=dtype)


def zeros(shape, dtype):
    return np.zeros(shape, dtype=dtype)


def arange(n, dtype):
    return np.arange(n, dtype=dtype)


def _reduce(fn):
    def reduce(x, axis=None, *, keepdims=False, **_: Any):
        return fn(x, axis=axis, keepdims=keepdims)

    return reduce


def exp2(x, flush_to_zero=False):
    with np.errstate(over="ignore"):
        return np.exp2(x).astype(np.result_type(x, np.float32))


def log2(x):
    with np.errstate(divide="ignore"):
        return np.log2(x)


def truediv(a, b, rounding_mode=None, flush_to_zero=False):
    return np.asarray(a, dtype=np.float32) / b


def cat(tiles, axis):
    a, b = tiles
    if a.shape != b.shape:
        raise ValueError(f"cat of {a.shape} and {b.shape}")
    return np.concatenate((a, b), axis=axis)


def extract(x, index, shape):
    return x[tuple(slice(i * s, (i + 1) * s) for i, s in zip(index, shape, strict=True))]


def where(cond, x, y):
    return np.where(cond, x, y)


def bitcast(x, dtype):
    """The same bits as another dtype of the same width (the polynomial exp2's exponent trick);
    a width that differs raises, as cuTile refuses it."""
    x = np.ascontiguousarray(x)
    if x.dtype.itemsize != np.dtype(dtype).itemsize:
        raise TypeError(f"bitcast of {x.dtype} to {np.dtype(dtype)}")
    return x.view(dtype)


def _scalar_or_tile(fn):
    def both(a, b):
        out = fn(a, b)
        return out[()] if np.ndim(out) == 0 else out

    return both


FAKE_CT = types.SimpleNamespace(
    PaddingMode=PaddingMode,
    RoundingMode=RoundingMode,
    int32=np.int32,
    float32=np.float32,
    float16=np.float16,
    bid=bid,
    cdiv=cdiv,
    load=load,
    store=store,
    gather=gather,
    mma=mma,
    full=full,
    zeros=zeros,
    arange=arange,
    max=_reduce(np.max),
    sum=_reduce(np.sum),
    maximum=np.maximum,
    minimum=np.minimum,
    exp2=exp2,
    log2=log2,
    truediv=truediv,
    cat=cat,
    extract=extract,
    where=where,
    bitcast=bitcast,
    static_iter=iter,
)


@contextlib.contextmanager
def emulated(*modules: types.ModuleType) -> Iterator[None]:
    """The device modules' ``ct`` (and the builtins ``min``/``max`` that kernels apply to tiles)
    replaced by the NumPy stand-ins while the block runs."""
    kept = [(m, {n: m.__dict__.get(n) for n in ("ct", "min", "max")}) for m in modules]
    try:
        for m, _ in kept:
            m.ct = FAKE_CT
            m.min = _scalar_or_tile(np.minimum)
            m.max = _scalar_or_tile(np.maximum)
        yield
    finally:
        for m, names in kept:
            for n, value in names.items():
                if value is None:
                    m.__dict__.pop(n, None)
                else:
                    setattr(m, n, value)


def run_grid(kernel: Any, grid: tuple[int, int, int], args: tuple[Any, ...]) -> None:
    """Every CTA of ``grid`` in launch order (axis 0 fastest), one after another."""
    function = kernel.__wrapped__
    with np.errstate(invalid="ignore"):
        for z, y, x in itertools.product(range(grid[2]), range(grid[1]), range(grid[0])):
            _BID[0] = (x, y, z)
            function(*args)


def launch_torch_on_cpu(grid: tuple[int, int, int], kernel: Any, args: Any, like: Any) -> None:
    """``kernels.cutile.serving_launch.launch`` for CPU torch tensors: each tensor argument seen
    as a NumPy view of its memory (strides and all), the grid run by :func:`run_grid`; the
    device modules must be :func:`emulated`."""
    import torch

    views = tuple(as_array(a.numpy()) if isinstance(a, torch.Tensor) else a for a in args)
    run_grid(kernel, grid, views)
