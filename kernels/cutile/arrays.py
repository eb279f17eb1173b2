"""torch or CuPy, whichever the caller's arrays are: one small shim for both.

The kernel takes either library's device arrays; the workbench's GPU backends hold their inputs
in one or the other. Neither library (nor cuda.tile) is imported at module level: each function
imports what the array in hand needs, so the workbench imports this module on any machine.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from kernels.cutile.diagnostics import friendly_errors
from kernels.measure import side_stream, synchronize

__all__ = [
    "HostView",
    "as_torch",
    "contiguous",
    "copy_into",
    "cupy_dtype",
    "default_stream",
    "device_id",
    "dtype_name",
    "empty",
    "empty_like",
    "fill",
    "from_numpy",
    "is_contiguous",
    "layout_problem",
    "lib_of",
    "output_like",
    "pick_lib",
    "random_qkv",
    "reshaped",
    "side_stream",
    "sm_count",
    "stream_context",
    "strided_empty_like",
    "strides_of",
    "synchronize",
    "to_kernel_dtype",
    "to_numpy",
    "zeros",
]


def lib_of(arr: Any) -> str:
    """Which library ``arr`` belongs to, "torch" or "cupy"; ValueError for anything else."""
    mod = type(arr).__module__
    if mod.startswith("torch"):
        return "torch"
    if mod.startswith("cupy"):
        return "cupy"
    raise ValueError(
        f"q, k and v must be torch tensors or CuPy arrays on the GPU, got {type(arr).__name__}"
    )


def dtype_name(arr: Any) -> str:
    """The dtype of either library's array as a name: "float16", "bfloat16", …"""
    return str(arr.dtype).removeprefix("torch.")


def is_contiguous(arr: Any, lib: str) -> bool:
    return bool(arr.is_contiguous() if lib == "torch" else arr.flags.c_contiguous)


