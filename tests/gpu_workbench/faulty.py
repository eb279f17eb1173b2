"""A deliberately faulting kernel: a store through a wild pointer (illegal memory access)."""

from __future__ import annotations


def illegal_access() -> None:
    import cupy

    kernel = cupy.RawKernel(
        r"""
        extern "C" __global__ void wild_store(float* p) {
            // Far outside any allocation: the device reports an illegal address.
            p[threadIdx.x + (1ull << 40)] = 1.0f;
        }
        """,
        "wild_store",
    )
    target = cupy.zeros(32, dtype=cupy.float32)
    kernel((1,), (32,), (target,))
    cupy.cuda.Device().synchronize()
