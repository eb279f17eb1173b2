"""A plugin backend: attention with a soft-capped score (Gemma's ``cap · tanh(s / cap)``), in
NumPy on the CPU, with two knobs.

Run it beside the reference::

    fmha-workbench --plugin examples/numpy_softcap.py backends
    fmha-workbench --plugin examples/numpy_softcap.py sweep --backend numpy-softcap \\
        --seq-lens 128,256 --plugin-knob softcap=30

Copy it, change a line, and rerun: each run stores this file's path and SHA-256.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from workbench.backends import Capabilities, Knob, declare


def capped(scores: np.ndarray, knobs: Mapping[str, Any]) -> np.ndarray:
    """The soft cap on scaled scores (0: off). The workbench checks the output against float64
    attention over these capped scores."""
    cap = float(knobs["softcap"])
    return cap * np.tanh(scores / cap) if cap > 0 else scores


def prepare(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, *, problem: Any, config: Any, knobs: Any
) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    """Setup outside the timed launches (K and V repeated over each GQA group), then a launch
    that returns the output and the log-sum-exp, ``chunk_rows`` query rows at a time."""
    group = q.shape[1] // k.shape[1]
    keys_t = np.repeat(k, group, axis=1).swapaxes(-1, -2)
    values = np.repeat(v, group, axis=1)
    chunk = int(knobs["chunk_rows"])
    scale = np.float32(1.0 / np.sqrt(q.shape[-1]))
    key_pos = np.arange(k.shape[2])[None, :]

    def launch() -> tuple[np.ndarray, np.ndarray]:
        out = np.empty_like(q)
        lse = np.empty(q.shape[:3], dtype=np.float32)
        for start in range(0, q.shape[2], chunk):
            rows = slice(start, start + chunk)
            scores = capped((q[:, :, rows] @ keys_t) * scale, knobs)
            if config.mask != "none":
                pos = np.arange(start, min(start + chunk, q.shape[2]))[:, None] + problem.input_pos
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


BACKENDS = (
    declare(
        "numpy-softcap",
        "soft-capped attention in NumPy (example plugin)",
        prepare=prepare,
        reference_scores=capped,
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
                "query rows per block of scores held at once",
            ),
        ),
    ),
)
