"""FlashAttention-4 on a ragged batch: its varlen path (``flash_attn_varlen_func`` with
``cu_seqlens_q``/``cu_seqlens_k``) for a varlen prefill or a decode on a contiguous cache, and its
paged path (``page_table`` with ``seqused_k``, queries batched (B, q_len, H, D)) for a paged
cache, on the same serving-layout inputs every backend gets.

What of it runs on sm_90 (flash-attn-4 4.0.0b36, ``flash_attn/cute/interface.py``): both paths,
with pages of any size (loaded by TMA where a page is one key tile, by cp.async otherwise); no
split of the key range (``num_splits`` > 1 asserts "SplitKV not supported on SM 9.0"), so a
ragged decode runs one CTA per (sequence, KV head, q-block) however long its longest sequence.
Masks are FA4's bottom-right ones per sequence, the workbench's exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench.config import KernelConfig, Problem
from workbench.errors import BackendError

NOTES = (
    "a ragged batch: varlen (cu_seqlens) and paged (page_table, seqused_k) through "
    "flash_attn_varlen_func, one CTA per (sequence, KV head, q-block) there too (its SplitKV "
    "asserts on sm_90)"
)


def _import_varlen() -> Any:
    from flash_attn.cute import flash_attn_varlen_func

    return flash_attn_varlen_func


def prepare_fa4_ragged(
    problem: Problem, config: KernelConfig, inputs: tuple[Any, ...], mask: dict[str, Any]
) -> Callable[[], Any]:
    """The timed launch on ``inputs`` (``upload_serving``'s: host int tables, copied to the
    device here once); ``mask``: FA4's mask keywords. The first call runs here (FA4 compiles
    then), so a path FA4 does not take on this GPU is one line, not a traceback."""
    import torch

    varlen_func = _import_varlen()
    q, k, v, first, second = inputs
    device = q.device
    if problem.page_size is not None:
        keywords = {
            "page_table": torch.from_numpy(first).to(device),
            "seqused_k": torch.from_numpy(second).to(device),
            "max_seqlen_q": problem.q_len,
            "max_seqlen_k": max(problem.k_lens),
        }
    else:
        keywords = {
            "cu_seqlens_q": torch.from_numpy(first).to(device),
            "cu_seqlens_k": torch.from_numpy(second).to(device),
            "max_seqlen_q": max(problem.q_lens),
            "max_seqlen_k": max(problem.k_lens),
        }

    def launch() -> Any:
        with torch.no_grad():
            out, _lse = varlen_func(q, k, v, **keywords, **mask)
        return out

    try:
        launch()
        torch.cuda.synchronize()
    except Exception as exc:  # FA4 asserts what it does not take (a path, a size)
        text = str(exc).strip().splitlines()
        why = text[0] if text else type(exc).__name__
        kind = "paged" if problem.page_size is not None else "varlen"
        raise BackendError(f"fa4's {kind} path refused this batch: {why}") from None
    return launch
