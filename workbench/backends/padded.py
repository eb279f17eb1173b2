"""torch SDPA on a ragged batch the way a user without a varlen kernel runs it: every sequence
padded to the longest, one dense SDPA call on the padded batch.

The padded tensors are built once a point on the device, outside the timed region, from the same
serving-layout inputs every backend gets (packed tokens, or pages gathered through the block
table). Each sequence's tokens sit at the start of its row (right padding). A varlen causal
prefill needs no mask (a real query never sees a padded key under a top-left causal mask); every
other case masks the padded keys, causal aligned bottom-right per sequence, through a boolean
``attn_mask``, which SDPA's flash backend does not take. The timed call is the padded call alone;
its output is read back through the lengths, real rows only, in the serving layout. FLOPs are the
real lengths' (the padding's work is the waste the TFLOP/s shows).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from workbench.config import ConfigError, KernelConfig, Problem
from workbench.errors import BackendError

# cuDNN's masked path wants the key axis a multiple of this (padded keys are masked anyway).
KEY_ALIGN = 8


def padded_form(problem: Problem, config: KernelConfig, name: str, takes_mask: bool) -> str:
    """How SDPA runs the padded batch: "is_causal" (a varlen causal prefill, no mask) or
    "mask" (the padded keys masked); a ConfigError naming the field for what ``name`` cannot."""
    if problem.varlen and config.mask == "causal":
        return "is_causal"
    if not takes_mask:
        raise ConfigError(
            "backend", name, "pads a ragged batch to its longest sequence and must then mask "
            "the padded keys, but SDPA's flash backend takes no mask (only a varlen causal "
            "prefill runs there); use torch-cudnn",
        )  # fmt: skip
    return "mask"


def _visible(problem: Problem, config: KernelConfig, q_rows: int, k_cols: int) -> np.ndarray:
    """(B, 1, q_rows, k_cols) bool: query i of sequence b sees key j (bottom-right per
    sequence, padded keys never)."""
    lq = np.asarray(problem.q_lens)[:, None, None]
    lk = np.asarray(problem.k_lens)[:, None, None]
    i = np.arange(q_rows)[None, :, None]
    j = np.arange(k_cols)[None, None, :]
    seen = np.broadcast_to(j < lk, (problem.batch, q_rows, k_cols))
    if config.causal:
        seen = seen & (j <= i + lk - lq)
    if config.mask == "window":
        assert config.window is not None
        seen = seen & (j > i + lk - lq - config.window)
    return np.ascontiguousarray(seen[:, None])


def _align(n: int) -> int:
    return max(KEY_ALIGN, -(-n // KEY_ALIGN) * KEY_ALIGN)


def padded_inputs(problem: Problem, inputs: tuple[Any, ...]) -> tuple[Any, Any, Any]:
    """(B, H, Lq, D), (B, Hkv, Lk, D), (B, Hkv, Lk, Dv) zero-padded torch tensors on q's
    device from the serving-layout ``inputs`` (host int tables)."""
    import torch

    assert problem.kv_heads is not None
    q, k, v, *_ = inputs
    longest_k = _align(max(problem.k_lens))
    # A varlen prefill pads queries and keys alike (a top-left causal mask needs no bias).
    longest_q = longest_k if problem.varlen else problem.q_len
    shape_q = (problem.batch, problem.heads, longest_q, problem.head_dim)
    qp = torch.zeros(shape_q, dtype=q.dtype, device=q.device)
    kp = torch.zeros((problem.batch, problem.kv_heads, longest_k, problem.head_dim),
                     dtype=q.dtype, device=q.device)  # fmt: skip
    vp = torch.zeros((problem.batch, problem.kv_heads, longest_k, problem.value_dim),
                     dtype=q.dtype, device=q.device)  # fmt: skip
    if problem.page_size is not None:
        _, _, _, table, lens = inputs
        qp[:, :, : problem.q_len] = q.transpose(1, 2)
        page = problem.page_size
        for b, length in enumerate(int(n) for n in lens):
            pages = torch.as_tensor(table[b, : -(-length // page)], dtype=torch.long,
                                    device=q.device)  # fmt: skip
            kp[b, :, :length] = k[pages].flatten(0, 1)[:length].transpose(0, 1)
            vp[b, :, :length] = v[pages].flatten(0, 1)[:length].transpose(0, 1)
        return qp, kp, vp
    cu_q, cu_k = inputs[3], inputs[4]
    for b in range(problem.batch):
        q0, q1, k0, k1 = (int(x) for x in (cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]))
        qp[b, :, : q1 - q0] = q[q0:q1].transpose(0, 1)
        kp[b, :, : k1 - k0] = k[k0:k1].transpose(0, 1)
        vp[b, :, : k1 - k0] = v[k0:k1].transpose(0, 1)
    return qp, kp, vp


class PaddedRows:
    """A padded output (B, H, Lq, Dv) read as the serving layout's rows: ``[b]`` the (q_len,
    H, Dv) of sequence b (paged), ``[q0:q1]`` a packed sequence's (varlen); host float32. A row
    that sees no key reads as zeros, as the serving kernels write it (SDPA gives NaN there)."""

    is_host_view = True

    def __init__(self, out: Any, problem: Problem, sees_a_key: np.ndarray) -> None:
        self._out = out
        self._problem = problem
        self._sees = sees_a_key  # (B, Lq) bool
        self._starts = np.concatenate([[0], np.cumsum(problem.q_lens)]).astype(np.int64)
        self.shape = (sum(problem.q_lens), problem.heads, problem.value_dim)

    def _rows(self, b: int, count: int) -> np.ndarray:
        rows = self._out[b, :, :count].transpose(0, 1).float().cpu().numpy()
        rows[~self._sees[b, :count]] = 0.0
        return rows

    def __getitem__(self, index: Any) -> np.ndarray:
        problem = self._problem
        if isinstance(index, slice):  # a packed sequence's rows
            start, stop = int(index.start), int(index.stop)
            if stop == start:
                return np.zeros((0, problem.heads, problem.value_dim), np.float32)
            # The last sequence starting there (an empty one shares its start with the next).
            b = int(np.searchsorted(self._starts, start, side="right")) - 1
            return self._rows(b, stop - start)
        return self._rows(int(index), problem.q_len)


def prepare_padded(
    problem: Problem, config: KernelConfig, inputs: tuple[Any, ...], sdpa_backend: str, form: str
) -> Callable[[], Any]:
    """The timed launch: SDPA on the padded batch under ``sdpa_backend`` (an SDPBackend
    member's name), returning :class:`PaddedRows` of its output; called once here, so that a
    call SDPA cannot run is a one-line BackendError before anything is timed."""
    import torch
    import torch.nn.functional as functional
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qp, kp, vp = padded_inputs(problem, inputs)
    seen = _visible(problem, config, qp.shape[2], kp.shape[2])
    mask = None if form == "is_causal" else torch.from_numpy(seen).to(qp.device)
    backend = getattr(SDPBackend, sdpa_backend)
    enable_gqa = problem.group_size > 1
    sees_a_key = np.asarray(seen[:, 0].any(axis=-1), dtype=bool)

    def launch() -> Any:
        with sdpa_kernel([backend]):
            out = functional.scaled_dot_product_attention(
                qp, kp, vp, attn_mask=mask, is_causal=form == "is_causal", enable_gqa=enable_gqa
            )
        return PaddedRows(out, problem, sees_a_key)

    try:  # SDPA raises where the forced backend takes no kernel for this call: one line
        launch()
        torch.cuda.synchronize()
    except RuntimeError as exc:
        text = str(exc).strip().splitlines()
        why = text[0] if text else type(exc).__name__
        raise BackendError(f"SDPA's {sdpa_backend} refused the padded batch: {why}") from None
    return launch
