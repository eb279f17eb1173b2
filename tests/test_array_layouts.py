"""Which memory layouts the kernel reads in place: the checks behind ``attention(layout=…)``.

NumPy arrays stand in for CuPy's here (same ``strides``/``itemsize`` interface), so the rule a
GPU call applies runs on any machine."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cuda.tile")

from kernels.cutile.arrays import layout_problem


def bnhd(batch: int, n: int, heads: int, head_dim: int, rng: np.random.Generator) -> np.ndarray:
    return rng.standard_normal((batch, n, heads, head_dim)).astype(np.float16)


def test_a_model_projection_viewed_as_bhnd_is_read_in_place(rng: np.random.Generator) -> None:
    x = bnhd(2, 96, 8, 128, rng)
    assert layout_problem(x, "cupy") is None
    assert layout_problem(x.swapaxes(1, 2), "cupy") is None
    # A slice of heads out of a fused QKV projection: strides of the whole row, still aligned.
    qkv = bnhd(2, 96, 24, 64, rng)
    assert layout_problem(qkv[:, :, 8:16].swapaxes(1, 2), "cupy") is None


def test_layouts_the_kernel_cannot_read_are_named(rng: np.random.Generator) -> None:
    x = bnhd(1, 64, 4, 64, rng)
    assert "last (head-dim) stride is" in layout_problem(x.swapaxes(1, 3), "cupy")
    padded = bnhd(1, 64, 4, 68, rng)[..., :64]  # 136-byte rows
    assert "not all multiples of 16 bytes" in layout_problem(padded, "cupy")
    shared = np.broadcast_to(x[:, :, :1], x.shape)  # every head the same memory
    assert "share elements" in layout_problem(shared, "cupy")
    # A dimension of size one may have any stride: nothing is indexed along it.
    assert layout_problem(x[:, :1], "cupy") is None
