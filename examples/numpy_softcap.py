"""A plugin backend: attention with a soft-capped score (Gemma's ``cap · tanh(s / cap)``), in
NumPy on the CPU, with two knobs.

Run it beside the reference::

    fmha-workbench --plugin examples/numpy_softcap.py backends
    fmha-workbench --plugin examples/numpy_softcap.py sweep --backend numpy-softcap \\
        --seq-lens 128,256 --plugin-knob softcap=30
    fmha-workbench --plugin examples/numpy_softcap.py blockmap --backend numpy-softcap \
        --q-len 1024 --mask causal

It reports the blocks it computes (``block_map``): under a causal or window mask it skips the
key blocks a chunk of query rows cannot see, and the stored block maps say so.

Copy it, change a line, and rerun: each run stores this file's path and SHA-256.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from workbench.backends import BlockReport, Capabilities, Knob, declare


def capped(scores: np.ndarray, knobs: Mapping[str, Any]) -> np.ndarray:
    """The soft cap on scaled scores (0: off). The workbench checks the output against float64
    attention over these capped scores."""
    cap = float(knobs["softcap"])
    return cap * np.tanh(scores / cap) if cap > 0 else scores


def key_blocks(start: int, stop: int, problem: Any, config: Any, block: int) -> tuple[int, int]:
    """The key blocks ``[lo, hi)`` of ``block`` keys that query rows ``[start, stop)`` see under
    the mask: the launch computes scores on these keys only, and ``block_map`` reports them."""
    n_blocks = -(-problem.k_len // block)
    if config.mask == "none":
        return 0, n_blocks
    hi = min(n_blocks, (stop - 1 + problem.input_pos) // block + 1)  # the last row's last key
    lo = 0
    if config.mask == "window":  # the first row's first key
        lo = max(0, start + problem.input_pos - config.window + 1) // block
    return min(lo, hi - 1), hi


def prepare(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, *, problem: Any, config: Any, knobs: Any
) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    """Setup outside the timed launches (K and V repeated over each GQA group), then a launch
    that returns the output and the log-sum-exp, ``chunk_rows`` query rows at a time, each
    against the key blocks (of ``chunk_rows`` keys) its rows see: under a causal or window mask
    the blocks wholly hidden are never computed."""
    group = q.shape[1] // k.shape[1]
    all_keys_t = np.repeat(k, group, axis=1).swapaxes(-1, -2)
    all_values = np.repeat(v, group, axis=1)
    chunk = int(knobs["chunk_rows"])
    scale = np.float32(1.0 / np.sqrt(q.shape[-1]))

    def launch() -> tuple[np.ndarray, np.ndarray]:
        out = np.empty_like(q)
        lse = np.empty(q.shape[:3], dtype=np.float32)
        for start in range(0, q.shape[2], chunk):
            stop = min(start + chunk, q.shape[2])
            rows = slice(start, stop)
            lo, hi = key_blocks(start, stop, problem, config, chunk)
            cols = slice(lo * chunk, min(hi * chunk, k.shape[2]))
            keys_t, values = all_keys_t[..., cols], all_values[:, :, cols]
            scores = capped((q[:, :, rows] @ keys_t) * scale, knobs)
            if config.mask != "none":
                pos = np.arange(start, stop)[:, None] + problem.input_pos
                key_pos = np.arange(cols.start, cols.stop)[None, :]
                seen = key_pos <= pos
                if config.mask == "window":
                    seen &= key_pos > pos - config.window
                scores = np.where(seen, scores, -np.inf)
            top = scores.max(axis=-1, keepdims=True)
            top = np.where(np.isneginf(top), 0.0, top)
            weights = np.exp(scores - top)
            total = weights.sum(axis=-1, keepdims=True)
            out[:, :, rows] = (weights @ values) / np.where(total > 0, total, 1.0)
            lse[:, :, rows] = (top + np.log(np.where(total > 0, total, 1.0)))[..., 0]
        return out, lse

    return launch


def block_map(problem: Any, config: Any, knobs: Mapping[str, Any]) -> BlockReport:
    """The blocks the launch computes, from the same ``key_blocks`` it runs: 1 where a chunk of
    ``chunk_rows`` query rows computed a block of ``chunk_rows`` keys, 0 where it skipped it."""
    chunk = int(knobs["chunk_rows"])
    computed = np.zeros((-(-problem.q_len // chunk), -(-problem.k_len // chunk)), dtype=np.int32)
    for q_block, start in enumerate(range(0, problem.q_len, chunk)):
        lo, hi = key_blocks(start, min(start + chunk, problem.q_len), problem, config, chunk)
        computed[q_block, lo:hi] = 1
    return BlockReport(rows=chunk, keys=chunk, computed=computed)


BACKENDS = (
    declare(
        "numpy-softcap",
        "soft-capped attention in NumPy (example plugin)",
        prepare=prepare,
        reference_scores=capped,
        block_map=block_map,
        capabilities=Capabilities(
            dtypes=("float16", "bfloat16"), masks=("none", "causal", "window")
        ),
        knobs=(
            Knob(
                "softcap",
                float,
                0.0,
                (0.0, 20.0, 30.0, 50.0),
                "--plugin-knob softcap",
                "Soft cap",
                "cap · tanh(score / cap) on the scaled scores; 0 is off",
            ),
            Knob(
                "chunk_rows",
                int,
                128,
                (32, 64, 128, 256),
                "--plugin-knob chunk_rows",
                "Chunk rows",
                "query rows (and keys) per block of scores held at once",
                tunable=True,  # speed, not the result: --autotune picks it per length
            ),
        ),
    ),
)
