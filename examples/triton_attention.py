"""A plugin backend: attention in Triton, in the shape of Triton's fused-attention tutorial
(written here): one program per (query block, batch·head), the causal case in two stages
(the key blocks left of the diagonal without a mask, then the diagonal block with one), an
online softmax in base 2. Its knobs are the tutorial's BLOCK_M and BLOCK_N, and the launch's
num_warps and num_stages. It takes torch CUDA tensors (``inputs="cuda"``) and is timed on the
GPU as our kernel and the torch peers are; without Triton (or a GPU) it lists as unavailable
and says why::

    fmha-workbench --plugin examples/triton_attention.py knobs
    fmha-workbench --plugin examples/triton_attention.py sweep --backend triton-attention \\
        --head-dim 64 --seq-lens 1024,2048 --mask causal --plugin-knob BLOCK_M=128
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench.backends import Availability, Capabilities, Knob, Rule, declare

try:
    import triton
    import triton.language as tl
except ImportError as missing:  # listed as unavailable, naming the module, never a traceback
    triton = None
    TRITON_MISSING = f"triton is not installed ({missing}): pip install triton, on an NVIDIA GPU"

if triton is not None:

    @triton.jit
    def _attn_fwd_inner(
        acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, start_m, qk_scale,
        offs_m, offs_n, offs_d, N_CTX,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGE: tl.constexpr,
    ):  # fmt: skip
        if STAGE == 1:  # causal, left of the diagonal: every key visible
            lo, hi = 0, start_m * BLOCK_M
        elif STAGE == 2:  # causal, the diagonal block: masked
            lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
            lo = tl.multiple_of(lo, BLOCK_M)
        else:  # no mask: every key block
            lo, hi = 0, N_CTX
        for start_n in range(lo, hi, BLOCK_N):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            cols = start_n + offs_n
            k = tl.load(
                k_base + cols[None, :] * stride_kn + offs_d[:, None],
                mask=cols[None, :] < N_CTX, other=0.0,
            )  # fmt: skip
            qk = tl.dot(q, k) * qk_scale
            keep = cols[None, :] < N_CTX
            if STAGE == 2:
                keep = keep & (offs_m[:, None] >= cols[None, :])
            qk = tl.where(keep, qk, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            p = tl.math.exp2(qk - m_ij[:, None])
            alpha = tl.math.exp2(m_i - m_ij)
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(
                v_base + cols[:, None] * stride_vn + offs_d[None, :],
                mask=cols[:, None] < N_CTX, other=0.0,
            )  # fmt: skip
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
            m_i = m_ij
        return acc, l_i, m_i

    @triton.jit
    def _attn_fwd(
        Q, K, V, Out, sm_scale,
        stride_qz, stride_qh, stride_qm, stride_kz, stride_kh, stride_kn,
        stride_vz, stride_vh, stride_vn, stride_oz, stride_oh, stride_om,
        H, GROUP, N_CTX,
        HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        STAGE: tl.constexpr,
    ):  # fmt: skip
        start_m = tl.program_id(0)
        off_hz = tl.program_id(1)
        off_z, off_h = off_hz // H, off_hz % H
        off_kh = off_h // GROUP
        offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM)
        k_base = K + off_z * stride_kz + off_kh * stride_kh
        v_base = V + off_z * stride_vz + off_kh * stride_vh
        q_rows = Q + off_z * stride_qz + off_h * stride_qh + offs_m[:, None] * stride_qm
        q = tl.load(q_rows + offs_d[None, :], mask=offs_m[:, None] < N_CTX, other=0.0)
        m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        qk_scale = sm_scale * 1.44269504  # log2(e): exp2 instead of exp
        # STAGE 3 (causal): left of the diagonal, then the diagonal; STAGE 1: every block.
        if STAGE & 1:
            acc, l_i, m_i = _attn_fwd_inner(
                acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, start_m, qk_scale,
                offs_m, offs_n, offs_d, N_CTX, BLOCK_M, BLOCK_N, 4 - STAGE,
            )  # fmt: skip
        if STAGE & 2:
            acc, l_i, m_i = _attn_fwd_inner(
                acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, start_m, qk_scale,
                offs_m, offs_n, offs_d, N_CTX, BLOCK_M, BLOCK_N, 2,
            )  # fmt: skip
        out = acc / l_i[:, None]
        o_rows = Out + off_z * stride_oz + off_h * stride_oh + offs_m[:, None] * stride_om
        tl.store(
            o_rows + offs_d[None, :], out.to(Out.dtype.element_ty), mask=offs_m[:, None] < N_CTX
        )


def available() -> Availability:
    if triton is None:
        return Availability(False, TRITON_MISSING)
    from workbench.backends.gpu import torch_device

    status = torch_device()
    if not status.available:
        return status
    return Availability(True, f"Triton {triton.__version__} on {status.reason}")


def prepare(q: Any, k: Any, v: Any, *, problem: Any, config: Any, knobs: Any) -> Callable:
    """q, k, v: torch CUDA tensors of the problem's dtype (``inputs="cuda"``). The launch queues
    the kernel on torch's current stream and returns without waiting (the workbench times it
    with CUDA events or graph replay)."""
    import torch

    out = torch.empty_like(q)
    block_m, block_n = int(knobs["BLOCK_M"]), int(knobs["BLOCK_N"])
    grid = (triton.cdiv(problem.q_len, block_m), problem.batch * problem.heads, 1)
    args = (
        q, k, v, out, problem.head_dim**-0.5,
        *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *out.stride()[:3],
        problem.heads, problem.heads // problem.kv_heads, problem.q_len,
    )  # fmt: skip
    stage = 3 if config.mask == "causal" else 1

    def launch() -> Any:
        _attn_fwd[grid](
            *args, HEAD_DIM=problem.head_dim, BLOCK_M=block_m, BLOCK_N=block_n, STAGE=stage,
            num_warps=int(knobs["num_warps"]), num_stages=int(knobs["num_stages"]),
        )  # fmt: skip
        return out

    return launch


def _block_n_above_block_m(values: Any, mask: str) -> bool:
    return mask == "causal" and values["BLOCK_N"] > values["BLOCK_M"]


def _knob(
    name: str, default: int, values: tuple[int, ...], help_text: str, tunable: bool = True
) -> Knob:
    return Knob(
        name, int, default, values, f"--plugin-knob {name}", name, help_text, tunable=tunable
    )


BACKENDS = (
    declare(
        "triton-attention",
        "fused attention in Triton, after its tutorial (example plugin)",
        prepare=prepare,
        inputs="cuda",
        probe=available,
        capabilities=Capabilities(
            masks=("none", "causal"), head_dims=(16, 32, 64, 128), decode=False
        ),
        knobs=(
            _knob("BLOCK_M", 64, (32, 64, 128), "query rows per program"),
            _knob("BLOCK_N", 64, (16, 32, 64, 128), "keys per step of a program's loop"),
            _knob("num_warps", 4, (2, 4, 8), "warps per program"),
            _knob(
                "num_stages", 2, (1, 2, 3, 4), "software-pipelining stages of the key loop", False
            ),
        ),
        rules=(
            Rule(
                "BLOCK_N",
                ("BLOCK_M", "mask"),
                _block_n_above_block_m,
                lambda v, m: f"the causal diagonal step needs BLOCK_N <= BLOCK_M ({v['BLOCK_M']})",
                "BLOCK_N above BLOCK_M under the causal mask",
            ),
        ),
    ),
)
