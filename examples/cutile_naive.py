"""A plugin backend: the plainest cuTile attention there is, to copy and change.

One CTA per (query tile, batch·head) walks every key tile with an online softmax: no causal
skipping, no pipelining, no tuner. Its one knob is the tile size (query rows = keys per step).
It takes torch CUDA tensors (``inputs="cuda"``) and is timed on the GPU as our kernel is; its
compiled resources (registers, spill, shared memory, CTAs per SM) come from ``compile_cubin``,
offline. Without a GPU it lists as unavailable with the reason::

    fmha-workbench --plugin examples/cutile_naive.py knobs
    fmha-workbench --plugin examples/cutile_naive.py sweep --backend cutile-naive \\
        --head-dim 64 --seq-lens 1024,2048 --plugin-knob tile=64
    fmha-workbench --plugin examples/cutile_naive.py resources --backend cutile-naive \\
        --head-dim 64 --plugin-knob tile=64 --arch sm_90

Edit the kernel, save, and the window (File › Add kernel…) reruns the last sweep beside the
previous one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from workbench.backends import Availability, Capabilities, Knob, declare

try:
    import cuda.tile as ct
except ImportError as missing:  # listed as unavailable, naming the module, never a traceback
    ct = None
    CUTILE_MISSING = f"cuda.tile is not installed ({missing}): pip install cuda-tile"

MASKS = {"none": 0, "causal": 1, "window": 2}

if ct is not None:
    ZERO = ct.PaddingMode.ZERO

    @ct.kernel
    def naive_attention(
        Q, K, V, Out,  # (B, H, N, D); K and V (B, H_kv, k_len, D)
        scale_log2: float, input_pos: int, window: int, group: int,
        TILE: ct.Constant[int], D: ct.Constant[int], MASK: ct.Constant[int],
    ):  # fmt: skip
        qb, bh = ct.bid(0), ct.bid(1)
        b, h = bh // Q.shape[1], bh % Q.shape[1]
        hk, k_len = h // group, K.shape[2]
        q = ct.load(Q, index=(b, h, qb, 0), shape=(1, 1, TILE, D), padding_mode=ZERO)
        q = q.reshape((TILE, D))
        rows = (qb * TILE + input_pos + ct.arange(TILE, dtype=ct.int32))[:, None]
        m_i = ct.full((TILE, 1), -math.inf, dtype=ct.float32)
        l_i = ct.zeros((TILE, 1), dtype=ct.float32)
        acc = ct.zeros((TILE, D), dtype=ct.float32)
        for j in range(ct.cdiv(k_len, TILE)):
            k_t = ct.load(
                K, index=(b, hk, 0, j), shape=(1, 1, D, TILE), order=(0, 1, 3, 2),
                padding_mode=ZERO,
            ).reshape((D, TILE))  # fmt: skip
            s = ct.mma(q, k_t, ct.zeros((TILE, TILE), dtype=ct.float32)) * scale_log2
            cols = j * TILE + ct.arange(TILE, dtype=ct.int32)[None, :]
            seen = cols < k_len
            if MASK >= 1:
                seen = seen & (cols <= rows)
            if MASK == 2:
                seen = seen & (cols > rows - window)
            s = ct.where(seen, s, -math.inf)
            m_new = max(m_i, ct.max(s, axis=1, keepdims=True))
            m_sub = ct.where(m_new == -math.inf, 0.0, m_new)  # a row that saw nothing yet
            p = ct.exp2(s - m_sub)
            alpha = ct.exp2(m_i - m_sub)
            l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
            v = ct.load(V, index=(b, hk, j, 0), shape=(1, 1, TILE, D), padding_mode=ZERO)
            acc = ct.mma(p.astype(V.dtype), v.reshape((TILE, D)), acc * alpha)
            m_i = m_new
        out = acc / ct.where(l_i == 0.0, 1.0, l_i)
        ct.store(Out, index=(b, h, qb, 0), tile=out.astype(Out.dtype).reshape((1, 1, TILE, D)))


def available() -> Availability:
    if ct is None:
        return Availability(False, CUTILE_MISSING)
    from workbench.backends.gpu import cupy_device

    status = cupy_device()  # "CuPy is not installed…", "no NVIDIA GPU found"…
    if not status.available:
        return status
    return Availability(True, f"naive cuTile attention on {status.reason}")


def kernel_arguments(
    problem: Any, config: Any, knobs: Any
) -> tuple[tuple[int, int, int], tuple[float, int, int, int], tuple[int, int, int]]:
    """The grid, the runtime scalars and the constants of one launch (the offline compile
    uses them too)."""
    tile = int(knobs["tile"])
    grid = (math.ceil(problem.q_len / tile), problem.batch * problem.heads, 1)
    scale_log2 = 1.0 / math.sqrt(problem.head_dim) * math.log2(math.e)
    window = config.window or 0
    group = problem.heads // problem.kv_heads
    scalars = (scale_log2, problem.input_pos, window, group)
    return grid, scalars, (tile, problem.head_dim, MASKS[config.mask])


def prepare(q: Any, k: Any, v: Any, *, problem: Any, config: Any, knobs: Any) -> Callable:
    """q, k, v: torch CUDA tensors (``inputs="cuda"``). The launch queues the kernel on torch's
    current stream and returns without waiting: the workbench times it with CUDA events or
    graph replay, as it times our kernel and the torch peers."""
    import torch

    out = torch.empty_like(q)
    grid, scalars, constants = kernel_arguments(problem, config, knobs)
    arguments = (q, k, v, out, *scalars, *constants)

    def launch() -> Any:
        ct.launch(torch.cuda.current_stream(), grid, naive_attention, arguments)
        return out

    return launch


def compile_cubin(problem: Any, config: Any, knobs: Any, arch: str) -> bytes:
    """The kernel compiled offline for ``arch`` (no GPU), for `resources --backend
    cutile-naive`: the arrays as the launch's shapes and dtype, then its scalars and constants."""
    from workbench.backends.plugin_compile import Array, Scalar, cutile_cubin

    rows = Array("float16", (problem.batch, problem.heads, problem.q_len, problem.head_dim))
    keys = Array("float16", (problem.batch, problem.kv_heads, problem.k_len, problem.head_dim))
    _, scalars, constants = kernel_arguments(problem, config, knobs)
    parameters = (rows, keys, keys, rows, *map(Scalar, scalars), *constants)
    return cutile_cubin(naive_attention, parameters, arch)


BACKENDS = (
    declare(
        "cutile-naive",
        "naive-tile cuTile attention (example plugin)",
        prepare=prepare,
        inputs="cuda",
        compile_cubin=compile_cubin,
        probe=available,
        capabilities=Capabilities(dtypes=("float16",), head_dims=(32, 64, 128)),
        knobs=(
            Knob(
                "tile",
                int,
                64,
                (32, 64, 128),
                "--plugin-knob tile",
                "Tile",
                "query rows per CTA and keys per step of its loop",
                tunable=True,
            ),
        ),
    ),
)
