"""Input checks of the serving kernels (varlen prefill, paged KV), run before anything launches.

No cuda.tile (nor torch) import: the checks read shapes, dtype names and host copies of the
index arrays, so a CPU-only machine refuses bad input the way a GPU host does. Every refusal is
one ValueError line that names the argument, as the caller spelled it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernels import knobs as registry

HEAD_DIMS: tuple[int, ...] = tuple(registry.HEAD_DIM.values_for(registry.CUTILE))
DTYPE_NAMES: tuple[str, ...] = tuple(registry.DTYPE.values_for(registry.CUTILE))


def dtype_of(arr: Any) -> str:
    """The dtype of a torch tensor or NumPy array as a name ("float16", "int32", …)."""
    return str(arr.dtype).removeprefix("torch.")


def shape_of(arr: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in arr.shape)


def host_ints(arr: Any, name: str, ndim: int) -> np.ndarray:
    """A host copy of an int32 index array of rank ``ndim`` (torch or NumPy); ValueError
    naming ``name`` for another rank or dtype."""
    if not hasattr(arr, "shape") or not hasattr(arr, "dtype"):
        raise ValueError(f"{name} must be an int32 tensor, got {type(arr).__name__}")
    if len(arr.shape) != ndim:
        raise ValueError(f"{name} must have rank {ndim}, got shape {shape_of(arr)}")
    if dtype_of(arr) != "int32":
        raise ValueError(f"{name} must be int32, got {dtype_of(arr)}")
    if type(arr).__module__.startswith("torch"):
        arr = arr.detach().cpu().numpy()
    return np.asarray(arr, dtype=np.int32)


def check_tensor(arr: Any, name: str, layout: str) -> tuple[int, ...]:
    """The shape of ``arr``, which must be a float16/bfloat16 tensor of the rank ``layout``
    names (e.g. "(total_q, heads, head_dim)")."""
    if not hasattr(arr, "shape") or not hasattr(arr, "dtype"):
        raise ValueError(f"{name} must be a tensor {layout}, got {type(arr).__name__}")
    rank = layout.count(",") + 1
    if len(arr.shape) != rank:
        raise ValueError(f"{name} must be {layout}, got shape {shape_of(arr)}")
    if dtype_of(arr) not in DTYPE_NAMES:
        raise ValueError(f"{name} must be float16 or bfloat16, got {dtype_of(arr)}")
    return shape_of(arr)


def check_same_dtype(**arrays: Any) -> str:
    names = {n: dtype_of(a) for n, a in arrays.items()}
    if len(set(names.values())) != 1:
        listed = ", ".join(f"{n} {d}" for n, d in names.items())
        raise ValueError(f"{', '.join(names)} must share one dtype, got {listed}")
    return next(iter(names.values()))


def check_heads(heads: int, kv_heads: int, q_name: str, k_name: str) -> int:
    """The GQA group (query heads per KV head)."""
    if kv_heads < 1 or heads < 1 or heads % kv_heads:
        raise ValueError(
            f"{q_name} has {heads} heads, not a multiple of {k_name}'s {kv_heads} heads"
        )
    return heads // kv_heads


def check_head_dims(head_dim: int, head_dim_v: int, q_name: str, v_name: str) -> None:
    for dim, name in ((head_dim, q_name), (head_dim_v, v_name)):
        if dim not in HEAD_DIMS:
            raise ValueError(
                f"{name}'s head dim {dim} is not one the kernel takes "
                f"({HEAD_DIMS[0]}-{HEAD_DIMS[-1]}, a multiple of 8)"
            )


def check_window(window: int | None) -> None:
    if window is not None and (isinstance(window, bool) or not isinstance(window, int)):
        raise ValueError(f"window must be a whole number of keys or None, got {window!r}")
    if window is not None and window < 1:
        raise ValueError(f"window must be at least 1 key, got {window}")


def check_cu_seqlens(cu: np.ndarray, name: str, total: int, total_name: str) -> None:
    """``cu`` starts at 0, never decreases, and ends at ``total`` (the tokens of the tensor
    named ``total_name``)."""
    if cu.size < 1:
        raise ValueError(f"{name} must hold batch + 1 offsets, got none")
    if cu[0] != 0:
        raise ValueError(f"{name} must start at 0, got {name}[0] = {cu[0]}")
    drops = np.flatnonzero(np.diff(cu) < 0)
    if drops.size:
        i = int(drops[0])
        raise ValueError(
            f"{name} must be non-decreasing: {name}[{i + 1}] = {cu[i + 1]} < {name}[{i}] = {cu[i]}"
        )
    if cu[-1] != total:
        raise ValueError(
            f"{name} ends at {cu[-1]} but {total_name} has {total} tokens ({name}[-1] must match)"
        )
