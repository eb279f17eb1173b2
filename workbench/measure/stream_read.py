"""One kernel that reads a device buffer once, at the memory's own rate.

The read bandwidth that decode points are set against has to be the most a plain read gets,
with the least fixed cost a launch can have: a library's ``sum`` is a reduction of two launches
(the partial sums, then a pass over them), which adds microseconds that say nothing about the
memory. This kernel is one launch: every thread keeps four independent 16-byte loads in flight
over a grid-stride loop (enough bytes in flight to cover HBM's latency at full rate), the grid
fills every SM once, and each CTA writes one 32-bit XOR of what it read, so no load is dead code
and a test can check that every word was read exactly once.
"""

from __future__ import annotations

from typing import Any

THREADS = 512
CTAS_PER_SM = 4  # 4 × 512 threads: a full SM on Hopper and Blackwell
WORD_BYTES = 16  # one uint4 load

SOURCE = r"""
extern "C" __global__ void stream_read(const uint4* __restrict__ src,
                                       const unsigned long long words,
                                       unsigned int* __restrict__ out) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int acc = 0u;
    for (; i + 3 * stride < words; i += 4 * stride) {
        const uint4 a = src[i];
        const uint4 b = src[i + stride];
        const uint4 c = src[i + 2 * stride];
        const uint4 d = src[i + 3 * stride];
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;
        acc ^= c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < words; i += stride) {
        const uint4 a = src[i];
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    for (int lane = 16; lane > 0; lane >>= 1) {
        acc ^= __shfl_xor_sync(0xffffffffu, acc, lane);
    }
    __shared__ unsigned int per_warp[32];
    if ((threadIdx.x & 31u) == 0u) {
        per_warp[threadIdx.x >> 5] = acc;
    }
    __syncthreads();
    if (threadIdx.x == 0u) {
        unsigned int block = 0u;
        for (unsigned int w = 0u; w < blockDim.x / 32u; ++w) {
            block ^= per_warp[w];
        }
        out[blockIdx.x] = block;
    }
}
"""


def grid_ctas(words: int, sm_count: int) -> int:
    """CTAs for a read of ``words`` 16-byte words: every SM full once, never more CTAs than
    there are words to give each thread one."""
    if words <= 0 or sm_count <= 0:
        raise ValueError("a streaming read needs at least one word and one SM")
    return max(1, min(sm_count * CTAS_PER_SM, -(-words // THREADS)))


def describe() -> str:
    """How the kernel reads, for a measurement's method line."""
    return (
        f"a one-launch read (16-byte loads, 4 in flight a thread, {CTAS_PER_SM} CTAs of "
        f"{THREADS} threads an SM)"
    )


class StreamRead:
    """The kernel compiled once (CuPy, NVRTC) and bound to one buffer: calling it reads the
    buffer once; :meth:`checksum` is the XOR of every 32-bit word it read."""

    def __init__(self, buffer: Any) -> None:
        import cupy

        if buffer.nbytes % WORD_BYTES or not buffer.flags.c_contiguous:
            raise ValueError("the streaming read takes a contiguous buffer of whole 16-byte words")
        self._buffer = buffer
        self._words = buffer.nbytes // WORD_BYTES
        sm_count = cupy.cuda.Device().attributes["MultiProcessorCount"]
        self._ctas = grid_ctas(self._words, sm_count)
        self._out = cupy.zeros(self._ctas, dtype=cupy.uint32)
        self._kernel = cupy.RawKernel(SOURCE, "stream_read")

    def __call__(self) -> None:
        import numpy as np

        self._kernel((self._ctas,), (THREADS,), (self._buffer, np.uint64(self._words), self._out))

    def checksum(self) -> int:
        import numpy as np

        return int(np.bitwise_xor.reduce(self._out.get()))