def strides_of(arr: Any, lib: str) -> tuple[int, ...]:
    """The strides of ``arr`` in elements (CuPy counts bytes)."""
    if lib == "torch":
        return tuple(int(s) for s in arr.stride())
    return tuple(int(s) // arr.itemsize for s in arr.strides)


def layout_problem(arr: Any, lib: str) -> str | None:
    """Why the kernel cannot read ``arr`` in place, or None.

    The kernel's tiles are TMA copies: the head-dim elements must be adjacent (stride 1), every
    other stride a whole number of 16 bytes, and no two indices may share an element. A
    (B, N, H, D) projection viewed as (B, H, N, D) meets all three, so it runs without a copy.
    """
    strides = strides_of(arr, lib)
    shape = tuple(int(d) for d in arr.shape)
    if shape[-1] > 1 and strides[-1] != 1:
        return f"its last (head-dim) stride is {strides[-1]}, not 1"
    per16 = 16 // arr.itemsize if lib != "torch" else 16 // arr.element_size()
    if any(s % per16 for s, d in zip(strides[:-1], shape[:-1], strict=True) if d > 1):
        return f"its strides {strides} are not all multiples of 16 bytes"
    spans = sorted((s, d) for s, d in zip(strides, shape, strict=True) if d > 1)
    reach = 1
    for stride, size in spans:
        if stride < reach:
            return f"its strides {strides} make indices share elements"
        reach = stride * size
    return None


def contiguous(arr: Any) -> Any:
    """``arr`` in C order: itself when it is, else a copy (either library)."""
    if lib_of(arr) == "torch":
        return arr.contiguous()
    import cupy

    return cupy.ascontiguousarray(arr)


def strided_empty_like(arr: Any) -> Any:
    """An uninitialised array of ``arr``'s shape, dtype, device and memory layout (a
    (B, N, H, D) buffer under a (B, H, N, D) view for such a view)."""
    with friendly_errors():
        if lib_of(arr) == "torch":
            import torch

            return torch.empty_like(arr)  # preserve_format keeps a dense view's strides
        import cupy

        with cupy.cuda.Device(arr.device.id):
            return cupy.empty_like(arr)  # order="K" keeps the strides


def output_like(q: Any, value_dim: int) -> Any:
    """An uninitialised output for ``q`` (B, H, N, D) that is ``value_dim`` wide: q's dtype,
    device and memory layout (a (B, N, H, Dv) buffer under the view where q is one such)."""
    if int(q.shape[-1]) == value_dim:
        return strided_empty_like(q)
    lib = lib_of(q)
    batch, heads, rows = (int(x) for x in q.shape[:3])
    strides = strides_of(q, lib)
    if strides[1] < strides[2]:  # heads inside rows: a (B, N, H, D) buffer seen as (B, H, N, D)
        return empty(lib, (batch, rows, heads, value_dim), dtype_name(q), q).swapaxes(1, 2)
    return empty(lib, (batch, heads, rows, value_dim), dtype_name(q), q)


def copy_into(dst: Any, src: Any, stream: Any) -> None:
    """``dst[...] = src`` on ``stream`` (the library's current stream for None)."""
    with stream_context(lib_of(dst), stream):
        if lib_of(dst) == "torch":
            dst.copy_(src)
        else:
            import cupy

            cupy.copyto(dst, src)


def stream_context(lib: str, stream: Any) -> Any:
    """A context in which ``lib``'s work goes to ``stream`` (no change for None)."""
    import contextlib

    if stream is None:
        return contextlib.nullcontext()
    if lib == "torch":
        import torch

        return torch.cuda.stream(stream)
    return stream


def device_id(arr: Any, lib: str) -> int | None:
    """The CUDA device index of ``arr``, None for a torch tensor on the host."""
    if lib == "torch":
        return arr.device.index if arr.device.type == "cuda" else None
    return int(arr.device.id)


@functools.lru_cache(maxsize=16)
def sm_count(device: int, lib: str) -> int:
    """Streaming multiprocessors of ``device`` (the persistent grid's size per occupancy)."""
    if lib == "torch":
        import torch

        return int(torch.cuda.get_device_properties(device).multi_processor_count)
    import cupy

    return int(cupy.cuda.Device(device).attributes["MultiProcessorCount"])


def cupy_dtype(name: str) -> Any:
    """The dtype CuPy takes for ``name``: CuPy has no bfloat16 of its own, ml_dtypes' serves."""
    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(name)


def empty(lib: str, shape: tuple[int, ...], dtype: str, like: Any) -> Any:
    """An uninitialised ``lib`` array on ``like``'s device."""
    with friendly_errors():
        if lib == "torch":
            import torch

            return torch.empty(shape, dtype=getattr(torch, dtype), device=like.device)
        import cupy

        with cupy.cuda.Device(like.device.id):
            return cupy.empty(shape, dtype=cupy_dtype(dtype))


def empty_like(arr: Any) -> Any:
    """An uninitialised array of ``arr``'s library, shape, dtype and device."""
    return empty(lib_of(arr), tuple(arr.shape), dtype_name(arr), arr)


def fill(arr: Any, value: float) -> Any:
    """Set every element of ``arr`` to ``value`` in place (either library); returns ``arr``."""
    arr.fill_(value) if lib_of(arr) == "torch" else arr.fill(value)
    return arr


def zeros(lib: str, shape: tuple[int, ...], dtype: str, like: Any) -> Any:
    return fill(empty(lib, shape, dtype, like), 0)


def default_stream(lib: str) -> Any:
    """The library's current stream (what a launch with ``stream=None`` goes to)."""
    if lib == "torch":
        import torch

        return torch.cuda.current_stream()
    import cupy

    return cupy.cuda.get_current_stream()


def from_numpy(arr: np.ndarray, lib: str, like: Any) -> Any:
    """A device copy of a host array, on ``like``'s device."""
    with friendly_errors():
        if lib == "torch":
            import torch

            return torch.tensor(arr, device=like.device)
        import cupy

        with cupy.cuda.Device(like.device.id):
            return cupy.asarray(arr)


def reshaped(arr: Any, shape: tuple[int, ...]) -> Any:
    """A view of an array of either library in ``shape`` (same size; no copy); None where its
    strides allow no such view (a (B, N, H, D) buffer's query rows of several heads)."""
    if lib_of(arr) == "torch":
        try:
            return arr.view(shape)
        except RuntimeError:
            return None
    view = arr.view()
    try:
        view.shape = shape  # CuPy refuses, rather than copies, where no view exists
    except AttributeError:
        return None
    return view


def to_numpy(arr: Any, lib: str) -> np.ndarray:
    """A host copy of a device array (same dtype)."""
    if lib == "torch":
        return arr.detach().cpu().numpy()
    import cupy

    return cupy.asnumpy(arr)


def as_torch(x: Any, dtype: str) -> Any:
    """A float32 CuPy array as a torch CUDA tensor of ``dtype`` (through DLPack, no host copy)."""
    import torch

    return torch.from_dlpack(x).to(getattr(torch, dtype))


def to_kernel_dtype(x: Any, dtype: str) -> Any:
    """A float32 CuPy array converted to float16 (CuPy) or bfloat16.

    CuPy has no bfloat16 of its own: torch's is used when torch is there, else ml_dtypes'."""
    if dtype == "float16":
        import cupy

        return x.astype(cupy.float16)
    try:
        return as_torch(x, dtype)
    except ImportError:
        return x.astype(cupy_dtype(dtype))


class HostView:
    """Indexing copies just the indexed part of a CuPy array or torch tensor to the host, as
    float32 (NumPy index arrays are moved to the device first)."""

    def __init__(self, tensor: Any) -> None:
        self._tensor = tensor
        self.shape = tuple(tensor.shape)

    def __getitem__(self, index: Any) -> Any:
        t = self._tensor
        parts = index if isinstance(index, tuple) else (index,)
        if lib_of(t) == "torch":
            import torch

            index = tuple(
                torch.as_tensor(i, device=t.device) if isinstance(i, np.ndarray) else i
                for i in parts
            )
            return t[index].float().cpu().numpy()
        import cupy

        index = tuple(cupy.asarray(i) if isinstance(i, np.ndarray) else i for i in parts)
        return cupy.asnumpy(t[index].astype(cupy.float32))


def pick_lib() -> str:
    """torch when it sees a GPU, else CuPy."""
    try:
        import torch

        if torch.cuda.is_available():
            return "torch"
    except ImportError:
        pass
    return "cupy"


def random_qkv(
    batch: int,
    heads: int,
    kv_heads: int,
    q_len: int,
    k_len: int,
    head_dim: int,
    dtype: str = "float16",
    *,
    lib: str = "torch",
    seed: int | None = None,
) -> tuple[Any, Any, Any]:
    """Fresh standard-normal q, k, v on the GPU (never zeros: they hide unwritten outputs)."""
    if lib == "torch":
        import torch

        gen = torch.Generator(device="cuda")
        if seed is not None:
            gen.manual_seed(seed)
        else:
            gen.seed()
        tdt = getattr(torch, dtype)

        def mk(h: int, n: int) -> Any:
            return torch.randn((batch, h, n, head_dim), generator=gen, device="cuda", dtype=tdt)

        return mk(heads, q_len), mk(kv_heads, k_len), mk(kv_heads, k_len)
    import cupy

    rs = cupy.random.RandomState(seed)

    def mk_cp(h: int, n: int) -> Any:
        return rs.standard_normal((batch, h, n, head_dim), dtype=np.float32).astype(
            cupy_dtype(dtype)
        )

    return mk_cp(heads, q_len), mk_cp(kv_heads, k_len), mk_cp(kv_heads, k_len)
